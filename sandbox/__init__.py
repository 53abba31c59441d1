"""The development-side sandbox: a Kubernetes API emulator, cluster simulators and a moto server.

``from sandbox import Sandbox`` is the entry point (see sandbox.cluster); importing this package
stays cheap: the orchestrator and its dependencies load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

__all__ = ["Sandbox"]


def __getattr__(name: str) -> Any:
    if name == "Sandbox":
        from sandbox.cluster import Sandbox

        return Sandbox
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
