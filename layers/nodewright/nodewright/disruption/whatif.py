"""``nodewright plan --consolidate``: what a disruption pass would do to a cluster now, written nowhere.

The cluster is the World a pass observes (``state.world.observe`` over a manifest bundle or a live
cluster, read once); the decision is the disruption flow's own, in the flow's order (``flow.reconcile``):
expiration and emptiness (``decide.decide``), and, when no empty node goes and no command is in
flight, consolidation (``consolidation.choose``: the candidates, multi-node then single-node, within
the NodePools' ``Underutilized`` budgets). Two clock rules differ, and the output says so
(``CLOCK_RULES``): ``consolidateAfter`` and the nomination wait are taken as passed, and so is the
15 s validation wait (the question is "what would you remove?", not "what would you remove this
minute?"); nothing is carried out. Drift is not judged (it needs the instances' AMIs, subnets and
security groups from EC2). As a pass does, it answers with the first command; the pass after it
would look again. Every other NodeClaim stays, each with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.api.models import INITIALIZED, NodePool
from nodewright.cluster import objects
from nodewright.disruption import consolidation, execute
from nodewright.disruption.decide import EMPTY, budget_room, decide
from nodewright.state.world import nodepool_name

if TYPE_CHECKING:
    from nodewright.disruption.decide import Candidate as Removal
    from nodewright.scheduling import NewClaim
    from nodewright.state.interfaces import Obj
    from nodewright.state.world import World

CLOCK_RULES = (
    "consolidateAfter and the nomination wait are taken as passed",
    f"the {consolidation.VALIDATION_SECONDS:g} s validation wait is taken as passed",
    "drift is not judged",
)
COMMAND_FOUND_FIRST = "a candidate; this pass's command was found first (the next pass looks again)"


@dataclass
class ConsolidationWhatIf:
    source: str
    now: datetime | None = None
    nodeclaims: int = 0
    evaluated: int = 0
    disrupted: list[dict[str, Any]] = field(default_factory=list)  # expired and empty, as a pass removes them
    command: consolidation.Command | None = None
    stays: dict[str, str] = field(default_factory=dict)  # every other NodeClaim → why it stays
    cost_per_hour: float = 0.0  # the NodeClaims whose price is known
    unpriced: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # input the decision does not read
    spot_to_spot: bool = False  # the stack's SpotToSpotConsolidation gate this answer assumes

    def to_json(self) -> dict[str, Any]:
        command = self.command
        return {
            "source": self.source,
            "at": self.now.isoformat() if self.now else None,
            "clockRules": list(CLOCK_RULES),
            "featureGates": {"SpotToSpotConsolidation": self.spot_to_spot},
            "nodeClaims": self.nodeclaims,
            "candidatesEvaluated": self.evaluated,
            "costPerHour": round(self.cost_per_hour, 5),
            "unpriced": self.unpriced,
            "disrupted": self.disrupted,
            "command": None
            if command is None
            else {
                "description": command.describe(),
                "method": command.method,
                "action": command.action,
                "removes": [
                    {
                        "nodeClaim": c.name,
                        "node": c.node_name,
                        "nodePool": c.nodepool,
                        "instanceType": c.instance_type,
                        "capacityType": c.capacity_type,
                        "pricePerHour": c.price,
                        "pods": [f"{objects.namespace_of(p)}/{objects.name_of(p)}" for p in c.pods],
                    }
                    for c in command.candidates
                ],
                "launches": [launch_json(r) for r in command.replacements],
                "pricePerHourBefore": round(command.price_before, 5),
                "pricePerHourAfter": round(command.price_after, 5),
                "savingsPerHour": round(command.savings, 5),
            },
            "notConsolidated": dict(sorted(self.stays.items())),
            "ignored": self.ignored,
        }

    def render(self) -> str:
        lines = [
            f"consolidation what-if ({self.source}; nothing is written): {self.nodeclaims} NodeClaim(s), "
            f"${self.cost_per_hour:.4f}/h, {self.evaluated} candidate(s) evaluated",
            f"  clock: {'; '.join(CLOCK_RULES)}",
            f"  SpotToSpotConsolidation: {'on' if self.spot_to_spot else 'off (--spot-to-spot: on)'}",
        ]
        if self.unpriced:
            lines.append(f"  no price for: {', '.join(self.unpriced)} (those are not consolidated)")
        for removal in self.disrupted:
            price = removal["pricePerHour"]
            cost = f"${price:.4f}/h" if price is not None else "price unknown"
            lines.append(
                f"  removes NodeClaim {removal['nodeClaim']} ({removal['reason']}, NodePool "
                f"{removal['nodePool']}, node {removal['node']}, {cost})"
            )
        command = self.command
        if command is None and not self.disrupted:
            lines.append("  no command: every node stays")
        elif command is None:
            lines.append("  no consolidation command this pass (a pass that removes empty nodes stops there)")
        else:
            lines.append(f"  command ({command.method}): {command.describe()}")
            for c in command.candidates:
                price = f"${c.price:.4f}/h" if c.price is not None else "price unknown"
                lines.append(
                    f"    removes NodeClaim {c.name} (node {c.node_name}, NodePool {c.nodepool}, "
                    f"{c.instance_type} {c.capacity_type or '(no capacity type)'}, {price}, "
                    f"{len(c.pods)} pod(s) to move)"
                )
            for r in command.replacements:
                launch = launch_json(r)
                shown = ", ".join(launch["instanceTypes"][:5])
                more = (
                    f" (+{len(launch['instanceTypes']) - 5} more)" if len(launch["instanceTypes"]) > 5 else ""
                )
                lines.append(
                    f"    launches first a NodeClaim on NodePool {r.nodepool}: {shown}{more}, "
                    f"{'/'.join(launch['capacityTypes'])} in {', '.join(launch['zones'])}, at most "
                    f"${launch['worstPricePerHour']:.4f}/h"
                )
                lines.append(
                    "      requirements: " + "; ".join(_requirement_text(t) for t in launch["requirements"])
                )
            lines.append(
                f"    $/h: {command.price_before:.4f} → {command.price_after:.4f} "
                f"(saves {command.savings:.4f}); a pass takes one command, the next pass looks again"
            )
        if self.stays:
            lines.append(f"  stays ({len(self.stays)}):")
            lines.extend(f"    {name}: {why}" for name, why in sorted(self.stays.items()))
        if self.ignored:
            lines.append("  not read (kinds the decision does not use):")
            lines.extend(f"    {item}" for item in self.ignored)
        return "\n".join(lines)


def launch_json(claim: NewClaim) -> dict[str, Any]:
    """A replacement as the JSON shows it: where it may go and what it may be."""
    offerings = [o for t in claim.instance_types for o in t.offerings]
    return {
        "nodePool": claim.nodepool,
        "instanceTypes": [t.name for t in claim.instance_types],
        "capacityTypes": sorted({o.capacity_type for o in offerings}),
        "zones": sorted({o.zone for o in offerings}),
        "requirements": claim.requirements.to_k8s(),
        "worstPricePerHour": round(consolidation.worst_launch_price(claim), 5),
    }


def _requirement_text(term: dict[str, Any]) -> str:
    values = term.get("values")
    shown = ""
    if isinstance(values, list):
        shown = " " + ",".join(str(v) for v in values[:6]) + (" …" if len(values) > 6 else "")
    return f"{term['key']} {term['operator']}{shown}"


def consolidation_what_if(
    world: World, usable: list[Obj], source: str, *, spot_to_spot: bool = False
) -> ConsolidationWhatIf:
    """What a disruption pass would remove now (see the module); ``spot_to_spot``: the stack's
    ``spotToSpotConsolidation`` (Karpenter's feature gate, off by default)."""
    result = ConsolidationWhatIf(
        source=source, now=world.taken_at, nodeclaims=len(world.nodeclaims), spot_to_spot=spot_to_spot
    )
    for claim in world.nodeclaims:
        price = world.price_of(claim)
        if price is None:
            name = objects.name_of(claim)
            kind = objects.labels_of(claim).get(labels.INSTANCE_TYPE, "no instance type")
            result.unpriced.append(f"{name} ({kind})")
        else:
            result.cost_per_hour += price
    last_events = {c.name: when for c in world.claim_views if (when := c.last_pod_event) is not None}
    # The flow's order (flow.reconcile): expiration and emptiness first ...
    decision = decide(
        nodeclaims=world.claim_views,
        nodes=world.node_views,
        pods=world.pods,
        nodepools=world.nodepool_models(usable),
        last_pod_event=last_events,
        now=world.taken_at,
        ignore_waits=True,
    )
    result.disrupted = [_removal(world, c) for c in decision.disrupt]
    stays = dict(decision.held)
    emptied = any(c.reason == EMPTY for c in decision.disrupt)
    in_flight = execute.commands_in_flight(world)
    # ... then, unless an empty node goes this pass or a command is in flight, consolidation.
    if not emptied and not in_flight:
        room = budget_room(
            nodeclaims=world.claim_views,
            nodes=world.node_views,
            nodepools=world.nodepool_models(usable),
            reason=consolidation.UNDERUTILIZED,
            now=world.taken_at,
        )
        sim, pending = consolidation.simulation(world, usable)
        choice = consolidation.choose(
            sim,
            world,
            usable,
            last_events,
            pending=pending,
            room=room,
            ignore_waits=True,
            spot_to_spot=spot_to_spot,
        )
        result.command, result.evaluated = choice.command, choice.evaluated
        for reasons in (choice.blocked, choice.why_not):
            for name, why in reasons.items():
                stays.setdefault(name, why)
    going = {c.name for c in decision.disrupt}
    if result.command is not None:
        going |= {c.name for c in result.command.candidates}
    usable_names = {objects.name_of(p) for p in usable}
    for claim in world.nodeclaims:
        name = objects.name_of(claim)
        if name not in going and name not in stays:
            stays[name] = _why_stays(world, claim, usable_names, emptied=emptied, in_flight=in_flight)
    result.stays = {name: why for name, why in stays.items() if name not in going}
    return result


def _removal(world: World, removal: Removal) -> dict[str, Any]:
    return {
        "nodeClaim": removal.name,
        "node": objects.name_of(removal.node) if removal.node else None,
        "nodePool": removal.nodepool,
        "reason": removal.reason,
        "pricePerHour": world.price_of(removal.nodeclaim),
    }


def _why_stays(world: World, claim: Obj, usable: set[str], *, emptied: bool, in_flight: bool) -> str:
    """Why a NodeClaim no rule of this pass named stays, in words (the rules are
    ``consolidation.candidates`` and ``decide.decide``'s; this only says which one left it out)."""
    pool_name = nodepool_name(claim)
    node = world.node_of(claim)
    if objects.is_deleting(claim) or (node is not None and objects.is_deleting(node)):
        return "being deleted already"
    if not pool_name or pool_name not in usable:
        return f"NodePool {pool_name or '(none)'} is not one a pass uses (see the NodePools skipped)"
    if node is None:
        return "no registered Node yet"
    if objects.has_taint(node, labels.DISRUPTED_TAINT_KEY):
        return "part of a disruption command already"
    if (objects.condition(claim, INITIALIZED) or {}).get("status") != "True":
        return "not initialized yet"
    pool = world.nodepool_model(pool_name) or NodePool()
    if pool.spec.is_static:
        return "a static NodePool's node: its replicas say how many there are"
    policy = pool.spec.disruption.consolidation_policy
    if policy != "WhenEmptyOrUnderutilized":
        return f"NodePool {pool_name} consolidates only empty nodes ({policy}), and this one has pods"
    if emptied:
        return "a pass that removes empty nodes takes no consolidation command (the next pass looks again)"
    if in_flight:
        return "a disruption command is in flight: a pass starts the next one once it is done"
    return COMMAND_FOUND_FIRST


__all__ = ["CLOCK_RULES", "ConsolidationWhatIf", "consolidation_what_if", "launch_json"]
