"""The interruption flow against the API emulator: owned or foreign instances, replace, drain, resume."""

from __future__ import annotations

import pytest
from nodewright import termination
from nodewright.cluster.resources import EVENTS
from nodewright.interruption import flow as interruption
from nodewright.interruption.events import Action, parse_message
from nodewright.termination.terminate import INSTANCE_GOING_ANNOTATION, RECLAIM_GRACE_SECONDS

INSTANCE = "i-0aaaaaaaaaaaaaaa1"


class FakeReplacement:
    """Stands in for provisioning.replace_for_displaced; notes what the node looked like when called."""

    def __init__(self, cluster, fail: bool = False, error: Exception | None = None) -> None:
        self.cluster = cluster
        self.fail = fail or error is not None
        self.error = error or RuntimeError("no capacity anywhere")
        self.calls: list[tuple[list[str], bool]] = []
        self.pods_at_call: list[str] = []

    pending_keys: frozenset[str] = frozenset()

    def __call__(self, ctx, node_names, *, guard=None):
        cordoned = bool(self.cluster.get_node(node_names[0])["spec"].get("unschedulable"))
        self.calls.append((list(node_names), cordoned))
        self.pods_at_call = sorted(
            p["metadata"]["name"]
            for p in self.cluster.list_pods_on_node(node_names[0])
            if not p["metadata"].get("deletionTimestamp")
        )
        if self.fail:
            raise self.error
        return self

    def summary(self):
        return {"created": ["default-replacement"]}


@pytest.fixture
def replacement(cluster) -> FakeReplacement:
    return FakeReplacement(cluster)


def _message(clock, detail_type="EC2 Spot Instance Interruption Warning", instance=INSTANCE, **detail):
    return {
        "id": f"evt-{detail_type[:10]}-{instance}",
        "source": "aws.ec2",
        "detail-type": detail_type,
        "time": clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2",
        "resources": [f"arn:aws:ec2:us-west-2:111122223333:instance/{instance}"],
        "detail": {"instance-id": instance, **detail},
    }


def _owned_node_with_pods(world):
    world.node("node-a", INSTANCE)
    world.nodeclaim("default-a", INSTANCE, "node-a")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pod("web-2", "node-a", labels={"app": "web"})
    world.pod("agent", "node-a", owner_kind="DaemonSet")


def test_spot_warning_cordons_replaces_before_evicting_then_drains_and_cleans_up(
    world, ctx, clock, cloud, replacement
) -> None:
    _owned_node_with_pods(world)
    event = parse_message(_message(clock, **{"instance-action": "terminate"}))

    outcome = interruption.reconcile(ctx, event, replace=replacement)

    assert cloud.unavailable == [("m5.large", "us-west-2a", "spot", "SpotInterruption")]
    assert replacement.calls == [(["node-a"], True)], "cordoned, then the replacement"
    assert replacement.pods_at_call == ["agent", "web-1", "web-2"], "no eviction before the replacement"
    assert outcome.replacement is not None
    assert outcome.replacement.summary() == {"created": ["default-replacement"]}
    [term] = outcome.terminations
    assert sorted(term.last_pass.evicted) == ["default/web-1", "default/web-2"], "all evictions at once"
    assert term.deadline == event.deadline
    assert world.cluster.get_node("node-a")["spec"]["unschedulable"] is True

    termination.reconcile(ctx, None, asked=outcome.terminations, budget_seconds=60)
    assert term.done
    assert world.cluster.find_node("node-a") is None
    # EC2 reclaims a spot instance itself; its NodeClaim stays, deleting, until EC2 has.
    assert cloud.terminated == [], "EC2 reclaims a spot instance itself"
    assert term.history[-1] == "left-for-ec2"
    assert world.cluster.find_nodeclaim("default-a")["metadata"]["deletionTimestamp"]
    assert clock.now() < event.deadline, "drained inside the two-minute notice"


def test_instance_without_nodeclaim_is_not_ours(world, ctx, clock, cloud, replacement) -> None:
    world.node("managed-node-group-node", "i-0ccccccccccccccc3")  # a Node, but no NodeClaim: not ours
    event = parse_message(_message(clock, instance="i-0ccccccccccccccc3"))
    outcome = interruption.reconcile(ctx, event, replace=replacement)
    assert outcome.not_owned == ["i-0ccccccccccccccc3"]
    assert outcome.terminations == []
    assert replacement.calls == []
    assert cloud.unavailable == []
    assert not world.cluster.get_node("managed-node-group-node")["spec"].get("unschedulable")


