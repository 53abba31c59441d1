"""Many nodes → several, in waves: a consolidation command chosen from a whole-cluster repack.

Karpenter's methods remove one node, or a prefix of the disruption-cost order whose pods all fit
one new node; on a fragmented cluster that takes hundreds of passes and stops well short of what
the same pods would cost bought today. ``wave`` asks the scheduling core the whole question once
per pass and takes as much of the answer as the budgets allow:

1. **Repack.** Every movable pod of every candidate is planned, with the pending pods (which keep
   their priority: they are placed first on the room that stays), as if the candidates were free:
   the cheapest set of nodes that holds them, on the nodes that stay and on new ones.
2. **Value.** Each pod is worth what its CPU and memory cost in the cheapest cluster the NodePools'
   types allow: the shadow prices of the covering LP over the repacked pods' demand
   (``scheduling.packing.shadow_prices``; each type at its cheapest allowed offering plus the
   NodePool's per-node volumes). A candidate's *waste* is its price less its pods' worth: what a
   wave removing it saves at best, whatever else the wave holds. (Charging each pod its share of
   its node in the repack instead credited a node with what its pods save by sharing a node with
   complementary pods of other nodes, which only a wave holding those as well realizes: the waves'
   own new nodes, CPU-full and memory-empty or the reverse, looked as wasteful as the dearest old
   nodes, and ten passes spent 63 of 753 disruptions re-disrupting them.)
3. **Keep what the repack would buy.** A node of an instance type the repack buys is what a fresh
   plan would run: partly filled (the last node of an earlier wave), its room is best filled by
   the others' pods, not replaced by another partly filled node. Only while a moving pod still
   fits it, though: one full in CPU or in memory (a wave's CPU-full, memory-idle node) no wave
   fills, and what it wastes only moving its pods saves. So the nodes of other types are
   valued first by a second repack with those nodes staying (their room free, as the command's
   own plan takes it), and the wave is drawn from them; only when that finds no wave are all the
   candidates valued and drawn from as one.
4. **Wave.** The candidates with waste, most waste per disrupted node first (in a ``Balanced``
   NodePool, per unit of its disruption cost, ``balanced.node_cost``), as many as each NodePool's
   budget room allows and at most ``WAVE_MAX``, are one command, asked of the simulation as any
   command is (``consolidation.evaluate`` with several replacements: every pod finds a place and
   none on a node not yet initialized, the new nodes together strictly cheaper at their worst
   launch prices, the price-improvement threshold, spot-to-spot, minValues), and scored by
   ``Balanced``. A candidate the wave does not save on (its pods' share of the new nodes, at their
   worst launch prices, costs as much as it does: a well-filled node, a node whose waste needs
   pods the wave does not hold, a spot node whose replacement may launch at its own price) gives
   its place to the next in the order, and the wave is asked again (``REFINE_ROUNDS``, down to a
   single node), also when it was refused as not cheaper (by the new nodes its plan would have
   launched); the answer that saves the most wins, and when that is a single node, the waves with
   the others were churn: it is left to single-node consolidation. When no refined wave passes,
   the longest passing prefix (binary search) does, at least ``WAVE_MIN`` nodes; below that
   Karpenter's multi- and single-node methods take over.

The command runs as every replace runs (``execute``): candidates tainted, replacements launched
and initialized before any drain, PDBs and do-not-disrupt held by the drain, abandoned cleanly when
a replacement fails. Each pass removes at most its budget and only ever lowers the $/h, and the
next pass repacks what is left: waves, until no candidate has waste left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from nodewright.disruption import balanced
from nodewright.state.pods import as_pending, is_currently_reschedulable
from nodewright.state.pods import key as pod_key

if TYPE_CHECKING:
    from nodewright.disruption.consolidation import Candidate, Command, Verdict
    from nodewright.scheduling import NewClaim
    from nodewright.scheduling.model import Node, Snapshot
    from nodewright.state.interfaces import Obj
    from nodewright.state.snapshot import Simulation

WAVE_MAX = 200  # nodes per command: the drain's fan-out and one pass's time stay bounded
WAVE_MIN = 2  # a single node is single-node consolidation's
WAVE_SECONDS = 20.0  # like the other methods, a pass gives up searching after this long
# New nodes one wave may launch: what it saves decides, not how many (a wave may replace a few big
# nodes by more, smaller ones that cost less); this only bounds one command's launches.
REPLACEMENTS_MAX = WAVE_MAX
REFINE_ROUNDS = 4  # waves asked, each without the candidates the last one did not save on
METHOD = "repack"


def wave(
    sim: Simulation,
    ordered: list[Candidate],
    pending: list[Obj],
    room: Mapping[str, int | None],
    thresholds: Mapping[str, float],
    *,
    balanced_totals: Mapping[str, balanced.Totals],
    spot_to_spot: bool = False,
    seconds: float = WAVE_SECONDS,
) -> Command | None:
    """This pass's many→several command, or None (see the module). ``ordered``: the candidates past
    the vetoes; ``room``: each NodePool's budget room for Underutilized (None: unbounded)."""
    from nodewright.disruption import consolidation

    movable = [c for c in ordered if c.pods]  # empty nodes are emptiness's, within its budgets
    if seconds <= 0 or len(movable) < WAVE_MIN or not any(room.get(c.nodepool, 1) != 0 for c in movable):
        return None
    stop = consolidation.search_clock() + seconds
    waste, requests, targets = _waste(sim, movable, pending)

    def ask(chosen: list[Candidate]) -> Verdict:
        verdict = consolidation.evaluate(
            sim,
            chosen,
            pending,
            reason=consolidation.UNDERUTILIZED,
            method=METHOD,
            thresholds=thresholds,
            min_values=consolidation.min_values_of,
            spot_to_spot=spot_to_spot,
            replacements_max=REPLACEMENTS_MAX,
        )
        command = verdict.command
        if command is not None and (command.savings <= 0 or balanced.refusal(command, balanced_totals)):
            return consolidation.Verdict(None, "refused", command.replacements)
        return verdict

    def ranked(values: Mapping[str, float], among: list[Candidate]) -> list[Candidate]:
        return sorted(
            (c for c in among if values[c.name] > 0),
            key=lambda c: (-rank(c, values[c.name], balanced_totals), c.name),
        )

    # First the nodes of types the repack does not buy, valued with the nodes of types it does
    # staying (their free room taken for free, as the command's own plan takes it): a partly
    # filled node of a type the repack buys is filled by the others' pods rather than replaced by
    # another partly filled one (see the module).
    nodes, smallest = dict(sim.nodes), _smallest_shapes(requests)
    keep = {
        c.name for c in movable if c.instance_type in targets and _has_room(nodes.get(c.node_name), smallest)
    }
    others = [c for c in movable if c.name not in keep]
    if keep and len(others) >= WAVE_MIN:
        kept_waste, _, _ = _waste(sim, others, pending)
        command = _best(ranked(kept_waste, others), room, requests, ask, stop)
        if command is not None:
            return command
    return _best(ranked(waste, movable), room, requests, ask, stop)


