"""The writers' lease's release against a stand-in API server (``Cluster``'s generic verbs only)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from nodewright.cluster import ApiUnavailable, ClientThrottled, WriterLease
from nodewright.cluster.errors import ServerBusy


class LeaseServer:
    """One Lease object, as ``find``/``create``/``replace`` see it; ``refuse`` fails every replace."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.refuse: Exception | None = None

    def find(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return copy.deepcopy(self.lease)

    def create(self, resource: Any, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.lease = {**copy.deepcopy(body), "metadata": {**body["metadata"], "resourceVersion": "1"}}
        return copy.deepcopy(self.lease)

    def replace(self, resource: Any, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        if self.refuse is not None:
            raise self.refuse
        self.lease = copy.deepcopy(body)
        return copy.deepcopy(body)


@pytest.mark.parametrize(
    "refusal",
    [
        ClientThrottled("PUT leases/nodewright-writer: not started, past the invocation's deadline in 0.0s"),
        ApiUnavailable("PUT leases/nodewright-writer: read timed out"),
        ServerBusy(503, "etcd leader changed", reason="ServiceUnavailable"),
    ],
    ids=["throttled-at-the-deadline", "unreachable", "busy"],
)
def test_a_release_the_api_server_cannot_take_is_left_to_expire_and_never_raised(refusal: Exception) -> None:
    """The 100-node storm: a provisioner pass ran to the invocation's last second and its release
    was refused by the client's rate limiter; raised from the loop's ``finally`` it replaced the
    pass's outcome with "API server unavailable" (and in an interruption it would stop the drain
    that must go on). Giving the lease back early is a courtesy: it expires on its own."""
    server = LeaseServer()
    lease = WriterLease(server, "provisioner/abc", duration_seconds=30)  # type: ignore[arg-type]
    assert lease.acquire()
    server.refuse = refusal

    lease.release()

    assert not lease.held
    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == "provisioner/abc"


def test_a_release_gives_the_lease_back_at_once_when_the_server_takes_it() -> None:
    server = LeaseServer()
    lease = WriterLease(server, "provisioner/abc", duration_seconds=30)  # type: ignore[arg-type]
    assert lease.acquire()

    lease.release()

    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] is None
    assert WriterLease(server, "interruption-1", duration_seconds=30).acquire()  # type: ignore[arg-type]
