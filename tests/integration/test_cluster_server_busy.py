"""An API server answering 429 or 5xx: reads are asked again, and what persists ends a handler cleanly.

Found by the fault matrix: a 500 to one list made the provisioner and disruption handlers raise
(a traceback per invocation) instead of ending with the one log line and metric they give for an
unreachable server. A busy answer is now ``ServerBusy`` (an ``ApiError`` and an ``ApiUnavailable``)
and a GET is repeated twice within the call deadline, after ``Retry-After`` when the server sends it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from nodewright import cluster as cluster_module
from nodewright.cluster import ApiError, ApiUnavailable, ServerBusy
from nodewright.settings import Settings


class _Busy:
    """How many more requests get ``status`` (with ``retry_after``), and what was asked."""

    def __init__(self) -> None:
        self.left = 0
        self.status = 500
        self.retry_after: str | None = None
        self.seen: list[tuple[str, float]] = []


@pytest.fixture
def busy(tmp_path: Any) -> Iterator[tuple[str, _Busy]]:
    state = _Busy()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.seen_request()
            if state.left > 0:
                state.left -= 1
                body = {"kind": "Status", "status": "Failure", "code": state.status, "reason": "Busy"}
                self.send_response(state.status)
                if state.retry_after:
                    self.send_header("Retry-After", state.retry_after)
            else:
                body = {"kind": "NodeList", "items": [], "metadata": {}}
                self.send_response(200)
            data = json.dumps(body).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def seen_request(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            state.seen.append((self.command, time.monotonic()))

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{server.server_address[1]}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
"""
    )
    cluster_module.reset_connections()
    yield str(path), state
    cluster_module.reset_connections()
    server.shutdown()
    server.server_close()


def _connect(kubeconfig: str) -> Any:
    return cluster_module.connect(Settings(cluster_name="c", region="us-west-2", kubeconfig=kubeconfig))


def test_a_read_answered_500_twice_is_asked_again_and_succeeds(busy: tuple[str, _Busy]) -> None:
    kubeconfig, state = busy
    state.left = 2
    cluster = _connect(kubeconfig)
    assert cluster.list_nodes() == []
    assert [method for method, _ in state.seen] == ["GET"] * 3


def test_a_read_answered_429_waits_for_retry_after(busy: tuple[str, _Busy]) -> None:
    kubeconfig, state = busy
    state.left, state.status, state.retry_after = 1, 429, "1"
    cluster = _connect(kubeconfig)
    assert cluster.list_nodes() == []
    (_, first), (_, second) = state.seen
    assert second - first >= 0.9, "Retry-After: 1 was honoured"


def test_a_read_still_busy_after_its_retries_is_server_busy_an_unavailable_server(
    busy: tuple[str, _Busy],
) -> None:
    kubeconfig, state = busy
    state.left = 10
    cluster = _connect(kubeconfig)
    with pytest.raises(ServerBusy) as caught:
        cluster.list_nodes()
    assert isinstance(caught.value, ApiUnavailable)
    assert isinstance(caught.value, ApiError)
    assert caught.value.status == 500
    assert caught.value.transient
    assert len(state.seen) == 3


def test_a_busy_read_is_not_repeated_past_the_call_deadline(busy: tuple[str, _Busy]) -> None:
    kubeconfig, state = busy
    state.left, state.status, state.retry_after = 10, 503, "2"
    cluster = _connect(kubeconfig)
    cluster.set_call_deadline(time.monotonic() + 1.5)
    with pytest.raises(ServerBusy):
        cluster.list_nodes()
    assert len(state.seen) == 1, "a 2 s wait cannot fit in 1.5 s"


def test_a_read_waits_the_servers_whole_retry_after_or_not_at_all(busy: tuple[str, _Busy]) -> None:
    """A throttled server asking for 3 s is not asked again after 2 (the client capped its wait at
    2 s, so under a 429 storm it came back early and shed more): with 2.9 s left, 3 s cannot fit."""
    kubeconfig, state = busy
    state.left, state.status, state.retry_after = 10, 429, "3"
    cluster = _connect(kubeconfig)
    cluster.set_call_deadline(time.monotonic() + 2.9)
    with pytest.raises(ServerBusy):
        cluster.list_nodes()
    assert len(state.seen) == 1, "the 3 s the server asked for cannot fit in 2.9 s"


def test_a_read_without_a_deadline_waits_the_whole_retry_after(busy: tuple[str, _Busy]) -> None:
    kubeconfig, state = busy
    state.left, state.status, state.retry_after = 1, 429, "7"
    cluster = _connect(kubeconfig)
    slept: list[float] = []
    cluster.clock.sleep = slept.append  # type: ignore[method-assign]  # record the wait, do not spend it
    assert cluster.list_nodes() == []
    assert slept == [7], "the server's Retry-After, whole"


def test_a_write_answered_500_is_not_repeated(busy: tuple[str, _Busy]) -> None:
    kubeconfig, state = busy
    state.left = 1
    cluster = _connect(kubeconfig)
    with pytest.raises(ServerBusy):
        cluster.request("POST", "/api/v1/namespaces/default/events", body={"kind": "Event"})
    assert [method for method, _ in state.seen] == ["POST"]
