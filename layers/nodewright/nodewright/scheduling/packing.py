"""Cost-minimising bin packing of pod classes onto instance types (pure, deterministic).

The problem per packing group (pods that may share nodes, and the instance types they may use):
choose nodes (a type each) and assign every pod to one, minimising the total price, with
resources additive per node, plus per-node caps (hostname spread, self anti-affinity, host ports)
and pairwise conflicts (anti-affinity between classes).

Method, cheapest first:

1. **Shadow prices.** The plain covering LP over cpu and memory (buy capacity at least the
   demand) has an optimal basis of at most two types; its dual ``y`` prices a millicore and a
   byte. A pod's value is ``y · request``; for every type ``y · allocatable ≤ price`` (dual
   feasibility), so a node's *efficiency* ``value packed / price`` is at most 1, and a plan whose
   nodes all reach efficiency e costs at most LP/e. An extended resource (a GPU) that pods
   request is priced at the cheapest unit any type sells, and a pod is worth at least what its
   share of it costs: otherwise GPU pods look worthless and each gets a node of its own.
2. **Capped pods first.** When caps force at least N nodes (e.g. one anti-affine pod per node),
   the capped pods are dealt over N nodes, big ones first onto the least-loaded node; each node
   takes the cheapest type that fits it, and free room is filled with uncapped pods.
3. **Patterns.** For the uncapped rest, each candidate type is filled greedily (dot-product
   heuristic: the class whose request best aligns with the remaining room, half of what fits at a
   time), the (type, pattern) of highest efficiency wins, and the pattern is replicated while
   every class in it still has pods: identical nodes are decided once, which keeps the work
   proportional to the number of distinct nodes, not of pods. The last winner is tried first
   and kept while its efficiency stays within 1.5 % of what it had; the full search runs again
   when it does not, and every eighth decision (with fresh shadow prices).
4. **Improve.** Every node is re-typed to the cheapest type that fits its pods, and the least
   efficient nodes are merged pairwise when one cheaper node holds both. All orders are total
   (price, name, index), so the same input always gives the same plan.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import ge

_CANDIDATES = 6  # types evaluated per pattern decision (highest capacity efficiency)
_MERGE_WINDOW = 48  # least efficient single nodes considered for pairwise merging
_KEEP_WINNER = 0.985  # re-use the last winning type while its efficiency stays within 1.5 %


@dataclass(slots=True)
class Item:
    """Demand of one pod class within a packing group: ``count`` pods of request ``vec``."""

    cls: int
    vec: tuple[int, ...]
    count: int


@dataclass(slots=True)
class TypeOption:
    """A type usable by the group: its cheapest matching offering price and allocatable."""

    name: str
    price: float
    alloc: tuple[int, ...]


@dataclass(slots=True)
class PackedNode:
    type_index: int
    counts: dict[int, int]
    load: list[int]
    multiplicity: int = 1


@dataclass(slots=True)
class PackResult:
    nodes: list[PackedNode]
    unplaced: dict[int, int] = field(default_factory=dict)


class Packer:
    """Packs one group; ``dims`` orders the resources, ``cpu``/``memory`` index the dual."""

    def __init__(
        self,
        items: Sequence[Item],
        types: Sequence[TypeOption],
        cpu: int,
        memory: int,
        *,
        caps: Sequence[tuple[frozenset[int], int]] = (),
        conflicts: dict[int, frozenset[int]] | None = None,
        extended: Sequence[int] = (),
    ) -> None:
        self.items = {item.cls: item for item in items}
        self.types = sorted(types, key=lambda t: (t.price, t.name))
        self.dims = len(self.types[0].alloc) if self.types else 0
        self.cpu, self.memory = cpu, memory
        self.caps = list(caps)
        self.caps_of: dict[int, list[int]] = {}
        for index, (members, _) in enumerate(self.caps):
            for member in members:
                self.caps_of.setdefault(member, []).append(index)
        self.conflicts = conflicts or {}
        self._cheapest_memo: dict[tuple[int, ...], int | None] = {}
        self.values: dict[int, float] = {}
        self.duals = (0.0, 0.0)
        self.frontier = list(_pareto_indices(tuple((t.price, t.alloc) for t in self.types)))
        self._allocs = [t.alloc for t in self.types]
        self._nonzero = {
            cls: tuple((d, v) for d, v in enumerate(item.vec) if v > 0) for cls, item in self.items.items()
        }
        self._constrained = set(self.caps_of) | set(self.conflicts)
        # Extended resources (GPUs, ...) the pods request: priced at the cheapest unit any type sells.
        self.unit_prices = {
            d: min((t.price / t.alloc[d] for t in self.types if t.alloc[d] > 0), default=0.0)
            for d in extended
            if any(item.vec[d] > 0 for item in self.items.values())
        }

    # --- helpers --------------------------------------------------------------------------------

    def cheapest_fitting(self, load: Sequence[int]) -> int | None:
        """Index of the cheapest type whose allocatable holds ``load`` (memoised)."""
        key = tuple(load)
        if key in self._cheapest_memo:
            return self._cheapest_memo[key]
        found = None
        for index, alloc in enumerate(self._allocs):
            if all(map(ge, alloc, key)):
                found = index
                break
        self._cheapest_memo[key] = found
        return found

    def _allowed(self, cls: int, counts: dict[int, int], adding: int) -> int:
        """How many more pods of ``cls`` the caps and conflicts let onto a node holding ``counts``."""
        for other in self.conflicts.get(cls, ()):
            if counts.get(other):
                return 0
        for present, n in counts.items():
            if n and cls in self.conflicts.get(present, ()):
                return 0
        allowed = adding
        for index in self.caps_of.get(cls, ()):
            members, cap = self.caps[index]
            used = sum(n for c, n in counts.items() if c in members)
            allowed = min(allowed, cap - used)
        return max(allowed, 0)

    def _duals(self, remaining: dict[int, int]) -> tuple[float, float]:
        """Shadow prices of a millicore and a byte from the 2-resource covering LP (see module doc)."""
        demand_cpu = sum(self.items[c].vec[self.cpu] * n for c, n in remaining.items())
        demand_mem = sum(self.items[c].vec[self.memory] * n for c, n in remaining.items())
        demand_cpu, demand_mem = max(demand_cpu, 1), max(demand_mem, 1)
        best = (-1.0, 0.0, 0.0)
        points = [
            (o.alloc[self.cpu] / o.price, o.alloc[self.memory] / o.price, o)
            for o in self.types
            if o.price > 0 and o.alloc[self.cpu] > 0 and o.alloc[self.memory] > 0
        ]
        points = _pareto(points)
        for qc, qm, option in points:
            scale = min(qc / demand_cpu, qm / demand_mem)
            if scale > best[0]:
                if qc / demand_cpu < qm / demand_mem:
                    best = (scale, option.price / option.alloc[self.cpu], 0.0)
                else:
                    best = (scale, 0.0, option.price / option.alloc[self.memory])
        for i, (ic, im, a) in enumerate(points):
            for jc, jm, b in points[i + 1 :]:
                # w·q_i + (1-w)·q_j scaled by demand: the two coordinates cross at w*.
                da = ic / demand_cpu - im / demand_mem
                db = jc / demand_cpu - jm / demand_mem
                if da == db or (da > 0) == (db > 0):
                    continue
                w = db / (db - da)
                scale = (w * ic + (1 - w) * jc) / demand_cpu
                if scale > best[0] + 1e-15:
                    det = a.alloc[self.cpu] * b.alloc[self.memory] - a.alloc[self.memory] * b.alloc[self.cpu]
                    if det == 0:
                        continue
                    yc = (a.price * b.alloc[self.memory] - b.price * a.alloc[self.memory]) / det
                    ym = (a.alloc[self.cpu] * b.price - b.alloc[self.cpu] * a.price) / det
                    if yc >= 0 and ym >= 0:
                        best = (scale, yc, ym)
        return best[1], best[2]

    def _set_values(self, remaining: dict[int, int]) -> None:
        yc, ym = self.duals = self._duals(remaining)
        for cls, item in self.items.items():
            value = yc * item.vec[self.cpu] + ym * item.vec[self.memory]
            # A pod needing a scarce extended resource is worth at least what that resource costs.
            value = max([value, *(y * item.vec[d] for d, y in self.unit_prices.items())])
            self.values[cls] = value if value > 0 else 1e-9 * (1 + sum(item.vec))

    def _value(self, counts: dict[int, int]) -> float:
        return sum(self.values[c] * n for c, n in counts.items())

    # --- phases ---------------------------------------------------------------------------------

    def pack(self) -> PackResult:
        result = PackResult([])
        remaining = {c: item.count for c, item in sorted(self.items.items()) if item.count > 0}
        biggest = [max(o.alloc[d] for o in self.types) for d in range(self.dims)] if self.types else []
        for cls in list(remaining):
            vec = self.items[cls].vec
            if not any(all(o.alloc[d] >= vec[d] for d in range(self.dims)) for o in self.types):
                result.unplaced[cls] = remaining.pop(cls)
        if not remaining:
            return result
        if len(remaining) == 1 and not self.caps and not self.conflicts:
            ((cls, count),) = remaining.items()
            result.nodes = self._single_class_optimum(cls, count)
            return result
        self._set_values(remaining)
        nodes = self._deal_capped(remaining, biggest)
        self._fill_residual(nodes, remaining)
        nodes.extend(self._patterns(remaining))
        for cls, n in remaining.items():
            if n:
                result.unplaced[cls] = result.unplaced.get(cls, 0) + n
        result.nodes = self._improve(nodes)
        return result

    def _single_class_optimum(self, cls: int, count: int) -> list[PackedNode]:
        """The exact cheapest set of nodes for ``count`` identical, unconstrained pods.

        A covering knapsack: dp[k] is the cheapest set of nodes holding at least k pods, each type
        holding ``h_t`` pods. Types that hold no more pods for no less money are dropped. Exchange
        argument keeping it fast: among any ``h_b`` nodes not of the best price-per-pod type b, some
        subset holds a multiple m·h_b of pods (pigeonhole on prefix sums mod h_b), and m nodes of b
        cost no more; so some optimum has fewer than ``h_b`` other nodes, holding fewer than
        ``h_b · max_t h_t`` pods. Beyond that, pods go onto type b nodes directly and only the
        remainder is solved by the DP.
        """
        options: list[tuple[float, int, int]] = []  # price, pods held, type index
        for index, option in enumerate(self.types):  # sorted by (price, name)
            held = min((option.alloc[d] // v for d, v in self._nonzero[cls]), default=count)
            if held > 0 and all(held > h for _, h, _ in options):
                options.append((option.price, held, index))
        _, best_held, best_index = min(options, key=lambda o: (o[0] / o[1], o[0], o[2]))
        reach = best_held * max(h for _, h, _ in options)
        bulk = max(0, -(-(count - reach) // best_held))
        rest = max(0, count - bulk * best_held)
        cost = [0.0] + [math.inf] * rest
        choice = [-1] * (rest + 1)
        for k in range(1, rest + 1):
            for position, (price, held, _) in enumerate(options):
                candidate = cost[max(0, k - held)] + price
                if candidate < cost[k] - 1e-12:
                    cost[k], choice[k] = candidate, position
        held_by_node = [(best_index, best_held)] * bulk
        k = rest
        while k > 0:
            _, held, index = options[choice[k]]
            held_by_node.append((index, held))
            k = max(0, k - held)
        nodes: list[PackedNode] = []
        left = count
        for index, held in sorted(held_by_node, key=lambda node: (-node[1], node[0])):
            placed = min(held, left)
            left -= placed
            nodes.append(PackedNode(index, {cls: placed}, self._load({cls: placed})))
        return nodes

    def _load(self, counts: dict[int, int]) -> list[int]:
        load = [0] * self.dims
        for cls, n in counts.items():
            vec = self.items[cls].vec
            for d in range(self.dims):
                load[d] += vec[d] * n
        return load

    def _deal_capped(self, remaining: dict[int, int], biggest: list[int]) -> list[PackedNode]:
        """Deal capped pods over as few nodes as the caps allow, biggest pods onto the emptiest nodes."""
        nodes: list[PackedNode] = []
        dealt: set[int] = set()
        order_groups = sorted(
            range(len(self.caps)),
            key=lambda g: (-sum(self.values[c] * remaining.get(c, 0) for c in self.caps[g][0]), g),
        )
        for group in order_groups:
            members, cap = self.caps[group]
            classes = [c for c in sorted(members) if remaining.get(c) and c not in dealt]
            dealt.update(classes)
            pending = sorted(
                ((self.values[c], c) for c in classes for _ in range(remaining[c])),
                key=lambda u: (-u[0], u[1]),
            )
            while pending:
                order = sorted(range(len(nodes)), key=lambda i: (self._value(nodes[i].counts), i))
                position, left = 0, []
                for unit in pending:
                    cls = unit[1]
                    vec = self.items[cls].vec
                    while position < len(order):
                        node = nodes[order[position]]
                        position += 1
                        load = [node.load[d] + vec[d] for d in range(self.dims)]
                        if (
                            self._allowed(cls, node.counts, 1) >= 1
                            and all(load[d] <= biggest[d] for d in range(self.dims))
                            and self.cheapest_fitting(load) is not None
                        ):
                            node.counts[cls] = node.counts.get(cls, 0) + 1
                            node.load = load
                            remaining[cls] -= 1
                            break
                    else:
                        left.append(unit)
                if len(left) == len(pending):
                    fresh = [n for n in nodes if not n.counts]
                    if fresh:  # even an empty node refused: these pods cannot be placed here
                        break
                    nodes.extend(PackedNode(-1, {}, [0] * self.dims) for _ in range(-(-len(left) // cap)))
                pending = left
        nodes = [n for n in nodes if n.counts]
        for node in nodes:
            node.type_index = self.cheapest_fitting(node.load)  # type: ignore[assignment]
        return nodes

    def _fill_residual(self, nodes: list[PackedNode], remaining: dict[int, int]) -> None:
        """Fill the room the capped nodes' types leave with uncapped pods (it costs nothing)."""
        classes = sorted(remaining, key=lambda c: (-self.values[c], c))
        for node in nodes:
            alloc = self.types[node.type_index].alloc
            for cls in classes:
                n = remaining[cls]
                if not n:
                    continue
                vec = self.items[cls].vec
                fit = min((alloc[d] - node.load[d]) // vec[d] for d in range(self.dims) if vec[d] > 0)
                fit = self._allowed(cls, node.counts, min(fit, n))
                if fit > 0:
                    node.counts[cls] = node.counts.get(cls, 0) + fit
                    for d in range(self.dims):
                        node.load[d] += vec[d] * fit
                    remaining[cls] -= fit

    def _fill(self, option: TypeOption, remaining: dict[int, int]) -> tuple[dict[int, int], float]:
        """Greedy dot-product fill of one node of ``option`` from ``remaining``.

        Each step takes the class whose request best aligns with the room left (weighted by
        1/allocatable²), half of what fits at a time; a class that stops fitting is dropped
        for good, since the room only shrinks.
        """
        alloc = option.alloc
        room = list(alloc)
        weights = [1.0 / (a * a) if a > 0 else 0.0 for a in alloc]
        counts: dict[int, int] = {}
        constrained = self._constrained
        active = [(c, self._nonzero[c]) for c in remaining if remaining[c] > 0]
        while active:
            best_cls, best_score, best_fit = -1, -1.0, 0
            still: list[tuple[int, tuple[tuple[int, int], ...]]] = []
            for cls, nonzero in active:
                fit = remaining[cls] - counts.get(cls, 0)
                score = 0.0
                for d, v in nonzero:
                    f = room[d] // v
                    if f < fit:  # noqa: PLR1730  (min() is a call per pod class and dimension: hot path)
                        fit = f
                    score += v * room[d] * weights[d]
                if fit > 0 and cls in constrained:
                    fit = self._allowed(cls, counts, fit)
                if fit <= 0:
                    continue
                still.append((cls, nonzero))
                if score > best_score:
                    best_cls, best_score, best_fit = cls, score, fit
            if best_cls < 0:
                break
            take = best_fit if len(still) == 1 else max(1, best_fit // 2)
            counts[best_cls] = counts.get(best_cls, 0) + take
            for d, v in self._nonzero[best_cls]:
                room[d] -= v * take
            active = still
        return counts, self._value(counts)

    def _candidates(self, remaining: dict[int, int]) -> list[int]:
        total = [0] * self.dims
        for cls, n in remaining.items():
            vec = self.items[cls].vec
            for d in range(self.dims):
                total[d] += vec[d] * n
        scored = []
        yc, ym = self.duals
        for index in self.frontier:
            option = self.types[index]
            capacity = yc * option.alloc[self.cpu] + ym * option.alloc[self.memory]
            capacity += sum(y * option.alloc[d] for d, y in self.unit_prices.items())
            scored.append(
                (-capacity / option.price if option.price else 0.0, option.price, option.name, index)
            )
        chosen = [s[3] for s in sorted(scored)[:_CANDIDATES]]
        everything = self.cheapest_fitting(total)
        if everything is not None and everything not in chosen:
            chosen.append(everything)
        return chosen

    def _patterns(self, remaining: dict[int, int]) -> list[PackedNode]:
        nodes: list[PackedNode] = []
        candidates: list[int] = []
        previous: tuple[int, float] | None = None  # last winning type and its efficiency
        decisions = 0
        while any(remaining.values()):
            if decisions % 8 == 0:
                live = {c: n for c, n in remaining.items() if n}
                self._set_values(live)
                candidates = self._candidates(live)
            else:
                everything = self.cheapest_fitting(self._load(remaining))
                if everything is not None and everything not in candidates:
                    candidates = [*candidates, everything]
            decisions += 1
            best: tuple[float, float, str, int, dict[int, int]] | None = None
            if previous is not None and decisions % 8 != 1:
                # The last winner, still as efficient as it was, wins again without a full search.
                option = self.types[previous[0]]
                counts, value = self._fill(option, remaining)
                if counts and value / option.price >= _KEEP_WINNER * previous[1]:
                    best = (-value / option.price, option.price, option.name, previous[0], counts)
            for index in candidates if best is None else ():
                option = self.types[index]
                counts, value = self._fill(option, remaining)
                if not counts:
                    continue
                key = (
                    -value / option.price if option.price else -value,
                    option.price,
                    option.name,
                    index,
                    counts,
                )
                if best is None or key[:4] < best[:4]:
                    best = key
            if best is None:
                # Nothing fits the efficient candidates: fall back to the cheapest type per class.
                cls = min(c for c, n in remaining.items() if n)
                fallback = self.cheapest_fitting(self.items[cls].vec)
                if fallback is None:
                    break
                counts, _ = self._fill(self.types[fallback], {cls: remaining[cls]})
                best = (0.0, 0.0, "", fallback, counts)
            counts = best[4]
            previous = (best[3], -best[0]) if best[0] < 0 else None
            repeat = min(remaining[c] // n for c, n in counts.items())
            for cls, n in counts.items():
                remaining[cls] -= n * repeat
            nodes.append(PackedNode(best[3], counts, self._load(counts), repeat))
        return nodes

    def _improve(self, nodes: list[PackedNode]) -> list[PackedNode]:
        for node in nodes:
            cheaper = self.cheapest_fitting(node.load)
            if cheaper is not None and self.types[cheaper].price < self.types[node.type_index].price:
                node.type_index = cheaper
        singles = [n for n in nodes if n.multiplicity == 1]
        merged = self._merge(singles)
        return [n for n in nodes if n.multiplicity > 1] + merged

    def _efficiency(self, node: PackedNode) -> float:
        price = self.types[node.type_index].price
        return self._value(node.counts) / price if price else 1.0

    def _merge(self, singles: list[PackedNode]) -> list[PackedNode]:
        order = sorted(range(len(singles)), key=lambda i: (self._efficiency(singles[i]), i))
        window = order[:_MERGE_WINDOW]
        alive = dict.fromkeys(window, True)
        for a_pos, a in enumerate(window):
            if not alive[a]:
                continue
            for b in window[a_pos + 1 :]:
                if not alive[b] or not alive[a]:
                    continue
                first, second = singles[a], singles[b]
                if not self._compatible(first.counts, second.counts):
                    continue
                load = [first.load[d] + second.load[d] for d in range(self.dims)]
                index = self.cheapest_fitting(load)
                if index is None:
                    continue
                together = self.types[index].price
                apart = self.types[first.type_index].price + self.types[second.type_index].price
                if together < apart - 1e-12:
                    counts = dict(first.counts)
                    for cls, n in second.counts.items():
                        counts[cls] = counts.get(cls, 0) + n
                    singles[a] = PackedNode(index, counts, load)
                    alive[b] = False
        return [node for i, node in enumerate(singles) if alive.get(i, True)]

    def _compatible(self, first: dict[int, int], second: dict[int, int]) -> bool:
        counts = dict(first)
        for cls, n in sorted(second.items()):
            if self._allowed(cls, counts, n) < n:
                return False
            counts[cls] = counts.get(cls, 0) + n
        return True


def shadow_prices(types: Sequence[TypeOption], cpu: int, memory: int) -> tuple[float, float]:
    """What a millicore and a byte are worth ($/h) when ``cpu`` millicores and ``memory`` bytes are
    bought from ``types`` (``alloc``: cpu, memory) at least cost: the dual of the packing's covering
    LP (see the module). ``y · request`` is then what a pod costs in the cheapest cluster the LP
    allows, and ``y · allocatable ≤ price`` for every type."""
    if not types:
        return 0.0, 0.0
    return Packer([Item(0, (cpu, memory), 1)], types, 0, 1)._duals({0: 1})


def _pareto(points: list[tuple[float, float, TypeOption]]) -> list[tuple[float, float, TypeOption]]:
    """Types whose (cpu per $, memory per $) no other type beats in both."""
    points = sorted(points, key=lambda p: (-p[0], -p[1], p[2].name))
    frontier: list[tuple[float, float, TypeOption]] = []
    best_memory = -1.0
    for point in points:
        if point[1] > best_memory:
            frontier.append(point)
            best_memory = point[1]
    return frontier


@functools.lru_cache(maxsize=64)
def _pareto_indices(types: tuple[tuple[float, tuple[int, ...]], ...]) -> tuple[int, ...]:
    """Indices of (price, alloc) that no cheaper-or-equal entry dominates in every resource."""
    kept: list[int] = []
    for index, (price, alloc) in enumerate(types):
        dominated = False
        for other_index in kept:
            other_price, other_alloc = types[other_index]
            if other_price <= price and all(map(ge, other_alloc, alloc)):
                dominated = True
                break
        if not dominated:
            kept.append(index)
    return tuple(kept)
