"""The layer's named step boundaries (``nodewright.checkpoints``): inert in production, all listed.

A checkpoint is where the fault matrix and ``nodewright chaos`` kill a function; in production no
hook is registered, so the call does nothing, and no production module registers one.
"""

from __future__ import annotations

import re

from nodewright import checkpoints

from sandbox.shared_data import REPO_ROOT

LAYER = REPO_ROOT / "layers" / "nodewright" / "nodewright"
FUNCTIONS = REPO_ROOT / "functions"


def _sources() -> dict[str, str]:
    files = [*LAYER.rglob("*.py"), *FUNCTIONS.rglob("*.py")]
    return {str(f.relative_to(REPO_ROOT)): f.read_text() for f in files}


def test_every_checkpoint_the_flows_reach_is_listed_and_every_listed_one_is_reached() -> None:
    called = {
        name
        for text in _sources().values()
        for name in re.findall(r"\bcheckpoint\(\s*\"([^\"]+)\"", text)
        if not text.startswith('"""Named step boundaries')
    }
    assert called == set(checkpoints.POINTS)


def test_no_production_module_registers_a_hook() -> None:
    registering = [
        path for path, text in _sources().items() if "set_hook(" in text and "checkpoints.py" not in path
    ]
    assert registering == []


def test_without_a_hook_a_checkpoint_does_nothing_and_with_one_it_is_called() -> None:
    assert checkpoints._Hook.hook is None
    checkpoints.checkpoint("provisioning.nodeclaim-created")  # no hook: returns
    seen: list[str] = []
    checkpoints.set_hook(seen.append)
    try:
        checkpoints.checkpoint("termination.drained")
    finally:
        checkpoints.set_hook(None)
    assert seen == ["termination.drained"]
