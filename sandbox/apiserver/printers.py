"""What ``kubectl get`` prints of each kind: the columns of kube-apiserver's printers
(``pkg/printers/internalversion``) for the kinds this project shows, and a CRD's
``additionalPrinterColumns`` for custom objects. Each kind's strategy names its columns
(strategies/, ``table_columns``); tables.py renders them as a ``meta.k8s.io/v1 Table``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .resources import ResourceType

Column = tuple[str, str, Callable[[dict[str, Any]], Any], int]  # name, type, getter, priority


def age(obj: dict[str, Any]) -> str:
    stamp = obj.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    created = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration((datetime.now(UTC) - created).total_seconds())


def human_duration(seconds: float) -> str:
    """duration.HumanDuration as kubectl prints ages."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m{rem}s" if rem else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h{rem}m" if rem else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        rem = hours % 24
        return f"{days}d{rem}h" if rem else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _name(obj: dict[str, Any]) -> str:
    return obj["metadata"]["name"]


def _pod_ready(obj: dict[str, Any]) -> str:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    total = len((obj.get("spec") or {}).get("containers") or [])
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return waiting["reason"]
    return status.get("reason") or status.get("phase") or "Unknown"


def _restarts(obj: dict[str, Any]) -> int:
    return sum(
        int(s.get("restartCount") or 0) for s in (obj.get("status") or {}).get("containerStatuses") or []
    )


def _node_status(obj: dict[str, Any]) -> str:
    ready = next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
    )
    text = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if (obj.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _node_roles(obj: dict[str, Any]) -> str:
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in (obj["metadata"].get("labels") or {}) if k.startswith(prefix))
    return ",".join(roles) or "<none>"


def _readiness_gates(obj: dict[str, Any]) -> str:
    """printPod: ``<ready>/<total>`` of spec.readinessGates, ``<none>`` without any."""
    gates = (obj.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    conditions = {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or []}
    ready = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return f"{ready}/{len(gates)}"


def _address(kind: str) -> Callable[[dict[str, Any]], str]:
    def getter(obj: dict[str, Any]) -> str:
        for address in (obj.get("status") or {}).get("addresses") or []:
            if address.get("type") == kind:
                return address.get("address", "")
        return "<none>"

    return getter


def _node_info(field: str) -> Callable[[dict[str, Any]], str]:
    def getter(obj: dict[str, Any]) -> str:
        value = ((obj.get("status") or {}).get("nodeInfo") or {}).get(field)
        return value or "<unknown>"

    return getter


def _get(*path: str, default: Any = "") -> Callable[[dict[str, Any]], Any]:
    def getter(obj: dict[str, Any]) -> Any:
        cur: Any = obj
        for p in path:
            cur = cur.get(p) if isinstance(cur, dict) else None
        return default if cur is None else cur

    return getter


def _pdb_min(obj: dict[str, Any]) -> Any:
    return (obj.get("spec") or {}).get("minAvailable", "N/A")


def _pdb_max(obj: dict[str, Any]) -> Any:
    return (obj.get("spec") or {}).get("maxUnavailable", "N/A")


def _deploy_ready(obj: dict[str, Any]) -> str:
    return f"{(obj.get('status') or {}).get('readyReplicas', 0)}/{(obj.get('spec') or {}).get('replicas', 0)}"


def _involved(event: dict[str, Any]) -> str:
    involved = event.get("involvedObject") or {}
    return f"{involved.get('kind', '').lower()}/{involved.get('name', '')}"


def _count(*path: str) -> Callable[[dict[str, Any]], int]:
    return lambda obj: len(_get(*path, default=[])(obj) or [])


def _param_kind(policy: dict[str, Any]) -> str:
    kind = (policy.get("spec") or {}).get("paramKind")
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}" if isinstance(kind, dict) else "<unset>"


