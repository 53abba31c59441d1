"""The interruption controller: what one interruption event makes happen in the cluster.

``reconcile(ctx, event, replace=, write_deadline=) -> EventOutcome`` (Karpenter's interruption
controller reconciles one queue message at a time, as this does; ``processing`` is what receives the
messages and makes sure each acts once). For ``replace-and-drain`` events, per instance this cluster
owns (matched by instance id against NodeClaim
``status.instanceID``/``providerID`` and Node ``spec.providerID``, never by DNS name):

1. spot interruption: mark the (type, zone, spot) offering unavailable, so the replacement and
   the next plans avoid it;
2. ask for the node's termination (``termination.request``: involuntary, the event's deadline, and
   whether EC2 takes the instance itself): taint ``karpenter.sh/disrupted:NoSchedule``, cordon,
   mark the NodeClaim (first, so nothing new lands on the node while the replacement is planned);
3. launch replacement capacity for the node's reschedulable pods *before* any eviction, under the
   writers' lease and its write guard (when the provisioner holds it, the displaced pods become
   pending as they are evicted and the running provisioner places them — no double launch);
4. the termination controller's first step (``termination.reconcile``), so every eviction is
   issued within the first second or two.

Its input is the event, not a pass's ``World``: the objects it acts on are read afresh for each
event, since an event acts on the cluster as it is when it arrives, and a redelivery must see what
the first delivery did.
``processing`` then drives the drains (``termination.reconcile`` with the invocation's time); what
is left is resumed by the next invocation of any function. A NodeClaim already being deleted is
resumed, not replaced a second time.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from nodewright import termination
from nodewright.api import labels
from nodewright.checkpoints import checkpoint
from nodewright.cluster import objects
from nodewright.context import is_outage
from nodewright.interruption.events import Action, EventKind, InterruptionEvent
from nodewright.settings import KUBE_CLIENT_BURST, KUBE_CLIENT_QPS
from nodewright.spec import deployment
from nodewright.state.guard import WriteGuard
from nodewright.state.pods import is_provisionable
from nodewright.state.pods import key as pod_key
from nodewright.state.views import ClaimView, NodeView
from nodewright.state.world import INVOLUNTARY_ANNOTATION, nodeclaims_by_instance_id, nodes_by_instance_id

if TYPE_CHECKING:
    from datetime import datetime

    from nodewright.context import Context
    from nodewright.state.interfaces import Lease, Obj


class ReplacementReport(Protocol):
    # The pods its pass planned for (pending, and on the going nodes), by ``state.pods.key``.
    pending_keys: frozenset[str]

    def summary(self) -> dict[str, Any]: ...


class Replacer(Protocol):
    """``provisioning.replace_for_displaced``: capacity for the pods of the nodes about to go."""

    def __call__(
        self, ctx: Context, node_names: list[str], *, guard: WriteGuard | None
    ) -> ReplacementReport: ...


# How long a replacement the drain waits for (``reconcile`` without ``defer``) waits for the lease.
REPLACEMENT_LEASE_WAIT_SECONDS = 2.0
REPLACEMENT_LEASE_SECONDS = 60
# How long the lease's holder keeps making passes for nodes others marked meanwhile (the storm's
# replacement goal: every replacement requested within 30 s of its warning); the provisioner's
# passes wait for it meanwhile.
REPLACEMENT_FOLLOW_UP_SECONDS = 60.0
# A replacement run beside its drain (``processing``) waits for the lease rather than skip, asking
# this often; once it holds it, it follows until no interrupted node was marked for this long.
REPLACEMENT_LEASE_POLL_SECONDS = 2.0
REPLACEMENT_QUIET_SECONDS = 5.0
# On a NodeClaim whose node a warning says EC2 takes (its deadline), written with the cordon ahead
# of the warning's handling (``processing.cordon_first``): the lease's holder plans its pods with
# those of the NodeClaims already marked (``interrupted_nodes``), whichever container handles it.
NOTICE_ANNOTATION = "nodewright.io/interruption-notice"
# The state table's marker of the interrupted nodes a holder of the writers' lease has planned for
# (``PlannedNodes``), kept as long as an interruption function's invocation lasts: its nodes are gone
# by then.
PLANNED_MARKER = "interruption-planned-nodes"
PLANNED_KEEP_SECONDS = deployment.INTERRUPTION_TIMEOUT_SECONDS
PLANNED_EARLIER = "planned by an earlier holder of the writers' lease"


@dataclass
class Target:
    instance_id: str
    nodeclaim: Obj | None
    node: Obj | None

    @property
    def owned(self) -> bool:
        return self.nodeclaim is not None


@dataclass(frozen=True)
class Replacement:
    """What became of the replacement capacity: launched (``report``), skipped (another writer holds
    the lease: the provisioner places the pods as they are evicted) or failed (the drain goes on)."""

    report: ReplacementReport | None = None
    skipped: str = ""
    error: str = ""
    # The passes made after the first, still holding the lease, for the nodes other invocations
    # marked meanwhile (``replace_displaced``), with those nodes.
    then: tuple[tuple[tuple[str, ...], ReplacementReport], ...] = ()
    # Every node the passes planned for (the interrupted nodes they saw, and those asked for).
    covered: frozenset[str] = frozenset()

    def summary(self) -> dict[str, Any]:
        if self.report is not None:
            out = self.report.summary()
            if self.then:
                out["thenFor"] = [{"nodes": list(nodes), **r.summary()} for nodes, r in self.then]
            return out
        return {"skipped": self.skipped} if self.skipped else {"error": self.error}


class Disposition(StrEnum):
    ACTED = "acted"
    RECORDED = "recorded"
    IGNORED = "ignored"
    NOT_OWNED = "not-owned"
    DUPLICATE = "duplicate"
    MALFORMED = "malformed"


@dataclass
class EventOutcome:
    """What handling one event did; ``record`` is what the idempotency record stores of it."""

    event: InterruptionEvent
    not_owned: list[str] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    terminations: list[termination.Termination] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    # Instances whose termination another container drives (``termination.drivers``): left to it.
    driven_elsewhere: list[str] = field(default_factory=list)
    replacement: Replacement | None = None
    marked_unavailable: list[str] = field(default_factory=list)
    # With ``reconcile(defer=True)``: the nodes whose pods the caller's replacement must plan for.
    displaced_nodes: list[str] = field(default_factory=list)

    @property
    def disposition(self) -> Disposition:
        """Recorded as an event, acted on (a termination begun or resumed), or nothing of ours."""
        if self.recorded:
            return Disposition.RECORDED
        if self.terminations or self.resumed or self.driven_elsewhere:
            return Disposition.ACTED
        return Disposition.NOT_OWNED

    def record(self) -> dict[str, Any]:
        return {
            **self.event.summary(),
            "notOwned": self.not_owned,
            "recorded": self.recorded,
            "resumed": self.resumed,
            "drivenElsewhere": self.driven_elsewhere,
            "terminating": [t.summary() for t in self.terminations],
            "replacement": (
                self.replacement.summary()
                if self.replacement is not None
                else {"deferred": self.displaced_nodes}
                if self.displaced_nodes
                else None
            ),
            "markedUnavailable": self.marked_unavailable,
        }


@dataclass
class OwnershipIndex:
    """Instance id → NodeClaim and Node, read in two list calls; shared by the messages of a batch."""

    claims: dict[str, Obj]
    nodes: dict[str, Obj]
    read_at: float

    @classmethod
    def read(cls, ctx: Context) -> OwnershipIndex:
        return cls(
            claims=nodeclaims_by_instance_id(ctx.cluster.list_nodeclaims()),
            nodes=nodes_by_instance_id(ctx.cluster.list_nodes()),
            read_at=ctx.clock.now().timestamp(),  # wall clock: see InterruptionProcessor._owned
        )

    def owns_any(self, instance_ids: tuple[str, ...]) -> bool:
        return any(i in self.claims for i in instance_ids)


def _resume(target: Target, now: datetime) -> termination.Termination:
    """The termination under way of a target's NodeClaim (``termination.resume``)."""
    node = NodeView.of(target.node) if target.node else None
    return termination.resume(ClaimView.of(target.nodeclaim or {}), node, now)


