"""Consolidation and drift replacement through the real scheduling core, with the shared fakes:
candidates, delete and replace, budgets, do-not-disrupt and PDB vetoes, validation, execution,
abandoning a failed replacement, and convergence after a crash."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes import (
    FakeClock,
    FakeCloudProvider,
    FakeCluster,
    FakeLease,
    fake_context,
)
from nodewright.api import hashing
from nodewright.cluster import objects
from nodewright.context import Context
from nodewright.disruption import consolidation, drift, execute, flow
from nodewright.state import nodepools
from nodewright.state.world import observe
from test_scheduling_support import catalog

ZONE = "us-west-2a"
NODEPOOL: dict[str, Any] = {
    "metadata": {"name": "default", "uid": "pool-uid"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
            }
        },
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": "0s",
            "budgets": [{"nodes": "100%"}],
        },
    },
}
NODECLASS = {
    "metadata": {"name": "default"},
    "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}]},
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> tuple[Context, FakeCluster, FakeCloudProvider]:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cloud.types = catalog(spot=False, zones=(ZONE,))
    cluster.add("NodePool", NODEPOOL)
    cluster.add("EC2NodeClass", NODECLASS)
    ctx = fake_context(cluster, cloud, clock)
    monkeypatch.setattr(nodepools, "validation_errors", lambda doc: [])
    flow.forget_proposals()
    drift.forget_dynamic()
    monkeypatch.setattr(flow, "_recent_why_not", {})
    return ctx, cluster, cloud


def add_node(
    cluster: FakeCluster,
    name: str,
    instance_type: str,
    *,
    pool: dict[str, Any] = NODEPOOL,
    capacity_type: str = "on-demand",
    **annotations: str,
) -> None:
    instance = f"i-{abs(hash(name)) % 10**17:017d}"
    claim_labels = {
        "karpenter.sh/nodepool": "default",
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.sh/capacity-type": capacity_type,
        "topology.kubernetes.io/zone": ZONE,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    }
    cluster.add(
        "NodeClaim",
        {
            "metadata": {
                "name": name,
                "labels": claim_labels,
                "annotations": hashing.nodeclaim_annotations(pool, NODECLASS),
                "finalizers": ["karpenter.sh/termination"],
                "creationTimestamp": "2026-12-02T10:00:00Z",
            },
            "spec": {"nodeClassRef": {"name": "default"}, "requirements": []},
            "status": {
                "instanceID": instance,
                "providerID": f"aws:///{ZONE}/{instance}",
                "nodeName": f"node-{name}",
                "conditions": [
                    {"type": "Launched", "status": "True", "lastTransitionTime": "2026-12-02T10:00:00Z"},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-02T10:01:00Z"},
                ],
            },
        },
    )
    type_ = next(t for t in catalog(spot=False, zones=(ZONE,)) if t.name == instance_type)
    cluster.add(
        "Node",
        {
            "metadata": {
                "name": f"node-{name}",
                "labels": {**claim_labels, "kubernetes.io/hostname": f"node-{name}"},
                "annotations": dict(annotations),
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": {"providerID": f"aws:///{ZONE}/{instance}"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {
                    "cpu": f"{type_.allocatable['cpu']}m",
                    "memory": str(type_.allocatable["memory"]),
                    "pods": "29",
                },
            },
        },
    )


def add_pod(
    cluster: FakeCluster,
    name: str,
    node: str | None,
    *,
    cpu: str = "500m",
    memory: str = "512Mi",
    **annotations: str,
) -> None:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    status: dict[str, Any] = {"phase": "Running"}
    if node:
        spec["nodeName"] = node
    else:
        status = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    cluster.add(
        "Pod",
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"app": name},
                "annotations": dict(annotations),
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs"}
                ],
            },
            "spec": spec,
            "status": status,
        },
    )


def one_pass(ctx: Context) -> flow.DisruptionReport:
    """One pass of the disruption controller, as an invocation's report of one pass."""
    report = flow.DisruptionReport()
    report.add(flow.reconcile(ctx, observe(ctx), lease=FakeLease()))
    return report


