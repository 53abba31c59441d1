"""``plan(snapshot) -> Plan``: where pending pods go, and what to launch for the rest.

Flow (all deterministic: every iteration order is sorted by a total key):

1. Pending pods are grouped into equivalence classes (same scheduling spec and volume topology).
2. Classes are placed one by one, biggest first (pods with affinity to other pods last, so their
   targets are already placed). For each class, constraint *levels* are tried from strict to
   relaxed, as Karpenter relaxes preferences: required node-affinity terms one after another,
   then preferred pod affinity, preferred pod anti-affinity, the heaviest preferred node
   affinity term, ScheduleAnyway spreads, and finally PreferNoSchedule taints.
3. Within a level, zone / capacity-type topology (spread, pod (anti-)affinity on zone) splits the
   class into pinned slices by water-filling over the eligible domains; each slice goes to
   existing and in-flight nodes first, and the remainder becomes demand on the first NodePool
   (by weight) that can host it.
4. Demand is bin-packed per NodePool and requirement set by ``packing.Packer`` (cost per packed
   pod across the catalog, hostname caps and conflicts), then NodeClaims are cut in order and
   charged against NodePool limits with their largest candidate type; whatever the limits refuse
   moves to the next NodePool, or is reported with a reason.

Known limits: required hostname affinity is met on existing/in-flight nodes, or by co-locating a
self-affine class on one new node; hostname affinity to pods that are themselves only planned
is reported as unschedulable (they are retried next pass, once their node exists). Zone affinity
to planned pods pins those pods' claims to the chosen zone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import ge

from nodewright.api import labels as wk
from nodewright.scheduling.instancetypes import InstanceType, Offering
from nodewright.scheduling.model import (
    DO_NOT_SCHEDULE,
    Node,
    Pod,
    PodAffinityTerm,
    PodSpec,
    Snapshot,
    Taint,
    TopologySpread,
    untolerated,
)
from nodewright.scheduling.packing import Item, Packer, TypeOption
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.resources import CPU, MEMORY, PODS, Resources, fits, format_resource

MAX_CANDIDATE_TYPES = 60
_ALLOW_UNDEFINED = wk.WELL_KNOWN_LABELS | {wk.HOSTNAME}
_TOPOLOGY_KEYS = (wk.ZONE, wk.CAPACITY_TYPE)


# --- output -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CandidateType:
    """An instance type a NodeClaim may launch as, with the offerings its requirements allow."""

    name: str
    price: float
    offerings: tuple[Offering, ...]


@dataclass(slots=True)
class NewClaim:
    nodepool: str
    requirements: Requirements
    pods: list[str]
    instance_types: list[CandidateType]
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    requests: Resources = field(default_factory=dict)

    def label_values(self) -> dict[str, list[str]]:
        """label → allowed values of its ``In`` requirements (the full form: ``requirements.to_k8s()``)."""
        return {
            key: sorted(r.values)
            for key, r in sorted(self.requirements.items())
            if not r.complement and r.values
        }

    @property
    def price(self) -> float:
        """The cheapest candidate's price: what the launcher will most likely pay per hour."""
        return self.instance_types[0].price if self.instance_types else 0.0


@dataclass(slots=True)
class Plan:
    placements: dict[str, str] = field(default_factory=dict)  # pod key → existing/in-flight node
    new_claims: list[NewClaim] = field(default_factory=list)
    unschedulable: dict[str, str] = field(default_factory=dict)  # pod key → reason
    classes: int = 0

    @property
    def cost_per_hour(self) -> float:
        return sum(claim.price for claim in self.new_claims)


# --- internal model -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Class:
    index: int
    spec: PodSpec
    pods: list[Pod]
    requests: Resources
    labels: dict[str, str]
    volume: Requirements
    reason: str | None = None
    next_pod: int = 0

    def take(self, count: int) -> list[Pod]:
        taken = self.pods[self.next_pod : self.next_pod + count]
        self.next_pod += len(taken)
        return taken


@dataclass(frozen=True, slots=True)
class _Level:
    requirements: Requirements
    terms: tuple[PodAffinityTerm, ...]
    spreads: tuple[TopologySpread, ...]
    tolerate_prefer_no_schedule: bool


@dataclass(slots=True)
class _TopologyGroup:
    namespaces: tuple[str, ...]
    selector: object
    key: str
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Demand:
    cls: _Class
    count: int
    level: _Level
    options: list[tuple[int, Requirements]]  # (nodepool index, requirements incl. pins), by weight
    option: int = 0
    colocate: bool = False


@dataclass(slots=True)
class _ExistingNode:
    node: Node
    free: Resources
    zone: str | None
    capacity_type: str | None
    hostname: str
    ports: list = field(default_factory=list)
    anti_terms: list = field(default_factory=list)  # (namespace, term) of pods already there


def _group_key(term_namespaces: tuple[str, ...], own_namespace: str, selector: object, key: str) -> tuple:
    return (term_namespaces or (own_namespace,), selector, key)


def _single_value(requirement: Requirement | None) -> bool:
    return requirement is not None and not requirement.complement and len(requirement.values) == 1


