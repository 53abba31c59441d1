"""The disruption controller: one invocation of the disruption function (``run``), one pass each
(``reconcile``), top to bottom.

Each pass observes one ``World`` (capacity first, then pods, as the provisioner does) and runs its
controllers over it:

1. record pod events: when the set of pods a node would have to move changes, write the NodeClaim's
   ``status.lastPodEventTime`` (and the set's digest, as an annotation, to notice the next change).
   This is Karpenter's pod-events controller done by polling: a change is seen up to one pass
   late, which only ever delays a disruption, never hastens one;
2. the ``Consolidatable`` condition, drift (``drift.mark``: the ``Drifted`` condition), and
   expiration and emptiness (``decide.decide``, pure);
3. under the writers' lease (so the provisioner never plans onto a node this pass removes), with
   a write guard over the replacements it launches: follow the commands in flight
   (``execute.follow``: drain once the replacements are initialized, or abandon), lift orphaned
   disrupted taints, ask for the termination of expired and empty nodes (each checked again); then,
   when no graceful command is in flight, the first method that finds a command wins: drift (empty
   drifted nodes first, then the oldest), multi-node, then single-node consolidation
   (``consolidation``), a consolidation command acting only once it held for 15 s. The
   consolidation search is skipped while nothing it depends on has changed since a search found
   nothing, for at most five minutes (Karpenter's ``Consolidated()`` state, kept in the state
   table: ``consolidated``);
4. the termination controller (``termination.reconcile``) drives every termination — this pass's
   and any left half-done — for a short slice. It reads the NodeClaims and Nodes afresh (two list
   calls) rather than the pass's ``World``: the pass asked for terminations after it observed, and
   a NodeClaim deleted meanwhile by anyone else starts draining now rather than a pass later.

Every pass says what it did in a typed ``PassReport``; the loop decides from its fields. It loops
(every ``POLL_SECONDS``) only while there is something to follow: a drain still running, a command
waiting, an empty node held back by a budget, or one that becomes eligible before the invocation
ends — a ``karpenter.sh/do-not-disrupt`` duration that elapses then included (``protection_ends``).
Otherwise it returns after one pass: an idle cluster costs one short pass a minute.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from nodewright import checkpoints, termination
from nodewright.api import labels
from nodewright.cluster import objects
from nodewright.cluster.patches import NodeClaimPatches
from nodewright.disruption import consolidated, consolidation, drift, execute
from nodewright.disruption.decide import (
    EMPTY,
    Candidate,
    budget_blocked,
    budget_room,
    decide,
    pods_fingerprint,
)
from nodewright.observability import emit_counts
from nodewright.state import nodepools
from nodewright.state.guard import WriteGuard
from nodewright.state.pods import (
    FOREVER,
    do_not_disrupt_until,
    invalid_do_not_disrupt,
    is_active,
    is_reschedulable,
)
from nodewright.state.pods import key as pod_key
from nodewright.state.world import World, observe

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Lease, Obj
    from nodewright.state.snapshot import Simulation

FINGERPRINT_ANNOTATION = "nodewright.io/pods-fingerprint"
LOOP_BUDGET_SECONDS = 50.0  # the schedule fires every minute
SAFETY_MARGIN_SECONDS = 8.0
# A pass already running may write until this long before the Lambda timeout (time to report).
WRITE_MARGIN_SECONDS = 3.0
POLL_SECONDS = 5.0
DRIVE_SLICE_SECONDS = 15.0  # one pass drives drains this long before it looks again
DRIFT_SECONDS = 20.0  # drift commands are started for this long per pass at most (Karpenter: 1 min)
# A pass writes its NodeClaim marks (pod events, Consolidatable, Drifted) for this long at most, and
# its "why not" events for this long at most: a pass over a cluster none has marked (10,000 writes
# at 5,000 nodes) would otherwise spend minutes at the client's rate limit. What is left is written
# by the next passes (``NodeClaimPatches.send``); an event left unsaid is said by a later search, as
# client-go's event broadcaster drops what it cannot send.
MARK_SECONDS = 6.0
EVENT_SECONDS = 3.0
# PassReport.consolidation
SEARCHED = "searched"
SKIPPED = "skipped: nothing changed since a search that found nothing"
CUT_SHORT = "searched until the invocation's time ran out: searched again next pass"
# A consolidation search stops this long before the pass's write deadline, so that a command found
# at its end still has time to start (taint, replacement NodeClaims, launch) in this invocation.
COMMAND_START_SECONDS = 5.0
LEASE_IDENTITY = "disruption"
LEASE_SECONDS = 30


@dataclass(frozen=True)
class Disrupted:
    """An expired or empty node whose termination a pass asked for."""

    nodeclaim: str
    node: str | None
    nodepool: str
    reason: str
    price_per_hour: float | None

    def summary(self) -> dict[str, Any]:
        return {
            "nodeclaim": self.nodeclaim,
            "node": self.node,
            "nodepool": self.nodepool,
            "reason": self.reason,
            "pricePerHour": self.price_per_hour,
        }


@dataclass(frozen=True)
class CommandDecision:
    """A drift or consolidation command a pass started, and what it saves."""

    method: str
    reason: str
    action: str
    nodeclaims: list[str]
    price_before: float
    price_after: float
    savings: float  # 0 for drift: it replaces whatever the replacement costs
    description: str

    @classmethod
    def of(cls, command: consolidation.Command) -> CommandDecision:
        return cls(
            method=command.method,
            reason=command.reason,
            action=command.action,
            nodeclaims=[c.name for c in command.candidates],
            price_before=round(command.price_before, 5),
            price_after=round(command.price_after, 5),
            savings=round(command.savings, 5) if command.reason != consolidation.DRIFTED else 0.0,
            description=command.describe(),
        )

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "reason": self.reason,
            "action": self.action,
            "nodeclaims": self.nodeclaims,
            "pricePerHourBefore": self.price_before,
            "pricePerHourAfter": self.price_after,
            "savingsPerHour": self.savings,
            "description": self.description,
        }


@dataclass
class PassReport:
    """What one pass (``reconcile``) did and what it leaves for later: the loop decides from these."""

    disrupted: list[Disrupted] = field(default_factory=list)
    decisions: list[CommandDecision] = field(default_factory=list)
    commands: list[execute.Outcome] = field(default_factory=list)  # what became of commands
    drifted: dict[str, str] = field(default_factory=dict)  # NodeClaim → why it drifted
    held: dict[str, str] = field(default_factory=dict)  # NodeClaim → why it stays for now
    next_check: datetime | None = None  # when a node held back becomes worth another look
    lease_skipped: bool = False
    decision_seconds: float = 0.0
    # What became of the consolidation search: SEARCHED, SKIPPED (nothing changed since a search
    # found nothing: ``consolidated``), CUT_SHORT (the invocation's time ran out first), or "" (not
    # reached: drift acted, a command is in flight, ...).
    consolidation: str = ""
    marks_left: int = 0  # NodeClaims whose marks wait for the next pass (MARK_SECONDS)
    event_seconds: float = EVENT_SECONDS  # what is left of the pass's time for "why not" events
    unsaid: int = 0  # "why not" events left for a later pass (EVENT_SECONDS)

    def hold(self, name: str, why: str) -> None:
        """``name`` stays, for ``why`` (the first reason a pass found is kept)."""
        self.held.setdefault(name, why)

    def look_again_at(self, moment: datetime) -> None:
        self.next_check = min(filter(None, (self.next_check, moment)))

    @property
    def acted(self) -> bool:
        return bool(self.disrupted or self.decisions)

    @property
    def budget_blocked(self) -> bool:
        return budget_blocked(self.held)

    @property
    def commands_in_flight(self) -> bool:
        """A command started or still waiting for its replacements: worth a look soon."""
        return any(c.action.in_flight for c in self.commands)

    @property
    def emptied(self) -> bool:
        return any(r.reason == EMPTY for r in self.disrupted)


@dataclass
class DisruptionReport:
    """One invocation: its passes' reports, added up."""

    passes: int = 0
    disrupted: list[Disrupted] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)
    lease_skipped: int = 0
    terminations: termination.TerminationReport = field(default_factory=termination.TerminationReport)
    drifted: dict[str, str] = field(default_factory=dict)  # NodeClaim → reason, found in any pass
    decisions: list[CommandDecision] = field(default_factory=list)  # drift and consolidation commands
    commands: list[execute.Outcome] = field(default_factory=list)  # what became of commands
    decision_seconds: float = 0.0
    consolidation: list[str] = field(default_factory=list)  # each pass's PassReport.consolidation

    def add(self, passed: PassReport) -> None:
        self.passes += 1
        self.consolidation.append(passed.consolidation)
        self.disrupted += passed.disrupted
        self.decisions += passed.decisions
        self.commands += passed.commands
        self.drifted.update(passed.drifted)  # every NodeClaim found drifted in this invocation's passes
        self.held = passed.held
        self.lease_skipped += int(passed.lease_skipped)
        self.decision_seconds += passed.decision_seconds

    @property
    def emptied(self) -> bool:
        """An empty node was removed in this invocation (its later passes leave graceful methods be)."""
        return any(r.reason == EMPTY for r in self.disrupted)

    @property
    def savings_per_hour(self) -> float:
        """$/h saved: the empty and expired nodes removed, and what each command saves (a node whose
        price is unknown counts 0; drift saves nothing by intent)."""
        removed = sum(r.price_per_hour or 0.0 for r in self.disrupted)
        return removed + sum(d.savings for d in self.decisions)

    def summary(self) -> dict[str, Any]:
        return {
            "passes": self.passes,
            "disrupted": [r.summary() for r in self.disrupted],
            "held": self.held,
            "savingsPerHour": round(self.savings_per_hour, 5),
            "leaseSkipped": self.lease_skipped,
            "terminations": self.terminations.summary(),
            "drifted": self.drifted,
            "decisions": [d.summary() for d in self.decisions],
            "commands": [c.summary() for c in self.commands],
            "decisionSeconds": round(self.decision_seconds, 4),
            "consolidation": self.consolidation,
        }


