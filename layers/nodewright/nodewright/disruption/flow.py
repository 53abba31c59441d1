"""One invocation of the disruption function: observe, record pod events, decide, begin, drain.

Each pass:

1. observe the cluster (capacity first, then pods, as the provisioner does);
2. record pod events: when the set of pods a node would have to move changes, write the NodeClaim's
   ``status.lastPodEventTime`` (and the set's digest, as an annotation, to notice the next change).
   This is Karpenter's pod-events controller done by polling: a change is seen up to one pass
   late, which only ever delays a disruption, never hastens one;
3. decide (``decide.decide``, pure): expired NodeClaims, then empty nodes within the budgets;
4. under the writers' lease (so the provisioner never plans onto a node this pass removes): check
   again that each empty node is still empty, then ``termination.begin`` (taint, cordon, NodeClaim
   marked for deletion with the reason, an event on the node);
5. drive every termination (this pass's and any left half-done) for a short slice.

It loops (every ``POLL_SECONDS``) only while there is something to follow: a drain still running,
an empty node held back by a budget, or one that becomes eligible before the invocation ends.
Otherwise it returns after one pass: an idle cluster costs one short pass a minute.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from nodewright import checkpoints, termination
from nodewright.cluster import objects
from nodewright.disruption.decide import (
    EMPTY,
    Candidate,
    Decision,
    decide,
    pods_fingerprint,
)
from nodewright.state import nodepools
from nodewright.state.pods import is_reschedulable
from nodewright.state.world import World, observe

if TYPE_CHECKING:
    from datetime import datetime

    from nodewright.context import Context

FINGERPRINT_ANNOTATION = "nodewright.io/pods-fingerprint"
LOOP_BUDGET_SECONDS = 50.0  # the schedule fires every minute
SAFETY_MARGIN_SECONDS = 8.0
POLL_SECONDS = 5.0
DRIVE_SLICE_SECONDS = 15.0  # one pass drives drains this long before it looks again
LEASE_IDENTITY = "disruption"
LEASE_SECONDS = 30


@dataclass
class DisruptionReport:
    passes: int = 0
    disrupted: list[dict[str, Any]] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)
    lease_skipped: int = 0
    terminations: list[dict[str, Any]] = field(default_factory=list)

    @property
    def savings_per_hour(self) -> float:
        """$/h of the nodes removed (a node whose price is unknown counts 0)."""
        return sum(d.get("pricePerHour") or 0.0 for d in self.disrupted)

    def summary(self) -> dict[str, Any]:
        return {
            "passes": self.passes,
            "disrupted": self.disrupted,
            "held": self.held,
            "savingsPerHour": round(self.savings_per_hour, 5),
            "leaseSkipped": self.lease_skipped,
            "terminations": self.terminations,
        }


def run(ctx: Context, remaining_seconds: float) -> DisruptionReport:
    """Passes until nothing is left to follow or the time runs out (see the module docstring)."""
    clock = ctx.clock
    deadline = clock.monotonic() + min(LOOP_BUDGET_SECONDS, remaining_seconds - SAFETY_MARGIN_SECONDS)
    lease = ctx.cluster.writer_lease(
        f"{LEASE_IDENTITY}/{uuid.uuid4().hex[:8]}", duration_seconds=LEASE_SECONDS
    )
    report = DisruptionReport()
    while True:
        report.passes += 1
        disrupted_before, skipped_before = len(report.disrupted), report.lease_skipped
        decision, terms = disruption_pass(ctx, lease, report)
        left = deadline - clock.monotonic()
        if terms and left > 0:
            termination.run(ctx, terms, budget_seconds=min(DRIVE_SLICE_SECONDS, left))
        report.terminations = [t.summary() for t in terms]
        report.held = decision.held
        left = deadline - clock.monotonic()
        wait = _next_look(
            ctx,
            decision,
            terms,
            acted=len(report.disrupted) > disrupted_before,
            lease_skipped=report.lease_skipped > skipped_before,
        )
        if wait is None or wait >= left:
            break
        clock.sleep(wait)
    publish_metrics(ctx, report)
    ctx.logger.info("disruption invocation done", extra=report.summary())
    return report


def disruption_pass(
    ctx: Context, lease: Any, report: DisruptionReport
) -> tuple[Decision, list[termination.Termination]]:
    """Steps 1 to 4 of the module docstring; the terminations to drive (new and half-done ones)."""
    world = observe(ctx)
    last_events = record_pod_events(ctx, world)
    decision = decide(
        nodeclaims=world.nodeclaims,
        nodes=world.nodes,
        pods=world.pods,
        nodepools=nodepools.triage(world).usable,
        last_pod_event=last_events,
        now=world.taken_at,
    )
    if decision.disrupt:
        if lease.acquire():
            try:
                for candidate in decision.disrupt:
                    _disrupt(ctx, world, candidate, decision, report)
            finally:
                lease.release()
        else:
            report.lease_skipped += 1
            ctx.logger.info("another writer holds the lease; disruptions wait for the next pass")
    return decision, termination.pending_terminations(ctx)


def record_pod_events(ctx: Context, world: World) -> dict[str, datetime]:
    """NodeClaim → its last pod event (see the module docstring), writing the ones that changed."""
    last: dict[str, datetime] = {}
    for claim in world.nodeclaims:
        node = world.node_of(claim)
        if node is None or objects.is_deleting(claim):
            continue
        name = objects.name_of(claim)
        digest = pods_fingerprint(p for p in world.pods_on(node) if is_reschedulable(p))
        recorded = objects.parse_time((claim.get("status") or {}).get("lastPodEventTime"))
        if objects.annotations_of(claim).get(FINGERPRINT_ANNOTATION) != digest:
            recorded = world.taken_at
            ctx.cluster.patch_nodeclaim(name, {"metadata": {"annotations": {FINGERPRINT_ANNOTATION: digest}}})
            ctx.cluster.patch_nodeclaim_status(name, {"lastPodEventTime": objects.format_time(recorded)})
        if recorded is not None:
            last[name] = recorded
    return last


def _disrupt(
    ctx: Context, world: World, candidate: Candidate, decision: Decision, report: DisruptionReport
) -> None:
    node_name = objects.name_of(candidate.node) if candidate.node else None
    # A pod bound since the snapshot: the node is not empty any more.
    recheck = candidate.reason == EMPTY and node_name is not None
    if recheck and any(is_reschedulable(p) for p in ctx.cluster.list_pods_on_node(node_name or "")):
        decision.held[candidate.name] = f"a pod arrived on {node_name}"
        return
    price = world.price_of(candidate.nodeclaim)
    checkpoints.checkpoint("disruption.candidate-chosen")
    termination.begin(
        ctx,
        nodeclaim=candidate.nodeclaim,
        node=candidate.node,
        instance_id=objects.nodeclaim_instance_id(candidate.nodeclaim),
        deadline=None,  # the NodeClaim's terminationGracePeriod, if any, bounds the drain
        reason=f"{candidate.reason} (NodePool {candidate.nodepool})",
        involuntary=False,
        instance_going=False,
    )
    report.disrupted.append(
        {
            "nodeclaim": candidate.name,
            "node": node_name,
            "nodepool": candidate.nodepool,
            "reason": candidate.reason,
            "pricePerHour": price,
        }
    )
    ctx.logger.info("disrupting a node", extra=report.disrupted[-1])


def _next_look(
    ctx: Context,
    decision: Decision,
    terms: list[termination.Termination],
    *,
    acted: bool,
    lease_skipped: bool,
) -> float | None:
    """Seconds until the next pass is worth making; None when nothing is left to follow.

    A budget that holds nodes back is worth another look only when this pass used it (its room
    comes back as those drains finish); a budget that allows nothing (``nodes: 0`` in a window)
    must not keep the function looping, and billed, until the window closes. The writers' lease
    is held for one provisioner pass at a time, so a skipped pass is tried again soon.
    """
    if any(not t.done for t in terms) or lease_skipped:
        return POLL_SECONDS
    if decision.budget_blocked and acted:
        return 0.0  # this pass's drains are done, so the budget's room is back now
    if decision.next_check is not None:
        return max(0.0, (decision.next_check - ctx.clock.now()).total_seconds())
    return None


def publish_metrics(ctx: Context, report: DisruptionReport) -> None:
    metrics = ctx.metrics
    metrics.add_metric(
        name="DisruptionSavingsPerHour", unit=MetricUnit.NoUnit, value=round(report.savings_per_hour, 4)
    )
    namespace = getattr(metrics, "namespace", None)
    for reason, count in sorted(Counter(d["reason"] for d in report.disrupted).items()):
        with single_metric(
            name="DisruptionActions", unit=MetricUnit.Count, value=count, namespace=namespace
        ) as metric:
            metric.add_dimension(name="Reason", value=reason)