def test_rebalance_in_event_only_mode_records_an_event_and_touches_nothing(
    world, ctx, clock, replacement
) -> None:
    _owned_node_with_pods(world)
    event = parse_message(
        _message(clock, "EC2 Instance Rebalance Recommendation"), rebalance_mode="event-only"
    )
    assert event.action is Action.RECORD_ONLY
    outcome = interruption.reconcile(ctx, event, replace=replacement)
    assert outcome.recorded == [INSTANCE]
    assert replacement.calls == []
    reasons = [e["reason"] for e in world.cluster.list(EVENTS)]
    assert reasons == ["RebalanceRecommendation"]
    assert not world.cluster.get_node("node-a")["spec"].get("unschedulable")


def test_rebalance_replace_mode_terminates_the_instance_itself(world, ctx, clock, cloud, replacement) -> None:
    _owned_node_with_pods(world)
    outcome = interruption.reconcile(
        ctx, parse_message(_message(clock, "EC2 Instance Rebalance Recommendation")), replace=replacement
    )
    termination.reconcile(ctx, None, asked=outcome.terminations, budget_seconds=60)
    assert outcome.terminations[0].done
    assert cloud.terminated == [INSTANCE], "no one else will terminate it"
    assert cloud.unavailable == [], "only a spot interruption marks the offering"


def test_terminated_instance_pods_are_deleted_not_waited_for(world, ctx, clock, cloud, replacement) -> None:
    _owned_node_with_pods(world)
    world.pdb("web", {"app": "web"}, allowed=0)  # a PDB cannot protect pods of a dead instance
    message = _message(clock, "EC2 Instance State-change Notification", state="terminated")
    clock.advance(5)
    outcome = interruption.reconcile(ctx, parse_message(message), replace=replacement)
    [term] = outcome.terminations
    # The DaemonSet pod is drained too (Karpenter's terminator waits for it as for the rest).
    assert sorted(term.last_pass.deleted) == ["default/agent", "default/web-1", "default/web-2"]
    termination.reconcile(ctx, None, asked=outcome.terminations, budget_seconds=30)
    assert term.done
    assert world.pod_names() == []


def test_second_event_for_a_node_already_terminating_resumes_without_another_replacement(
    world, ctx, clock, replacement
) -> None:
    _owned_node_with_pods(world)
    world.pdb("web", {"app": "web"}, allowed=0)
    first = interruption.reconcile(
        ctx, parse_message(_message(clock, **{"instance-action": "terminate"})), replace=replacement
    )
    assert not first.terminations[0].done
    clock.advance(1)
    health = {
        "id": "health-1",
        "source": "aws.health",
        "detail-type": "AWS Health Event",
        "detail": {
            "service": "EC2",
            "eventTypeCategory": "scheduledChange",
            "affectedEntities": [{"entityValue": INSTANCE}],
        },
    }
    second = interruption.reconcile(ctx, parse_message(health), replace=replacement)
    assert second.resumed == [INSTANCE]
    assert len(replacement.calls) == 1
    assert second.terminations[0].deadline == first.terminations[0].deadline.replace(microsecond=0)


def test_failed_replacement_does_not_stop_the_drain(world, ctx, clock, cluster) -> None:
    _owned_node_with_pods(world)
    failing = FakeReplacement(cluster, fail=True)
    outcome = interruption.reconcile(ctx, parse_message(_message(clock)), replace=failing)
    assert outcome.replacement is not None
    assert outcome.replacement.error == "RuntimeError: no capacity anywhere"
    assert outcome.terminations[0].last_pass.evicted


def test_a_replacement_stopped_by_an_outage_is_one_warning_and_the_drain_goes_on(
    world, ctx, clock, cluster, capsys
) -> None:
    """An outage is the handler's to report once (``context.report_outage``): no traceback here."""
    from nodewright.cluster import ApiUnavailable

    _owned_node_with_pods(world)
    out_of_time = FakeReplacement(
        cluster, error=ApiUnavailable("POST nodeclaims: the invocation has 0.0s left")
    )
    outcome = interruption.reconcile(ctx, parse_message(_message(clock)), replace=out_of_time)
    assert outcome.replacement is not None
    assert outcome.replacement.error == "ApiUnavailable: POST nodeclaims: the invocation has 0.0s left"
    assert outcome.terminations[0].last_pass.evicted
    logged = capsys.readouterr().out
    assert "replacement launch stopped by an outage" in logged
    assert "Traceback" not in logged


