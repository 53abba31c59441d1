"""kube-scheduler's events recorder: ``k8s.io/client-go/tools/events`` as the scheduler runs it.

What the simulated scheduler must reproduce, because the wake-up depends on it (docs/architecture.md,
"The wake-up"): recording an Event never waits for the API server. kube-scheduler's
``EventRecorder().Eventf`` builds the Event and hands it to the broadcaster in a goroutine; the
broadcaster's sink writes it from another goroutine, so the scheduling loop goes on whatever the
write costs (an admission webhook that never answers included). Here :meth:`Recorder.eventf` puts
the Event on a queue (1000 deep, dropped when full: ``watch.DropIfChannelFull``) and returns;
writer threads write it.

The Event is events.k8s.io/v1 (the events library's adapter picks that group when discovery serves
it, as every supported server does): ``regarding`` the object as ``reference.GetReference`` gives it
(its resourceVersion included), ``reportingController`` the scheduler's name, ``reportingInstance``
``<name>-<hostname>``, an ``eventTime`` in microseconds, no deprecated field; named
``<object>.<hex nanoseconds>``. Isomorphic Events (same type, action, reason, reporting controller
and instance, regarding, related) within six minutes are a series, as ``recordToSink`` makes them:
the second is a PATCH of ``series`` (count 2), later ones are counted in memory and written when
the series ends (six minutes without one) or every 30 minutes. A write that fails for transport
reasons is tried 12 times, 10 s apart (jittered); one the server refuses is dropped.

Its own client, rate limited as kube-scheduler's clients are by default (``clientConnection``: 50
requests a second, bursts of 100). One difference, labelled: client-go starts a goroutine per Event;
this recorder has ``WRITERS`` threads, so an Event whose write hangs delays the Events queued behind
it (never the scheduling loop).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import queue
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sandbox.simulators.kube import STRATEGIC_MERGE_PATCH, Kube, group

log = logging.getLogger("sandbox.simulators")
EVENTS_GROUP_VERSION = "events.k8s.io/v1"
MAX_QUEUED = 1000  # maxQueuedEvents
MAX_TRIES = 12  # maxTriesPerEvent
RETRY_SECONDS = 10.0  # defaultSleepDuration, jittered by up to 25 %
FINISH_SECONDS = 6 * 60  # finishTime: a series ends after this long without a repeat
REFRESH_SECONDS = 30 * 60  # refreshTime: an open series' count is written this often
NOTE_LIMIT = 1024  # NoteLengthLimit: the scheduler truncates its message to fit
CLIENT_QPS = 50.0  # kube-scheduler's clientConnection defaults
CLIENT_BURST = 100
WRITERS = 16


def microtime(moment: float | None = None) -> str:
    """metav1.MicroTime as JSON: RFC 3339 with microseconds."""
    stamp = dt.datetime.fromtimestamp(time.time() if moment is None else moment, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def reference(obj: dict[str, Any], api_version: str = "v1", kind: str = "Pod") -> dict[str, Any]:
    """``reference.GetReference``: kind, namespace, name, uid, apiVersion, resourceVersion."""
    meta = obj.get("metadata") or {}
    ref = {
        "kind": obj.get("kind") or kind,
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "apiVersion": obj.get("apiVersion") or api_version,
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


def truncate_note(message: str) -> str:
    """schedule_one.go ``truncateMessage``: at most ``NOTE_LIMIT`` bytes, ending `` ...``."""
    if len(message) <= NOTE_LIMIT:
        return message
    return message[: NOTE_LIMIT - len(" ...")] + " ..."


class RateLimiter:
    """client-go's token bucket (``flowcontrol.NewTokenBucketRateLimiter``): ``wait`` blocks until
    a token is there."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = float(burst)
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def wait(self, stop: threading.Event | None = None) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
                self._at = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                missing = (1 - self._tokens) / self.qps
            if stop is not None:
                if stop.wait(missing):
                    return
            else:
                time.sleep(missing)


