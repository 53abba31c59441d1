"""``plan(snapshot) -> Plan``: where pending pods go, and what to launch for the rest.

The pass, as Karpenter's scheduler splits it (all deterministic: every order is total):

1. ``podclass``: pending pods grouped into equivalence classes (same spec, same volume topology),
   biggest first, pods with affinity to other pods last (their targets are placed first).
2. ``preferences``: each class is tried at *levels* from strict to relaxed, one relaxation step
   apart (required node-affinity terms in turn, preferred pod affinity, preferred anti-affinity,
   preferred node affinity, ScheduleAnyway spreads, PreferNoSchedule taints).
3. ``topology``: at a level, zone and capacity-type topology (spreads, zone (anti-)affinity)
   splits the class into pinned slices over the domains the NodePools and nodes offer.
4. ``existing``: each slice goes to registered and in-flight nodes first.
5. ``claims``: the rest is demand on the first NodePool (by weight) that can host it, bin-packed
   per NodePool by ``packing.Packer`` and cut into NodeClaims charged against the limits; what the
   limits refuse moves to the next NodePool, or is reported with a reason.
6. ``reservations``: the capacity reservations the new NodeClaims may launch into are shared among
   them (each reservation's free slots), the rest falling back to on-demand or spot.

Known limits: required hostname affinity is met on existing/in-flight nodes, or by co-locating a
self-affine class on one new node, or by riding on the claims of the planned pods it selects;
zone affinity to planned pods pins those pods' claims to the chosen zone.
"""

from __future__ import annotations

from dataclasses import replace

from nodewright.api import labels as wk
from nodewright.scheduling import reservations
from nodewright.scheduling.claims import ClaimPacker, Demand, Follower
from nodewright.scheduling.existing import ExistingNodes
from nodewright.scheduling.model import Snapshot
from nodewright.scheduling.nodepools import NodePools, PoolOption
from nodewright.scheduling.podclass import PodClass, pod_classes
from nodewright.scheduling.preferences import Level, levels
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.results import Plan
from nodewright.scheduling.topology import Topology, TopologyGroup


def _single_value(requirement: Requirement | None) -> bool:
    return requirement is not None and not requirement.complement and len(requirement.values) == 1


def _decided_zone(options: list[PoolOption]) -> str | None:
    """The one zone every option pins (a nodeSelector, a volume...), else None."""
    zones: set[str] = set()
    for _, requirements in options:
        zone = requirements.get(wk.ZONE)
        if zone is None or not _single_value(zone):
            return None
        zones |= zone.values
    return next(iter(zones)) if len(zones) == 1 else None


