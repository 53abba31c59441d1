"""The World's lookups: each written once, null-safe, and the cloud asked at most once per pass."""

from __future__ import annotations

from typing import Any

from fakes import T0, FakeClock, FakeCloudProvider
from nodewright.cloud.pricetable import PriceTable
from nodewright.state.views import ClaimView
from nodewright.state.world import World

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def nodeclaim(name: str, *, instance: str | None = None, **spec: Any) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": "default",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-west-2a",
                "karpenter.sh/capacity-type": "spot",
            },
        },
        "spec": spec,
        "status": {},
    }
    if instance:
        claim["status"] = {"providerID": f"aws:///us-west-2a/{instance}", "nodeName": f"node-{name}"}
    return claim


def node(name: str, instance: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"providerID": f"aws:///us-west-2a/{instance}"}}


def pod(name: str, on: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": on}}


class CountingCloud(FakeCloudProvider):
    def __init__(self) -> None:
        super().__init__(FakeClock(), prices=PriceTable(on_demand={"m5.large": 0.096}, spot={}))
        self.asked: list[str] = []
        self.priced = 0

    def instance_types(self, nodeclass: Any) -> list[Any]:
        self.asked.append(nodeclass["metadata"]["name"])
        return super().instance_types(nodeclass)

    def prices(self) -> PriceTable:
        self.priced += 1
        return PriceTable(on_demand={"m5.large": 0.096}, spot={("m5.large", "us-west-2a"): 0.03})


def world(**kwargs: Any) -> World:
    pool = {
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": REF}}},
    }
    defaults: dict[str, Any] = {
        "taken_at": T0,
        "nodeclaims": [],
        "nodes": [],
        "pods": [],
        "nodepools": [pool],
        "nodeclasses": [{"metadata": {"name": "default"}}],
    }
    return World(**{**defaults, **kwargs})


def test_nodeclass_of_reads_a_nodepool_or_a_nodeclaim_and_is_none_without_a_reference() -> None:
    seen = world()
    assert seen.nodeclass_of(seen.nodepools[0]) == {"metadata": {"name": "default"}}
    assert seen.nodeclass_of(nodeclaim("a", nodeClassRef=REF)) == {"metadata": {"name": "default"}}
    assert seen.nodeclass_of(nodeclaim("b")) is None, "a NodeClaim without nodeClassRef has none"
    assert seen.nodeclass_of(nodeclaim("c", nodeClassRef={**REF, "name": "gone"})) is None
    assert seen.nodeclass_of({"spec": None}) is None
    assert seen.nodepool_of(nodeclaim("a")) == seen.nodepools[0]
    assert seen.nodepool_of({"metadata": {"name": "x"}}) is None


def test_the_node_of_a_nodeclaim_is_the_one_running_its_instance_and_pods_on_it_are_its_own() -> None:
    claim = nodeclaim("a", instance="i-0aaaaaaaaaaaaaaa1")
    running = node("node-a", "i-0aaaaaaaaaaaaaaa1")
    seen = world(
        nodeclaims=[claim, nodeclaim("in-flight")],
        nodes=[running, {"metadata": {"name": "no-provider-id"}, "spec": {}}],
        pods=[pod("web", "node-a"), pod("other", "node-b"), {"metadata": {"name": "pending"}, "spec": {}}],
    )
    assert seen.node_of(claim) is running
    assert seen.node_of(nodeclaim("in-flight")) is None
    assert [p["metadata"]["name"] for p in seen.pods_on(running)] == ["web"]
    assert [p["metadata"]["name"] for p in seen.pods_on("node-b")] == ["other"]
    assert seen.pods_on("nowhere") == []


def test_without_nodes_drops_the_nodes_their_nodeclaims_and_their_pods() -> None:
    claim = nodeclaim("a", instance="i-0aaaaaaaaaaaaaaa1")
    kept = nodeclaim("b", instance="i-0bbbbbbbbbbbbbbb2")
    seen = world(
        nodeclaims=[claim, kept, nodeclaim("in-flight")],
        nodes=[node("node-a", "i-0aaaaaaaaaaaaaaa1"), node("node-b", "i-0bbbbbbbbbbbbbbb2")],
        pods=[pod("web", "node-a"), pod("api", "node-b")],
    )
    left = seen.without_nodes(["node-a"])
    assert [c["metadata"]["name"] for c in left.nodeclaims] == ["b", "in-flight"]
    assert [n["metadata"]["name"] for n in left.nodes] == ["node-b"]
    assert [p["metadata"]["name"] for p in left.pods] == ["api"]
    assert len(seen.nodes) == 2, "the observed world is unchanged"


def test_the_cloud_is_asked_once_per_pass_for_types_and_prices() -> None:
    cloud = CountingCloud()
    seen = world(cloud=cloud)
    claim = nodeclaim(
        "a",
        nodeClassRef=REF,
        requirements=[
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge", "m5.large"]}
        ],
    )
    assert [t.name for t in seen.candidates_for(ClaimView.of(claim), limit=60)] == ["m5.xlarge", "m5.large"]
    assert [t.name for t in seen.candidates_for(ClaimView.of(claim), limit=1)] == ["m5.xlarge"]
    assert [t.name for t in seen.without_nodes([]).instance_types("default")] == ["m5.large", "m5.xlarge"]
    assert cloud.asked == ["default"], "derived worlds share what this pass already asked"
    assert seen.instance_types("gone") == []

    assert seen.price_of(claim) == 0.03  # spot: the (type, zone) price
    on_demand = nodeclaim("b")
    on_demand["metadata"]["labels"]["karpenter.sh/capacity-type"] = "on-demand"
    assert seen.price_of(on_demand) == 0.096
    assert seen.price_of({"metadata": {"labels": {}}}) is None, "not launched: no type, no price"
    assert cloud.priced == 1


def test_an_idle_world_never_asks_the_cloud() -> None:
    cloud = CountingCloud()
    world(cloud=cloud).nodeclass_of({"spec": {}})
    assert (cloud.asked, cloud.priced) == ([], 0)


class RealTypesCloud(CountingCloud):
    """The scheduler's own instance types (labels, capacity, offerings), on-demand and spot in one zone."""

    def instance_types(self, nodeclass: Any) -> list[Any]:
        from nodewright.scheduling import Offering as SchedulingOffering
        from nodewright.scheduling import instance_type_from_ec2
        from test_scheduling_support import ec2_info

        self.asked.append(nodeclass["metadata"]["name"])
        return [
            instance_type_from_ec2(
                ec2_info(name),
                [
                    SchedulingOffering("us-west-2a", "on-demand", price),
                    SchedulingOffering("us-west-2a", "spot", 0.03),
                ],
            )
            for name, price in (("m5.large", 0.096), ("m5.xlarge", 0.192))
        ]


def savings_plan(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "savings-plan"},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}
            ],
            **spec,
        },
    }