def _frozen(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@dataclass
class _Series:
    """An Event the broadcaster has written, and how often it has been seen since."""

    event: dict[str, Any]
    last_observed: float
    count: int = 1
    written_count: int = 1  # the count the API server has
    written_at: float = field(default_factory=time.monotonic)


class Recorder:
    """One scheduler's events recorder (``fwk.EventRecorder()``) with its broadcaster and sink."""

    def __init__(self, kube: Kube, controller: str, writers: int = WRITERS) -> None:
        self.controller = controller
        self.instance = f"{controller}-{socket.gethostname()}"
        self.kube = _own_client(kube, writers)
        self.limiter = RateLimiter(CLIENT_QPS, CLIENT_BURST)
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(MAX_QUEUED)
        self._cache: dict[str, _Series] = {}
        self._cache_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._writers = writers
        self.written = 0  # creates and patches the API server accepted
        self.dropped = 0  # queue full, refused by the server, or out of tries
        self._pending = 0
        self._pending_lock = threading.Lock()

    # -- the recorder's side: never waits ---------------------------------------------------

    def eventf(
        self,
        regarding: dict[str, Any],
        event_type: str,
        reason: str,
        action: str,
        note: str,
        *,
        related: dict[str, Any] | None = None,
    ) -> None:
        """``EventRecorder.Eventf``: build the Event and queue it; returns at once."""
        now = time.time()
        ref = reference(regarding)
        event: dict[str, Any] = {
            "apiVersion": EVENTS_GROUP_VERSION,
            "kind": "Event",
            "metadata": {
                "name": f"{ref.get('name')}.{time.time_ns():x}",
                "namespace": ref.get("namespace") or "default",
            },
            "eventTime": microtime(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": note,
            "type": event_type,
        }
        if related is not None:
            event["related"] = reference(related)
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            log.warning("event %s on %s dropped: too many queued events", reason, ref.get("name"))
            return
        with self._pending_lock:
            self._pending += 1

    @property
    def pending(self) -> int:
        """Events queued or being written."""
        with self._pending_lock:
            return self._pending

    # -- the broadcaster's side -------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._write_loop, name=f"sandbox-events-{i}", daemon=True)
            for i in range(self._writers)
        ]
        for thread in self._threads:
            thread.start()

    def signal_stop(self) -> None:
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self.signal_stop()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def _write_loop(self) -> None:
        last_sweep = time.monotonic()
        while not self._stop.is_set():
            try:
                event = self._queue.get(timeout=0.5)
            except queue.Empty:
                event = None
            if event is not None:
                try:
                    self._record_to_sink(event)
                finally:
                    with self._pending_lock:
                        self._pending -= 1
            if time.monotonic() - last_sweep > 30:
                last_sweep = time.monotonic()
                self._sweep()

    def _key(self, event: dict[str, Any]) -> str:
        return _frozen(
            [
                event["type"],
                event["action"],
                event["reason"],
                event["reportingController"],
                event["reportingInstance"],
                event["regarding"],
                event.get("related"),
            ]
        )

    def _record_to_sink(self, event: dict[str, Any]) -> None:
        """``recordToSink``: a new Event is created; its second isomorphic one turns it into a
        series (a PATCH); later ones only count."""
        key = self._key(event)
        now = time.monotonic()
        with self._cache_lock:
            known = self._cache.get(key)
            if known is not None:
                known.count += 1
                known.last_observed = now
                if known.count > 2:
                    return
                known.written_count, known.written_at = 2, now
                to_write = _with_series(known)
            else:
                self._cache[key] = _Series(event=event, last_observed=now)
                to_write = event
        self._attempt(to_write)

    def _sweep(self) -> None:
        """``finishSeries`` and ``refreshExistingEventSeries``: write the final count of a series
        that ended, forget a singleton Event six minutes old, refresh long-running series."""
        now = time.monotonic()
        finished: list[dict[str, Any]] = []
        with self._cache_lock:
            for key, known in list(self._cache.items()):
                ended = now - known.last_observed > FINISH_SECONDS
                if ended:
                    del self._cache[key]
                if known.count > known.written_count and (ended or now - known.written_at > REFRESH_SECONDS):
                    known.written_count, known.written_at = known.count, now
                    finished.append(_with_series(known))
        for event in finished:
            self._attempt(event)

    def _attempt(self, event: dict[str, Any]) -> None:
        """``attemptRecording``: retried while the server cannot be reached, never when it refuses."""
        for attempt in range(MAX_TRIES):
            if self._stop.is_set():
                return
            if self._write(event):
                return
            if attempt + 1 < MAX_TRIES and self._stop.wait(RETRY_SECONDS * random.uniform(1.0, 1.25)):
                return
        self.dropped += 1
        log.warning("event %s on %s dropped: retry limit exceeded", event["reason"], event["regarding"])

    def _write(self, event: dict[str, Any]) -> bool:
        """``recordEvent``: True when done with it (written, or refused for good)."""
        namespace = event["metadata"]["namespace"]
        name = event["metadata"]["name"]
        try:
            if event.get("series"):
                self.limiter.wait(self._stop)
                try:
                    self.kube.patch(
                        group(EVENTS_GROUP_VERSION, "events", namespace, name),
                        {"series": event["series"]},
                        STRATEGIC_MERGE_PATCH,
                    )
                    self.written += 1
                    return True
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            self.limiter.wait(self._stop)
            self.kube.create(group(EVENTS_GROUP_VERSION, "events", namespace), event)
            self.written += 1
            return True
        except ApiException as exc:
            if exc.status and 400 <= exc.status < 500:
                # Refused: malformed, or (already exists) written by an earlier try. Not retried.
                if exc.status != 409:
                    self.dropped += 1
                    log.warning("event %s on %s refused: %s", event["reason"], name, exc.status)
                return True
            return False  # a 5xx: tried again
        except Exception as exc:  # the connection: tried again after a pause
            log.debug("event %s on %s not written yet: %s", event["reason"], name, exc)
            return False


def _with_series(known: _Series) -> dict[str, Any]:
    event = copy.deepcopy(known.event)
    event["series"] = {"count": known.count, "lastObservedTime": microtime(time.time())}
    return event


def _own_client(kube: Kube, connections: int) -> Kube:
    """A client of its own (kube-scheduler's event client is a second clientset), with a
    connection per writer."""
    configuration = copy.copy(kube.api_client.configuration)
    configuration.connection_pool_maxsize = connections
    return Kube(client.ApiClient(configuration=configuration), request_timeout=kube.request_timeout)