class Scheduler:
    """One planning pass over a snapshot; ``run()`` is the entry point."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.plan = Plan()
        self.pools = NodePools(snapshot)
        self.topology = Topology(snapshot.nodes)
        self.existing = ExistingNodes(snapshot.nodes, snapshot.daemonsets, self.topology)
        self.claims = ClaimPacker(
            self.pools, self.topology, self.plan, relax_min_values=snapshot.relax_min_values
        )
        self.demands: list[Demand] = []
        self.followers: list[Follower] = []
        self._domains: dict[tuple[tuple[PoolOption, ...], str, Requirements], list[str]] = {}

    def run(self) -> Plan:
        classes = pod_classes(self.snapshot, self.plan.unschedulable)
        self.plan.classes = len(classes)
        self.topology.register(classes)
        for cls in classes:
            self._place_class(cls)
        self.claims.pack(self.demands)
        self.claims.attach_followers(self.followers, classes)
        reservations.allocate(self.plan)  # capacity reservations shared among the new NodeClaims
        for cls in classes:
            for pod in cls.left:
                self.plan.unschedulable[pod.key] = cls.reason or "not placed"
        return self.plan

    # --- one class ---------------------------------------------------------------------------------

    def _place_class(self, cls: PodClass) -> None:
        """Place the class level by level until every pod is placed or planned; else record why not."""
        remaining = len(cls.pods)
        reason = None
        for tried in levels(cls.spec, cls.volume):
            level, repelled = self._repelled(cls, tried)
            options, pool_reasons = self.pools.options(cls, level)
            slices, topology_reason = self.topology.slices(
                cls,
                level,
                remaining,
                self.domains(level, options, wk.ZONE),
                self.domains(level, options, wk.CAPACITY_TYPE),
                spread_zones=self.spread_zones(cls, level),
                pin_planned=self._pin_planned,
            )
            if repelled and not slices:
                topology_reason = repelled
            elif not slices and topology_reason is None and options:
                topology_reason = (
                    "no zone where the NodePools offer capacity satisfies the pod's zone requirement"
                )
            planned = 0
            for zone, capacity_type, n in slices:
                placed = self.existing.place(
                    cls, level, zone, capacity_type, count=n, placements=self.plan.placements
                )
                left = n - placed
                planned += placed
                if left:
                    taken, blocker = self._demand(cls, level, options, zone, capacity_type, count=left)
                    planned += taken
                    topology_reason = blocker or topology_reason
            remaining -= planned
            if remaining <= 0:
                return
            reason = "; ".join(filter(None, [topology_reason, *pool_reasons])) or "no NodePool can host it"
            if repelled and not slices:  # the NodePools' refusals only echo the closed zones
                reason = repelled
            if not options and not pool_reasons:
                reason = "no NodePool exists"
        # Pods neither placed nor demanded stay at the end of the class's list and are reported.
        cls.reason = reason

    def _demand(
        self,
        cls: PodClass,
        level: Level,
        options: list[PoolOption],
        zone: str | None,
        capacity_type: str | None,
        *,
        count: int,
    ) -> tuple[int, str | None]:
        """Ask for new capacity for count pods of a slice; returns (pods planned, reason if none)."""
        blocker, follow = self._hostname_affinity(cls, level)
        if follow is not None:
            self.followers.append(Follower(cls, count, level, follow))
            return count, None
        pins = Requirements(
            [
                *([Requirement(wk.ZONE, False, frozenset({zone}))] if zone else []),
                *(
                    [Requirement(wk.CAPACITY_TYPE, False, frozenset({capacity_type}))]
                    if capacity_type
                    else []
                ),
            ]
        )
        pinned = [
            (i, r.intersect(pins) if pins else r)
            for i, r in options
            if not pins or self.pools.types(i, r.intersect(pins))
        ]
        if blocker or not pinned:
            return 0, blocker
        self.demands.append(Demand(cls, count, level, pinned, colocate=self.existing.colocate(cls, level)))
        decided = zone or _decided_zone(pinned)
        possible = () if decided else self.domains(level, pinned, wk.ZONE)
        self.topology.record(cls, decided, capacity_type, None, count, possible_zones=possible)
        return count, None

    def _repelled(self, cls: PodClass, level: Level) -> tuple[Level, str | None]:
        """The level with the zones running or planned pods' anti-affinity closes to the class taken out,
        and the reason to give if that leaves no zone."""
        repelled = self.topology.repelled_zones(cls)
        if not repelled:
            return level, None
        # An explicit In list (not NotIn), so a claim left with one zone is pinned to it.
        open_zones = frozenset(self.spread_zones(cls, level)) - repelled
        requirement = Requirement(wk.ZONE, False, open_zones)
        narrowed = replace(level, requirements=level.requirements.with_requirement(requirement))
        return narrowed, (
            f"pod anti-affinity on {wk.ZONE} of running or planned pods: "
            f"{', '.join(sorted(repelled))} closed to this pod"
        )

    def spread_zones(self, cls: PodClass, level: Level) -> list[str]:
        """Topology-spread domains on the zone: offered by a NodePool the class tolerates (limits and
        sizes aside) or held by a node, under the class's required node affinity only."""
        zones = set(self.pools.offered_zones(cls.spec.tolerations, level.required))
        zones |= self.existing.domains(level.required, wk.ZONE)
        requirement = level.required.get(wk.ZONE)
        return sorted(z for z in zones if requirement is None or requirement.has(z))

    # --- domains and planned pods --------------------------------------------------------------------

    def domains(self, level: Level, options: list[PoolOption], key: str) -> list[str]:
        """Domains (zones or capacity types) where the class could run: NodePool offerings and nodes."""
        cache_key = (tuple(options), key, level.requirements)
        cached = self._domains.get(cache_key)
        if cached is not None:
            return cached
        found: set[str] = set()
        for pool_index, requirements in options:
            for instance_type, price in self.pools.types(pool_index, requirements):
                for offering in self.pools.candidate(instance_type, price, requirements).offerings:
                    found.add(offering.zone if key == wk.ZONE else offering.capacity_type)
        found |= self.existing.domains(level.requirements, key)
        requirement = level.requirements.get(key)
        domains = sorted(d for d in found if requirement is None or requirement.has(d))
        self._domains[cache_key] = domains
        return domains

    def _pin_planned(self, group: TopologyGroup, zones: list[str]) -> str | None:
        """Zone affinity to pods that are only planned, on new nodes in no particular zone yet:
        pin those planned pods to one zone all of them can use, so the affinity can follow them."""
        targets = [
            d
            for d in self.demands
            if self.topology.matches(group, d.cls) and not _single_value(d.requirements.get(wk.ZONE))
        ]
        if not targets:
            return None
        for zone in zones:
            pin = Requirements([Requirement(wk.ZONE, False, frozenset({zone}))])
            if all(any(self.pools.types(i, r.intersect(pin)) for i, r in d.options) for d in targets):
                for demand in targets:
                    demand.options = [
                        (i, r.intersect(pin))
                        for i, r in demand.options
                        if self.pools.types(i, r.intersect(pin))
                    ]
                    demand.option = 0
                    self.topology.record(demand.cls, zone, None, None, demand.count)
                return zone
        return None

    def _hostname_affinity(self, cls: PodClass, level: Level) -> tuple[str | None, TopologyGroup | None]:
        """Required hostname affinity that a plain new node cannot meet.

        Returns (reason, None) when the matching pods run on nodes that have no room (or match
        nothing at all), (None, group) when they are only planned, so this class must ride on
        their new nodes, and (None, None) when new nodes are fine (no such term, or self-affinity).
        """
        for term in level.terms:
            if term.anti or term.topology_key != wk.HOSTNAME:
                continue
            group = self.topology.of_term(cls, term)
            if any(group.counts.values()):
                return f"pod affinity on {wk.HOSTNAME}: the matching pods' nodes have no room", None
            if self.topology.matches(group, cls):
                continue
            if any(self.topology.matches(group, d.cls) for d in self.demands):
                return None, group
            return f"pod affinity on {wk.HOSTNAME}: no running or planned pod matches", None
        return None, None


def plan(snapshot: Snapshot) -> Plan:
    """Plan placements and new NodeClaims for the snapshot's pending pods (pure, deterministic)."""
    return Scheduler(snapshot).run()