def _best(
    ranked: list[Candidate],
    room: Mapping[str, int | None],
    requests: Mapping[str, Mapping[str, int]],
    ask: Callable[[list[Candidate]], Verdict],
    stop: float,
) -> Command | None:
    """The wave of ``ranked`` (most waste first) that saves the most (see the module): refined,
    else the longest passing prefix."""
    from nodewright.disruption import consolidation

    # Refine: a candidate the wave itself does not save on (its pods cost as much on the new nodes
    # as it does: a well-filled node, the partly filled big node the last wave left, or a spot node
    # whose replacement may launch at its own price) makes room for the next one in the order, and
    # the wave that saves the most wins; a wave refused as not cheaper is refined the same way, by
    # the new nodes its plan would have launched. Even a single node left is asked: when it saves
    # more than every wave, the others were churn, and the node is single-node consolidation's
    # (Karpenter replaces a node only by one strictly cheaper for it).
    dropped: set[str] = set()
    chosen = _within_budget(ranked, room)
    best: Command | None = None
    for _ in range(REFINE_ROUNDS):
        smallest = WAVE_MIN if best is None else 1  # a refined wave is asked down to one node
        if len(chosen) < smallest or consolidation.search_clock() >= stop:
            break
        verdict = ask(chosen)
        command = verdict.command
        if command is not None and (best is None or command.savings > best.savings):
            best = command
        if command is not None:
            losers = _not_saving(command.candidates, command.replacements, requests)
        elif verdict.claims:
            losers = _not_saving(chosen, verdict.claims, requests)
        else:
            break
        if not losers:
            break
        dropped |= losers
        chosen = _within_budget([c for c in ranked if c.name not in dropped], room)
    if best is not None:
        return best if len(best.candidates) >= WAVE_MIN else None
    # The longest prefix of the ranked wave that one command removes at a saving (Balanced: that
    # its score approves), by binary search as Karpenter's multi-node searches its prefixes.
    chosen = _within_budget(ranked, room)
    low, high = WAVE_MIN, len(chosen) - 1
    while low <= high and consolidation.search_clock() < stop:
        size = (low + high) // 2
        command = ask(chosen[:size]).command
        if command is not None:
            best, low = command, size + 1
        else:
            high = size - 1
    return best


