"""Static NodePools (``spec.replicas``) in the provisioning pass, as Karpenter v1.14's static provisioning
and deprovisioning controllers keep them (kubernetes-sigs/karpenter ``pkg/controllers/static``): that
many NodeClaims whatever the pods, ``limits.nodes`` counting every NodeClaim not yet gone, scale-down
of the NodeClaims beyond the replicas in Karpenter's order, no pending pod planned onto a new static
NodeClaim, and nothing at all while the stack's ``staticCapacity`` setting is off."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
from fakes import FakeClock, FakeCloudProvider, FakeCluster, RecordingLogger, RecordingMetrics
from nodewright.api import labels
from nodewright.cluster.objects import format_time
from nodewright.cluster.resources import NODECLAIMS
from nodewright.context import Context
from nodewright.provisioning import flow, garbage, static
from nodewright.scheduling import Offering, instance_type_from_ec2
from nodewright.settings import Settings
from nodewright.state import nodepools
from nodewright.state.world import observe


def ec2_type(name: str, vcpus: int, mib: int) -> dict[str, Any]:
    return {
        "InstanceType": name,
        "VCpuInfo": {"DefaultVCpus": vcpus},
        "MemoryInfo": {"SizeInMiB": mib},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
        "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
    }


TYPES = [
    instance_type_from_ec2(ec2_type("m5.large", 2, 8192), [Offering("us-west-2a", "on-demand", 0.096)]),
    instance_type_from_ec2(ec2_type("c5.large", 2, 4096), [Offering("us-west-2a", "on-demand", 0.085)]),
    instance_type_from_ec2(ec2_type("m5.xlarge", 4, 16384), [Offering("us-west-2a", "on-demand", 0.192)]),
]


def static_pool(name: str = "static", replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [],
                },
            },
            **spec,
        },
    }


NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "metadata": {"name": "default"}, "spec": {"role": "r"}}


def make(static_capacity: bool = True) -> tuple[Context, FakeCluster, FakeCloudProvider]:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cloud.types = list(TYPES)
    cluster.add("EC2NodeClass", NODECLASS)
    settings = Settings(cluster_name="test", region="us-west-2", static_capacity=static_capacity)
    ctx = Context(settings, cluster, cloud, None, RecordingLogger(), RecordingMetrics(), clock=clock)
    return ctx, cluster, cloud


@pytest.fixture(autouse=True)
def _valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodepools, "validation_errors", lambda doc: [])
    monkeypatch.setattr(flow, "_recent_events", {})
    garbage.reset_gc_clock(templates=True)


def claims_of(cluster: FakeCluster, pool: str = "static") -> list[dict[str, Any]]:
    return [
        c
        for c in cluster.objects["NodeClaim"].values()
        if c["metadata"]["labels"].get(labels.NODEPOOL) == pool
    ]


def live(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in claims if not c["metadata"].get("deletionTimestamp")]


def pending_pod(name: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"pod-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def test_a_static_nodepool_launches_its_replicas_with_no_pod_pending() -> None:
    ctx, cluster, cloud = make()
    cluster.add("NodePool", static_pool(replicas=3))

    report = flow.provision(ctx)

    assert len(report.created) == 3
    assert len(report.launched) == 3
    claims = claims_of(cluster)
    assert len(claims) == 3
    for claim in claims:
        assert claim["metadata"]["labels"]["team"] == "a"
        assert claim["spec"]["resources"]["requests"] == {}
        (types,) = [r["values"] for r in claim["spec"]["requirements"] if r["key"] == labels.INSTANCE_TYPE]
        assert types == ["c5.large", "m5.large", "m5.xlarge"]  # every compatible type, cheapest first
        assert claim["metadata"]["ownerReferences"][0]["name"] == "static"
    assert {r.instance_types[0].name for r in cloud.requests} == {"c5.large"}
    # The next pass finds them all and creates none.
    assert flow.provision(ctx).created == []


def test_while_the_stack_setting_is_off_a_static_nodepool_launches_nothing_and_says_so() -> None:
    ctx, cluster, _ = make(static_capacity=False)
    cluster.add("NodePool", static_pool(replicas=2))

    assert flow.provision(ctx).created == []

    pool = cluster.objects["NodePool"]["static"]
    (condition,) = [c for c in pool["status"]["conditions"] if c["type"] == "FieldsNotActedOn"]
    assert condition["status"] == "True"
    assert condition["message"].startswith("spec.replicas: not acted on (the stack's staticCapacity setting")


def test_pending_pods_are_never_planned_onto_a_new_static_nodeclaim() -> None:
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=0))
    cluster.add("Pod", pending_pod("web-1"))

    report = flow.provision(ctx)

    assert report.created == []
    assert "default/web-1" in report.unschedulable


def test_limits_nodes_caps_the_replicas_and_says_why() -> None:
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=5, limits={"nodes": "3"}))

    assert len(flow.provision(ctx).created) == 3
    assert flow.provision(ctx).created == []
    world = observe(ctx)
    held = static.reconcile(ctx, world, nodepools.triage(world)).held
    assert held == {"static": "NodePool static: limits.nodes 3 reached"}


def test_a_deleted_replica_is_replaced_once_limits_nodes_has_room() -> None:
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=2, limits={"nodes": "2"}))
    flow.provision(ctx)
    first = sorted(c["metadata"]["name"] for c in claims_of(cluster))[0]
    cluster.delete_nodeclaim(first)  # held by its finalizer: deleting, not gone

    assert flow.provision(ctx).created == []  # the deleting one still counts against limits.nodes

    cluster.remove_finalizer(NODECLAIMS, first, labels.TERMINATION_FINALIZER)
    assert len(flow.provision(ctx).created) == 1
    assert len(live(claims_of(cluster))) == 2


def register(cluster: FakeCluster, claim: dict[str, Any], *, pods: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment]
    """Give a launched NodeClaim its Node (what the kubelet and the lifecycle do), with pods bound."""
    name = claim["metadata"]["name"]
    node_name = f"node-{name}"
    cluster.add(
        "Node",
        {
            "metadata": {"name": node_name, "labels": dict(claim["metadata"]["labels"])},
            "spec": {"providerID": claim["status"]["providerID"]},
            "status": {
                "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    for pod in pods:
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = node_name
        bound["status"] = {"phase": "Running"}
        cluster.add("Pod", bound)


def test_scaling_down_deletes_unlaunched_then_empty_then_the_cheapest_to_disrupt() -> None:
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=4))
    flow.provision(ctx)
    names = sorted(c["metadata"]["name"] for c in claims_of(cluster))
    busy, quiet, empty, unlaunched = (cluster.objects["NodeClaim"][n] for n in names)
    unlaunched["status"].pop("providerID")
    daemon = {
        **pending_pod("ds-1"),
        "metadata": {
            "name": "ds-1",
            "namespace": "kube-system",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "controller": True}
            ],
        },
    }
    register(cluster, empty, pods=[daemon])
    register(cluster, quiet, pods=[pending_pod("a-1")])
    register(cluster, busy, pods=[pending_pod("b-1"), pending_pod("b-2"), pending_pod("b-3")])
    pool = cluster.objects["NodePool"]["static"]

    pool["spec"]["replicas"] = 3
    assert flow.provision(ctx).static_deleted == [unlaunched["metadata"]["name"]]
    pool["spec"]["replicas"] = 1
    assert flow.provision(ctx).static_deleted == [empty["metadata"]["name"], quiet["metadata"]["name"]]
    assert [c["metadata"]["name"] for c in live(claims_of(cluster))] == [busy["metadata"]["name"]]
    assert ("NodeClaim", quiet["metadata"]["name"], "Deprovisioning") in [e[:3] for e in cluster.events]


def test_a_node_with_a_do_not_disrupt_pod_goes_last() -> None:
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=2))
    flow.provision(ctx)
    held, plain = sorted((c for c in claims_of(cluster)), key=lambda c: c["metadata"]["name"])
    protected = pending_pod("keep")
    protected["metadata"]["annotations"] = {labels.DO_NOT_DISRUPT: "true"}
    register(cluster, held, pods=[protected])
    register(cluster, plain, pods=[pending_pod("x-1"), pending_pod("x-2")])
    cluster.objects["NodePool"]["static"]["spec"]["replicas"] = 1

    assert flow.provision(ctx).static_deleted == [plain["metadata"]["name"]]


def test_a_replica_being_replaced_for_drift_is_not_replaced_twice() -> None:
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=2))
    flow.provision(ctx)
    first, _second = sorted((c for c in claims_of(cluster)), key=lambda c: c["metadata"]["name"])
    register(cluster, first)
    node = cluster.objects["Node"][f"node-{first['metadata']['name']}"]
    node["spec"]["taints"] = [{"key": labels.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}]

    counted = nodepools.static_nodes(observe(ctx), "static")
    assert (len(counted.active), len(counted.drifting), len(counted.deleting)) == (1, 1, 0)
    assert flow.provision(ctx).created == []  # active + drifting = replicas
    assert flow.provision(ctx).static_deleted == []  # and no scale-down of the replacement's room


def test_a_static_nodepool_being_deleted_is_left_to_the_orphan_sweep() -> None:
    ctx, cluster, _ = make()
    pool = static_pool(replicas=2)
    cluster.add("NodePool", pool)
    flow.provision(ctx)
    stored = cluster.objects["NodePool"]["static"]
    stored["metadata"]["deletionTimestamp"] = format_time(ctx.clock.now() + timedelta(seconds=1))
    stored["metadata"]["finalizers"] = ["hold"]

    report = flow.provision(ctx)

    assert report.created == []
    assert sorted(report.garbage.orphans_deleted) == sorted(c["metadata"]["name"] for c in claims_of(cluster))