def run(ctx: Context, remaining_seconds: float) -> DisruptionReport:
    """Passes until nothing is left to follow or the time runs out (see the module docstring)."""
    clock = ctx.clock
    started = clock.monotonic()
    deadline = started + min(LOOP_BUDGET_SECONDS, remaining_seconds - SAFETY_MARGIN_SECONDS)
    write_deadline = started + remaining_seconds - WRITE_MARGIN_SECONDS
    lease = ctx.cluster.writer_lease(
        f"{LEASE_IDENTITY}/{uuid.uuid4().hex[:8]}", duration_seconds=LEASE_SECONDS
    )
    report = DisruptionReport()
    while True:
        passed = reconcile(
            ctx, observe(ctx), lease=lease, write_deadline=write_deadline, emptied=report.emptied
        )
        report.add(passed)
        left = deadline - clock.monotonic()
        report.terminations = (  # no time left: nothing driven, the next invocation resumes them
            termination.reconcile(
                ctx, termination.observe(ctx), budget_seconds=min(DRIVE_SLICE_SECONDS, left)
            )
            if left > 0
            else termination.TerminationReport()
        )
        left = deadline - clock.monotonic()
        wait = _next_look(ctx, passed, report.terminations)
        if wait is None or wait >= left:
            break
        clock.sleep(wait)
    publish_metrics(ctx, report)
    ctx.logger.info("disruption invocation done", extra=report.summary())
    return report


