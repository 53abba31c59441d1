"""``nodewright plan --consolidate``: what consolidation would do to a cluster now, written nowhere.

The cluster is the World ``nodewright plan`` reads (manifests, or a live cluster through a
kubeconfig, read once); the decision is the disruption flow's own (``consolidation.choose``: the
candidates, multi-node then single-node, within the NodePools' ``Underutilized`` budgets), with two
differences said in the output: ``consolidateAfter`` and the nomination wait are taken as passed
(the question is "what would you remove?", not "what would you remove this minute?"), and nothing
is validated 15 s later or carried out. Drift is not judged (it needs the instances' AMIs, subnets
and security groups from EC2). As a pass does, it answers with the first command; the pass after
it would look again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.cluster import objects
from nodewright.disruption import consolidation
from nodewright.disruption.decide import budget_room

if TYPE_CHECKING:
    from nodewright.state.interfaces import Obj
    from nodewright.state.world import World


@dataclass
class ConsolidationWhatIf:
    source: str
    nodeclaims: int = 0
    evaluated: int = 0
    command: consolidation.Command | None = None
    blocked: dict[str, str] = field(default_factory=dict)
    why_not: dict[str, str] = field(default_factory=dict)
    cost_per_hour: float = 0.0  # the NodeClaims whose price is known
    unpriced: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        command = self.command
        return {
            "source": self.source,
            "nodeClaims": self.nodeclaims,
            "candidatesEvaluated": self.evaluated,
            "costPerHour": round(self.cost_per_hour, 5),
            "unpriced": self.unpriced,
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
                "launches": [
                    {
                        "nodePool": r.nodepool,
                        "instanceTypes": [t.name for t in r.instance_types],
                        "worstPricePerHour": round(consolidation.worst_launch_price(r), 5),
                    }
                    for r in command.replacements
                ],
                "pricePerHourBefore": round(command.price_before, 5),
                "pricePerHourAfter": round(command.price_after, 5),
                "savingsPerHour": round(command.savings, 5),
            },
            "notConsolidated": dict(sorted({**self.why_not, **self.blocked}.items())),
        }

    def render(self) -> str:
        lines = [
            f"consolidation what-if ({self.source}; nothing is written): {self.nodeclaims} NodeClaim(s), "
            f"${self.cost_per_hour:.4f}/h, {self.evaluated} candidate(s) evaluated "
            "(consolidateAfter and the nomination wait taken as passed; drift not judged)"
        ]
        if self.unpriced:
            lines.append(f"  no price for: {', '.join(self.unpriced)} (those are not consolidated)")
        command = self.command
        if command is None:
            lines.append("  no command: every node stays")
        else:
            lines.append(f"  command ({command.method}): {command.describe()}")
            for c in command.candidates:
                price = f"${c.price:.4f}/h" if c.price is not None else "price unknown"
                lines.append(
                    f"    removes NodeClaim {c.name} (node {c.node_name}, {c.instance_type} "
                    f"{c.capacity_type}, {price}, {len(c.pods)} pod(s) to move)"
                )
            for r in command.replacements:
                shown = ", ".join(t.name for t in r.instance_types[:5])
                more = f" (+{len(r.instance_types) - 5} more)" if len(r.instance_types) > 5 else ""
                lines.append(
                    f"    launches first a NodeClaim on NodePool {r.nodepool}: {shown}{more}, at most "
                    f"${consolidation.worst_launch_price(r):.4f}/h"
                )
            lines.append(
                f"    $/h: {command.price_before:.4f} → {command.price_after:.4f} "
                f"(saves {command.savings:.4f}); a pass takes one command, the next pass looks again"
            )
        left_alone = {**self.why_not, **self.blocked}
        if left_alone:
            lines.append(f"  not consolidated ({len(left_alone)}):")
            lines.extend(f"    {name}: {why}" for name, why in sorted(left_alone.items()))
        return "\n".join(lines)


def consolidation_what_if(
    world: World, usable: list[Obj], source: str, *, spot_to_spot: bool = False
) -> ConsolidationWhatIf:
    """The command a disruption pass would take for consolidation now (see the module);
    ``spot_to_spot``: the stack's ``spotToSpotConsolidation`` (Karpenter's feature gate, off by default)."""
    result = ConsolidationWhatIf(source=source, nodeclaims=len(world.nodeclaims))
    for claim in world.nodeclaims:
        price = world.price_of(claim)
        if price is None:
            name = objects.name_of(claim)
            kind = objects.labels_of(claim).get(labels.INSTANCE_TYPE, "no instance type")
            result.unpriced.append(f"{name} ({kind})")
        else:
            result.cost_per_hour += price
    room = budget_room(
        nodeclaims=world.nodeclaims,
        nodes=world.nodes,
        nodepools=usable,
        reason=consolidation.UNDERUTILIZED,
        now=world.taken_at,
    )
    sim, pending = consolidation.simulation(world, usable)
    last_events = {
        objects.name_of(c): when
        for c in world.nodeclaims
        if (when := objects.parse_time((c.get("status") or {}).get("lastPodEventTime"))) is not None
    }
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
    result.command, result.blocked, result.why_not = choice.command, choice.blocked, choice.why_not
    result.evaluated = choice.evaluated
    return result
