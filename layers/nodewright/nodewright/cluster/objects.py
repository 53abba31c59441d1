"""Pure helpers on the plain-dict objects ``Cluster`` returns (no I/O)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_INSTANCE_ID = re.compile(r"\bi-[0-9a-f]{8,17}\b")


def now_rfc3339() -> str:
    """``metav1.Time``: second precision, UTC, ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """``metav1.MicroTime`` (Lease renewTime/acquireTime)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> datetime | None:
    """An API timestamp (Time or MicroTime) as an aware datetime; None when absent or unreadable."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def instance_id_from_provider_id(provider_id: str | None) -> str | None:
    """``aws:///us-west-2a/i-0123456789abcdef0`` → ``i-0123456789abcdef0``; None for other providers."""
    if not provider_id or not provider_id.startswith("aws://"):
        return None
    match = _INSTANCE_ID.search(provider_id.rsplit("/", 1)[-1])
    return match.group(0) if match else None


def nodeclaim_instance_id(nodeclaim: dict[str, Any]) -> str | None:
    """The NodeClaim's instance: ``status.instanceID`` when recorded, else from ``status.providerID``."""
    status = nodeclaim.get("status") or {}
    return status.get("instanceID") or instance_id_from_provider_id(status.get("providerID"))


def node_instance_id(node: dict[str, Any]) -> str | None:
    return instance_id_from_provider_id((node.get("spec") or {}).get("providerID"))


def name_of(obj: dict[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def namespace_of(obj: dict[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")


def labels_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def has_taint(node: dict[str, Any], key: str, effect: str | None = None) -> bool:
    return any(
        t.get("key") == key and (effect is None or t.get("effect") == effect)
        for t in (node.get("spec") or {}).get("taints") or []
    )


def condition(obj: dict[str, Any], condition_type: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == condition_type:
            return cond
    return None


def upsert_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """Conditions with ``new`` merged by type; ``lastTransitionTime`` moves only when the status changes."""
    result: list[dict[str, Any]] = []
    replaced = False
    for cond in conditions:
        if cond.get("type") != new["type"]:
            result.append(cond)
            continue
        merged = {**cond, **new}
        if cond.get("status") == new.get("status") and cond.get("lastTransitionTime"):
            merged["lastTransitionTime"] = cond["lastTransitionTime"]
        else:
            merged["lastTransitionTime"] = new.get("lastTransitionTime") or now_rfc3339()
        result.append(merged)
        replaced = True
    if not replaced:
        result.append({"lastTransitionTime": now_rfc3339(), **new})
    return result