def _has_room(node: Node | None, shapes: list[dict[str, int]]) -> bool:
    """Whether a candidate's node could take one more of the moving pods (``shapes``, their requests
    as ``_smallest_shapes`` gives them): a node full in CPU or in memory is filled by no wave; what
    it wastes (the other resource idle), only moving its pods saves."""
    if node is None:
        return False
    free = dict(node.allocatable)
    for pod in node.pods:
        for name, value in pod.spec.requests:
            free[name] = free.get(name, 0) - value
    return any(all(free.get(name, 0) >= value for name, value in shape.items()) for shape in shapes)


def _smallest_shapes(requests: Mapping[str, Mapping[str, int]]) -> list[dict[str, int]]:
    """The pods' distinct requests that no other asks less of in both CPU and memory (with the same
    other resources): where none of these fits, no pod does. Keeps ``_has_room`` short on a cluster
    of thousands of distinct requests."""
    from nodewright.scheduling.resources import CPU, MEMORY

    groups: dict[tuple[tuple[str, int], ...], set[tuple[int, int]]] = {}
    for r in requests.values():
        rest = tuple(sorted((k, v) for k, v in r.items() if k not in (CPU, MEMORY)))
        groups.setdefault(rest, set()).add((r.get(CPU, 0), r.get(MEMORY, 0)))
    smallest: list[dict[str, int]] = []
    for rest, sizes in groups.items():
        least_memory = None
        for cpu, memory in sorted(sizes):  # by CPU, then memory: keep each that needs less memory
            if least_memory is None or memory < least_memory:
                smallest.append({CPU: cpu, MEMORY: memory, **dict(rest)})
                least_memory = memory
    return smallest


def _not_saving(
    chosen: list[Candidate], claims: list[NewClaim], requests: Mapping[str, Mapping[str, int]]
) -> set[str]:
    """The candidates of ``chosen`` whose pods' share of the new nodes ``claims`` costs at least
    their price (pods that go to nodes that stay cost nothing). A new node is charged at its worst
    launch price, as the command's saving counts it: the repack's likely price (its cheapest
    offering) would call a spot node in a dear zone "saved" by a replacement that may launch in that
    zone again. (A refused wave's new nodes are not narrowed yet: each at its cheapest type's.)"""
    from nodewright.disruption.consolidation import worst_launch_price

    charge: dict[str, float] = {}
    for claim in claims:
        charge.update(_shares(claim, requests, worst_launch_price(claim, cheapest_only=True)))
    return {
        c.name for c in chosen if (c.price or 0.0) - sum(charge.get(pod_key(p), 0.0) for p in c.pods) <= 0
    }


