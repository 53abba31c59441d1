"""Preferences and their relaxation, as Karpenter's ``Preferences.Relax`` orders it.

A pod class is first tried with every preference treated as required; when that places nothing
more, one preference is dropped and the class is tried again. ``RELAXATIONS`` is that order, one
small step each; the first step that still has something to drop is applied:

1. the next required node-affinity term (terms are ORed: try them one after another);
2. the heaviest preferred pod affinity term;
3. the heaviest preferred pod anti-affinity term;
4. the heaviest preferred node-affinity term;
5. every ``ScheduleAnyway`` topology spread;
6. tolerate ``PreferNoSchedule`` taints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nodewright.scheduling.model import DO_NOT_SCHEDULE, PodAffinityTerm, PodSpec, TopologySpread
from nodewright.scheduling.requirements import Requirements


@dataclass(frozen=True, slots=True)
class Level:
    """One attempt at placing a class: what it requires at this stage of relaxation.

    ``requirements`` holds the node requirements tried (required terms, volume topology and the
    preferred node affinity still in force); ``required`` the same without any preference, which
    is what topology domains are counted over (a preference may pick a domain, never remove one).
    """

    requirements: Requirements
    required: Requirements
    terms: tuple[PodAffinityTerm, ...]
    spreads: tuple[TopologySpread, ...]
    tolerate_prefer_no_schedule: bool


@dataclass(slots=True)
class _Preferences:
    """What is still in force for a class; the relaxation steps drop from it."""

    base: Requirements
    required_terms: list[Requirements]
    term: int
    preferred_node: list[Requirements]
    required_pod_terms: list[PodAffinityTerm]
    preferred_affinity: list[PodAffinityTerm]
    preferred_anti: list[PodAffinityTerm]
    hard_spreads: list[TopologySpread]
    soft_spreads: list[TopologySpread]
    tolerate: bool = False

    @classmethod
    def of(cls, spec: PodSpec, volume: Requirements) -> _Preferences:
        return cls(
            base=Requirements.from_labels(dict(spec.node_selector)).intersect(volume),
            required_terms=list(spec.required_terms) or [Requirements()],
            term=0,
            preferred_node=[r for _, r in sorted(spec.preferred_terms, key=lambda p: -p[0])],
            required_pod_terms=[t for t in spec.affinity if not t.weight],
            preferred_affinity=sorted(
                (t for t in spec.affinity if t.weight and not t.anti), key=lambda t: -t.weight
            ),
            preferred_anti=sorted((t for t in spec.affinity if t.weight and t.anti), key=lambda t: -t.weight),
            hard_spreads=[s for s in spec.spreads if s.when_unsatisfiable == DO_NOT_SCHEDULE],
            soft_spreads=[s for s in spec.spreads if s.when_unsatisfiable != DO_NOT_SCHEDULE],
        )

    def level(self) -> Level:
        required = self.base.intersect(self.required_terms[self.term])
        preferred = required.intersect(self.preferred_node[0]) if self.preferred_node else required
        return Level(
            preferred,
            required,
            (*self.required_pod_terms, *self.preferred_affinity, *self.preferred_anti),
            (*self.hard_spreads, *self.soft_spreads),
            self.tolerate,
        )


def _next_required_term(prefs: _Preferences) -> bool:
    if prefs.term < len(prefs.required_terms) - 1:
        prefs.term += 1
        return True
    return False


def _drop_preferred_pod_affinity(prefs: _Preferences) -> bool:
    if prefs.preferred_affinity:
        del prefs.preferred_affinity[0]
        return True
    return False


def _drop_preferred_pod_anti_affinity(prefs: _Preferences) -> bool:
    if prefs.preferred_anti:
        del prefs.preferred_anti[0]
        return True
    return False


def _drop_preferred_node_affinity(prefs: _Preferences) -> bool:
    if prefs.preferred_node:
        del prefs.preferred_node[0]
        return True
    return False


def _drop_schedule_anyway_spreads(prefs: _Preferences) -> bool:
    if prefs.soft_spreads:
        prefs.soft_spreads = []
        return True
    return False


def _tolerate_prefer_no_schedule(prefs: _Preferences) -> bool:
    if not prefs.tolerate:
        prefs.tolerate = True
        return True
    return False


RELAXATIONS: tuple[Callable[[_Preferences], bool], ...] = (
    _next_required_term,
    _drop_preferred_pod_affinity,
    _drop_preferred_pod_anti_affinity,
    _drop_preferred_node_affinity,
    _drop_schedule_anyway_spreads,
    _tolerate_prefer_no_schedule,
)


def levels(spec: PodSpec, volume: Requirements) -> list[Level]:
    """Every level a class is tried at, strictest first, one relaxation step apart."""
    prefs = _Preferences.of(spec, volume)
    result = [prefs.level()]
    while any(relax(prefs) for relax in RELAXATIONS):
        result.append(prefs.level())
    return result
