"""Existing capacity: registered nodes and in-flight NodeClaims, filled before anything new is bought.

Each node is tracked with what it keeps free, its host ports and the required hostname
anti-affinity of the pods on it; ``ExistingNodes.place`` puts as many pods of a class on them as
resources, taints, node requirements and hostname topology allow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodewright.api import labels as wk
from nodewright.scheduling.model import (
    DaemonSetInput,
    HostPort,
    Node,
    PodAffinityTerm,
    PodSpec,
    Taint,
    required_anti_terms,
    untolerated,
)
from nodewright.scheduling.podclass import PodClass
from nodewright.scheduling.preferences import Level
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.resources import fits
from nodewright.scheduling.topology import Topology, node_domain


@dataclass(slots=True)
class ExistingNode:
    """A node as one plan fills it. ``free``, ``ports`` and ``anti_terms`` start as its ``Node``'s
    own (``Node.bound``, shared by every plan of a pass, never changed) and each ``add`` replaces them
    with changed copies: most nodes of most plans take no pod, so building a plan's thousands of
    entries copies nothing."""

    node: Node
    free: Mapping[str, int]
    zone: str | None
    capacity_type: str | None
    hostname: str
    ports: Sequence[HostPort] = ()
    anti_terms: Sequence[tuple[str, PodAffinityTerm]] = ()  # (namespace, term) of its pods

    def domain(self, key: str) -> str | None:
        return self.zone if key == wk.ZONE else self.capacity_type if key == wk.CAPACITY_TYPE else None

    def add(self, spec: PodSpec, requests: Mapping[str, int], n: int) -> None:
        """Account for n pods of this spec landing here, in copies (never the ``Node``'s own)."""
        self.free = free = dict(self.free)
        for name, value in requests.items():
            free[name] = free.get(name, 0) - value * n
        self.ports = [*self.ports, *spec.host_ports]
        self.anti_terms = [
            *self.anti_terms,
            *((spec.namespace, t) for t in required_anti_terms(spec.affinity, wk.HOSTNAME)),
        ]


def daemonset_lands_on(spec: PodSpec, labels: Mapping[str, str], taints: Sequence[Taint]) -> bool:
    """Whether a DaemonSet's pod would run on a node with these labels and taints."""
    if untolerated(taints, spec.tolerations) is not None:
        return False
    if any(labels.get(k) != v for k, v in spec.node_selector):
        return False
    return not spec.required_terms or any(t.matches_labels(labels) for t in spec.required_terms)


def existing_node(node: Node, daemonsets: Sequence[DaemonSetInput]) -> ExistingNode:
    """A node with its free resources: allocatable less its pods (and, in flight, its DaemonSets)."""
    bound = node.bound  # what its pods hold and leave free, summed once per Node
    free = bound.free
    if node.in_flight:  # its DaemonSet pods are not bound yet
        landing = [d for d in daemonsets if daemonset_lands_on(d.spec, node.labels, node.taints)]
        if landing:
            free = dict(free)
            for daemonset in landing:
                for name, value in daemonset.spec.requests:
                    free[name] = free.get(name, 0) - value
    return ExistingNode(
        node,
        free,
        node.labels.get(wk.ZONE),
        node.labels.get(wk.CAPACITY_TYPE),
        node_domain(node, wk.HOSTNAME) or node.name,
        bound.host_ports,
        bound.hostname_anti,
    )


class ExistingNodes:
    """Registered nodes first, then in-flight ones, each by name."""

    def __init__(
        self, nodes: Sequence[Node], daemonsets: Sequence[DaemonSetInput], topology: Topology
    ) -> None:
        self.entries = [
            existing_node(n, daemonsets) for n in sorted(nodes, key=lambda n: (n.in_flight, n.name))
        ]
        self.topology = topology

    def domains(self, requirements: Requirements, key: str) -> set[str]:
        """Zones (or capacity types) of the nodes whose labels meet the requirements."""
        found: set[str] = set()
        for entry in self.entries:
            value = entry.domain(key)
            if value and value not in found and requirements.matches_labels(entry.node.labels):
                found.add(value)
        return found

    def place(
        self,
        cls: PodClass,
        level: Level,
        zone: str | None,
        capacity_type: str | None,
        *,
        count: int,
        placements: dict[str, str],
    ) -> int:
        """Put up to count pods of the class on existing nodes of the slice; returns how many."""
        placed = 0
        colocate = self.colocate(cls, level)
        for entry in self.entries:
            if placed >= count:
                break
            if not self._admits(entry, cls, level, zone, capacity_type):
                continue
            n = self._allowance(cls, level, entry, count - placed)
            if n <= 0 or (colocate and n < count):
                continue
            entry.add(cls.spec, cls.requests, n)
            for pod in cls.take(n):
                placements[pod.key] = entry.node.name
            self.topology.record(cls, entry.zone, entry.capacity_type, entry.hostname, n)
            placed += n
            if colocate:
                break
        return placed

    def colocate(self, cls: PodClass, level: Level) -> bool:
        """Required hostname self-affinity with no matching pod yet: all pods on one node."""
        for term in level.terms:
            if not term.anti and term.topology_key == wk.HOSTNAME:
                group = self.topology.of_term(cls, term)
                if self.topology.matches(group, cls) and not any(group.counts.values()):
                    return True
        return False

    @staticmethod
    def _admits(
        entry: ExistingNode, cls: PodClass, level: Level, zone: str | None, capacity_type: str | None
    ) -> bool:
        """The node is in the slice, schedulable, tolerated, labelled as required, and has room for one."""
        node = entry.node
        if (
            node.unschedulable
            or (zone and entry.zone != zone)
            or (capacity_type and entry.capacity_type != capacity_type)
        ):
            return False
        if not fits(cls.requests, entry.free):
            return False
        if untolerated(node.taints, cls.spec.tolerations, prefer=not level.tolerate_prefer_no_schedule):
            return False
        return level.requirements.matches_labels(node.labels)

    def _allowance(self, cls: PodClass, level: Level, entry: ExistingNode, wanted: int) -> int:
        """How many pods of the class this node takes under resources, host ports and hostname topology."""
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
            group = self.topology.of_term(cls, term)
            here = group.counts.get(entry.hostname, 0)
            if term.anti:
                if here:
                    return 0
                if self.topology.matches(group, cls):
                    allowed = min(allowed, 1)
            elif not here and (any(group.counts.values()) or not self.topology.matches(group, cls)):
                return 0
        for spread in level.spreads:
            if spread.topology_key == wk.HOSTNAME:
                group = self.topology.of_spread(cls, spread)
                allowed = min(allowed, spread.max_skew - group.counts.get(entry.hostname, 0))
        return max(allowed, 0)
