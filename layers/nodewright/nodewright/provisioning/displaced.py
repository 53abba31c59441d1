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

from nodewright.provisioning import nodeclaims, nodepools, planning
from nodewright.provisioning.flow import PassReport, create_nodeclaim, launch_one, publish_metrics
from nodewright.provisioning.launch import Launched
from nodewright.provisioning.world import World, observe, pod_key
from nodewright.termination import pods as pod_rules

if TYPE_CHECKING:
    from nodewright.context import Context


def reschedulable(pod: dict[str, Any]) -> bool:
    """Pods that come back elsewhere when their node goes: not DaemonSet, not static/mirror, not finished."""
    return not (pod_rules.is_daemonset_pod(pod) or pod_rules.is_mirror_pod(pod) or pod_rules.is_terminal(pod))


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
    """Plan, create and launch NodeClaims for the reschedulable pods of ``node_names``.

    Returns the pass report (``created``, ``launched``, ``unschedulable`` with reasons). Pods that
    fit on the remaining nodes or on NodeClaims already in flight get no new capacity.
    """
    going = set(node_names)
    world = observe(ctx)
    displaced = [
        as_pending(p)
        for p in world.pods
        if (p.get("spec") or {}).get("nodeName") in going and reschedulable(p)
    ]
    remaining = _without_nodes(world, going)
    report = PassReport(pending_pods=len(displaced), pending_keys=frozenset(pod_key(p) for p in displaced))
    if not displaced:
        return report
    pools = nodepools.triage(remaining, planning.validation_errors)
    catalog = planning.Catalog(ctx, remaining)
    plan = planning.plan(remaining, displaced, pools.usable, catalog)
    report.unschedulable = plan.unschedulable
    report.nominated = plan.nominated
    for claim_plan in plan.new_claims:
        claim = create_nodeclaim(ctx, remaining, claim_plan)
        report.created.append(nodeclaims.name_of(claim))
        outcome = launch_one(ctx, remaining, catalog, claim, fresh=True)
        if isinstance(outcome, Launched):
            report.launched.append(outcome)
        elif outcome is not None:
            report.failures.append(outcome)
    publish_metrics(ctx, report)
    ctx.logger.info(
        "replacement capacity for displaced nodes", extra={"nodes": sorted(going), **report.summary()}
    )
    return report


def _without_nodes(world: World, going: set[str]) -> World:
    """The world after ``going`` nodes (and their NodeClaims and pods) are gone."""
    gone_provider_ids = {
        (n.get("spec") or {}).get("providerID") for n in world.nodes if nodeclaims.name_of(n) in going
    }
    return World(
        taken_at=world.taken_at,
        nodeclaims=[
            c
            for c in world.nodeclaims
            if (c.get("status") or {}).get("nodeName") not in going
            and nodeclaims.provider_id(c) not in gone_provider_ids
        ],
        nodes=[n for n in world.nodes if nodeclaims.name_of(n) not in going],
        pods=[p for p in world.pods if (p.get("spec") or {}).get("nodeName") not in going],
        nodepools=world.nodepools,
        nodeclasses=world.nodeclasses,
        daemonsets=world.daemonsets,
        pdbs=world.pdbs,
        persistent_volumes=world.persistent_volumes,
        persistent_volume_claims=world.persistent_volume_claims,
        storage_classes=world.storage_classes,
    )
