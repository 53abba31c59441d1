"""New capacity: demand bin-packed per NodePool into NodeClaims, charged against the limits.

Demand is what existing capacity could not take, per class and NodePool option. Per NodePool (by
weight) and requirement set, ``packing.Packer`` chooses node shapes by cost per packed pod; the
nodes are then cut into NodeClaims, most expensive first, each with its candidate types (cheapest
first, at most ``MAX_CANDIDATE_TYPES``) and charged to ``Limits``. What the limits (or minValues)
refuse moves to the class's next NodePool option, or is reported with the reason. Under Karpenter's
BestEffort minValues policy (``relax_min_values``), candidates short of a requirement's minValues
are kept instead, and the NodeClaim's requirement carries the minValues they do meet
(``NewClaim.min_values_relaxed``), as Karpenter's scheduler relaxes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import ge

from nodewright.api import labels as wk
from nodewright.scheduling.instancetypes import InstanceType, is_exotic
from nodewright.scheduling.model import untolerated
from nodewright.scheduling.nodepools import ALLOW_UNDEFINED, NodePools, PoolOption
from nodewright.scheduling.packing import Item, Packer, TypeOption
from nodewright.scheduling.podclass import PodClass
from nodewright.scheduling.preferences import Level
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from nodewright.scheduling.results import MAX_CANDIDATE_TYPES, CandidateType, NewClaim, Plan
from nodewright.scheduling.topology import Topology, TopologyGroup

Caps = list[tuple[frozenset[int], int]]
Conflicts = dict[int, frozenset[int]]
PackedNodes = list[tuple[int, dict[int, int], list[int], int]]  # (type index, class → pods, load, copies)


@dataclass(slots=True)
class Demand:
    """Pods of a class that need new capacity, with the NodePools they may go to (by weight)."""

    cls: PodClass
    count: int
    level: Level
    options: list[PoolOption]
    option: int = 0
    colocate: bool = False  # all on one node (hostname self-affinity)

    @property
    def pool(self) -> int:
        return self.options[self.option][0]

    @property
    def requirements(self) -> Requirements:
        return self.options[self.option][1]


@dataclass(slots=True)
class Follower:
    """Pods with required hostname affinity to pods that are only planned: they ride on those claims."""

    cls: PodClass
    count: int
    level: Level
    group: TopologyGroup


@dataclass(slots=True)
class _Group:
    """The demand of one packing group: pods per class, and each class's level."""

    counts: dict[int, int] = field(default_factory=dict)
    classes: dict[int, PodClass] = field(default_factory=dict)
    levels: dict[int, Level] = field(default_factory=dict)

    @classmethod
    def of(cls, demands: Sequence[Demand]) -> _Group:
        group = cls()
        for demand in demands:
            index = demand.cls.index
            group.counts[index] = group.counts.get(index, 0) + demand.count
            group.classes[index] = demand.cls
            group.levels[index] = demand.level
        return group

    def dims(self) -> list[str]:
        names = {CPU, MEMORY, PODS}
        for pod_class in self.classes.values():
            names.update(pod_class.requests)
        return sorted(names)


