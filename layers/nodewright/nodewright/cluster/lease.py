"""The writers' lease: a coordination.k8s.io/v1 Lease, so two invocations never plan on the same capacity.

The provisioner, the disruption flow and interruption replacements each hold it while they plan
and launch. It works like client-go's leader election, without a background thread (a Lambda
invocation renews between passes):

* acquire: create the Lease, or take it over when it is free or its holder let it expire
  (``renewTime + leaseDurationSeconds`` in the past); every write carries the read
  ``resourceVersion``, so of two racing invocations exactly one wins (the other gets 409);
* renew: bump ``renewTime``; ``LeaseLost`` when someone else took it (we overran the duration);
* release: clear the holder so the next writer need not wait for expiry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.cluster import objects
from nodewright.cluster.errors import ApiError, ApiUnavailable, ClusterError, Conflict, NotFound
from nodewright.cluster.resources import LEASES
from nodewright.observability import logger

if TYPE_CHECKING:
    from nodewright.cluster.client import Cluster

DEFAULT_LEASE_NAME = "nodewright-writer"
# A namespace of its own (deploy/rbac.yaml creates it): RBAC cannot limit "create" by name, so the
# functions may create Leases only where nothing else lives.
DEFAULT_LEASE_NAMESPACE = "nodewright"
DEFAULT_DURATION_SECONDS = 60


class LeaseUnavailable(ClusterError):
    """Another writer holds the lease; retry later (transient)."""

    transient = True

    def __init__(self, holder: str, expires_in_seconds: float) -> None:
        super().__init__(f"writer lease held by {holder!r} for another {expires_in_seconds:.0f}s")
        self.holder = holder
        self.expires_in_seconds = expires_in_seconds


class LeaseLost(ClusterError):
    """The lease passed to another writer while we held it: stop writing now."""

    transient = True


class WriterLease:
    """``with cluster.writer_lease(identity): ...`` or explicit ``acquire``/``renew``/``release``."""

    def __init__(
        self,
        cluster: Cluster,
        identity: str,
        *,
        name: str = DEFAULT_LEASE_NAME,
        namespace: str = DEFAULT_LEASE_NAMESPACE,
        duration_seconds: int = DEFAULT_DURATION_SECONDS,
        wait_seconds: float = 0.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cluster = cluster
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.duration_seconds = duration_seconds
        self.wait_seconds = wait_seconds
        self._clock = clock
        self._sleep = sleep
        self._lease: dict[str, Any] | None = None

    @property
    def held(self) -> bool:
        return self._lease is not None

    def acquire(self) -> bool:
        """Try once (or keep trying for ``wait_seconds``); True when we hold it."""
        deadline = time.monotonic() + self.wait_seconds
        while True:
            if self._try_acquire():
                return True
            if time.monotonic() >= deadline:
                return False
            self._sleep(min(1.0, max(0.05, deadline - time.monotonic())))

    def renew(self) -> None:
        """Extend our hold; raises ``LeaseLost`` if another writer took it."""
        if self._lease is None:
            raise LeaseLost(f"lease {self.namespace}/{self.name} is not held by {self.identity!r}")
        lease = self._lease
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            raise LeaseLost(f"lease {self.namespace}/{self.name} is held by {spec.get('holderIdentity')!r}")
        updated = {**lease, "spec": {**spec, "renewTime": objects.now_micro()}}
        try:
            self._lease = self.cluster.replace(LEASES, updated)
        except (Conflict, NotFound) as exc:
            self._lease = None
            raise LeaseLost(f"lease {self.namespace}/{self.name} changed under us: {exc}") from exc

    def release(self) -> None:
        """Give the lease up now; harmless when we no longer hold it. Never raises: callers release
        in ``finally`` after their pass, and a release the API server cannot take (unreachable,
        busy, or the invocation's deadline already reached) must not replace the pass's own outcome
        or stop an interruption's drain; the lease then expires on its own (``duration_seconds``)."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        spec = {**(lease.get("spec") or {}), "holderIdentity": None, "leaseDurationSeconds": 1}
        try:
            self.cluster.replace(LEASES, {**lease, "spec": spec})
        except (Conflict, NotFound):  # someone else has it now, or it is gone: nothing of ours to release
            return
        except (ApiError, ApiUnavailable) as exc:
            logger().warning(
                "could not give the writers' lease back; it expires on its own",
                extra={
                    "identity": self.identity,
                    "expiresInSeconds": self.duration_seconds,
                    "error": str(exc),
                },
            )

    def __enter__(self) -> WriterLease:
        if not self.acquire():
            holder, remaining = self._holder()
            raise LeaseUnavailable(holder, remaining)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    # ------------------------------------------------------------------
    def _holder(self) -> tuple[str, float]:
        lease = self.cluster.find(LEASES, self.name, self.namespace) or {}
        spec = lease.get("spec") or {}
        return str(spec.get("holderIdentity") or ""), max(0.0, self._expires_in(spec))

    def _expires_in(self, spec: dict[str, Any]) -> float:
        renewed = objects.parse_time(spec.get("renewTime") or spec.get("acquireTime"))
        if renewed is None:
            return 0.0
        expiry = renewed + timedelta(seconds=float(spec.get("leaseDurationSeconds") or 0))
        return (expiry - self._clock()).total_seconds()

    def _try_acquire(self) -> bool:
        now = objects.now_micro()
        current = self.cluster.find(LEASES, self.name, self.namespace)
        if current is None:
            body = {
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, transitions=0, acquired=now),
            }
            try:
                self._lease = self.cluster.create(LEASES, body)
            except Conflict:  # another invocation created it first
                return False
            return True
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity")
        if holder and holder != self.identity and self._expires_in(spec) > 0:
            return False
        same_holder = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if same_holder else 1)
        acquired = str(spec["acquireTime"]) if same_holder and spec.get("acquireTime") else now
        updated = {**current, "spec": self._spec(now, transitions=transitions, acquired=acquired)}
        try:
            self._lease = self.cluster.replace(LEASES, updated)
        except Conflict:
            return False
        return True

    def _spec(self, now: str, *, transitions: int, acquired: str) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_seconds,
            "acquireTime": acquired,
            "renewTime": now,
            "leaseTransitions": transitions,
        }
