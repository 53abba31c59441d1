"""Token buckets: the client-side request rate limit every request to the API server takes a token from.

client-go throttles each client with ``flowcontrol.NewTokenBucketRateLimiter(QPS, Burst)`` (5/10 by
default; Karpenter's controller sets ``KUBE_CLIENT_QPS``/``KUBE_CLIENT_BURST``, 200/300): up to
``burst`` requests go at once, then one every ``1/qps`` seconds. The API server's own defence, API
Priority and Fairness, answers a flood with 429 and ``Retry-After`` (EKS's control plane included);
limiting here keeps a storm of work (an AZ-wide spot reclaim) from becoming a storm of 429s.

One ``TokenBucket`` is shared by every thread of a function container (``nodewright.cluster.connect``
keeps it with the container's API client), as client-go's limiter is shared by a rest client's
goroutines. A waiter reserves its token under the lock and sleeps outside it, as
``golang.org/x/time/rate``'s ``Wait`` does: concurrent callers are served in the order they asked,
and a wait that would end past the caller's deadline is refused at once, taking nothing (client-go:
"rate: Wait(n=1) would exceed context deadline").

The same bucket limits what is not a request: ``try_accept`` takes a token only if one is there now,
as client-go's ``TryAccept`` does for Karpenter's rate-limited events (``Nominated``, in
``provisioning.flow``) and for the wake-up webhook's requests per container (``wakeup.webhook``).
It lives outside ``nodewright.cluster`` because the webhook's cold start, which kube-apiserver waits
on, must not import the kubernetes client.
"""

from __future__ import annotations

import threading
from collections import Counter

from nodewright.context import Clock, SystemClock


class TokenBucket:
    """``burst`` tokens, refilled at ``qps`` per second; ``wait`` takes one (see the module docstring),
    ``try_accept`` one only if it is there now.

    ``requests``, ``waits`` and ``waited_seconds`` count what went through: how many requests, how
    many of them were held back and for how long in total (benches report them; tests assert on them).
    ``by_second`` counts the requests by the wall-clock second they were let through (epoch seconds,
    the last ``KEPT_SECONDS`` only): what a function reports as its request rate
    (``drain_request_counts``), and what sums across containers into the API server's rate.
    """

    KEPT_SECONDS = 600

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        self.qps, self.burst = _checked(qps, burst)
        self.clock: Clock = clock or SystemClock()
        self._tokens = float(self.burst)
        self._last = self.clock.monotonic()
        self._lock = threading.Lock()
        self.requests = 0
        self.waits = 0
        self.waited_seconds = 0.0
        self.by_second: Counter[int] = Counter()

    def reserve(self, what: str, *, deadline: float | None = None) -> float:
        """Take a token; the seconds until it is due (0.0: now). ``deadline`` is on ``clock.monotonic``:
        when the token would come after it, nothing is taken and ``ClientThrottled`` is raised."""
        with self._lock:
            now = self._refill()
            wait = 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.qps
            if deadline is not None and now + wait > deadline:
                from nodewright.cluster.errors import ClientThrottled  # here: see the module docstring

                raise ClientThrottled(
                    f"{what}: not started, the client's request rate limit ({self.qps:g}/s, burst "
                    f"{self.burst}; KUBE_CLIENT_QPS/KUBE_CLIENT_BURST) would hold it {wait:.1f}s, "
                    f"past the invocation's deadline in {max(deadline - now, 0.0):.1f}s"
                )
            self._tokens -= 1.0  # below zero: later callers queue behind this reservation
            self.requests += 1
            self._count(self.clock.now().timestamp() + wait)
            if wait > 0:
                self.waits += 1
                self.waited_seconds += wait
            return wait

    def try_accept(self) -> bool:
        """Take a token if one is there now, else take nothing and say no: client-go's ``TryAccept``,
        through which Karpenter's event recorder drops a rate-limited event instead of waiting.
        (Not ``reserve`` with ``now`` as its deadline: ``now`` read again inside is later, and on a
        moving clock a token there now would be refused.)"""
        with self._lock:
            self._refill()
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            self.requests += 1
            self._count(self.clock.now().timestamp())
            return True

    def set_rate(self, qps: float, burst: int) -> tuple[float, int]:
        """Refill at ``qps`` with room for ``burst`` from now on (the tokens already there are kept,
        up to the new burst); returns the rate it had, to set back. An interruption container
        holds the cluster's one writers' lease at the provisioner's rate (``interruption.flow``)."""
        checked = _checked(qps, burst)
        with self._lock:
            self._refill()
            previous = (self.qps, self.burst)
            self.qps, self.burst = checked
            self._tokens = min(self._tokens, float(self.burst))
            return previous

    def seconds_until_full(self) -> float:
        """The seconds until ``burst`` tokens are there again at the current rate (0.0: full now),
        taking nothing: what the requests so far still owe the bucket. ``bench latency`` waits this
        out between idle invocations, which a deployed schedule spaces a minute apart."""
        with self._lock:
            self._refill()
            return (self.burst - self._tokens) / self.qps

    def _refill(self) -> float:
        """Add the tokens earned since the last look, at the current rate, up to the burst (the
        caller holds the lock); returns now on the clock."""
        now = self.clock.monotonic()
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
        return now

    def wait(self, what: str, *, deadline: float | None = None) -> float:
        """Block until a token is this caller's (``reserve``, then sleep on the clock); the seconds waited."""
        wait = self.reserve(what, deadline=deadline)
        if wait > 0:
            self.clock.sleep(wait)
        return wait

    def _count(self, at: float) -> None:
        """One request let through at ``at`` (wall clock); seconds older than ``KEPT_SECONDS`` go."""
        second = int(at)
        self.by_second[second] += 1
        if len(self.by_second) > self.KEPT_SECONDS:
            for old in [s for s in self.by_second if s <= second - self.KEPT_SECONDS]:
                del self.by_second[old]

    def drain_request_counts(self) -> dict[int, int]:
        """The requests counted by second since the last call, and forget them (a function logs
        them once per invocation; summed over its containers they are its request rate)."""
        with self._lock:
            counts, self.by_second = dict(self.by_second), Counter()
        return counts


def _checked(qps: float, burst: int) -> tuple[float, int]:
    """A bucket's rate, refused with what is wrong when it could never let a request through."""
    if qps <= 0 or burst < 1:
        raise ValueError(f"a token bucket needs qps > 0 and burst >= 1, not qps={qps:g} burst={burst}")
    return float(qps), int(burst)
