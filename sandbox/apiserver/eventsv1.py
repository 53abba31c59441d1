"""``events.k8s.io/v1`` Events: the same objects as core/v1 Events, seen through another shape.

kube-apiserver stores both groups' Events in one place (the storage factory's cohabitating
resources: ``events`` and ``events.k8s.io/events``): an Event written through one group is read,
listed and watched through the other, converted as ``pkg/apis/events/v1/conversion.go`` converts
it: ``regarding`` is ``involvedObject``, ``note`` is ``message``, ``reportingController`` is
``reportingComponent``, the ``deprecated*`` fields are ``source``, ``firstTimestamp``,
``lastTimestamp`` and ``count``. The emulator stores the core/v1 shape and converts on the way in
and out (``to_core``/``from_core``), so kube-scheduler's Events (events.k8s.io/v1 since the events
library's adapter finds that group) show in ``kubectl get events`` and ``describe`` as on a real
cluster.

Validation is ``ValidateEventCreate``'s: every Event passes the legacy checks (an Event with an
``eventTime`` names its reporting controller and instance, its action and reason, within their
lengths); one created through events.k8s.io/v1 also needs an ``eventTime``, a type of Normal or
Warning, a well-formed series, and none of the deprecated fields.
"""

from __future__ import annotations

from typing import Any

from .errors import FieldError
from .selectors import valid_label_key

KEY = ("events.k8s.io", "events")
CORE_KEY = ("", "events")
API_VERSION = "events.k8s.io/v1"
# pkg/apis/core/validation/events.go
REPORTING_INSTANCE_LIMIT = 128
ACTION_LIMIT = 128
REASON_LIMIT = 128
NOTE_LIMIT = 1024

# events.k8s.io/v1 field <-> core/v1 field, for the fields whose names differ.
_RENAMED = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
)
# Fields the two shapes share.
_SHARED = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "related", "type")


def to_core(event: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as core/v1 stores it (core/v1's always-present fields filled in)."""
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Event"}
    for name in _SHARED:
        if name in event:
            out[name] = event[name]
    for ours, core in _RENAMED:
        if event.get(ours) not in (None, "", 0, {}):
            out[core] = event[ours]
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    out.setdefault("reportingComponent", "")
    out.setdefault("reportingInstance", "")
    for name in ("firstTimestamp", "lastTimestamp", "eventTime"):
        out.setdefault(name, None)
    return out


def from_core(event: dict[str, Any]) -> dict[str, Any]:
    """A stored core/v1 Event as events.k8s.io/v1 shows it (its JSON: ``eventTime``, ``regarding``,
    ``deprecatedSource`` and the deprecated timestamps always present, empty strings omitted)."""
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Event"}
    for name in _SHARED:
        if event.get(name) not in (None, "") or name == "eventTime":
            out[name] = event.get(name)
    for ours, core in _RENAMED:
        value = event.get(core)
        if value not in (None, "", 0):
            out[ours] = value
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    out.setdefault("deprecatedFirstTimestamp", None)
    out.setdefault("deprecatedLastTimestamp", None)
    return out


def validate(event: dict[str, Any], *, through_events_v1: bool) -> list[FieldError]:
    """ValidateEventCreate of ``event`` (its request's shape: events.k8s.io/v1 when
    ``through_events_v1``, else core/v1)."""
    core = to_core(event) if through_events_v1 else event
    problems = _legacy(core, "reportingController" if through_events_v1 else "reportingComponent")
    if not through_events_v1:
        return problems
    if not event.get("eventTime"):
        problems.append(FieldError.required("eventTime"))
    if event.get("type") not in ("Normal", "Warning"):
        problems.append(FieldError.invalid("type", "", f"has invalid value: {event.get('type') or ''}"))
    for name in ("deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"):
        if event.get(name):
            problems.append(FieldError.invalid(name, "", "needs to be unset"))
    if event.get("deprecatedSource"):
        problems.append(FieldError.invalid("deprecatedSource", "", "needs to be unset"))
    series = event.get("series")
    if series is not None:
        if not isinstance(series, dict) or int(series.get("count") or 0) < 2:
            problems.append(FieldError.invalid("series.count", "", "should be at least 2"))
        if not isinstance(series, dict) or not series.get("lastObservedTime"):
            problems.append(FieldError.required("series.lastObservedTime"))
    return problems


def _legacy(event: dict[str, Any], controller_field: str) -> list[FieldError]:
    """legacyValidateEvent, on the core/v1 shape."""
    problems: list[FieldError] = []
    involved = (event.get("involvedObject") or {}).get("namespace") or ""
    namespace = (event.get("metadata") or {}).get("namespace") or ""
    mismatch = FieldError.invalid("involvedObject.namespace", involved, "does not match event.namespace")
    if not event.get("eventTime"):  # an old-style Event: its namespace is its object's
        if (not involved and namespace not in ("", "default")) or (involved and involved != namespace):
            problems.append(mismatch)
        return problems
    if not involved and namespace not in ("default", "kube-system"):
        problems.append(mismatch)
    controller = event.get("reportingComponent") or ""
    if not controller:
        problems.append(FieldError.required(controller_field))
    elif not valid_label_key(controller):  # ValidateQualifiedName: a label key's rules
        problems.append(FieldError.invalid(controller_field, controller, "must be a qualified name"))
    for name, limit in (
        ("reportingInstance", REPORTING_INSTANCE_LIMIT),
        ("action", ACTION_LIMIT),
        ("reason", REASON_LIMIT),
    ):
        value = event.get(name) or ""
        if not value:
            problems.append(FieldError.required(name))
        elif len(value) > limit:
            problems.append(FieldError.invalid(name, "", f"can have at most {limit} characters"))
    if len(event.get("message") or "") > NOTE_LIMIT:
        problems.append(FieldError.invalid("message", "", f"can have at most {NOTE_LIMIT} characters"))
    return problems
