"""What disrupting a node costs, as Karpenter weighs it (``disruption.ReschedulingCost`` times
``LifetimeRemaining``): the one measure consolidation and drift order their candidates by and a static
NodePool's scale-down picks its nodes by."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodewright.api.durations import DurationError, parse_duration
from nodewright.api.models import DEFAULT_EXPIRE_AFTER
from nodewright.cluster import objects
from nodewright.state.pods import priority

if TYPE_CHECKING:
    from nodewright.state.views import ClaimView

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def disruption_cost(pods: Iterable[Mapping[str, Any]], claim: ClaimView, now: datetime) -> float:
    """Karpenter's: Σ over the pods of 1 + deletion cost/2^27 + priority/2^25 (clamped to [-10, 10]),
    times the share of the NodeClaim's lifetime (``expireAfter``) left; an empty node costs 0."""
    return sum(eviction_cost(pod) for pod in pods) * _lifetime_left(claim, now)


def eviction_cost(pod: Mapping[str, Any]) -> float:
    """Karpenter's ``EvictionCost`` of one pod: 1 + deletion cost/2^27 + priority/2^25, clamped to
    [-10, 10] (what both the candidates' order and ``Balanced``'s score weigh a pod by)."""
    cost = 1.0
    raw = objects.annotations_of(pod).get(POD_DELETION_COST)
    with contextlib.suppress(ValueError):
        cost += float(raw) / 2**27 if raw else 0.0
    cost += float(priority(pod) or 0) / 2**25
    return min(10.0, max(-10.0, cost))


def _lifetime_left(claim: ClaimView, now: datetime) -> float:
    try:
        seconds = parse_duration(claim.expire_after or DEFAULT_EXPIRE_AFTER)
    except DurationError:
        seconds = None
    created = claim.created
    if not seconds or created is None:
        return 1.0
    return max(0.0, min(1.0, 1.0 - (now - created).total_seconds() / seconds))
