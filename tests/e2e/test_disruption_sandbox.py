"""The real disruption handler against the sandbox: each method acts when it should, and not otherwise.

One sandbox (API emulator + simulated scheduler/kubelet/controllers + moto server) serves the module;
every test starts from an empty cluster. Capacity comes from the real provisioner handler; the
disruption handler is invoked with a real scheduled-event payload, as EventBridge would.

Two waits of the product are shortened in this process so that a test takes seconds, not minutes:
``consolidation.NOMINATION_SECONDS`` (20 s after a node is initialized) and
``consolidation.VALIDATION_SECONDS`` (15 s between finding a command and acting on it) become 1 s
and 2 s. ``make demo`` runs them at their real values.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from handler_calls import disrupt as disrupt_once
from handler_calls import live_instances, next_pass, provision, until_a_report
from nodewright.api import labels
from nodewright.cluster.resources import (
    EC2NODECLASSES,
    EVENTS,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
    VOLUME_ATTACHMENTS,
    Resource,
)
from nodewright.cluster.resources import (
    PERSISTENT_VOLUME_CLAIMS as PVCS,
)
from nodewright.cluster.resources import (
    PERSISTENT_VOLUMES as PVS,
)
from nodewright.disruption import consolidation, drift, flow
from waiting import wait_for

from sandbox.apiserver.testing import kubectl
from sandbox.scenarios.workloads import DEPLOYMENTS, REPLICASETS, inflate, nodeclass, nodepool

# Each test takes 15-80 s on a quiet machine; a loaded one (CI, shared cores) needs the margin.
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
ON_DEMAND = {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
SPOT = {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
ONLY_LARGE = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}
ZONES = tuple(f"us-east-1{letter}" for letter in "abcdef")
# Fifteen types whose every spot offering is cheaper than any of m5.xlarge's, each able to hold the
# 250m "small" pod (the sandbox's spot market: 60-70 % off on-demand, see sandbox/aws/prices.py).
CHEAPER_SPOT_TYPES = [
    *("t3.small", "t3.medium", "t3.large", "t3a.small", "t3a.medium", "t3a.large"),
    *("t2.small", "t2.medium", "t2.large", "m5.large", "m5a.large", "m6i.large"),
    *("m6a.large", "c5.large", "c5a.large"),
]
CONSOLIDATE = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1s"}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-disruption", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def env(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    monkeypatch.setenv("POLL_INTERVAL_SECONDS", "1")
    monkeypatch.setattr(consolidation, "NOMINATION_SECONDS", 1.0)
    monkeypatch.setattr(consolidation, "VALIDATION_SECONDS", 2.0)
    drift.forget_dynamic()
    flow.forget_proposals()
    sandbox.warm_catalog()
    return sandbox


@pytest.fixture
def cluster(env: Any) -> Iterator[Any]:
    from nodewright.cluster import reset_connections

    kube = env.admin_cluster()
    kube.create(EC2NODECLASSES, nodeclass(env))
    yield kube
    _empty(kube, env)
    reset_connections()


# --- helpers -----------------------------------------------------------------------------------------


def disrupt(seconds: float = 12.0) -> dict[str, Any]:
    """The report of a scheduled invocation of the real disruption handler that may loop for
    ``seconds`` (one that ended out of time is followed by another: ``handler_calls.until_a_report``)."""
    return until_a_report(lambda: disrupt_once(seconds))


def disrupt_until(
    what: str, done: Callable[[], bool], timeout: float = 90.0, seconds: float = 12.0
) -> list[dict[str, Any]]:
    """Invoke back to back until ``done()``, each time after a short provisioner invocation (both
    run every minute: the provisioner registers and initializes the replacements); the disruption
    handler's reports. ``seconds``: how long each disruption invocation may loop."""
    reports = []
    deadline = time.monotonic() + timeout
    while True:
        provision(seconds=1)
        reports.append(disrupt(seconds))
        if done():
            return reports
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; reports: {reports}")
        time.sleep(0.5)


def deployment(name: str, replicas: int, cpu: str, **template_metadata: Any) -> dict[str, Any]:
    found = inflate(replicas, cpu=cpu, memory="256Mi")
    found["metadata"]["name"] = name
    found["spec"]["selector"] = {"matchLabels": {"app": name}}
    found["spec"]["template"]["metadata"] = {"labels": {"app": name}, **template_metadata}
    return found