def _param_ref(binding: dict[str, Any]) -> str:
    """printValidatingAdmissionPolicyBinding: namespace/name, */name, the selector, or <unset>."""
    ref = (binding.get("spec") or {}).get("paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if isinstance(ref.get("selector"), dict):
        return _selector_text(ref["selector"])
    return "<unset>"


def _selector_text(selector: dict[str, Any]) -> str:
    """labels.Selector.String() of a LabelSelector: requirements sorted by key, comma-joined."""
    terms = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(sorted(expression.get("values") or []))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key}.get(
            operator, f"!{key}"
        )
        terms.append((key, text))
    return ",".join(text for _, text in sorted(terms)) or "<none>"


_NAME_COL: Column = ("Name", "string", _name, 0)
_AGE_COL: Column = ("Age", "string", age, 0)

DEFAULT: list[Column] = [_NAME_COL, _AGE_COL]

PODS: list[Column] = [
    _NAME_COL,
    ("Ready", "string", _pod_ready, 0),
    ("Status", "string", _pod_status, 0),
    ("Restarts", "string", _restarts, 0),
    _AGE_COL,
    ("IP", "string", _get("status", "podIP", default="<none>"), 1),
    ("Node", "string", _get("spec", "nodeName", default="<none>"), 1),
    ("Nominated Node", "string", _get("status", "nominatedNodeName", default="<none>"), 1),
    ("Readiness Gates", "string", _readiness_gates, 1),
]

NODES: list[Column] = [
    _NAME_COL,
    ("Status", "string", _node_status, 0),
    ("Roles", "string", _node_roles, 0),
    _AGE_COL,
    ("Version", "string", _get("status", "nodeInfo", "kubeletVersion"), 0),
    ("Internal-IP", "string", _address("InternalIP"), 1),
    ("External-IP", "string", _address("ExternalIP"), 1),
    ("OS-Image", "string", _node_info("osImage"), 1),
    ("Kernel-Version", "string", _node_info("kernelVersion"), 1),
    ("Container-Runtime", "string", _node_info("containerRuntimeVersion"), 1),
]

NAMESPACES: list[Column] = [_NAME_COL, ("Status", "string", _get("status", "phase"), 0), _AGE_COL]

DEPLOYMENTS: list[Column] = [
    _NAME_COL,
    ("Ready", "string", _deploy_ready, 0),
    ("Up-to-date", "integer", _get("status", "updatedReplicas", default=0), 0),
    ("Available", "integer", _get("status", "availableReplicas", default=0), 0),
    _AGE_COL,
]

REPLICASETS: list[Column] = [
    _NAME_COL,
    ("Desired", "integer", _get("spec", "replicas", default=0), 0),
    ("Current", "integer", _get("status", "replicas", default=0), 0),
    ("Ready", "integer", _get("status", "readyReplicas", default=0), 0),
    _AGE_COL,
]

DAEMONSETS: list[Column] = [
    _NAME_COL,
    ("Desired", "integer", _get("status", "desiredNumberScheduled", default=0), 0),
    ("Current", "integer", _get("status", "currentNumberScheduled", default=0), 0),
    ("Ready", "integer", _get("status", "numberReady", default=0), 0),
    _AGE_COL,
]

PODDISRUPTIONBUDGETS: list[Column] = [
    _NAME_COL,
    ("Min Available", "string", _pdb_min, 0),
    ("Max Unavailable", "string", _pdb_max, 0),
    ("Allowed Disruptions", "integer", _get("status", "disruptionsAllowed", default=0), 0),
    _AGE_COL,
]

LEASES: list[Column] = [
    _NAME_COL,
    ("Holder", "string", _get("spec", "holderIdentity"), 0),
    _AGE_COL,
]

WEBHOOK_CONFIGURATIONS: list[Column] = [
    _NAME_COL,
    ("Webhooks", "integer", _count("webhooks"), 0),
    _AGE_COL,
]


