"""Each object's JSON encoded once per resourceVersion, for every list and watch that sends it.

kube-apiserver's watch cache wraps each object it sends in a ``cachingObject`` that keeps its
serialization per encoder, so an event going to many watchers (a pod change reaches the scheduler,
the controller manager, every kubelet informer) is encoded once. The emulator did the encoding for
each list item and each watcher: a list of 500 pods was 12 ms of ``json.dumps`` of one core, and
across the e2e stories the largest single cost of serving. Here an object's bytes are kept by
(resource, uid) with the resourceVersion they were encoded at; an object only changes with a new
resourceVersion (``storage.Store.write``), so bytes kept for the same one are the object's.

Custom resources are not kept: their presentation can go through a conversion webhook, which may
answer differently for the same stored object after the CRD changes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .resources import ResourceType

# Past this many kept objects the whole map is dropped and refilled as objects are sent again (the
# 5,000-node bench's 50,000 pods fit; a stale entry is replaced on its next send anyway).
KEPT_OBJECTS = 200_000


def kept_as(rt: ResourceType) -> str | None:
    """The name ``rt``'s objects' encodings are kept under (its group, version and resource: each
    version presents the stored object its own way), or None for a custom resource."""
    return None if rt.custom else f"{rt.group}/{rt.version}/{rt.plural}"


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class EncodedObjects:
    """Encoded list items (no ``kind``/``apiVersion``) and whole objects, by resource and uid."""

    def __init__(self, limit: int = KEPT_OBJECTS) -> None:
        self.limit = limit
        self._kept: dict[tuple[str, str, bool], tuple[str, bytes]] = {}

    def encode(self, resource: str, obj: dict[str, Any], *, whole: bool) -> bytes:
        meta = obj.get("metadata") or {}
        uid, version = meta.get("uid"), meta.get("resourceVersion")
        if not uid or not version:
            return dumps(obj)
        key = (resource, uid, whole)
        kept = self._kept.get(key)  # one dict operation: atomic, no lock needed for a cache
        if kept is not None and kept[0] == version:
            return kept[1]
        encoded = dumps(obj)
        if len(self._kept) >= self.limit:
            self._kept.clear()
        self._kept[key] = (version, encoded)
        return encoded

    def list_body(self, resource: str, body: dict[str, Any]) -> bytes:
        """A list answer: its head encoded as usual, its items from the kept bytes."""
        head = dumps({k: v for k, v in body.items() if k != "items"})
        items = b",".join(self.encode(resource, item, whole=False) for item in body["items"])
        return head[:-1] + b',"items":[' + items + b"]}"

    def watch_line(self, resource: str, event_type: str, obj: dict[str, Any]) -> bytes:
        return b'{"type":"%s","object":%s}\n' % (event_type.encode(), self.encode(resource, obj, whole=True))


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists and immutable scalars), about three times as
    fast as ``copy.deepcopy``, which keeps a memo for cycles and shared parts a JSON document never
    has: an update of a pod made eight copies, most of a status patch's CPU."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value