def condition(cluster: FakeCluster, name: str, kind: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of a NodeClaim's condition, None when it has none."""
    found = objects.condition(cluster.objects["NodeClaim"][name], kind)
    return (found["status"], found["reason"], found["message"]) if found else None


def pass_after_validation(ctx: Context) -> flow.DisruptionReport:
    first = one_pass(ctx)
    assert first.decisions == [], "a consolidation command never acts on first sight"
    assert any("validating" in why for why in first.held.values())
    ctx.clock.advance(consolidation.VALIDATION_SECONDS)  # type: ignore[attr-defined]
    return one_pass(ctx)


def test_two_underused_nodes_are_replaced_by_one_cheaper_node_and_drained_once_it_is_initialized(env) -> None:
    ctx, cluster, cloud = env
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")

    report = pass_after_validation(ctx)
    [decision] = report.decisions
    assert decision.method == "repack"  # the many→several wave finds Karpenter's multi-node command first
    assert decision.action == "replace"
    assert sorted(decision.nodeclaims) == ["a", "b"]
    assert decision.price_before == pytest.approx(0.384)
    assert decision.price_after < 0.384
    assert decision.description.startswith("Underutilized, replacing 2 nodes (m5.xlarge x2) with ")
    [request] = cloud.requests
    assert {t.name for t in request.instance_types} <= {"c5.large", "m5.large", "m6g.large", "r5.large"}
    for name in ("a", "b"):
        node = cluster.objects["Node"][f"node-{name}"]
        assert objects.has_taint(node, "karpenter.sh/disrupted", "NoSchedule"), "nothing new lands on it"
        assert not objects.is_deleting(cluster.objects["NodeClaim"][name]), (
            "not drained before the replacement"
        )

    replacement = request.nodeclaim_name
    for name in ("a", "b"):  # Karpenter's queue marks its candidates
        assert condition(cluster, name, "DisruptionReason") == ("True", "Underutilized", "Underutilized")
        assert condition(cluster, name, "Consolidatable") == ("True", "Consolidatable", "Consolidatable")
    assert (
        "NodeClaim",
        replacement,
        "DisruptionLaunching",
        "Launching NodeClaim: Underutilized",
    ) in cluster.events
    assert one_pass(ctx).commands[0].action == "waiting"
    waiting = (
        "NodeClaim",
        replacement,
        "DisruptionWaitingReadiness",
        "Waiting on readiness to continue disruption",
    )
    assert waiting in cluster.events
    assert one_pass(ctx).commands[0].action == "waiting"
    assert cluster.events.count(waiting) == 1, "not repeated every pass"
    cluster.objects["NodeClaim"][replacement]["status"]["conditions"].append(
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-02T12:00:30Z"}
    )
    report = one_pass(ctx)
    assert report.commands[0].action == "draining"
    assert all(objects.is_deleting(cluster.objects["NodeClaim"][n]) for n in ("a", "b"))
    for name in ("a", "b"):
        assert (
            "Node",
            f"node-{name}",
            "DisruptionTerminating",
            "Disrupting Node: Underutilized",
        ) in cluster.events
        assert (
            "NodeClaim",
            name,
            "DisruptionTerminating",
            "Disrupting NodeClaim: Underutilized",
        ) in cluster.events


def test_a_node_whose_pods_fit_elsewhere_is_deleted_without_a_replacement(env) -> None:
    ctx, cluster, cloud = env
    add_node(cluster, "big", "m5.2xlarge")
    add_node(cluster, "small", "m5.large")
    # big stays (a do-not-disrupt pod), so replacing both by one m5.xlarge is not an option
    add_pod(cluster, "web-1", "node-big", cpu="2", **{"karpenter.sh/do-not-disrupt": "true"})
    add_pod(cluster, "web-2", "node-small")

    report = pass_after_validation(ctx)
    [decision] = report.decisions
    assert decision.action == "delete"
    assert decision.nodeclaims == ["small"]
    assert cloud.requests == []
    assert objects.is_deleting(cluster.objects["NodeClaim"]["small"])
    assert report.savings_per_hour == pytest.approx(0.096)


@pytest.mark.parametrize(
    ("veto", "expected"),
    [
        ("node", 'Disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation'),
        ("pod", 'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/web-2)'),
    ],
)
def test_do_not_disrupt_on_the_node_or_a_pod_keeps_it_and_says_why(env, veto: str, expected: str) -> None:
    ctx, cluster, _cloud = env
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge", **({"karpenter.sh/do-not-disrupt": "true"} if veto == "node" else {}))
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b", **({"karpenter.sh/do-not-disrupt": "true"} if veto == "pod" else {}))
    ctx.clock.advance(consolidation.VALIDATION_SECONDS)
    report = pass_after_validation(ctx)
    assert all("b" not in d.nodeclaims for d in report.decisions)
    assert ("NodeClaim", "b", "DisruptionBlocked", expected) in cluster.events, "Karpenter's reason and words"


def two_busy_nodes_under_no_underutilized_budget(cluster: FakeCluster) -> dict[str, Any]:
    """Nodes a and b (m5.xlarge, one pod each) of a default NodePool whose budget allows no
    Underutilized disruption; the NodePool."""
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0", "reasons": ["Underutilized"]}]
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    add_node(cluster, "a", "m5.xlarge", pool=pool)
    add_node(cluster, "b", "m5.xlarge", pool=pool)
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    return pool


def test_a_zero_budget_for_underutilized_blocks_consolidation(env) -> None:
    ctx, cluster, cloud = env
    two_busy_nodes_under_no_underutilized_budget(cluster)
    for _ in range(3):
        report = one_pass(ctx)
        ctx.clock.advance(consolidation.VALIDATION_SECONDS)
    assert report.decisions == []
    assert cloud.requests == []
    assert any(e[2] == "Unconsolidatable" and "budget" in e[3] for e in cluster.events)


def test_when_empty_never_consolidates_a_busy_node(env) -> None:
    ctx, cluster, cloud = env
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"]["consolidationPolicy"] = "WhenEmpty"
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    add_node(cluster, "a", "m5.xlarge", pool=pool)
    add_node(cluster, "b", "m5.xlarge", pool=pool)
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    ctx.clock.advance(60)
    report = pass_after_validation_or_none(ctx)
    assert report.decisions == []
    assert cloud.requests == []


def pass_after_validation_or_none(ctx: Context) -> flow.DisruptionReport:
    one_pass(ctx)
    ctx.clock.advance(consolidation.VALIDATION_SECONDS)  # type: ignore[attr-defined]
    return one_pass(ctx)


def test_a_pending_pod_keeps_the_room_it_needs(env) -> None:
    ctx, cluster, _cloud = env
    add_node(cluster, "big", "m5.2xlarge")
    add_node(cluster, "small", "m5.large")
    add_pod(cluster, "web-1", "node-big", cpu="2")
    add_pod(cluster, "web-2", "node-small")
    add_pod(cluster, "hungry", None, cpu="5500m")  # big's free room: deleting small would leave web-2 none
    report = pass_after_validation_or_none(ctx)
    assert all(d.action != "delete" or "small" not in d.nodeclaims for d in report.decisions)


def test_a_replacement_that_fails_to_launch_abandons_the_command_and_untaints(env) -> None:
    ctx, cluster, cloud = env
    from nodewright.cloud.errors import LaunchError

    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    cloud.fail_with = LaunchError("x", "InsufficientInstanceCapacity", "no capacity")
    report = pass_after_validation(ctx)
    assert report.commands[-1].action == "abandoned"
    for name in ("a", "b"):
        assert not objects.has_taint(cluster.objects["Node"][f"node-{name}"], "karpenter.sh/disrupted")
        assert execute.COMMAND_ANNOTATION not in objects.annotations_of(cluster.objects["NodeClaim"][name])
        assert condition(cluster, name, "DisruptionReason") is None, "cleared, as Karpenter clears it"
    assert any(e[2] == "DisruptionAbandoned" for e in cluster.events)


def test_a_replacement_not_initialized_in_time_abandons_and_a_crash_leaves_no_orphaned_taint(env) -> None:
    ctx, cluster, _cloud = env
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    pass_after_validation(ctx)
    ctx.clock.advance(execute.REPLACEMENT_TIMEOUT.total_seconds() + 1)
    report = one_pass(ctx)
    assert report.commands[0].action == "abandoned"
    assert "not initialized" in report.commands[0].detail
    assert not any(objects.has_taint(n, "karpenter.sh/disrupted") for n in cluster.objects["Node"].values())

    # A crash left a taint nobody owns (e.g. the annotation was removed by hand): lifted next pass.
    cluster.taint_node("node-a", [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    one_pass(ctx)
    assert not objects.has_taint(cluster.objects["Node"]["node-a"], "karpenter.sh/disrupted")


def test_a_drifted_node_is_replaced_before_it_is_drained_and_empty_drifted_ones_go_first(env) -> None:
    ctx, cluster, cloud = env
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"]["consolidationPolicy"] = "WhenEmpty"
    pool["spec"]["disruption"]["consolidateAfter"] = "Never"
    old = copy.deepcopy(pool)
    old["spec"]["template"]["metadata"] = {"labels": {"team": "old"}}
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    add_node(cluster, "busy", "m5.large", pool=old)
    add_node(cluster, "idle", "m5.large", pool=old)
    add_pod(cluster, "web-1", "node-busy")

    report = one_pass(ctx)  # the budget (100%) allows both in one pass: the empty one first
    assert report.drifted == {"busy": "NodePoolDrifted", "idle": "NodePoolDrifted"}
    first, second = report.decisions
    assert (first.method, first.action, first.nodeclaims) == ("drift", "delete", ["idle"])
    assert (second.method, second.action, second.nodeclaims) == ("drift", "replace", ["busy"])
    assert len(cloud.requests) == 1
    assert not objects.is_deleting(cluster.objects["NodeClaim"]["busy"])


# --- issue 24: PDBs, empty nodes, destinations, eventual drift, prices, drift in parallel ---------


def add_pdb(cluster: FakeCluster, name: str, app: str, *, status: dict[str, Any] | None, **spec: Any) -> None:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {**spec, "selector": {"matchLabels": {"app": app}}},
    }
    if status is not None:
        body["status"] = {"observedGeneration": 1, **status}
    cluster.add("PodDisruptionBudget", body)


def consolidation_events(cluster: FakeCluster, name: str) -> list[str]:
    """What the NodeClaim was told about why it stays: Karpenter's DisruptionBlocked for a veto,
    Unconsolidatable for a simulation that found no command."""
    return [
        e[3]
        for e in cluster.events
        if e[:2] == ("NodeClaim", name) and e[2] in ("DisruptionBlocked", "Unconsolidatable")
    ]


@pytest.mark.parametrize(
    ("pdbs", "expected"),
    [
        (
            [("one", {"disruptionsAllowed": 1}), ("two", {"disruptionsAllowed": 1})],
            "pod default/web-2 is covered by 2 PDBs (default/one, default/two)",
        ),
        ([("fresh", None)], "PDB default/fresh has no status for its spec yet"),
    ],
    ids=["two-pdbs-each-allowing-one", "pdb-without-status"],
)
def test_two_pdbs_or_a_pdb_without_status_keep_the_node_and_say_why(
    env, pdbs: list[tuple[str, dict[str, Any] | None]], expected: str
) -> None:
    """The Eviction API refuses a pod covered by two PDBs (500) and one whose PDB has no status yet
    (429): a command on that node would leave it tainted and cordoned for good."""
    ctx, cluster, _cloud = env
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    for name, status in pdbs:
        add_pdb(cluster, name, "web-2", status=status, maxUnavailable=1)

    report = pass_after_validation_or_none(ctx)

    assert all("b" not in d.nodeclaims for d in report.decisions), report.decisions
    assert not objects.has_taint(cluster.objects["Node"]["node-b"], "karpenter.sh/disrupted")
    assert any(expected in why for why in consolidation_events(cluster, "b")), cluster.events


def test_multi_node_consolidation_leaves_empty_nodes_to_emptiness_and_its_budget(env) -> None:
    """Budgets [{nodes: 0, reasons: [Empty]}, {nodes: 100%}]: the empty nodes are emptiness's, which
    may not remove them now; multi-node consolidation must not take them instead (Karpenter skips
    candidates without reschedulable pods)."""
    ctx, cluster, _cloud = env
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0", "reasons": ["Empty"]}, {"nodes": "100%"}]
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    for name in ("empty-1", "empty-2", "busy-1", "busy-2"):
        add_node(cluster, name, "m5.xlarge", pool=pool)
    daemon = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds"}]}
    for name in ("empty-1", "empty-2"):
        add_pod(cluster, f"agent-{name}", f"node-{name}", cpu="100m")
        cluster.objects["Pod"][f"agent-{name}"]["metadata"].update(daemon)
    add_pod(cluster, "web-1", "node-busy-1")
    add_pod(cluster, "web-2", "node-busy-2")

    report = pass_after_validation_or_none(ctx)

    taken = {n for d in report.decisions for n in d.nodeclaims}
    assert report.decisions, "the underutilized nodes are still consolidated"
    assert taken.isdisjoint({"empty-1", "empty-2"}), report.decisions
    assert report.held["empty-1"].startswith("budget"), report.held


@pytest.mark.parametrize("destination", ["nodeclaim-deleting", "nodeclaim-not-initialized"])
def test_consolidation_never_counts_on_a_leaving_or_uninitialized_node_as_a_destination(
    env, destination: str
) -> None:
    """The node of a NodeClaim being deleted (not tainted yet) goes; one not yet Initialized may never
    become Ready (Karpenter: "would schedule against uninitialized nodeclaim"). Deleting the small
    node on their strength would evict its pod to nowhere."""
    ctx, cluster, _cloud = env
    add_node(cluster, "roomy", "m5.2xlarge")
    roomy = cluster.objects["NodeClaim"]["roomy"]
    if destination == "nodeclaim-deleting":
        roomy["metadata"]["deletionTimestamp"] = "2026-12-02T11:59:00Z"
    else:
        roomy["status"]["conditions"] = [
            c for c in roomy["status"]["conditions"] if c["type"] != "Initialized"
        ]
    add_node(cluster, "small", "m6g.large")  # the cheapest type: no cheaper replacement exists
    add_pod(cluster, "web-1", "node-small")

    report = pass_after_validation_or_none(ctx)

    assert report.decisions == [], "no command may rely on the leaving or starting node"
    assert not objects.is_deleting(cluster.objects["NodeClaim"]["small"])
    if destination == "nodeclaim-not-initialized":
        assert any(
            "would schedule against uninitialized nodeclaim/roomy" in why
            for why in consolidation_events(cluster, "small")
        ), cluster.events


def test_the_pods_of_a_deleting_node_keep_the_room_they_will_need(env) -> None:
    """The pod still running on a deleting node is about to move: the room it needs is not free to a
    consolidation (Karpenter adds the deleting nodes' pods to the simulation)."""
    ctx, cluster, _cloud = env
    add_node(cluster, "anchor", "m5.xlarge")
    add_pod(cluster, "web-1", "node-anchor", cpu="2", **{"karpenter.sh/do-not-disrupt": "true"})
    add_node(cluster, "leaving", "m5.xlarge")
    cluster.objects["NodeClaim"]["leaving"]["metadata"]["deletionTimestamp"] = "2026-12-02T11:59:00Z"
    cluster.taint_node("node-leaving", [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    add_pod(cluster, "moving", "node-leaving", cpu="1500m")  # anchor's free room: 1.92 CPU
    add_node(cluster, "small", "m6g.large")
    add_pod(cluster, "web-2", "node-small", cpu="1")

    report = pass_after_validation_or_none(ctx)

    assert all(d.action != "delete" for d in report.decisions), report.decisions
    assert not objects.is_deleting(cluster.objects["NodeClaim"]["small"])


def drifted_pool(cluster: FakeCluster, **disruption: Any) -> dict[str, Any]:
    """The NodePool edited (its template's labels): every node made with ``old`` has drifted."""
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"].update({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"})
    pool["spec"]["disruption"].update(disruption)
    old = copy.deepcopy(pool)
    old["spec"]["template"]["metadata"] = {"labels": {"team": "old"}}
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    return old


@pytest.mark.parametrize("blocker", ["do-not-disrupt", "pdb"])
def test_drift_is_eventual_for_a_nodeclaim_with_a_termination_grace_period(env, blocker: str) -> None:
    """Karpenter v1: with terminationGracePeriod set, do-not-disrupt pods and blocking PDBs do not
    hold drift back (the drain is bounded by the grace period); without it they do. The held pod
    leaves only at the deadline, so no replacement is launched for it now (Karpenter simulates only
    currently reschedulable pods): the command is a delete, and the pod is provisioned for when it
    is evicted."""
    ctx, cluster, _cloud = env
    old = drifted_pool(cluster)
    for name in ("bounded", "unbounded"):
        add_node(cluster, name, "m5.large", pool=old)
        annotations = {"karpenter.sh/do-not-disrupt": "true"} if blocker == "do-not-disrupt" else {}
        add_pod(cluster, f"web-{name}", f"node-{name}", cpu="1500m", **annotations)
        if blocker == "pdb":
            add_pdb(cluster, f"web-{name}", f"web-{name}", status={"disruptionsAllowed": 0}, maxUnavailable=0)
    cluster.objects["NodeClaim"]["bounded"]["spec"]["terminationGracePeriod"] = "1h"

    report = one_pass(ctx)

    assert [(d.method, d.action, d.nodeclaims) for d in report.decisions] == [
        ("drift", "delete", ["bounded"])
    ]
    assert objects.is_deleting(cluster.objects["NodeClaim"]["bounded"]), "its drain is bounded by 1h"
    assert ("NodeClaim", "unbounded", "DisruptionBlocked") in {e[:3] for e in cluster.events}


def test_a_node_whose_instance_type_has_no_price_is_not_consolidated_and_says_why(env) -> None:
    """Karpenter's NewCandidate skips a node whose instance type (and so its price) it cannot resolve;
    deleting it would be reported as saving $0.00/h."""
    ctx, cluster, _cloud = env
    add_node(cluster, "anchor", "m5.2xlarge")
    add_pod(cluster, "web-1", "node-anchor", **{"karpenter.sh/do-not-disrupt": "true"})
    add_node(cluster, "mystery", "m5.large")
    for kind, name in (("NodeClaim", "mystery"), ("Node", "node-mystery")):
        cluster.objects[kind][name]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "x9.mystery"
    add_pod(cluster, "web-2", "node-mystery")

    report = pass_after_validation_or_none(ctx)

    assert report.decisions == []
    assert not objects.is_deleting(cluster.objects["NodeClaim"]["mystery"])
    assert any("x9.mystery" in why and "no price" in why for why in consolidation_events(cluster, "mystery"))


def test_drift_starts_as_many_replacements_in_one_pass_as_its_budget_allows(env) -> None:
    ctx, cluster, cloud = env
    old = drifted_pool(cluster, budgets=[{"nodes": "2", "reasons": ["Drifted"]}])
    for name in ("d1", "d2", "d3"):
        add_node(cluster, name, "m5.large", pool=old)
        add_pod(cluster, f"web-{name}", f"node-{name}", cpu="1500m")  # fits no other node

    report = one_pass(ctx)

    assert [(d.method, d.action) for d in report.decisions] == [("drift", "replace")] * 2
    assert len(cloud.requests) == 2, "one replacement per command, each launched before its drain"
    started = {n for d in report.decisions for n in d.nodeclaims}
    (waiting,) = {"d1", "d2", "d3"} - started
    assert report.held[waiting].startswith("budget"), report.held
    for name in started:
        assert not objects.is_deleting(cluster.objects["NodeClaim"][name]), "replaced before it drains"


def test_drift_goes_on_while_drift_commands_are_in_flight(env) -> None:
    ctx, cluster, cloud = env
    old = drifted_pool(cluster, budgets=[{"nodes": "1", "reasons": ["Drifted"]}])
    for name in ("d1", "d2"):
        add_node(cluster, name, "m5.large", pool=old)
        add_pod(cluster, f"web-{name}", f"node-{name}", cpu="1500m")  # fits no other node
    [first] = one_pass(ctx).decisions
    assert one_pass(ctx).decisions == [], "the budget of one is taken by the command in flight"

    pool = cluster.objects["NodePool"]["default"]
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "2", "reasons": ["Drifted"]}]
    report = one_pass(ctx)

    assert [c.action for c in report.commands[:1]] == ["waiting"], "the first is still in flight"
    [second] = report.decisions
    assert second.method == "drift"
    assert second.nodeclaims != first.nodeclaims
    assert len(cloud.requests) == 2


