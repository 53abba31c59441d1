"""Fault matrix, nodes and messages: clock skew between the functions and the cluster, an instance
terminated out of band, a node that never registers, duplicate and late interruption messages, a
drain blocked by PDBs; each scenario converges (see ``faultmatrix``)."""

from __future__ import annotations

import pytest
from faultmatrix import APP, failed, instances, requirements, running, scale, settle, sqs, start
from nodewright.cluster.resources import NODECLAIMS, NODES, PDBS

from sandbox.runtime.events import spot_warning
from sandbox.scenarios.reliability import Rig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize("skew_minutes", [-20, 20])
def test_cluster_clock_skewed_from_the_functions_converges(rig: Rig, skew_minutes: int) -> None:
    from sandbox.apiserver.admission import set_clock_skew

    set_clock_skew(skew_minutes * 60)
    try:
        start(rig, 3, disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"})
        settle(rig, 3)
        scale(rig, 1)
        assert rig.converge(lambda: len(instances(rig)) == 1, rounds=12), len(instances(rig))
        settle(rig, 1)
    finally:
        set_clock_skew(0)


def test_instance_terminated_out_of_band_node_goes_and_pods_move(rig: Rig) -> None:
    start(rig, 3)
    settle(rig, 3)
    victim = instances(rig)[0]["InstanceId"]
    claim = next(c for c in rig.admin.list(NODECLAIMS) if c["status"].get("instanceID") == victim)
    rig.ec2.terminate_instances(InstanceIds=[victim])
    assert rig.converge(lambda: rig.admin.find(NODECLAIMS, claim["metadata"]["name"]) is None, rounds=12)
    settle(rig, 3)
    assert victim not in {i["InstanceId"] for i in instances(rig)}


def test_node_that_never_registers_times_out_and_pods_get_another(rig: Rig) -> None:
    rig.sandbox.kubelet.registry.fail_next_registrations = 1
    start(rig, 2)
    rig.converge(lambda: len(rig.sandbox.kubelet.registry.never_register) == 1, rounds=4)
    silent = set(rig.sandbox.kubelet.registry.never_register)
    assert len(silent) == 1
    # The registration timeout (15 minutes) passes in one jump of simulated time: the NodeClaim is
    # given up, its instance terminated, and the pod gets another node.
    rig.clock.advance(15 * 60)
    assert rig.converge(lambda: running(rig, 2), rounds=10)
    settle(rig, 2)
    assert silent.isdisjoint({i["InstanceId"] for i in instances(rig)})


def test_the_state_change_of_an_instance_gone_before_it_registered_frees_its_pods_at_once(rig: Rig) -> None:
    """Its node never joined and its instance is terminated out of band: EventBridge's state change
    ends the NodeClaim when the queue delivers it, not the garbage collection's next minute."""
    rig.sandbox.kubelet.registry.fail_next_registrations = 1
    start(rig, 1)
    assert rig.converge(lambda: len(rig.sandbox.kubelet.registry.never_register) == 1, rounds=4)
    (silent,) = rig.sandbox.kubelet.registry.never_register
    claim = next(c for c in rig.admin.list(NODECLAIMS) if c["status"].get("instanceID") == silent)
    assert running(rig, 0)
    rig.instance_state_changes()  # what went before (none): only the termination below is news
    rig.ec2.terminate_instances(InstanceIds=[silent])
    changes = rig.instance_state_changes()
    assert [c["detail"]["instance-id"] for c in changes] == [silent]
    answer = rig.invoke("interruption", sqs(changes), seconds=30)
    assert answer.ok, answer.error
    assert answer.result["batchItemFailures"] == []
    assert rig.admin.find(NODECLAIMS, claim["metadata"]["name"]) is None, "ended by the message itself"
    assert rig.converge(lambda: running(rig, 1), rounds=3), rig.pods()
    settle(rig, 1)
    assert not failed(rig)


def test_duplicate_and_late_interruption_messages_act_once(rig: Rig) -> None:
    start(rig, 3, requirements=requirements(("spot",)))
    settle(rig, 3)
    node = next(n for n in rig.admin.list(NODES) if not n["spec"].get("unschedulable"))
    event = rig.interrupt(node["metadata"]["name"])
    instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
    before = {c["metadata"]["name"] for c in rig.admin.list(NODECLAIMS)}
    # The direct EventBridge path and the queue both carry it; the queue delivers it twice in a batch.
    direct = rig.invoke("spot_events", event, seconds=30)
    assert direct.ok, direct.error
    assert direct.result["disposition"] == "acted"
    queue = rig.invoke("interruption", sqs([event, event]), seconds=30)
    assert queue.ok, queue.error
    assert queue.result["batchItemFailures"] == []
    new = {c["metadata"]["name"] for c in rig.admin.list(NODECLAIMS)} - before
    # At most one replacement (none when the displaced pod fits elsewhere), not one per copy.
    assert len(new) <= 1, f"one replacement, not one per copy of the message: {sorted(new)}"
    settle(rig, 3, rounds=14)
    # Late: the same warning again after the instance is gone, and a warning for an instance that
    # never was ours; both acknowledged, nothing launched for them.
    settled = {c["metadata"]["name"] for c in rig.admin.list(NODECLAIMS)}
    late = rig.invoke("interruption", sqs([event, spot_warning("i-0123456789abcdef0")]), seconds=30)
    assert late.ok, late.error
    assert late.result["batchItemFailures"] == []
    assert instance_id not in {i["InstanceId"] for i in instances(rig)}
    assert {c["metadata"]["name"] for c in rig.admin.list(NODECLAIMS)} == settled, "nothing for late ones"
    assert not failed(rig), failed(rig)


BLOCKING_PDBS = {
    "maxUnavailable-0": [("inflate", {"maxUnavailable": 0})],
    # the Eviction API answers 500 for a pod two PDBs cover, however much each allows
    "two-pdbs": [("inflate-a", {"maxUnavailable": 1}), ("inflate-b", {"maxUnavailable": 1})],
}


@pytest.mark.parametrize("blocker", sorted(BLOCKING_PDBS))
def test_a_drain_blocked_by_pdbs_launches_nothing_for_its_pods_and_ends_once_they_allow_it(
    rig: Rig, blocker: str
) -> None:
    """``kubectl delete nodeclaim`` on a node whose pod its PDBs never let go: the drain waits, and
    no capacity is launched for the pod (before issue 24's fix, a node every minute, removed empty
    by emptiness the minute after). Once the PDBs allow it, the drain ends and the pod moves."""
    rig.watch_churn()
    # A budget that lets emptiness remove any empty node at once: the old loop's second half.
    start(rig, 2, disruption={"budgets": [{"nodes": "100%"}]})
    settle(rig, 2)
    for name, spec in BLOCKING_PDBS[blocker]:
        body = {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {**spec, "selector": {"matchLabels": APP}},
        }
        rig.admin.create(PDBS, body, namespace="default")
    claim = sorted(c["metadata"]["name"] for c in rig.admin.list(NODECLAIMS))[0]
    ids = {i["InstanceId"] for i in instances(rig)}
    rig.admin.delete(NODECLAIMS, claim)

    seen: set[str] = set()
    for _ in range(10):  # over three minutes of the deployed system
        rig.round(advance=20)
        rig.check()
        seen |= {i["InstanceId"] for i in instances(rig)}
    assert not rig.violations, [str(v) for v in rig.violations]  # launched-and-terminated-twice among them
    assert seen == ids, "nothing launched for the held pod"
    held = rig.admin.find(NODECLAIMS, claim)
    assert held is not None
    assert held["metadata"].get("deletionTimestamp"), "the drain is still held"
    assert running(rig, 2)

    # One PDB less: none at all, or the one left allows an eviction.
    rig.admin.delete(PDBS, BLOCKING_PDBS[blocker][-1][0], namespace="default")
    assert rig.converge(lambda: rig.admin.find(NODECLAIMS, claim) is None, rounds=12)
    settle(rig, 2)
    assert not failed(rig), failed(rig)
