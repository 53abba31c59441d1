"""The core both interruption functions call: one message in, a disposition out, acting at most once.

``InterruptionProcessor.handle(message)`` parses the message, and for events that act runs the
interruption controller (``flow.reconcile``) through its idempotency step
(``_handle_idempotently``): Powertools Idempotency keyed on the event id, over the state table with
one key space shared by both functions (``key_prefix`` and static partition key fixed here, not
derived from the Lambda function's name) — so the SQS path and the direct EventBridge path act once
for the same event whichever comes first. A fresh run gives back its typed ``EventOutcome`` (its
``record()`` is what the table stores); a redelivery gives back the stored record, marked
``Replayed`` by the idempotency config's response hook, and is a duplicate.

Dispositions (``flow.Disposition``, decided from the outcome's typed fields) and what the SQS
handler does with them:

* ``acted`` / ``recorded`` — done; ``ignored`` (not ours, with the reason) / ``not-owned``
  (no NodeClaim for the instance) / ``duplicate`` — acknowledged;
* ``malformed`` — can never succeed: logged, counted (``MalformedMessages``), acknowledged;
* a message acted on although a field was unusable (a placeholder ``time``, ``resources`` as a
  string) is logged as a warning and counted (``MessagesTolerated``); one older than its kind's
  maximum age is ignored as stale and counted (``StaleMessages``, see ``events.MAX_AGE``);
* exceptions — transient trouble (API server unreachable, throttling, the same event in progress
  in the other function): the SQS handler lets only that message return to the queue.

``drive(budget_seconds)`` then runs the termination controller (``termination.reconcile``) over the
drains this invocation started, plus any a previous one left half-done, until they finish or the
time is spent.
"""

from __future__ import annotations

import contextvars
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from nodewright import observability, termination
from nodewright.api import labels
from nodewright.checkpoints import checkpoint
from nodewright.cluster import objects
from nodewright.cluster.errors import NotFound
from nodewright.context import remaining_seconds
from nodewright.interruption import flow
from nodewright.interruption.events import Action, InterruptionEvent, MalformedMessage, parse_message
from nodewright.interruption.flow import Disposition, EventOutcome, OwnershipIndex, Replacer
from nodewright.spec import deployment
from nodewright.termination import drivers

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
    from aws_lambda_powertools.utilities.idempotency.serialization.base import BaseIdempotencySerializer

    from nodewright.context import ContainerContext, Context
    from nodewright.settings import Settings
    from nodewright.state.guard import WriteGuard
    from nodewright.state.views import ClaimView

IDEMPOTENCY_KEY_PREFIX = "nodewright-interruption"
# An instance launched less than this long before a look may be missed by the ownership index (EC2
# gives no interruption notice that early in practice): an instance the index does not know is
# looked up again once the index is older than this; one it knows never needs it (``_owned``).
OWNERSHIP_TTL_SECONDS = 2.0
# How often a warm container looks for terminations an earlier invocation left half-done (the
# provisioner's termination controller also drives them every minute).
RESUME_SCAN_SECONDS = 10.0
# Event ids this warm container has handled, newest last: a redelivery after the node is gone (no
# NodeClaim left to own it) is still told apart as a duplicate, without a DynamoDB read.
RECENT_EVENTS = 512
IDEMPOTENCY_PARTITION = "idempotency#nodewright-interruption"
IDEMPOTENCY_TTL_SECONDS = (
    6 * 3600
)  # longer than any redelivery (SQS retention 300 s, EventBridge retries 24 h)
# A termination asked for less than this long ago is driven by the invocation that asked for it
# (the interruption functions' timeout, infra/capabilities/functions.py INTERRUPTION_TIMEOUT_SECONDS):
# the resume scan leaves it alone (``_left_behind``).
DRIVEN_ELSEWHERE_SECONDS = 125.0
# A replacement stops writing this long before the invocation ends (its drain and report still run).
WRITE_MARGIN_SECONDS = 3.0
# The most terminations left behind that one resume scan claims (``termination.drivers``), taken in
# a random order: containers scanning at once (an AZ-wide reclaim) share them out instead of racing
# for the same ones, and each tries a few conditional writes, not one per termination of the
# cluster. As many as one SQS batch's nodes; what no container claims, the provisioner's passes
# step (and the next scans claim).
CLAIMS_PER_SCAN = 10
# A batch's messages handled at once (``handle_batch``): all of an SQS batch.
BATCH_CONCURRENCY = deployment.QUEUE_BATCH_SIZE
# The container's one Powertools metric set (``observability.metrics()``) is a plain dict that a
# batch's threads add to at once: one lock for it, whichever processor counts.
_METRICS_LOCK = threading.Lock()
# Set in ``handle_batch``'s threads (each runs in a copy of the invocation's context).
_IN_BATCH_THREAD: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nodewright_interruption_batch_thread", default=False
)


