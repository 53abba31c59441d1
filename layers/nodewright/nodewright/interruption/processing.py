"""The core both interruption functions call: one message in, a disposition out, acting at most once.

``InterruptionProcessor.handle(message)`` parses the message, and for events that act runs
``flow.handle_event`` inside Powertools Idempotency keyed on the event id, over the state table
with one key space shared by both functions (``key_prefix`` and static partition key fixed here, not
derived from the Lambda function's name) — so the SQS path and the direct EventBridge path act once
for the same event whichever comes first, and a redelivery replays the stored outcome.

Dispositions and what the SQS handler does with them:

* ``acted`` / ``recorded`` — done; ``ignored`` (not ours, with the reason) / ``not-owned``
  (no NodeClaim for the instance) / ``duplicate`` — acknowledged;
* ``malformed`` — can never succeed: logged, counted (``MalformedMessages``), acknowledged;
* a message acted on although a field was unusable (a placeholder ``time``, ``resources`` as a
  string) is logged as a warning and counted (``MessagesTolerated``); one older than its kind's
  maximum age is ignored as stale and counted (``StaleMessages``, see ``events.MAX_AGE``);
* exceptions — transient trouble (API server unreachable, throttling, the same event in progress
  in the other function): the SQS handler lets only that message return to the queue.

``drive(budget_seconds)`` then runs the drains this invocation started, plus any a previous one left
half-done, until they finish or the time is spent.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from nodewright import observability, termination
from nodewright.interruption.events import Action, InterruptionEvent, MalformedMessage, parse_message
from nodewright.interruption.flow import EventOutcome, OwnershipIndex, Replacer, handle_event

if TYPE_CHECKING:
    from nodewright.context import ContainerContext, Context
    from nodewright.settings import Settings

IDEMPOTENCY_KEY_PREFIX = "nodewright-interruption"
# An instance launched less than this long ago may be missed by a cached ownership index: EC2 gives
# no interruption notice that early in practice, and the index is dropped after every action.
OWNERSHIP_TTL_SECONDS = 2.0
# How often a warm container looks for terminations an earlier invocation left half-done (the
# provisioning lifecycle also finishes them every minute).
RESUME_SCAN_SECONDS = 10.0
# Event ids this warm container has handled, newest last: a redelivery after the node is gone (no
# NodeClaim left to own it) is still told apart as a duplicate, without a DynamoDB read.
RECENT_EVENTS = 512
IDEMPOTENCY_PARTITION = "idempotency#nodewright-interruption"
IDEMPOTENCY_TTL_SECONDS = (
    6 * 3600
)  # longer than any redelivery (SQS retention 300 s, EventBridge retries 24 h)


class Disposition(StrEnum):
    ACTED = "acted"
    RECORDED = "recorded"
    IGNORED = "ignored"
    NOT_OWNED = "not-owned"
    DUPLICATE = "duplicate"
    MALFORMED = "malformed"


class EventInProgress(RuntimeError):
    """The same event is being handled by the other path right now; retry later (transient)."""

    transient = True


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
        self._act_once: Callable[..., dict[str, Any]] | None = None
        self._started: list[tuple[termination.Termination, float]] = []
        self._fresh_event: str | None = None
        self._config: Any = None
        self._index: OwnershipIndex | None = None
        self._last_resume_scan = float("-inf")
        self._received_at = 0.0
        self._recent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.logger = observability.logger()

    # ------------------------------------------------------------------ public
    @property
    def settings(self) -> Settings:
        return self._container.settings

    @property
    def ctx(self) -> Context:
        return self._container.get()

    def handle(
        self,
        message: str | bytes | dict[str, Any],
        *,
        received_at: float | None = None,
        sent: datetime | None = None,
        lambda_context: Any = None,
    ) -> MessageResult:
        """Parse and act on one message; raises only for transient trouble (see the module docstring).

        ``sent``: when the message entered the queue (SQS ``SentTimestamp``); stands in for an
        unusable event ``time``, as does the time of this call when it is not given.
        """
        received_at = self._clock() if received_at is None else received_at
        self.logger.set_correlation_id(None)  # never leave the previous message's id on this one
        now = self._wall_clock()
        try:
            event = parse_message(
                message, rebalance_mode=self.settings.rebalance_mode, received=sent or now, now=now
            )
        except MalformedMessage as exc:
            self.logger.warning("malformed interruption message acknowledged", extra={"error": str(exc)})
            self._count("MalformedMessages")
            return MessageResult(Disposition.MALFORMED, error=str(exc))
        self.logger.set_correlation_id(event.event_id)
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
        if event.event_id in self._recent:
            return self._duplicate(event, self._recent[event.event_id])
        if not self._owned(event):
            self.logger.info(
                "instances not owned by this cluster (no NodeClaim); acknowledged",
                extra={"instances": list(event.instance_ids), "kind": event.kind.value},
            )
            self._count("IgnoredMessages")
            return MessageResult(Disposition.NOT_OWNED, event)
        self._received_at = received_at
        stored, fresh = self._act(event, lambda_context)
        self._index = None  # this event changed what the cluster owns
        self._recent[event.event_id] = stored
        while len(self._recent) > RECENT_EVENTS:
            self._recent.popitem(last=False)
        if not fresh:
            return self._duplicate(event, stored)
        return self._report(event, stored, received_at)

    def drive(self, budget_seconds: float) -> list[dict[str, Any]]:
        """Run the drains started here, and any left half-done before, for at most ``budget_seconds``."""
        started = {t.nodeclaim: t for t, _ in self._started}
        received = {t.nodeclaim: at for t, at in self._started}
        self._started = []
        if not self._container.connected and not started:
            return []  # nothing needed the cluster in this invocation: no need to connect just to look
        terms = [t for t in started.values() if not t.done]
        now = self._clock()
        if now - self._last_resume_scan >= RESUME_SCAN_SECONDS:
            self._last_resume_scan = now
            terms += [t for t in termination.pending_terminations(self.ctx) if t.nodeclaim not in started]
        if terms:
            termination.run(self.ctx, terms, budget_seconds=budget_seconds)
        for term in list(started.values()) + terms:
            if term.done and term.nodeclaim in received:
                self._timing("NodeDrainedSeconds", self._clock() - received.pop(term.nodeclaim))
        summaries = [t.summary() for t in terms]
        unfinished = [s for s in summaries if not s["done"]]
        if unfinished:
            self.logger.warning(
                "drains not finished in this invocation; the next one resumes them",
                extra={"terminations": unfinished},
            )
        return summaries

    # ------------------------------------------------------------------ internals
    def _duplicate(self, event: InterruptionEvent, stored: dict[str, Any]) -> MessageResult:
        self.logger.info("event already handled; nothing done again", extra={"eventId": event.event_id})
        self._count("DuplicateMessages")
        return MessageResult(Disposition.DUPLICATE, event, stored)

    def _act(self, event: InterruptionEvent, lambda_context: Any) -> tuple[dict[str, Any], bool]:
        """``flow.handle_event`` once per event id; the outcome and whether this call ran it."""
        self._fresh_event = None
        payload = {"event_id": event.event_id}
        act = self._idempotent_act()
        if act is None:  # no state table (CLI, offline): nothing to deduplicate against
            return self._act_fresh(payload=payload, event=event), True
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
        )

        if lambda_context is not None:
            self._config.register_lambda_context(lambda_context)
        try:
            result = dict(act(payload=payload, event=event))
        except IdempotencyAlreadyInProgressError as exc:
            raise EventInProgress(f"event {event.event_id} is being handled by the other path") from exc
        return result, self._fresh_event == event.event_id

    def _act_fresh(self, *, payload: dict[str, Any], event: InterruptionEvent) -> dict[str, Any]:
        """The action itself (``payload`` only carries the idempotency key)."""
        self._fresh_event = event.event_id
        outcome: EventOutcome = handle_event(self.ctx, event, replace=self._replace)
        self._started.extend((t, self._received_at) for t in outcome.terminations if t.nodeclaim)
        return outcome.as_dict()

    def _idempotent_act(self) -> Callable[..., dict[str, Any]] | None:
        if self._act_once is not None:
            return self._act_once
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
        )
        self._act_once = idempotent_function(
            self._act_fresh,
            data_keyword_argument="payload",
            persistence_store=persistence,
            config=self._config,
            key_prefix=IDEMPOTENCY_KEY_PREFIX,
        )
        return self._act_once

    def _owned(self, event: InterruptionEvent) -> bool:
        """Whether any instance of the event has a NodeClaim here, from an index at most
        ``OWNERSHIP_TTL_SECONDS`` old: a queue mostly carries other clusters' instances, and those
        must cost no API or DynamoDB call each. Acting re-reads everything fresh. The age is
        measured on the wall clock: a frozen container's monotonic clock may not advance, and an
        index kept across an hour-long freeze would not know the instances launched meanwhile."""
        now = self.ctx.clock.now().timestamp()
        if self._index is None or not 0 <= now - self._index.read_at <= OWNERSHIP_TTL_SECONDS:
            self._index = OwnershipIndex.read(self.ctx)
        return self._index.owns_any(event.instance_ids)

    def _report(self, event: InterruptionEvent, stored: dict[str, Any], received_at: float) -> MessageResult:
        if stored.get("recorded"):
            disposition = Disposition.RECORDED
        elif stored.get("terminating") or stored.get("resumed"):
            disposition = Disposition.ACTED
        else:
            disposition = Disposition.NOT_OWNED
        if disposition is Disposition.NOT_OWNED:
            self._count("IgnoredMessages")
        else:
            self._count("InterruptionsHandled", kind=event.kind.value)
            self._timing("InterruptionHandlingSeconds", self._clock() - received_at)
        self.logger.info("interruption handled", extra={"disposition": disposition.value, **stored})
        return MessageResult(disposition, event, stored)

    def _count(self, name: str, *, kind: str | None = None) -> None:
        metrics = observability.metrics()
        if kind is None:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
            return
        # A per-metric dimension needs its own EMF document; the others share the handler's flush.
        with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=metrics.namespace) as metric:
            metric.add_dimension(name="Kind", value=kind)

    def _timing(self, name: str, seconds: float) -> None:
        observability.metrics().add_metric(name=name, unit=MetricUnit.Seconds, value=round(seconds, 3))


def idempotency_persistence(settings: Settings) -> Any:
    """Powertools Idempotency on the state table, with one key space for both functions: the
    static partition key replaces the default one (the Lambda function's name)."""
    from nodewright.cloud.state import idempotency_persistence as on_state_table

    return on_state_table(settings, static_pk_value=IDEMPOTENCY_PARTITION)
