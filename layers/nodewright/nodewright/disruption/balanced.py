"""``consolidationPolicy: Balanced`` (Karpenter v1.14): a move must save enough for what it disrupts.

Karpenter scores every consolidation move of a Balanced NodePool against the NodePool's totals::

    savings_fraction    = savings / NodePool's $/h
    disruption_fraction = disruption cost / NodePool's total disruption cost
    score               = savings_fraction / disruption_fraction

and approves it when ``score >= 1/k`` with ``k = BALANCED_K`` (2: the move's share of the NodePool's
disruption may be at most twice its share of the NodePool's cost). A node's disruption cost is
1 (the node itself) plus ``max(0, EvictionCost)`` of each pod that must move (``state.cost``:
1 per default pod, more for priority and deletion cost; no lifetime factor); a NodePool's totals
add up its priced nodes. An empty node costs 1, so deleting one always passes; a move saving
nothing never does. A move across NodePools is scored for each Balanced NodePool it removes nodes
from, with that NodePool's share of the saving (in proportion to the removed nodes' prices), and
must pass for every one; a WhenEmptyOrUnderutilized NodePool's nodes pass unscored.

Single-node consolidation skips a node whose best move (deleting it: ``delete_passes``) would not
pass. When the budget leaves room for only some moves, Karpenter ranks them by score; the repack
(``repack``) orders its wave by saving per unit of disruption cost for the same reason.

Karpenter v1.14 has no field for ``k``: its later ``consolidationThreshold`` (1 to 3) is not part of
the v1.14 schema this API serves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodewright.cluster import objects
from nodewright.state.cost import eviction_cost
from nodewright.state.pods import is_reschedulable
from nodewright.state.world import World, nodepool_name

if TYPE_CHECKING:
    from nodewright.api.models import NodePool
    from nodewright.disruption.consolidation import Candidate, Command
    from nodewright.state.interfaces import Obj

BALANCED = "Balanced"
BALANCED_K = 2


@dataclass(frozen=True)
class Totals:
    """A NodePool's $/h and disruption cost, the denominators of its moves' scores."""

    cost: float
    disruption: float


@dataclass(frozen=True)
class Score:
    """One NodePool's verdict on a move."""

    nodepool: str
    score: float
    savings_fraction: float
    disruption_fraction: float

    @property
    def approved(self) -> bool:
        return self.score >= 1.0 / BALANCED_K

    def why_not(self) -> str:
        return (
            f"NodePool {self.nodepool} is Balanced: the move saves {self.savings_fraction:.2%} of its cost "
            f"for {self.disruption_fraction:.2%} of its disruption (score {self.score:.2f}, needs "
            f"{1.0 / BALANCED_K:.2f})"
        )


def balanced_pools(usable: Iterable[NodePool]) -> set[str]:
    """The usable NodePools whose policy is Balanced."""
    return {p.name for p in usable if p.spec.disruption.consolidation_policy == BALANCED}


def node_cost(pods: Iterable[Obj]) -> float:
    """A node's disruption cost: 1 for the node, plus each moving pod's ``max(0, EvictionCost)``."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in pods)


def totals(world: World, pools: set[str]) -> dict[str, Totals]:
    """Each Balanced NodePool's totals over its live, priced nodes (see the module)."""
    cost: dict[str, float] = defaultdict(float)
    disruption: dict[str, float] = defaultdict(float)
    for claim in world.nodeclaims:
        pool = nodepool_name(claim)
        node = world.node_of(claim)
        if pool not in pools or node is None or objects.is_deleting(claim):
            continue
        price = world.price_of(claim)
        if not price:
            continue  # Karpenter leaves a node it cannot price out of both totals
        cost[pool] += price
        disruption[pool] += node_cost(p for p in world.pods_on(node) if is_reschedulable(p))
    return {pool: Totals(cost[pool], disruption[pool]) for pool in cost}


def score(candidates: list[Candidate], savings: float, pool: str, pool_totals: Totals) -> Score:
    """The score of removing ``candidates`` (all of NodePool ``pool``) for ``savings`` $/h."""
    moved = sum(node_cost(c.pods) for c in candidates)
    savings_fraction = savings / pool_totals.cost if pool_totals.cost > 0 else 0.0
    disruption_fraction = moved / pool_totals.disruption if pool_totals.disruption > 0 else 0.0
    if savings <= 0 or pool_totals.cost <= 0:
        value = 0.0
    elif disruption_fraction <= 0:
        value = float("inf")
    else:
        value = savings_fraction / disruption_fraction
    return Score(pool, value, savings_fraction, disruption_fraction)


def refusal(command: Command, balanced: Mapping[str, Totals]) -> str | None:
    """Why Balanced refuses ``command`` (None: every Balanced NodePool it touches approves it)."""
    by_pool: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in command.candidates:
        by_pool[candidate.nodepool].append(candidate)
    total_price = command.price_before
    for pool, removed in sorted(by_pool.items()):
        if pool not in balanced:
            continue
        share = sum(c.price or 0.0 for c in removed) / total_price if total_price > 0 else 1.0
        verdict = score(removed, command.savings * share, pool, balanced[pool])
        if not verdict.approved:
            return verdict.why_not()
    return None


def delete_passes(candidate: Candidate, balanced: Mapping[str, Totals]) -> bool:
    """Whether deleting the node outright (its best move) would pass: when not, no move of it alone
    can (Karpenter's candidate filter for single-node consolidation)."""
    pool_totals = balanced.get(candidate.nodepool)
    if pool_totals is None:
        return True
    return score([candidate], candidate.price or 0.0, candidate.nodepool, pool_totals).approved
