"""A tiny TTL cache for per-warm-container lookups (catalog, subnets, AMIs, cluster info).

Lambda reuses a container for many invocations; anything fetched here is kept for a few
minutes so an invocation pays for an AWS call at most once, yet a change in AWS shows up
soon after. Nothing that must survive between invocations lives here (that is the state store).

Expiry is measured on the wall clock (``time.time``), not ``time.monotonic``: Lambda freezes
a container between invocations, and a monotonic clock need not advance while it is frozen,
so an entry cached before an hour-long freeze would otherwise look seconds old. An entry
whose timestamp lies in the future (the wall clock stepped back) counts as expired too.

A pass launches its NodeClaims in threads (``provisioning.parallel``), so the caches are asked from
several threads at once: every access is under a lock, and ``get_or_load`` loads a missing key once
(single flight): the other threads asking for it meanwhile wait for that answer instead of making
the same AWS call, or racing the same create (an instance profile's role can be added only once).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


def is_fresh(stored_at: float, now: float, ttl_seconds: float) -> bool:
    """True while ``now`` is within ``ttl_seconds`` after ``stored_at`` (a clock step back expires it)."""
    return 0.0 <= now - stored_at < ttl_seconds


class TTLCache(Generic[V]):
    def __init__(self, ttl_seconds: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self._items: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}  # one per key ever loaded (few keys)

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None or not is_fresh(entry[0], self.clock(), self.ttl_seconds):
                return None
            return entry[1]

    def put(self, key: Hashable, value: V) -> V:
        with self._lock:
            self._items[key] = (self.clock(), value)
        return value

    def get_or_load(self, key: Hashable, load: Callable[[], V]) -> V:
        """The cached value, else ``load()``'s, called by one thread at a time per key (a failed load
        caches nothing: the next caller loads again)."""
        cached = self.get(key)
        if cached is not None:
            return cached
        with self._lock:
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            cached = self.get(key)  # loaded by the thread this one waited for
            return cached if cached is not None else self.put(key, load())

    def forget(self, key: Hashable) -> None:
        """Drop one entry (what it said is known to be wrong now)."""
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
