"""Capacity ahead of time for the pods of nodes that are about to go (interruption, rebalance).

The interruption flow calls this *before* it cordons and drains: the replacement starts
booting while the old node still runs its pods, which is how a drain beats the two-minute
spot notice. The pods are planned as if they were pending, against the cluster without
the displaced nodes; the NodeClaims are created and launched exactly as a provisioning
pass does. The caller holds the writers' lease.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from nodewright.provisioning import nodeclaims, planning
from nodewright.provisioning.flow import PassReport, create_nodeclaim, launch_one, publish_metrics
from nodewright.provisioning.launch import Launched
from nodewright.state import nodepools
from nodewright.state.pods import is_reschedulable, node_name
from nodewright.state.pods import key as pod_key
from nodewright.state.world import observe

if TYPE_CHECKING:
    from nodewright.context import Context


def as_pending(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as the scheduler would see it after eviction: unbound and Unschedulable."""
    clone = copy.deepcopy(pod)
    clone.setdefault("spec", {}).pop("nodeName", None)
    clone["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    return clone


def replace_for_displaced(ctx: Context, node_names: Iterable[str]) -> PassReport:
    """Plan, create and launch NodeClaims for the reschedulable pods (``state.pods.is_reschedulable``)
    of ``node_names``.

    Returns the pass report (``created``, ``launched``, ``unschedulable`` with reasons). Pods that
    fit on the remaining nodes or on NodeClaims already in flight get no new capacity.
    """
    going = set(node_names)
    world = observe(ctx)
    displaced = [as_pending(p) for p in world.pods if node_name(p) in going and is_reschedulable(p)]
    remaining = world.without_nodes(going)
    report = PassReport(pending_pods=len(displaced), pending_keys=frozenset(pod_key(p) for p in displaced))
    if not displaced:
        return report
    pools = nodepools.triage(remaining)
    plan = planning.plan(remaining, displaced, pools.usable)
    report.unschedulable = plan.unschedulable
    report.nominated = plan.nominated
    for claim_plan in plan.new_claims:
        claim = create_nodeclaim(ctx, remaining, claim_plan)
        report.created.append(nodeclaims.name_of(claim))
        outcome = launch_one(ctx, remaining, claim, fresh=True)
        if isinstance(outcome, Launched):
            report.launched.append(outcome)
        elif outcome is not None:
            report.failures.append(outcome)
    publish_metrics(ctx, report)
    ctx.logger.info(
        "replacement capacity for displaced nodes", extra={"nodes": sorted(going), **report.summary()}
    )
    return report
