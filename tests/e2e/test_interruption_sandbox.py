"""A spot interruption end to end in the sandbox, through both real handlers.

The provisioner handler gives ``inflate`` a spot node; a spot interruption warning for that node's
instance then arrives on the direct EventBridge path (``spot_events``) and, as the same event, on the
queue (``interruption``), twice. It must: launch a replacement at once, cordon and drain the node
without the PodDisruptionBudget ever being exceeded, get every pod running on the replacement,
remove the NodeClaim and node — well within the two-minute notice — and act only once.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from handler_calls import next_pass
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS, PDBS, PODS
from nodewright.state.pods import is_provisionable
from nodewright.termination.terminate import INSTANCE_GOING_ANNOTATION
from waiting import wait_for

from sandbox.runtime import events
from sandbox.runtime.lambdas import LambdaContext, load_function
from sandbox.scenarios.workloads import DEPLOYMENTS, inflate, nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPLICAS = 4
NOTICE_SECONDS = 120


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-interruption", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def cluster(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The administrator's client (the user's side); the handlers act with the functions' identity."""
    from nodewright.cluster import reset_connections

    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    sandbox.warm_catalog()  # the invocations under test are warm: they get seconds, not a cold catalog
    kube = sandbox.admin_cluster()
    yield kube
    reset_connections()


def _apply_workload(kube: Any, sb: Any) -> None:
    kube.create(EC2NODECLASSES, nodeclass(sb))
    spot = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
    ]
    kube.create(NODEPOOLS, nodepool("spot", spot))
    kube.create(
        PDBS,
        {
            "metadata": {"name": "inflate", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "inflate"}}},
        },
        namespace="default",
    )
    kube.create(DEPLOYMENTS, inflate(REPLICAS), namespace="default")


def _ready_inflate(kube: Any) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.list(PODS, namespace="default", label_selector="app=inflate")
        if not p["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions", [])
        )
    ]


