"""Topology: pod counts per domain for every spread and pod (anti-)affinity term, and the split of a
class over zones and capacity types that honours them.

A *group* is one (kind, namespaces, label selector, topology key): the pods it selects are counted
per domain (zone, capacity type or hostname), from the pods already bound and from every placement
this plan makes. Spreads and (anti-)affinity terms look their group up; the same group serves
every class whose term is the same, so a placement is counted once for all of them.

As Karpenter's topology counts them: spread and affinity groups count a planned pod only once its
domain is decided; anti-affinity groups count it in *every* zone it may still land in, so a pod
that must avoid it waits until its zone is known. *Inverse* groups hold the required zone
anti-affinity of pods already running or planned: a pod they select may not enter a zone where
they are (kube-scheduler's "existing pods' anti-affinity").

Spread domains are the zones a compatible NodePool offers (limits aside) or a node has, under the
pod's required node affinity only: a preference may choose among domains, never remove one, and
a zone whose NodePool is full still counts (its count stays 0, so the others stop at maxSkew).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nodewright.api import labels as wk
from nodewright.scheduling.model import (
    DO_NOT_SCHEDULE,
    LabelSelector,
    Node,
    PodAffinityTerm,
    TopologySpread,
    required_anti_terms,
)
from nodewright.scheduling.podclass import PodClass
from nodewright.scheduling.preferences import Level

SPREAD, AFFINITY, ANTI = "spread", "affinity", "anti-affinity"
GroupKey = tuple[str, tuple[str, ...], LabelSelector, str]
Slice = tuple[str | None, str | None, int]  # (zone, capacity type, pods): None = not pinned
PinPlanned = Callable[["TopologyGroup", list[str]], str | None]


@dataclass(slots=True)
class TopologyGroup:
    kind: str
    namespaces: tuple[str, ...]
    selector: LabelSelector
    key: str
    counts: dict[str, int] = field(default_factory=dict)

    def occupied(self, domains: Sequence[str]) -> list[str]:
        return sorted(d for d in domains if self.counts.get(d, 0) > 0)


def node_domain(node: Node, key: str) -> str | None:
    """The node's domain for a topology key (its hostname label, else its name, for hostname)."""
    if key == wk.HOSTNAME:
        return node.labels.get(wk.HOSTNAME, node.name)
    return node.labels.get(key)


@dataclass(slots=True)
class InverseGroup:
    """Required zone anti-affinity of placed pods: where its owners are, per zone."""

    owner_namespace: str
    term: PodAffinityTerm
    counts: dict[str, int] = field(default_factory=dict)

    def repels(self, cls: PodClass) -> bool:
        return self.term.selects(self.owner_namespace, cls.spec.namespace, cls.labels)


@dataclass(slots=True)
class _ZoneChoice:
    """Zones a class may use after its zone (anti-)affinity terms, per-zone caps, and why none."""

    zones: list[str]
    caps: dict[str, int] = field(default_factory=dict)
    reason: str | None = None