def reconcile(
    ctx: Context,
    world: World,
    *,
    lease: Lease,
    write_deadline: float = float("inf"),
    emptied: bool = False,
) -> PassReport:
    """Steps 1 to 3 of the module docstring over ``world``; ``write_deadline``: when
    (``ctx.clock.monotonic()``) the pass stops launching; ``emptied``: an earlier pass of this
    invocation removed an empty node (the graceful methods then wait for the next invocation)."""
    report = PassReport()
    started = ctx.clock.monotonic()
    patches = NodeClaimPatches()  # the marks below: one write per NodeClaim and subresource that changed
    last_events = record_pod_events(ctx, world, patches)
    usable = nodepools.triage(world).usable
    mark_consolidatable(ctx, world, usable, last_events, patches)
    report.drifted = drift.mark(ctx, world, usable, patches=patches)
    report.marks_left = patches.send(
        ctx.cluster, until=min(started + MARK_SECONDS, write_deadline), monotonic=ctx.clock.monotonic
    )
    if report.marks_left:
        ctx.logger.info("NodeClaim marks left for the next pass", extra={"nodeclaims": report.marks_left})
    decision = decide(
        nodeclaims=world.claim_views,
        nodes=world.node_views,
        pods=world.pods,
        nodepools=world.nodepool_models(usable),
        last_pod_event=last_events,
        now=world.taken_at,
    )
    report.held = dict(decision.held)
    report.next_check = decision.next_check
    ends = protection_ends(world)
    if ends is not None:  # a node a do-not-disrupt duration holds is worth a look the moment it elapses
        report.look_again_at(ends)
    _say_invalid_do_not_disrupt(ctx, world, report)
    if not (decision.disrupt or _graceful_work(world, usable, report.drifted)):
        return report
    if not lease.acquire():
        report.lease_skipped = True
        ctx.logger.info("another writer holds the lease; disruptions wait for the next pass")
        return report
    try:
        guard = WriteGuard(
            lease, deadline=write_deadline, lease_seconds=LEASE_SECONDS, monotonic=ctx.clock.monotonic
        )
        report.commands += execute.follow(ctx, world)
        execute.release_orphans(ctx, world)
        for candidate in decision.disrupt:  # expiration (forceful) and emptiness
            _disrupt(ctx, world, candidate, report)
        if emptied or report.emptied:
            return report  # the next pass looks again, with these nodes going
        _graceful(ctx, world, usable=usable, last_events=last_events, report=report, guard=guard)
    finally:
        lease.release()
    return report


