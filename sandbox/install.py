"""What an operator applies once per cluster before the functions run, as the sandbox needs it.

``deploy/rbac.yaml`` creates the namespace of the writers' Lease; a real cluster gets it from
``kubectl apply -f deploy/rbac.yaml``, the emulator from :func:`rbac_namespaces` at start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sandbox.shared_data import REPO_ROOT

RBAC_MANIFEST = REPO_ROOT / "deploy" / "rbac.yaml"


def rbac_namespaces(path: Path = RBAC_MANIFEST) -> list[dict[str, Any]]:
    """The Namespace documents of ``deploy/rbac.yaml`` (the writers' Lease lives in one)."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Namespace"]
