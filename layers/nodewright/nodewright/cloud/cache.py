"""A tiny TTL cache for per-warm-container lookups (catalog, subnets, AMIs, cluster info).

Lambda reuses a container for many invocations; anything fetched here is kept for a few
minutes so an invocation pays for an AWS call at most once, yet a change in AWS shows up
soon after. Nothing that must survive between invocations lives here (that is the state store).

Expiry is measured on the wall clock (``time.time``), not ``time.monotonic``: Lambda freezes
a container between invocations, and a monotonic clock need not advance while it is frozen,
so an entry cached before an hour-long freeze would otherwise look seconds old. An entry
whose timestamp lies in the future (the wall clock stepped back) counts as expired too.
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
        cached = self.get(key)
        return cached if cached is not None else self.put(key, load())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
