"""Which nodes a disruption pass removes now, and why the others stay (pure: typed views and a time in).

Karpenter v1's rules for the two methods built so far, in the order they run:

* **Expiration** (forceful): a NodeClaim older than its ``spec.expireAfter`` (default 720h; ``Never``
  turns it off) goes whatever the budgets say and whatever ``karpenter.sh/do-not-disrupt`` the
  node carries, as in Karpenter v1. Its pods still leave through the Eviction API: PDBs and
  do-not-disrupt pods hold the drain until the NodeClaim's ``terminationGracePeriod``.
* **Emptiness** (graceful): in a NodePool whose ``consolidationPolicy`` is WhenEmpty,
  WhenEmptyOrUnderutilized or Balanced (an empty node's deletion always passes Balanced's score)
  and whose ``consolidateAfter`` is not Never, an initialized node with no reschedulable pod
  (``state.pods.is_reschedulable``: DaemonSet, mirror, finished and terminating pods do not count;
  a pod that tolerates the disrupted taint does, as in Karpenter), no
  ``karpenter.sh/do-not-disrupt: "true"`` annotation on the node nor an active one on any of its
  pods (a DaemonSet's or mirror pod's counts too, as in Karpenter; a duration holds the node only
  until it elapses, and the pass comes back then), and no pod event for ``consolidateAfter`` —
  and for at least ``NOMINATION_SECONDS`` since it was initialized, so pods the provisioner planned
  onto a new node have time to bind — is removed, as many per NodePool as its budgets allow. A
  replacement of a command in flight is not, while that command's candidates are still there
  (``execute.replacements_in_flight``): their pods move to it as they drain.

**Budgets** (``spec.disruption.budgets``): each one's ``nodes`` (a count, or a percentage of the
NodePool's nodes, rounded up) applies while its schedule window is open (``schedule`` cron in UTC
plus ``duration``; no schedule: always) and to its ``reasons`` (none listed: all). The most
restrictive active budget wins; when none is active, the NodePool is unbounded. Nodes already being
disrupted (NodeClaim deleting) or not ready count against the allowance, as Karpenter counts them.

Drift and consolidation of underutilized nodes are decided in ``drift`` and ``consolidation``;
``budget_room`` gives them (and their reasons ``Drifted``, ``Underutilized``) the same budget arithmetic.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from croniter import croniter

from nodewright.api import labels
from nodewright.api.durations import DurationError, parse_duration
from nodewright.api.models import DEFAULT_EXPIRE_AFTER, Budget, NodePool
from nodewright.cluster import objects
from nodewright.disruption.execute import replacements_in_flight
from nodewright.state.pods import (
    FOREVER,
    do_not_disrupt_until,
    is_disruptable,
    node_name,
    reschedulable_by_node,
)
from nodewright.state.pods import key as pod_key
from nodewright.state.views import ClaimView, NodeView, by_instance_id

EXPIRED = "Expired"
EMPTY = "Empty"
CONSOLIDATING_POLICIES = frozenset({"WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"})
# Karpenter's words for a do-not-disrupt veto (StateNode.ValidateNodeDisruptable and
# ValidatePodsDisruptable), as its DisruptionBlocked events say them; every method says them so.
NODE_DO_NOT_DISRUPT = f'Disruption is blocked through the "{labels.DO_NOT_DISRUPT}" annotation'


def pod_do_not_disrupt(pod: str) -> str:
    return f'Pod has "{labels.DO_NOT_DISRUPT}" annotation (Pod={pod})'


# Karpenter's nomination window: a node just initialized may have been planned for pods still on
# their way (the disruption flow's emptiness and consolidation both wait it out).
NOMINATION_SECONDS = 20.0


@dataclass(frozen=True)
class Candidate:
    """A node to remove: its NodeClaim (and Node, once registered), NodePool and reason."""

    nodeclaim: dict[str, Any]
    node: dict[str, Any] | None
    nodepool: str
    reason: str

    @property
    def name(self) -> str:
        return objects.name_of(self.nodeclaim)


@dataclass(frozen=True)
class Decision:
    """``disrupt`` in order; ``held``: NodeClaim → why it stays for now; ``next_check``: the
    earliest moment a waiting empty node becomes eligible (None when nothing is waiting). Never
    changed once made: the flow keeps what it adds in its own pass report."""

    disrupt: list[Candidate] = field(default_factory=list)
    held: Mapping[str, str] = field(default_factory=dict)
    next_check: datetime | None = None

    @property
    def budget_blocked(self) -> bool:
        return budget_blocked(self.held)


def budget_blocked(held: Mapping[str, str]) -> bool:
    """Whether a budget holds any node back (its why-not says "budget: ...")."""
    return any(reason.startswith("budget") for reason in held.values())


def pods_fingerprint(pods: Iterable[Mapping[str, Any]]) -> str:
    """A short digest of the pods a node would have to move: it changes on every pod event
    that matters to emptiness (a pod bound to the node, or gone from it)."""
    uids = sorted(str((p.get("metadata") or {}).get("uid") or objects.name_of(dict(p))) for p in pods)
    return hashlib.sha256("\n".join(uids).encode()).hexdigest()[:16]


def allowed_disruptions(
    budgets: Iterable[Budget], reason: str, total_nodes: int, now: datetime
) -> int | None:
    """Nodes of a NodePool that may be disrupting at once for ``reason``; None when unbounded."""
    limits = [
        budget.allowed(total_nodes)
        for budget in budgets
        if budget.applies_to(reason) and budget_active(budget, now)
    ]
    return min(limits) if limits else None


def budget_active(budget: Budget, now: datetime) -> bool:
    """No schedule: always. Else from the schedule's latest firing (UTC) for ``duration``."""
    if not budget.schedule:
        return True
    duration = parse_duration(budget.duration or "0s", allow_never=False) or 0.0
    fired: datetime = croniter(budget.schedule, now).get_prev(datetime)
    return now < fired + timedelta(seconds=duration)


