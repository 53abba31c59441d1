"""Field ownership (``metadata.managedFields``) and server-side apply, as kube-apiserver does them.

Every write records who set which fields (structured-merge-diff's model, in its ``FieldsV1`` form):

* a create, update or patch is an ``Update`` by its manager (``?fieldManager=``, else the
  User-Agent's product name, as ``prefixFromUserAgent``): it owns the fields it set or changed,
  which no other manager owns any more; fields it removed are owned by nobody;
* an apply (``application/apply-patch+yaml``) is an ``Apply``: the manager owns exactly the fields
  of its applied configuration. A field another manager owns with a different value is a 409
  conflict (``FieldManagerConflict`` causes) unless ``force=true``, which takes the field over.
  Fields the manager applied before and no longer applies are removed, unless another manager
  still owns them.

Lists are merged and owned as their schema says: associative lists by key (``k:{"name":"c"}``,
e.g. containers, env, conditions, ownerReferences), sets by value (finalizers), the rest atomically;
a CRD's ``x-kubernetes-list-type``/``-list-map-keys``/``-map-type`` are honoured. Label selectors
are atomic, as their Go type says.
"""

from __future__ import annotations

import json
from typing import Any

from .encoding import copy_json
from .patching import MERGE_KEYS

Path = tuple[tuple[str, Any], ...]  # ("f", name) | ("k", ((key, value), ...)) | ("v", value)
SERVER_FIELDS = {
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
}
ATOMIC_MAPS = {"selector", "labelSelector", "namespaceSelector", "nodeSelectorTerms"}
# Associative lists whose key is more than the strategic-merge key (listMapKeys in k8s.io/api).
MAP_KEYS: dict[str, tuple[str, ...]] = {"ports": ("containerPort", "protocol")}


class Conflict(Exception):
    def __init__(self, conflicts: list[tuple[str, str, str]]) -> None:
        """``conflicts``: (manager, apiVersion, field path) for each conflicting field."""
        super().__init__(f"{len(conflicts)} conflicts")
        self.conflicts = conflicts

    def message(self) -> str:
        count = len(self.conflicts)
        noun = "conflict" if count == 1 else "conflicts"
        managers = sorted({(m, v) for m, v, _ in self.conflicts})
        if count == 1:
            manager, version, path = self.conflicts[0]
            return f'Apply failed with 1 conflict: conflict with "{manager}" using {version}: {path}'
        parts = []
        for manager, version in managers:
            paths = [p for m, v, p in self.conflicts if (m, v) == (manager, version)]
            parts.append(
                f'conflicts with "{manager}" using {version}:\n' + "\n".join(f"- {p}" for p in paths)
            )
        return f"Apply failed with {count} {noun}: " + "\n".join(parts)

    def causes(self) -> list[dict[str, str]]:
        return [
            {"reason": "FieldManagerConflict", "message": f'conflict with "{m}" using {v}', "field": p}
            for m, v, p in self.conflicts
        ]


# ------------------------------------------------------------------------------ schema knowledge


def _list_kind(name: str, schema: dict[str, Any] | None, items: list[Any]) -> tuple[str, tuple[str, ...]]:
    """("map", keys) | ("set", ()) | ("atomic", ()) for the list at field ``name``."""
    if schema is not None:
        kind = schema.get("x-kubernetes-list-type", "atomic")
        if kind == "map":
            return "map", tuple(schema.get("x-kubernetes-list-map-keys") or ())
        return kind, ()
    if name in MERGE_KEYS:
        key = MERGE_KEYS[name]
        if key is None:
            return "set", ()
        keys = MAP_KEYS.get(name, (key,))
        if all(isinstance(i, dict) and key in i for i in items):
            return "map", tuple(k for k in keys if all(k in i for i in items)) or (key,)
    return "atomic", ()


def _atomic_map(name: str, schema: dict[str, Any] | None) -> bool:
    if schema is not None:
        return schema.get("x-kubernetes-map-type") == "atomic"
    return name in ATOMIC_MAPS


def _child_schema(schema: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    if schema is None:
        return None
    props = schema.get("properties") or {}
    if key in props:
        return props[key]
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, dict) else {}