def test_lease_held_by_the_provisioner_skips_the_replacement_not_the_drain(
    world, ctx, clock, replacement
) -> None:
    _owned_node_with_pods(world)
    provisioner = world.cluster.writer_lease("provisioner", duration_seconds=60)
    assert provisioner.acquire()
    outcome = interruption.reconcile(ctx, parse_message(_message(clock)), replace=replacement)
    assert replacement.calls == []
    assert outcome.replacement is not None
    assert "lease" in outcome.replacement.skipped
    assert outcome.terminations[0].last_pass.evicted


def _spot_warning_handled(world, ctx, clock, cloud, replacement):
    """A spot warning for a node whose instance EC2 has (launched an hour ago), drained: the
    NodeClaim's work is done, EC2 reclaims the instance at the notice's end."""
    from datetime import timedelta

    from fakes import instance

    _owned_node_with_pods(world)
    cloud.instances[INSTANCE] = instance(
        INSTANCE, "m5.large", "us-west-2a", "spot", "default-a", launch_time=clock.now() - timedelta(hours=1)
    )
    event = parse_message(_message(clock, **{"instance-action": "terminate"}))
    outcome = interruption.reconcile(ctx, event, replace=replacement)
    termination.reconcile(ctx, None, asked=outcome.terminations, budget_seconds=60)
    assert world.cluster.find_node("node-a") is None
    return event


def _garbage_collection(ctx):
    from nodewright.provisioning import garbage
    from nodewright.state.world import observe

    return garbage.reconcile(ctx, observe(ctx), force=True)


def test_a_spot_instance_left_for_ec2_is_not_collected_as_leaked_before_ec2_reclaims_it(
    world, ctx, clock, cloud, replacement
) -> None:
    event = _spot_warning_handled(world, ctx, clock, cloud, replacement)
    clock.advance(30)  # the provisioner's next pass, inside the two-minute notice

    report = _garbage_collection(ctx)

    assert report.leaked_terminated == [], "EC2 is taking it: not a leak"
    assert cloud.terminated == []
    claim = world.cluster.find_nodeclaim("default-a")
    assert claim is not None, "kept (deleting) while its instance exists: the record that EC2 takes it"
    assert claim["metadata"]["annotations"][INSTANCE_GOING_ANNOTATION] == "true"
    # EC2 reclaims it; the next pass of any flow releases the NodeClaim.
    cloud.instances.pop(INSTANCE)
    cloud.gone.add(INSTANCE)
    clock.advance(event.deadline.timestamp() - clock.now().timestamp() + 1)
    termination.reconcile(ctx, termination.observe(ctx), budget_seconds=30)
    assert world.cluster.find_nodeclaim("default-a") is None
    assert _garbage_collection(ctx).leaked_terminated == []
    assert cloud.terminated == [], "EC2 reclaimed it itself"


def test_a_spot_instance_ec2_does_not_reclaim_is_terminated_after_the_notice_not_left_running(
    world, ctx, clock, cloud, replacement
) -> None:
    event = _spot_warning_handled(world, ctx, clock, cloud, replacement)
    clock.advance(event.deadline.timestamp() - clock.now().timestamp() + RECLAIM_GRACE_SECONDS + 1)

    termination.reconcile(ctx, termination.observe(ctx), budget_seconds=30)

    assert cloud.terminated == [INSTANCE], "past the notice and its grace: we pay for it, so we end it"
    assert world.cluster.find_nodeclaim("default-a") is None
    assert _garbage_collection(ctx).leaked_terminated == []


