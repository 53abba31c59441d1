"""The fault matrix's rig: one sandbox per module (``sandbox.scenarios.reliability.Rig``), reset per
scenario."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from sandbox.scenarios.reliability import Rig


@pytest.fixture(scope="module")
def module_rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    log = io.StringIO()
    with Rig(f"fault-{request.module.__name__.rsplit('_', 1)[-1]}", log=log) as rig:
        for name in ("provisioner", "disruption"):  # the containers' cold starts, before any story
            rig.invoke(name, seconds=30)
        yield rig


@pytest.fixture
def rig(module_rig: Rig) -> Iterator[Rig]:
    """The module's rig, emptied: no faults, no workload, no NodeClaims, nodes or instances."""
    module_rig.reset()
    module_rig.log.seek(0)
    module_rig.log.truncate()
    module_rig.functions.outcomes.clear()
    yield module_rig
    module_rig.crashes.disarm()
    module_rig.sandbox.faults.clear()
    module_rig.sandbox.api_faults.clear()