def _graceful(
    ctx: Context,
    world: World,
    *,
    usable: list[Obj],
    last_events: dict[str, datetime],
    report: PassReport,
    guard: WriteGuard,
) -> None:
    """Under the lease: the first method that acts wins.

    Drift starts as many commands as its budgets allow, each replacing its node before it drains,
    and goes on while drift commands are in flight; consolidation starts one command, and only when
    none is in flight."""
    started = time.perf_counter()
    command = _choose(
        ctx,
        world,
        usable=usable,
        last_events=last_events,
        report=report,
        consolidate=not execute.commands_in_flight(world),
        search_seconds=guard.seconds_left() - COMMAND_START_SECONDS,
    )
    report.decision_seconds += time.perf_counter() - started
    stop = time.monotonic() + DRIFT_SECONDS
    while command is not None:
        outcome = _start(ctx, world, command, report, guard)
        if command.reason != consolidation.DRIFTED or outcome.action is execute.Step.ABANDONED:
            return  # consolidation: one command at a time; an abandoned drift is looked at next pass
        if time.monotonic() >= stop:
            return
        # The cluster after this command's writes, observed again: its nodes are in a command (or
        # deleting) and count against the Drifted budget, its replacements are in flight.
        world = observe(ctx)
        started = time.perf_counter()
        command = _drift_command(ctx, world, usable=usable, report=report)
        report.decision_seconds += time.perf_counter() - started


def protection_ends(world: World) -> datetime | None:
    """The earliest moment a ``karpenter.sh/do-not-disrupt`` duration of an active pod on a node of
    a live NodeClaim elapses (None: none will)."""
    ends = [
        until
        for claim in world.claim_views
        if not claim.deleting and (node := world.node_view_of(claim)) is not None
        for pod in world.pods_on(node.name)
        if is_active(pod)
        and (until := do_not_disrupt_until(pod)) is not None
        and world.taken_at < until < FOREVER
    ]
    return min(ends, default=None)