VALIDATING_ADMISSION_POLICIES: list[Column] = [
    _NAME_COL,
    ("Validations", "integer", _count("spec", "validations"), 0),
    ("ParamKind", "string", _param_kind, 0),
    _AGE_COL,
]

VALIDATING_ADMISSION_POLICY_BINDINGS: list[Column] = [
    _NAME_COL,
    ("PolicyName", "string", _get("spec", "policyName"), 0),
    ("ParamRef", "string", _param_ref, 0),
    _AGE_COL,
]

CUSTOM_RESOURCE_DEFINITIONS: list[Column] = [
    _NAME_COL,
    ("Created At", "date", _get("metadata", "creationTimestamp"), 0),
]

EVENTS: list[Column] = [
    ("Last Seen", "string", lambda o: o.get("lastTimestamp") or o.get("eventTime") or "", 0),
    ("Type", "string", _get("type"), 0),
    ("Reason", "string", _get("reason"), 0),
    (
        "Object",
        "string",
        _involved,
        0,
    ),
    ("Message", "string", _get("message"), 0),
]


def custom_columns(rt: ResourceType) -> list[Column]:
    columns: list[Column] = [_NAME_COL]
    for col in rt.printer_columns:
        path = col.get("jsonPath", "")
        getter = _jsonpath(path)
        if col.get("type") == "date":
            getter = _as_age(getter)
        columns.append(
            (col.get("name", ""), col.get("type", "string"), getter, int(col.get("priority") or 0))
        )
    if not rt.printer_columns:  # the CRD handler's default: Age only when the CRD declares no columns
        columns.append(_AGE_COL)
    return columns


_FILTER = re.compile(r"^\?\(@\.([A-Za-z0-9_\-]+)\s*==\s*[\"']([^\"']*)[\"']\)$")


def _jsonpath_steps(path: str) -> list[tuple[str, Any]]:
    """Split .a.b\\.c[0][?(@.type=="Ready")]['x.y'] into ("key", k), ("index", i), ("filter", (k, v))."""
    text = path.strip().removeprefix("{").removesuffix("}")
    steps: list[tuple[str, Any]] = []
    i = 0
    while i < len(text):
        if text[i] == ".":
            i += 1
            key = []
            while i < len(text) and text[i] not in ".[":
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                key.append(text[i])
                i += 1
            steps.append(("key", "".join(key)))
        elif text[i] == "[":
            close = text.index("]", text.index(")") if text.startswith("[?", i) else i)
            inner = text[i + 1 : close].strip()
            if inner.isdigit():
                steps.append(("index", int(inner)))
            elif match := _FILTER.match(inner):
                steps.append(("filter", (match.group(1), match.group(2))))
            else:
                steps.append(("key", inner.strip("'\"")))
            i = close + 1
        else:
            i += 1
    return steps


def _jsonpath(path: str) -> Callable[[dict[str, Any]], Any]:
    """The subset of JSONPath printer columns use (escaped dots, indexes, ==-filters)."""
    steps = _jsonpath_steps(path)

    def getter(obj: dict[str, Any]) -> Any:
        cur: Any = obj
        for kind, arg in steps:
            if kind == "key":
                cur = cur.get(arg) if isinstance(cur, dict) else None
            elif kind == "index":
                cur = cur[arg] if isinstance(cur, list) and arg < len(cur) else None
            else:
                key, value = arg
                items = cur if isinstance(cur, list) else []
                cur = next((i for i in items if isinstance(i, dict) and str(i.get(key)) == value), None)
            if cur is None:
                return None
        return cur

    return getter


def _as_age(getter: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    """Custom resources' ``date`` columns print as ages, as the CRD table convertor does."""

    def age_of(obj: dict[str, Any]) -> Any:
        value = getter(obj)
        try:
            then = datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except (TypeError, ValueError):
            return value
        return human_duration((datetime.now(UTC) - then).total_seconds())

    return age_of