def test_spot_to_spot_is_behind_karpenters_feature_gate_off_by_default(env) -> None:
    """SpotToSpotConsolidation off (the default): a spot node whose pods would fit a cheaper spot
    node is not replaced at all (nor by on-demand), and says so as Karpenter does; on: it is."""
    import dataclasses

    ctx, cluster, cloud = env
    cloud.types = catalog(spot=True, zones=(ZONE,))
    spot_pool = copy.deepcopy(NODEPOOL)
    spot_pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
    ]
    cluster.objects["NodePool"]["default"].update(copy.deepcopy(spot_pool))
    add_node(cluster, "big", "m5.2xlarge", pool=spot_pool, capacity_type="spot")
    add_pod(cluster, "web-1", "node-big")
    assert not ctx.settings.spot_to_spot_consolidation, "off by default"

    for _ in range(2):
        report = one_pass(ctx)
        assert report.decisions == []
        ctx.clock.advance(consolidation.VALIDATION_SECONDS)  # type: ignore[attr-defined]
    assert ("NodeClaim", "big", "Unconsolidatable", consolidation.SPOT_TO_SPOT_DISABLED) in cluster.events
    assert cloud.requests == []

    ctx.settings = dataclasses.replace(ctx.settings, spot_to_spot_consolidation=True)
    held = one_pass(ctx).held
    # On, the spot-to-spot rules apply (this catalog has too few cheaper spot types for them).
    assert held["big"] == (
        "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate "
        "to consolidate, got 5"
    )


