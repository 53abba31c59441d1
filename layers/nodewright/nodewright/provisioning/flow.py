"""One pass of the provisioner function, top to bottom: its controllers, in order, over one
observed ``World`` (``provision``), each ``reconcile(ctx, world)`` with a typed report:

    observe → lifecycle (``lifecycle``: registration, initialization, timeouts) → termination
    (``nodewright.termination``: every NodeClaim and Node being deleted, one step each) →
    provisioning (``reconcile`` here: NodePools → static NodePools → plan → NodeClaims created →
    launch → pod events) → garbage collection (``garbage``: orphans, vanished and leaked
    instances, launch templates) → metrics

Garbage collection comes after provisioning, as in Karpenter it is a controller of its own that
pending pods never wait for: over a big cluster its DescribeInstances is the pass's longest step
(5,000 instances: seconds of CPU to read), and a pass whose time is up leaves it to the next.

Each NodeClaim is created before it is launched (the NodeClaims of a pass concurrently): the object
is the record of intent, and the next pass finishes whatever a crash interrupted
(``launch.create_and_launch``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from nodewright import termination
from nodewright.observability import emit_counts
from nodewright.provisioning import garbage, lifecycle, nodeclaims, planning, static
from nodewright.provisioning.launch import Launched, Launches, LaunchFailure, create_and_launch
from nodewright.ratelimit import TokenBucket
from nodewright.state import nodepools
from nodewright.state.guard import WriteGuard
from nodewright.state.pods import key as pod_key
from nodewright.state.pods import pending_since
from nodewright.state.world import World, observe

if TYPE_CHECKING:
    from nodewright.context import Context


@dataclass
class PassReport:
    """What one pass saw and did (logged, returned by the handler, shown by the demo)."""

    pending_pods: int = 0
    oldest_pending_seconds: float = 0.0
    youngest_pending_seconds: float | None = None
    plan_seconds: float = 0.0
    created: list[str] = field(default_factory=list)
    launched: list[Launched] = field(default_factory=list)
    failures: list[LaunchFailure] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    skipped_nodepools: dict[str, str] = field(default_factory=dict)
    lifecycle: lifecycle.LifecycleReport = field(default_factory=lifecycle.LifecycleReport)
    termination: termination.TerminationReport = field(default_factory=termination.TerminationReport)
    garbage: garbage.GarbageReport = field(default_factory=garbage.GarbageReport)
    cost_per_hour: float = 0.0
    pending_keys: frozenset[str] = frozenset()
    static_deleted: list[str] = field(default_factory=list)  # NodeClaims a static NodePool scaled down
    stopped: str | None = None  # why the pass stopped writing early (its guard said so)

    def record(self, launches: Launches) -> None:
        """What the pass's ``create_and_launch`` did."""
        self.created = launches.created
        self.launched = launches.launched
        self.failures = launches.failures
        self.stopped = launches.stopped

    def summary(self) -> dict[str, Any]:
        return {
            "pendingPods": self.pending_pods,
            "nodeClaimsCreated": self.created,
            "launched": [
                f"{x.nodeclaim}={x.instance_type}/{x.zone}/{x.capacity_type}" for x in self.launched
            ],
            "failures": [f"{x.nodeclaim}: {x.code}" for x in self.failures],
            "unschedulable": len(self.unschedulable),
            "skippedNodePools": sorted(self.skipped_nodepools),
            **({"staticDeleted": self.static_deleted} if self.static_deleted else {}),
            "registered": self.lifecycle.registered,
            "initialized": self.lifecycle.initialized,
            "planSeconds": round(self.plan_seconds, 4),
            **({"stoppedEarly": self.stopped} if self.stopped else {}),
        }


