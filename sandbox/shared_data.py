"""Where the reference data lives (real prices, real EventBridge payloads).

It sits beside the project in ``../shared/data`` and is never copied into it.
Tests and benchmarks that need it skip with a message when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path | None:
    """``$NODEWRIGHT_SHARED_DATA`` if set, else ``<repo>/../shared/data``; None when absent."""
    override = os.environ.get("NODEWRIGHT_SHARED_DATA")
    candidate = Path(override) if override else REPO_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


def ondemand_prices_file() -> Path | None:
    base = shared_data_dir()
    path = base / "ec2-ondemand-prices-us-east-1.json" if base else None
    return path if path and path.is_file() else None


def event_payloads_dir() -> Path | None:
    base = shared_data_dir()
    path = base / "events" if base else None
    return path if path and path.is_dir() else None
