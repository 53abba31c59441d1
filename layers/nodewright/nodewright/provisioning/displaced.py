"""Capacity ahead of time for the pods of nodes that are about to go: interruption and rebalance
(``replace_for_displaced``), and a disruption command's replacements (``launch_replacements``).

The interruption flow calls this *before* it drains: the replacement starts booting while the old
node still runs its pods, which is how a drain beats the two-minute spot notice. The pods are
planned as if they were pending, against the cluster without the displaced nodes; the NodeClaims
are created and launched by the provisioning pass's own routine (``launch.create_and_launch``),
under the caller's writers' lease and its write guard.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from nodewright.provisioning import planning
from nodewright.provisioning.flow import PassReport, publish_launches
from nodewright.provisioning.launch import create_and_launch
from nodewright.state import nodepools
from nodewright.state.pods import key as pod_key
from nodewright.state.world import World, observe

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.scheduling import NewClaim
    from nodewright.state.guard import WriteGuard


def replace_for_displaced(ctx: Context, node_names: Iterable[str], *, guard: WriteGuard | None) -> PassReport:
    """Plan, create and launch NodeClaims for the reschedulable pods (``state.pods.is_reschedulable``)
    of ``node_names`` — nodes an interruption takes, whose drain evicts every pod regardless of PDBs
    and do-not-disrupt — planned together with the pods that will leave the nodes already going
    (``World.displaced_pods``) and the pods pending now (``state.pods.is_provisionable``).

    Returns the pass report (``created``, ``launched``, ``unschedulable`` with reasons, ``stopped``
    when ``guard`` stopped the writes). Pods that fit on the remaining nodes or on NodeClaims
    already in flight get no new capacity.
    """
    # Observed here, not taken from the caller: the interrupted nodes were cordoned and their
    # NodeClaims marked a moment ago, and every write since must be in what is planned against.
    world = observe(ctx)
    # Planned with them, as a provisioning pass would: the pods of nodes already going (an earlier
    # interruption's) and the pods pending now (evicted from those nodes, or new). Capacity in
    # flight for them must not look free to these.
    interrupted = set(node_names)
    going = interrupted | world.going_node_names()
    displaced = world.displaced_pods(going, forced=interrupted)
    pending = world.provisionable_pods()
    remaining = world.without_nodes(going)
    planned = pending + displaced
    report = PassReport(pending_pods=len(planned), pending_keys=frozenset(pod_key(p) for p in planned))
    if not displaced and not pending:
        return report
    pools = nodepools.triage(remaining)
    plan = planning.plan(remaining, planned, pools.usable)
    report.unschedulable = plan.unschedulable
    report.nominated = plan.nominated
    report.record(create_and_launch(ctx, remaining, plan.new_claims, guard=guard))
    publish_launches(ctx, report)
    ctx.logger.info(
        "replacement capacity for displaced nodes", extra={"nodes": sorted(going), **report.summary()}
    )
    return report


def launch_replacements(
    ctx: Context, world: World, new_claims: Iterable[NewClaim], *, guard: WriteGuard | None
) -> PassReport:
    """Create and launch the NodeClaims a disruption command needs before its nodes go (the
    scheduling core's ``NewClaim``s, already filtered by the command), exactly as a provisioning
    pass creates and launches its own. The caller holds the writers' lease; ``created`` names the
    NodeClaims, whose launch may still fail (``failures``) or not be tried (``stopped``)."""
    report = PassReport()
    plans = [planning.claim_plan(claim, []) for claim in new_claims]
    report.record(create_and_launch(ctx, world, plans, guard=guard))
    publish_launches(ctx, report)
    ctx.logger.info("replacement capacity for a disruption", extra=report.summary())
    return report
