"""Label and field selectors, parsed and matched as k8s.io/apimachinery does.

Parse errors raise :class:`SelectorError`; the handlers answer those with 400 BadRequest, as the API
server does for ``?labelSelector=a=b=c`` or an unsupported ``?fieldSelector=spec.foo=bar``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")


class SelectorError(ValueError):
    """A selector that cannot be parsed or is not supported for the resource."""


def valid_label_key(key: str) -> bool:
    if not _KEY_RE.match(key):
        return False
    prefix, _, name = key.rpartition("/")
    return len(name) <= 63 and len(prefix) <= 253


def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_VALUE_RE.match(value))


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # =, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "==", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("gt", "lt"):
            try:
                have, want = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return present and (have > want if self.op == "gt" else have < want)
        return False


class LabelSelector:
    """A parsed ``labelSelector`` query string (equality- and set-based)."""

    def __init__(self, requirements: list[Requirement]) -> None:
        self.requirements = requirements

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


_TOKEN_RE = re.compile(r"\s*(\(|\)|,|!=|==|=|!|>|<|[^\s(),!=<>]+)")


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN_RE.match(text, pos)
        if not match:
            raise SelectorError(f"unable to parse requirement: found '{text[pos:]}'")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse ``a=b,c!=d,e in (f,g),!h,i`` into requirements; raise SelectorError when malformed."""
    if not text or not text.strip():
        return LabelSelector([])
    tokens = _tokens(text)
    reqs: list[Requirement] = []
    i = 0

    def expect_value(idx: int) -> str:
        if idx >= len(tokens) or tokens[idx] in ("(", ")", ",", "=", "==", "!=", "!", ">", "<"):
            found = tokens[idx] if idx < len(tokens) else "EOS"
            if found in (",", "EOS"):
                return ""
            raise SelectorError(f"unable to parse requirement: found '{found}', expected: identifier")
        return tokens[idx]

    while i < len(tokens):
        negate = tokens[i] == "!"
        if negate:
            i += 1
        if i >= len(tokens):
            raise SelectorError("unable to parse requirement: found '', expected: identifier")
        key = tokens[i]
        if key in ("(", ")", ",", "=", "==", "!=", ">", "<"):
            raise SelectorError(f"unable to parse requirement: found '{key}', expected: identifier")
        _check_key(key)
        i += 1
        nxt = tokens[i] if i < len(tokens) else None
        if negate:
            if nxt not in (None, ","):
                raise SelectorError(f"unable to parse requirement: found '{nxt}', expected: ','")
            reqs.append(Requirement(key, "!"))
        elif nxt in (None, ","):
            reqs.append(Requirement(key, "exists"))
        elif nxt in ("=", "==", "!="):
            value = expect_value(i + 1)
            _check_value(value)
            reqs.append(Requirement(key, "!=" if nxt == "!=" else "=", (value,)))
            i += 2 if value else 1
        elif nxt in (">", "<"):
            value = expect_value(i + 1)
            if not value.lstrip("-").isdigit():
                raise SelectorError(
                    "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer"
                )
            reqs.append(Requirement(key, "gt" if nxt == ">" else "lt", (value,)))
            i += 2
        elif nxt in ("in", "notin"):
            i += 1
            if i >= len(tokens) or tokens[i] != "(":
                raise SelectorError("unable to parse requirement: found '', expected: '('")
            i += 1
            values: list[str] = []
            while True:
                if i >= len(tokens):
                    raise SelectorError("unable to parse requirement: found '', expected: ')'")
                tok = tokens[i]
                if tok == ")":
                    i += 1
                    break
                if tok == ",":
                    if not values or tokens[i - 1] in ("(", ","):
                        values.append("")
                    i += 1
                    continue
                _check_value(tok)
                values.append(tok)
                i += 1
            if not values:
                values = [""]
            reqs.append(Requirement(key, nxt, tuple(values)))
        else:
            raise SelectorError(
                f"unable to parse requirement: found '{nxt}', expected: in, notin, =, ==, !=, gt, lt"
            )
        if i < len(tokens):
            if tokens[i] != ",":
                raise SelectorError(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
            if i >= len(tokens):
                raise SelectorError("found '', expected: identifier after ','")
    return LabelSelector(reqs)


_NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_VALUE_PART = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)


def _check_key(key: str) -> None:
    if not valid_label_key(key):
        detail = _NAME_PART if "/" not in key else "prefix part must be a DNS-1123 subdomain"
        raise SelectorError(f'unable to parse requirement: key: Invalid value: "{key}": {detail}')


def _check_value(value: str) -> None:
    if not valid_label_value(value):
        raise SelectorError(
            f'unable to parse requirement: values[0]: Invalid value: "{value}": {_VALUE_PART}'
        )


