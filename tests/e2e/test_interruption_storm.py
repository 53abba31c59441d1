"""An AZ-wide spot reclaim (20 nodes in make test, 100 on demand) through the stack as deployed
(``bench/_storm.py``), EC2's state-change notifications for the reclaimed instances included.

The provisioner launches the spot nodes for a Deployment under a PodDisruptionBudget; every node
gets its spot interruption warning within about a second, through EventBridge to the interruption
queue (its event source mapping scaling out in batches of 10) and, directly, to ``spot_events``;
the spot market takes each instance back two minutes later. Asserted: every warning acted on once
(never twice, across both paths and every container), every node cordoned, and once it is over the
fault matrix's settled invariants (no leaked instance, never two instances for one NodeClaim, no
NodeClaim or Node without an instance) with every pod of the Deployment running again on
replacement capacity. The timings are the benchmark's (``nodewright bench interruption --nodes
500``), not asserted here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from bench._storm import APP, Storm
from sandbox.scenarios.reliability import Tracker, check, observe, running_pods, wait_until

# Setup, the two-minute notice (real time: the spot market takes the instances then) and settling:
# about 220 s for 20 nodes at load 6 to 14, over 300 s at load 39; its own waits are bounded.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

# NODEWRIGHT_E2E_STORM=N for another size: 20 in make test (two SQS batches, the direct path beside
# them), 100 on demand (681 to 756 s on this 2-core machine, and not passing yet: see the storm in
# docs/performance.md), 500 in the benchmark.
NODES = int(os.environ.get("NODEWRIGHT_E2E_STORM", "20"))
PODS = 2


def test_an_az_wide_spot_reclaim_acts_once_per_warning_and_settles_with_every_invariant() -> None:
    settled: dict[str, Any] = {}

    def settle(sb: Any, admin: Any, claims: set[str]) -> None:
        ec2 = sb.aws_client("ec2")
        tracker = Tracker()
        ongoing: list[str] = []
        began = time.monotonic()
        when: dict[str, float] = {}  # how long the settling took, told on failure and with -s

        def over() -> bool:
            seen = observe(sb, admin, ec2)
            ongoing.extend(str(v) for v in check(seen, tracker))
            left = [c for c in seen.nodeclaims if c["metadata"]["name"] in claims]
            running = len(running_pods(seen, {"app": APP}))
            if not left:
                when.setdefault("reclaimedNodeClaimsGone", round(time.monotonic() - began, 1))
            if running == NODES * PODS:
                when.setdefault("podsRunningAgain", round(time.monotonic() - began, 1))
            when["left"], when["running"] = len(left), running
            return not left and running == NODES * PODS

        try:
            settled["over"] = wait_until(over, timeout=900, every=5)
            seen = observe(sb, admin, ec2)
            settled["final"] = [str(v) for v in check(seen, tracker, settled=True)]
            settled["ongoing"] = ongoing
            settled["running"] = len(running_pods(seen, {"app": APP}))
        finally:
            settled["settleSeconds"] = when
            print(f"storm of {NODES}: settled after the notice {when}")
            ec2.close()

    started = time.monotonic()
    logs = os.environ.get("NODEWRIGHT_E2E_STORM_LOGS")  # a directory for the functions' logs
    figures = Storm(NODES, PODS, keep_logs=Path(logs) if logs else None).run(settle=settle)
    print(
        f"storm of {NODES}: setup {figures['setupSeconds']} s, whole run {time.monotonic() - started:.0f} s,"
        f" load {os.getloadavg()}"
    )

    assert figures["nodes"] == NODES
    assert figures["eventsActed"] == NODES, figures["dispositionsByKind"]
    assert figures["handledTwice"] == 0, "one warning, two deliveries, acted on once"
    assert figures["cordoned"] == NODES
    assert settled["over"], ("the reclaimed NodeClaims finalized and every pod running again", settled)
    assert settled["final"] == []
    assert settled["ongoing"] == [], "no invariant broken while the storm went on"