@dataclass(frozen=True)
class UnparsedMessage:
    """A message the parser failed on with something other than ``MalformedMessage``: a bug in the
    parser or a shape it did not foresee, not known to be the message's fault. Handling it raises
    ``error``, so its record alone fails (SQS redelivers it, then the dead-letter queue keeps it);
    the batch's other messages are handled. Were the parse's exception raised for the batch, every
    good message in it would follow the bad one to the dead-letter queue."""

    error: Exception


# A message as ``InterruptionProcessor.parse`` made it: its typed event, why it can never be one, or
# the parser's own failure on it.
Parsed = InterruptionEvent | MalformedMessage | UnparsedMessage


class EventInProgress(RuntimeError):
    """The same event is being handled by the other path right now; retry later (transient)."""

    transient = True


@dataclass(frozen=True)
class Replayed:
    """What the idempotency step gives back for an event handled before: the stored record."""

    record: dict[str, Any]


@dataclass
class HandledBatch:
    """What ``handle_batch`` made of each message of a batch, by message id: its result, or the
    exception its handling raised (transient trouble: only that message goes back to the queue)."""

    outcomes: dict[str, MessageResult | Exception] = field(default_factory=dict)

    def result(self, message_id: str) -> MessageResult:
        """The message's result; raises what its handling raised (one never handled: a failure)."""
        outcome = self.outcomes.get(message_id)
        if outcome is None:
            raise RuntimeError(f"message {message_id} was not handled")
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


@dataclass
class MessageResult:
    disposition: Disposition
    event: InterruptionEvent | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"disposition": self.disposition.value}
        if self.event is not None:
            out.update(self.event.summary())
        if self.error:
            out["error"] = self.error
        if self.detail:
            out["outcome"] = self.detail
        return out