class ClaimPacker:
    """Turns demand into the plan's NodeClaims; remembers which classes each claim holds."""

    def __init__(
        self, pools: NodePools, topology: Topology, plan: Plan, *, relax_min_values: bool = False
    ) -> None:
        self.pools = pools
        self.topology = topology
        self.plan = plan
        self.relax_min_values = relax_min_values
        self.claim_classes: list[set[int]] = []  # class indices on each new claim
        self.by_name: dict[str, InstanceType] = {}

    def pack(self, demands: list[Demand]) -> None:
        queue = list(demands)
        for pool_index in range(len(self.pools)):
            mine = [d for d in queue if d.options and d.pool == pool_index]
            if not mine:
                continue
            rerouted = self._pack_pool(pool_index, mine)
            queue = [d for d in queue if d not in mine] + rerouted

    def _pack_pool(self, pool_index: int, demands: list[Demand]) -> list[Demand]:
        groups: dict[tuple[Requirements, int], list[Demand]] = {}
        for demand in demands:
            key = (demand.requirements, demand.cls.index if demand.colocate else -1)
            groups.setdefault(key, []).append(demand)
        rerouted: list[Demand] = []
        for (requirements, colocated), members in sorted(
            groups.items(), key=lambda g: (repr(g[0][0]), g[0][1])
        ):
            rerouted.extend(self._pack_group(pool_index, requirements, members, colocated >= 0))
        return rerouted

    def _pack_group(
        self, pool_index: int, requirements: Requirements, demands: list[Demand], colocate: bool
    ) -> list[Demand]:
        group = _Group.of(demands)
        dims = group.dims()
        limits = self.pools.limits
        types = [
            (t, price, self.pools.allocatable(pool_index, t))
            for t, price in self.pools.types(pool_index, requirements)
            if limits.blocked(pool_index, t) is None
        ]
        # The packer minimises what a node costs: the instance and its EBS volumes.
        node_price = self.pools.pools[pool_index].node_price
        options = [
            TypeOption(t.name, price + node_price, tuple(a.get(d, 0) for d in dims)) for t, price, a in types
        ]
        instance_prices = {t.name: price for t, price, _ in types}
        by_name = {t.name: t for t, _, _ in types}
        self.by_name.update(by_name)
        items = [
            Item(c, tuple(group.classes[c].requests.get(d, 0) for d in dims), n)
            for c, n in sorted(group.counts.items())
        ]
        failed: dict[int, int] = {}
        if not options:
            failed.update(group.counts)
            return self._reroute(pool_index, requirements, demands, failed, None)
        caps, conflicts = self._caps(group)
        extended = [i for i, name in enumerate(dims) if name not in (CPU, MEMORY, PODS, EPHEMERAL_STORAGE)]
        packer = Packer(
            items,
            options,
            dims.index(CPU),
            dims.index(MEMORY),
            caps=caps,
            conflicts=conflicts,
            extended=extended,
        )
        nodes = self._packed_nodes(packer, items, colocate, failed)
        limit_reason = self._cut_claims(
            pool_index,
            requirements,
            nodes,
            options=packer.types,
            by_name=by_name,
            instance_prices=instance_prices,
            group=group,
            dims=dims,
            failed=failed,
        )
        return self._reroute(pool_index, requirements, demands, failed, limit_reason)

    @staticmethod
    def _packed_nodes(
        packer: Packer, items: list[Item], colocate: bool, failed: dict[int, int]
    ) -> PackedNodes:
        """The packer's nodes, most expensive first; pods that fit no type go to ``failed``."""
        nodes: PackedNodes = []
        if colocate:
            item = items[0]
            load = [v * item.count for v in item.vec]
            index = packer.cheapest_fitting(load)
            if index is None:
                failed[item.cls] = item.count
            else:
                nodes = [(index, {item.cls: item.count}, load, 1)]
        else:
            result = packer.pack()
            failed.update(result.unplaced)
            nodes = [(n.type_index, n.counts, n.load, n.multiplicity) for n in result.nodes]
        nodes.sort(key=lambda n: (-packer.types[n[0]].price, sorted(n[1].items())))
        return nodes

    def _cut_claims(
        self,
        pool_index: int,
        requirements: Requirements,
        nodes: PackedNodes,
        *,
        options: list[TypeOption],
        by_name: dict[str, InstanceType],
        instance_prices: dict[str, float],
        group: _Group,
        dims: list[str],
        failed: dict[int, int],
    ) -> str | None:
        """One NodeClaim per packed node while candidates remain within the limits; returns the limit
        (or minValues) reason that refused a node, if any."""
        pool = self.pools.pools[pool_index]
        limited = self.pools.limits.limited(pool_index)
        limit_reason: str | None = None
        memo: dict[tuple[int, ...], list[CandidateType]] = {}
        # Claims that share a candidate list share its requirements (keyed by the list's identity).
        claim_requirements: dict[int, tuple[list[CandidateType], Requirements, bool]] = {}
        for _, node_counts, load, copies in nodes:
            for _ in range(copies):
                candidates, reason = self._candidates(
                    pool_index,
                    requirements,
                    options,
                    tuple(load),
                    by_name=by_name,
                    instance_prices=instance_prices,
                    memo=memo,
                )
                if not candidates:
                    limit_reason = reason
                    for cls_index, n in node_counts.items():
                        failed[cls_index] = failed.get(cls_index, 0) + n
                    continue
                if limited:
                    self.pools.limits.charge(pool_index, [by_name[c.name] for c in candidates])
                pods: list[str] = []
                for cls_index, n in sorted(node_counts.items()):
                    pods.extend(p.key for p in group.classes[cls_index].take(n))
                entry = claim_requirements.get(id(candidates))
                if entry is None or entry[0] is not candidates:
                    names = frozenset(c.name for c in candidates)
                    met = requirements.with_requirement(Requirement(wk.INSTANCE_TYPE, False, names))
                    relaxed = self._relaxed(met, candidates, by_name)
                    entry = (candidates, relaxed, relaxed is not met)
                    claim_requirements[id(candidates)] = entry
                self.claim_classes.append(set(node_counts))
                self.plan.new_claims.append(
                    NewClaim(
                        pool.name,
                        entry[1],
                        pods,
                        candidates,
                        {**pool.labels, wk.NODEPOOL: pool.name},
                        pool.taints,
                        pool.startup_taints,
                        dict(zip(dims, load, strict=True)),
                        pool.node_price,
                        entry[2],
                    )
                )
        return limit_reason

    def _reroute(
        self,
        pool_index: int,
        requirements: Requirements,
        demands: list[Demand],
        failed: dict[int, int],
        limit_reason: str | None,
    ) -> list[Demand]:
        """Failed pods move to their class's next NodePool option, or get their reason."""
        rerouted = []
        for demand in demands:
            n = min(failed.get(demand.cls.index, 0), demand.count)
            if not n:
                continue
            failed[demand.cls.index] -= n
            if demand.option + 1 < len(demand.options):
                rerouted.append(
                    Demand(demand.cls, n, demand.level, demand.options, demand.option + 1, demand.colocate)
                )
            else:
                demand.cls.reason = limit_reason or self.pools.no_room_reason(
                    pool_index, demand.cls, requirements
                )
        return rerouted

    def _candidates(
        self,
        pool_index: int,
        requirements: Requirements,
        options: list[TypeOption],
        load: tuple[int, ...],
        *,
        by_name: dict[str, InstanceType],
        instance_prices: dict[str, float],
        memo: dict[tuple[int, ...], list[CandidateType]],
    ) -> tuple[list[CandidateType], str | None]:
        """Types holding the node's pods within the remaining limits, cheapest first, at most 60."""
        limits = self.pools.limits
        cacheable = not limits.limited(pool_index)
        if cacheable and load in memo:
            return memo[load], None
        found: list[CandidateType] = []
        reason = None
        for option in options:
            if not all(map(ge, option.alloc, load)):
                continue
            instance_type = by_name[option.name]
            blocked = limits.blocked(pool_index, instance_type) if not cacheable else None
            if blocked:
                reason = reason or blocked
                continue
            found.append(self.pools.candidate(instance_type, instance_prices[option.name], requirements))
            if len(found) >= MAX_CANDIDATE_TYPES:
                break
        found = prefer_generic(found, by_name)
        short = self._min_values_short(pool_index, requirements, found, by_name)
        if short and not (self.relax_min_values and found):
            return [], short
        if cacheable:
            memo[load] = found
        return found, reason

    def _min_values_short(
        self,
        pool_index: int,
        requirements: Requirements,
        found: list[CandidateType],
        by_name: dict[str, InstanceType],
    ) -> str | None:
        return min_values_short(self.pools.pools[pool_index].name, requirements, found, by_name)

    @staticmethod
    def _relaxed(
        requirements: Requirements, found: list[CandidateType], by_name: dict[str, InstanceType]
    ) -> Requirements:
        """``requirements`` with each minValues the candidates do not meet lowered to what they offer
        (the same object when every minValues is met): Karpenter's BestEffort relaxation."""
        lowered = []
        for key, requirement in requirements.items():
            if not requirement.min_values:
                continue
            distinct: set[str] = set()
            for candidate in found:
                distinct |= _label_values(by_name[candidate.name], candidate, key)
            if len(distinct) < requirement.min_values:
                lowered.append(dataclasses.replace(requirement, min_values=len(distinct)))
        if not lowered:
            return requirements
        keys = {r.key for r in lowered}
        return Requirements([*(r for k, r in requirements.items() if k not in keys), *lowered])

    def _caps(self, group: _Group) -> tuple[Caps, Conflicts]:
        """Per-node caps and conflicts from hostname spread, hostname anti-affinity and host ports."""
        caps: dict[tuple[frozenset[int], int], None] = {}
        conflicts: dict[int, set[int]] = {}
        classes = sorted(group.classes)
        for index in classes:
            cls, level = group.classes[index], group.levels[index]
            for spread in level.spreads:
                if spread.topology_key == wk.HOSTNAME:
                    spread_group = self.topology.of_spread(cls, spread)
                    members = frozenset(
                        c for c in classes if self.topology.matches(spread_group, group.classes[c])
                    )
                    caps[(members | {index}, spread.max_skew)] = None
            for term in level.terms:
                if term.topology_key != wk.HOSTNAME or not term.anti:
                    continue
                term_group = self.topology.of_term(cls, term)
                members = frozenset(c for c in classes if self.topology.matches(term_group, group.classes[c]))
                if index in members:
                    caps[(members, 1)] = None
                for other in members - {index}:
                    conflicts.setdefault(index, set()).add(other)
                    conflicts.setdefault(other, set()).add(index)
            if cls.spec.host_ports:
                members = frozenset(
                    c
                    for c in classes
                    if any(
                        p.conflicts(q) for p in cls.spec.host_ports for q in group.classes[c].spec.host_ports
                    )
                )
                caps[(members | {index}, 1)] = None
        return list(caps), {k: frozenset(v) for k, v in conflicts.items()}

    # --- pods that follow planned pods onto their claims ----------------------------------------------

    def attach_followers(self, followers: list[Follower], classes: list[PodClass]) -> None:
        """Put pods with hostname affinity to planned pods onto the new claims holding them.

        A claim takes as many as its cheapest candidate still holds (else as many as any
        candidate holds, dropping the candidates that do not); its candidate list only shrinks,
        so the limit charged for it already covers the change.
        """
        for follower in followers:
            left = follower.count
            for index, claim in enumerate(self.plan.new_claims):
                if left <= 0:
                    break
                take, kept = self._room_beside(follower, index, claim, left, classes)
                if take <= 0:
                    continue
                claim.instance_types = kept
                claim.requirements = claim.requirements.with_requirement(
                    Requirement(wk.INSTANCE_TYPE, False, frozenset(c.name for c in kept))
                )
                for name, value in follower.cls.requests.items():
                    claim.requests[name] = claim.requests.get(name, 0) + value * take
                claim.pods.extend(p.key for p in follower.cls.take(take))
                self.claim_classes[index].add(follower.cls.index)
                left -= take
            if left > 0:
                follower.cls.reason = (
                    f"pod affinity on {wk.HOSTNAME}: no room beside the matching planned pods"
                )

    def _room_beside(
        self, follower: Follower, index: int, claim: NewClaim, left: int, classes: list[PodClass]
    ) -> tuple[int, list[CandidateType]]:
        """How many follower pods the claim takes, and the candidates that still hold them."""
        cls = follower.cls
        if not any(self.topology.matches(follower.group, classes[c]) for c in self.claim_classes[index]):
            return 0, []
        if untolerated(claim.taints, cls.spec.tolerations) is not None:
            return 0, []
        if claim.requirements.conflict(follower.level.requirements, ALLOW_UNDEFINED) is not None:
            return 0, []
        pool_index = self.pools.index(claim.nodepool)
        free: list[tuple[CandidateType, Resources]] = [
            (c, _minus(self.pools.allocatable(pool_index, self.by_name[c.name]), claim.requests))
            for c in claim.instance_types
        ]
        fits_in = [
            min((f.get(k, 0) // v for k, v in cls.requests.items() if v > 0), default=left) for _, f in free
        ]
        take = min(left, fits_in[0] if fits_in and fits_in[0] > 0 else max(fits_in, default=0))
        return take, [c for (c, _), n in zip(free, fits_in, strict=True) if n >= take]


def min_values_short(
    pool: str, requirements: Requirements, found: list[CandidateType], by_name: dict[str, InstanceType]
) -> str | None:
    """The minValues requirement the candidates do not meet, or None."""
    for key, requirement in requirements.items():
        if not requirement.min_values:
            continue
        distinct: set[str] = set()
        for candidate in found:
            distinct |= _label_values(by_name[candidate.name], candidate, key)
        if len(distinct) < requirement.min_values:
            return (
                f"NodePool {pool}: minValues {requirement.min_values} "
                f"for {key} not met ({len(distinct)} value(s) among the candidate instance types)"
            )
    return None


def prefer_generic(found: list[CandidateType], by_name: dict[str, InstanceType]) -> list[CandidateType]:
    """Drop metal and accelerator types when generic ones hold the pods too, as Karpenter's AWS
    provider does before CreateFleet: they cost more for what the pods use, or need a host."""
    generic = [c for c in found if not is_exotic(by_name[c.name])]
    return generic if generic and len(generic) < len(found) else found


def _minus(allocatable: Resources, requests: Resources) -> Resources:
    return {k: v - requests.get(k, 0) for k, v in allocatable.items()}


def _label_values(instance_type: InstanceType, candidate: CandidateType, key: str) -> frozenset[str]:
    """The values a candidate offers for a label (zones and capacity types from its offerings)."""
    if key == wk.ZONE:
        return frozenset(o.zone for o in candidate.offerings)
    if key == wk.CAPACITY_TYPE:
        return frozenset(o.capacity_type for o in candidate.offerings)
    value = instance_type.labels.get(key)
    return frozenset({value}) if value is not None else frozenset()
