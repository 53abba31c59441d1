"""A black-holed or refusing API server costs a handler seconds, never its whole invocation.

Before: a (5, 30) s timeout and urllib3's three default retries made one call to a black-holed
server take ~121 s, so the interruption batch timed out and went to the DLQ. Every call is now
bounded by the invocation's remaining time (``Cluster.set_call_deadline``) and retried once at most.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from nodewright import cluster as cluster_module
from nodewright.cluster import ApiUnavailable
from nodewright.settings import Settings


@pytest.fixture
def black_hole(tmp_path: Any) -> Iterator[str]:
    """A kubeconfig for a server that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: c, context: {{cluster: c, user: u}}}}]
current-context: c
"""
    )
    yield str(path)
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    listener.close()


def _connect(kubeconfig: str) -> Any:
    cluster_module.reset_connections()
    return cluster_module.connect(Settings(cluster_name="c", region="us-west-2", kubeconfig=kubeconfig))


def test_a_call_to_a_black_holed_api_server_ends_within_the_invocations_time(black_hole: str) -> None:
    cluster = _connect(black_hole)
    cluster.set_call_deadline(time.monotonic() + 3.0)
    started = time.monotonic()
    with pytest.raises(ApiUnavailable):
        cluster.list_nodes()
    assert time.monotonic() - started < 10.0, "bounded by the deadline, not by (5 s, 30 s) x 4 attempts"
    cluster_module.reset_connections()


def test_no_call_starts_once_the_invocations_time_is_spent(black_hole: str) -> None:
    cluster = _connect(black_hole)
    cluster.set_call_deadline(time.monotonic() + 0.1)
    with pytest.raises(ApiUnavailable, match="not started"):
        cluster.list_nodes()
    cluster_module.reset_connections()


def test_a_refusing_api_server_fails_at_once_as_transient(tmp_path: Any) -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f'clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{port}"}}}}]\n'
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    cluster = _connect(str(path))
    cluster.set_call_deadline(time.monotonic() + 30.0)
    with pytest.raises(ApiUnavailable) as caught:
        cluster.list_nodes()
    assert caught.value.transient
    cluster_module.reset_connections()