def _waste(
    sim: Simulation, movable: list[Candidate], pending: list[Obj]
) -> tuple[dict[str, float], dict[str, dict[str, int]], set[str]]:
    """Candidate → its price less what its pods are worth at the shadow prices (see the module);
    each moving pod's requests; and the instance types the whole-cluster repack buys (each new
    node's cheapest)."""
    from nodewright import scheduling

    world = sim.world
    limits, now = world.pdb_limits, world.taken_at
    moving = {
        c.name: [as_pending(p) for p in c.pods if is_currently_reschedulable(p, limits, now)] for c in movable
    }
    everyone = [p for pods in moving.values() for p in pods]
    snapshot, _ = sim.snapshot(everyone + pending, without=[c.node_name for c in movable])
    requests = {p.key: dict(p.spec.requests) for p in snapshot.pods}
    worth = _worth(snapshot, requests)
    waste = {
        c.name: (c.price or 0.0) - sum(worth.get(pod_key(p), 0.0) for p in moving[c.name]) for c in movable
    }
    plan = scheduling.plan(snapshot)
    bought = {claim.instance_types[0].name for claim in plan.new_claims if claim.instance_types}
    return waste, requests, bought


def _worth(snapshot: Snapshot, requests: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Pod → what its CPU and memory cost at the shadow prices of buying all of ``requests`` from the
    snapshot's NodePools' types (each type at its cheapest allowed offering in any NodePool, plus
    that NodePool's per-node volumes; its allocatable less the DaemonSets)."""
    from nodewright.scheduling.nodepools import NodePools
    from nodewright.scheduling.packing import TypeOption, shadow_prices
    from nodewright.scheduling.resources import CPU, MEMORY

    pools = NodePools(snapshot)
    cheapest: dict[str, TypeOption] = {}
    for index, pool in enumerate(pools.pools):
        for instance_type, price in pools.types(index, pools.requirements[index]):
            allocatable = pools.allocatable(index, instance_type)
            option = TypeOption(
                instance_type.name,
                price + pool.node_price,
                (allocatable.get(CPU, 0), allocatable.get(MEMORY, 0)),
            )
            known = cheapest.get(option.name)
            if known is None or option.price < known.price:
                cheapest[option.name] = option
    cpu = sum(r.get(CPU, 0) for r in requests.values())
    memory = sum(r.get(MEMORY, 0) for r in requests.values())
    per_millicore, per_byte = shadow_prices(sorted(cheapest.values(), key=lambda o: o.name), cpu, memory)
    return {key: per_millicore * r.get(CPU, 0) + per_byte * r.get(MEMORY, 0) for key, r in requests.items()}


def _shares(claim: NewClaim, requests: Mapping[str, Mapping[str, int]], price: float) -> dict[str, float]:
    """Pod → its share of ``price`` (the new node's), in proportion to the dominant share it takes."""
    totals: dict[str, int] = {}
    for key in claim.pods:
        for name, value in requests.get(key, {}).items():
            totals[name] = totals.get(name, 0) + value
    weights = {
        key: max(
            (value / totals[name] for name, value in requests.get(key, {}).items() if totals.get(name)),
            default=0.0,
        )
        for key in claim.pods
    }
    whole = sum(weights.values())
    if whole <= 0:
        return {key: price / len(claim.pods) for key in claim.pods} if claim.pods else {}
    return {key: price * weight / whole for key, weight in weights.items()}


def rank(candidate: Candidate, waste: float, totals: Mapping[str, balanced.Totals]) -> float:
    """What the wave ranks by: waste per disrupted node, or per unit of disruption cost in a Balanced
    NodePool (Karpenter ranks Balanced moves by score)."""
    if candidate.nodepool in totals:
        return waste / balanced.node_cost(candidate.pods)
    return waste


def _within_budget(ranked: list[Candidate], room: Mapping[str, int | None]) -> list[Candidate]:
    """The ranked candidates in order, as many of each NodePool as its room allows, at most WAVE_MAX."""
    left = dict(room)
    chosen: list[Candidate] = []
    for candidate in ranked:
        budget = left.get(candidate.nodepool)
        if budget is not None:
            if budget <= 0:
                continue
            left[candidate.nodepool] = budget - 1
        chosen.append(candidate)
        if len(chosen) == WAVE_MAX:
            break
    return chosen
