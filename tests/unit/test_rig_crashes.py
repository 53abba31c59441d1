"""A killed invocation, as the rig makes one (``sandbox.scenarios.reliability.Crashes``): Lambda stops
every thread of the process at once, so no thread of the invocation may reach the API server or AWS
after the kill, and the rig's process must still be able to exit."""

from __future__ import annotations

import contextvars
import http.server
import threading
from collections.abc import Iterator

import pytest
import urllib3
from nodewright.checkpoints import checkpoint

from sandbox.scenarios.reliability import Crashes


class _Counting(http.server.BaseHTTPRequestHandler):
    served = 0

    def do_GET(self) -> None:
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Counting.served = 0
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def test_a_killed_invocations_other_thread_never_sends_its_next_request_and_is_unwound_at_stop(
    server: str,
) -> None:
    original = urllib3.connectionpool.HTTPConnectionPool.urlopen
    crashes = Crashes()
    crashes.install()
    try:
        box: dict[str, object] = {"done": threading.Event()}
        crashes.current.box = box
        crashes.arm("termination.cordoned")
        sent_first, killed = threading.Event(), threading.Event()
        ended: list[str] = []
        http = urllib3.PoolManager()

        def invocation() -> None:
            sent_first.wait()
            checkpoint("termination.cordoned")  # frozen here, as Lambda kills the process

        def sibling() -> None:  # e.g. the interruption's replacement, started by the invocation
            http.request("GET", server)  # before the kill: sent
            sent_first.set()
            killed.wait()
            try:
                http.request("GET", server)  # after it: must never be sent
            except BaseException as exc:
                ended.append(type(exc).__name__)
                raise

        main = threading.Thread(target=contextvars.copy_context().run, args=(invocation,), daemon=True)
        other = threading.Thread(target=contextvars.copy_context().run, args=(sibling,), daemon=True)
        crashes.current.box = None
        other.start()
        main.start()
        done = box["done"]
        assert isinstance(done, threading.Event)
        assert done.wait(10)
        assert box["killed"] == "termination.cordoned"
        killed.set()
        other.join(0.5)
        assert other.is_alive(), "the sibling is frozen before its request"
        assert _Counting.served == 1
    finally:
        crashes.uninstall()
    other.join(5)
    main.join(5)
    assert not other.is_alive(), "stopping the rig unwinds the frozen threads"
    assert not main.is_alive()
    assert ended == ["InvocationKilled"]
    assert _Counting.served == 1, "nothing the dead invocation tried after its kill reached the server"
    assert urllib3.connectionpool.HTTPConnectionPool.urlopen is original


def test_a_killed_containers_frozen_load_does_not_hold_up_the_next_container() -> None:
    """In Lambda the kill takes the process and its caches; in the rig's one process a thread frozen
    inside a cache's single-flight load held it for every later container, and a chaos run hung."""
    from nodewright.cloud import catalog
    from nodewright.cloud.provider import CloudProvider

    from sandbox.scenarios.reliability import lose_process_state

    key = ("rig-test", "frozen-load")
    in_load, never = threading.Event(), threading.Event()

    def dead_load() -> object:
        in_load.set()
        never.wait()  # as a thread the kill froze at its request
        return "from the dead container"

    dead = threading.Thread(target=catalog._CATALOGS.get_or_load, args=(key, dead_load), daemon=True)
    dead.start()
    assert in_load.wait(5)
    CloudProvider._shared[key] = object()  # type: ignore[index,assignment]
    answers: list[object] = []
    try:
        lose_process_state()
        fresh = threading.Thread(
            target=lambda: answers.append(catalog._CATALOGS.get_or_load(key, lambda: "loaded again")),
            daemon=True,
        )
        fresh.start()
        fresh.join(5)
        assert answers == ["loaded again"], "the next container loads for itself"
        assert key not in CloudProvider._shared, "its provider is built anew"
    finally:
        never.set()
        dead.join(5)
        catalog._CATALOGS.forget(key)
