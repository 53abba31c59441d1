"""A NodeClaim being deleted is resumed with its own Node, found by the one rule a NodeClaim finds
its Node by (``state.views.node_views_by_instance_id``)."""

from __future__ import annotations

from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context
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

    found, _ = in_progress(ctx, [unrelated], [never_launched])

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

    found, _ = in_progress(ctx, [node], [claim])

    assert [(t.nodeclaim, t.node, t.instance_id) for t in found] == [
        ("default-a", "node-a", "i-0aaaaaaaaaaaaaaa1")
    ]
