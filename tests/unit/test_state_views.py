"""The typed views a pass reads NodePools, NodeClaims and Nodes through: each read once per World,
and never behind what the pass itself wrote to the objects."""

from __future__ import annotations

from typing import Any

from fakes import T0
from nodewright.api.models import INITIALIZED
from nodewright.state.views import ClaimView, NodeView
from nodewright.state.world import World


def claim(name: str = "a", **status: Any) -> dict[str, Any]:
    return {
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"karpenter.sh/nodepool": "default"},
        },
        "spec": {"expireAfter": "24h"},
        "status": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0", **status},
    }


def node(name: str = "n") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0"}}


def pool(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {"kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def world(**objects: Any) -> World:
    return World(
        taken_at=T0,
        nodeclaims=objects.get("nodeclaims", []),
        nodes=objects.get("nodes", []),
        pods=[],
        nodepools=objects.get("nodepools", []),
        nodeclasses=[],
    )


def test_a_nodeclaim_view_reads_its_fields_and_its_node_by_the_instance_both_name() -> None:
    w = world(nodeclaims=[claim()], nodes=[node()])
    (view,) = w.claim_views
    assert (view.name, view.nodepool, view.instance_id) == ("a", "default", "i-0123456789abcdef0")
    assert view.expire_after == "24h"
    assert view.termination_grace_period is None
    assert view.created is not None
    assert view.creation_timestamp == "2026-01-01T00:00:00Z"
    found = w.node_view_of(view)
    assert found is not None
    assert found.name == "n"
    assert found.raw is w.nodes[0]


def test_initialized_at_falls_back_to_the_creation_when_the_condition_has_no_time() -> None:
    timed = ClaimView.of(
        claim(
            conditions=[{"type": INITIALIZED, "status": "True", "lastTransitionTime": "2026-01-01T00:05:00Z"}]
        )
    )
    untimed = ClaimView.of(claim(conditions=[{"type": INITIALIZED, "status": "True"}]))
    not_yet = ClaimView.of(claim(conditions=[{"type": INITIALIZED, "status": "False"}]))
    assert timed.initialized_at is not None
    assert timed.initialized_at.minute == 5
    assert untimed.initialized_at == untimed.created
    assert not_yet.initialized_at is None


def test_a_view_sees_what_the_pass_wrote_to_its_object_since_it_was_made() -> None:
    raw = claim()
    view = ClaimView.of(raw)
    raw["metadata"].setdefault("annotations", {})["nodewright.io/x"] = "1"
    raw["status"]["conditions"] = [{"type": INITIALIZED, "status": "True"}]
    assert view.annotations == {"nodewright.io/x": "1"}
    assert view.is_true(INITIALIZED)
    tainted = node()
    tainted["spec"]["taints"] = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    assert NodeView.of(tainted).has_taint("karpenter.sh/disrupted")


def test_a_nodepool_is_parsed_once_per_pass_and_shared_with_the_worlds_derived_from_it() -> None:
    w = world(nodepools=[pool(replicas=2)], nodes=[node()])
    typed = w.nodepool_model("default")
    assert typed is not None
    assert typed.spec.is_static
    assert typed.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"  # Karpenter's default
    assert w.nodepool_models(w.nodepools) == [typed]
    assert w.nodepool_models(w.nodepools)[0] is typed
    assert w.without_nodes(["n"]).nodepool_model("default") is typed
    assert w.nodepool_model("missing") is None


def test_a_nodepool_not_of_the_world_is_parsed_on_its_own() -> None:
    w = world(nodepools=[pool()])
    other = pool(replicas=1)
    (typed,) = w.nodepool_models([other])
    own = w.nodepool_model("default")
    assert typed.spec.is_static
    assert own is not None
    assert not own.spec.is_static


def test_a_nodepool_view_reads_what_the_triage_judges_even_of_an_invalid_nodepool() -> None:
    """The triage reads every NodePool before it is validated, so not through the model (which
    assumes the schema): a missing spec reads as absent, and replicas that are not a count as a
    dynamic NodePool (``api.models.static_replicas``), as validation will say."""
    written = pool(
        "gpu",
        weight=20,
        replicas=3,
        limits={"nodes": "5"},
        template={"spec": {"nodeClassRef": {"name": "gpu-class"}}},
    )
    written["metadata"]["generation"] = 4
    w = world(
        nodepools=[
            written,
            pool("odd", replicas="3"),
            {"metadata": {"name": "bare"}},
        ]
    )
    gpu, odd, bare = w.pool_views
    assert (gpu.name, gpu.weight, gpu.replicas, gpu.limits, gpu.nodeclass, gpu.generation) == (
        "gpu",
        20,
        3,
        {"nodes": "5"},
        "gpu-class",
        4,
    )
    assert (odd.replicas, odd.weight, odd.nodeclass) == (None, 0, "")
    assert (bare.replicas, bare.limits, bare.nodeclass, bare.generation, bare.conditions) == (
        None,
        {},
        "",
        None,
        [],
    )
    assert w.pool_view("gpu") is gpu
    assert w.without_nodes(["n"]).pool_views is w.pool_views


def test_a_nodeclaim_view_reads_what_the_launch_and_the_limits_read() -> None:
    raw = claim(capacity={"cpu": "2"})
    raw["metadata"]["uid"] = "claim-uid"
    raw["spec"]["nodeClassRef"] = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    view = ClaimView.of(raw)
    assert (view.uid, view.nodeclass, view.capacity) == ("claim-uid", "default", {"cpu": "2"})
    unlaunched = ClaimView.of({"metadata": {"name": "b"}})
    assert (unlaunched.uid, unlaunched.nodeclass, unlaunched.capacity) == ("", "", None)