def test_consolidatable_follows_consolidate_after_since_the_last_pod_event(env) -> None:
    """Karpenter's Consolidatable condition: True once consolidateAfter has passed since the last
    pod event; removed when a pod arrives (the wait starts again) or consolidation is disabled."""
    ctx, cluster, _cloud = env
    cluster.objects["NodePool"]["default"]["spec"]["disruption"]["consolidateAfter"] = "5m"
    add_node(cluster, "a", "m5.2xlarge")
    add_pod(cluster, "web-1", "node-a", **{"karpenter.sh/do-not-disrupt": "true"})
    one_pass(ctx)  # the pod event is recorded now
    assert condition(cluster, "a", "Consolidatable") is None
    ctx.clock.advance(301)  # type: ignore[attr-defined]
    one_pass(ctx)
    assert condition(cluster, "a", "Consolidatable") == ("True", "Consolidatable", "Consolidatable")
    add_pod(cluster, "web-2", "node-a")
    one_pass(ctx)
    assert condition(cluster, "a", "Consolidatable") is None, "a pod event restarts the wait"
    ctx.clock.advance(301)  # type: ignore[attr-defined]
    one_pass(ctx)
    assert condition(cluster, "a", "Consolidatable") is not None
    cluster.objects["NodePool"]["default"]["spec"]["disruption"]["consolidateAfter"] = "Never"
    one_pass(ctx)
    assert condition(cluster, "a", "Consolidatable") is None, "consolidation disabled"