def find_targets(
    ctx: Context, instance_ids: tuple[str, ...], index: OwnershipIndex | None = None
) -> list[Target]:
    """Each instance with its NodeClaim and Node (either may be missing), read fresh.

    Without ``index``, from two list calls now. With one (a list a moment old, shared by the
    messages of an invocation), only which NodeClaim and Node an instance belongs to comes from
    it — a NodeClaim's instance never changes — and the objects themselves are read again by name,
    so what another message or the other path did a moment ago is seen: an AZ-wide reclaim costs
    two reads per instance, not two lists of the whole cluster per message."""
    if index is None:
        index = OwnershipIndex.read(ctx)
        fresh = True
    else:
        fresh = False
    targets = []
    for instance_id in instance_ids:
        claim = index.claims.get(instance_id)
        node = index.nodes.get(instance_id)
        if not fresh and claim is not None:
            claim = ctx.cluster.find_nodeclaim(objects.name_of(claim))
            if claim is not None and objects.nodeclaim_instance_id(claim) != instance_id:
                claim = None  # not the instance's (a namesake created since the list)
            node = ctx.cluster.find_node(objects.name_of(node)) if node is not None else None
        if node is None and claim is not None:
            node_name = ClaimView.of(claim).node_name
            node = ctx.cluster.find_node(node_name) if node_name else None
        targets.append(Target(instance_id, claim, node))
    return targets


