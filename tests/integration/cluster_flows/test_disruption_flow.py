"""The disruption flow against the API emulator: pod events recorded, empty and expired nodes removed
through the shared termination, budgets paced across passes, the writers' lease respected."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

from nodewright.cluster.objects import format_time
from nodewright.cluster.resources import EC2NODECLASSES, EVENTS, NODEPOOLS, NODES
from nodewright.disruption import run
from nodewright.disruption.flow import FINGERPRINT_ANNOTATION, reconcile
from nodewright.state.world import observe

INSTANCES = {name: f"i-0{index:016x}" for index, name in enumerate(["a", "b", "c", "d"], start=10)}


NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-sandbox",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "sandbox"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "sandbox"}}],
    },
}


def nodepool(
    world: Any, *, budgets: list[dict[str, Any]] | None = None, after: str = "30s", nodeclass: bool = True
) -> None:
    """NodePool ``default`` (WhenEmpty after ``after``) and, unless told otherwise, its EC2NodeClass."""
    if nodeclass:
        world.cluster.create(EC2NODECLASSES, NODECLASS)
    disruption: dict[str, Any] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": after}
    if budgets is not None:
        disruption["budgets"] = budgets
    world.cluster.create(
        NODEPOOLS,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                        ],
                    }
                },
                "disruption": disruption,
            },
        },
    )


def ready_node(world: Any, clock: Any, name: str, *, initialized_ago: float = 600, **spec: Any) -> None:
    """A registered, Ready, initialized m5.large spot node and its NodeClaim, as the lifecycle leaves them."""
    instance = INSTANCES[name]
    world.node(f"node-{name}", instance)
    world.cluster.patch(
        NODES,
        f"node-{name}",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        subresource="status",
    )
    world.nodeclaim(name, instance, f"node-{name}", **spec)
    world.cluster.patch_nodeclaim(
        name,
        {
            "metadata": {
                "labels": {
                    "node.kubernetes.io/instance-type": "m5.large",
                    "topology.kubernetes.io/zone": "us-west-2a",
                    "karpenter.sh/capacity-type": "spot",
                }
            }
        },
    )
    initialized = format_time(clock.now() - timedelta(seconds=initialized_ago))
    world.cluster.patch_nodeclaim_status(
        name,
        {
            "instanceID": instance,
            "conditions": [
                {
                    "type": "Initialized",
                    "status": "True",
                    "reason": "Initialized",
                    "lastTransitionTime": initialized,
                }
            ],
        },
    )


def gone(world: Any, name: str) -> bool:
    return world.cluster.find_nodeclaim(name) is None and world.cluster.find_node(f"node-{name}") is None


def test_an_empty_node_is_removed_after_consolidate_after_and_a_busy_one_stays(
    world, ctx, clock, cloud
) -> None:
    nodepool(world)
    ready_node(world, clock, "a")
    ready_node(world, clock, "b")
    world.pod("web", "node-b")
    world.pod("agent", "node-a", owner_kind="DaemonSet")

    report = run(ctx, remaining_seconds=60)

    assert [(d.nodeclaim, d.reason) for d in report.disrupted] == [("a", "Empty")]
    assert report.passes >= 2, "the first pass starts consolidateAfter; a later one acts"
    assert 30 <= sum(clock.slept) < 52
    assert gone(world, "a")
    assert cloud.terminated[0] == INSTANCES["a"]
    assert report.savings_per_hour == 0.0341
    busy = world.cluster.get_nodeclaim("b")
    assert busy["status"]["lastPodEventTime"], "the pod event on the busy node is recorded"
    assert busy["metadata"]["annotations"][FINGERPRINT_ANNOTATION]
    assert world.cluster.find_node("node-b") is not None
    reasons = [e["reason"] for e in world.cluster.list(EVENTS, namespace="default")]
    assert "Disrupting" in reasons


def test_a_pod_leaving_restarts_the_wait(world, ctx, clock) -> None:
    nodepool(world, after="5m")
    ready_node(world, clock, "a")
    world.pod("web", "node-a")
    first = run(ctx, remaining_seconds=60)
    assert first.disrupted == []
    assert first.passes == 1, "busy: one pass and return"

    world.cluster.delete_pod("default", "web", grace_period_seconds=0)
    second = run(ctx, remaining_seconds=60)
    assert second.disrupted == []
    assert second.passes == 1, "5 minutes to wait: not worth looping for"
    assert second.held["a"].startswith("empty; eligible at")

    clock.advance(300)
    third = run(ctx, remaining_seconds=60)
    assert [d.nodeclaim for d in third.disrupted] == ["a"]


def test_a_budget_of_one_removes_empty_nodes_one_at_a_time_within_one_invocation(world, ctx, clock) -> None:
    nodepool(world, budgets=[{"nodes": "1"}], after="0s")
    for name in ("a", "b", "c"):
        ready_node(world, clock, name)
    deleting_at_once: list[int] = []
    clock.ticks.append(
        lambda: deleting_at_once.append(
            sum(1 for c in world.cluster.list_nodeclaims() if c["metadata"].get("deletionTimestamp"))
        )
    )

    report = run(ctx, remaining_seconds=60)

    assert sorted(d.nodeclaim for d in report.disrupted) == ["a", "b", "c"]
    assert report.passes >= 3, "one node per pass: the budget's room comes back as each one goes"
    assert max(deleting_at_once, default=0) <= 1
    assert all(gone(world, name) for name in ("a", "b", "c"))


def test_an_expired_node_is_drained_through_evictions_and_removed(world, ctx, clock, cloud) -> None:
    nodepool(world, budgets=[{"nodes": "0"}])
    ready_node(world, clock, "a", expireAfter="1h")
    world.pod("web", "node-a")
    clock.advance(3601)  # the emulator stamps creation with real time; the flow reads the fake one

    report = run(ctx, remaining_seconds=60)

    assert [(d.nodeclaim, d.reason) for d in report.disrupted] == [("a", "Expired")]
    assert gone(world, "a")
    assert "web" not in world.pod_names(), "evicted through the Eviction API, then gone"
    assert INSTANCES["a"] in cloud.terminated


def test_nothing_is_disrupted_while_another_writer_holds_the_lease(world, ctx, clock) -> None:
    nodepool(world, after="0s")
    ready_node(world, clock, "a")
    provisioner = world.cluster.writer_lease("provisioner", duration_seconds=60)
    assert provisioner.acquire()

    report = run(ctx, remaining_seconds=20)

    assert report.disrupted == []
    assert report.lease_skipped >= 2, "tried again a few seconds later, not only at the next schedule"
    assert world.cluster.find_nodeclaim("a") is not None


def test_a_nodepool_whose_ec2nodeclass_is_missing_is_not_disrupted_within(world, clock, ctx) -> None:
    """The same NodePool triage as provisioning: an unusable NodePool's empty nodes stay."""
    nodepool(world, nodeclass=False)
    ready_node(world, clock, "a")

    report = run(ctx, remaining_seconds=60)

    assert report.disrupted == []
    assert world.cluster.find_node("node-a") is not None