def running_on(kube: Any, app: str) -> list[str]:
    """The nodes of the Running, not terminating pods of ``app``."""
    return sorted(
        p["spec"].get("nodeName", "")
        for p in kube.list(PODS, namespace="default")
        if (p["metadata"].get("labels") or {}).get("app") == app
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def node_names(kube: Any) -> set[str]:
    return {n["metadata"]["name"] for n in kube.list(NODES)}


def instance_type(kube: Any, node: str) -> str:
    return str(kube.get(NODES, node)["metadata"]["labels"][labels.INSTANCE_TYPE])


def scale(kube: Any, name: str, replicas: int) -> None:
    kube.patch(DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace="default")


def _empty(kube: Any, sb: Any) -> None:
    """Back to an empty cluster: workloads, PDBs, instances, NodeClaims, nodes, NodePools."""
    for deployment_ in kube.list(DEPLOYMENTS, namespace="default"):
        kube.delete(DEPLOYMENTS, deployment_["metadata"]["name"], namespace="default")
    for replicaset in kube.list(REPLICASETS, namespace="default"):
        kube.delete(REPLICASETS, replicaset["metadata"]["name"], namespace="default")
    for pdb in kube.list(PDBS, namespace="default"):
        kube.delete(PDBS, pdb["metadata"]["name"], namespace="default")
    ids = [i["InstanceId"] for i in live_instances(sb)]
    if ids:
        ec2 = sb.aws_client("ec2")
        ec2.terminate_instances(InstanceIds=ids)
        ec2.close()
    for claim in kube.list(NODECLAIMS):
        kube.patch(NODECLAIMS, claim["metadata"]["name"], {"metadata": {"finalizers": None}})
        kube.delete(NODECLAIMS, claim["metadata"]["name"])
    for pool in kube.list(NODEPOOLS):
        kube.delete(NODEPOOLS, pool["metadata"]["name"])
    kube.delete(EC2NODECLASSES, "default")

    def emptied() -> bool:
        for pod in kube.list(PODS, namespace="default"):
            kube.delete(PODS, pod["metadata"]["name"], namespace="default", grace_period_seconds=0)
        for node in kube.list(NODES):
            kube.patch(NODES, node["metadata"]["name"], {"metadata": {"finalizers": None}})
            kube.delete(NODES, node["metadata"]["name"])
        return not kube.list(PODS, namespace="default") and not kube.list(NODES)

    wait_for("the cluster to empty", emptied, timeout=15)


def one_big_node_left_mostly_idle(kube: Any, *, pin_big: bool = False, **small_metadata: Any) -> str:
    """An m5.xlarge that ran a 3-CPU pod and now runs only ``small`` (250m): the node's name.
    ``pin_big``: the 3-CPU pod selects m5.xlarge (for a NodePool that offers cheaper types)."""
    big = deployment("big", 1, "3")
    if pin_big:
        big["spec"]["template"]["spec"]["nodeSelector"] = {labels.INSTANCE_TYPE: "m5.xlarge"}
    kube.create(DEPLOYMENTS, big, namespace="default")
    wait_for("big to be pending", lambda: bool(kube.list_pending_pods()))
    provision(seconds=8)
    wait_for("big Running", lambda: len(running_on(kube, "big")) == 1, step=next_pass)
    (node,) = running_on(kube, "big")
    assert instance_type(kube, node) == "m5.xlarge"
    kube.create(DEPLOYMENTS, deployment("small", 1, "250m", **small_metadata), namespace="default")
    wait_for("small Running", lambda: running_on(kube, "small") == [node])
    scale(kube, "big", 0)
    wait_for("big gone", lambda: not running_on(kube, "big"))
    initialized(kube, node)
    return node


def initialized(kube: Any, node: str, timeout: float = 90.0) -> None:
    """Provisioner invocations until the node's NodeClaim is registered and Initialized (the
    provisioner's lifecycle does it; on a loaded machine the first invocation may end before)."""

    def done() -> bool:
        for claim in kube.list(NODECLAIMS):
            status = claim.get("status") or {}
            if status.get("nodeName") == node:
                return any(
                    c.get("type") == "Initialized" and c.get("status") == "True"
                    for c in status.get("conditions") or []
                )
        return False

    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"the NodeClaim of {node} was not initialized within {timeout:.0f}s")
        provision(seconds=1)


def m5_pool(name: str = "m5", **disruption: Any) -> dict[str, Any]:
    types = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]}
    return nodepool(name, [ON_DEMAND, types], disruption={**CONSOLIDATE, **disruption})


