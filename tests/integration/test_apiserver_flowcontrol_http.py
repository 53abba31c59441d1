"""API Priority and Fairness over HTTP, as clients meet it: the emulator answers a rejected request
with kube-apiserver's own 429 (plain text, ``Retry-After``, the PF headers), a watch holds no seat
once it streams, and the product's client reads again after a 429 while a rejected write reaches its
caller as a transient ``ServerBusy`` (the flows retry it).

Before this the emulator had no APF: a request of a full priority level was served at once, and
nothing here could answer 429 (``test_a_full_priority_level_answers_kube_apiservers_429`` fails on
that code with a 200).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from nodewright import cluster as cluster_module
from nodewright.cluster import ServerBusy, client
from nodewright.cluster.resources import LEASES, NODES
from nodewright.settings import Settings
from waiting import wait_for

from sandbox.apiserver import ApiServer, rbac
from sandbox.apiserver.flowcontrol import DEFAULT_PRIORITY_LEVELS, FlowControl, Ticket
from sandbox.cluster import AUTOSCALER_GROUP, AUTOSCALER_USER

pytestmark = pytest.mark.timeout(120)

READER = "flow-reader"


def rejecting_level() -> Any:
    """global-default with limitResponse Reject: a request its one seat cannot hold is a 429 at once."""
    level = next(lv for lv in DEFAULT_PRIORITY_LEVELS if lv.name == "global-default")
    return replace(level, queues=0, hand_size=0, queue_length_limit=0)


class FreesOnRejection(FlowControl):
    """The filter, plus a seat a test holds and that frees the moment a request is rejected: the next
    attempt of a client that retries finds the seat free, whatever the machine's load."""

    held: Ticket | None = None

    def _reject(self, level: Any, request: Any, reason: str, headers: dict[str, str]) -> Any:
        rejected = super()._reject(level, request, reason, headers)
        held, self.held = self.held, None
        if held is not None:
            held.release()
        return rejected


@pytest.fixture
def server() -> Iterator[ApiServer]:
    api = ApiServer(concurrency=5)  # global-default: 1 seat
    api.flow_control = FreesOnRejection(5, count=api.store.count)
    api.flow_control.configure(levels=[rejecting_level()])
    with api:
        yield api


@pytest.fixture
def reader(server: ApiServer) -> str:
    """A token of an ordinary user (global-default) allowed everything, as the functions' identity is
    allowed what deploy/rbac.yaml grants."""
    token = server.add_identity(READER)
    server.store.write(
        ("rbac.authorization.k8s.io", "clusterrolebindings"),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "flow-reader", "uid": "flow-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}],
        },
    )
    return token


def hold_the_seat(server: ApiServer) -> Ticket:
    identity = rbac.Identity(READER, (rbac.AUTHENTICATED,))
    return server.flow_control.admit(rbac.request_attributes(identity, "GET", "/api/v1/nodes", {}), {})


def get(server: ApiServer, path: str, token: str) -> tuple[int, dict[str, str], bytes]:
    """The answer, once the seat the request took is free again: the server frees it when it has
    written the answer, which can be just after the client has read it."""
    seats = server.flow_control.seats_in_use("global-default")
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        answer = response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()
    wait_for(
        "the request's seat freed",
        lambda: server.flow_control.seats_in_use("global-default") <= seats,
        timeout=10,
    )
    return answer


def test_a_full_priority_level_answers_kube_apiservers_429(server: ApiServer, reader: str) -> None:
    ticket = hold_the_seat(server)
    try:
        status, headers, body = get(server, "/api/v1/nodes", reader)
    finally:
        ticket.release()

    assert status == 429
    assert body == b"Too many requests, please try again later.\n"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Retry-After"] == "1"
    schema, level = server.flow_control.classify(
        rbac.request_attributes(rbac.Identity(READER, (rbac.AUTHENTICATED,)), "GET", "/api/v1/nodes", {})
    )
    assert (schema.name, level.name) == ("global-default", "global-default")
    assert headers["X-Kubernetes-PF-FlowSchema-UID"] == schema.uid
    assert headers["X-Kubernetes-PF-PriorityLevel-UID"] == level.uid