class Scheduler:
    """One planning pass over a snapshot; ``plan()`` is the entry point."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.nodepools = sorted(snapshot.nodepools, key=lambda p: (-p.weight, p.name))
        self.plan = Plan()
        self.groups: dict[tuple, _TopologyGroup] = {}
        self._match_cache: dict[tuple[tuple, int], bool] = {}
        self._np_requirements = [
            p.requirements.intersect(Requirements.from_labels({**p.labels, wk.NODEPOOL: p.name}))
            for p in self.nodepools
        ]
        self._type_cache: dict[tuple[int, Requirements], list[tuple[InstanceType, float]]] = {}
        self._overhead_cache: dict[tuple[int, str], Resources] = {}
        self._np_check_cache: dict[tuple, tuple[list[tuple[int, Requirements]], list[str]]] = {}
        self._candidate_cache: dict[tuple[str, Requirements], CandidateType] = {}
        self._domain_cache: dict[tuple, list[str]] = {}
        self.in_use = [dict(p.in_use) for p in self.nodepools]
        self.existing = [
            self._existing(n) for n in sorted(snapshot.nodes, key=lambda n: (n.in_flight, n.name))
        ]

    # --- setup -----------------------------------------------------------------------------------

    def _existing(self, node: Node) -> _ExistingNode:
        free = {PODS: 110, **node.allocatable}  # the kubelet's default when allocatable omits pods
        for pod in node.pods:
            for name, value in pod.spec.requests:
                free[name] = free.get(name, 0) - value
        if node.in_flight:  # its DaemonSet pods are not bound yet
            for daemonset in self.snapshot.daemonsets:
                if self._daemonset_fits_labels(daemonset.spec, node.labels, node.taints):
                    for name, value in daemonset.spec.requests:
                        free[name] = free.get(name, 0) - value
        entry = _ExistingNode(
            node,
            free,
            node.labels.get(wk.ZONE),
            node.labels.get(wk.CAPACITY_TYPE),
            node.labels.get(wk.HOSTNAME, node.name),
        )
        for pod in node.pods:
            entry.ports.extend(pod.spec.host_ports)
            entry.anti_terms.extend(
                (pod.spec.namespace, t)
                for t in pod.spec.affinity
                if t.anti and not t.weight and t.topology_key == wk.HOSTNAME
            )
        return entry

    @staticmethod
    def _daemonset_fits_labels(spec: PodSpec, labels: Mapping[str, str], taints: Sequence[Taint]) -> bool:
        if untolerated(taints, spec.tolerations) is not None:
            return False
        if any(labels.get(k) != v for k, v in spec.node_selector):
            return False
        return not spec.required_terms or any(t.matches_labels(labels) for t in spec.required_terms)

    def _daemonset_overhead(self, pool_index: int, instance_type: InstanceType) -> Resources:
        """Requests of the DaemonSets that would land on a node of this type in this NodePool."""
        key = (pool_index, instance_type.name)
        cached = self._overhead_cache.get(key)
        if cached is not None:
            return cached
        pool = self.nodepools[pool_index]
        node_requirements = self._np_requirements[pool_index].intersect(
            Requirements.from_labels(instance_type.labels)
        )
        total: Resources = {}
        for daemonset in self.snapshot.daemonsets:
            spec = daemonset.spec
            if untolerated((*pool.taints, *pool.startup_taints), spec.tolerations) is not None:
                continue
            selector = Requirements.from_labels(dict(spec.node_selector))
            terms = spec.required_terms or (Requirements(),)
            if not any(
                node_requirements.conflict(selector.intersect(t), _ALLOW_UNDEFINED) is None for t in terms
            ):
                continue
            for name, value in spec.requests:
                total[name] = total.get(name, 0) + value
        self._overhead_cache[key] = total
        return total

    def _types(self, pool_index: int, requirements: Requirements) -> list[tuple[InstanceType, float]]:
        """Types of the NodePool compatible with the requirements, with their cheapest allowed price."""
        key = (pool_index, requirements)
        cached = self._type_cache.get(key)
        if cached is not None:
            return cached
        checks = [(k, r) for k, r in requirements.items() if k not in (wk.ZONE, wk.CAPACITY_TYPE)]
        found = []
        for instance_type in self.nodepools[pool_index].instance_types:
            labels = instance_type.labels
            ok = True
            for label, requirement in checks:
                value = labels.get(label)
                if value is None:
                    if label in _ALLOW_UNDEFINED and not requirement.allows_absent and label != wk.NODEPOOL:
                        ok = False
                        break
                    continue
                if not requirement.has(value):
                    ok = False
                    break
            if not ok:
                continue
            price = instance_type.cheapest_price(requirements)
            if price is not None:
                found.append((instance_type, price))
        found.sort(key=lambda pair: (pair[1], pair[0].name))
        self._type_cache[key] = found
        return found

    # --- classes and levels ------------------------------------------------------------------------

    def _volume_requirements(self, pod: Pod) -> Requirements | str:
        """A pod's zone pin from its volumes, or a reason it cannot be scheduled."""
        if not pod.spec.claims:
            return Requirements()
        claims = {(c.namespace, c.name): c for c in self.snapshot.claims}
        volumes = {v.name: v for v in self.snapshot.volumes}
        classes = {s.name: s for s in self.snapshot.storage_classes}
        result = Requirements()
        for name in pod.spec.claims:
            claim = claims.get((pod.namespace, name))
            if claim is None:
                return f"PersistentVolumeClaim {pod.namespace}/{name} not found"
            if claim.volume_name:
                volume = volumes.get(claim.volume_name)
                if volume and volume.node_affinity:
                    result = result.intersect(volume.node_affinity[0])
            elif claim.storage_class:
                storage_class = classes.get(claim.storage_class)
                if (
                    storage_class
                    and storage_class.wait_for_first_consumer
                    and storage_class.allowed_topologies
                ):
                    result = result.intersect(storage_class.allowed_topologies[0])
        return result

    def _classes(self) -> list[_Class]:
        by_key: dict[tuple[PodSpec, Requirements], list[Pod]] = {}
        for pod in self.snapshot.pods:
            if pod.spec.is_daemonset or pod.node_name:
                continue
            volume = self._volume_requirements(pod) if pod.spec.claims else Requirements()
            if isinstance(volume, str):
                self.plan.unschedulable[pod.key] = volume
                continue
            by_key.setdefault((pod.spec, volume), []).append(pod)
        classes = []
        for (spec, volume), pods in by_key.items():
            pods.sort(key=lambda p: p.key)
            classes.append(_Class(0, spec, pods, spec.request_map, spec.label_map, volume))

        def order(c: _Class) -> tuple:
            leans_on_others = any(
                not t.anti and not self._term_selects(c.spec.namespace, t, c.spec.namespace, c.labels)
                for t in c.spec.affinity
            )
            return (leans_on_others, -c.requests.get(CPU, 0), -c.requests.get(MEMORY, 0), c.pods[0].key)

        classes.sort(key=order)
        for index, cls in enumerate(classes):
            cls.index = index
        self.plan.classes = len(classes)
        return classes

    @staticmethod
    def _term_selects(
        own_namespace: str, term: PodAffinityTerm, namespace: str, labels: Mapping[str, str]
    ) -> bool:
        return term.selects(own_namespace, namespace, labels)

    def _levels(self, cls: _Class) -> list[_Level]:
        spec = cls.spec
        base = Requirements.from_labels(dict(spec.node_selector)).intersect(cls.volume)
        required = list(spec.required_terms) or [Requirements()]
        preferred_node = [r for _, r in sorted(spec.preferred_terms, key=lambda p: -p[0])]
        pod_required = [t for t in spec.affinity if not t.weight]
        preferred_affinity = sorted(
            (t for t in spec.affinity if t.weight and not t.anti), key=lambda t: -t.weight
        )
        preferred_anti = sorted((t for t in spec.affinity if t.weight and t.anti), key=lambda t: -t.weight)
        hard = [s for s in spec.spreads if s.when_unsatisfiable == DO_NOT_SCHEDULE]
        soft = [s for s in spec.spreads if s.when_unsatisfiable != DO_NOT_SCHEDULE]
        term, tolerate = 0, False
        levels = []
        while True:
            requirements = base.intersect(required[term])
            if preferred_node:
                requirements = requirements.intersect(preferred_node[0])
            levels.append(
                _Level(
                    requirements,
                    (*pod_required, *preferred_affinity, *preferred_anti),
                    (*hard, *soft),
                    tolerate,
                )
            )
            if term < len(required) - 1:
                term += 1
            elif preferred_affinity:
                preferred_affinity.pop(0)
            elif preferred_anti:
                preferred_anti.pop(0)
            elif preferred_node:
                preferred_node.pop(0)
            elif soft:
                soft = []
            elif not tolerate:
                tolerate = True
            else:
                return levels

    # --- topology ------------------------------------------------------------------------------------

    def _group(
        self, own_namespace: str, namespaces: tuple[str, ...], selector: object, key: str
    ) -> _TopologyGroup:
        group_key = _group_key(namespaces, own_namespace, selector, key)
        group = self.groups.get(group_key)
        if group is None:
            group = _TopologyGroup(group_key[0], selector, key)
            for entry in self.existing:
                domain = self._domain(entry, key)
                if domain is None:
                    continue
                n = sum(
                    1
                    for pod in entry.node.pods
                    if pod.namespace in group.namespaces and selector.matches(pod.spec.label_map)  # type: ignore[attr-defined]
                )
                if n:
                    group.counts[domain] = group.counts.get(domain, 0) + n
            self.groups[group_key] = group
        return group

    @staticmethod
    def _domain(entry: _ExistingNode, key: str) -> str | None:
        if key == wk.HOSTNAME:
            return entry.hostname
        return entry.node.labels.get(key)

    def _matches(self, group: _TopologyGroup, cls: _Class) -> bool:
        key = (_group_key(group.namespaces, "", group.selector, group.key), cls.index)
        found = self._match_cache.get(key)
        if found is None:
            found = cls.spec.namespace in group.namespaces and group.selector.matches(cls.labels)  # type: ignore[attr-defined]
            self._match_cache[key] = found
        return found

    def _count(self, cls: _Class, key: str, domain: str | None, n: int) -> None:
        """Record n pods of cls landing in a domain, for every group that selects them."""
        if domain is None:
            return
        for group in self.groups.values():
            if group.key == key and self._matches(group, cls):
                group.counts[domain] = group.counts.get(domain, 0) + n

    def _record(
        self, cls: _Class, zone: str | None, capacity_type: str | None, hostname: str | None, n: int
    ) -> None:
        self._count(cls, wk.ZONE, zone, n)
        self._count(cls, wk.CAPACITY_TYPE, capacity_type, n)
        self._count(cls, wk.HOSTNAME, hostname, n)

    # --- NodePool options ------------------------------------------------------------------------

    def _pool_options(self, cls: _Class, level: _Level) -> tuple[list[tuple[int, Requirements]], list[str]]:
        key = (cls.spec.tolerations, level.requirements, level.tolerate_prefer_no_schedule, cls.spec.requests)
        cached = self._np_check_cache.get(key)
        if cached is not None:
            return cached
        options, reasons = [], []
        for index, pool in enumerate(self.nodepools):
            taint = untolerated(
                pool.taints, cls.spec.tolerations, prefer=not level.tolerate_prefer_no_schedule
            )
            if taint is not None:
                reasons.append(f"NodePool {pool.name}: taint {taint} not tolerated")
                continue
            conflict = self._np_requirements[index].conflict(level.requirements, _ALLOW_UNDEFINED)
            if conflict is not None:
                reasons.append(f"NodePool {pool.name}: {conflict}")
                continue
            requirements = self._np_requirements[index].intersect(level.requirements)
            types = self._types(index, requirements)
            fitting = []
            for instance_type, _ in types:
                if self._fits_resources(index, instance_type, cls.requests):
                    fitting.append(instance_type)
                    if self._within_limits(index, instance_type) is None:
                        break
            if not fitting:
                reasons.append(
                    f"no instance type in NodePool {pool.name} has "
                    f"{self._describe(cls.requests, index, types)}"
                )
                continue
            blocked = [self._within_limits(index, t) for t in fitting]
            if all(blocked):
                reasons.append(str(blocked[0]))
                continue
            options.append((index, requirements))
        self._np_check_cache[key] = (options, reasons)
        return options, reasons

    def _allocatable(self, pool_index: int, instance_type: InstanceType) -> Resources:
        overhead = self._daemonset_overhead(pool_index, instance_type)
        if not overhead:
            return instance_type.allocatable
        return {k: v - overhead.get(k, 0) for k, v in instance_type.allocatable.items()}

    def _within_limits(self, pool_index: int, instance_type: InstanceType) -> str | None:
        """The limit a launch of this type would break, or None."""
        pool = self.nodepools[pool_index]
        for resource, limit in sorted(pool.limits.items()):
            if self.in_use[pool_index].get(resource, 0) + instance_type.capacity.get(resource, 0) > limit:
                return f"NodePool {pool.name}: {resource} limit {format_resource(resource, limit)} reached"
        return None

    def _fits_resources(self, pool_index: int, instance_type: InstanceType, requests: Resources) -> bool:
        allocatable = self._allocatable(pool_index, instance_type)
        return all(allocatable.get(k, 0) >= v for k, v in requests.items() if v > 0)

    def _describe(self, requests: Resources, pool_index: int, types: list[tuple[InstanceType, float]]) -> str:
        missing = [
            name
            for name, value in sorted(requests.items())
            if name != PODS
            and not any(self._allocatable(pool_index, t).get(name, 0) >= value for t, _ in types)
        ]
        names = missing or [n for n in sorted(requests) if n != PODS]
        detail = ", ".join(f"{n}: {format_resource(n, requests[n])}" for n in names)
        if not types:
            return f"{detail} (no instance type matches the requirements)"
        return f"{detail} within limits" if self.nodepools[pool_index].limits else detail

    # --- placement of one class at one level ----------------------------------------------------

    def _zone_slices(
        self, cls: _Class, level: _Level, count: int, options: list[tuple[int, Requirements]]
    ) -> tuple[list[tuple[str | None, str | None, int]], str | None]:
        """Split count pods into (zone, capacity type, n) slices that honour zone/capacity-type topology."""
        zones = self._domains(cls, level, options, wk.ZONE)
        capacity_types = self._domains(cls, level, options, wk.CAPACITY_TYPE)
        zone_cap: dict[str, int] | None = None
        zone_plan: dict[str | None, int] = {None: count}
        reason = None
        topo_zone = [t for t in level.terms if t.topology_key == wk.ZONE]
        for term in topo_zone:
            group = self._group(cls.spec.namespace, term.namespaces, term.selector, wk.ZONE)
            self_match = self._matches(group, cls)
            occupied = sorted(z for z in zones if group.counts.get(z, 0) > 0)
            if term.anti:
                zones = [z for z in zones if z not in occupied]
                if self_match:
                    zone_cap = dict.fromkeys(zones, 1)
                if not zones:
                    reason = f"pod anti-affinity on {wk.ZONE}: every zone already has a matching pod"
            elif occupied:
                zones = [max(occupied, key=lambda z: (group.counts[z], z))]
            elif self_match and zones:
                zones = [zones[0]]
            elif (pinned_zone := self._pin_pending_targets(group, zones)) is not None:
                zones = [pinned_zone]
            else:
                zones = []
                reason = f"pod affinity on {wk.ZONE}: no matching pod is running or planned"
        zone_spreads = [s for s in level.spreads if s.topology_key == wk.ZONE]
        if not zones:
            if reason is None and options:
                reason = "no zone where the NodePools offer capacity satisfies the pod's zone requirement"
            return [], reason
        if zone_spreads or topo_zone:
            counts = dict.fromkeys(zones, 0)
            groups = [self._group(cls.spec.namespace, (), s.selector, wk.ZONE) for s in zone_spreads]
            caps = dict(zone_cap) if zone_cap else {}
            for spread, group in zip(zone_spreads, groups, strict=True):
                if (
                    spread.min_domains
                    and len(zones) < spread.min_domains
                    and spread.when_unsatisfiable == DO_NOT_SCHEDULE
                ):
                    for z in zones:
                        allowed = max(0, spread.max_skew - group.counts.get(z, 0))
                        caps[z] = min(caps.get(z, allowed), allowed)
            placed = 0
            for _ in range(count):
                best = None
                for z in zones:
                    if caps and caps.get(z, 1 << 30) <= counts[z]:
                        continue
                    load = sum(g.counts.get(z, 0) for g in groups) + counts[z]
                    if best is None or load < best[0]:
                        best = (load, z)
                if best is None:
                    reason = reason or (
                        f"topology spread on {wk.ZONE}: {len(zones)} zone(s) available, "
                        f"minDomains {max((s.min_domains or 0) for s in zone_spreads)} needs more"
                        if zone_spreads
                        else f"pod anti-affinity on {wk.ZONE}: no zone left without a matching pod"
                    )
                    break
                counts[best[1]] += 1
                placed += 1
            zone_plan = {z: n for z, n in counts.items() if n}
        ct_spreads = [s for s in level.spreads if s.topology_key == wk.CAPACITY_TYPE]
        slices: list[tuple[str | None, str | None, int]] = []
        ct_groups = [self._group(cls.spec.namespace, (), s.selector, wk.CAPACITY_TYPE) for s in ct_spreads]
        ct_counts = dict.fromkeys(capacity_types, 0)
        for zone, n in sorted(zone_plan.items(), key=lambda item: item[0] or ""):
            if not ct_spreads or not capacity_types:
                slices.append((zone, None, n))
                continue
            split = dict.fromkeys(capacity_types, 0)
            for _ in range(n):
                chosen = min(
                    capacity_types,
                    key=lambda c: (sum(g.counts.get(c, 0) for g in ct_groups) + ct_counts[c], c),
                )
                ct_counts[chosen] += 1
                split[chosen] += 1
            slices.extend((zone, c, k) for c, k in sorted(split.items()) if k)
        return slices, reason

    def _pin_pending_targets(self, group: _TopologyGroup, zones: list[str]) -> str | None:
        """Zone affinity to pods that are only planned, on new nodes in no particular zone yet:
        pin those planned pods to one zone all of them can use, so the affinity can follow them.
        """
        targets = [
            d
            for d in self._demands
            if self._matches(group, d.cls) and not _single_value(d.options[d.option][1].get(wk.ZONE))
        ]
        if not targets:
            return None
        for zone in zones:
            pin = Requirements([Requirement(wk.ZONE, False, frozenset({zone}))])
            if all(any(self._types(i, r.intersect(pin)) for i, r in d.options) for d in targets):
                for demand in targets:
                    demand.options = [
                        (i, r.intersect(pin)) for i, r in demand.options if self._types(i, r.intersect(pin))
                    ]
                    demand.option = 0
                    self._record(demand.cls, zone, None, None, demand.count)
                return zone
        return None

    def _domains(
        self, cls: _Class, level: _Level, options: list[tuple[int, Requirements]], key: str
    ) -> list[str]:
        """Domains (zones or capacity types) where the class could run: NodePool offerings and nodes."""
        cache_key = (tuple(options), key, level.requirements)
        cached = self._domain_cache.get(cache_key)
        if cached is not None:
            return cached
        found: set[str] = set()
        for pool_index, requirements in options:
            for instance_type, price in self._types(pool_index, requirements):
                for offering in self._candidate(instance_type, price, requirements).offerings:
                    found.add(offering.zone if key == wk.ZONE else offering.capacity_type)
        for entry in self.existing:
            value = entry.zone if key == wk.ZONE else entry.capacity_type
            if value and value not in found and level.requirements.matches_labels(entry.node.labels):
                found.add(value)
        requirement = level.requirements.get(key)
        domains = sorted(d for d in found if requirement is None or requirement.has(d))
        self._domain_cache[cache_key] = domains
        return domains

    def _node_allowance(self, cls: _Class, level: _Level, entry: _ExistingNode, wanted: int) -> int:
        """How many pods of cls this existing node takes under hostname topology and ports."""
        allowed = wanted
        for name, value in cls.requests.items():
            if value > 0:
                allowed = min(allowed, entry.free.get(name, 0) // value)
                if allowed <= 0:
                    return 0
        if cls.spec.host_ports:
            if any(p.conflicts(q) for p in cls.spec.host_ports for q in entry.ports):
                return 0
            allowed = min(allowed, 1)
        for namespace, term in entry.anti_terms:
            if term.selects(namespace, cls.spec.namespace, cls.labels):
                return 0
        for term in level.terms:
            if term.topology_key != wk.HOSTNAME:
                continue
            group = self._group(cls.spec.namespace, term.namespaces, term.selector, wk.HOSTNAME)
            here = group.counts.get(entry.hostname, 0)
            if term.anti:
                if here:
                    return 0
                if self._matches(group, cls):
                    allowed = min(allowed, 1)
            elif not here and (any(group.counts.values()) or not self._matches(group, cls)):
                return 0
        for spread in level.spreads:
            if spread.topology_key == wk.HOSTNAME:
                group = self._group(cls.spec.namespace, (), spread.selector, wk.HOSTNAME)
                allowed = min(allowed, spread.max_skew - group.counts.get(entry.hostname, 0))
        return max(allowed, 0)

    def _place_existing(
        self, cls: _Class, level: _Level, zone: str | None, capacity_type: str | None, count: int
    ) -> int:
        placed = 0
        colocate = self._colocate(cls, level)
        for entry in self.existing:
            if placed >= count:
                break
            node = entry.node
            if (
                node.unschedulable
                or (zone and entry.zone != zone)
                or (capacity_type and entry.capacity_type != capacity_type)
            ):
                continue
            if not fits(cls.requests, entry.free):
                continue
            if untolerated(node.taints, cls.spec.tolerations, prefer=not level.tolerate_prefer_no_schedule):
                continue
            if not level.requirements.matches_labels(node.labels):
                continue
            n = self._node_allowance(cls, level, entry, count - placed)
            if colocate and n < count:
                continue
            if n <= 0:
                continue
            for name, value in cls.requests.items():
                entry.free[name] = entry.free.get(name, 0) - value * n
            entry.ports.extend(cls.spec.host_ports)
            for term in cls.spec.affinity:
                if term.anti and not term.weight and term.topology_key == wk.HOSTNAME:
                    entry.anti_terms.append((cls.spec.namespace, term))
            for pod in cls.take(n):
                self.plan.placements[pod.key] = node.name
            self._record(cls, entry.zone, entry.capacity_type, entry.hostname, n)
            placed += n
            if colocate:
                break
        return placed

    def _colocate(self, cls: _Class, level: _Level) -> bool:
        """Required hostname self-affinity with no matching pod yet: all pods on one node."""
        for term in level.terms:
            if not term.anti and term.topology_key == wk.HOSTNAME:
                group = self._group(cls.spec.namespace, term.namespaces, term.selector, wk.HOSTNAME)
                if self._matches(group, cls) and not any(group.counts.values()):
                    return True
        return False

    def _hostname_affinity(self, cls: _Class, level: _Level) -> tuple[str | None, _TopologyGroup | None]:
        """Required hostname affinity that a plain new node cannot meet.

        Returns (reason, None) when the matching pods run on nodes that have no room (or match
        nothing at all), (None, group) when they are only planned, so this class must ride on
        their new nodes, and (None, None) when new nodes are fine (no such term, or self-affinity).
        """
        for term in level.terms:
            if term.anti or term.topology_key != wk.HOSTNAME:
                continue
            group = self._group(cls.spec.namespace, term.namespaces, term.selector, wk.HOSTNAME)
            if any(group.counts.values()):
                return f"pod affinity on {wk.HOSTNAME}: the matching pods' nodes have no room", None
            if self._matches(group, cls):
                continue
            if any(self._matches(group, d.cls) for d in self._demands):
                return None, group
            return f"pod affinity on {wk.HOSTNAME}: no running or planned pod matches", None
        return None, None

    def _attach_followers(self) -> None:
        """Put pods with hostname affinity to planned pods onto the new claims holding them.

        A claim takes as many as its cheapest candidate still holds (else as many as any
        candidate holds, dropping the candidates that do not); its candidate list only shrinks,
        so the limit charged for it already covers the change.
        """
        pools = {p.name: i for i, p in enumerate(self.nodepools)}
        for cls, count, level, group in self._followers:
            left = count
            for index, claim in enumerate(self.plan.new_claims):
                if left <= 0:
                    break
                if not any(self._matches(group, self._class_list[c]) for c in self._claim_classes[index]):
                    continue
                pool_index = pools[claim.nodepool]
                if untolerated(claim.taints, cls.spec.tolerations) is not None:
                    continue
                if claim.requirements.conflict(level.requirements, _ALLOW_UNDEFINED) is not None:
                    continue
                free = [
                    (
                        c,
                        {
                            k: v - claim.requests.get(k, 0)
                            for k, v in self._allocatable(pool_index, self._by_name[c.name]).items()
                        },
                    )
                    for c in claim.instance_types
                ]
                fits_in = [
                    min((f.get(k, 0) // v for k, v in cls.requests.items() if v > 0), default=left)
                    for _, f in free
                ]
                take = min(left, fits_in[0] if fits_in and fits_in[0] > 0 else max(fits_in, default=0))
                if take <= 0:
                    continue
                kept = [c for (c, _), n in zip(free, fits_in, strict=True) if n >= take]
                claim.instance_types = kept
                claim.requirements = claim.requirements.with_requirement(
                    Requirement(wk.INSTANCE_TYPE, False, frozenset(c.name for c in kept))
                )
                for name, value in cls.requests.items():
                    claim.requests[name] = claim.requests.get(name, 0) + value * take
                claim.pods.extend(p.key for p in cls.take(take))
                self._claim_classes[index].add(cls.index)
                left -= take
            if left > 0:
                cls.reason = f"pod affinity on {wk.HOSTNAME}: no room beside the matching planned pods"

    def _place_class(self, cls: _Class, demands: list[_Demand]) -> None:
        remaining = len(cls.pods)
        reason = None
        for level in self._levels(cls):
            options, pool_reasons = self._pool_options(cls, level)
            slices, topology_reason = self._zone_slices(cls, level, remaining, options)
            planned = 0
            for zone, capacity_type, n in slices:
                placed = self._place_existing(cls, level, zone, capacity_type, n)
                planned += placed
                left = n - placed
                if not left:
                    continue
                blocker, follow = self._hostname_affinity(cls, level)
                if follow is not None:
                    self._followers.append((cls, left, level, follow))
                    planned += left
                    continue
                pins = []
                if zone:
                    pins.append(Requirement(wk.ZONE, False, frozenset({zone})))
                if capacity_type:
                    pins.append(Requirement(wk.CAPACITY_TYPE, False, frozenset({capacity_type})))
                pinned = [
                    (i, r.intersect(Requirements(pins)) if pins else r)
                    for i, r in options
                    if not pins or self._types(i, r.intersect(Requirements(pins)))
                ]
                if blocker or not pinned:
                    topology_reason = blocker or topology_reason
                    continue
                demands.append(_Demand(cls, left, level, pinned, colocate=self._colocate(cls, level)))
                self._record(cls, zone, capacity_type, None, left)
                planned += left
            remaining -= planned
            if remaining <= 0:
                return
            reason = "; ".join(filter(None, [topology_reason, *pool_reasons])) or "no NodePool can host it"
            if not options and not pool_reasons:
                reason = "no NodePool exists"
        # Pods neither placed nor demanded stay at the end of the class's list and are reported.
        cls.reason = reason

    # --- packing and claims ------------------------------------------------------------------------

    def _pack(self, demands: list[_Demand]) -> None:
        queue = list(demands)
        for pool_index in range(len(self.nodepools)):
            mine = [d for d in queue if d.options and d.options[d.option][0] == pool_index]
            if not mine:
                continue
            rerouted = self._pack_pool(pool_index, mine)
            queue = [d for d in queue if d not in mine] + rerouted

    def _pack_pool(self, pool_index: int, demands: list[_Demand]) -> list[_Demand]:
        groups: dict[tuple, list[_Demand]] = {}
        for demand in demands:
            key = (demand.options[demand.option][1], demand.cls.index if demand.colocate else -1)
            groups.setdefault(key, []).append(demand)
        rerouted: list[_Demand] = []
        for (requirements, colocated), members in sorted(
            groups.items(), key=lambda g: (repr(g[0][0]), g[0][1])
        ):
            rerouted.extend(self._pack_group(pool_index, requirements, members, colocated >= 0))
        return rerouted

    def _pack_group(
        self, pool_index: int, requirements: Requirements, demands: list[_Demand], colocate: bool
    ) -> list[_Demand]:
        pool = self.nodepools[pool_index]
        counts: dict[int, int] = {}
        by_class: dict[int, _Class] = {}
        level_of: dict[int, _Level] = {}
        for demand in demands:
            counts[demand.cls.index] = counts.get(demand.cls.index, 0) + demand.count
            by_class[demand.cls.index] = demand.cls
            level_of[demand.cls.index] = demand.level
        names = {CPU, MEMORY, PODS}
        for cls in by_class.values():
            names.update(cls.requests)
        dims = sorted(names)
        types = [
            (t, price, self._allocatable(pool_index, t))
            for t, price in self._types(pool_index, requirements)
            if self._within_limits(pool_index, t) is None
        ]
        options = [TypeOption(t.name, price, tuple(a.get(d, 0) for d in dims)) for t, price, a in types]
        by_name = {t.name: t for t, _, _ in types}
        self._by_name.update(by_name)
        items = [
            Item(c, tuple(by_class[c].requests.get(d, 0) for d in dims), n) for c, n in sorted(counts.items())
        ]
        caps, conflicts = self._caps(by_class, level_of)
        failed: dict[int, int] = {}
        nodes = []
        if options:
            packer = Packer(
                items, options, dims.index(CPU), dims.index(MEMORY), caps=caps, conflicts=conflicts
            )
            if colocate:
                item = items[0]
                load = tuple(v * item.count for v in item.vec)
                index = packer.cheapest_fitting(load)
                if index is None:
                    failed[item.cls] = item.count
                else:
                    nodes = [(index, {item.cls: item.count}, list(load), 1)]
            else:
                result = packer.pack()
                failed.update(result.unplaced)
                nodes = [(n.type_index, n.counts, n.load, n.multiplicity) for n in result.nodes]
            nodes.sort(key=lambda n: (-packer.types[n[0]].price, sorted(n[1].items())))
        else:
            failed.update(counts)
            packer = None
        limit_reason: str | None = None
        candidates_memo: dict[tuple, list[CandidateType]] = {}
        # Claims that share a candidate list share its requirements (keyed by the list's identity).
        requirements_memo: dict[int, tuple[list[CandidateType], Requirements]] = {}
        for _, node_counts, load, multiplicity in nodes:
            for _ in range(multiplicity):
                candidates, reason = self._candidates(
                    pool_index,
                    requirements,
                    packer.types,
                    tuple(load),
                    by_name=by_name,
                    memo=candidates_memo,
                )
                if not candidates:
                    limit_reason = reason
                    for cls_index, n in node_counts.items():
                        failed[cls_index] = failed.get(cls_index, 0) + n
                    continue
                self._charge(pool_index, candidates, by_name)
                pods: list[str] = []
                for cls_index, n in sorted(node_counts.items()):
                    pods.extend(p.key for p in by_class[cls_index].take(n))
                memo_entry = requirements_memo.get(id(candidates))
                if memo_entry is None or memo_entry[0] is not candidates:
                    memo_entry = (
                        candidates,
                        requirements.with_requirement(
                            Requirement(wk.INSTANCE_TYPE, False, frozenset(c.name for c in candidates))
                        ),
                    )
                    requirements_memo[id(candidates)] = memo_entry
                claim_requirements = memo_entry[1]
                self._claim_classes.append(set(node_counts))
                self.plan.new_claims.append(
                    NewClaim(
                        pool.name,
                        claim_requirements,
                        pods,
                        candidates,
                        {**pool.labels, wk.NODEPOOL: pool.name},
                        pool.taints,
                        pool.startup_taints,
                        dict(zip(dims, load, strict=True)),
                    )
                )
        rerouted = []
        for demand in demands:
            n = min(failed.get(demand.cls.index, 0), demand.count)
            if not n:
                continue
            failed[demand.cls.index] -= n
            if demand.option + 1 < len(demand.options):
                rerouted.append(
                    _Demand(demand.cls, n, demand.level, demand.options, demand.option + 1, demand.colocate)
                )
            else:
                demand.cls.reason = limit_reason or self._limit_or_fit_reason(
                    pool_index, demand.cls, requirements
                )
        return rerouted

    def _limit_or_fit_reason(self, pool_index: int, cls: _Class, requirements: Requirements) -> str:
        types = self._types(pool_index, requirements)
        for instance_type, _ in types:
            limit = self._within_limits(pool_index, instance_type)
            if limit:
                return limit
        if self._colocate_requested(cls):
            return f"pod affinity on {wk.HOSTNAME}: all {len(cls.pods)} pods do not fit on one node"
        detail = self._describe(cls.requests, pool_index, types)
        return f"no instance type in NodePool {self.nodepools[pool_index].name} has {detail}"

    @staticmethod
    def _colocate_requested(pod_class: _Class) -> bool:
        return any(not t.anti and t.topology_key == wk.HOSTNAME for t in pod_class.spec.affinity)

    def _candidates(
        self,
        pool_index: int,
        requirements: Requirements,
        options: list[TypeOption],
        load: tuple[int, ...],
        *,
        by_name: dict[str, InstanceType],
        memo: dict[tuple, list[CandidateType]],
    ) -> tuple[list[CandidateType], str | None]:
        """Types that hold the node's pods and fit the remaining limits, cheapest first (≤ 60)."""
        pool = self.nodepools[pool_index]
        cacheable = not pool.limits
        if cacheable and load in memo:
            return memo[load], None
        found: list[CandidateType] = []
        reason = None
        for option in options:
            if not all(map(ge, option.alloc, load)):
                continue
            instance_type = by_name[option.name]
            blocked = self._within_limits(pool_index, instance_type) if pool.limits else None
            if blocked:
                reason = reason or blocked
                continue
            found.append(
                CandidateType(
                    option.name, option.price, tuple(instance_type.available_offerings(requirements))
                )
            )
            if len(found) >= MAX_CANDIDATE_TYPES:
                break
        for key, requirement in requirements.items():
            if requirement.min_values:
                values = {self._label_values(by_name[c.name], c, key) for c in found}
                distinct = set().union(*values) if values else set()
                if len(distinct) < requirement.min_values:
                    return [], (
                        f"NodePool {pool.name}: minValues {requirement.min_values} for {key} not met "
                        f"({len(distinct)} value(s) among the candidate instance types)"
                    )
        if cacheable:
            memo[load] = found
        return found, reason

    def _candidate(
        self, instance_type: InstanceType, price: float, requirements: Requirements
    ) -> CandidateType:
        key = (instance_type.name, requirements)
        candidate = self._candidate_cache.get(key)
        if candidate is None:
            candidate = CandidateType(
                instance_type.name, price, tuple(instance_type.available_offerings(requirements))
            )
            self._candidate_cache[key] = candidate
        return candidate

    @staticmethod
    def _label_values(instance_type: InstanceType, candidate: CandidateType, key: str) -> frozenset[str]:
        if key == wk.ZONE:
            return frozenset(o.zone for o in candidate.offerings)
        if key == wk.CAPACITY_TYPE:
            return frozenset(o.capacity_type for o in candidate.offerings)
        value = instance_type.labels.get(key)
        return frozenset({value}) if value is not None else frozenset()

    def _charge(
        self, pool_index: int, candidates: list[CandidateType], by_name: dict[str, InstanceType]
    ) -> None:
        """Charge the NodePool with the largest candidate's capacity, per limited resource."""
        pool = self.nodepools[pool_index]
        if not pool.limits:
            return
        for resource in pool.limits:
            largest = max(by_name[c.name].capacity.get(resource, 0) for c in candidates)
            self.in_use[pool_index][resource] = self.in_use[pool_index].get(resource, 0) + largest

    def _caps(
        self, by_class: dict[int, _Class], level_of: dict[int, _Level]
    ) -> tuple[list[tuple[frozenset[int], int]], dict[int, frozenset[int]]]:
        """Per-node caps and conflicts from hostname spread, hostname anti-affinity and host ports."""
        caps: dict[tuple[frozenset[int], int], None] = {}
        conflicts: dict[int, set[int]] = {}
        classes = sorted(by_class)
        for index in classes:
            cls, level = by_class[index], level_of[index]
            for spread in level.spreads:
                if spread.topology_key == wk.HOSTNAME:
                    group = self._group(cls.spec.namespace, (), spread.selector, wk.HOSTNAME)
                    members = frozenset(c for c in classes if self._matches(group, by_class[c])) | {index}
                    caps[(members, spread.max_skew)] = None
            for term in level.terms:
                if term.topology_key != wk.HOSTNAME or not term.anti:
                    continue
                group = self._group(cls.spec.namespace, term.namespaces, term.selector, wk.HOSTNAME)
                members = frozenset(c for c in classes if self._matches(group, by_class[c]))
                if index in members:
                    caps[(members, 1)] = None
                for other in members - {index}:
                    conflicts.setdefault(index, set()).add(other)
                    conflicts.setdefault(other, set()).add(index)
            if cls.spec.host_ports:
                members = frozenset(
                    c
                    for c in classes
                    if any(p.conflicts(q) for p in cls.spec.host_ports for q in by_class[c].spec.host_ports)
                )
                caps[(members | {index}, 1)] = None
        return list(caps), {k: frozenset(v) for k, v in conflicts.items()}

    # --- entry point -----------------------------------------------------------------------------

    def run(self) -> Plan:
        classes = self._classes()
        # Every topology group exists before any placement, so each placement is counted in all
        # the groups that select it (a group made later would miss pods placed earlier).
        for cls in classes:
            for spread in cls.spec.spreads:
                self._group(cls.spec.namespace, (), spread.selector, spread.topology_key)
            for term in cls.spec.affinity:
                self._group(cls.spec.namespace, term.namespaces, term.selector, term.topology_key)
        demands: list[_Demand] = []
        self._demands = demands
        self._followers: list[tuple[_Class, int, _Level, _TopologyGroup]] = []
        self._claim_classes: list[set[int]] = []  # class indices on each new claim
        self._class_list = classes
        self._by_name: dict[str, InstanceType] = {}
        for cls in classes:
            self._place_class(cls, demands)
        self._pack(demands)
        self._attach_followers()
        for cls in classes:
            for pod in cls.pods[cls.next_pod :]:
                self.plan.unschedulable[pod.key] = cls.reason or "not placed"
        return self.plan


def plan(snapshot: Snapshot) -> Plan:
    """Plan placements and new NodeClaims for the snapshot's pending pods (pure, deterministic)."""
    return Scheduler(snapshot).run()