class Topology:
    """Every topology group of one plan, seeded with the pods bound to the nodes."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.groups: dict[GroupKey, TopologyGroup] = {}
        self._matches: dict[tuple[GroupKey, int], bool] = {}
        self.inverse: dict[tuple[str, PodAffinityTerm], InverseGroup] = {}
        for node in nodes:
            zone = node.labels.get(wk.ZONE)
            for namespace, term in node.bound.zone_anti:  # its pods' required zone anti-affinity
                inverse = self._inverse(namespace, term)
                if zone is not None:
                    inverse.counts[zone] = inverse.counts.get(zone, 0) + 1

    def _inverse(self, owner_namespace: str, term: PodAffinityTerm) -> InverseGroup:
        key = (owner_namespace, term)
        found = self.inverse.get(key)
        if found is None:
            found = self.inverse[key] = InverseGroup(owner_namespace, term)
        return found

    def group(
        self, kind: str, own_namespace: str, namespaces: tuple[str, ...], selector: LabelSelector, key: str
    ) -> TopologyGroup:
        group_key: GroupKey = (kind, namespaces or (own_namespace,), selector, key)
        group = self.groups.get(group_key)
        if group is None:
            group = TopologyGroup(kind, group_key[1], selector, key)
            for node in self.nodes:
                domain = node_domain(node, key)
                if domain is None:
                    continue
                n = sum(
                    1
                    for pod in node.pods
                    if pod.namespace in group.namespaces and selector.matches(pod.spec.label_map)
                )
                if n:
                    group.counts[domain] = group.counts.get(domain, 0) + n
            self.groups[group_key] = group
        return group

    def of_term(self, cls: PodClass, term: PodAffinityTerm) -> TopologyGroup:
        kind = ANTI if term.anti else AFFINITY
        return self.group(kind, cls.spec.namespace, term.namespaces, term.selector, term.topology_key)

    def of_spread(self, cls: PodClass, spread: TopologySpread) -> TopologyGroup:
        return self.group(SPREAD, cls.spec.namespace, (), spread.selector, spread.topology_key)

    def register(self, classes: Sequence[PodClass]) -> None:
        """Create every group before any placement, so each placement is counted in all the groups
        that select it (a group made later would miss pods placed earlier)."""
        for cls in classes:
            for spread in cls.spec.spreads:
                self.of_spread(cls, spread)
            for term in cls.spec.affinity:
                self.of_term(cls, term)

    def matches(self, group: TopologyGroup, cls: PodClass) -> bool:
        """Whether the group selects the class's pods (memoised per group and class)."""
        key = ((group.kind, group.namespaces, group.selector, group.key), cls.index)
        found = self._matches.get(key)
        if found is None:
            found = cls.spec.namespace in group.namespaces and group.selector.matches(cls.labels)
            self._matches[key] = found
        return found

    def record(
        self,
        cls: PodClass,
        zone: str | None,
        capacity_type: str | None,
        hostname: str | None,
        n: int,
        *,
        possible_zones: Sequence[str] = (),
    ) -> None:
        """Count n pods of the class landing in these domains (None: not decided). A zone not decided
        yet counts, for anti-affinity only, in each of ``possible_zones``."""
        for key, domain in ((wk.ZONE, zone), (wk.CAPACITY_TYPE, capacity_type), (wk.HOSTNAME, hostname)):
            for group in self.groups.values():
                if group.key != key or not self.matches(group, cls):
                    continue
                if domain is not None:
                    group.counts[domain] = group.counts.get(domain, 0) + n
                elif key == wk.ZONE and group.kind == ANTI:
                    for possible in possible_zones:
                        group.counts[possible] = group.counts.get(possible, 0) + n
        for term in required_anti_terms(cls.spec.affinity, wk.ZONE):
            inverse = self._inverse(cls.spec.namespace, term)
            for possible in [zone] if zone is not None else possible_zones:
                inverse.counts[possible] = inverse.counts.get(possible, 0) + n

    def repelled_zones(self, cls: PodClass) -> frozenset[str]:
        """Zones the required anti-affinity of running or planned pods closes to this class."""
        return frozenset(
            zone
            for inverse in self.inverse.values()
            if inverse.repels(cls)
            for zone, n in inverse.counts.items()
            if n > 0
        )

    # --- splitting a class over zones and capacity types ------------------------------------------

    def slices(
        self,
        cls: PodClass,
        level: Level,
        count: int,
        zones: list[str],
        capacity_types: list[str],
        *,
        spread_zones: Sequence[str],
        pin_planned: PinPlanned,
    ) -> tuple[list[Slice], str | None]:
        """Split count pods into (zone, capacity type, n) slices that honour the zone and capacity-type
        spreads and zone (anti-)affinity; the reason says why fewer than count were sliced."""
        zone_terms = [t for t in level.terms if t.topology_key == wk.ZONE]
        zone_spreads = [s for s in level.spreads if s.topology_key == wk.ZONE]
        choice = self._zone_terms(cls, zone_terms, zones, pin_planned)
        if not choice.zones:
            return [], choice.reason
        reason = choice.reason
        zone_plan: dict[str | None, int] = {None: count}
        if zone_spreads or zone_terms:
            placed, reason = self._water_fill(
                cls, count, choice, zone_spreads, spread_zones=spread_zones, reason=reason
            )
            zone_plan = {z: n for z, n in placed.items() if n}
        return self._split_capacity_types(cls, level, zone_plan, capacity_types), reason

    def _zone_terms(
        self, cls: PodClass, terms: list[PodAffinityTerm], zones: list[str], pin_planned: PinPlanned
    ) -> _ZoneChoice:
        """Narrow the zones by each required/preferred zone (anti-)affinity term in force."""
        choice = _ZoneChoice(list(zones))
        for term in terms:
            group = self.of_term(cls, term)
            selects_itself = self.matches(group, cls)
            occupied = group.occupied(choice.zones)
            if term.anti:
                choice.zones = [z for z in choice.zones if z not in occupied]
                if selects_itself:
                    choice.caps = dict.fromkeys(choice.zones, 1)
                if not choice.zones:
                    choice.reason = f"pod anti-affinity on {wk.ZONE}: every zone already has a matching pod"
            elif occupied:
                choice.zones = [max(occupied, key=lambda z: (group.counts[z], z))]
            elif selects_itself and choice.zones:
                choice.zones = [choice.zones[0]]
            elif (pinned := pin_planned(group, choice.zones)) is not None:
                choice.zones = [pinned]
            else:
                choice.zones = []
                choice.reason = f"pod affinity on {wk.ZONE}: no matching pod is running or planned"
        return choice

    def _water_fill(
        self,
        cls: PodClass,
        count: int,
        choice: _ZoneChoice,
        spreads: list[TopologySpread],
        *,
        spread_zones: Sequence[str],
        reason: str | None,
    ) -> tuple[dict[str, int], str | None]:
        """Deal pods one by one to the allowed zone with the fewest selected pods, within the caps and,
        for every DoNotSchedule spread, within maxSkew of the least loaded spread domain."""
        zones = choice.zones
        placed = dict.fromkeys(zones, 0)
        groups = [self.of_spread(cls, s) for s in spreads]
        hard = [
            (spread, group, self.matches(group, cls))
            for spread, group in zip(spreads, groups, strict=True)
            if spread.when_unsatisfiable == DO_NOT_SCHEDULE
        ]
        for _ in range(count):
            minimums = [self._domain_minimum(s, g, own, placed, spread_zones) for s, g, own in hard]
            best: tuple[int, str] | None = None
            for z in zones:
                if z in choice.caps and choice.caps[z] <= placed[z]:
                    continue
                if any(
                    g.counts.get(z, 0) + (placed[z] + 1 if own else 0) - minimum > s.max_skew
                    for (s, g, own), minimum in zip(hard, minimums, strict=True)
                ):
                    continue
                load = sum(g.counts.get(z, 0) for g in groups) + placed[z]
                if best is None or load < best[0]:
                    best = (load, z)
            if best is None:
                reason = reason or self._fill_reason([s for s, _, _ in hard], spread_zones)
                break
            placed[best[1]] += 1
        return placed, reason

    @staticmethod
    def _domain_minimum(
        spread: TopologySpread,
        group: TopologyGroup,
        own: bool,
        placed: dict[str, int],
        domains: Sequence[str],
    ) -> int:
        """The fewest selected pods in any spread domain (0 when fewer domains than minDomains)."""
        if not domains or (spread.min_domains and len(domains) < spread.min_domains):
            return 0
        return min(group.counts.get(d, 0) + (placed.get(d, 0) if own else 0) for d in domains)

    @staticmethod
    def _fill_reason(hard: list[TopologySpread], domains: Sequence[str]) -> str:
        short = [s.min_domains for s in hard if s.min_domains and len(domains) < s.min_domains]
        if short:
            return (
                f"topology spread on {wk.ZONE}: {len(domains)} zone(s) available, "
                f"minDomains {max(short)} needs more"
            )
        if hard:
            return (
                f"topology spread on {wk.ZONE}: maxSkew {min(s.max_skew for s in hard)} reached in every "
                f"zone the pod may use ({len(domains)} zone(s) count as domains)"
            )
        return f"pod anti-affinity on {wk.ZONE}: no zone left without a matching pod"

    def _split_capacity_types(
        self, cls: PodClass, level: Level, zone_plan: dict[str | None, int], capacity_types: list[str]
    ) -> list[Slice]:
        """Split each zone's pods over capacity types when a capacity-type spread asks for it."""
        spreads = [s for s in level.spreads if s.topology_key == wk.CAPACITY_TYPE]
        groups = [self.of_spread(cls, s) for s in spreads]
        dealt = dict.fromkeys(capacity_types, 0)
        slices: list[Slice] = []
        for zone, n in sorted(zone_plan.items(), key=lambda item: item[0] or ""):
            if not spreads or not capacity_types:
                slices.append((zone, None, n))
                continue
            split = dict.fromkeys(capacity_types, 0)
            for _ in range(n):
                chosen = min(
                    capacity_types, key=lambda c: (sum(g.counts.get(c, 0) for g in groups) + dealt[c], c)
                )
                dealt[chosen] += 1
                split[chosen] += 1
            slices.extend((zone, c, k) for c, k in sorted(split.items()) if k)
        return slices