def _say_invalid_do_not_disrupt(ctx: Context, world: World, report: PassReport) -> None:
    """Karpenter's ``InvalidDoNotDisruptAnnotation`` Warning on each pod of a managed node whose
    ``karpenter.sh/do-not-disrupt`` value is ignored (deduplicated per container, as why-nots are)."""
    now = _forget_old_why_nots(ctx)
    for claim in world.claim_views:
        node = world.node_view_of(claim)
        for pod in world.pods_on(node.name) if node is not None else ():
            why = invalid_do_not_disrupt(pod)
            seen = (pod_key(pod), why or "")
            if why is None or seen in _recent_why_not:
                continue
            if not _say(ctx, report, pod, "InvalidDoNotDisruptAnnotation", why, event_type="Warning"):
                continue
            _recent_why_not[seen] = now + WHY_NOT_REPEAT_SECONDS


def _graceful_work(world: World, usable: list[Obj], drifted: dict[str, str]) -> bool:
    """Whether drift or consolidation could have anything to do (else the pass takes no lease)."""
    if drifted or any(execute.COMMAND_ANNOTATION in c.annotations for c in world.claim_views):
        return True
    if any(n.has_taint(labels.DISRUPTED_TAINT_KEY) for n in world.node_views):
        return True
    return any(
        p.spec.disruption.consolidation_policy in consolidation.UNDERUTILIZED_POLICIES
        for p in world.nodepool_models(usable)
    ) and bool(world.nodeclaims)


def _start(
    ctx: Context, world: World, command: consolidation.Command, report: PassReport, guard: WriteGuard
) -> execute.Outcome:
    outcome = execute.start(ctx, world, command, guard=guard)
    report.commands.append(outcome)
    report.decisions.append(CommandDecision.of(command))
    ctx.logger.info("disruption command", extra=report.decisions[-1].summary())
    return outcome


def _choose(
    ctx: Context,
    world: World,
    *,
    usable: list[Obj],
    last_events: dict[str, datetime],
    report: PassReport,
    consolidate: bool,
    search_seconds: float = float("inf"),
) -> consolidation.Command | None:
    """Drift, then (when ``consolidate``) multi-node, then single-node consolidation (see
    ``consolidation``), all asking one simulation of the cluster, built only when one of them runs
    (it parses every bound pod: most of a pass over an unchanged cluster). ``search_seconds``: how
    long the consolidation search may take in this pass (its methods' limits together outlast a
    function's invocation over a big cluster); a search it cuts short marks nothing consolidated."""
    question: tuple[Simulation, list[Obj]] | None = None
    if report.drifted:
        question = consolidation.simulation(world, usable)
        command = _drift_command(ctx, world, usable=usable, report=report, question=question)
        if command is not None:
            return command
    if not consolidate:
        return None
    room = _budget_room(world, usable, consolidation.UNDERUTILIZED)
    found = consolidation.candidates(world, usable, last_events)
    state = _consolidation_state(ctx, world, usable, found, room)
    recalled = consolidated.recall(ctx, state, world.taken_at)
    if recalled is not None:
        report.consolidation = SKIPPED
        for name, why in recalled.items():  # what the search that found nothing said
            report.hold(name, why)
        return None
    report.consolidation = SEARCHED
    sim, pending = question or consolidation.simulation(world, usable)
    choice = consolidation.choose(
        sim,
        world,
        usable,
        last_events,
        pending=pending,
        room=room,
        spot_to_spot=ctx.settings.spot_to_spot_consolidation,
        seconds=search_seconds,
        found=found,
    )
    _why_not(ctx, world, choice.blocked, report, reason="DisruptionBlocked")  # said whatever happens
    _count(ctx, "ConsolidationCandidates", choice.evaluated)
    if choice.command is None:
        _why_not(ctx, world, choice.why_not, report)
        if choice.cut_short:  # not a search that found nothing: the next pass searches again
            report.consolidation = CUT_SHORT
            ctx.logger.info("consolidation search cut short by the invocation's time")
        else:
            consolidated.mark(ctx, state, world.taken_at, {**choice.blocked, **choice.why_not})
        return None
    return _validated(ctx, world, choice.command, report)


