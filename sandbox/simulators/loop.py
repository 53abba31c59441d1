"""A level-triggered reconcile loop in a thread, woken by watches.

Every simulator reconciles from fresh lists (so it never drifts from the API server's truth), or,
for the paths it names in ``informed_paths``, from an informer's cache: the objects of a full list
kept up to date by the watch's events (``cached``), as a real controller or kubelet reads its
informer rather than listing the cluster on every change. Between passes it sleeps until a watch on
any resource it cares about reports an event, or ``resync`` seconds pass. One watcher thread per
watched path keeps a long watch open, sets the wake-up flag and, for an informed path, applies the
event to the cache (a watch that ends or expires lists again); stopping shuts those streams down,
so nothing lingers after :meth:`stop`.

An informer's cache lags the loop's own writes (the watch brings them back a little later), and a
controller that read its own create as missing would create again: client-go's controllers keep
*expectations* for this. :meth:`view` is that here: it waits until the cache holds at least the
resourceVersion of the loop's last write to the path, and leaves out an object the loop deleted until
the cache has seen it go (or change again); past ``WRITES_SEEN_SECONDS`` it lists afresh.
resourceVersions are compared as integers, as Kubernetes 1.35 made them comparable (KEP-5504).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from sandbox.simulators.kube import Kube

log = logging.getLogger("sandbox.simulators")
WATCH_SECONDS = 30
DEBOUNCE_SECONDS = 0.01  # let a burst of events (a deployment's 10 pods) arrive before reconciling
MAX_DEBOUNCE_SECONDS = 0.5
WRITES_SEEN_SECONDS = 2.0  # how long a pass waits for its informer to show its own last writes


def _version(obj: dict[str, Any]) -> int:
    value = (obj.get("metadata") or {}).get("resourceVersion") or "0"
    return int(value) if str(value).isdigit() else 0


def _shown(cached: dict[str, Any], deleted: tuple[int, bool]) -> bool:
    """Whether ``view`` shows an object this loop deleted: once the cache holds the delete's answer
    (a terminating object) or anything newer; an object deleted at once only if it changed since."""
    version, terminating = deleted
    return _version(cached) > version or (terminating and _version(cached) == version)


def list_path(path: str) -> str:
    """The cluster-wide list path of the resource a request ``path`` names:
    ``/apis/apps/v1/namespaces/default/replicasets/web/scale`` → ``/apis/apps/v1/replicasets``."""
    parts = path.strip("/").split("/")
    prefix = 2 if parts[0] == "api" else 3
    rest = parts[prefix:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]  # a namespaced object's, not the namespace's own subresource
    return "/" + "/".join(parts[:prefix] + rest[:1])


class ReconcileLoop:
    """Subclasses implement :meth:`reconcile` and list the paths whose changes wake them up."""

    name = "loop"
    watch_paths: tuple[str, ...] = ()
    informed_paths: tuple[str, ...] = ()  # watched paths whose objects ``cached`` holds

    # The least pause after a wake-up before the next pass (the pass's own length counts too): a
    # loop whose pass reads every object of many kinds waits for more events to batch.
    debounce = DEBOUNCE_SECONDS

    def __init__(self, kube: Kube, resync: float = 1.0) -> None:
        self.kube = kube
        self.resync = resync
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._streams: set[Any] = set()
        self._streams_lock = threading.Lock()
        self._cache: dict[str, dict[str, dict[str, Any]]] = {}  # informed path → uid → object
        self._cache_lock = threading.Lock()
        self._cache_changed = threading.Condition(self._cache_lock)
        self._seen: dict[str, int] = {}  # informed path → the newest resourceVersion its cache holds
        self._written: dict[str, int] = {}  # informed path → the newest this loop's writes answered
        # informed path → uid → the answer to this loop's delete of it (its resourceVersion, and
        # whether it is still there, terminating)
        self._deleted: dict[str, dict[str, tuple[int, bool]]] = {}
        if self.informed_paths:
            kube.write_listeners.append(self._wrote)
        self.passes = 0
        self.last_pass_seconds = 0.0
        self.errors = 0
        self.last_error: str | None = None

    def reconcile(self) -> None:
        """One pass over the current state."""
        raise NotImplementedError

    def start(self) -> None:
        self._threads = [threading.Thread(target=self._run, name=f"sandbox-{self.name}", daemon=True)]
        self._threads[0].start()
        for path in self.watch_paths:
            self._start_watch(path)

    def _start_watch(self, path: str) -> None:
        """A thread keeping ``path``'s watch open (and its cache, for an informed path)."""
        thread = threading.Thread(
            target=self._watch, args=(path,), name=f"sandbox-{self.name}-watch", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def signal_stop(self) -> None:
        """Ask the loop to end without waiting (stop many loops at once, then join them)."""
        self._stop.set()
        self._wake.set()
        with self._streams_lock:
            for stream in list(self._streams):
                with contextlib.suppress(Exception):
                    stream.shutdown()

    def stop(self, timeout: float = 10.0) -> None:
        self.signal_stop()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def wake(self) -> None:
        self._wake.set()

    def next_resync(self) -> float:
        """How long to wait for a wake-up before the next pass; a loop with nothing due may wait
        longer than ``resync``."""
        return self.resync

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            began = time.monotonic()
            try:
                self.reconcile()
                self.passes += 1
            except Exception as exc:  # a simulator must survive anything the server answers
                self.errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("%s pass failed: %s", self.name, self.last_error)
            took = self.last_pass_seconds = time.monotonic() - began
            if self._wake.wait(self.next_resync()) and not self._stop.is_set():
                # A pass reads (or lists) everything, so events arriving faster than passes end are
                # batched: as long a pause as the pass took (a real controller's work queue does
                # O(1) per event).
                self._stop.wait(min(max(self.debounce, took), MAX_DEBOUNCE_SECONDS))

    def _track(self, stream: Any) -> None:
        with self._streams_lock:
            self._streams.add(stream)
        if self._stop.is_set():
            stream.shutdown()

    def cached(self, path: str) -> list[dict[str, Any]] | None:
        """The informed ``path``'s objects as its watch has seen them (None until its first list)."""
        with self._cache_lock:
            objects = self._cache.get(path)
            return None if objects is None else list(objects.values())

    def view(self, path: str) -> list[dict[str, Any]]:
        """An informed ``path``'s objects as this loop last wrote them (see the module docstring): the
        cache once it holds the loop's own writes, else a fresh list."""
        deadline = time.monotonic() + WRITES_SEEN_SECONDS
        with self._cache_changed:
            while not self._stop.is_set():
                objects = self._cache.get(path)
                if objects is not None and self._seen.get(path, 0) >= self._written.get(path, 0):
                    deleted = self._deleted.get(path) or {}
                    return [o for uid, o in objects.items() if uid not in deleted or _shown(o, deleted[uid])]
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cache_changed.wait(left)
        return self.kube.list(path)[0]

    def _wrote(self, method: str, path: str, answer: dict[str, Any]) -> None:
        """Told of each write of this loop's client (``Kube.write_listeners``): what ``view`` waits for."""
        informed = list_path(path)
        if informed not in self.informed_paths:
            return
        version, uid = _version(answer), (answer.get("metadata") or {}).get("uid")
        with self._cache_lock:
            self._written[informed] = max(self._written.get(informed, 0), version)
            if method == "DELETE" and uid and uid in self._cache.get(informed, {}):
                terminating = bool(answer["metadata"].get("deletionTimestamp"))
                self._deleted.setdefault(informed, {})[uid] = (version, terminating)

    def _list_for_watch(self, path: str) -> str:
        """The resourceVersion to watch ``path`` from; an informed path's cache filled from a full list."""
        if path not in self.informed_paths:
            return self.kube.list(path, limit=1)[1]
        items, resource_version = self.kube.list(path)
        with self._cache_changed:
            self._cache[path] = {item["metadata"]["uid"]: item for item in items}
            listed = _version({"metadata": {"resourceVersion": resource_version}})
            self._seen[path] = max(self._seen.get(path, 0), listed)
            deleted = self._deleted.get(path) or {}
            for uid in [uid for uid in deleted if uid not in self._cache[path]]:
                del deleted[uid]  # gone, and the list says so
            self._cache_changed.notify_all()
        return resource_version

    def _inform(self, path: str, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        uid = (obj.get("metadata") or {}).get("uid")
        if path not in self.informed_paths or not uid:
            return
        with self._cache_changed:
            objects = self._cache.setdefault(path, {})
            if event.get("type") == "DELETED":
                objects.pop(uid, None)
                (self._deleted.get(path) or {}).pop(uid, None)
            elif event.get("type") in ("ADDED", "MODIFIED"):
                objects[uid] = obj
            self._seen[path] = max(self._seen.get(path, 0), _version(obj))
            self._cache_changed.notify_all()

    def watching(self, path: str) -> bool:
        """Whether ``path``'s watch goes on (a loop whose resources come and go ends some)."""
        return True

    def _watch(self, path: str) -> None:
        while not self._stop.is_set() and self.watching(path):
            opened: list[Any] = []

            def track(stream: Any, opened: list[Any] = opened) -> None:
                opened.append(stream)
                self._track(stream)

            try:
                resource_version = self._list_for_watch(path)
                if path in self.informed_paths:
                    self._wake.set()  # the cache is (again) a full list: a pass reads it
                for event in self.kube.watch(path, resource_version, WATCH_SECONDS, on_open=track):
                    if event.get("type") == "ERROR":  # e.g. 410 Gone: relist and watch again
                        break
                    self._inform(path, event)
                    self._wake.set()
            except Exception as exc:  # a dropped stream, a server restart, a stop: relist or end
                if not self._stop.is_set():
                    log.debug("%s watch of %s ended: %s", self.name, path, exc)
                    self._stop.wait(0.5)
            finally:
                with self._streams_lock:
                    self._streams.difference_update(opened)