def _item_key(item: dict[str, Any], keys: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    return tuple((k, item.get(k)) for k in keys)


# ------------------------------------------------------------------------------ field sets


def fieldset(obj: dict[str, Any], schema: dict[str, Any] | None, *, status: bool = False) -> set[Path]:
    """The fields ``obj`` sets: leaves, list items of associative lists, set members."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status") != status:
            continue
        if key == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in SERVER_FIELDS}
            if meta:  # name, uid, resourceVersion... are the server's: nobody owns an empty rest
                _walk(meta, (("f", "metadata"),), None, "metadata", out)
            continue
        _walk(value, (("f", key),), _child_schema(schema, key), key, out)
    return out


def _walk(value: Any, path: Path, schema: dict[str, Any] | None, name: str, out: set[Path]) -> None:
    if isinstance(value, dict) and value and not _atomic_map(name, schema):
        for key, item in value.items():
            _walk(item, (*path, ("f", key)), _child_schema(schema, key), key, out)
        return
    if isinstance(value, list) and value:
        kind, keys = _list_kind(name, schema, value)
        item_schema = (schema or {}).get("items") if schema is not None else None
        if kind == "map":
            for item in value:
                item_path = (*path, ("k", _item_key(item, keys)))
                out.add(item_path)
                for key, sub in item.items():
                    _walk(sub, (*item_path, ("f", key)), _child_schema(item_schema, key), key, out)
            return
        if kind == "set":
            out.update((*path, ("v", json.dumps(v, sort_keys=True))) for v in value)
            return
    out.add(path)


def _value_at(obj: Any, path: Path) -> Any:
    current = obj
    for kind, arg in path:
        if kind == "f":
            if not isinstance(current, dict) or arg not in current:
                return _MISSING
            current = current[arg]
        elif kind == "k":
            match = [
                i
                for i in current or []
                if isinstance(i, dict) and _item_key(i, tuple(k for k, _ in arg)) == arg
            ]
            if not match:
                return _MISSING
            current = match[0]
        else:
            return arg if arg in [json.dumps(v, sort_keys=True) for v in current or []] else _MISSING
    return current


_MISSING = object()


def render_path(path: Path) -> str:
    """The field path as apply conflicts name it: ``.spec.containers[name="c"].image``."""
    text = ""
    for kind, arg in path:
        if kind == "f":
            text += f".{arg}"
        elif kind == "k":
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in arg) + "]"
        else:
            text += f"[={arg}]"
    return text


# ------------------------------------------------------------------------------ FieldsV1


def _element(kind: str, arg: Any) -> str:
    if kind == "f":
        return f"f:{arg}"
    if kind == "k":
        return "k:" + json.dumps(dict(arg), separators=(",", ":"))
    return f"v:{arg}"


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for path in sorted(paths, key=len):
        node = tree
        for kind, arg in path:
            node = node.setdefault(_element(kind, arg), {})
    for path in paths:  # an owned field that also has owned children is marked "."
        node = tree
        for kind, arg in path:
            node = node[_element(kind, arg)]
        if node and "." not in node:
            node["."] = {}
    return tree


def from_fields_v1(tree: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, children in tree.items():
        if element == ".":
            out.add(prefix)
            continue
        kind, _, arg = element.partition(":")
        value: Any = tuple(json.loads(arg).items()) if kind == "k" else arg
        path = (*prefix, (kind, value))
        if children:
            out |= from_fields_v1(children, path)
        else:
            out.add(path)
    return out


# ------------------------------------------------------------------------------ entries


def _entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return copy_json((obj.get("metadata") or {}).get("managedFields") or [])


def _same(entry: dict[str, Any], manager: str, operation: str, subresource: str) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == operation
        and (entry.get("subresource") or "") == subresource
    )


def _entry(
    manager: str, operation: str, api_version: str, paths: set[Path], *, now: str, subresource: str
) -> dict:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _without(entries: list[dict[str, Any]], taken: set[Path]) -> list[dict[str, Any]]:
    """Other managers' entries minus ``taken``; an entry left with no field is dropped."""
    kept = []
    for entry in entries:
        owned = from_fields_v1(entry.get("fieldsV1") or {})
        remaining = owned - taken
        if not remaining:
            continue
        kept.append(entry if remaining == owned else {**entry, "fieldsV1": to_fields_v1(remaining)})
    return kept


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    api_version: str,
    schema: dict[str, Any] | None,
    *,
    now: str,
    subresource: str = "",
) -> list[dict[str, Any]]:
    """managedFields after an Update by ``manager`` (create when ``old`` is None)."""
    status = subresource == "status"
    after = fieldset(new, schema, status=status)
    if old is None:
        return (
            [_entry(manager, "Update", api_version, after, now=now, subresource=subresource)] if after else []
        )
    before = fieldset(old, schema, status=status)
    changed = {p for p in after if p not in before or _value_at(old, p) != _value_at(new, p)}
    removed = before - after
    entries = _entries(old)
    if not changed and not removed:
        return entries
    entries = _without(entries, removed)
    mine = next((e for e in entries if _same(e, manager, "Update", subresource)), None)
    others = [e for e in entries if e is not mine]
    others = _without(others, changed)
    owned = (from_fields_v1(mine["fieldsV1"]) if mine else set()) | changed
    if not owned:
        return others
    return [*others, _entry(manager, "Update", api_version, owned, now=now, subresource=subresource)]


