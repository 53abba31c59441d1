"""What disrupting a node costs, as Karpenter weighs it (``disruption.ReschedulingCost`` times
``LifetimeRemaining``): the one measure consolidation and drift order their candidates by and a static
NodePool's scale-down picks its nodes by."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from nodewright.api.durations import DurationError, parse_duration
from nodewright.api.models import DEFAULT_EXPIRE_AFTER
from nodewright.cluster import objects

POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def disruption_cost(pods: Iterable[Mapping[str, Any]], claim: Mapping[str, Any], now: datetime) -> float:
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
    cost += float((pod.get("spec") or {}).get("priority") or 0) / 2**25
    return min(10.0, max(-10.0, cost))


def _lifetime_left(claim: Mapping[str, Any], now: datetime) -> float:
    raw = (claim.get("spec") or {}).get("expireAfter") or DEFAULT_EXPIRE_AFTER
    try:
        seconds = parse_duration(raw)
    except DurationError:
        seconds = None
    created = objects.parse_time((claim.get("metadata") or {}).get("creationTimestamp"))
    if not seconds or created is None:
        return 1.0
    return max(0.0, min(1.0, 1.0 - (now - created).total_seconds() / seconds))
