"""Fault matrix, the function itself: killed at every named step boundary of provisioning,
termination, interruption and disruption (``nodewright.checkpoints``), and two provisioner
invocations overlapping; each scenario converges (see ``faultmatrix``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from faultmatrix import APP, instances, kill_each, requirements, scale, settle, sqs, start
from nodewright.checkpoints import POINTS
from nodewright.cluster.resources import NODECLAIMS, NODEPOOLS, NODES

from sandbox.runtime.events import scheduled_event
from sandbox.runtime.lambdas import (
    PROVISIONER_TIMEOUT_SECONDS,
    LambdaContext,
    load_function,
    provisioner_invocation,
)
from sandbox.scenarios.reliability import Rig, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ROLL_LABEL = "fault-matrix/roll"


def test_killed_at_every_provisioning_step_converges(rig: Rig) -> None:
    points = [p for p in POINTS if p.startswith(("provisioning.", "lifecycle.node"))]
    start(rig, 2)
    kill_each(rig, points, lambda point: rig.converge(lambda: rig.crashes.killed[point] > 0, rounds=6))
    settle(rig, 2)
    # A NodeClaim deleted by hand: the provisioner's termination controller (the disruption
    # function's would finish it otherwise) is killed after terminating the instance.
    victim = rig.admin.list(NODECLAIMS)[0]["metadata"]["name"]
    rig.admin.delete(NODECLAIMS, victim)
    kill_each(
        rig,
        ["termination.instance-terminated"],
        lambda point: rig.converge(lambda: rig.crashes.killed[point] > 0, rounds=10, disruption=False),
    )
    settle(rig, 2)
    assert rig.admin.find(NODECLAIMS, victim) is None


def test_killed_at_every_disruption_and_termination_step_converges(rig: Rig) -> None:
    start(rig, 3, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"})
    settle(rig, 3)
    scale(rig, 0)
    points = ["disruption.candidate-chosen"] + [p for p in POINTS if p.startswith("termination.")]
    kill_each(rig, points, lambda point: rig.converge(lambda: rig.crashes.killed[point] > 0, rounds=8))
    assert rig.converge(lambda: not rig.admin.list(NODECLAIMS) and not instances(rig), rounds=12)
    assert not rig.admin.list(NODES)
    assert not rig.check(settled=True)
    assert not rig.violations, [str(v) for v in rig.violations]


def test_killed_at_every_step_of_a_replace_command_converges(rig: Rig) -> None:
    """Drift by a NodePool edit replaces the node (one pod, nowhere else to go); the disruption
    function is killed after tainting, after launching the replacement and after recording it; each
    time the NodePool is edited again, and in the end every node carries the last template."""
    start(rig, 1)
    settle(rig, 1)
    points = [
        p for p in POINTS if p.startswith("disruption.replacements") or p.endswith("candidates-tainted")
    ]

    def edit_and_reach(point: str) -> None:
        roll = {"metadata": {"labels": {ROLL_LABEL: point.rsplit(".", 1)[-1]}}}
        rig.admin.patch(NODEPOOLS, "default", {"spec": {"template": roll}})
        rig.converge(lambda: rig.crashes.killed[point] > 0, rounds=8)

    kill_each(rig, points, edit_and_reach)
    last = points[-1].rsplit(".", 1)[-1]

    def rolled() -> bool:
        nodes = rig.admin.list(NODES)
        return bool(nodes) and all(n["metadata"]["labels"].get(ROLL_LABEL) == last for n in nodes)

    assert rig.converge(lambda: rolled() and rig.pods(APP) == (1, 0), rounds=20), [
        n["metadata"]["labels"].get(ROLL_LABEL) for n in rig.admin.list(NODES)
    ]
    settle(rig, 1)


def test_killed_at_every_interruption_step_converges(rig: Rig) -> None:
    start(rig, 3, requirements=requirements(("spot",)))
    settle(rig, 3)
    for point in ("interruption.offering-marked", "interruption.replacement-launched"):
        node = next(n for n in rig.admin.list(NODES) if not n["spec"].get("unschedulable"))
        event = rig.interrupt(node["metadata"]["name"])
        rig.crashes.arm(point)
        direct = rig.invoke("spot_events", event, seconds=30)
        assert direct.killed_at == point
        # The queue's copy of the same event: in progress until the killed invocation's time is
        # up, then acted on (the drain resumed), as SQS redelivers it.
        delivered = False
        for _ in range(6):
            answer = rig.invoke("interruption", sqs([event]), seconds=30)
            assert answer.ok, answer.error
            if not answer.result["batchItemFailures"]:
                delivered = True
                break
            rig.round(advance=40)
        assert delivered, "the queue's copy was acted on once the killed invocation's time was up"
    settle(rig, 3, rounds=14)


def test_two_overlapping_provisioner_invocations_launch_once(rig: Rig) -> None:
    start(rig, 4)
    assert wait_until(lambda: rig.pods(APP)[1] == 4, 20), "the deployment's four pods are pending"
    twins = [load_function("provisioner"), load_function("provisioner")]  # two containers
    results: list[Any] = []
    barrier = threading.Barrier(2)

    def invoke(module: Any) -> None:
        barrier.wait()
        context = LambdaContext(PROVISIONER_TIMEOUT_SECONDS, "nodewright-provisioner")
        results.append(module.handler(scheduled_event(rule="provisioner"), context))

    # The loop's budget is process-wide: set once here, never from the twins' threads (two threads
    # saving and restoring it would leave it shortened for the rest of the worker's tests).
    with provisioner_invocation(3.0):
        threads = [threading.Thread(target=invoke, args=(m,)) for m in twins]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    created = [c for r in results for c in r.get("nodeClaimsCreated", [])]
    # Live NodeClaims: one whose launch failed (a slow CreateFleet on a loaded machine) is being
    # deleted and does not hold capacity.
    live = [c for c in rig.admin.list(NODECLAIMS) if not c["metadata"].get("deletionTimestamp")]
    assert len(created) == len(set(created))
    assert len(live) <= 4, ("the lease kept the second plan from doubling the first", results)
    # Each small type holds one pod: at most four instances serve the live NodeClaims, one each (an
    # instance of a NodeClaim being deleted is terminated by its finalizer; settle checks no leak).
    seen = rig.observe()
    serving = [c["metadata"]["name"] for c in live for _ in seen.instances_of(c["metadata"]["name"])]
    assert len(serving) == len(set(serving)), ("never two instances for one NodeClaim", serving)
    settle(rig, 4)  # and the invariants: no leak, never two instances for one NodeClaim
