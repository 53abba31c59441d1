"""``nodewright demo`` tells the whole story in the sandbox (what ``make demo`` runs)."""

from __future__ import annotations

import os
import re
from unittest import mock

import pytest
from nodewright.cli import main
from nodewright.observability import logger

# The whole story, with the product's real waits (consolidateAfter 30 s and 10 s, the 20 s nomination
# wait, the 15 s validation, drift looked at once a minute): about 4 minutes on a quiet machine,
# longer on a shared one.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]


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
    elif "before any eviction: nothing yet: the replacement pass stopped early" in story:
        # A loaded machine: the pass ran out of the invocation's time, and the story says so.
        assert "replacement NodeClaim" not in story
    elif "were evicted before the replacement pass read it" in story:
        # A loaded machine: the termination controller drained the node first; the story must show
        # the eviction before the handler returned, and no replacement launched for it.
        assert story.index(" evicted (") < story.index("spot_events returned"), story[:3000]
        assert "replacement NodeClaim" not in story
    else:
        # The node's pods, all placed on existing capacity: how many depends on the layout part one
        # produced, so it is read from the story, not assumed to be 1 (a loaded run failed the "1"
        # without saying what the story said: the story is now the failure's message).
        victim = re.search(r"runs (\d+) inflate pod\(s\); NodeClaim", story)
        assert victim, story[:3000]
        nothing = r"before any eviction: nothing: the scheduling core placed the node's (\d+) pod\(s\)"
        placed = re.search(nothing, story)
        assert placed, story[:3000]
        assert int(placed.group(1)) >= int(victim.group(1)) >= 1, story[:3000]
        assert "replacement NodeClaim" not in story
        assert re.search(r"pod inflate-\S+ Running on \S+ \(existing capacity\)", story)
    assert "ready: 10/10" in story
    assert re.search(r"node \S+ gone", story)
    # EC2 takes the spot instance itself: its NodeClaim stays until it has, then goes (issue 25).
    assert re.search(r"NodeClaim \S+ stays, deleting, until EC2 reclaims its instance", story)
    assert re.search(r"NodeClaim \S+: kept, deleting, until EC2 reclaims the instance", story)
    assert re.search(r"NodeClaim \S+ gone: EC2 reclaimed its instance, and the next pass released it", out)
    # ... reclaimed by EC2 when the notice was up, not terminated by the product's fallback five
    # minutes past the deadline (the sandbox's EC2 once never reclaimed, and the demo waited for it).
    assert "EC2 has not reclaimed the instance past its deadline" not in out
    evicted = re.search(r"pods evicted: (\d+)/(\d+)", story)
    assert evicted
    assert evicted.group(1) == evicted.group(2) != "0"
    drained = re.search(r"node drained and gone:\s+([\d.]+)s of the 120s notice", story)
    assert drained
    assert float(drained.group(1)) < 120
    pdb = re.search(r"never fewer than (\d+)/(\d+) inflate pods ready", story)
    assert pdb, "the timeline reports the PodDisruptionBudget"
    fewest, replicas = int(pdb.group(1)), int(pdb.group(2))
    assert replicas == 10, story
    # maxUnavailable 1 allows 9; the timeline samples every 0.1 s, so a pod evicted and running
    # again elsewhere between two samples is never seen missing (10/10 is then what it observed).
    assert 9 <= fewest <= replicas, story
    assert "batchItemFailures []" in story
    assert "redelivered to spot_events: duplicate;" in story
    assert "NodeClaims unchanged, no CreateFleet" in story
    # Part three: scale down, and the real disruption handler removes exactly the empty nodes.
    part_three = out[
        out.index("Part three: deployment inflate scaled down to 3 replicas") : out.index("Part four:")
    ]
    assert " Running on " not in part_three, "part three retells what the interruption timeline told"
    empty = set(re.findall(r"node (\S+) \([^)]*\): 0 pod\(s\) — empty", part_three))
    assert empty, "scaling 10 pods down to 3 leaves nodes empty"
    removed = set(re.findall(r"removed node (\S+) \(Empty, NodePool [\w-]+", part_three))
    assert removed == empty, part_three
    done = re.search(r"(\d+) empty node\(s\) removed one at a time, \$([\d.]+)/h saved", part_three)
    invocations = re.search(r"disruption: (\d+) invocation\(s\)", part_three)
    assert invocations
    # Another invocation is only needed when a pass kept an empty node (say, not initialized yet).
    assert (int(invocations.group(1)) > 1) == ("the next scheduled invocation looks again" in part_three)
    assert done
    assert int(done.group(1)) == len(empty)
    assert float(done.group(2)) > 0
    assert re.search(r"\d+ drift/consolidation command\(s\) started meanwhile", part_three)
    assert "Drifted" not in part_three, (
        "nothing drifts before part five (issue 12: the seeds' pool drifted at birth)"
    )

    # Part four: the real disruption handler replaces a mostly idle node by a strictly cheaper one.
    part_four = out[out.index("Part four: consolidation") : out.index("Part five:")]
    assert re.search(r"disruption command: Underutilized, replacing 1 node \(\S+\) with \S+", part_four), (
        part_four
    )
    assert re.search(r"command started \(burst-\S+\): replacements burst-\S+", part_four)
    assert re.search(r"command draining \(burst-\S+\): replacements burst-\S+ initialized", part_four)
    costs = re.search(r"consolidated: NodePool burst \$([\d.]+)/h \(.*\) → \$([\d.]+)/h", part_four)
    assert costs, part_four
    assert float(costs.group(2)) < float(costs.group(1))

    # Part five: an AMI selection change drifts the node, which is replaced with the new AMI.
    part_five = out[out.index("Part five: drift") :]
    assert re.search(r"disruption: NodeClaim burst-\S+ drifted \(AMIDrift\)", part_five), part_five
    assert "disruption command: Drifted, replacing 1 node" in part_five
    rolled = re.search(r"drift rolled: \S+ \((ami-\w+)\) replaced by \S+ \((ami-\w+)\)", part_five)
    assert rolled, part_five
    assert rolled.group(1) != rolled.group(2)