def reconcile(
    ctx: Context,
    event: InterruptionEvent,
    *,
    replace: Replacer | None = None,
    write_deadline: float | None = None,
    index: OwnershipIndex | None = None,
    defer: bool = False,
    driver: termination.Driver | None = None,
) -> EventOutcome:
    """Act on one parsed event (see the module docstring); ignored events do nothing here.
    ``write_deadline``: when (``ctx.clock.monotonic()``) the replacement must stop writing (None:
    the replacement lease's length from now). ``index``: see ``find_targets``.

    ``defer``: stop once the nodes are cordoned and marked (steps 1 and 2) and leave 3 and 4 to the
    caller, who gathers the nodes of every message it holds (``outcome.displaced_nodes``, the
    requests in ``outcome.terminations``) into one replacement (``replace_displaced``) and then
    the first termination steps: a batch of ten warnings is one plan and one launch round, not ten
    passes queued on the writers' lease one after another.

    ``driver``: this invocation, as the one driver of the terminations it asks for or resumes
    (``termination.drivers``): a termination another container has claimed is left to it
    (``outcome.driven_elsewhere``), as in an AZ-wide reclaim, where EC2's state-change notice for
    each instance follows the warning another container acts on."""
    outcome = EventOutcome(event)
    if event.action is Action.IGNORE:
        return outcome
    targets = find_targets(ctx, event.instance_ids, index)
    for target in targets:
        if not target.owned:
            outcome.not_owned.append(target.instance_id)
            ctx.logger.info(
                "instance not owned by this cluster (no NodeClaim); acknowledged",
                extra={"instance": target.instance_id, "kind": event.kind.value},
            )
    owned = [t for t in targets if t.owned]
    if event.action is Action.RECORD_ONLY:
        for target in owned:
            involved = target.node or target.nodeclaim or {}
            ctx.cluster.record_event(involved, event.kind.value, event.reason, event_type="Warning")
            outcome.recorded.append(target.instance_id)
        return outcome

    fresh = [t for t in owned if not objects.is_deleting(t.nodeclaim or {})]
    # A termination already under way: resume it (its first step now), don't replace again; unless
    # another container drives it.
    going = [t for t in owned if t not in fresh]
    if driver is not None:
        ours = [t for t in going if termination.drivers.claim(ctx, t.nodeclaim or {}, driver)]
        elsewhere = [t for t in going if t not in ours]
        outcome.driven_elsewhere = [t.instance_id for t in elsewhere]
        if event.kind is EventKind.STATE_CHANGE and elsewhere:
            # EC2 says the instance is stopping or gone: news its driver learns only at its next
            # look at EC2, and only while it still drives (the 100-node storm: these notices came
            # as the warnings' drives ended, and the nodes waited minutes for the provisioner's
            # passes). One step here, not a drive: a gone instance's termination finishes in it.
            now = ctx.clock.now()
            told = [_resume(t, now) for t in elsewhere]
            termination.reconcile(ctx, None, asked=told)
        going = ours
    resumed = [_resume(t, ctx.clock.now()) for t in going]
    outcome.resumed = [t.instance_id for t in going]
    outcome.terminations.extend(termination.reconcile(ctx, None, asked=resumed).terminations)
    if not fresh:
        return outcome

    if event.kind is EventKind.SPOT_INTERRUPTION:
        for target in fresh:
            offering = _offering(target)
            if offering and offering[2] == labels.CAPACITY_TYPE_SPOT:
                ctx.cloud.mark_unavailable(*offering, reason="SpotInterruption")
                outcome.marked_unavailable.append("/".join(offering))
                checkpoint("interruption.offering-marked")

    asked = termination.TerminationRequest(
        reason=f"{event.kind.value}: {event.reason}",
        involuntary=True,
        instance_going=event.instance_going,
        deadline=event.deadline,
        driver=driver,
    )
    terms = [
        termination.request(
            ctx, nodeclaim=target.nodeclaim, node=target.node, instance_id=target.instance_id, asked=asked
        )
        for target in fresh
    ]
    node_names = [objects.name_of(t.node) for t in fresh if t.node]
    if defer:
        outcome.displaced_nodes = node_names
        outcome.terminations.extend(terms)
        return outcome
    if node_names:
        outcome.replacement = replace_displaced(ctx, node_names, event.event_id, replace, write_deadline)
        checkpoint("interruption.replacement-launched")
    outcome.terminations.extend(termination.reconcile(ctx, None, asked=terms).terminations)
    return outcome


