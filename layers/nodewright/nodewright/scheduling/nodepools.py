"""NodePools as the packing sees them: compatible types, DaemonSet overhead, limits.

``NodePools`` answers, for one plan, which of a NodePool's instance types a requirement set
allows (cheapest first), what a node of a type keeps free once its DaemonSets run, and whether a
class of pods can go to the NodePool at all. ``Limits`` is the one ledger of ``spec.limits``:
every launch the plan decides is charged there, so the limits hold across the whole plan.
"""

from __future__ import annotations

from collections.abc import Sequence

from nodewright.api import labels as wk
from nodewright.api.tolerations import Toleration
from nodewright.scheduling.instancetypes import RESERVATION_KEYS, InstanceType
from nodewright.scheduling.model import NodePoolInput, PodSpec, Snapshot, Taint, untolerated
from nodewright.scheduling.podclass import PodClass
from nodewright.scheduling.preferences import Level
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.resources import NODES, PODS, Resources, format_resource
from nodewright.scheduling.results import CandidateType

# Labels a pod may require although no NodePool requirement names them: every node carries them.
ALLOW_UNDEFINED = wk.WELL_KNOWN_LABELS | {wk.HOSTNAME}
# Keys the NodePool gives its nodes (its name, its EC2NodeClass), not the instance type.
POOL_KEYS = (wk.NODEPOOL, wk.EC2NODECLASS)
# Keys an offering or the launch decides (not the type): checked against offerings, not type labels.
OFFERING_KEYS = (
    wk.ZONE,
    wk.TOPOLOGY_ZONE_ID,
    wk.CAPACITY_TYPE,
    wk.INSTANCE_TENANCY,
    *RESERVATION_KEYS,  # a capacity reservation's labels (its offering's, not the type's)
)

PoolOption = tuple[int, Requirements]  # (NodePool index, requirements a claim there would carry)


class Limits:
    """The NodePools' ``spec.limits`` and what is charged against them, for one plan."""

    def __init__(self, pools: Sequence[NodePoolInput]) -> None:
        self._pools = pools
        self._in_use = [dict(p.in_use) for p in pools]

    def limited(self, pool_index: int) -> bool:
        return bool(self._pools[pool_index].limits)

    def blocked(self, pool_index: int, instance_type: InstanceType) -> str | None:
        """The limit one more node of this type would break, or None."""
        pool = self._pools[pool_index]
        in_use = self._in_use[pool_index]
        for resource, limit in sorted(pool.limits.items()):
            if in_use.get(resource, 0) + _charged(instance_type, resource) > limit:
                return f"NodePool {pool.name}: {resource} limit {format_resource(resource, limit)} reached"
        return None

    def charge(self, pool_index: int, candidates: Sequence[InstanceType]) -> None:
        """Charge one node with the largest candidate's capacity per limited resource, as Karpenter
        charges a NodeClaim that may launch as any of them."""
        in_use = self._in_use[pool_index]
        for resource in self._pools[pool_index].limits:
            largest = max(_charged(t, resource) for t in candidates)
            in_use[resource] = in_use.get(resource, 0) + largest


def _charged(instance_type: InstanceType, resource: str) -> int:
    """What one node of the type counts against a limit on the resource (``nodes``: one)."""
    return 1 if resource == NODES else instance_type.capacity.get(resource, 0)


def daemonset_tolerates(spec: PodSpec, taints: Sequence[Taint]) -> bool:
    """Whether a DaemonSet's pods tolerate these taints (NoSchedule/NoExecute)."""
    return untolerated(taints, spec.tolerations) is None


