"""Thread-safe object storage with one global, monotonic resourceVersion (etcd's revision).

Handlers do read-check-write under :attr:`Store.lock` so a conflict check and the write it guards are
atomic. Stored dicts are never mutated in place: a write replaces the object, so readers that only
serialise may use the references :meth:`Store.list` returns, and every change is kept in a bounded
history that watches replay from a resourceVersion.
"""

from __future__ import annotations

import bisect
import builtins
import itertools
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from .encoding import copy_json

Key = tuple[str, str]  # (group, plural)
ObjKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped


@dataclass(frozen=True)
class Change:
    """One committed write, as a watch sees it."""

    rv: int
    key: Key
    type: str  # ADDED, MODIFIED or DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


class TooOld(Exception):
    """The requested resourceVersion is older than the kept history (a watch answers 410 Expired)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")


def obj_key(obj: dict[str, Any]) -> ObjKey:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


class Store:
    def __init__(self, history: int = 1000, first_rv: int = 1000) -> None:
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)  # any write
        # Per resource, for watches: a write wakes only the watches of its resource, as
        # kube-apiserver's watch cache dispatches each event to its resource's watchers (every watch
        # woken by every write cost a sandbox's API server a thread switch per watch per write).
        self._resource_changed: dict[Key, threading.Condition] = {}
        self._rv = first_rv
        self._data: dict[Key, dict[ObjKey, dict[str, Any]]] = {}
        # Each resource's keys in namespace/name order, kept as objects come and go, so a page of a
        # paginated list starts at its continue key (etcd's range read) instead of sorting everything.
        self._order: dict[Key, list[ObjKey]] = {}
        # Per resource, as kube-apiserver's watch cache: a busy resource (events, pods) never pushes
        # another's changes out; a watch from before the oldest kept change gets 410 Gone.
        self.history = history
        self._history: dict[Key, deque[Change]] = {}
        self._history_rvs: dict[Key, deque[int]] = {}
        self._closed = False

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    def get(self, key: Key, namespace: str, name: str) -> dict[str, Any] | None:
        """A private deep copy of the stored object (callers may modify it)."""
        with self.lock:
            found = self._data.get(key, {}).get((namespace, name))
            return copy_json(found) if found is not None else None

    def peek(self, key: Key, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object itself: read-only."""
        with self.lock:
            return self._data.get(key, {}).get((namespace, name))

    def list(
        self, key: Key, namespace: str | None = None, *, after: ObjKey | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Read-only references to the objects (sorted by namespace/name; with ``after``, only those
        past that key, as a continue token's range read) and the list's resourceVersion."""
        with self.lock:
            bucket = self._data.get(key, {})
            order = self._order.get(key, [])
            start = 0 if after is None else bisect.bisect_right(order, after)
            if namespace is not None:
                start = max(start, bisect.bisect_left(order, (namespace, "")))
                end = bisect.bisect_left(order, (namespace, "\U0010ffff"))
            else:
                end = len(order)
            return [bucket[k] for k in order[start:end]], self._rv

    def count(self, key: Key) -> int:
        """How many objects of a resource are stored (what API Priority and Fairness's list work
        estimator reads to size a LIST)."""
        with self.lock:
            return len(self._data.get(key, {}))

    def write(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace ``obj``, stamping a new resourceVersion; returns a copy of what was stored."""
        with self.lock:
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            bucket = self._data.setdefault(key, {})
            k = obj_key(obj)
            old = bucket.get(k)
            bucket[k] = obj
            if old is None:
                bisect.insort(self._order.setdefault(key, []), k)
            self._record(Change(self._rv, key, "MODIFIED" if old is not None else "ADDED", obj, old))
            return copy_json(obj)

    def remove(self, key: Key, namespace: str, name: str) -> dict[str, Any] | None:
        """Delete the object; the DELETED event carries it with the deletion's resourceVersion."""
        with self.lock:
            old = self._data.get(key, {}).pop((namespace, name), None)
            if old is None:
                return None
            order = self._order[key]
            del order[bisect.bisect_left(order, (namespace, name))]
            self._rv += 1
            gone = copy_json(old)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            self._record(Change(self._rv, key, "DELETED", gone, old))
            return copy_json(gone)

    def _record(self, change: Change) -> None:
        self._history.setdefault(change.key, deque(maxlen=self.history)).append(change)
        self._history_rvs.setdefault(change.key, deque(maxlen=self.history)).append(change.rv)
        self._changed.notify_all()
        waiting = self._resource_changed.get(change.key)
        if waiting is not None:
            waiting.notify_all()

    def changes_after(self, rv: int, key: Key) -> builtins.list[Change]:
        """Every change of ``key`` after ``rv``; :class:`TooOld` when its history no longer reaches back."""
        return self.progress(rv, key)[0]

    def progress(self, rv: int, key: Key) -> tuple[builtins.list[Change], int]:
        """``changes_after`` and the resourceVersion the answer is complete through (the store's,
        at the time): a watch resumes from there (it then waits, with ``wait_for_change``, for its
        own resource's next change)."""
        with self.lock:
            return self._changes_after(rv, key), self._rv

    def _changes_after(self, rv: int, key: Key) -> builtins.list[Change]:
        """The caller holds ``self.lock``."""
        if rv >= self._rv:
            return []
        changes = self._history.get(key)
        rvs = self._history_rvs.get(key)
        if not changes or not rvs:
            return []
        if rv < rvs[0] - 1 and len(changes) == changes.maxlen:
            raise TooOld(rv, rvs[0])
        start = bisect.bisect_right(rvs, rv)
        return list(itertools.islice(changes, start, None))

    def wait_for_change(self, after_rv: int, timeout: float, key: Key | None = None) -> bool:
        """Block until something newer than ``after_rv`` is written (to ``key``'s resource, if given),
        the store closes, or ``timeout``."""
        with self.lock:
            if key is None:
                return self._changed.wait_for(lambda: self._rv > after_rv or self._closed, timeout)
            waiting = self._resource_changed.setdefault(key, threading.Condition(self.lock))
            return waiting.wait_for(lambda: self._newest(key) > after_rv or self._closed, timeout)

    def _newest(self, key: Key) -> int:
        """The resourceVersion of ``key``'s last change (0 if none); the caller holds ``self.lock``."""
        rvs = self._history_rvs.get(key)
        return rvs[-1] if rvs else 0

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wake every waiting watch so it can end (server shutdown)."""
        with self.lock:
            self._closed = True
            self._changed.notify_all()
            for waiting in self._resource_changed.values():
                waiting.notify_all()
