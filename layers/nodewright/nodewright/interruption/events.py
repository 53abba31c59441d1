"""Every interruption message shape, parsed into one typed ``InterruptionEvent``.

Shapes (EventBridge ``source`` / ``detail-type`` unless noted):

* ``aws.ec2`` / EC2 Spot Instance Interruption Warning — the instance goes two minutes after ``time``;
* ``aws.ec2`` / EC2 Instance Rebalance Recommendation — elevated risk, no deadline;
* ``aws.ec2`` / EC2 Instance State-change Notification — stopping, stopped, shutting-down and
  terminated act; pending, running and anything else are ignored;
* ``aws.health`` / AWS Health Event, service EC2, category scheduledChange — the affected entities
  (instance ids or ARNs) go at ``startTime`` (RFC 3339 or RFC 1123, may be empty);
* ``aws.ec2`` / EC2 Capacity Reservation Instance Interruption Warning — the instance goes at
  ``instance-termination-time`` (two minutes when absent);
* ``aws.autoscaling`` lifecycle actions, and the same sent straight to SQS by a lifecycle hook
  (no envelope: ``LifecycleTransition`` at the top), including ``autoscaling:TEST_NOTIFICATION``:
  Auto Scaling groups are not ours, so they are acknowledged with the reason;
* any of the above wrapped in an SNS notification (``Type: Notification``, ``Message``: the JSON).

Fields are looked up by name, so field order does not matter; unknown fields are kept and ignored;
optional fields may be missing. Instance ids come from ``detail`` first, then from ``resources``
ARNs (``arn:aws:ec2:<region>:<account>:instance/i-…``, with or without account).

A spot warning must never be lost for a cosmetic reason. AWS's own samples carry placeholders
(``"time": "yyyy-mm-ddThh:mm:ssZ"`` or ``"[Current time]"``, ``"resources": "[instance arn]"``), so:
a ``time`` that is not a timestamp, lies more than ``FUTURE_SKEW`` after the message was received,
or has no zone is replaced by the time the message was received (a zone-less time is read as UTC,
as EventBridge writes them), with a note the caller logs and counts; ``resources`` may be a string;
a missing ``id`` is derived from the message's content (so redeliveries still deduplicate). Only a
message without any usable instance identity, or one that is not JSON, not an object, or not one of
these shapes, raises ``MalformedMessage``: it can never succeed, so callers acknowledge it and count
it instead of retrying it. Parsing is pure, so any error it raises is permanent and is reported as
malformed too (deep nesting, huge numbers).

Maximum age (``MAX_AGE``, measured from the event's ``time`` to ``now`` when the caller gives it):
an older message is acknowledged as stale instead of acted on, because what it announced has
happened or passed and the instance may be healthy now:

* spot interruption warning, 10 minutes: EC2 reclaims the instance two minutes after the notice;
  later, the state-change event and the lifecycle's garbage collection clean up what is left;
* rebalance recommendation, 10 minutes: advice about the capacity pool at that moment;
* capacity-reservation interruption, 10 minutes after the termination time it announces;
* instance state change (stopping, stopped, shutting-down, terminated), 1 hour;
* AWS Health scheduled change, 1 hour after its ``startTime`` (these come days ahead; without a
  start time, 7 days after the event).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any, TypeVar

from aws_lambda_powertools.utilities.parser import parse
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from nodewright.api.times import format_time
from nodewright.spec import deployment

M = TypeVar("M", bound=BaseModel)
SPOT_NOTICE = timedelta(seconds=deployment.SPOT_NOTICE_SECONDS)
# A ``time`` later than this after the message was received is not believed (a placeholder year).
FUTURE_SKEW = timedelta(minutes=15)
INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")

# The detail-types the stack's rules route here (one definition: nodewright/spec/deployment.py).
SPOT_INTERRUPTION = deployment.SPOT_INTERRUPTION
REBALANCE_RECOMMENDATION = deployment.REBALANCE_RECOMMENDATION
STATE_CHANGE = deployment.STATE_CHANGE
HEALTH_EVENT = deployment.HEALTH_EVENT
CAPACITY_RESERVATION_INTERRUPTION = deployment.CAPACITY_RESERVATION_INTERRUPTION
ASG_TEST_NOTIFICATION = "autoscaling:TEST_NOTIFICATION"

ACTING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


class MalformedMessage(ValueError):
    """The message is not JSON, not an object, or not a shape we know: acknowledge and count it."""


class EventKind(StrEnum):
    SPOT_INTERRUPTION = "SpotInterruption"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
    STATE_CHANGE = "StateChange"
    SCHEDULED_CHANGE = "ScheduledChange"
    CAPACITY_RESERVATION_INTERRUPTION = "CapacityReservationInterruption"
    AUTOSCALING_LIFECYCLE = "AutoScalingLifecycle"


class Action(StrEnum):
    REPLACE_AND_DRAIN = "replace-and-drain"  # launch a replacement, cordon, drain, terminate, clean up
    RECORD_ONLY = "record-only"  # a Kubernetes event on the node, nothing else (rebalance, event-only mode)
    IGNORE = "ignore"  # not ours to act on; acknowledged with the reason


class InterruptionEvent(BaseModel):
    """What a message means for us, whatever its shape."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    kind: EventKind
    action: Action
    instance_ids: tuple[str, ...] = ()
    time: datetime | None = None  # when AWS emitted it
    deadline: datetime | None = None  # when the instance goes (None: no hard deadline)
    instance_going: bool = False  # EC2 stops/terminates it itself: no TerminateInstances needed
    state: str | None = None  # instance state (state-change) or instance-action (spot)
    reason: str = ""  # why it is ignored or recorded only; what it is otherwise
    region: str | None = None
    notes: tuple[str, ...] = ()  # what was tolerated (a placeholder time, resources as a string)

    def summary(self) -> dict[str, Any]:
        """The JSON ``nodewright event`` prints and the handlers log."""
        return {
            "eventId": self.event_id,
            "kind": self.kind.value,
            "action": self.action.value,
            "instanceIds": list(self.instance_ids),
            "time": _iso(self.time),
            "deadline": _iso(self.deadline),
            "instanceGoing": self.instance_going,
            "state": self.state,
            "reason": self.reason,
            **({"notes": list(self.notes)} if self.notes else {}),
        }