def decide(
    *,
    nodeclaims: Sequence[ClaimView],
    nodes: Sequence[NodeView],
    pods: list[dict[str, Any]],
    nodepools: Sequence[NodePool],
    last_pod_event: Mapping[str, datetime],
    now: datetime,
    ignore_waits: bool = False,
) -> Decision:
    """The expired NodeClaims, then the empty nodes each NodePool's budget allows (see the module).

    ``nodepools`` must be valid ones (the caller drops what validation refuses); the NodeClaims,
    Nodes and NodePools are the world's typed ones (``World.claim_views``, ``World.node_views``,
    ``World.nodepool_models``); ``last_pod_event``
    maps a NodeClaim to the last time a pod came to or left its node, as far as anyone observed.
    ``ignore_waits`` (``nodewright plan --consolidate``) takes ``consolidateAfter`` and the
    nomination wait as passed, as ``consolidation.candidates`` does; ``Never`` still holds.
    """
    disrupt: list[Candidate] = []
    held: dict[str, str] = {}
    next_check: datetime | None = None
    # Static NodePools' nodes are never empty-consolidated: their replicas say how many there are.
    pools = {p.name: p for p in nodepools if not p.is_deleting and not p.spec.is_static}
    nodes_by_instance = by_instance_id(nodes)
    movable = reschedulable_by_node(pods)
    on_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        if bound := node_name(pod):
            on_node[bound].append(pod)
    live = [c for c in nodeclaims if not c.deleting]
    replacing = replacements_in_flight(c.raw for c in nodeclaims)

    expired = set()
    for claim in sorted(live, key=lambda c: (c.creation_timestamp, c.name)):
        seconds = _expire_after_seconds(claim)
        created = claim.created
        if seconds is not None and created is not None and now >= created + timedelta(seconds=seconds):
            node = nodes_by_instance.get(claim.instance_id or "")
            disrupt.append(Candidate(claim.raw, node.raw if node else None, claim.nodepool, EXPIRED))
            expired.add(claim.name)

    empty_by_pool: dict[str, list[tuple[datetime, Candidate]]] = defaultdict(list)
    for claim in live:
        name, pool_name = claim.name, claim.nodepool
        pool = pools.get(pool_name)
        node = nodes_by_instance.get(claim.instance_id or "")
        if name in expired or pool is None or node is None or movable.get(node.name):
            continue
        policy = pool.spec.disruption.consolidation_policy
        after = pool.spec.disruption.consolidate_after_seconds
        if policy not in CONSOLIDATING_POLICIES or after is None:
            continue
        initialized = claim.initialized_at
        if initialized is None:  # the provisioner's lifecycle has not seen it ready yet
            held[name] = "empty, but not initialized yet"
            continue
        if name in replacing:
            held[name] = replacement_held(replacing[name])
            continue
        if node.annotations.get(labels.DO_NOT_DISRUPT) == "true":
            held[name] = NODE_DO_NOT_DISRUPT
            continue
        protected = next((p for p in on_node[node.name] if not is_disruptable(p, now)), None)
        if protected is not None:
            held[name] = pod_do_not_disrupt(pod_key(protected))
            until = do_not_disrupt_until(protected)
            if until is not None and until != FOREVER:
                next_check = min(filter(None, (next_check, until)))
            continue
        quiet_since = max(initialized, last_pod_event.get(name, initialized))
        eligible_at = max(
            quiet_since + timedelta(seconds=after), initialized + timedelta(seconds=NOMINATION_SECONDS)
        )
        if now < eligible_at and not ignore_waits:
            held[name] = f"empty; eligible at {eligible_at.isoformat()}"
            next_check = min(filter(None, (next_check, eligible_at)))
            continue
        empty_by_pool[pool_name].append((quiet_since, Candidate(claim.raw, node.raw, pool_name, EMPTY)))

    counts = _pool_counts(nodeclaims, nodes_by_instance, expired)
    for pool_name in sorted(empty_by_pool):
        total, disrupting = counts.get(pool_name, (0, 0))
        allowed = allowed_disruptions(pools[pool_name].spec.disruption.budgets, EMPTY, total, now)
        room = None if allowed is None else max(0, allowed - disrupting)
        for _, candidate in sorted(empty_by_pool[pool_name], key=lambda item: (item[0], item[1].name)):
            if room is not None and room <= 0:
                held[candidate.name] = (
                    f"budget: NodePool {pool_name} allows {allowed} of its {total} node(s) to be "
                    f"disrupting at once for {EMPTY}, and that many already are"
                )
                continue
            disrupt.append(candidate)
            if room is not None:
                room -= 1
    return Decision(disrupt, held, next_check)


