"""PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902).

Strategic merge knows the patch strategies of the built-in types by field name (the ``patchMergeKey``
tags of k8s.io/api): lists of containers, volumes, env, conditions... merge by key, ``finalizers`` merge
as a set, every other list (taints, tolerations, args) is replaced whole. The ``$patch``,
``$retainKeys``, ``$setElementOrder/`` and ``$deleteFromPrimitiveList/`` directives kubectl emits are
honoured.
"""

from __future__ import annotations

from typing import Any

from .encoding import copy_json

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
        return copy_json(patch)
    result = copy_json(target) if isinstance(target, dict) else {}
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
        return {k: copy_json(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    result = copy_json(target)
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
            result[key] = copy_json(value)
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            # $setElementOrder, as mergePatchIntoOriginal applies it: against the list before the patch.
            before = target.get(field)
            result[field] = _normalize_order(
                result[field], order, before if isinstance(before, list) else [], MERGE_KEYS.get(field)
            )
    return result


def _smp_list(target: list[Any], patch: list[Any], merge_key: str | None) -> list[Any]:
    """``mergeSlice`` of apimachinery's strategicpatch: merge, then put the result in its order."""
    if merge_key is None:  # a set of primitives
        if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
            return []
        merged = list(target)
        for value in patch:
            if value not in merged:
                merged.append(value)
        return _normalize_order(merged, patch, target, None)
    original = copy_json(target)
    plain: list[dict[str, Any]] = []
    replace = False
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"cannot merge a non-object list item into a list merged by {merge_key}")
        directive = item.get("$patch")
        if directive == "delete":
            original = [
                t for t in original if not (isinstance(t, dict) and t.get(merge_key) == item.get(merge_key))
            ]
        elif directive == "replace":
            replace = True
        elif directive is not None:
            raise PatchError(f"Unknown patch type: {directive} in map: {item}")
        else:
            plain.append(item)
    if replace:
        original, plain = [_smp_map({}, p) for p in plain], []
    merged = list(original)
    for item in plain:
        key_value = item.get(merge_key)
        index = next(
            (i for i, t in enumerate(merged) if isinstance(t, dict) and t.get(merge_key) == key_value), None
        )
        if index is None:
            merged.append(_smp_map({}, item))
        else:
            merged[index] = _smp_map(merged[index], item)
    return _normalize_order(merged, plain, original, merge_key)


def _normalize_order(
    merged: list[Any], patch_order: list[Any], server_order: list[Any], merge_key: str | None
) -> list[Any]:
    """``normalizeElementOrder``: the items the patch names, in the patch's order, and the items only the
    server has, in the live object's order, merged so that a server-only item goes before a patch item
    only when the live object had it first. An item the live object did not have goes before the
    server-only items still to place: a strategic merge patch that adds a condition (no
    ``$setElementOrder``) puts it first, as kube-apiserver does."""

    def ident(item: Any) -> Any:
        return item.get(merge_key) if merge_key and isinstance(item, dict) else item

    def position(items: list[Any], item: Any) -> int:
        wanted = ident(item)
        return next((i for i, o in enumerate(items) if ident(o) == wanted), -1)

    named = [ident(o) for o in patch_order]
    patch_items = sorted((m for m in merged if ident(m) in named), key=lambda m: position(patch_order, m))
    server_only = sorted(
        (m for m in merged if ident(m) not in named), key=lambda m: position(server_order, m)
    )
    result: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if j >= len(patch_items):
            result.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            result.append(patch_items[j])
            j += 1
        else:
            left, right = position(server_order, server_only[i]), position(server_order, patch_items[j])
            if left >= 0 and right >= 0 and left < right:
                result.append(server_only[i])
                i += 1
            else:
                result.append(patch_items[j])
                j += 1
    return result


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
    doc = copy_json(doc)
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
            doc = _put(doc, path, copy_json(op["value"]), insert=kind == "add")
        elif kind == "remove":
            doc, _ = _take(doc, path)
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(f"{kind} operation missing from")
            if kind == "move":
                doc, value = _take(doc, source)
            else:
                value = copy_json(_walk(doc, _split_pointer(source), source))
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