def test_a_replacement_makes_another_pass_for_nodes_interrupted_while_it_held_the_lease(
    world, ctx, clock, cloud
) -> None:
    """In an AZ-wide reclaim the other invocations' replacements find the lease held and skip:
    the holder plans again, before it lets go, for the nodes marked after its pass read the cluster
    (else their pods waited for the provisioner's next pass, up to a schedule tick later)."""
    _owned_node_with_pods(world)
    world.node("node-b", "i-0bbbbbbbbbbbbbbb2")
    world.nodeclaim("default-b", "i-0bbbbbbbbbbbbbbb2", "node-b")
    world.pod("web-3", "node-b", labels={"app": "web"})
    event_b = parse_message(_message(clock, instance="i-0bbbbbbbbbbbbbbb2"))
    calls: list[list[str]] = []

    class Replacement:
        pending_keys: frozenset[str] = frozenset()

        def __call__(self, ctx, node_names, *, guard=None):
            calls.append(list(node_names))
            if len(calls) == 1:  # another invocation marks node-b meanwhile (its replacement: skipped)
                interruption.reconcile(ctx, event_b, replace=Replacement(), defer=True)
            return self

        def summary(self):
            return {"created": [f"replacement-{len(calls)}"]}

    outcome = interruption.reconcile(ctx, parse_message(_message(clock)), replace=Replacement())

    assert calls == [["node-a"], ["node-b"]], "a second pass for the node marked during the first"
    assert outcome.replacement is not None
    assert outcome.replacement.summary()["thenFor"] == [{"nodes": ["node-b"], "created": ["replacement-2"]}]


def test_a_replacement_with_no_node_marked_meanwhile_makes_one_pass(world, ctx, clock, replacement) -> None:
    _owned_node_with_pods(world)
    interruption.reconcile(ctx, parse_message(_message(clock)), replace=replacement)
    assert [nodes for nodes, _ in replacement.calls] == [["node-a"]]


def test_a_replacement_beside_the_drain_follows_until_no_node_was_marked_for_a_while(
    world, ctx, clock, monkeypatch
) -> None:
    """The holder's follow-up ended at its first look that found no node marked since: in a
    100-node storm the other containers' nodes were marked a few seconds apart, after it had let go,
    and their replacements (skipped, the lease held) waited for the provisioner. Run beside the
    drain (``wait``), it looks again until none was marked for ``REPLACEMENT_QUIET_SECONDS``."""
    _owned_node_with_pods(world)
    monkeypatch.setattr(interruption, "REPLACEMENT_QUIET_SECONDS", 1.0)
    monkeypatch.setattr(interruption, "REPLACEMENT_LEASE_POLL_SECONDS", 0.1)
    looks: list[set[str]] = []

    def marked_later(ctx) -> set[str]:
        """node-b is marked after the first pass, once a look has found nothing new."""
        looks.append(set())
        return {"node-a", "node-b"} if len(looks) > 2 else {"node-a"}

    monkeypatch.setattr(interruption, "interrupted_nodes", marked_later)
    calls: list[list[str]] = []

    class Replacement:
        pending_keys: frozenset[str] = frozenset()

        def __call__(self, ctx, node_names, *, guard=None):
            calls.append(list(node_names))
            return self

        def summary(self):
            return {"created": [f"replacement-{len(calls)}"]}

    result = interruption.replace_displaced(ctx, ["node-a"], "evt", Replacement(), None, wait=True)

    assert calls == [["node-a"], ["node-b"]]
    assert result.covered == {"node-a", "node-b"}