class InterruptionProcessor:
    """One per warm container, beside its ``ContainerContext`` (both functions' handler modules hold
    one each). The container builds the flows' Context on first need: not for messages that are
    ignored or malformed, so those cost no cluster or AWS call."""

    def __init__(
        self,
        container: ContainerContext,
        *,
        persistence: Any = None,
        replace: Replacer | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._container = container
        self._replace = replace
        self._clock = clock
        self._wall_clock = wall_clock
        self._persistence = persistence
        self._idempotent: Callable[..., EventOutcome | Replayed] | None = None
        self._config: Any = None
        # The drains this invocation started, with when their message was received.
        self._started: list[tuple[termination.Termination, float]] = []
        # The nodes those messages cordoned, whose pods ``drive`` gets replacement capacity for in
        # one pass (``flow.reconcile(defer=True)``), the event ids, and the writes' deadline.
        self._displaced: list[str] = []
        self._displaced_by: list[str] = []
        self._displaced_records: list[dict[str, Any]] = []  # their outcomes, told what the replacement did
        self._write_deadline: float | None = None
        # This invocation's replacements, beside its drains (one, unless the first was over when
        # more nodes came).
        self._replacing: list[_Replacing] = []
        self._replacement_records: list[dict[str, Any]] = []
        # The batch's cordoned nodes with their NodeClaims and warnings' deadlines (``cordon_first``).
        self._notices: list[tuple[str, str, str]] = []
        self._index: OwnershipIndex | None = None
        self._last_resume_scan = float("-inf")
        # This container's name on the terminations it drives (``termination.drivers``): one
        # invocation at a time runs here, so the next one goes on with what the last one claimed.
        self.driver_identity = f"interruption/{uuid.uuid4().hex[:12]}"
        self._driver: drivers.Driver | None = None  # this invocation's claims: until it ends
        self._recent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        # A batch's messages are handled in threads of their own (``handle_batch``): what they share
        # here (the records above, the ownership index, the idempotency wrapper, the metrics) is
        # read and written under this lock.
        self._lock = threading.RLock()
        self.logger = observability.logger()

    # ------------------------------------------------------------------ public
    @property
    def settings(self) -> Settings:
        with self._lock:  # read on first need, maybe by the threads of a batch at once
            return self._container.settings

    @property
    def ctx(self) -> Context:
        with self._lock:  # connected on first need: once, whichever thread of a batch asks first
            return self._container.get()

    def parse(self, message: str | bytes | dict[str, Any], *, sent: datetime | None = None) -> Parsed:
        """One message as its typed event, or the ``MalformedMessage`` it is (given back, not raised:
        a batch parses every message once, up front, and hands the result to ``cordon_first`` and
        ``handle_batch``). ``sent``: when the message entered the queue (SQS ``SentTimestamp``);
        stands in for an unusable event ``time``, as does the time of this call when it is not
        given; the message's age is judged at the time of this call."""
        now = self._wall_clock()
        try:
            return parse_message(
                message, rebalance_mode=self.settings.rebalance_mode, received=sent or now, now=now
            )
        except MalformedMessage as exc:
            return exc
        except Exception as exc:  # the parser's bug: this message's failure alone (UnparsedMessage)
            self.logger.exception("interruption message could not be parsed; it goes back to the queue")
            return UnparsedMessage(exc)

    def parse_batch(
        self, messages: Iterable[tuple[str, str | bytes | dict[str, Any], datetime | None]]
    ) -> list[tuple[str, Parsed]]:
        """A batch's messages (each one's id, body and when it was sent), each ``parse``d once:
        what ``cordon_first`` and ``handle_batch`` take."""
        return [(message_id, self.parse(body, sent=sent)) for message_id, body, sent in messages]

    def handle(
        self,
        message: str | bytes | dict[str, Any],
        *,
        received_at: float | None = None,
        sent: datetime | None = None,
        lambda_context: Any = None,
    ) -> MessageResult:
        """Parse and act on one message; raises only for transient trouble (see the module docstring).

        ``sent``: see ``parse``.
        """
        received_at = self._clock() if received_at is None else received_at
        return self.handle_parsed(
            self.parse(message, sent=sent), received_at=received_at, lambda_context=lambda_context
        )

    def handle_parsed(
        self, parsed: Parsed, *, received_at: float | None = None, lambda_context: Any = None
    ) -> MessageResult:
        """Act on one ``parse``d message (``handle``'s work after the parse)."""
        received_at = self._clock() if received_at is None else received_at
        self._correlate(None)  # never leave the previous message's id on this one
        if isinstance(parsed, UnparsedMessage):
            raise parsed.error
        if isinstance(parsed, MalformedMessage):
            self.logger.warning("malformed interruption message acknowledged", extra={"error": str(parsed)})
            self._count("MalformedMessages")
            return MessageResult(Disposition.MALFORMED, error=str(parsed))
        event = parsed
        self._correlate(event.event_id)
        if event.notes:
            self.logger.warning("interruption message tolerated", extra={"notes": list(event.notes)})
            self._count("MessagesTolerated")
        if event.action is Action.IGNORE and event.reason.startswith("stale"):
            self._count("StaleMessages")
        if event.action is Action.IGNORE:
            self.logger.info(
                "interruption message ignored", extra={"reason": event.reason, **event.summary()}
            )
            self._count("IgnoredMessages")
            return MessageResult(Disposition.IGNORED, event)
        with self._lock:
            seen = self._recent.get(event.event_id)
        if seen is not None:
            return self._duplicate(event, seen)
        if not self._owned(event):
            self.logger.info(
                "instances not owned by this cluster (no NodeClaim); acknowledged",
                extra={"instances": list(event.instance_ids), "kind": event.kind.value},
            )
            self._count("IgnoredMessages")
            return MessageResult(Disposition.NOT_OWNED, event)
        handled = self._handle_idempotently(event, lambda_context)
        record = handled.record if isinstance(handled, Replayed) else handled.record()
        with self._lock:
            self._recent[event.event_id] = record
            while len(self._recent) > RECENT_EVENTS:
                self._recent.popitem(last=False)
        if isinstance(handled, Replayed):
            return self._duplicate(event, record)
        with self._lock:
            self._started.extend((t, received_at) for t in handled.terminations if t.nodeclaim)
            if handled.displaced_nodes:
                self._displaced.extend(handled.displaced_nodes)
                self._displaced_by.append(event.event_id)
                self._displaced_records.append(record)
        return self._report(handled, record, received_at)

    def handle_batch(
        self, messages: Sequence[tuple[str, Parsed]], *, lambda_context: Any = None
    ) -> HandledBatch:
        """Handle a batch's messages at once (``messages``: each one's id and what ``parse`` made of
        it, ``parse_batch``), each in a thread of its own, and give back what each came to, for the
        batch processor to report message by message (``HandledBatch.result``). One after another,
        the tenth message of a batch was acted on (its NodeClaim marked) after the nine before it,
        and the batch's drains began only after the last: in a 100-node storm the NodeClaims were
        marked p50 87-111 s after their warning, and most nodes were not drained by the two-minute
        deadline. Each message's work is ``handle``'s, through the same idempotency step (one act
        per event id, whichever thread, container or path comes first): handling them at once
        changes when, not what. Messages of the same event go to one thread, one after another,
        so a second copy is a duplicate, as before, rather than an event in progress sent back
        to the queue."""
        groups: dict[str, list[tuple[str, Parsed]]] = {}
        for message_id, parsed in messages:
            key = _event_key(parsed) or f"message/{message_id}"
            groups.setdefault(key, []).append((message_id, parsed))
        batch = HandledBatch()

        def handle_each(group: list[tuple[str, Parsed]]) -> None:
            _IN_BATCH_THREAD.set(True)
            for message_id, parsed in group:
                try:
                    batch.outcomes[message_id] = self.handle_parsed(parsed, lambda_context=lambda_context)
                except Exception as exc:  # this message's alone: the batch processor reports it
                    batch.outcomes[message_id] = exc

        work = list(groups.values())
        if len(work) == 1:
            contextvars.copy_context().run(handle_each, work[0])
        elif work:
            threads = min(BATCH_CONCURRENCY, len(work))
            with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="message") as pool:
                for group in work:
                    pool.submit(contextvars.copy_context().run, handle_each, group)
        return batch

    def cordon_first(self, messages: Iterable[Parsed]) -> list[str]:
        """Cordon the node of every instance of ours that a batch's replace-and-drain messages name
        (``messages``: what ``parse`` made of each), before the first message is handled:
        ``handle`` does each message's whole work (idempotency record, offering, NodeClaim, event)
        before the next one's, so the tenth node of a batch would take new pods for as long as
        the nine before it took (measured in ``nodewright bench interruption``: handler → cordon
        p50 9 s). Cordoning is idempotent: a message the other path acts on, or a redelivery,
        costs a no-op; ``handle`` then finds the node cordoned. Nothing else is done here, so
        nothing is acted on twice. A failure stops it with a warning: ``handle`` cordons each
        node again and reports, per message, what fails. Returns the nodes cordoned."""
        names: list[str] = []
        notices: list[tuple[str, str, str]] = []  # node, its NodeClaim, the warning's deadline
        try:
            for event in messages:
                if isinstance(event, MalformedMessage | UnparsedMessage):
                    continue  # handle_parsed() says so
                if event.action is not Action.REPLACE_AND_DRAIN or event.event_id in self._recent:
                    continue
                if not self._owned(event):
                    continue
                assert self._index is not None  # _owned read it
                for instance_id in event.instance_ids:
                    node = self._index.nodes.get(instance_id)
                    claim = self._index.claims.get(instance_id)
                    if node is not None and claim is not None:
                        names.append(objects.name_of(node))
                        if event.deadline is not None and not objects.is_deleting(claim):
                            at = objects.format_time(event.deadline)
                            notices.append((objects.name_of(node), objects.name_of(claim), at))
        except Exception as exc:  # handle() does each message's work again and reports what fails
            self._cordon_first_stopped(exc)
        cordoned: list[str] = []
        for name in names:
            try:
                termination.cordon(self.ctx, name)
            except NotFound:
                continue  # gone meanwhile: handle() finds what is left of it
            except Exception as exc:
                self._cordon_first_stopped(exc)
                break
            cordoned.append(name)
        # Noted by the replacement that ``replace_ahead`` begins, in its own thread.
        self._notices = [n for n in notices if n[0] in cordoned]
        return cordoned

    def replace_ahead(self, nodes: list[str], *, lambda_context: Any = None) -> None:
        """Begin the replacement for the pods of ``nodes`` (the batch's nodes ``cordon_first``
        cordoned) now, beside the handling of the batch's messages and then its drains, rather than
        after the last message (a batch's messages are handled one after another, and the tenth
        one's NodeClaim was marked tens of seconds after the cordon in a 100-node storm). Planned
        as nodes that go regardless (the warnings say EC2 takes them), under the writers' lease
        like every replacement: a node whose message turns out to be handled elsewhere costs a
        plan that finds its pods' capacity in flight, never a second launch. A node whose NodeClaim
        the ownership index already saw marked is left out: whoever began its termination
        replaces it."""
        index = self._index
        if index is not None:
            going = {
                objects.name_of(node)
                for instance, node in index.nodes.items()
                if objects.is_deleting(index.claims.get(instance) or {})
            }
            nodes = [n for n in nodes if n not in going]
        if nodes:
            deadline = self.ctx.clock.monotonic() + remaining_seconds(lambda_context) - WRITE_MARGIN_SECONDS
            notices = [n for n in self._notices if n[0] in nodes]
            self._start_replacement(nodes, "cordoned ahead of the batch", deadline, notices)
        self._notices = []

    def _cordon_first_stopped(self, exc: Exception) -> None:
        self.logger.warning(
            "cordoning the batch's nodes ahead stopped; each message's handling cordons its own",
            extra={"error": f"{type(exc).__name__}: {exc}"},
        )

    def drive(self, budget_seconds: float) -> list[dict[str, Any]]:
        """Replacement capacity for the nodes the messages cordoned (one pass for all of them, run
        beside the drains: ``_Replacing``), and the drains started here, and any left behind by
        others, for at most ``budget_seconds`` (the termination controller; the cluster is looked at
        for others at most every ``RESUME_SCAN_SECONDS``, and only for terminations no invocation
        is driving any more: ``_left_behind``); then waits for the replacement to end."""
        started = {t.nodeclaim: t for t, _ in self._started}
        received = {t.nodeclaim: at for t, at in self._started}
        self._started = []
        if not self._container.connected and not started and not self._replacing:
            return []  # nothing needed the cluster in this invocation: no need to connect just to look
        self._replace_displaced()
        try:
            for run in self._replacing:
                run.before_evictions(flow.REPLACEMENT_LEASE_WAIT_SECONDS)
            return self._drain(started, received, budget_seconds)
        finally:
            self._replacement_done()

    def _drain(
        self,
        started: dict[str | None, termination.Termination],
        received: dict[str | None, float],
        budget_seconds: float,
    ) -> list[dict[str, Any]]:
        """The drains, while the replacement runs beside them (``drive``)."""
        now = self._clock()
        scan = now - self._last_resume_scan >= RESUME_SCAN_SECONDS
        if scan:
            self._last_resume_scan = now
        world = None
        if scan:
            world = self._claimed(
                _left_behind(termination.observe(self.ctx), self.ctx.clock.now()), budget_seconds
            )
        done_before = {name for name, term in started.items() if term.done}
        # Every one started here is passed on (a done one is not stepped again, only kept from the
        # scan: one left for EC2 is done while its NodeClaim still waits, deleting).
        report = termination.reconcile(
            self.ctx,
            world,
            asked=list(started.values()),
            budget_seconds=budget_seconds,
            driver=self.driver_identity,
        )
        for term in report.finished:
            if term.nodeclaim in received:
                self._timing("NodeDrainedSeconds", self._clock() - received.pop(term.nodeclaim))
        # The drive has ended: its claims go back (``termination.drivers``), so the next look at
        # a termination still under way, or left for EC2, need not wait for them to expire.
        drivers.release(self.ctx, [t.nodeclaim for t in report.terminations if t.nodeclaim])
        driven = [t for t in report.terminations if t.nodeclaim not in done_before]
        unfinished = [t.summary() for t in report.unfinished]
        if unfinished:
            self.logger.warning(
                "drains not finished in this invocation; the next one resumes them",
                extra={"terminations": unfinished},
            )
        return [t.summary() for t in driven]

    def _report_requests(self) -> None:
        """This container's API server requests since the last report, by second (one log line per
        invocation; summed over the containers they are the function's request rate) and as the
        ``ApiRequests`` metric."""
        limiter = getattr(self.ctx.cluster, "limiter", None)  # a fake cluster (tests) has none
        if limiter is None:
            return
        counts = limiter.drain_request_counts()
        if not counts:
            return
        total = sum(counts.values())
        observability.metrics().add_metric(name="ApiRequests", unit=MetricUnit.Count, value=total)
        self.logger.info(
            "kubernetes API requests",
            extra={
                "apiRequests": total,
                "apiRequestsBySecond": {str(k): v for k, v in sorted(counts.items())},
            },
        )

    # ------------------------------------------------------------------ internals
    def _claimed(
        self, world: termination.NodesAndClaims, budget_seconds: float
    ) -> termination.NodesAndClaims:
        """What the resume scan drives of ``world``: the terminations this container claims now
        (``termination.drivers``, at most ``CLAIMS_PER_SCAN``, until this invocation ends); the
        others, claimed elsewhere or lost to a racing claim, are left to their drivers."""
        now = self.ctx.clock.now()
        driver = drivers.Driver(self.driver_identity, now + timedelta(seconds=budget_seconds))
        deleting = [c for c in world.claim_views if c.held_by(labels.TERMINATION_FINALIZER)]
        free = [c.raw for c in deleting if not drivers.held_elsewhere(c.raw, driver.holder, now)]
        random.shuffle(free)
        ours = set(drivers.claim_each(self.ctx, free, driver, limit=CLAIMS_PER_SCAN))
        return _without(world, [c for c in deleting if c.name not in ours])

    def _replace_displaced(self) -> None:
        """Replacement capacity for the pods of every node this invocation's messages cordoned, in
        one pass for all of them (``flow.replace_displaced``), run beside the drains: handed to
        the replacement already under way (``replace_ahead``) when there is one, else begun."""
        nodes, self._displaced = self._displaced, []
        why, self._displaced_by = ",".join(self._displaced_by), []
        self._replacement_records.extend(self._displaced_records)
        self._displaced_records = []
        if not nodes:
            return
        if self._replacing and self._replacing[-1].add(nodes):
            return
        # Those a replacement of this invocation already covered are not planned again (its passes
        # may be over before the messages are handled: nothing was marked for a while).
        covered = frozenset().union(*(run.covered() for run in self._replacing))
        nodes = [n for n in nodes if n not in covered]
        if nodes:
            self._start_replacement(nodes, why, self._write_deadline)

    def _start_replacement(
        self,
        nodes: list[str],
        why: str,
        write_deadline: float | None,
        notices: list[tuple[str, str, str]] | None = None,
    ) -> None:
        self._replacing.append(
            _Replacing(self.ctx, nodes, why, self._replace, write_deadline, notices=notices or [])
        )

    def end_replacement(self) -> None:
        """End this invocation's replacement if ``drive`` did not (something raised before it, or
        in it before its ``finally``): no thread of an invocation may outlive it, since Lambda
        freezes the container once the handler returns and the thread would wake, mid-wait for the
        lease, in a later invocation. Nothing to do when ``drive`` ended it."""
        if self._replacing:
            self._replacement_done()

    def _replacement_done(self) -> None:
        """Wait for the replacements (the drains are done or out of time: they need not wait for the
        lease any longer), say what they did, and tell the messages' records (spot_events answers
        with its event's)."""
        replacing, self._replacing = self._replacing, []
        records, self._replacement_records = self._replacement_records, []
        try:
            for run in replacing:
                replacement = run.finish()
                for record in records:
                    record["replacement"] = replacement.summary()
                checkpoint("interruption.replacement-launched")
                self.logger.info(
                    "replacement for interrupted nodes",
                    extra={"nodes": run.nodes, "eventIds": run.why, "replacement": replacement.summary()},
                )
        finally:
            self._report_requests()

    def _duplicate(self, event: InterruptionEvent, stored: dict[str, Any]) -> MessageResult:
        self.logger.info("event already handled; nothing done again", extra={"eventId": event.event_id})
        self._count("DuplicateMessages")
        return MessageResult(Disposition.DUPLICATE, event, stored)

    def _handle_idempotently(self, event: InterruptionEvent, lambda_context: Any) -> EventOutcome | Replayed:
        """Idempotency: ``flow.reconcile`` once per event id, whichever function and container
        gets the event first; the typed outcome of this run, or ``Replayed`` with what the first run
        stored. Without a state table (the CLI, offline) every call runs."""
        left = remaining_seconds(lambda_context)
        deadline = self.ctx.clock.monotonic() + left - WRITE_MARGIN_SECONDS
        self._driver = drivers.Driver(self.driver_identity, self.ctx.clock.now() + timedelta(seconds=left))
        idempotent = self._idempotent_handler()
        if idempotent is None:
            return self._handle_once(payload={"event_id": event.event_id}, event=event, deadline=deadline)
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
        )

        if lambda_context is not None:
            self._config.register_lambda_context(lambda_context)
        try:
            return idempotent(payload={"event_id": event.event_id}, event=event, deadline=deadline)
        except IdempotencyAlreadyInProgressError as exc:
            raise EventInProgress(f"event {event.event_id} is being handled by the other path") from exc

    def _handle_once(
        self, *, payload: dict[str, Any], event: InterruptionEvent, deadline: float
    ) -> EventOutcome:
        """The interruption controller itself (``payload`` only carries the idempotency key;
        ``deadline``: when the replacement must stop writing), up to the cordon: ``drive`` replaces
        and drains (``flow.reconcile(defer=True)``). The ownership index ``handle`` just read says
        which objects to read again."""
        self._write_deadline = deadline
        return flow.reconcile(
            self.ctx,
            event,
            replace=self._replace,
            write_deadline=deadline,
            index=self._index,
            defer=True,
            driver=self._driver,
        )

    def _idempotent_handler(self) -> Callable[..., EventOutcome | Replayed] | None:
        """``_handle_once`` wrapped in Powertools Idempotency, built on first need (None: no table)."""
        with self._lock:
            return self._idempotent_built()

    def _idempotent_built(self) -> Callable[..., EventOutcome | Replayed] | None:
        if self._idempotent is not None:
            return self._idempotent
        persistence = self._persistence
        if persistence is None and self.settings.state_table:
            persistence = idempotency_persistence(self.settings)
        if persistence is None:
            return None
        from aws_lambda_powertools.utilities.idempotency import (
            IdempotencyConfig,
            idempotent_function,
        )

        self._config = IdempotencyConfig(
            event_key_jmespath="event_id",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=IDEMPOTENCY_TTL_SECONDS,
            response_hook=_replayed,
        )
        self._idempotent = idempotent_function(
            self._handle_once,
            data_keyword_argument="payload",
            persistence_store=persistence,
            config=self._config,
            output_serializer=_outcome_record(),
            key_prefix=IDEMPOTENCY_KEY_PREFIX,
        )
        return self._idempotent

    def _owned(self, event: InterruptionEvent) -> bool:
        """Whether any instance of the event has a NodeClaim here, from an index: a queue mostly
        carries other clusters' instances, and those must cost no API or DynamoDB call each. An
        instance the index knows is ours whatever the index's age (a NodeClaim's instance never
        changes, and acting reads the objects again by name: a NodeClaim gone since is found
        gone); one it does not know is looked up again once the index is older than
        ``OWNERSHIP_TTL_SECONDS`` (launched since the read). In an AZ-wide reclaim on a loaded
        machine each message of a batch took longer than that, and each listed every NodeClaim
        and Node again. The age is measured on the wall clock: a frozen container's monotonic
        clock may not advance, and an index kept across an hour-long freeze would not know the
        instances launched meanwhile."""
        with self._lock:  # one read for a batch's messages, not one per thread
            now = self.ctx.clock.now().timestamp()
            if self._index is None or (
                not self._index.owns_any(event.instance_ids)
                and not 0 <= now - self._index.read_at <= OWNERSHIP_TTL_SECONDS
            ):
                self._index = OwnershipIndex.read(self.ctx)
            return self._index.owns_any(event.instance_ids)

    def _report(self, outcome: EventOutcome, record: dict[str, Any], received_at: float) -> MessageResult:
        disposition = outcome.disposition
        if disposition is Disposition.NOT_OWNED:
            self._count("IgnoredMessages")
        else:
            self._count("InterruptionsHandled", kind=outcome.event.kind.value)
            self._timing("InterruptionHandlingSeconds", self._clock() - received_at)
        self.logger.info("interruption handled", extra={"disposition": disposition.value, **record})
        return MessageResult(disposition, outcome.event, record)

    def _count(self, name: str, *, kind: str | None = None) -> None:
        metrics = observability.metrics()
        if kind is None:
            with _METRICS_LOCK:  # Powertools' metric set is one dict, flushed when full
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
            return
        # A per-metric dimension needs its own EMF document; the others share the handler's flush.
        observability.emit_metric(
            name=name, unit=MetricUnit.Count, value=1, dimensions={"Kind": kind}, namespace=metrics.namespace
        )

    def _timing(self, name: str, seconds: float) -> None:
        with _METRICS_LOCK:
            observability.metrics().add_metric(name=name, unit=MetricUnit.Seconds, value=round(seconds, 3))

    def _correlate(self, event_id: str | None) -> None:
        """The message's event id on every log line of its handling. In a thread of ``handle_batch``
        it is kept in that thread's context (a copy of the invocation's), so the messages handled
        at once do not put their ids on each other's lines; otherwise on the logger, for the lines
        after it too (the drive of the one event ``spot_events`` handles), until the next."""
        if _IN_BATCH_THREAD.get():
            self.logger.thread_safe_append_keys(correlation_id=event_id)
        else:
            self.logger.set_correlation_id(event_id)


