"""``nodewright demo`` tells the whole story in the sandbox (what ``make demo`` runs)."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from nodewright.cli import main
from nodewright.observability import logger

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("provisioner-demo")]


def test_the_demo_launches_for_inflate_and_lands_each_seed_pod_on_its_pool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    level = logger().level
    with mock.patch.dict(os.environ):  # the demo points the environment at its sandbox
        assert main(["demo", "--boot-delay", "0.3"]) == 0
    logger().setLevel(level)

    out = capsys.readouterr().out
    assert "applied NodePool web-app (converted to karpenter.sh/v1)" in out
    assert "not applied: NodePool mixed-workload is invalid" in out
    assert "plan → NodeClaim default-" in out
    assert "CreateFleet →" in out
    summary = out[out.index("\nPods\n") :]
    rows = {
        line.split()[0]: line.split()
        for line in summary.splitlines()
        if line.startswith("  ") and "Running" in line
    }
    assert rows["web-pod"][-1] == "web-app"
    assert rows["gpu-pod"][-1] == "gpu-workload"
    assert rows["batch-pod"][-1] == "batch-jobs"
    assert sum(1 for name, row in rows.items() if name.startswith("inflate-") and row[-1] == "default") == 10
    assert "g4dn.xlarge" in summary
    assert "Cluster cost: $" in summary
    assert "Pending → CreateFleet: p50" in summary
    assert "nan" not in summary