def test_a_replacement_plans_the_nodes_other_containers_have_a_notice_for_in_its_first_pass(
    world, ctx, clock
) -> None:
    """In a 100-node storm the holder's passes planned only the nodes whose NodeClaims were marked;
    the other containers' nodes, cordoned, waited for their messages to be handled (about 10 s each
    at load 15) and for the holder's next pass. A container notes the warning's deadline on the
    NodeClaims it cordons ahead (``NOTICE_ANNOTATION``), and the holder plans them at once."""
    from datetime import timedelta

    _owned_node_with_pods(world)
    world.node("node-b", "i-0bbbbbbbbbbbbbbb2")
    world.nodeclaim("default-b", "i-0bbbbbbbbbbbbbbb2", "node-b")
    world.pod("web-3", "node-b", labels={"app": "web"})
    world.node("node-c", "i-0ccccccccccccccc3")
    world.nodeclaim("default-c", "i-0ccccccccccccccc3", "node-c")
    soon = (clock.now() + timedelta(seconds=100)).strftime("%Y-%m-%dT%H:%M:%SZ")
    past = (clock.now() - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    world.cluster.patch_nodeclaim(
        "default-b", {"metadata": {"annotations": {interruption.NOTICE_ANNOTATION: soon}}}
    )
    world.cluster.patch_nodeclaim(
        "default-c", {"metadata": {"annotations": {interruption.NOTICE_ANNOTATION: past}}}
    )
    replacement = FakeReplacement(world.cluster)

    interruption.reconcile(ctx, parse_message(_message(clock)), replace=replacement)

    assert [nodes for nodes, _ in replacement.calls] == [["node-a", "node-b"]], "node-c's notice is over"


def test_the_lease_holder_asks_at_the_provisioners_rate_and_gives_it_back(
    world, ctx, clock, monkeypatch
) -> None:
    """A storm's replacements are planned and launched by the one container holding the writers'
    lease: a pass creating 81 NodeClaims was held to the interruption functions' 5 requests/s for
    58 s. While it holds the lease it asks at the provisioner's rate."""
    from nodewright.cluster import TokenBucket
    from nodewright.settings import KUBE_CLIENT_BURST, KUBE_CLIENT_QPS
    from nodewright.spec import deployment

    _owned_node_with_pods(world)
    bucket = TokenBucket(deployment.INTERRUPTION_KUBE_CLIENT_QPS, deployment.INTERRUPTION_KUBE_CLIENT_BURST)
    monkeypatch.setattr(ctx.cluster, "limiter", bucket, raising=False)
    rates: list[tuple[float, int]] = []

    class Replacement:
        pending_keys: frozenset[str] = frozenset()

        def __call__(self, ctx, node_names, *, guard=None):
            rates.append((bucket.qps, bucket.burst))
            return self

        def summary(self):
            return {}

    interruption.reconcile(ctx, parse_message(_message(clock)), replace=Replacement())

    assert rates == [(KUBE_CLIENT_QPS, KUBE_CLIENT_BURST)]
    assert (bucket.qps, bucket.burst) == (
        deployment.INTERRUPTION_KUBE_CLIENT_QPS,
        deployment.INTERRUPTION_KUBE_CLIENT_BURST,
    ), "given back with the lease"


class _CountingPasses:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    pending_keys: frozenset[str] = frozenset()

    def __call__(self, ctx, node_names, *, guard=None):
        self.calls.append(list(node_names))
        return self

    def summary(self):
        return {"created": [f"replacement-{len(self.calls)}"]}


def test_a_replacement_follows_up_on_the_contexts_clock(world, ctx, clock) -> None:
    """The follow-up's quiet wait and its bound were measured in real time while its write guard
    measured the invocation's deadline on the context's clock: one clock for both."""
    _owned_node_with_pods(world)
    passes = _CountingPasses()

    interruption.replace_displaced(ctx, ["node-a"], "evt", passes, None, wait=True)

    assert passes.calls == [["node-a"]]
    assert sum(clock.slept) >= interruption.REPLACEMENT_QUIET_SECONDS, "quiet for a while, on ctx.clock"


def test_a_holder_after_the_one_that_planned_its_nodes_plans_nothing_and_returns(world, ctx, clock) -> None:
    """In a storm each container's replacement waits for the writers' lease in turn; one that got
    it after the holder that planned its nodes made a pass that planned nothing, then a follow-up
    that kept the others (and the provisioner) waiting. What a holder planned is kept in the state
    table; a later holder plans only the nodes none did."""
    from dataclasses import replace

    from nodewright.cloud.state import InMemoryStateStore

    ctx = replace(ctx, store=InMemoryStateStore(clock=lambda: clock.now().timestamp()))
    _owned_node_with_pods(world)
    world.node("node-b", "i-0bbbbbbbbbbbbbbb2")
    world.nodeclaim("default-b", "i-0bbbbbbbbbbbbbbb2", "node-b")
    passes = _CountingPasses()

    first = interruption.replace_displaced(ctx, ["node-a"], "evt-a", passes, None, wait=True)
    slept = len(clock.slept)
    late = interruption.replace_displaced(ctx, ["node-a"], "evt-a-again", passes, None, wait=True)

    assert first.report is not None
    assert late.report is None, "no pass"
    assert len(clock.slept) == slept, "no follow-up: it returned at once"
    then = interruption.replace_displaced(ctx, ["node-a", "node-b"], "evt-b", passes, None, wait=True)
    assert then.report is not None
    assert passes.calls == [["node-a"], ["node-b"]], "node-a planned once, node-b when it came"
    assert late.skipped == interruption.PLANNED_EARLIER


def test_a_waiter_whose_nodes_a_holder_planned_leaves_without_taking_the_lease(world, ctx, clock) -> None:
    """A 100-node storm: ninety waiters took the writers' lease one after another to plan nothing,
    and the provisioner's pass for the pods evicted meanwhile waited behind them. A waiter reads
    the holders' marker while the lease is held elsewhere, its handed nodes included."""
    from dataclasses import replace

    from nodewright.cloud.state import InMemoryStateStore

    ctx = replace(ctx, store=InMemoryStateStore(clock=lambda: clock.now().timestamp()))
    _owned_node_with_pods(world)
    interruption.PlannedNodes().add(ctx, ["node-a", "node-b"])
    assert world.cluster.writer_lease("provisioner", duration_seconds=60).acquire()
    passes = _CountingPasses()

    result = interruption.replace_displaced(
        ctx, ["node-a"], "evt-a", passes, None, wait=True, more=lambda: {"node-b"}
    )

    assert passes.calls == []
    assert result.skipped == interruption.PLANNED_EARLIER
    assert result.covered == {"node-a", "node-b"}, "the handed node is covered too"


def test_a_waiter_with_a_node_none_planned_keeps_waiting_for_the_lease(
    world, ctx, clock, monkeypatch
) -> None:
    from dataclasses import replace

    from nodewright.cloud.state import InMemoryStateStore

    ctx = replace(ctx, store=InMemoryStateStore(clock=lambda: clock.now().timestamp()))
    _owned_node_with_pods(world)
    interruption.PlannedNodes().add(ctx, ["node-a"])
    assert world.cluster.writer_lease("provisioner", duration_seconds=60).acquire()
    polls: list[float] = []
    monkeypatch.setattr(interruption.time, "sleep", polls.append)
    passes = _CountingPasses()

    result = interruption.replace_displaced(
        ctx, ["node-a", "node-b"], "evt-b", passes, None, wait=True, give_up=lambda: len(polls) >= 2
    )

    assert polls == [interruption.REPLACEMENT_LEASE_POLL_SECONDS] * 2, "asked again until told to give up"
    assert passes.calls == []
    assert result.skipped == "writers' lease held by another invocation"


def test_a_holder_following_up_plans_the_pods_that_became_pending_since_its_pass(
    world, ctx, clock, monkeypatch
) -> None:
    """An evicted pod's successor is counted by no pass until the scheduler marks it unschedulable
    (terminating pods are not displaced); the provisioner, which would plan it, waits for the lease
    while the holder follows up. In a 100-node storm that left 8 NodeClaims to the provisioner's
    pass, 34 s after the warnings. The follow-up plans such pods once each, without prolonging
    itself for them."""
    from nodewright.cluster.resources import PODS

    _owned_node_with_pods(world)

    class Passes(_CountingPasses):
        def __call__(self, ctx, node_names, *, guard=None):
            super().__call__(ctx, node_names, guard=guard)
            self.pending_keys = frozenset(
                f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                for p in world.cluster.list_pending_pods()
            )
            return self

    def successor_pending() -> None:  # evicted meanwhile: its successor, marked unschedulable
        world.cluster.create(
            PODS,
            {
                "metadata": {"name": "web-3", "namespace": "default"},
                "spec": {"containers": [{"name": "app", "image": "busybox"}]},
            },
        )
        unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        world.cluster.patch(
            PODS,
            "web-3",
            {"status": {"phase": "Pending", "conditions": [unschedulable]}},
            namespace="default",
            subresource="status",
        )

    passes = Passes()
    sleep = clock.sleep

    def sleeping(seconds: float) -> None:
        sleep(seconds)
        if len(clock.slept) == 1:  # a poll into the follow-up
            successor_pending()

    monkeypatch.setattr(clock, "sleep", sleeping)

    result = interruption.replace_displaced(ctx, ["node-a"], "evt-a", passes, None, wait=True)

    assert passes.calls == [["node-a"], ["node-a"]], "a second pass, for every node so far"
    assert result.then[0][0] == (), "for the pod, no node marked since"
    quiet, poll = interruption.REPLACEMENT_QUIET_SECONDS, interruption.REPLACEMENT_LEASE_POLL_SECONDS
    assert sum(clock.slept) < quiet + poll, "the pod did not prolong the follow-up"
