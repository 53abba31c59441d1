"""Whether a pass may go on writing: its writers' lease is still its own, and its time is not up.

A pass plans under the lease and then writes: NodeClaims, launches, taints. Writes can be slow
(CreateFleet throttled for tens of seconds), so a pass checks this guard before each one:

* the lease is renewed once a third of its duration has passed since the last renewal, so a long
  pass keeps it; when renewing fails (another writer took it over after it expired), the pass
  stops writing at once: its plan may no longer be the only one;
* past its deadline (the invocation's time, less what reporting needs) the pass stops writing:
  what it planned and did not launch is picked up by the next pass (a NodeClaim not launched yet
  is launched or adopted then), never abandoned half-written.

The launches of a pass run in threads (``provisioning.parallel``) and each asks the guard: it answers
under a lock, so the lease is renewed once however many ask at that moment, and once it has said
stop it says so to every thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from nodewright.state.interfaces import Lease

TIME_IS_UP = "the invocation's time is up; the next pass continues"


class WriteGuard:
    """``why_stop()`` is None while the pass may write, else the reason it must stop."""

    def __init__(
        self,
        lease: Lease | None,
        *,
        deadline: float,
        lease_seconds: float,
        monotonic: Callable[[], float],
    ) -> None:
        self._lease = lease
        self._deadline = deadline
        self._renew_every = lease_seconds / 3
        self._monotonic = monotonic
        self._renewed_at = monotonic()
        self.stopped: str | None = None
        self._lock = threading.Lock()

    def why_stop(self) -> str | None:
        with self._lock:  # a renewal is one API call: the threads asking meanwhile wait for its answer
            if self.stopped is None:
                self.stopped = self._check()
            return self.stopped

    def out_of_time(self) -> str | None:
        """Why a best-effort write (an event) must wait for the next pass: the guard said stop, or
        the deadline has passed. Never renews the lease: such writes do not need it."""
        with self._lock:
            if self.stopped is None and self._monotonic() >= self._deadline:
                self.stopped = TIME_IS_UP
            return self.stopped

    def seconds_left(self) -> float:
        """Until the deadline (``monotonic`` seconds; negative once past)."""
        return self._deadline - self._monotonic()

    def _check(self) -> str | None:
        now = self._monotonic()
        if now >= self._deadline:
            return TIME_IS_UP
        if self._lease is not None and now - self._renewed_at >= self._renew_every:
            try:
                self._lease.renew()
            except Exception as exc:  # LeaseLost, or the API server unreachable: either way, not ours
                return f"the writers' lease could not be renewed ({exc}); another writer may hold it"
            self._renewed_at = now
        return None