def _offering(target: Target) -> tuple[str, str, str] | None:
    """(instance type, zone, capacity type) from the node's labels, else the NodeClaim's."""
    for obj in (target.node, target.nodeclaim):
        found = objects.labels_of(obj or {})
        keys = (labels.INSTANCE_TYPE, labels.ZONE, labels.CAPACITY_TYPE)
        if all(found.get(k) for k in keys):
            return found[keys[0]], found[keys[1]], found[keys[2]]
    return None


def replacer(replace: Replacer | None) -> Replacer:
    """``replace``, or by default the provisioner's ``replace_for_displaced``, imported on first use:
    an invocation that replaces nothing never loads the provisioning package."""
    if replace is not None:
        return replace
    from nodewright.provisioning import replace_for_displaced

    return replace_for_displaced


def replace_displaced(
    ctx: Context,
    node_names: list[str],
    why: str,
    replace: Replacer | None,
    write_deadline: float | None,
    *,
    wait: bool = False,
    more: Callable[[], set[str]] | None = None,
    give_up: Callable[[], bool] | None = None,
) -> Replacement:
    """Replacement capacity for the pods of ``node_names`` under the writers' lease and its write
    guard; never blocks the drain when it cannot run. ``why``: the event id(s), for the log.

    The holder then makes another pass for the nodes marked (or, ``more``, handed to it by its own
    invocation) since its last pass read the cluster, until none came for
    ``REPLACEMENT_QUIET_SECONDS`` (``wait``; without it, until one look finds none), for at most
    ``REPLACEMENT_FOLLOW_UP_SECONDS``: in an AZ-wide reclaim one holder plans the pods of many
    containers' nodes in a few passes, as Karpenter's provisioner batches the pods of every node
    being deleted. Meanwhile it also plans the pods that became pending since its passes (the
    successors of pods evicted from those nodes, which a pass counts neither as displaced, being
    terminating, nor as pending, until the scheduler marks them): the provisioner, which would plan
    them, waits for the lease while the holder follows (in a 100-node storm, for 8 NodeClaims, the
    last replacements 34 s after their warnings). They do not prolong the follow-up.

    ``wait``: run beside the drain (``processing``), so a held lease is waited for, asked again
    every ``REPLACEMENT_LEASE_POLL_SECONDS`` until the write deadline or ``give_up()``; the pass
    then plans whatever the holders before it left: the nodes an earlier holder planned for
    (``PlannedNodes``) are not planned again, and a holder left none returns at once. A waiter
    whose nodes (those ``more`` handed it meanwhile included) a holder has planned for stops
    waiting without taking the lease: in a 100-node storm ninety waiters took it a second each to
    plan nothing, one after another, and the provisioner's pass for the pods evicted meanwhile
    (pending, their successors not yet marked unschedulable at the holder's pass) waited behind
    them until its invocation ended.
    Without it (the drain waits for this) the lease is waited for ``REPLACEMENT_LEASE_WAIT_SECONDS``
    and, held elsewhere, the replacement is skipped: the provisioner's passes plan every going
    node's pods."""
    replace = replacer(replace)
    monotonic = ctx.clock.monotonic
    deadline = write_deadline if write_deadline is not None else monotonic() + REPLACEMENT_LEASE_SECONDS
    lease = ctx.cluster.writer_lease(
        f"interruption-{uuid.uuid4().hex[:12]}",
        duration_seconds=REPLACEMENT_LEASE_SECONDS,
        wait_seconds=0.0 if wait else REPLACEMENT_LEASE_WAIT_SECONDS,
    )
    mine = set(node_names)
    planned_elsewhere = False

    def stop_waiting() -> bool:
        nonlocal planned_elsewhere
        if monotonic() >= deadline or (give_up is not None and give_up()):
            return True
        if more is not None:
            mine.update(more())
        planned_elsewhere = mine <= PlannedNodes.read(ctx).nodes
        return planned_elsewhere

    if not _acquire(lease, wait=wait, until=stop_waiting):
        if planned_elsewhere:
            ctx.logger.info(
                "an earlier holder of the writers' lease planned for these nodes' pods",
                extra={"nodes": sorted(mine), "eventId": why},
            )
            return Replacement(skipped=PLANNED_EARLIER, covered=frozenset(mine))
        ctx.logger.info(
            "another writer holds the lease: its passes plan for these nodes' pods",
            extra={"nodes": node_names, "eventId": why},
        )
        return Replacement(skipped="writers' lease held by another invocation")
    guard = WriteGuard(lease, deadline=deadline, lease_seconds=REPLACEMENT_LEASE_SECONDS, monotonic=monotonic)
    quiet = REPLACEMENT_QUIET_SECONDS if wait else 0.0
    rate = _holder_rate(ctx)
    try:
        seen = interrupted_nodes(ctx) | mine
        planned = PlannedNodes.read(ctx)
        todo = sorted(seen - planned.nodes)
        if not todo:
            # An earlier holder planned them all (a container that waited for the lease behind it):
            # a pass would plan nothing, and its follow-up keep the others waiting on the lease.
            ctx.logger.info(
                "an earlier holder of the writers' lease planned for these nodes' pods",
                extra={"nodes": node_names, "eventId": why},
            )
            return Replacement(skipped=PLANNED_EARLIER, covered=frozenset(seen))
        # Every interrupted node at once, those other containers were given included: one pass.
        report = replace(ctx, todo, guard=guard)
        planned.add(ctx, todo)
        pods_planned = set(report.pending_keys)
        then: list[tuple[tuple[str, ...], ReplacementReport]] = []
        # Bounded: the provisioner's passes wait for the lease meanwhile (and, without ``wait``,
        # this invocation's own drains); what is marked later, they plan. On the context's clock,
        # as the guard is.
        follow_until = monotonic() + REPLACEMENT_FOLLOW_UP_SECONDS
        last_new = monotonic()
        while guard.why_stop() is None and monotonic() < follow_until:
            try:
                now_going = interrupted_nodes(ctx) | (more() if more is not None else set())
                newly_pending = _pending_pods(ctx) - pods_planned
            except Exception as exc:  # a look the API server did not answer: its passes stand
                if not is_outage(exc):
                    raise
                ctx.logger.warning("replacement follow-up stopped by an outage", extra={"error": str(exc)})
                break
            marked_since = tuple(sorted(now_going - seen))
            if not marked_since and not newly_pending:
                if monotonic() - last_new >= quiet:
                    break
                ctx.clock.sleep(min(REPLACEMENT_LEASE_POLL_SECONDS, quiet))
                continue
            # Nodes marked since: a pass for them. Only pods: a pass for every node so far, so that
            # what the earlier passes planned is planned again alike (the forced pods included).
            passed = replace(ctx, list(marked_since or sorted(seen)), guard=guard)
            pods_planned |= passed.pending_keys | newly_pending
            then.append((marked_since, passed))
            if marked_since:
                seen |= now_going
                planned.add(ctx, marked_since)
                last_new = monotonic()
    except Exception as exc:  # the drain must go on: evicted pods go pending and get capacity anyway
        if is_outage(exc):  # the handler reports the outage once; no traceback for it here
            ctx.logger.warning(
                "replacement launch stopped by an outage; draining anyway",
                extra={"nodes": node_names, "error": str(exc)},
            )
        else:
            ctx.logger.exception("replacement launch failed; draining anyway", extra={"nodes": node_names})
        return Replacement(error=f"{type(exc).__name__}: {exc}")
    finally:
        lease.release()
        rate()
    return Replacement(report=report, then=tuple(then), covered=frozenset(seen))