def match_selector_object(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    """Match a metav1.LabelSelector object (matchLabels/matchExpressions). ``None`` matches nothing."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        key = expr.get("key")
        values = expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# ---------------------------------------------------------------- field selectors


def field_path(*parts: str) -> Callable[[dict[str, Any]], str]:
    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for part in parts:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


FieldGetter = Callable[[dict[str, Any]], str]

# The fields every kind's GetAttrs exposes; each kind's strategy adds its own (strategies/,
# ``field_labels``: kube-apiserver's ToSelectableFields / AddFieldLabelConversionFunc).
COMMON_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": field_path("metadata", "name"),
    "metadata.namespace": field_path("metadata", "namespace"),
}

POD_FIELDS: dict[str, FieldGetter] = {
    "spec.nodeName": field_path("spec", "nodeName"),
    "spec.restartPolicy": field_path("spec", "restartPolicy"),
    "spec.schedulerName": field_path("spec", "schedulerName"),
    "spec.serviceAccountName": field_path("spec", "serviceAccountName"),
    "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
    "status.phase": field_path("status", "phase"),
    "status.podIP": field_path("status", "podIP"),
    "status.nominatedNodeName": field_path("status", "nominatedNodeName"),
}

NODE_FIELDS: dict[str, FieldGetter] = {
    "spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false"
}

PHASE_FIELDS: dict[str, FieldGetter] = {"status.phase": field_path("status", "phase")}

EVENT_FIELDS: dict[str, FieldGetter] = {
    "involvedObject.kind": field_path("involvedObject", "kind"),
    "involvedObject.namespace": field_path("involvedObject", "namespace"),
    "involvedObject.name": field_path("involvedObject", "name"),
    "involvedObject.uid": field_path("involvedObject", "uid"),
    "involvedObject.apiVersion": field_path("involvedObject", "apiVersion"),
    "involvedObject.resourceVersion": field_path("involvedObject", "resourceVersion"),
    "involvedObject.fieldPath": field_path("involvedObject", "fieldPath"),
    "reason": field_path("reason"),
    "reportingComponent": field_path("reportingComponent"),
    "source": field_path("source", "component"),
    "type": field_path("type"),
}

# events.k8s.io/v1's labels (its field label conversion), read from the stored core/v1 shape.
EVENTS_V1_FIELDS: dict[str, FieldGetter] = {
    "regarding.kind": field_path("involvedObject", "kind"),
    "regarding.namespace": field_path("involvedObject", "namespace"),
    "regarding.name": field_path("involvedObject", "name"),
    "regarding.uid": field_path("involvedObject", "uid"),
    "regarding.apiVersion": field_path("involvedObject", "apiVersion"),
    "regarding.resourceVersion": field_path("involvedObject", "resourceVersion"),
    "regarding.fieldPath": field_path("involvedObject", "fieldPath"),
    "reason": field_path("reason"),
    "reportingController": field_path("reportingComponent"),
    "type": field_path("type"),
}

REPLICASET_FIELDS: dict[str, FieldGetter] = {"status.replicas": field_path("status", "replicas")}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # = or !=
    value: str
    get: Callable[[dict[str, Any]], str]

    def matches(self, obj: dict[str, Any]) -> bool:
        have = self.get(obj)
        return have == self.value if self.op == "=" else have != self.value


class FieldSelector:
    def __init__(self, requirements: list[FieldRequirement]) -> None:
        self.requirements = requirements

    def matches(self, obj: dict[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def value_of(self, field: str) -> str | None:
        """The value a ``field=value`` requirement pins, if any (lets the handler narrow a list)."""
        return next((r.value for r in self.requirements if r.field == field and r.op == "="), None)


def parse_field_selector(text: str | None, supported: Mapping[str, FieldGetter]) -> FieldSelector:
    """Parse ``a=b,c!=d`` over the ``supported`` fields (the kind's); another field raises
    SelectorError (a 400)."""
    if not text or not text.strip():
        return FieldSelector([])
    reqs: list[FieldRequirement] = []
    for raw_part in _split_unescaped(text):
        part = raw_part.strip()
        if not part:
            continue
        op = next((o for o in ("!=", "==", "=") if o in part), None)
        if op is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, value = (s.strip() for s in part.split(op, 1))
        if field not in supported:
            raise SelectorError(f"field label not supported: {field}")
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(value), supported[field]))
    return FieldSelector(reqs)


def _split_unescaped(text: str) -> list[str]:
    parts, cur, escaped = [], [], False
    for ch in text:
        if escaped:
            cur.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)