def disrupt_past_the_waits(kube: Any, node: str) -> list[dict[str, Any]]:
    """Invocations spanning consolidateAfter (1 s after the first pass records the pod events), the
    nomination wait and the validation: in that span the replace test's command acts. Checks that
    the span did pass for ``node``, so a test that expects nothing cannot pass by being early."""
    provision(seconds=1)  # both functions run every minute
    reports = [disrupt()]
    time.sleep(3.0)
    for _ in range(2):
        provision(seconds=1)
        reports.append(disrupt())
    claim = next(c for c in kube.list(NODECLAIMS) if (c.get("status") or {}).get("nodeName") == node)
    last = datetime.fromisoformat(claim["status"]["lastPodEventTime"].replace("Z", "+00:00"))
    assert datetime.now(UTC) - last > timedelta(seconds=3), "consolidateAfter and validation have passed"
    return reports


def reasons_for(kube: Any, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["message"])
        for e in kube.list(EVENTS, namespace="default")
        if e["involvedObject"]["name"] == name
    ]


# --- consolidation ---------------------------------------------------------------------------------


def test_an_underutilized_node_is_replaced_by_a_strictly_cheaper_one_before_it_drains(
    cluster: Any, env: Any
) -> None:
    cluster.create(NODEPOOLS, m5_pool())
    big = one_big_node_left_mostly_idle(cluster)

    reports = disrupt_until(
        "the consolidation", lambda: big not in node_names(cluster) and len(running_on(cluster, "small")) == 1
    )

    decisions = [d for r in reports for d in r["decisions"]]
    assert [(d["method"], d["action"], d["reason"]) for d in decisions] == [
        ("single", "replace", "Underutilized")
    ]
    assert decisions[0]["pricePerHourAfter"] < decisions[0]["pricePerHourBefore"]
    (now_on,) = running_on(cluster, "small")
    assert instance_type(cluster, now_on) == "m5.large"
    assert [(c.get("status") or {}).get("nodeName") for c in cluster.list(NODECLAIMS)] == [now_on]
    assert [i["InstanceType"] for i in live_instances(env)] == ["m5.large"]
    assert ("DisruptionTerminating", "Disrupting Node: Underutilized") in reasons_for(cluster, big)


def test_a_node_whose_pods_fit_elsewhere_is_deleted_without_a_new_node(cluster: Any, env: Any) -> None:
    only_large = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}
    cluster.create(NODEPOOLS, nodepool("large", [ON_DEMAND, only_large], disruption=CONSOLIDATE))
    cluster.create(DEPLOYMENTS, deployment("app", 2, "1"), namespace="default")
    wait_for("2 pending app pods", lambda: len(cluster.list_pending_pods()) == 2)
    provision(seconds=8)
    wait_for("app Running on two nodes", lambda: len(set(running_on(cluster, "app"))) == 2, step=next_pass)
    scale(cluster, "app", 1)
    wait_for("one app pod", lambda: len(running_on(cluster, "app")) == 1)
    (busy,) = running_on(cluster, "app")
    (idle,) = node_names(cluster) - {busy}
    # The side pod goes to the node app left: cordon the other one while it binds.
    cluster.patch(NODES, busy, {"spec": {"unschedulable": True}})
    cluster.create(DEPLOYMENTS, deployment("side", 1, "500m"), namespace="default")
    wait_for("side Running on the idle node", lambda: running_on(cluster, "side") == [idle])
    cluster.patch(NODES, busy, {"spec": {"unschedulable": None}})
    claims_before = {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)}

    reports = disrupt_until("one node deleted", lambda: len(node_names(cluster)) == 1)

    decisions = [d for r in reports for d in r["decisions"]]
    assert [(d["action"], d["reason"]) for d in decisions] == [("delete", "Underutilized")]
    (left,) = node_names(cluster)
    wait_for(
        "both pods Running on the node left",
        lambda: running_on(cluster, "app") + running_on(cluster, "side") == [left, left],
    )
    assert {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)} < claims_before, "no new NodeClaim"
    assert len(live_instances(env)) == 1


# --- what holds consolidation back ------------------------------------------------------------------


def pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {**spec, "selector": {"matchLabels": {"app": app}}},
    }


VETOES = {
    # Karpenter's words for each veto (its DisruptionBlocked events).
    "do-not-disrupt": f'Pod has "{labels.DO_NOT_DISRUPT}" annotation (Pod=default/small-',
    "pdb": "PDB default/small blocks eviction",
    # The Eviction API answers 500 for a pod covered by two PDBs, however much each allows: a command
    # would taint and cordon the node and its drain would never end (issue 24, defect 2).
    "two-pdbs": "pod default/small-",
}