@dataclass
class PlannedNodes:
    """The interrupted nodes whose pods a holder of the writers' lease has planned for, with when,
    kept in the state table (one marker, ``PLANNED_MARKER``; rewritten only by the lease's holder):
    in a storm every container's replacement waits for the lease in turn, and one that got it after
    the holder that planned its nodes made a pass that planned nothing, then a follow-up that kept
    the others (and the provisioner) waiting. Kept for ``PLANNED_KEEP_SECONDS``, past its nodes'
    end. Without a store (the CLI, tests), or when the table does not answer, nothing is known to
    be planned and every holder plans, as a pass that finds capacity in flight creates none."""

    at: dict[str, float] = field(default_factory=dict)

    @property
    def nodes(self) -> set[str]:
        return set(self.at)

    @classmethod
    def read(cls, ctx: Context) -> PlannedNodes:
        if ctx.store is None:
            return cls()
        now = ctx.clock.now().timestamp()
        try:
            raw = json.loads(ctx.store.get_marker(PLANNED_MARKER) or "{}")
        except Exception as exc:  # a table that does not answer: plan as if nothing were planned
            ctx.logger.warning("planned nodes not read; planning for every node", extra={"error": str(exc)})
            return cls()
        if not isinstance(raw, dict):
            return cls()
        return cls(
            {
                str(node): float(at)
                for node, at in raw.items()
                if isinstance(at, int | float) and now - float(at) < PLANNED_KEEP_SECONDS
            }
        )

    def add(self, ctx: Context, nodes: Iterable[str]) -> None:
        """Say ``nodes`` are planned for (after their pass); a write that fails only loses that."""
        if ctx.store is None:
            return
        now = ctx.clock.now().timestamp()
        self.at.update(dict.fromkeys(nodes, now))
        try:
            ctx.store.put_marker(PLANNED_MARKER, json.dumps(self.at), ttl=PLANNED_KEEP_SECONDS)
        except Exception as exc:
            ctx.logger.warning("planned nodes not noted", extra={"error": str(exc)})