def replacement_held(candidates: list[str]) -> str:
    """Why a replacement of a command in flight stays (``execute.replacements_in_flight``)."""
    return f"replacement for {', '.join(candidates)}: their pods move here as they drain"


def budget_room(
    *,
    nodeclaims: Sequence[ClaimView],
    nodes: Sequence[NodeView],
    nodepools: Sequence[NodePool],
    reason: str,
    now: datetime,
) -> dict[str, int | None]:
    """NodePool → how many more of its nodes may start being disrupted for ``reason`` now (None:
    unbounded): the most restrictive active budget for the reason, less the nodes already
    disrupting (deleting, not Ready, or in a command)."""
    counts = _pool_counts(nodeclaims, by_instance_id(nodes), set())
    room: dict[str, int | None] = {}
    for pool in nodepools:
        name = pool.name
        total, disrupting = counts.get(name, (0, 0))
        allowed = allowed_disruptions(pool.spec.disruption.budgets, reason, total, now)
        room[name] = None if allowed is None else max(0, allowed - disrupting)
    return room


def _pool_counts(
    nodeclaims: Sequence[ClaimView],
    nodes_by_instance: Mapping[str, NodeView],
    expired: set[str],
) -> dict[str, tuple[int, int]]:
    """Per NodePool: (nodes, nodes disrupting) — deleting, expiring now, not Ready, or tainted
    ``karpenter.sh/disrupted`` by a command in flight."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for claim in nodeclaims:
        node = nodes_by_instance.get(claim.instance_id or "")
        if node is None:
            continue  # not a node yet: neither counted nor disrupting
        entry = totals[claim.nodepool]
        entry[0] += 1
        if (
            claim.deleting
            or claim.name in expired
            or not node.is_true("Ready")
            or node.has_taint(labels.DISRUPTED_TAINT_KEY)  # in a command already
        ):
            entry[1] += 1
    return {pool: (total, disrupting) for pool, (total, disrupting) in totals.items()}


def _expire_after_seconds(claim: ClaimView) -> float | None:
    raw = claim.expire_after or DEFAULT_EXPIRE_AFTER
    try:
        return parse_duration(raw)
    except DurationError:
        return None  # the API server's schema refuses it; never expire on a value we cannot read
