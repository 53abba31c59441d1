"""A NodeClaim being deleted is resumed with its own Node, found by the one rule a NodeClaim finds
its Node by (``state.views.node_views_by_instance_id``)."""

from __future__ import annotations

from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context
from nodewright.state.views import ClaimView, NodeView
from nodewright.termination.terminate import in_progress


def test_a_deleting_nodeclaim_that_never_launched_is_not_given_a_node_without_a_provider_id() -> None:
    clock = FakeClock()
    ctx = fake_context(FakeCluster(clock), FakeCloudProvider(clock), clock)
    never_launched = {
        "metadata": {
            "name": "default-a",
            "deletionTimestamp": "2026-12-02T11:50:00Z",
            "finalizers": ["karpenter.sh/termination"],
        },
    }
    # A Node whose kubelet has not set its providerID yet: no instance, so no NodeClaim's.
    unrelated = {"metadata": {"name": "node-x"}, "spec": {}}

    found, _ = in_progress(ctx, [NodeView.of(unrelated)], [ClaimView.of(never_launched)])

    assert [(t.nodeclaim, t.node) for t in found] == [("default-a", None)]


def test_a_deleting_nodeclaim_is_resumed_with_the_node_of_its_instance() -> None:
    clock = FakeClock()
    ctx = fake_context(FakeCluster(clock), FakeCloudProvider(clock), clock)
    claim = {
        "metadata": {
            "name": "default-a",
            "deletionTimestamp": "2026-12-02T11:50:00Z",
            "finalizers": ["karpenter.sh/termination"],
        },
        "status": {"providerID": "aws:///us-west-2a/i-0aaaaaaaaaaaaaaa1"},
    }
    node = {"metadata": {"name": "node-a"}, "spec": {"providerID": "aws:///us-west-2a/i-0aaaaaaaaaaaaaaa1"}}

    found, _ = in_progress(ctx, [NodeView.of(node)], [ClaimView.of(claim)])

    assert [(t.nodeclaim, t.node, t.instance_id) for t in found] == [
        ("default-a", "node-a", "i-0aaaaaaaaaaaaaaa1")
    ]


def test_the_interruption_ownership_index_knows_no_instance_for_objects_without_one() -> None:
    """Its NodeClaims and Nodes are found by the same rule: an unlaunched NodeClaim and a Node
    without a providerID share no instance (``replace_ahead`` took such a Node for the NodeClaim's)."""
    from nodewright.interruption.flow import OwnershipIndex

    clock = FakeClock()
    cluster = FakeCluster(clock)
    ctx = fake_context(cluster, FakeCloudProvider(clock), clock)
    cluster.add("NodeClaim", {"metadata": {"name": "default-a", "deletionTimestamp": "2026-12-02T11:50:00Z"}})
    cluster.add("Node", {"metadata": {"name": "node-x"}, "spec": {}})
    cluster.add(
        "Node",
        {"metadata": {"name": "node-b"}, "spec": {"providerID": "aws:///us-west-2a/i-0bbbbbbbbbbbbbbb2"}},
    )

    index = OwnershipIndex.read(ctx)

    assert index.claims == {}
    assert {instance: node["metadata"]["name"] for instance, node in index.nodes.items()} == {
        "i-0bbbbbbbbbbbbbbb2": "node-b"
    }