def _holder_rate(ctx: Context) -> Callable[[], None]:
    """Raise this container's request rate limit to the provisioner's while it holds the writers'
    lease (``spec.deployment``, after ``INTERRUPTION_KUBE_CLIENT_QPS``); returns what sets it back.
    Only raised, never lowered (a container already at that rate keeps it)."""
    limiter = ctx.cluster.limiter
    if limiter is None or (limiter.qps >= KUBE_CLIENT_QPS and limiter.burst >= KUBE_CLIENT_BURST):
        return lambda: None
    previous = limiter.set_rate(max(limiter.qps, KUBE_CLIENT_QPS), max(limiter.burst, KUBE_CLIENT_BURST))

    def set_back() -> None:
        limiter.set_rate(*previous)

    return set_back


def _acquire(lease: Lease, *, wait: bool, until: Callable[[], bool]) -> bool:
    """Take the lease (its own ``wait_seconds``), or with ``wait`` keep asking until ``until()``.

    Waited for in real time, as the lease's own wait is: it is other invocations' work that frees
    it."""
    while True:
        try:
            if lease.acquire():
                return True
        except Exception as exc:  # with ``wait``, a look the API server did not answer is asked again
            if not wait or not is_outage(exc):
                raise
        if not wait or until():
            return False
        time.sleep(REPLACEMENT_LEASE_POLL_SECONDS)


def _pending_pods(ctx: Context) -> set[str]:
    """The pending pods that need capacity (``state.pods.is_provisionable``), by key."""
    return {pod_key(p) for p in ctx.cluster.list_pending_pods() if is_provisionable(p)}


def interrupted_nodes(ctx: Context) -> set[str]:
    """The nodes an interruption takes: those whose NodeClaim an involuntary termination (an
    interruption's) is deleting, and those whose warning a container has taken but not yet acted
    on (``NOTICE_ANNOTATION``, until its deadline). One list of NodeClaims."""
    now = ctx.clock.now()
    found = set()
    for claim in map(ClaimView.of, ctx.cluster.list_nodeclaims()):
        node = claim.node_name
        if not node:
            continue
        annotations = claim.annotations
        involuntary = claim.deleting and annotations.get(INVOLUNTARY_ANNOTATION) == "true"
        notice = objects.parse_time(annotations.get(NOTICE_ANNOTATION))
        if involuntary or (notice is not None and now < notice):
            found.add(node)
    return found