@pytest.mark.parametrize("veto", sorted(VETOES))
def test_do_not_disrupt_or_a_pdb_that_allows_nothing_keeps_the_node_and_says_why(
    cluster: Any, env: Any, veto: str
) -> None:
    cluster.create(NODEPOOLS, m5_pool())
    extra = {"annotations": {labels.DO_NOT_DISRUPT: "true"}} if veto == "do-not-disrupt" else {}
    if veto == "pdb":
        cluster.create(PDBS, pdb("small", "small", maxUnavailable=0), namespace="default")
    if veto == "two-pdbs":
        for name in ("small-a", "small-b"):
            cluster.create(PDBS, pdb(name, "small", maxUnavailable=1), namespace="default")
    big = one_big_node_left_mostly_idle(cluster, **extra)

    reports = disrupt_past_the_waits(cluster, big)

    assert [d for r in reports for d in r["decisions"]] == []
    assert big in node_names(cluster)
    assert running_on(cluster, "small") == [big]
    assert not disrupted_taint(cluster, big), "nothing is left tainted and cordoned"
    assert not cluster.get(NODES, big)["spec"].get("unschedulable")
    why = [m for reason, m in reasons_for(cluster, big) if reason == "DisruptionBlocked"]  # Karpenter's
    assert any(VETOES[veto] in message for message in why), (why, [r["held"] for r in reports])
    if veto == "two-pdbs":
        assert any("covered by 2 PDBs (default/small-a, default/small-b)" in m for m in why), why
    assert len(cluster.list(NODECLAIMS)) == 1


def disrupted_taint(kube: Any, node: str) -> bool:
    return any(
        t.get("key") == labels.DISRUPTED_TAINT_KEY for t in kube.get(NODES, node)["spec"].get("taints") or []
    )


def test_a_budget_window_that_allows_no_node_holds_consolidation_and_never_keeps_the_function_looping(
    cluster: Any, env: Any
) -> None:
    window = {"nodes": "0", "reasons": ["Underutilized"], "schedule": "0 0 * * *", "duration": "24h"}
    cluster.create(NODEPOOLS, m5_pool(budgets=[window]))
    big = one_big_node_left_mostly_idle(cluster)

    reports = disrupt_past_the_waits(cluster, big)

    # A budget that allows nothing must not keep the function looping: once consolidateAfter has
    # passed, each invocation makes one pass and ends (counted passes, not seconds: a loaded machine
    # once failed the timing this replaces).
    assert [r["passes"] for r in reports[1:]] == [1] * (len(reports) - 1), [r["passes"] for r in reports]
    assert [d for r in reports for d in r["decisions"]] == []
    assert big in node_names(cluster)
    held = reports[-1]["held"]
    assert any("budget" in why and "Underutilized" in why for why in held.values()), held
    assert len(cluster.list(NODECLAIMS)) == 1


@pytest.mark.parametrize(
    "disruption",
    [{"consolidationPolicy": "WhenEmpty"}, {"consolidateAfter": "Never"}],
    ids=["WhenEmpty", "consolidateAfter-Never"],
)
def test_when_empty_or_consolidate_after_never_never_consolidates_an_underutilized_node(
    cluster: Any, env: Any, disruption: dict[str, str]
) -> None:
    cluster.create(NODEPOOLS, m5_pool(**disruption))
    big = one_big_node_left_mostly_idle(cluster)

    reports = disrupt_past_the_waits(cluster, big)

    assert [d for r in reports for d in r["decisions"]] == []
    assert big in node_names(cluster)
    if disruption.get("consolidateAfter") == "Never":
        assert any(
            reason == "Unconsolidatable" and message == 'NodePool "m5" has consolidation disabled'
            for reason, message in reasons_for(cluster, big)
        )


# --- drift ------------------------------------------------------------------------------------------


def test_a_nodepool_template_edit_rolls_its_nodes_one_at_a_time_replacing_each_before_it_drains(
    cluster: Any, env: Any
) -> None:
    only_large = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}
    pool = nodepool("large", [ON_DEMAND, only_large], disruption={"consolidateAfter": "Never"})
    cluster.create(NODEPOOLS, pool)
    cluster.create(DEPLOYMENTS, deployment("app", 2, "1"), namespace="default")
    wait_for("2 pending app pods", lambda: len(cluster.list_pending_pods()) == 2)
    provision(seconds=8)
    wait_for("app Running on two nodes", lambda: len(set(running_on(cluster, "app"))) == 2, step=next_pass)
    old = node_names(cluster)
    template = {"metadata": {"labels": {"rollout": "2"}}}
    cluster.patch(NODEPOOLS, "large", {"spec": {"template": template}})

    disrupting_at_once: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            nodes = [n for n in cluster.list(NODES) if n["metadata"]["name"] in old]
            disrupting_at_once.append(
                sum(
                    1
                    for n in nodes
                    if n["metadata"].get("deletionTimestamp")
                    or any(
                        t.get("key") == labels.DISRUPTED_TAINT_KEY
                        for t in (n.get("spec") or {}).get("taints") or []
                    )
                )
            )
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        reports = disrupt_until(
            "both nodes rolled",
            lambda: not (node_names(cluster) & old) and len(set(running_on(cluster, "app"))) == 2,
            timeout=150,  # two replace-then-drain commands, one after the other (a loaded machine is slow)
        )
    finally:
        stop.set()
        watcher.join()

    decisions = [d for r in reports for d in r["decisions"]]
    assert [(d["method"], d["reason"], d["action"]) for d in decisions] == [
        ("drift", "Drifted", "replace")
    ] * 2
    assert max(disrupting_at_once) == 1, "one drifted node at a time"
    drifted = {reason for r in reports for reason in r["drifted"].values()}
    assert drifted == {drift.NODEPOOL_DRIFTED}
    for node in node_names(cluster):
        assert cluster.get(NODES, node)["metadata"]["labels"]["rollout"] == "2"
    assert len(live_instances(env)) == 2


