"""The sandbox's workload manifests read its seeded AWS account, which exists only once it started."""

from __future__ import annotations

import pytest

from sandbox.cluster import Sandbox, SandboxError
from sandbox.scenarios.workloads import nodeclass


def test_nodeclass_of_an_unstarted_sandbox_says_to_start_it() -> None:
    with pytest.raises(SandboxError, match=r"not started; call start\(\)"):
        nodeclass(Sandbox("typed"))