def _consolidation_state(
    ctx: Context,
    world: World,
    usable: list[Obj],
    found: tuple[list[consolidation.Candidate], dict[str, str]],
    room: dict[str, int | None],
) -> str:
    """The digest of what this pass's consolidation search depends on (``consolidated.digest``),
    from its candidates and vetoes (``found``: ``consolidation.candidates``)."""
    listed, held = found
    return consolidated.digest(
        world,
        usable,
        candidates=(c.name for c in listed),
        vetoed=held,
        room=room,
        spot_to_spot=ctx.settings.spot_to_spot_consolidation,
    )


def _budget_room(world: World, usable: list[Obj], reason: str) -> dict[str, int | None]:
    return budget_room(
        nodeclaims=world.claim_views,
        nodes=world.node_views,
        nodepools=world.nodepool_models(usable),
        reason=reason,
        now=world.taken_at,
    )


def _drift_command(
    ctx: Context,
    world: World,
    *,
    usable: list[Obj],
    report: PassReport,
    question: tuple[Simulation, list[Obj]] | None = None,
) -> consolidation.Command | None:
    """The first drifted node (empty ones first, then the oldest) its budget allows and whose pods
    all find a place, with as many replacements as they need. ``question``: the pass's
    ``consolidation.simulation`` of ``world``, when already made."""
    found, why_not = consolidation.candidates(
        world, usable, {}, reason=consolidation.DRIFTED, drifted=report.drifted
    )
    room = _budget_room(world, usable, consolidation.DRIFTED)
    sim, pending = question or consolidation.simulation(world, usable)
    created = {c.name: c.creation_timestamp for c in world.claim_views}
    order = sorted(found, key=lambda c: (bool(c.pods), created.get(c.name, ""), c.name))
    for candidate in order:
        budget = room.get(candidate.nodepool)
        if budget is not None and budget <= 0:
            why_not[candidate.name] = consolidation.budget_message(candidate.nodepool, consolidation.DRIFTED)
            continue
        pool = world.nodepool_model(candidate.nodepool)
        view = world.pool_view(candidate.nodepool)
        if pool is not None and view is not None and pool.spec.is_static:
            # Karpenter's StaticDrift: one for one, from the NodePool's template
            replacement, why = nodepools.static_drift_replacement(world, view)
            if replacement is not None:
                return consolidation.Command(consolidation.DRIFTED, "drift", [candidate], [replacement])
            why_not[candidate.name] = why
            continue
        verdict = consolidation.evaluate(
            sim, [candidate], pending, reason=consolidation.DRIFTED, method="drift", thresholds={}
        )
        if verdict.command is not None:
            return verdict.command
        why_not[candidate.name] = verdict.why_not
    _why_not(ctx, world, why_not, report, reason="DisruptionBlocked")
    return None


# Consolidation commands wait VALIDATION_SECONDS and must still hold before they act (per container).
_proposals: dict[str, tuple[tuple[Any, ...], datetime]] = {}


def _validated(
    ctx: Context, world: World, command: consolidation.Command, report: PassReport
) -> consolidation.Command | None:
    """Act on a consolidation command only when the same one was found at least
    ``VALIDATION_SECONDS`` earlier (pods that arrived since, budgets, do-not-disrupt all count again)."""
    key = (
        tuple(sorted(c.name for c in command.candidates)),
        tuple(tuple(o.name for o in r.instance_types) for r in command.replacements),
    )
    cluster = ctx.settings.cluster_name
    seen = _proposals.get(cluster)
    if (
        seen is not None
        and seen[0] == key
        and (world.taken_at - seen[1]).total_seconds() >= consolidation.VALIDATION_SECONDS
    ):
        del _proposals[cluster]
        return command
    if seen is None or seen[0] != key:
        _proposals[cluster] = (key, world.taken_at)
        seen = _proposals[cluster]
    ready_at = seen[1] + timedelta(seconds=consolidation.VALIDATION_SECONDS)
    report.look_again_at(ready_at)
    report.held[command.candidates[0].name] = f"{command.describe()}: validating until {ready_at.isoformat()}"
    return None


def forget_proposals() -> None:
    """Drop the per-container consolidation proposals (tests)."""
    _proposals.clear()