class NodePools:
    """The snapshot's NodePools by weight (heaviest first), with per-plan caches."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.pools = sorted(snapshot.nodepools, key=lambda p: (-p.weight, p.name))
        self.requirements = [
            p.requirements.intersect(Requirements.from_labels({**p.labels, wk.NODEPOOL: p.name}))
            for p in self.pools
        ]
        self.limits = Limits(self.pools)
        self._types: dict[tuple[int, Requirements], list[tuple[InstanceType, float]]] = {}
        self._overhead: dict[tuple[int, str], Resources] = {}
        self._options: dict[
            tuple[tuple[Toleration, ...], Requirements, bool, tuple[tuple[str, int], ...]],
            tuple[list[PoolOption], list[str]],
        ] = {}
        self._candidates: dict[tuple[str, Requirements], CandidateType] = {}
        self._offered: dict[tuple[tuple[Toleration, ...], Requirements], frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self.pools)

    def index(self, name: str) -> int:
        return next(i for i, p in enumerate(self.pools) if p.name == name)

    # --- instance types ----------------------------------------------------------------------------

    def types(self, pool_index: int, requirements: Requirements) -> list[tuple[InstanceType, float]]:
        """Types of the NodePool compatible with the requirements, with their cheapest allowed price."""
        key = (pool_index, requirements)
        cached = self._types.get(key)
        if cached is not None:
            return cached
        checks = [(k, r) for k, r in requirements.items() if k not in OFFERING_KEYS]
        found = []
        for instance_type in self.pools[pool_index].instance_types:
            if not _labels_satisfy(instance_type.labels, checks):
                continue
            price = instance_type.cheapest_price(requirements)
            if price is not None:
                found.append((instance_type, price))
        found.sort(key=lambda pair: (pair[1], pair[0].name))
        self._types[key] = found
        return found

    def candidate(
        self, instance_type: InstanceType, price: float, requirements: Requirements
    ) -> CandidateType:
        """The type as a claim candidate: its offerings the requirements allow (cached)."""
        key = (instance_type.name, requirements)
        found = self._candidates.get(key)
        if found is None:
            found = CandidateType(
                instance_type.name, price, tuple(instance_type.available_offerings(requirements))
            )
            self._candidates[key] = found
        return found

    # --- what a node keeps free -------------------------------------------------------------------

    def daemonset_overhead(self, pool_index: int, instance_type: InstanceType) -> Resources:
        """Requests of the DaemonSets that would land on a node of this type in this NodePool."""
        key = (pool_index, instance_type.name)
        cached = self._overhead.get(key)
        if cached is not None:
            return cached
        pool = self.pools[pool_index]
        node_requirements = self.requirements[pool_index].intersect(
            Requirements.from_labels(instance_type.labels)
        )
        total: Resources = {}
        for daemonset in self.snapshot.daemonsets:
            spec = daemonset.spec
            if not daemonset_tolerates(spec, (*pool.taints, *pool.startup_taints)):
                continue
            selector = Requirements.from_labels(dict(spec.node_selector))
            terms = spec.required_terms or (Requirements(),)
            if not any(
                node_requirements.conflict(selector.intersect(t), ALLOW_UNDEFINED) is None for t in terms
            ):
                continue
            for name, value in spec.requests:
                total[name] = total.get(name, 0) + value
        self._overhead[key] = total
        return total

    def allocatable(self, pool_index: int, instance_type: InstanceType) -> Resources:
        overhead = self.daemonset_overhead(pool_index, instance_type)
        if not overhead:
            return instance_type.allocatable
        return {k: v - overhead.get(k, 0) for k, v in instance_type.allocatable.items()}

    def fits(self, pool_index: int, instance_type: InstanceType, requests: Resources) -> bool:
        allocatable = self.allocatable(pool_index, instance_type)
        return all(allocatable.get(k, 0) >= v for k, v in requests.items() if v > 0)

    def no_type_reason(self, requests: Resources, pool_index: int, requirements: Requirements) -> str:
        """Why no type of the NodePool takes a pod of ``requests`` under ``requirements``: the
        requirements no type meets (a hostname a local volume pins, an instance type the NodePool
        lacks), or else the requests no type has room for."""
        name = self.pools[pool_index].name
        types = self.types(pool_index, requirements)
        if not types:
            unmet = [
                str(requirement)
                for key, requirement in sorted(requirements.items())
                if not self.types(pool_index, self.requirements[pool_index].with_requirement(requirement))
            ]
            what = " and ".join(unmet) or "these requirements together"
            return f"no instance type in NodePool {name} matches {what}"
        missing = [
            resource
            for resource, value in sorted(requests.items())
            if resource != PODS
            and not any(self.allocatable(pool_index, t).get(resource, 0) >= value for t, _ in types)
        ]
        resources = missing or [r for r in sorted(requests) if r != PODS]
        detail = ", ".join(f"{r}: {format_resource(r, requests[r])}" for r in resources)
        within = " within limits" if self.limits.limited(pool_index) else ""
        return f"no instance type in NodePool {name} has {detail}{within}"

    def no_room_reason(self, pool_index: int, cls: PodClass, requirements: Requirements) -> str:
        """Why a class packed nowhere in this NodePool: a limit, all-on-one-node affinity, or size."""
        types = self.types(pool_index, requirements)
        for instance_type, _ in types:
            limit = self.limits.blocked(pool_index, instance_type)
            if limit:
                return limit
        if cls.wants_colocation():
            return f"pod affinity on {wk.HOSTNAME}: all {len(cls.pods)} pods do not fit on one node"
        return self.no_type_reason(cls.requests, pool_index, requirements)

    def offered_zones(self, tolerations: tuple[Toleration, ...], required: Requirements) -> frozenset[str]:
        """Zones any NodePool the pod tolerates offers under its required node affinity, limits and
        sizes aside: the topology-spread domains, as Karpenter counts them."""
        key = (tolerations, required)
        cached = self._offered.get(key)
        if cached is not None:
            return cached
        zones: set[str] = set()
        for index, pool in enumerate(self.pools):
            if untolerated(pool.taints, tolerations) is not None:
                continue
            if self.requirements[index].conflict(required, ALLOW_UNDEFINED) is not None:
                continue
            requirements = self.requirements[index].intersect(required)
            for instance_type, _ in self.types(index, requirements):
                zones.update(o.zone for o in instance_type.available_offerings(requirements))
        found = frozenset(zones)
        self._offered[key] = found
        return found

    # --- which NodePools a class may use ------------------------------------------------------------

    def options(self, cls: PodClass, level: Level) -> tuple[list[PoolOption], list[str]]:
        """The NodePools (by weight) that can host the class at this level, and why the others cannot.

        A NodePool can when the class tolerates its taints, its requirements are compatible, and
        some compatible type has room for one pod within the limits.
        """
        key = (cls.spec.tolerations, level.requirements, level.tolerate_prefer_no_schedule, cls.spec.requests)
        cached = self._options.get(key)
        if cached is not None:
            return cached
        options: list[PoolOption] = []
        reasons: list[str] = []
        for index in range(len(self.pools)):
            reason = self._refusal(index, cls, level)
            if reason is None:
                options.append((index, self.requirements[index].intersect(level.requirements)))
            else:
                reasons.append(reason)
        self._options[key] = (options, reasons)
        return options, reasons

    def _refusal(self, index: int, cls: PodClass, level: Level) -> str | None:
        pool = self.pools[index]
        taint = untolerated(pool.taints, cls.spec.tolerations, prefer=not level.tolerate_prefer_no_schedule)
        if taint is not None:
            return f"NodePool {pool.name}: taint {taint} not tolerated"
        conflict = self.requirements[index].conflict(level.requirements, ALLOW_UNDEFINED)
        if conflict is not None:
            return f"NodePool {pool.name}: {conflict}"
        types = self.types(index, self.requirements[index].intersect(level.requirements))
        first_blocked: str | None = None
        for instance_type, _ in types:
            if self.fits(index, instance_type, cls.requests):
                blocked = self.limits.blocked(index, instance_type)
                if blocked is None:
                    return None
                first_blocked = first_blocked or blocked
        if first_blocked is not None:
            return first_blocked
        return self.no_type_reason(
            cls.requests, index, self.requirements[index].intersect(level.requirements)
        )


def _labels_satisfy(labels: dict[str, str], checks: Sequence[tuple[str, Requirement]]) -> bool:
    """Whether a type's labels meet the (non-offering) requirements; well-known labels it lacks fail
    unless the requirement allows absence (the node would not carry them)."""
    for label, requirement in checks:
        value = labels.get(label)
        if value is None:
            if label in ALLOW_UNDEFINED and not requirement.allows_absent and label not in POOL_KEYS:
                return False
            continue
        if not requirement.has(value):
            return False
    return True