def provision(ctx: Context, guard: WriteGuard | None = None) -> PassReport:
    """One pass of the provisioner function: its controllers, in order, over one observed ``World``
    (see the module docstring). Safe to repeat; never launches twice for one NodeClaim.

    ``guard``: checked before each NodeClaim is created or launched; when it says stop (the lease
    is no longer ours, or the invocation's time is up), the pass writes nothing more and the next
    pass picks up what is left.
    """
    world = observe(ctx)
    registered = lifecycle.reconcile(ctx, world)
    terminated = termination.reconcile(ctx, world)
    provisioned = reconcile(ctx, world, guard=guard)
    collected = garbage.GarbageReport() if guard and guard.out_of_time() else garbage.reconcile(ctx, world)
    report = replace(provisioned, lifecycle=registered, termination=terminated, garbage=collected)
    publish_metrics(ctx, report)
    ctx.logger.info("provisioning pass", extra=report.summary())
    return report


def reconcile(ctx: Context, world: World, *, guard: WriteGuard | None = None) -> PassReport:
    """The provisioning controller: NodePools → static NodePools → plan → create and launch → pod
    events, over ``world``. Its report carries the provisioning fields; ``provision`` adds the
    other controllers' reports of the pass."""
    report = PassReport()
    pools = nodepools.triage(world, static_capacity=ctx.settings.static_capacity)
    nodepools.record(ctx, world, pools)
    report.skipped_nodepools = pools.skipped
    # Static NodePools: their replicas, whatever the pods (scale-downs delete now, scale-ups below).
    scaled = static.reconcile(ctx, world, pools)
    report.static_deleted = scaled.deleted

    pending = world.provisionable_pods()
    _measure_pending(report, world, pending)
    # The pods that will leave nodes being deleted need a place too (World.displaced_pods: not those
    # a PDB or do-not-disrupt holds for good), planned with the pending ones, against the cluster
    # without those nodes.
    going = world.going_node_names()
    displaced = world.displaced_pods(going)

    plan = planning.PlanView()
    if pending or displaced:
        remaining = world.without_nodes(going)
        plan = planning.plan(remaining, pending + displaced, pools.usable)
        report.plan_seconds = plan.seconds
        report.nominated = plan.nominated
        report.unschedulable = plan.unschedulable

    # Left by a pass that crashed before recording its launch: adopt the instance or launch now.
    plans = [*scaled.to_create, *plan.new_claims]
    awaiting = [c for c in world.nodeclaims if _awaiting_launch(c)]
    launches = create_and_launch(ctx, world, plans, guard=guard, awaiting=awaiting)
    report.record(launches)
    for claim_plan, name in zip(plans, launches.created_by_plan, strict=True):
        for pod in claim_plan.pods if name is not None else ():
            report.nominated[pod_key(pod)] = f"nodeclaim/{name}"

    record_pod_events(ctx, world, pending, report, guard=guard)
    report.cost_per_hour = cluster_cost_per_hour(world, report.launched)
    return report


def _measure_pending(report: PassReport, world: World, pending: list[dict[str, Any]]) -> None:
    report.pending_pods = len(pending)
    report.pending_keys = frozenset(pod_key(p) for p in pending)
    ages = [(world.taken_at - since).total_seconds() for p in pending if (since := pending_since(p))]
    report.oldest_pending_seconds = max(ages, default=0.0)
    report.youngest_pending_seconds = min(ages, default=0.0 if pending else None)


def _awaiting_launch(claim: dict[str, Any]) -> bool:
    return not nodeclaims.is_deleting(claim) and not nodeclaims.is_true(claim, nodeclaims.LAUNCHED)


def cluster_cost_per_hour(world: World, launched: list[Launched]) -> float:
    """Sum of the hourly prices of every launched NodeClaim (this pass's launches included)."""
    seen = {item.nodeclaim for item in launched}
    total = sum(item.price or 0.0 for item in launched)
    for claim in world.nodeclaims:
        if (
            nodeclaims.name_of(claim) in seen
            or not nodeclaims.is_true(claim, nodeclaims.LAUNCHED)
            or nodeclaims.is_deleting(claim)
        ):
            continue
        total += world.price_of(claim) or 0.0
    return total