def test_a_do_not_disrupt_duration_holds_an_empty_node_and_the_invocation_comes_back_when_it_ends(
    world, ctx, clock
) -> None:
    nodepool(world, after="0s")
    ready_node(world, clock, "a")
    world.pod(
        "agent",
        "node-a",
        owner_kind="DaemonSet",
        annotations={"karpenter.sh/do-not-disrupt": "20s"},
        started=clock.now() - timedelta(seconds=5),
    )
    started = clock.now()

    report = run(ctx, remaining_seconds=60)

    assert [(d.nodeclaim, d.reason) for d in report.disrupted] == [("a", "Empty")]
    assert report.passes >= 2, "held by the pod's protection, then looked at again"
    # startTime is written to the second: the protection ends 14-15 s after the test began.
    assert clock.now() - started >= timedelta(seconds=14), "not before the 20 s had passed"


def test_an_invalid_do_not_disrupt_value_is_ignored_with_karpenters_warning_on_the_pod(
    world, ctx, clock
) -> None:
    nodepool(world, after="0s")
    ready_node(world, clock, "a")
    world.pod("agent", "node-a", owner_kind="DaemonSet", annotations={"karpenter.sh/do-not-disrupt": "soon"})

    report = run(ctx, remaining_seconds=60)

    assert [d.nodeclaim for d in report.disrupted] == ["a"], "the value protects nothing"
    warnings = [
        (e["type"], e["message"])
        for e in world.cluster.list(EVENTS, namespace="default")
        if e["reason"] == "InvalidDoNotDisruptAnnotation" and e["involvedObject"]["name"] == "agent"
    ]
    assert warnings == [
        (
            "Warning",
            "Invalid karpenter.sh/do-not-disrupt annotation value 'soon', ignoring annotation. "
            "Use 'true' or a duration like '5m', '1h'",
        )
    ]


def test_a_pass_writes_each_nodeclaim_at_most_once_per_subresource_and_an_unchanged_cluster_not_at_all(
    world, ctx, clock, monkeypatch
) -> None:
    """Issue 30: the pass's marks (the pod-event digest and lastPodEventTime, Consolidatable) go out
    as one metadata and one status PATCH per NodeClaim that changed; a pass a minute later over the
    same cluster writes nothing (at 5,000 nodes, each write more is 5,000 requests a pass)."""
    nodepool(world, after="0s")
    for name in ("a", "b", "c"):
        ready_node(world, clock, name)
        world.pod(f"web-{name}", f"node-{name}")
    writes: list[tuple[str, str]] = []
    request = ctx.cluster.request

    def counted(method: str, path: str, **kwargs: Any) -> Any:
        if method != "GET":
            writes.append((method, path))
        return request(method, path, **kwargs)

    monkeypatch.setattr(ctx.cluster, "request", counted)
    lease = ctx.cluster.writer_lease("test", duration_seconds=30)

    reconcile(ctx, observe(ctx), lease=lease)

    base = "/apis/karpenter.sh/v1/nodeclaims"
    assert Counter(writes) == Counter(
        [("PATCH", f"{base}/{name}/status") for name in "abc"]
        + [("PATCH", f"{base}/{name}") for name in "abc"]
    )
    for name in "abc":
        claim = world.cluster.get_nodeclaim(name)
        assert claim["metadata"]["annotations"][FINGERPRINT_ANNOTATION]
        assert claim["status"]["lastPodEventTime"]
        assert [(c["type"], c["status"]) for c in claim["status"]["conditions"]] == [
            ("Initialized", "True"),
            ("Consolidatable", "True"),
        ]

    writes.clear()
    clock.advance(60)
    reconcile(ctx, observe(ctx), lease=lease)

    assert writes == []