# "Why not" events are deduplicated per container for a while, as the provisioner's pod events are:
# by object and reason, not by the words (Karpenter's dedupe keys: a message naming another pod or
# another uninitialized NodeClaim is no news, and at 5,000 nodes each round of them is 10,000 writes),
# Unconsolidatable for Karpenter's 15 minutes, the others for WHY_NOT_REPEAT_SECONDS.
WHY_NOT_REPEAT_SECONDS = 600.0
UNCONSOLIDATABLE_REPEAT_SECONDS = 900.0
# (object, reason) → until when (ctx.clock.monotonic) it is not said again.
_recent_why_not: dict[tuple[str, str], float] = {}


def _forget_old_why_nots(ctx: Context) -> float:
    """Drop the remembered events whose quiet time is over; the monotonic time now."""
    now = ctx.clock.monotonic()
    for seen, until in list(_recent_why_not.items()):
        if until <= now:
            del _recent_why_not[seen]
    return now


def _why_not(
    ctx: Context,
    world: World,
    why_not: dict[str, str],
    report: PassReport,
    *,
    reason: str = "Unconsolidatable",
) -> None:
    now = _forget_old_why_nots(ctx)
    quiet = UNCONSOLIDATABLE_REPEAT_SECONDS if reason == "Unconsolidatable" else WHY_NOT_REPEAT_SECONDS
    by_name = {objects.name_of(c): c for c in world.nodeclaims}
    for name, why in sorted(why_not.items()):
        report.hold(name, why)
        if (name, reason) in _recent_why_not or name not in by_name:
            continue
        claim = by_name[name]
        if not _say(ctx, report, claim, reason, why):
            continue
        _recent_why_not[(name, reason)] = now + quiet
        node = world.node_of(claim)
        if node is not None:  # the Node's event goes with its NodeClaim's, as one is remembered for both
            _say(ctx, report, node, reason, why, past_budget=True)
    _count(ctx, "DisruptionBlocked", len(why_not))


def _say(
    ctx: Context,
    report: PassReport,
    involved: Obj,
    reason: str,
    why: str,
    *,
    past_budget: bool = False,
    **kwargs: Any,
) -> bool:
    """Record a "why not" event while the pass's ``EVENT_SECONDS`` last (``past_budget``: even
    after); False (not said) otherwise."""
    if report.event_seconds <= 0 and not past_budget:
        report.unsaid += 1
        return False
    started = ctx.clock.monotonic()
    ctx.cluster.record_event(involved, reason, why, **kwargs)
    report.event_seconds -= ctx.clock.monotonic() - started
    return True


def _count(ctx: Context, name: str, value: float) -> None:
    ctx.metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


def record_pod_events(ctx: Context, world: World, patches: NodeClaimPatches) -> dict[str, datetime]:
    """NodeClaim → its last pod event (see the module docstring); the ones that changed go into
    ``patches``."""
    last: dict[str, datetime] = {}
    for claim in world.claim_views:
        node = world.node_view_of(claim)
        if node is None or claim.deleting:
            continue
        name = claim.name
        digest = pods_fingerprint(p for p in world.pods_on(node.name) if is_reschedulable(p))
        recorded = claim.last_pod_event
        if claim.annotations.get(FINGERPRINT_ANNOTATION) != digest:
            recorded = world.taken_at
            patches.status(name, {"lastPodEventTime": objects.format_time(recorded)})
            patches.annotate(name, {FINGERPRINT_ANNOTATION: digest})
        if recorded is not None:
            last[name] = recorded
    return last