def test_spot_warning_replaces_drains_within_the_notice_and_acts_once(cluster: Any, sandbox: Any) -> None:
    _apply_workload(cluster, sandbox)
    # The deployment controller and the scheduler run on their own: on a busy machine the pods may
    # not be pending yet, and a pass that sees no pending pod ends the invocation (the next
    # scheduled one, a minute later, would place them). Invoke once they are what the poll finds.
    wait_for(
        f"{REPLICAS} unschedulable inflate pods",
        lambda: sum(1 for p in cluster.list_pending_pods() if is_provisionable(p)) == REPLICAS,
        timeout=30,
    )
    provisioner = load_function("provisioner")
    provisioner.handler(
        {"id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}},
        # 25 s: this process's first pass pages moto's whole catalog before it may write (a pass
        # stops writing at its deadline).
        LambdaContext(25, "nodewright-provisioner"),
    )
    # A handler bounds the container's shared API client to its invocation (calls past its deadline
    # are refused); the test goes on using that client after the invocation has ended.
    cluster.set_call_deadline(None)
    wait_for(
        f"{REPLICAS} inflate pods ready",
        lambda: len(_ready_inflate(cluster)) == REPLICAS,
        timeout=60,
        step=next_pass,
    )

    by_node: dict[str, int] = {}
    for pod in _ready_inflate(cluster):
        by_node[pod["spec"]["nodeName"]] = by_node.get(pod["spec"]["nodeName"], 0) + 1
    victim = cluster.get_node(max(by_node, key=by_node.__getitem__))
    victim_name = victim["metadata"]["name"]
    instance_id = victim["spec"]["providerID"].rsplit("/", 1)[-1]
    claims_before = {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)}
    victim_claim = next(
        c["metadata"]["name"]
        for c in cluster.list(NODECLAIMS)
        if c["status"].get("providerID", "").endswith(instance_id)
    )

    # Watch the budget from outside while the drain runs: never fewer than REPLICAS - 1 ready.
    lowest = [REPLICAS]
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            lowest[0] = min(lowest[0], len(_ready_inflate(cluster)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    event = events.spot_warning(instance_id)
    # The provisioner keeps running beside the interruption, in its own worker as deployed (its
    # schedule, or the wake-up on the evicted pods' FailedScheduling): the replacement's kubelet
    # registers it tainted karpenter.sh/unregistered, and the provisioner's lifecycle pass lifts the
    # taint, so the evicted pods can land there and the PDB lets the drain go on.
    from sandbox.runtime.stack import Runtime

    runtime = Runtime(sandbox, functions=("provisioner",), schedules={"provisioner": 2}, wakeup=False).start()
    try:
        started = time.monotonic()
        direct = load_function("spot_events").handler(event, LambdaContext(100, "nodewright-spot-events"))
        elapsed = time.monotonic() - started
        cluster.set_call_deadline(None)
        watching.set()
        watcher.join()
        wait_for(
            "every inflate pod ready again", lambda: len(_ready_inflate(cluster)) == REPLICAS, timeout=30
        )
    finally:
        runtime.stop()

    assert direct["disposition"] == "acted", direct
    outcome = direct["outcome"]
    assert outcome["markedUnavailable"], "the spot offering is marked unavailable"
    created = outcome["replacement"].get("nodeClaimsCreated") or []
    assert created, f"a replacement was launched at once: {outcome['replacement']}"
    assert set(created).isdisjoint(claims_before)
    assert elapsed < NOTICE_SECONDS, f"drained in {elapsed:.1f}s"
    assert cluster.find_node(victim_name) is None
    left = cluster.find(NODECLAIMS, victim_claim)  # kept, deleting, until EC2 has reclaimed the instance
    assert left["metadata"]["deletionTimestamp"]
    assert left["metadata"]["annotations"][INSTANCE_GOING_ANNOTATION] == "true"
    assert lowest[0] >= REPLICAS - 1, "the PodDisruptionBudget (maxUnavailable 1) was honoured"
    # The replacement's node (matched by providerID: its registration is the provisioner's next pass).
    replacement_ids = {
        (cluster.find(NODECLAIMS, name) or {}).get("status", {}).get("providerID") for name in created
    }
    replacement_nodes = {
        n["metadata"]["name"] for n in cluster.list_nodes() if n["spec"].get("providerID") in replacement_ids
    }
    assert replacement_nodes, "the replacement registered"
    assert {p["spec"]["nodeName"] for p in _ready_inflate(cluster)} & replacement_nodes, (
        "pods run on the replacement"
    )

    # The same event on the queue (twice): acknowledged, nothing done again.
    queue = load_function("interruption")
    for _ in range(2):
        assert queue.handler(
            events.sqs_batches([json.dumps(event)])[0], LambdaContext(30, "nodewright-interruption")
        ) == {"batchItemFailures": []}
        cluster.set_call_deadline(None)
    assert {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)} == claims_before | set(created)

    # The provisioner's garbage collection (forced: as a minute later) leaves the instance to EC2:
    # it is neither reported as leaked nor terminated before EC2 reclaims it (issue 25).
    ec2 = sandbox.aws_client("ec2")
    try:
        _scheduled_provisioner_pass(cluster)
        (described,) = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"]
        assert described["State"]["Name"] == "running", "not terminated as a leak before EC2 reclaims it"
        assert cluster.find(NODECLAIMS, victim_claim) is not None
        # EC2 reclaims it (the spot market, two minutes after the notice); the next pass releases it.
        ec2.terminate_instances(InstanceIds=[instance_id])
    finally:
        ec2.close()
    _scheduled_provisioner_pass(cluster)
    assert cluster.find(NODECLAIMS, victim_claim) is None
    assert {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)} == (
        claims_before - {victim_claim}
    ) | set(created)


def _scheduled_provisioner_pass(cluster: Any) -> dict[str, Any]:
    """One scheduled provisioner invocation with garbage collection due (as a minute later) that
    ran its pass: held the writers' lease. The runtime stopped above may have abandoned a
    provisioner invocation holding it (as Lambda abandons one at shutdown), and the lease is then
    held until it expires (``LEASE_SECONDS``); an invocation meanwhile skips its pass (CI saw
    one), and a skipped pass asserts nothing. So invocations follow one another, as the schedule's
    would, until one held it.

    Its container goes idle 5 s after the last activity (``IDLE_AFTER_SECONDS``, a setting; 600 s
    deployed), so no invocation polls on to its 25 s deadline: the NodeClaim waiting for EC2 is a
    termination that only waits, not activity (``TerminationReport.progressed``), and the release,
    which is progress, is that pass's last work."""
    from nodewright.provisioning import garbage
    from nodewright.provisioning.loop import LEASE_SECONDS

    def invocation() -> dict[str, Any]:
        garbage.reset_gc_clock()
        with mock.patch.dict(os.environ, {"IDLE_AFTER_SECONDS": "5"}):
            result: dict[str, Any] = load_function("provisioner").handler(
                events.scheduled_event(rule="provisioner"), LambdaContext(25, "nodewright-provisioner")
            )
        cluster.set_call_deadline(None)
        return result

    return wait_for(
        "a scheduled provisioner invocation that held the writers' lease",
        lambda: (result := invocation())["leaseHeld"] and result,
        timeout=LEASE_SECONDS + 60,
    )
