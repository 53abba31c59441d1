"""Defensive accessors for user manifests: a field of the wrong shape reads as empty.

The structural check in ``api.validation`` reports the wrong shape once; the value rules and the
converter read through these so that a malformed field never raises.
"""

from __future__ import annotations

from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a mapping, else ``{}``."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else ``[]``."""
    return value if isinstance(value, list) else []


def dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]...`` through mappings only; ``None`` as soon as a step is missing or not a mapping."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def kind_of(doc: Any) -> tuple[str, str] | None:
    """``(apiVersion, kind)`` when both are strings, else None: a key safe to look up in a set (a
    list in ``apiVersion`` must be a finding, not ``TypeError: unhashable type``)."""
    if not isinstance(doc, dict):
        return None
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    return (api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else None
