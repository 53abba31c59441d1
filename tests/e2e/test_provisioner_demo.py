"""``nodewright demo`` tells the whole story in the sandbox (what ``make demo`` runs)."""

from __future__ import annotations

import os
import re
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

    # Part two: the spot interruption, narrated from the cluster's real state as it changed.
    story = out[out.index("Part two: EC2 reclaims a spot node") :]
    assert "EC2 Spot Instance Interruption Warning received for i-" in story
    assert "/spot marked unavailable" in story
    assert "tainted karpenter.sh/disrupted:NoSchedule" in story
    assert " cordoned" in story
    # The seeds leave room for one inflate pod on the web-app node, so the scheduling core may place
    # the evicted pod there instead of launching (the launch path is pinned by
    # tests/e2e/test_interruption_sandbox.py); either way the story must say which, consistently.
    if "launched before any eviction: NodeClaim default-" in story:
        launched = r"replacement NodeClaim default-\S+ launched: \S+ (spot|on-demand) in us-west-2"
        assert re.search(launched, story)
        assert re.search(r"pod inflate-\S+ Running on \S+ \(replacement\)", story)
    else:
        assert "before any eviction: nothing: the scheduling core placed the node's 1 pod(s)" in story
        assert "replacement NodeClaim" not in story
        assert re.search(r"pod inflate-\S+ Running on \S+ \(existing capacity\)", story)
    assert "ready: 10/10" in story
    assert re.search(r"node \S+ gone", story)
    assert re.search(r"NodeClaim \S+ gone", story)
    evicted = re.search(r"pods evicted: (\d+)/(\d+)", story)
    assert evicted
    assert evicted.group(1) == evicted.group(2) != "0"
    drained = re.search(r"node and NodeClaim gone:\s+([\d.]+)s of the 120s notice", story)
    assert drained
    assert float(drained.group(1)) < 120
    assert "never fewer than 9/10 inflate pods ready" in story
    assert "batchItemFailures []" in story
    assert "redelivered to spot_events: duplicate;" in story
    assert "NodeClaims unchanged, no CreateFleet" in story
    assert "consolidation is NOT implemented yet" in story
    epilogue = story[story.index("scaled deployment inflate down") :]
    assert " Running on " not in epilogue, "the epilogue retells what the interruption timeline told"
