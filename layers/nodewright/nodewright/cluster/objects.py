"""Pure helpers on the plain-dict objects ``Cluster`` returns (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

# The API's timestamps (``api.times``), re-exported (the ``as`` says so to mypy) for the callers
# that read them with the objects.
from nodewright.api.times import format_time as format_time  # noqa: PLC0414
from nodewright.api.times import now_micro as now_micro  # noqa: PLC0414
from nodewright.api.times import now_rfc3339 as now_rfc3339  # noqa: PLC0414
from nodewright.api.times import parse_time as parse_time  # noqa: PLC0414

_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")


def instance_id_from_provider_id(provider_id: str | None) -> str | None:
    """``aws:///us-west-2a/i-0123456789abcdef0`` → ``i-0123456789abcdef0``; None for other providers."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    match = _INSTANCE_ID.search(provider_id.rsplit("/", 1)[-1])
    return match.group(0) if match else None


def nodeclaim_instance_id(nodeclaim: Mapping[str, Any]) -> str | None:
    """The NodeClaim's instance: ``status.instanceID`` when recorded, else from ``status.providerID``."""
    status = nodeclaim.get("status") or {}
    return status.get("instanceID") or instance_id_from_provider_id(status.get("providerID"))


def node_instance_id(node: Mapping[str, Any]) -> str | None:
    return instance_id_from_provider_id((node.get("spec") or {}).get("providerID"))


def nodeclass_name(obj: Mapping[str, Any]) -> str:
    """The EC2NodeClass name a NodeClaim (``spec.nodeClassRef``) or a NodePool
    (``spec.template.spec.nodeClassRef``) refers to; '' when the reference is missing."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "NodePool" or "template" in spec:
        spec = (spec.get("template") or {}).get("spec") or {}
    return str((spec.get("nodeClassRef") or {}).get("name") or "")


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace_of(obj: Mapping[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def has_taint(node: Mapping[str, Any], key: str, effect: str | None = None) -> bool:
    return any(
        t.get("key") == key and (effect is None or t.get("effect") == effect)
        for t in (node.get("spec") or {}).get("taints") or []
    )


def condition(obj: Mapping[str, Any], condition_type: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == condition_type:
            found: dict[str, Any] = cond
            return found
    return None


def set_condition(
    conditions: Iterable[Mapping[str, Any]],
    condition_type: str,
    status: bool | None,
    *,
    reason: str,
    message: str = "",
    now: datetime,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """Conditions with ``condition_type`` set (added, or replaced in place) to True, False or, for
    ``status`` None, Unknown; its ``lastTransitionTime`` moves only when the status changes. The one
    condition upsert: NodeClaims, NodePools, any object."""
    wanted = "Unknown" if status is None else "True" if status else "False"
    new: dict[str, Any] = {"type": condition_type, "status": wanted, "reason": reason, "message": message}
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    result: list[dict[str, Any]] = []
    found = False
    for cond in conditions:
        if cond.get("type") != condition_type:
            result.append(dict(cond))
            continue
        found = True
        unchanged = cond.get("status") == wanted and cond.get("lastTransitionTime")
        result.append(
            {**new, "lastTransitionTime": cond["lastTransitionTime"] if unchanged else format_time(now)}
        )
    if not found:
        result.append({**new, "lastTransitionTime": format_time(now)})
    return result