# --- spot-to-spot -----------------------------------------------------------------------------------


def test_spot_to_spot_consolidation_acts_only_with_fifteen_cheaper_types(
    cluster: Any, env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOT_TO_SPOT_CONSOLIDATION", "true")  # Karpenter's feature gate, off by default

    def requirements(cheaper: list[str]) -> list[dict[str, Any]]:
        return [SPOT, {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge", *cheaper]}]

    cluster.create(NODEPOOLS, nodepool("spot", requirements(CHEAPER_SPOT_TYPES[:14]), disruption=CONSOLIDATE))
    big = one_big_node_left_mostly_idle(cluster, pin_big=True)

    held = disrupt_past_the_waits(cluster, big)

    assert [d for r in held for d in r["decisions"]] == []
    why = [m for reason, m in reasons_for(cluster, big) if reason == "Unconsolidatable"]
    assert any(
        m
        == "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to "
        "consolidate, got 14"
        for m in why
    ), why
    # The fifteenth type (widening a requirement drifts nothing): now it acts. The command's
    # execution (replacement initialized, then the drain) is the on-demand replace test's; this one
    # stops once the replacement is launched.
    spec = {"template": {"spec": {"requirements": requirements(CHEAPER_SPOT_TYPES)}}}
    cluster.patch(NODEPOOLS, "spot", {"spec": spec})
    reports = disrupt_until("the spot-to-spot command", lambda: len(live_instances(env)) == 2, seconds=4)

    decisions = [d for r in reports for d in r["decisions"]]
    assert [(d["method"], d["action"], d["reason"]) for d in decisions] == [
        ("single", "replace", "Underutilized")
    ]
    assert "(or 14 more types)" in decisions[0]["description"], "launched with the cheapest fifteen"
    (replacement,) = [i for i in live_instances(env) if i["InstanceType"] != "m5.xlarge"]
    assert replacement.get("InstanceLifecycle") == "spot"
    assert replacement["InstanceType"] in CHEAPER_SPOT_TYPES


# --- a replacement that cannot launch ----------------------------------------------------------------


def test_a_replacement_that_cannot_launch_abandons_the_command_untainted_with_an_event_and_leaks_nothing(
    cluster: Any, env: Any
) -> None:
    cluster.create(NODEPOOLS, m5_pool())
    big = one_big_node_left_mostly_idle(cluster)
    (big_claim,) = [
        c["metadata"]["name"] for c in cluster.list(NODECLAIMS) if c["status"].get("nodeName") == big
    ]
    for zone in ZONES:  # the only cheaper type has no capacity anywhere
        env.faults.insufficient_capacity("m5.large", zone, "on-demand")
    try:
        commands: list[dict[str, Any]] = []
        decisions: list[dict[str, Any]] = []
        deadline = time.monotonic() + 90
        while not any(c["action"] == "abandoned" for c in commands):
            if time.monotonic() > deadline:
                pytest.fail(f"no command was abandoned within 90s: {commands}")
            provision(seconds=1)
            report = disrupt()
            commands += report["commands"]
            decisions += report["decisions"]

        assert [(d["action"], d["nodeclaims"]) for d in decisions] == [("replace", [big_claim])]
        assert env.faults.ice_reported > 0, "the replacement asked for the faulted offering"
        node = cluster.get(NODES, big)
        assert not any(t.get("key") == labels.DISRUPTED_TAINT_KEY for t in node["spec"].get("taints") or [])
        assert not node["spec"].get("unschedulable")
        annotations = cluster.get(NODECLAIMS, big_claim)["metadata"].get("annotations") or {}
        assert not [k for k in annotations if k.startswith("nodewright.io/disruption-")], annotations
        assert any(reason == "DisruptionAbandoned" for reason, _ in reasons_for(cluster, big))
        assert running_on(cluster, "small") == [big]

        def only_the_candidate_left() -> bool:
            provision(seconds=1)  # the failed replacement NodeClaim goes as a failed launch does
            return [c["metadata"]["name"] for c in cluster.list(NODECLAIMS)] == [big_claim]

        wait_for("the failed replacement NodeClaim to go", only_the_candidate_left, timeout=60)
        assert [i["InstanceType"] for i in live_instances(env)] == ["m5.xlarge"]
    finally:
        env.faults.clear()
        forget_unavailable_offerings(env)


def forget_unavailable_offerings(sb: Any) -> None:
    """Drop the offerings the product marked unavailable after an ICE (for 3 minutes, in the state
    table and in the memory of the function container that marked them), so the module's next test
    can launch them again and the disruption function prices its replacements with them."""
    from nodewright.cloud.provider import CloudProvider
    from nodewright.cloud.state import UNAVAILABLE_PK

    ddb = sb.aws_client("dynamodb")
    try:
        table = sb.aws.state_table
        found = ddb.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": UNAVAILABLE_PK}},
        )
        for item in found["Items"]:
            ddb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
    finally:
        ddb.close()
    # The container that launched also keeps its own marks for those 3 minutes
    # (CloudProvider.unavailable_offerings): here the disruption function's, whose consolidation
    # otherwise finds no cheaper type for a later test's node. The functions' next invocations start
    # in new containers (the instance catalog stays primed), which know only the state table's marks.
    CloudProvider._shared.clear()


# --- deletion by hand and of a NodePool --------------------------------------------------------------


def two_nodes_of(kube: Any, pool: str) -> dict[str, str]:
    """NodePool ``pool`` (m5.large, never consolidated) running one 1-CPU app pod on each of two
    nodes: node name → its NodeClaim's name."""
    kube.create(NODEPOOLS, nodepool(pool, [ON_DEMAND, ONLY_LARGE], disruption={"consolidateAfter": "Never"}))
    kube.create(DEPLOYMENTS, deployment("app", 2, "1"), namespace="default")
    wait_for("2 pending app pods", lambda: len(kube.list_pending_pods()) == 2)
    provision(seconds=8)
    wait_for("app Running on two nodes", lambda: len(set(running_on(kube, "app"))) == 2, step=next_pass)
    for node in running_on(kube, "app"):
        initialized(kube, node)  # registered and initialized, as a settled cluster's nodes are
    return {c["status"]["nodeName"]: c["metadata"]["name"] for c in kube.list(NODECLAIMS)}


def drained_then_terminated(reports: list[dict[str, Any]], claims: set[str]) -> None:
    """Each NodeClaim's termination drained its node before it terminated the instance (graceful),
    never found the instance gone first. ``reports``: both functions' (the termination controller
    runs in each: whichever pass comes to a deleting NodeClaim first drives it)."""
    for claim in claims:
        steps = [t["steps"] for r in reports for t in r["terminations"] if t["nodeclaim"] == claim]
        assert any(
            "drained" in s
            and "instance-terminated" in s
            and s.index("drained") < s.index("instance-terminated")
            for s in steps
        ), (claim, steps)
        assert not any("instance-gone" in s for s in steps), (claim, steps)


def gone(kube: Any, sb: Any) -> bool:
    return not kube.list(NODECLAIMS) and not kube.list(NODES) and not live_instances(sb)


def test_kubectl_delete_nodeclaim_or_node_drains_the_node_and_terminates_its_instance(
    cluster: Any, env: Any
) -> None:
    claim_of = two_nodes_of(cluster, "manual")
    by_claim, by_node = sorted(claim_of)
    for kind, name in (("nodeclaim", claim_of[by_claim]), ("node", by_node)):
        done = kubectl(env.kubeconfig_path, "delete", kind, name, "--wait=false")
        assert done.returncode == 0, done.stderr
    # The karpenter.sh/termination finalizer holds both until the drain is done.
    assert cluster.get(NODECLAIMS, claim_of[by_claim])["metadata"].get("deletionTimestamp")
    assert cluster.get(NODES, by_node)["metadata"].get("deletionTimestamp")

    reports = []
    deadline = time.monotonic() + 90
    while not gone(cluster, env):  # the disruption function alone: it owns terminations
        if time.monotonic() > deadline:
            pytest.fail(f"the deleted nodes were not drained and terminated within 90s: {reports}")
        reports.append(disrupt())

    drained_then_terminated(reports, set(claim_of.values()))
    assert any(reason == "Disrupting" for reason, _ in reasons_for(cluster, by_node))
    wait_for("both app pods recreated, waiting for a node", lambda: len(cluster.list_pending_pods()) == 2)


def test_a_pdb_blocked_kubectl_delete_nodeclaim_launches_nothing_while_blocked_then_drains_once_allowed(
    cluster: Any, env: Any
) -> None:
    """Issue 24, defect 1: the pod of the deleted NodeClaim's node can never be evicted under
    ``maxUnavailable: 0``; capacity launched for it would stand empty until emptiness removed it,
    and be launched again every minute. Nothing is launched while the drain is blocked; once the
    PDB allows it, the drain ends and the pod gets its place then."""
    claim_of = two_nodes_of(cluster, "guarded")
    cluster.create(PDBS, pdb("app", "app", maxUnavailable=0), namespace="default")
    wait_for(
        "the PDB's status",
        lambda: "disruptionsAllowed" in (cluster.get(PDBS, "app", namespace="default").get("status") or {}),
    )
    victim = sorted(claim_of)[0]
    claims_before = {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)}
    instances_before = {i["InstanceId"] for i in live_instances(env)}
    done = kubectl(env.kubeconfig_path, "delete", "nodeclaim", claim_of[victim], "--wait=false")
    assert done.returncode == 0, done.stderr

    reports = []
    for _ in range(3):  # both functions, as their schedules run them: the drain meets the PDB each time
        provision(seconds=2)
        reports.append(disrupt(seconds=4))
        assert {c["metadata"]["name"] for c in cluster.list(NODECLAIMS)} == claims_before, "nothing new"
        assert {i["InstanceId"] for i in live_instances(env)} == instances_before, "no instance launched"
    blocked = [t for r in reports for t in r["terminations"] if t["nodeclaim"] == claim_of[victim]]
    assert blocked, reports
    assert blocked[-1]["blocked"], "the drain is held by the PDB"
    assert victim in running_on(cluster, "app")
    assert cluster.get(NODECLAIMS, claim_of[victim])["metadata"].get("deletionTimestamp")

    cluster.patch(PDBS, "app", {"spec": {"maxUnavailable": 1}}, namespace="default")
    disrupt_until(
        "the drain to end and the pod to find a new node",
        lambda: victim not in node_names(cluster) and len(running_on(cluster, "app")) == 2,
        timeout=150,
    )
    assert cluster.find(NODECLAIMS, claim_of[victim]) is None
    assert len(live_instances(env)) == 2, "one replacement, launched once the pod left"


def test_deleting_a_nodepool_drains_and_removes_its_nodeclaims_and_instances(cluster: Any, env: Any) -> None:
    claim_of = two_nodes_of(cluster, "doomed")
    done = kubectl(env.kubeconfig_path, "delete", "nodepool", "doomed", "--wait=false")
    assert done.returncode == 0, done.stderr

    reports = []
    deadline = time.monotonic() + 90
    while not gone(cluster, env):  # both functions, as their schedules run them
        if time.monotonic() > deadline:
            pytest.fail(f"the NodePool's nodes were not drained and removed within 90s: {reports}")
        reports.append(provision(seconds=1))
        reports.append(disrupt())

    drained_then_terminated(reports, set(claim_of.values()))
    assert cluster.find(NODEPOOLS, "doomed") is None
    wait_for("both app pods pending, no NodePool left", lambda: len(cluster.list_pending_pods()) == 2)


# --- karpenter.sh/do-not-disrupt with a duration (issue 26) -------------------------------------------


def test_a_do_not_disrupt_duration_protects_its_node_until_it_elapses_then_consolidation_goes_on(
    cluster: Any, env: Any
) -> None:
    cluster.create(NODEPOOLS, m5_pool())
    big = one_big_node_left_mostly_idle(cluster)
    (small,) = [
        p
        for p in cluster.list(PODS, namespace="default")
        if (p["metadata"].get("labels") or {}).get("app") == "small"
        and not p["metadata"].get("deletionTimestamp")
    ]
    started = datetime.fromisoformat(small["status"]["startTime"].replace("Z", "+00:00"))
    # 45 s from now, whatever the setup took (the duration counts from the pod's start): long enough
    # for the passes below to look at the node while it is protected, even on a loaded machine.
    seconds = int((datetime.now(UTC) - started).total_seconds()) + 45
    cluster.patch(
        PODS,
        small["metadata"]["name"],
        {"metadata": {"annotations": {labels.DO_NOT_DISRUPT: f"{seconds}s"}}},
        namespace="default",
    )
    until = started + timedelta(seconds=seconds)

    held = disrupt_past_the_waits(cluster, big)

    assert datetime.now(UTC) < until, "the checks above ran while the protection lasted"
    assert [d for r in held for d in r["decisions"]] == []
    assert any(labels.DO_NOT_DISRUPT in why for why in held[-1]["held"].values()), held[-1]["held"]
    decided_after = None
    after: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90
    while decided_after is None:
        if time.monotonic() > deadline:
            pytest.fail(f"no consolidation within 90 s of the protection's end; last reports: {after[-3:]}")
        provision(seconds=1)
        report = disrupt()
        after.append(report)
        if report["decisions"]:
            decided_after = datetime.now(UTC)
    assert decided_after >= until, "consolidation acted only once the duration had elapsed"
    assert [(d["action"], d["reason"]) for d in report["decisions"]] == [("replace", "Underutilized")]


# --- VolumeAttachments hold the instance (issue 26) ---------------------------------------------------


def test_a_drained_nodes_instance_is_terminated_only_after_its_volume_attachment_is_gone(
    cluster: Any, env: Any
) -> None:
    kube = env.admin_cluster()
    kube.create(
        PVS,
        {
            "metadata": {"name": "pv-db"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0db"},
                "claimRef": {"namespace": "default", "name": "db"},
            },
        },
    )
    kube.create(
        PVCS,
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": "pv-db",
            },
        },
        namespace="default",
    )
    try:
        cluster.create(
            NODEPOOLS, nodepool("disks", [ON_DEMAND, ONLY_LARGE], disruption={"consolidateAfter": "Never"})
        )
        db = deployment("db", 1, "1")
        db["spec"]["template"]["spec"]["volumes"] = [
            {"name": "data", "persistentVolumeClaim": {"claimName": "db"}}
        ]
        cluster.create(DEPLOYMENTS, db, namespace="default")
        wait_for("the db pod pending", lambda: len(cluster.list_pending_pods()) == 1)
        provision(seconds=8)
        wait_for("db Running", lambda: len(running_on(cluster, "db")) == 1, step=next_pass)
        (node,) = running_on(cluster, "db")
        initialized(cluster, node)
        wait_for("its volume attached to the node", lambda: attachments_on(cluster, node) == 1)
        (claim,) = [c["metadata"]["name"] for c in cluster.list(NODECLAIMS)]
        (instance,) = [i["InstanceId"] for i in live_instances(env)]

        seen: list[tuple[int, str]] = []  # (attachments on the node, instance state), as they change
        conditions: set[tuple[str, str, str]] = set()
        stop = threading.Event()

        def watch() -> None:
            ec2 = env.aws_client("ec2")
            try:
                while not stop.is_set():
                    found = ec2.describe_instances(InstanceIds=[instance])["Reservations"]
                    state = found[0]["Instances"][0]["State"]["Name"] if found else "gone"
                    observed = (attachments_on(cluster, node), state)
                    if not seen or seen[-1] != observed:
                        seen.append(observed)
                    current = cluster.find(NODECLAIMS, claim)
                    for c in ((current or {}).get("status") or {}).get("conditions") or []:
                        conditions.add((c["type"], c["status"], c.get("reason", "")))
                    time.sleep(0.1)
            finally:
                ec2.close()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            done = kubectl(env.kubeconfig_path, "delete", "nodeclaim", claim, "--wait=false")
            assert done.returncode == 0, done.stderr
            deadline = time.monotonic() + 90
            while cluster.find(NODECLAIMS, claim) is not None:
                if time.monotonic() > deadline:
                    pytest.fail(f"the NodeClaim was not terminated within 90 s: {seen}")
                disrupt()
        finally:
            stop.set()
            watcher.join()

        assert not [s for s in seen if s[0] and s[1] != "running"], f"terminated under its volume: {seen}"
        assert seen[-1][0] == 0
        assert ("VolumesDetached", "Unknown", "AwaitingVolumeDetachment") in conditions, conditions
        assert ("Drained", "True", "Drained") in conditions, conditions
        assert any(reason == "AwaitingVolumeDetachment" for reason, _ in reasons_for(cluster, node))
    finally:
        for pvc in kube.list(PVCS, namespace="default"):
            kube.patch(PVCS, pvc["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace="default")
            kube.delete(PVCS, pvc["metadata"]["name"], namespace="default")
        for pv in kube.list(PVS):
            kube.patch(PVS, pv["metadata"]["name"], {"metadata": {"finalizers": None}})
            kube.delete(PVS, pv["metadata"]["name"])


def attachments_on(kube: Any, node: str) -> int:
    return sum(1 for va in kube.list(VOLUME_ATTACHMENTS) if va["spec"]["nodeName"] == node)
