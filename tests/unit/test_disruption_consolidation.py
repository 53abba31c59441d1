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
    **annotations: str,
) -> None:
    instance = f"i-{abs(hash(name)) % 10**17:017d}"
    claim_labels = {
        "karpenter.sh/nodepool": "default",
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.sh/capacity-type": "on-demand",
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
    cluster: FakeCluster, name: str, node: str | None, *, cpu: str = "500m", **annotations: str
) -> None:
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]
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
    report = flow.DisruptionReport()
    decision, _terms = flow.disruption_pass(ctx, FakeLease(), report)
    report.held = decision.held
    return report


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
    assert decision["method"] == "multi"
    assert decision["action"] == "replace"
    assert sorted(decision["nodeclaims"]) == ["a", "b"]
    assert decision["pricePerHourBefore"] == pytest.approx(0.384)
    assert decision["pricePerHourAfter"] < 0.384
    assert decision["description"].startswith("Underutilized, replacing 2 nodes (m5.xlarge x2) with ")
    [request] = cloud.requests
    assert {t.name for t in request.instance_types} <= {"c5.large", "m5.large", "m6g.large", "r5.large"}
    for name in ("a", "b"):
        node = cluster.objects["Node"][f"node-{name}"]
        assert objects.has_taint(node, "karpenter.sh/disrupted", "NoSchedule"), "nothing new lands on it"
        assert not objects.is_deleting(cluster.objects["NodeClaim"][name]), (
            "not drained before the replacement"
        )

    replacement = request.nodeclaim_name
    assert one_pass(ctx).commands[0]["action"] == "waiting"
    cluster.objects["NodeClaim"][replacement]["status"]["conditions"].append(
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-02T12:00:30Z"}
    )
    report = one_pass(ctx)
    assert report.commands[0]["action"] == "draining"
    assert all(objects.is_deleting(cluster.objects["NodeClaim"][n]) for n in ("a", "b"))
    reasons = {e[2] for e in cluster.events}
    assert "Disrupting" in reasons


def test_a_node_whose_pods_fit_elsewhere_is_deleted_without_a_replacement(env) -> None:
    ctx, cluster, cloud = env
    add_node(cluster, "big", "m5.2xlarge")
    add_node(cluster, "small", "m5.large")
    # big stays (a do-not-disrupt pod), so replacing both by one m5.xlarge is not an option
    add_pod(cluster, "web-1", "node-big", cpu="2", **{"karpenter.sh/do-not-disrupt": "true"})
    add_pod(cluster, "web-2", "node-small")

    report = pass_after_validation(ctx)
    [decision] = report.decisions
    assert decision["action"] == "delete"
    assert decision["nodeclaims"] == ["small"]
    assert cloud.requests == []
    assert objects.is_deleting(cluster.objects["NodeClaim"]["small"])
    assert report.savings_per_hour == pytest.approx(0.096)


@pytest.mark.parametrize(
    ("veto", "expected"),
    [
        ("node", "node node-b has karpenter.sh/do-not-disrupt"),
        ("pod", "pod default/web-2 has karpenter.sh/do-not-disrupt"),
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
    assert all("b" not in d["nodeclaims"] for d in report.decisions)
    assert ("NodeClaim", "b", "Unconsolidatable", expected) in cluster.events


def test_a_zero_budget_for_underutilized_blocks_consolidation(env) -> None:
    ctx, cluster, cloud = env
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0", "reasons": ["Underutilized"]}]
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    add_node(cluster, "a", "m5.xlarge", pool=pool)
    add_node(cluster, "b", "m5.xlarge", pool=pool)
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
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
    assert all(d["action"] != "delete" or "small" not in d["nodeclaims"] for d in report.decisions)


def test_a_replacement_that_fails_to_launch_abandons_the_command_and_untaints(env) -> None:
    ctx, cluster, cloud = env
    from nodewright.cloud.errors import LaunchError

    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    cloud.fail_with = LaunchError("x", "InsufficientInstanceCapacity", "no capacity")
    report = pass_after_validation(ctx)
    assert report.commands[-1]["action"] == "abandoned"
    for name in ("a", "b"):
        assert not objects.has_taint(cluster.objects["Node"][f"node-{name}"], "karpenter.sh/disrupted")
        assert execute.COMMAND_ANNOTATION not in objects.annotations_of(cluster.objects["NodeClaim"][name])
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
    assert report.commands[0]["action"] == "abandoned"
    assert "not initialized" in report.commands[0]["detail"]
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

    report = one_pass(ctx)
    assert report.drifted == {"busy": "NodePoolDrifted", "idle": "NodePoolDrifted"}
    [first] = report.decisions
    assert (first["method"], first["action"], first["nodeclaims"]) == ("drift", "delete", ["idle"])
    report = one_pass(ctx)  # idle is draining: the next command waits for no budget here (100%)
    [second] = report.decisions
    assert (second["method"], second["action"], second["nodeclaims"]) == ("drift", "replace", ["busy"])
    assert len(cloud.requests) == 1
    assert not objects.is_deleting(cluster.objects["NodeClaim"]["busy"])