def test_a_commands_replacement_is_not_removed_as_empty_when_the_command_drains(env) -> None:
    """The demo's part four: the replacement came up empty (the candidates' pods move to it only as
    they drain) and was past consolidateAfter and the nomination wait by the time the command
    drained, so the same pass removed it as Empty. While the command's candidates are there, it is
    neither emptiness's nor consolidation's."""
    from datetime import timedelta

    ctx, cluster, cloud = env
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    assert pass_after_validation(ctx).decisions
    [request] = cloud.requests
    replacement = cluster.objects["NodeClaim"][request.nodeclaim_name]
    initialized = ctx.clock.now() - timedelta(seconds=consolidation.NOMINATION_SECONDS + 10)
    replacement["status"]["conditions"].append(
        {"type": "Initialized", "status": "True", "lastTransitionTime": objects.format_time(initialized)}
    )
    replacement["status"]["nodeName"] = f"node-{request.nodeclaim_name}"
    cluster.add(
        "Node",
        {
            "metadata": {
                "name": f"node-{request.nodeclaim_name}",
                "labels": dict(replacement["metadata"]["labels"]),
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": {"providerID": replacement["status"]["providerID"]},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
            },
        },
    )

    for _ in range(2):  # the pass that drains the candidates, then one while they drain
        report = one_pass(ctx)
        assert not objects.is_deleting(cluster.objects["NodeClaim"][request.nodeclaim_name])
        assert report.disrupted == []
        assert report.held[request.nodeclaim_name].startswith("replacement for a, b"), report.held
    assert all(objects.is_deleting(cluster.objects["NodeClaim"][n]) for n in ("a", "b"))
    # A pod of theirs has landed: a replacement with pods is no consolidation candidate either yet.
    add_pod(cluster, "web-1-moved", f"node-{request.nodeclaim_name}")
    world = observe(ctx)
    found, why_not = consolidation.candidates(world, nodepools.triage(world).usable, {}, ignore_waits=True)
    assert request.nodeclaim_name not in {c.name for c in found}
    assert why_not[request.nodeclaim_name].startswith("replacement for a, b"), why_not


def test_a_node_is_told_why_it_stays_once_per_karpenters_fifteen_minutes_whatever_the_words(env) -> None:
    """Karpenter dedupes Unconsolidatable by the object alone for 15 minutes: a message that changes
    (another pod's name, another uninitialized NodeClaim) is no new event, which at 5,000 nodes
    would be 10,000 writes each time the words change."""
    ctx, cluster, _ = env
    pool = two_busy_nodes_under_no_underutilized_budget(cluster)
    one_pass(ctx)
    assert consolidation_events(cluster, "a") == [consolidation.budget_message("default", "Underutilized")]

    pool["spec"]["disruption"]["consolidateAfter"] = "Never"
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    ctx.clock.advance(14 * 60)  # type: ignore[attr-defined]
    one_pass(ctx)
    assert len(consolidation_events(cluster, "a")) == 1, "other words, the same object: not yet"

    ctx.clock.advance(60)  # type: ignore[attr-defined]
    one_pass(ctx)
    assert consolidation_events(cluster, "a")[1:] == [consolidation.consolidation_disabled("default")]
