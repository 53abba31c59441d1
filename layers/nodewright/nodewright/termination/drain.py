"""One drain pass over one node: evict the current tier, delete what the deadline no longer allows.

Which pods a drain waits for, and which it may evict, are ``state.pods`` rules
(``is_waiting_eviction``, ``is_evictable``); the order is Karpenter's terminator's: non-critical
pods, non-critical DaemonSet pods, critical pods (``system-cluster-critical`` /
``system-node-critical``), then critical DaemonSet pods — each tier only once the ones before it
are gone — so cluster services keep running while the workload moves, and the node's log and
metrics agents outlive what they watch. A ``karpenter.sh/do-not-disrupt`` pod is not evicted by a
voluntary termination while its protection lasts, before the deadline; when the node is going away
regardless (an interruption) it is evicted like the rest.

A pass never waits: it reads the node's pods, acts, and reports what is left and when the next
pass is worth making. The caller (``terminate.run``) loops passes within its time budget, so a
pass interrupted by a Lambda timeout is simply made again by the next invocation.

Eviction goes through the Eviction API, so PodDisruptionBudgets are honoured; a 429 leaves the pod
for the next pass. A pod is deleted directly (PDBs ignored) only once ``deadline - its grace
period`` has passed, so its own graceful shutdown can still finish before the instance goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodewright.cluster import EvictionOutcome
from nodewright.state import pods as podrules

if TYPE_CHECKING:
    from nodewright.state.interfaces import Cluster


@dataclass
class DrainPass:
    """What one pass did and what is left."""

    remaining: int = 0  # pods that must still leave (terminating ones included)
    evicted: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    waiting_do_not_disrupt: list[str] = field(default_factory=list)
    retry_after_seconds: float | None = None  # the server's hint for blocked evictions
    next_deletion_in_seconds: float | None = None  # when the deadline forces the next deletion

    @property
    def drained(self) -> bool:
        return self.remaining == 0


def drain_pass(
    cluster: Cluster,
    node_name: str,
    *,
    now: datetime,
    deadline: datetime | None,
    involuntary: bool,
    logger: Any,
) -> DrainPass:
    """Evict or delete what may go now; see the module docstring."""
    result = DrainPass()
    tiers = drain_tiers(cluster.list_pods_on_node(node_name), now)
    result.remaining = sum(len(tier) for tier in tiers)
    if not tiers:
        return result

    # The deadline applies to every tier: a pod whose grace period no longer fits is deleted now.
    forced: set[str] = set()
    for tier in tiers:
        for pod in tier:
            seconds_left = (deadline - now).total_seconds() if deadline else None
            if seconds_left is None:
                continue
            delete_in = seconds_left - podrules.grace_seconds(pod)
            if delete_in > 0:
                if result.next_deletion_in_seconds is None or delete_in < result.next_deletion_in_seconds:
                    result.next_deletion_in_seconds = delete_in
                continue
            if podrules.is_terminating(pod) and seconds_left > 0:
                continue  # already shutting down with time to finish
            forced.add(podrules.key(pod))
            _delete(cluster, pod, max(0, int(seconds_left)), result, logger)

    # Evictions only for the first tier that still has pods: critical pods wait for the rest.
    for pod in tiers[0]:
        ref = podrules.key(pod)
        if ref in forced or not podrules.is_active(pod):
            continue
        if not podrules.is_evictable(pod, now):  # active and waiting eviction: only do-not-disrupt is left
            if not involuntary:
                result.waiting_do_not_disrupt.append(ref)
                continue
            logger.info(
                "evicting a karpenter.sh/do-not-disrupt pod: the node is going away regardless",
                extra={"pod": ref, "node": node_name},
            )
        _evict(cluster, pod, result)
    return result


def drain_tiers(pods: list[dict[str, Any]], now: datetime) -> list[list[dict[str, Any]]]:
    """The pods the node must be rid of (``is_waiting_eviction``), in Karpenter's eviction order:
    non-critical, non-critical DaemonSet, critical, critical DaemonSet. Empty tiers are dropped."""
    waiting = [p for p in pods if podrules.is_waiting_eviction(p, now)]
    tiers = [
        [p for p in waiting if podrules.is_critical(p) is critical and podrules.is_daemon(p) is daemon]
        for critical in (False, True)
        for daemon in (False, True)
    ]
    return [tier for tier in tiers if tier]


def _evict(cluster: Cluster, pod: dict[str, Any], result: DrainPass) -> None:
    ref = podrules.key(pod)
    outcome = cluster.evict(pod)
    if outcome.outcome is EvictionOutcome.EVICTED:
        result.evicted.append(ref)
    elif outcome.outcome is EvictionOutcome.GONE:
        result.remaining -= 1
    elif outcome.outcome is EvictionOutcome.BLOCKED:
        result.blocked.append(ref)
        hint = outcome.retry_after_seconds
        if hint is not None and (result.retry_after_seconds is None or hint < result.retry_after_seconds):
            result.retry_after_seconds = hint
    else:
        result.failed.append(f"{ref}: {outcome.status} {outcome.message}")


def _delete(cluster: Cluster, pod: dict[str, Any], grace: int, result: DrainPass, logger: Any) -> None:
    ref = podrules.key(pod)
    grace = min(grace, podrules.grace_seconds(pod))
    meta = pod["metadata"]
    if cluster.delete_pod(meta["namespace"], meta["name"], grace_period_seconds=grace) is None:
        result.remaining -= 1
        return
    result.deleted.append(ref)
    logger.info("deadline reached: pod deleted without the Eviction API", extra={"pod": ref, "grace": grace})