class _Replacing:
    """One invocation's replacement (``flow.replace_displaced``), in a thread of its own beside the
    handling of its messages and its drains: the drain never waits for a lease another writer
    holds (in a 100-node storm the holder's follow-up passes kept its own drains waiting 60 s,
    and a replacement that found the lease held was skipped, its pods left to the provisioner's
    next pass a minute later), and the replacement waits for the lease instead of skipping.
    The first evictions wait for its first pass only when it got the lease at once
    (``before_evictions``): capacity is asked for before any pod is evicted, as before, unless
    another writer has the lease.

    ``add`` hands it the nodes of messages handled since it began: its follow-up passes plan them
    (False once its passes are over: the caller begins another). Its thread runs in a copy of the
    invocation's ``contextvars`` context (``provisioning.parallel`` does the same for launches)."""

    def __init__(
        self,
        ctx: Context,
        nodes: list[str],
        why: str,
        replace: Replacer | None,
        write_deadline: float | None,
        *,
        notices: list[tuple[str, str, str]],
    ) -> None:
        self.nodes = list(nodes)
        self._notices = notices
        self.why = why
        self._lock = threading.Lock()
        self._handed: set[str] = set()
        self._covered: set[str] = set()  # the nodes its passes planned for (or found planned)
        self._over = False
        self._give_up = threading.Event()
        self._passing = threading.Event()  # it holds the lease: its first pass has begun (or it ended)
        self._first_pass = threading.Event()  # its first pass is over (or it ended without one)
        self._result: flow.Replacement | None = None
        self._ctx = ctx
        self._replace = replace
        self._write_deadline = write_deadline
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="replacement", daemon=True
        )
        self._thread.start()

    def add(self, nodes: list[str]) -> bool:
        with self._lock:
            if self._over:
                return False
            self._handed.update(nodes)
            self.nodes.extend(n for n in nodes if n not in self.nodes)
            return True

    def covered(self) -> frozenset[str]:
        """The nodes its passes have covered so far (all of them, once ``add`` says it is over)."""
        with self._lock:
            return frozenset(self._covered)

    def before_evictions(self, lease_wait_seconds: float) -> None:
        """Return once its first pass is done, or once it has waited ``lease_wait_seconds`` for a
        lease another writer holds."""
        if self._passing.wait(lease_wait_seconds):
            self._first_pass.wait()

    def _pass(
        self, ctx: Context, node_names: list[str], *, guard: WriteGuard | None
    ) -> flow.ReplacementReport:
        """The replacement's passes, telling ``before_evictions`` when the first begins and ends."""
        replace = flow.replacer(self._replace)
        self._passing.set()
        try:
            return replace(ctx, node_names, guard=guard)
        finally:
            self._first_pass.set()

    def _more(self) -> set[str]:
        """The nodes handed over since the last look (each given to a pass once)."""
        with self._lock:
            taken, self._handed = self._handed, set()
            return taken

    def _run(self) -> None:
        nodes = list(self.nodes)
        first: flow.Replacement | None = None
        try:
            self._note()
            while True:
                result = flow.replace_displaced(
                    self._ctx,
                    nodes,
                    self.why,
                    self._pass,
                    self._write_deadline,
                    wait=True,
                    more=self._more,
                    give_up=self._give_up.is_set,
                )
                first = first or result
                with self._lock:
                    # Handed over after its passes' last look: once more for those its passes did
                    # not cover, unless it never got the lease (then the provisioner's passes plan
                    # them).
                    self._covered |= result.covered
                    left, self._handed = sorted(self._handed - self._covered), set()
                    if result.report is None or not left:
                        self._over = True
                        break
                nodes = left
        except Exception as exc:  # replace_displaced catches what a pass raises; this is a last resort
            first = flow.Replacement(error=f"{type(exc).__name__}: {exc}")
            with self._lock:
                self._over = True
        finally:
            self._result = first
            self._passing.set()
            self._first_pass.set()

    def _note(self) -> None:
        """Say on each cordoned node's NodeClaim when EC2 takes it (``flow.NOTICE_ANNOTATION``), so
        whichever container holds the writers' lease plans its pods now, with the others', rather
        than once this container's turn on the lease comes (in a 100-node storm one holder made
        all the passes while the other containers' nodes, cordoned, waited for their messages to
        be handled). Here, not before the messages are handled: one patch each on a loaded API
        server delayed the batch's first message. An idempotent write, like the cordon; one that
        fails only loses that."""
        for node, claim, deadline in self._notices:
            try:
                self._ctx.cluster.patch_nodeclaim(
                    claim, {"metadata": {"annotations": {flow.NOTICE_ANNOTATION: deadline}}}
                )
            except NotFound:
                continue
            except Exception as exc:
                self._ctx.logger.warning(
                    "interruption notice not noted on the batch's NodeClaims; each message marks its own",
                    extra={"node": node, "error": f"{type(exc).__name__}: {exc}"},
                )
                return

    def finish(self) -> flow.Replacement:
        """Its result, once its passes are over (a wait for the lease stops now)."""
        self._give_up.set()
        self._thread.join()
        return self._result or flow.Replacement(error="the replacement did not finish")