# ---------------------------------------------------------------------------- raw shapes
class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class EventBridgeEnvelope(_Shape):
    """The EventBridge envelope. ``time`` is the usable event time, filled in by ``parse_message``."""

    id: str = ""
    source: str
    detail_type: str = Field(alias="detail-type")
    raw_time: Any = Field(None, alias="time")
    region: str | None = None
    account: str | None = None
    resources: list[str] = Field(default_factory=list)
    detail: dict[str, Any] = Field(default_factory=dict)
    _time: datetime | None = PrivateAttr(None)
    _notes: list[str] = PrivateAttr(default_factory=list)

    @property
    def time(self) -> datetime | None:
        """The usable event time (see ``_event_time``), set once by ``parse_message``."""
        return self._time

    @property
    def notes(self) -> list[str]:
        return self._notes

    @field_validator("resources", mode="before")
    @classmethod
    def _resources(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [value]  # AWS's sample shows "resources": "[instance arn]"
        if isinstance(value, list):
            return [str(v) for v in value if isinstance(v, str | int | float)]
        return []

    @field_validator("detail", mode="before")
    @classmethod
    def _detail(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else {}

    @field_validator("region", "account", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return value if isinstance(value, str) else None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> Any:
        return value if isinstance(value, str) else ""


class Ec2InstanceDetail(_Shape):
    """The detail of the aws.ec2 events: spot warning, rebalance, state change, capacity reservation."""

    instance_id: str | None = Field(None, alias="instance-id")
    instance_action: str | None = Field(None, alias="instance-action")
    state: str | None = None
    instance_termination_time: datetime | None = Field(None, alias="instance-termination-time")

    @field_validator("instance_id", "instance_action", "state", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return value if isinstance(value, str) else None

    @field_validator("instance_termination_time", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return _timestamp(value)


class AffectedEntity(_Shape):
    entity_value: str = Field("", alias="entityValue")


class HealthDetail(_Shape):
    service: str | None = None
    event_type_category: str | None = Field(None, alias="eventTypeCategory")
    event_type_code: str | None = Field(None, alias="eventTypeCode")
    start_time: str | None = Field(None, alias="startTime")
    affected_entities: list[AffectedEntity] = Field(default_factory=list, alias="affectedEntities")

    @field_validator("affected_entities", mode="before")
    @classmethod
    def _null_as_empty(cls, value: Any) -> Any:
        return value or []


class AutoScalingLifecycle(_Shape):
    """An Auto Scaling lifecycle message: the EventBridge ``detail``, or the direct-to-SQS body."""

    lifecycle_transition: str | None = Field(None, alias="LifecycleTransition")
    event: str | None = Field(None, alias="Event")
    instance_id: str | None = Field(None, alias="EC2InstanceId")
    group: str | None = Field(None, alias="AutoScalingGroupName")
    request_id: str | None = Field(None, alias="RequestId")
    token: str | None = Field(None, alias="LifecycleActionToken")
    time: datetime | None = Field(None, alias="Time")

    @field_validator("time", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return _timestamp(value)

    @property
    def is_test(self) -> bool:
        return ASG_TEST_NOTIFICATION in (self.event, self.lifecycle_transition)


# ---------------------------------------------------------------------------- parsing
def parse_message(
    message: str | bytes | dict[str, Any],
    *,
    rebalance_mode: str = "replace",
    received: datetime | None = None,
    now: datetime | None = None,
) -> InterruptionEvent:
    """One message (an SQS body, or an EventBridge event handed to Lambda) → ``InterruptionEvent``.

    ``rebalance_mode`` is the cluster's setting: ``replace`` acts on rebalance recommendations,
    ``event-only`` records them. ``received``: when the message arrived (SQS ``SentTimestamp``, or
    the invocation's time), used where its own ``time`` is unusable. ``now``: judge the message's age
    against ``MAX_AGE`` (not judged when None). Raises ``MalformedMessage``, and nothing else.
    """
    try:
        event = _parse(message, rebalance_mode, received)
    except MalformedMessage:
        raise
    except (RecursionError, MemoryError) as exc:
        raise MalformedMessage(
            f"message is nested too deeply or too large to parse ({type(exc).__name__})"
        ) from exc
    except Exception as exc:  # parsing is pure: whatever fails now fails on every redelivery
        raise MalformedMessage(f"message could not be parsed: {type(exc).__name__}: {exc}") from exc
    return _judge_age(event, now) if now is not None else event


def _parse(
    message: str | bytes | dict[str, Any], rebalance_mode: str, received: datetime | None
) -> InterruptionEvent:
    body = _as_object(message)
    if body.get("Type") == "Notification" and isinstance(body.get("Message"), str):
        body = _as_object(body["Message"])  # SNS → SQS subscription
    if "detail-type" not in body and ("LifecycleTransition" in body or "Event" in body):
        return _autoscaling(_validate(body, AutoScalingLifecycle), event_id=None, envelope=None)
    envelope = _validate(body, EventBridgeEnvelope)
    envelope._time, time_note = _event_time(envelope.raw_time, received)
    envelope.notes.extend([time_note] if time_note else [])
    if isinstance(body.get("resources"), str):
        envelope.notes.append("resources is a string, not a list; the instance is taken from detail")
    if not envelope.id:
        envelope.id = (
            "derived-"
            + hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:32]
        )
    detail_type = envelope.detail_type
    if envelope.source == "aws.autoscaling":
        return _autoscaling(_validate(envelope.detail, AutoScalingLifecycle), envelope.id, envelope)
    if envelope.source == "aws.health" and detail_type == HEALTH_EVENT:
        return _health(envelope, _validate(envelope.detail, HealthDetail))
    if envelope.source == "aws.ec2":
        detail = _validate(envelope.detail, Ec2InstanceDetail)
        if detail_type == SPOT_INTERRUPTION:
            return _spot(envelope, detail)
        if detail_type == REBALANCE_RECOMMENDATION:
            return _rebalance(envelope, detail, rebalance_mode)
        if detail_type == STATE_CHANGE:
            return _state_change(envelope, detail)
        if detail_type == CAPACITY_RESERVATION_INTERRUPTION:
            return _capacity_reservation(envelope, detail)
    raise MalformedMessage(
        f"unknown event: source {envelope.source!r}, detail-type {detail_type!r}; expected the EC2 spot, "
        "rebalance, state-change, capacity-reservation, AWS Health or Auto Scaling events the stack routes"
    )


# How long after its ``time`` each kind of message is still acted on (see the module docstring).
MAX_AGE: dict[EventKind, timedelta] = {
    EventKind.SPOT_INTERRUPTION: timedelta(minutes=10),
    EventKind.REBALANCE_RECOMMENDATION: timedelta(minutes=10),
    EventKind.CAPACITY_RESERVATION_INTERRUPTION: timedelta(minutes=10),
    EventKind.STATE_CHANGE: timedelta(hours=1),
    EventKind.SCHEDULED_CHANGE: timedelta(hours=1),
}
HEALTH_EVENT_MAX_AGE = timedelta(days=7)


def _judge_age(event: InterruptionEvent, now: datetime) -> InterruptionEvent:
    """The event, or the same event to be ignored as stale when what it announced is long past."""
    if event.action is Action.IGNORE or event.kind not in MAX_AGE or event.time is None:
        return event
    limit, since, what = MAX_AGE[event.kind], event.time, "its time"
    if event.kind is EventKind.SCHEDULED_CHANGE:
        if event.deadline:
            since, what = event.deadline, "its start time"
        else:
            limit = HEALTH_EVENT_MAX_AGE
    elif event.kind is EventKind.CAPACITY_RESERVATION_INTERRUPTION and event.deadline:
        since, what = event.deadline, "the termination time it announced"
    try:
        stale = now - since > limit
    except OverflowError:
        stale = False
    if not stale:
        return event
    return event.model_copy(
        update={
            "action": Action.IGNORE,
            "reason": f"stale: a {event.kind.value} message is acted on for {_span(limit)} after {what} "
            f"({_iso(since)}); acknowledged without acting",
        }
    )


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)} days"
    return f"{minutes // 60} hour(s)" if minutes % 60 == 0 else f"{minutes} minutes"


def _spot(envelope: EventBridgeEnvelope, detail: Ec2InstanceDetail) -> InterruptionEvent:
    action = detail.instance_action or "terminate"
    return InterruptionEvent(
        event_id=envelope.id,
        kind=EventKind.SPOT_INTERRUPTION,
        action=Action.REPLACE_AND_DRAIN,
        instance_ids=_instance_ids(envelope, detail.instance_id),
        time=envelope.time,
        deadline=_after_notice(envelope.time),
        instance_going=True,
        state=action,
        reason=f"spot interruption: EC2 will {action} the instance two minutes after the notice",
        region=envelope.region,
        notes=tuple(envelope.notes),
    )


def _rebalance(envelope: EventBridgeEnvelope, detail: Ec2InstanceDetail, mode: str) -> InterruptionEvent:
    record_only = mode == "event-only"
    return InterruptionEvent(
        event_id=envelope.id,
        kind=EventKind.REBALANCE_RECOMMENDATION,
        action=Action.RECORD_ONLY if record_only else Action.REPLACE_AND_DRAIN,
        instance_ids=_instance_ids(envelope, detail.instance_id),
        time=envelope.time,
        reason=(
            "rebalance recommendation recorded only (REBALANCE_MODE=event-only)"
            if record_only
            else "rebalance recommendation: the spot instance is at elevated risk; replacing it proactively"
        ),
        region=envelope.region,
        notes=tuple(envelope.notes),
    )


def _state_change(envelope: EventBridgeEnvelope, detail: Ec2InstanceDetail) -> InterruptionEvent:
    state = (detail.state or "").lower()
    ids = _instance_ids(envelope, detail.instance_id)
    if state not in ACTING_STATES:
        return InterruptionEvent(
            event_id=envelope.id,
            kind=EventKind.STATE_CHANGE,
            action=Action.IGNORE,
            instance_ids=ids,
            time=envelope.time,
            state=state or None,
            reason=f"instance state {state or '(missing)'!r} needs no action; "
            f"only {', '.join(sorted(ACTING_STATES))} do",
            region=envelope.region,
        )
    return InterruptionEvent(
        event_id=envelope.id,
        kind=EventKind.STATE_CHANGE,
        action=Action.REPLACE_AND_DRAIN,
        instance_ids=ids,
        time=envelope.time,
        deadline=envelope.time,  # the instance is already going: its pods are deleted, not waited for
        instance_going=True,
        state=state,
        reason=f"instance is {state}: replacing it and cleaning up its node and NodeClaim",
        region=envelope.region,
        notes=tuple(envelope.notes),
    )


def _health(envelope: EventBridgeEnvelope, detail: HealthDetail) -> InterruptionEvent:
    category = detail.event_type_category or ""
    service = (detail.service or "").upper()
    entities = [e.entity_value for e in detail.affected_entities if e.entity_value]
    ids = tuple(dict.fromkeys(i for value in entities for i in INSTANCE_ID.findall(value))) or _resource_ids(
        envelope.resources
    )
    if service != "EC2" or category != "scheduledChange":
        return InterruptionEvent(
            event_id=envelope.id,
            kind=EventKind.SCHEDULED_CHANGE,
            action=Action.IGNORE,
            instance_ids=ids,
            time=envelope.time,
            reason=f"AWS Health event for service {service or '?'} category {category or '?'}: only EC2 "
            "scheduledChange needs action",
            region=envelope.region,
        )
    if not ids:
        raise MalformedMessage(
            "AWS Health scheduledChange without an instance id in affectedEntities or resources"
        )
    start = _health_time(detail.start_time)
    return InterruptionEvent(
        event_id=envelope.id,
        kind=EventKind.SCHEDULED_CHANGE,
        action=Action.REPLACE_AND_DRAIN,
        instance_ids=ids,
        time=envelope.time,
        deadline=start,
        reason=f"scheduled EC2 maintenance {detail.event_type_code or ''}".strip()
        + (f" at {_iso(start)}" if start else " (start time not given)"),
        region=envelope.region,
        notes=tuple(envelope.notes),
    )


def _capacity_reservation(envelope: EventBridgeEnvelope, detail: Ec2InstanceDetail) -> InterruptionEvent:
    deadline = detail.instance_termination_time or _after_notice(envelope.time)
    return InterruptionEvent(
        event_id=envelope.id,
        kind=EventKind.CAPACITY_RESERVATION_INTERRUPTION,
        action=Action.REPLACE_AND_DRAIN,
        instance_ids=_instance_ids(envelope, detail.instance_id),
        time=envelope.time,
        deadline=deadline,
        instance_going=True,
        state=detail.instance_action,
        reason="capacity reservation ends: EC2 will reclaim the instance",
        region=envelope.region,
        notes=tuple(envelope.notes),
    )


def _autoscaling(
    message: AutoScalingLifecycle, event_id: str | None, envelope: EventBridgeEnvelope | None
) -> InterruptionEvent:
    ids = (message.instance_id,) if message.instance_id else ()
    reason = (
        "Auto Scaling test notification: acknowledged"
        if message.is_test
        else f"Auto Scaling lifecycle action {message.lifecycle_transition or '?'} for group "
        f"{message.group or '?'}: Auto Scaling groups are not managed by Nodewright"
    )
    return InterruptionEvent(
        event_id=event_id or message.request_id or message.token or "autoscaling-unknown",
        kind=EventKind.AUTOSCALING_LIFECYCLE,
        action=Action.IGNORE,
        instance_ids=ids,
        time=envelope.time if envelope else message.time,
        state=message.lifecycle_transition,
        reason=reason,
        region=envelope.region if envelope else None,
    )


# ---------------------------------------------------------------------------- helpers
def _as_object(message: str | bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(message, dict):
        return message
    try:
        decoded = json.loads(message)
    except (TypeError, ValueError) as exc:
        raise MalformedMessage(f"message is not JSON: {exc}") from exc
    if not isinstance(decoded, dict):
        raise MalformedMessage(f"message is JSON {type(decoded).__name__}, not an object")
    return decoded


def _validate(data: Any, model: type[M]) -> M:
    try:
        return parse(event=data, model=model)
    except (ValidationError, ValueError, TypeError) as exc:
        errors = exc.errors() if isinstance(exc, ValidationError) else None
        where = ", ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors or []) or str(exc)
        raise MalformedMessage(f"not a valid {model.__name__}: {where}") from exc


def _resource_ids(resources: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for arn in resources for i in INSTANCE_ID.findall(arn.rsplit("/", 1)[-1])))


def _instance_ids(envelope: EventBridgeEnvelope, detail_id: str | None) -> tuple[str, ...]:
    ids = tuple(INSTANCE_ID.findall(detail_id or "")) or _resource_ids(envelope.resources)
    if not ids:
        raise MalformedMessage(
            f"{envelope.detail_type!r} names no instance (detail.instance-id or resources)"
        )
    return ids


def _timestamp(value: Any) -> datetime | None:
    """An RFC 3339 time as a zone-aware datetime (a zone-less one read as UTC); None when unusable."""
    if not isinstance(value, str) or not value.strip():
        return value if isinstance(value, datetime) else None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _event_time(raw: Any, received: datetime | None) -> tuple[datetime | None, str | None]:
    """The event's time, or the time it was received when its own is unusable (and a note saying so)."""
    moment = _timestamp(raw)
    if moment is not None and (received is None or moment <= received + FUTURE_SKEW):
        return moment, None
    if raw in (None, ""):
        return received, None
    why = "is not a timestamp" if moment is None else "lies in the future"
    fallback = f"the time the message was received ({_iso(received)})" if received else "no time"
    return received, f"time {str(raw)[:40]!r} {why}; used {fallback} instead"


def _after_notice(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    try:
        return moment + SPOT_NOTICE
    except OverflowError:
        return moment


def _health_time(value: str | None) -> datetime | None:
    """AWS Health times come as RFC 3339 or RFC 1123 (``Sat, 05 Jun 2016 15:10:09 GMT``), or empty."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime | None) -> str | None:
    """``api.times.format_time``, None for no time."""
    return format_time(moment) if moment else None
