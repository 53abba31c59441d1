"""PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Strategic merge knows the patch strategies of the built-in types by field name (the ``patchMergeKey``
tags of k8s.io/api): lists of containers, volumes, env, conditions... merge by key, ``finalizers`` merge
as a set, every other list (taints, tolerations, args) is replaced whole. The ``$patch``,
``$retainKeys``, ``$setElementOrder/`` and ``$deleteFromPrimitiveList/`` directives kubectl emits are
honoured.
"""

from __future__ import annotations

import copy
from typing import Any

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """A patch that cannot be applied (422) — ``bad_request`` marks a malformed one (400)."""

    def __init__(self, message: str, *, bad_request: bool = False) -> None:
        super().__init__(message)
        self.bad_request = bad_request


# field name -> merge key (None: merge a list of primitives as a set)
MERGE_KEYS: dict[str, str | None] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "env": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "finalizers": None,
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", bad_request=True)
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    result = copy.deepcopy(target)
    retain = patch.get("$retainKeys")
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            current = result.get(key)
            result[key] = _smp_map(current if isinstance(current, dict) else {}, value)
            if value.get("$patch") == "delete":
                result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            current = result.get(key)
            result[key] = _smp_list(current if isinstance(current, list) else [], value, MERGE_KEYS[key])
        else:
            result[key] = copy.deepcopy(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _reorder(result[field], order, MERGE_KEYS.get(field))
    return result


def _smp_list(target: list[Any], patch: list[Any], merge_key: str | None) -> list[Any]:
    if merge_key is None:  # a set of primitives
        result = list(target)
        for value in patch:
            if isinstance(value, dict) and value.get("$patch") == "replace":
                return []
            if value not in result:
                result.append(value)
        return result
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [
            copy.deepcopy({k: v for k, v in p.items() if k != "$patch"})
            for p in patch
            if p.get("$patch") != "replace"
        ]
    result = copy.deepcopy(target)
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"cannot merge a non-object list item into a list merged by {merge_key}")
        key_value = item.get(merge_key)
        index = next(
            (i for i, t in enumerate(result) if isinstance(t, dict) and t.get(merge_key) == key_value), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append(_smp_map({}, item))
        else:
            result[index] = _smp_map(result[index], item)
    return result


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    """Apply ``$setElementOrder``: listed items first in that order, the rest after, as kept."""

    def ident(item: Any) -> Any:
        return item.get(merge_key) if merge_key and isinstance(item, dict) else item

    wanted = [ident(o) for o in order]
    ranked = sorted(
        enumerate(items),
        key=lambda pair: (wanted.index(ident(pair[1])) if ident(pair[1]) in wanted else len(wanted), pair[0]),
    )
    return [item for _, item in ranked]


# ----------------------------------------------------------------------------- JSON patch


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {pointer}")
    return [_unescape(p) for p in pointer[1:].split("/")]


def _walk(doc: Any, parts: list[str], pointer: str) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict):
            if part not in cur:
                raise PatchError(f'doc is missing path: "{pointer}": missing value')
            cur = cur[part]
        elif isinstance(cur, list):
            index = _index(part, len(cur), pointer)
            cur = cur[index]
        else:
            raise PatchError(f'doc is missing path: "{pointer}": missing value')
    return cur


def _index(part: str, length: int, pointer: str, *, allow_end: bool = False) -> int:
    if part == "-" and allow_end:
        return length
    if not part.isdigit():
        raise PatchError(f"Unable to access invalid index: {part}: invalid index referenced: {pointer}")
    index = int(part)
    if index > length or (index == length and not allow_end):
        raise PatchError(f"Unable to access invalid index: {index}: invalid index referenced: {pointer}")
    return index


def json_patch(doc: Any, operations: Any) -> Any:
    """Apply RFC 6902 operations (with evanphx/json-patch's leniency: replace of a missing key adds it)."""
    if not isinstance(operations, list):
        raise PatchError(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch", bad_request=True
        )
    doc = copy.deepcopy(doc)
    for op in operations:
        if not isinstance(op, dict):
            raise PatchError(
                "json: cannot unmarshal into Go value of type jsonpatch.Operation", bad_request=True
            )
        kind = op.get("op")
        path = op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"operation missing path: {kind}")
        if kind == "test":
            try:
                have = _walk(doc, _split_pointer(path), path)
            except PatchError:
                have = None
            if have != op.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        elif kind in ("add", "replace"):
            if "value" not in op:
                raise PatchError(f'{kind} operation does not apply: doc is missing value: "{path}"')
            doc = _put(doc, path, copy.deepcopy(op["value"]), insert=kind == "add")
        elif kind == "remove":
            doc, _ = _take(doc, path)
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"{kind} operation missing from")
            if kind == "move":
                doc, value = _take(doc, source)
            else:
                value = copy.deepcopy(_walk(doc, _split_pointer(source), source))
            doc = _put(doc, path, value, insert=True)
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


def _put(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    parts = _split_pointer(path)
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        index = _index(last, len(parent), path, allow_end=insert)
        if insert:
            parent.insert(index, value)
        else:
            parent[index] = value
    else:
        raise PatchError(f'doc is missing path: "{path}": missing value')
    return doc


def _take(doc: Any, path: str) -> tuple[Any, Any]:
    parts = _split_pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f'remove operation does not apply: doc is missing path: "{path}"')
        return doc, parent.pop(last)
    if isinstance(parent, list):
        index = _index(last, len(parent), path)
        return doc, parent.pop(index)
    raise PatchError(f'remove operation does not apply: doc is missing path: "{path}"')