def apply(
    live: dict[str, Any] | None,
    config: dict[str, Any],
    manager: str,
    api_version: str,
    schema: dict[str, Any] | None,
    *,
    now: str,
    force: bool,
    subresource: str = "",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the merged object, its managedFields) for ``config`` applied by ``manager``; raises Conflict."""
    status = subresource == "status"
    config = {k: v for k, v in config.items() if k != "metadata"} | {
        "metadata": {k: v for k, v in (config.get("metadata") or {}).items() if k != "managedFields"}
    }
    applied = fieldset(config, schema, status=status)
    if live is None:
        return config, [_entry(manager, "Apply", api_version, applied, now=now, subresource=subresource)]
    entries = _entries(live)
    mine = next((e for e in entries if _same(e, manager, "Apply", subresource)), None)
    others = [e for e in entries if e is not mine]
    conflicts: list[tuple[str, str, str]] = []
    taken: set[Path] = set()
    for entry in others:
        owned = from_fields_v1(entry.get("fieldsV1") or {})
        for path in sorted(owned & applied, key=render_path):
            if path[-1][0] == "k":
                continue  # a list item's identity, not a value
            if _value_at(live, path) != _value_at(config, path):
                conflicts.append((entry.get("manager", ""), entry.get("apiVersion", ""), render_path(path)))
                taken.add(path)
    if conflicts and not force:
        raise Conflict(conflicts)
    others = _without(others, taken)
    merged = _merge(copy_json(live), config, schema, "")
    previously = from_fields_v1(mine["fieldsV1"]) if mine else set()
    still_owned = set().union(*(from_fields_v1(e.get("fieldsV1") or {}) for e in others)) if others else set()
    dropped = previously - applied - still_owned
    topmost = [p for p in dropped if not any(p[:n] in dropped for n in range(1, len(p)))]
    keep = applied | still_owned
    for path in sorted(topmost, key=len, reverse=True):
        _remove(merged, path)
        # A list or map that only held what was removed goes too, unless someone owns it as such.
        for end in range(len(path) - 1, 0, -1):
            parent = path[:end]
            if parent in keep or any(k[: len(parent)] == parent for k in keep):
                break
            if _value_at(merged, parent) in ([], {}):
                _remove(merged, parent)
    return merged, [*others, _entry(manager, "Apply", api_version, applied, now=now, subresource=subresource)]


def _merge(live: Any, config: Any, schema: dict[str, Any] | None, name: str) -> Any:
    if isinstance(live, dict) and isinstance(config, dict) and not _atomic_map(name, schema):
        for key, value in config.items():
            live[key] = _merge(live.get(key), value, _child_schema(schema, key), key)
        return live
    if isinstance(live, list) and isinstance(config, list):
        kind, keys = _list_kind(name, schema, [*live, *config])
        item_schema = (schema or {}).get("items") if schema is not None else None
        if kind == "map":
            result = list(live)
            for item in config:
                index = next(
                    (
                        i
                        for i, x in enumerate(result)
                        if isinstance(x, dict) and _item_key(x, keys) == _item_key(item, keys)
                    ),
                    None,
                )
                if index is None:
                    result.append(copy_json(item))
                else:
                    result[index] = _merge(result[index], item, item_schema, "")
            return result
        if kind == "set":
            return [*live, *(v for v in config if v not in live)]
    return copy_json(config)


def _remove(obj: dict[str, Any], path: Path) -> None:
    parent: Any = obj
    for kind, arg in path[:-1]:
        parent = _value_at(parent, ((kind, arg),))
        if parent is _MISSING:
            return
    kind, arg = path[-1]
    if kind == "f" and isinstance(parent, dict):
        parent.pop(arg, None)
    elif kind == "k" and isinstance(parent, list):
        keys = tuple(k for k, _ in arg)
        parent[:] = [i for i in parent if not (isinstance(i, dict) and _item_key(i, keys) == arg)]
    elif kind == "v" and isinstance(parent, list):
        parent[:] = [v for v in parent if json.dumps(v, sort_keys=True) != arg]


# ------------------------------------------------------------------------------ the scale subresource

SCALE_API_VERSION = "autoscaling/v1"
SCALE_REPLICAS: Path = (("f", "spec"), ("f", "replicas"))


def replicas_path(dotted: str) -> Path:
    """A replicas path (``.spec.replicas``, a CRD's ``specReplicasPath``) as a field path."""
    return tuple(("f", part) for part in dotted.removeprefix(".").split("."))


def to_scale(parent_entries: list[dict[str, Any]], replicas: Path) -> list[dict[str, Any]]:
    """``ScaleHandler.ToSubresource``: the parent's entries that own ``replicas``, as entries of the
    Scale (``autoscaling/v1``, owning its ``spec.replicas`` and nothing else)."""
    scale_entries = []
    for entry in parent_entries:
        if replicas in from_fields_v1(entry.get("fieldsV1") or {}):
            converted = {**entry, "apiVersion": SCALE_API_VERSION, "fieldsV1": to_fields_v1({SCALE_REPLICAS})}
            scale_entries.append(converted)
    return scale_entries


def from_scale(
    parent_entries: list[dict[str, Any]],
    scale_entries: list[dict[str, Any]],
    replicas: Path,
    api_version: str,
) -> list[dict[str, Any]]:
    """``ScaleHandler.ToParent``: the parent's entries once the field manager has run on the Scale.
    A parent entry that no longer owns the Scale's replicas loses ``replicas`` (and goes if that was
    all it owned); a Scale entry new to the parent becomes one owning ``replicas`` in the parent's
    ``api_version``, with no ``time`` (ToParent takes the parent's time for it, which it has not)."""
    unmatched = list(scale_entries)
    entries = []
    for entry in parent_entries:
        owned = from_fields_v1(entry.get("fieldsV1") or {})
        if replicas not in owned:
            entries.append(entry)
            continue
        twin = next(
            (
                s
                for s in unmatched
                if _same(s, entry.get("manager", ""), entry.get("operation", ""), _sub(entry))
            ),
            None,
        )
        if twin is not None:
            unmatched.remove(twin)
            entries.append(entry)
        elif owned - {replicas}:
            entries.append({**entry, "fieldsV1": to_fields_v1(owned - {replicas})})
    for entry in unmatched:
        if SCALE_REPLICAS not in from_fields_v1(entry.get("fieldsV1") or {}):
            continue
        new = {
            "manager": entry.get("manager"),
            "operation": entry.get("operation"),
            "apiVersion": api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1({replicas}),
        }
        if _sub(entry):
            new["subresource"] = _sub(entry)
        entries.append(new)
    return entries


def _sub(entry: dict[str, Any]) -> str:
    return str(entry.get("subresource") or "")


def manager_of(query: dict[str, str], user_agent: str) -> str:
    """The request's field manager: ``fieldManager``, else the User-Agent's product name."""
    return query.get("fieldManager") or (user_agent.split("/", 1)[0] or "unknown")[:128]