# Events are deduplicated per container for a while: a pod pending for a minute must not get
# twelve identical events. Losing this memory costs one repeated event, nothing more.
EVENT_REPEAT_SECONDS = 300.0
_recent_events: dict[tuple[str, str, str], float] = {}
# ``Nominated`` events, across pods, as Karpenter's ``PodNominationRateLimiter`` allows them (5/s,
# burst 10; the others are not sent): one a pod, written in the pass, made a pass over n new pods
# n requests longer (a 500-node setup: 928 pending pods, 88 s of the pass's 168 s in its events).
# One not sent is not remembered as sent: a later pass sends it if the pod is still pending.
NOMINATED_EVENTS_PER_SECOND = 5.0
NOMINATED_EVENTS_BURST = 10
_nominated_events = TokenBucket(NOMINATED_EVENTS_PER_SECOND, NOMINATED_EVENTS_BURST)


def record_pod_events(
    ctx: Context,
    world: World,
    pending: list[dict[str, Any]],
    report: PassReport,
    *,
    guard: WriteGuard | None = None,
) -> None:
    """``Nominated`` for pods given capacity, ``FailedScheduling`` with the reason for the others.

    One write per pod (``Nominated`` ones at Karpenter's rate, the rest left to a later pass), the
    pass's last: once ``guard`` is out of time (or said stop) the rest wait
    for the next pass, lest a slow API server spend, a read timeout per event, the seconds the
    lease's release needs (the 100-node storm's provisioner did)."""
    now = time.monotonic()
    for seen, stamp in list(_recent_events.items()):
        if now - stamp > EVENT_REPEAT_SECONDS:
            del _recent_events[seen]
    for pod in pending:
        key = pod_key(pod)
        if key in report.nominated:
            reason, message, kind = "Nominated", f"Pod should schedule on: {report.nominated[key]}", "Normal"
        elif key in report.unschedulable:
            reason, message, kind = (
                "FailedScheduling",
                f"Failed to schedule pod, {report.unschedulable[key]}",
                "Warning",
            )
        else:
            continue
        dedup = (key, reason, message)
        if dedup in _recent_events:
            continue
        if report.stopped is None and guard is not None:
            report.stopped = guard.out_of_time()
        if report.stopped is not None:
            return
        if reason == "Nominated" and not _nominated_events.try_accept():
            continue
        _recent_events[dedup] = now
        ctx.cluster.record_event(pod, reason, message, event_type=kind)
        if kind == "Warning":
            ctx.logger.info("pod cannot be placed", extra={"pod": key, "reason": report.unschedulable[key]})


def publish_metrics(ctx: Context, report: PassReport) -> None:
    """EMF of a provisioning pass: pending pods and age, plan time, $/h, and its launches."""
    metrics = ctx.metrics
    metrics.add_metric(name="PendingPods", unit=MetricUnit.Count, value=report.pending_pods)
    metrics.add_metric(
        name="OldestPendingPodAgeSeconds", unit=MetricUnit.Seconds, value=report.oldest_pending_seconds
    )
    metrics.add_metric(
        name="ClusterCostPerHour", unit=MetricUnit.NoUnit, value=round(report.cost_per_hour, 4)
    )
    if report.plan_seconds:
        metrics.add_metric(name="PlanSeconds", unit=MetricUnit.Seconds, value=report.plan_seconds)
    publish_launches(ctx, report)


def publish_launches(ctx: Context, report: PassReport) -> None:
    """EMF of what launched and what failed to, for every launch path (a provisioning pass, an
    interruption's replacements, a disruption command's): launches by type/zone/capacity type,
    failures by error code (``LaunchErrors``, graphed) and by class (``LaunchFailures``: one
    series per ``cloud.errors.LAUNCH_FAILURE_CLASSES`` value, which the alarms watch)."""
    namespace = getattr(ctx.metrics, "namespace", None)
    launched = Counter((x.instance_type, x.zone, x.capacity_type) for x in report.launched if not x.adopted)
    emit_counts(
        name="NodeClaimsLaunched",
        dimensions=("InstanceType", "Zone", "CapacityType"),
        counts=launched,
        namespace=namespace,
    )
    codes = Counter((f.code,) for f in report.failures)
    emit_counts(name="LaunchErrors", dimensions=("ErrorCode",), counts=codes, namespace=namespace)
    classes = Counter((f.failure_class,) for f in report.failures)
    emit_counts(name="LaunchFailures", dimensions=("Class",), counts=classes, namespace=namespace)