def _event_key(parsed: Parsed) -> str | None:
    """The id of the event a message acts on (None: one that does not act, or unreadable)."""
    if isinstance(parsed, MalformedMessage | UnparsedMessage) or parsed.action is Action.IGNORE:
        return None
    return parsed.event_id


def _left_behind(world: termination.NodesAndClaims, now: datetime) -> termination.NodesAndClaims:
    """What the resume scan may drive: not the terminations asked for less than
    ``DRIVEN_ELSEWHERE_SECONDS`` ago (their NodeClaim's deletionTimestamp), nor their Nodes — the
    invocation that asked for one drives it for its whole time, and in an AZ-wide reclaim every
    container driving every termination it finds would step each one tens of times over, at tens
    of times the API server requests. A crashed invocation's drain is resumed by the provisioner's
    termination controller (every pass of its loop, at least once a minute), and here once older;
    its message's redelivery is a duplicate once the cordon was recorded."""
    young = [
        claim
        for claim in world.claim_views
        if claim.deleted_at and (now - claim.deleted_at).total_seconds() < DRIVEN_ELSEWHERE_SECONDS
    ]
    return _without(world, young)


def _without(world: termination.NodesAndClaims, nodeclaims: list[ClaimView]) -> termination.NodesAndClaims:
    """``world`` without ``nodeclaims`` and their Nodes (a Node whose NodeClaim is missing from the
    world would look like one deleted by hand without a NodeClaim)."""
    if not nodeclaims:
        return world
    skipped = {c.name for c in nodeclaims}
    their_nodes = {c.node_name for c in nodeclaims} - {None}
    their_instances = {c.instance_id for c in nodeclaims} - {None}
    return termination.NodesAndClaims(
        nodeclaims=[c.raw for c in world.claim_views if c.name not in skipped],
        nodes=[
            n.raw
            for n in world.node_views
            if n.name not in their_nodes and n.instance_id not in their_instances
        ],
    )


def idempotency_persistence(settings: Settings) -> Any:
    """Powertools Idempotency on the state table, with one key space for both functions: the
    static partition key replaces the default one (the Lambda function's name)."""
    from nodewright.cloud.state import idempotency_persistence as on_state_table

    return on_state_table(settings, static_pk_value=IDEMPOTENCY_PARTITION)


def _replayed(response: Any, idempotent_data: DataRecord) -> Replayed:
    """Powertools' response hook, called only when the response comes from the idempotency store:
    the stored record of an event handled before, said as such."""
    return Replayed(dict(response or {}))


def _outcome_record() -> BaseIdempotencySerializer:
    """What the idempotency record stores of an ``EventOutcome`` (its ``record()``), and what a
    replay reads back (the stored dict, which ``_replayed`` then marks). Built on first need: the
    idempotency utility is imported only when a message acts."""
    from aws_lambda_powertools.utilities.idempotency.serialization.base import BaseIdempotencySerializer

    class OutcomeRecord(BaseIdempotencySerializer):
        def to_dict(self, data: EventOutcome) -> dict[str, Any]:
            return data.record()

        def from_dict(self, data: dict[str, Any]) -> dict[str, Any]:
            return data

    return OutcomeRecord()