def test_served_requests_carry_the_pf_headers_and_the_administrator_is_exempt(
    server: ApiServer, reader: str
) -> None:
    status, headers, _ = get(server, "/api/v1/nodes", reader)
    assert status == 200
    assert "X-Kubernetes-PF-PriorityLevel-UID" in headers

    ticket = hold_the_seat(server)
    try:
        status, headers, _ = get(server, "/api/v1/nodes", server.token)  # system:masters
    finally:
        ticket.release()
    assert status == 200
    exempt = next(lv for lv in DEFAULT_PRIORITY_LEVELS if lv.name == "exempt")
    assert headers["X-Kubernetes-PF-PriorityLevel-UID"] == exempt.uid


def test_a_streaming_watch_holds_no_seat(server: ApiServer, reader: str) -> None:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)
    try:
        conn.request("GET", "/api/v1/nodes?watch=true", headers={"Authorization": f"Bearer {reader}"})
        watch = conn.getresponse()
        assert watch.status == 200

        status, _, body = get(server, "/api/v1/nodes", reader)  # the level's one seat is free

        assert status == 200, body
        assert json.loads(body)["kind"] == "NodeList"
        assert server.flow_control.seats_in_use("global-default") == 0
    finally:
        conn.close()


@pytest.fixture
def functions(server: ApiServer, reader: str, tmp_path: Any) -> Iterator[Any]:
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig", token=reader))
    cluster_module.reset_connections()
    yield cluster_module.connect(Settings(cluster_name="c", region="us-east-1", kubeconfig=kubeconfig))
    cluster_module.reset_connections()


def test_the_products_client_reads_again_after_a_429(server: ApiServer, functions: Any) -> None:
    server.flow_control.held = hold_the_seat(server)  # type: ignore[attr-defined]

    nodes = functions.list(NODES)

    assert nodes == []
    assert server.flow_control.stats("global-default").rejected == {"concurrency-limit": 1}


def test_a_write_turned_away_by_flow_control_is_sent_again_after_retry_after(
    server: ApiServer, functions: Any
) -> None:
    """APF answers before any handler runs, so the write never happened: sending it again is safe, as
    client-go does for every 429 carrying Retry-After. (The product used to end the invocation on it:
    a provisioner pass lost to one 429 in the APF e2e.)"""
    server.flow_control.held = hold_the_seat(server)  # type: ignore[attr-defined]

    created = functions.create(LEASES, {"metadata": {"name": "l"}, "spec": {}}, namespace="default")

    assert created["metadata"]["name"] == "l"
    assert server.flow_control.stats("global-default").rejected == {"concurrency-limit": 1}


def test_a_write_turned_away_on_every_attempt_reaches_its_caller_as_transient_server_busy(
    server: ApiServer, functions: Any
) -> None:
    ticket = hold_the_seat(server)
    try:
        with pytest.raises(ServerBusy) as busy:
            functions.create(LEASES, {"metadata": {"name": "l"}, "spec": {}}, namespace="default")
    finally:
        ticket.release()

    assert busy.value.status == 429
    assert busy.value.transient
    assert busy.value.retry_after_seconds is not None
    assert "Too many requests" in busy.value.message
    assert sum(server.flow_control.stats("global-default").rejected.values()) == 1 + client.READ_RETRIES


def test_the_functions_identity_is_in_global_default() -> None:
    identity = rbac.Identity(AUTOSCALER_USER, (AUTOSCALER_GROUP, rbac.AUTHENTICATED))
    schema, level = FlowControl(600).classify(rbac.request_attributes(identity, "GET", "/api/v1/pods", {}))

    assert (schema.name, level.name) == ("global-default", "global-default")