def mark_consolidatable(
    ctx: Context,
    world: World,
    usable: list[Obj],
    last_events: dict[str, datetime],
    patches: NodeClaimPatches,
) -> None:
    """Karpenter's ``Consolidatable`` condition (its nodeclaim disruption controller): True once an
    initialized NodeClaim of a NodePool whose ``consolidateAfter`` is not Never has had no pod event
    for ``consolidateAfter`` (counted from its initialization when it had none); removed otherwise.
    Into ``patches`` only when it changes."""
    from nodewright.api.models import CONSOLIDATABLE, INITIALIZED
    from nodewright.termination import conditions

    after_of = {p.name: p.spec.disruption.consolidate_after_seconds for p in world.nodepool_models(usable)}
    for claim in world.claim_views:
        if claim.nodepool not in after_of or claim.deleting:
            continue
        name, after = claim.name, after_of[claim.nodepool]
        since = last_events.get(name) or claim.true_since(INITIALIZED)
        present = conditions.conditions_of(claim.raw)
        if (
            after is None
            or not claim.is_true(INITIALIZED)
            or since is None
            or world.taken_at - since < timedelta(seconds=after)
        ):
            conditions.clear_condition(ctx, name, present, CONSOLIDATABLE, patches=patches)
        else:
            conditions.set_condition(ctx, name, present, CONSOLIDATABLE, True, patches=patches)


def _disrupt(ctx: Context, world: World, candidate: Candidate, report: PassReport) -> None:
    """Ask for an expired or empty node's termination (voluntary: PDBs and do-not-disrupt hold its
    drain, which the NodeClaim's terminationGracePeriod, if any, bounds)."""
    node_name = objects.name_of(candidate.node) if candidate.node else None
    # A pod bound since the snapshot: the node is not empty any more.
    recheck = candidate.reason == EMPTY and node_name is not None
    if recheck and any(is_reschedulable(p) for p in ctx.cluster.list_pods_on_node(node_name or "")):
        report.held[candidate.name] = f"a pod arrived on {node_name}"
        return
    price = world.price_of(candidate.nodeclaim)
    checkpoints.checkpoint("disruption.candidate-chosen")
    if candidate.reason == EMPTY:  # a command of Karpenter's queue (expiration is its own controller's)
        execute.mark_disrupted(ctx, candidate.nodeclaim, EMPTY)
    termination.request(
        ctx,
        nodeclaim=candidate.nodeclaim,
        node=candidate.node,
        instance_id=objects.nodeclaim_instance_id(candidate.nodeclaim),
        asked=termination.TerminationRequest(
            f"{candidate.reason} (NodePool {candidate.nodepool})", involuntary=False
        ),
    )
    if candidate.reason == EMPTY:
        execute.say_terminating(ctx, candidate.nodeclaim, candidate.node, EMPTY)
    disrupted = Disrupted(candidate.name, node_name, candidate.nodepool, candidate.reason, price)
    report.disrupted.append(disrupted)
    ctx.logger.info("disrupting a node", extra=disrupted.summary())


def _next_look(ctx: Context, passed: PassReport, terms: termination.TerminationReport) -> float | None:
    """Seconds until the next pass is worth making; None when nothing is left to follow.

    A budget that holds nodes back is worth another look only when this pass used it (its room
    comes back as those drains finish); a budget that allows nothing (``nodes: 0`` in a window)
    must not keep the function looping, and billed, until the window closes. The writers' lease
    is held for one provisioner pass at a time, so a skipped pass is tried again soon.
    """
    if terms.unfinished or passed.lease_skipped or passed.commands_in_flight:
        return POLL_SECONDS
    if passed.budget_blocked and passed.acted:
        return 0.0  # this pass's drains are done, so the budget's room is back now
    if passed.next_check is not None:
        return max(0.0, (passed.next_check - ctx.clock.now()).total_seconds())
    return None


def publish_metrics(ctx: Context, report: DisruptionReport) -> None:
    metrics = ctx.metrics
    metrics.add_metric(
        name="DisruptionSavingsPerHour", unit=MetricUnit.NoUnit, value=round(report.savings_per_hour, 4)
    )
    namespace = getattr(metrics, "namespace", None)
    reasons = Counter((r.reason,) for r in report.disrupted)
    emit_counts(name="DisruptionActions", dimensions=("Reason",), counts=reasons, namespace=namespace)
    methods = Counter((d.method,) for d in report.decisions)
    emit_counts(name="DisruptionDecisions", dimensions=("Method",), counts=methods, namespace=namespace)
    if report.decision_seconds:
        metrics.add_metric(
            name="DisruptionDecisionSeconds", unit=MetricUnit.Seconds, value=round(report.decision_seconds, 4)
        )