def test_overlays_change_a_nodepools_types_its_nodeclaims_candidates_and_their_price() -> None:
    cloud = RealTypesCloud()
    seen = world(cloud=cloud, nodeoverlays=[savings_plan(priceAdjustment="-75%")])
    overlaid = {t.name: t for t in seen.pool_instance_types("default")}
    assert {o.price for o in overlaid["m5.xlarge"].offerings if o.capacity_type == "on-demand"} == {0.048}
    assert {t.name: min(o.price for o in t.offerings) for t in seen.instance_types("default")}[
        "m5.xlarge"
    ] == 0.03
    claim = nodeclaim("a", nodeClassRef=REF)
    labels = claim["metadata"]["labels"]
    labels.update(
        {"node.kubernetes.io/instance-type": "m5.xlarge", "karpenter.sh/capacity-type": "on-demand"}
    )
    assert seen.price_of(claim) == 0.048, "consolidation prices the node as its NodePool's overlays do"
    (candidate,) = [t for t in seen.candidates_for(ClaimView.of(claim), limit=60) if t.name == "m5.xlarge"]
    assert candidate is overlaid["m5.xlarge"]
    assert seen.without_nodes(["x"]).pool_instance_types("default")[1] is overlaid["m5.xlarge"]
    assert cloud.asked == ["default"]


def test_without_overlays_the_nodepool_plans_with_its_nodeclasss_types_and_the_table_prices() -> None:
    cloud = RealTypesCloud()
    seen = world(cloud=cloud)
    assert seen.pool_instance_types("default") is seen.instance_types("default")
    claim = nodeclaim("a", nodeClassRef=REF)
    claim["metadata"]["labels"]["karpenter.sh/capacity-type"] = "on-demand"
    assert seen.price_of(claim) == 0.096
    assert seen.overlays is None


def test_observe_reads_nodeoverlays_only_with_the_gate() -> None:
    from dataclasses import replace

    from fakes import FakeCluster, fake_context
    from nodewright.state.world import observe

    clock = FakeClock()
    cluster = FakeCluster(clock)
    cluster.add("NodeOverlay", savings_plan(price="0.01"))
    ctx = fake_context(cluster, RealTypesCloud(), clock)
    assert observe(ctx).nodeoverlays == []  # Karpenter v1.14's NodeOverlay gate is off by default
    ctx.settings = replace(ctx.settings, node_overlay=True)
    assert [o["metadata"]["name"] for o in observe(ctx).nodeoverlays] == ["savings-plan"]


def test_observe_leaves_the_garbage_collector_running_after_a_read_and_after_a_failed_one() -> None:
    import gc

    import pytest
    from fakes import FakeCluster, fake_context
    from nodewright.state.world import observe

    clock = FakeClock()
    cluster = FakeCluster(clock)
    cluster.add("Pod", pod("web-1", "node-a"))
    ctx = fake_context(cluster, FakeCloudProvider(clock), clock)
    assert [p["metadata"]["name"] for p in observe(ctx).pods] == ["web-1"]
    assert gc.isenabled()

    def unreachable() -> list[dict[str, Any]]:
        raise ConnectionError("API server unreachable")

    cluster.list_pods = unreachable  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        observe(ctx)
    assert gc.isenabled()
    # A caller that runs with the collector off keeps it off.
    gc.disable()
    try:
        cluster.list_pods = lambda: []  # type: ignore[method-assign]
        observe(ctx)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_displaced_pod_is_planned_unbound_and_pending_and_the_observed_pod_is_unchanged() -> None:
    from nodewright.scheduling.model import pod_from_k8s
    from nodewright.state.pods import as_pending, is_provisionable

    bound = {
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "web", "resources": {"requests": {"cpu": "500m"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    pending = as_pending(bound)
    assert "nodeName" not in pending["spec"]
    assert pending["status"]["phase"] == "Pending"
    assert is_provisionable(pending)
    assert pod_from_k8s(pending).spec == pod_from_k8s(bound).spec
    assert pod_from_k8s(pending).node_name is None
    assert bound["spec"]["nodeName"] == "node-a"
    assert bound["status"]["phase"] == "Running"
    assert as_pending({"metadata": {"name": "bare"}})["spec"] == {}
