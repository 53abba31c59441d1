"""Static NodePools (``spec.replicas``): as many nodes as the replicas say, whatever the pods — Karpenter
v1.14's static provisioning and deprovisioning controllers, run once per provisioning pass.

Each pass, for every static NodePool (when the stack's ``staticCapacity`` setting, Karpenter's
StaticCapacity feature gate, is on), counting its NodeClaims as Karpenter's NodePoolState does
(``state.nodepools.static_nodes``: active, drifting, deleting):

* **scale up** (a usable NodePool only): while active + drifting is short of the replicas, create
  that many NodeClaims from the NodePool's template (``state.nodepools.static_template``) — as many as
  ``limits.nodes`` leaves room for, counting every NodeClaim not yet gone — and launch them; a
  NodeClaim deleted (scale-down, expiration, interruption, ``kubectl delete``) is replaced this way;
* **scale down**: active NodeClaims beyond the replicas are deleted (their termination drains them
  through the Eviction API, PodDisruptionBudgets honoured; no disruption budget holds a user's scale
  down): first those not launched yet, then nodes with no pod but DaemonSet pods, then the cheapest
  to disrupt (Karpenter's rescheduling cost times lifetime left), a node with a do-not-disrupt pod
  last.

Drift replaces a static node one for one within its budget (``disruption``), expiration deletes it
and this pass replaces it; no pending pod is ever planned onto a new node of a static NodePool
(``state.snapshot``), and consolidation and emptiness leave its nodes alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nodewright.cluster.objects import name_of
from nodewright.provisioning import planning
from nodewright.state import nodepools
from nodewright.state.cost import disruption_cost
from nodewright.state.pods import has_do_not_disrupt, is_daemon, is_terminal
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj
    from nodewright.state.views import ClaimView, PoolView


@dataclass
class StaticReport:
    """What the pass did to the static NodePools: plans to create, NodeClaims deleted, and why a
    NodePool is held (a limit, no instance type)."""

    to_create: list[planning.ClaimPlan] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)


def reconcile(ctx: Context, world: World, pools: nodepools.PoolTriage) -> StaticReport:
    """Scale every static NodePool to its replicas: delete the NodeClaims beyond them now, and return
    the NodeClaims to create (the caller creates and launches them with the pass's own)."""
    report = StaticReport()
    if not ctx.settings.static_capacity:
        return report  # FieldsNotActedOn says so on each static NodePool (state.nodepools.triage)
    report.to_create = plan(world, pools, report)
    for pool in world.pool_views:
        if nodepools.is_static(pool) and not pool.deleting:
            for claim in surplus(world, pool):
                name = name_of(claim)
                wanted = nodepools.replicas(pool)
                ctx.cluster.record_event(
                    claim, "Deprovisioning", f"NodePool {pool.name} scaled down to {wanted} replicas"
                )
                ctx.cluster.delete_nodeclaim(name)
                report.deleted.append(name)
    if report.deleted or report.to_create or report.held:
        ctx.logger.info(
            "static NodePools",
            extra={
                "creating": [c.nodepool for c in report.to_create],
                "deleted": report.deleted,
                "held": report.held,
            },
        )
    return report


def plan(
    world: World, pools: nodepools.PoolTriage, report: StaticReport | None = None
) -> list[planning.ClaimPlan]:
    """The NodeClaims the usable static NodePools are short of (see the module), one ``ClaimPlan`` each;
    why a NodePool that is short gets none goes into ``report.held``."""
    report = report if report is not None else StaticReport()
    wanted: list[planning.ClaimPlan] = []
    for usable in pools.usable:
        pool = world.pool_view(name_of(usable))
        if pool is None or not nodepools.is_static(pool):
            continue
        name = pool.name
        nodes = nodepools.static_nodes(world, name)
        short = (nodepools.replicas(pool) or 0) - len(nodes.active) - len(nodes.drifting)
        if short <= 0:
            continue
        count = nodepools.static_room(pool, nodes, short)
        if count <= 0:
            report.held[name] = f"NodePool {name}: limits.nodes {nodepools.node_limit(pool)} reached"
            continue
        template, why = nodepools.static_template(world, pool)
        if template is None:
            report.held[name] = why
            continue
        wanted += [planning.claim_plan(template, []) for _ in range(count)]
    return wanted


def surplus(world: World, pool: PoolView) -> list[Obj]:
    """The active NodeClaims of a static NodePool beyond its replicas, in Karpenter's deprovisioning
    order (see the module)."""
    nodes = nodepools.static_nodes(world, pool.name)
    excess = len(nodes.active) - (nodepools.replicas(pool) or 0)
    if excess <= 0:
        return []

    def order(claim: ClaimView) -> tuple[int, float, str]:
        node = world.node_view_of(claim)
        if not claim.provider_id or node is None:
            return (0, 0.0, claim.name)  # not launched (or not registered) yet
        pods = [p for p in world.pods_on(node.name) if not is_terminal(p)]
        held = any(has_do_not_disrupt(p, world.taken_at) for p in pods)
        if all(is_daemon(p) for p in pods) and not held:
            return (1, 0.0, claim.name)  # empty: nothing but DaemonSet pods
        cost = disruption_cost(pods, claim, world.taken_at)
        return (3 if held else 2, cost, claim.name)

    return [claim.raw for claim in sorted(nodes.active, key=order)[:excess]]
