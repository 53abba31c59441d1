"""Every request to the API server takes a token of the container's rate limiter first.

Against the API emulator, with the limiter on an injected ``FakeClock`` (time moves only by the
limiter's own waits): the requests past the burst cost exactly the bucket's time, every kind of
request (list pages, creates, patches, evictions, the provisioner's watch, ``nodewright top``'s
reflector) is counted by the limiter as the HTTP requests that leave the client, and
``nodewright.cluster.connect`` gives every caller in a container the one limiter the settings size.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeClock
from nodewright import cluster as cluster_module
from nodewright.cluster import Cluster, TokenBucket, client
from nodewright.cluster.informer import Reflector
from nodewright.cluster.resources import NODES, PODS
from nodewright.settings import Settings

from sandbox.apiserver import ApiServer
from sandbox.aws.faults import ApiFault, ApiServerFaults

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server() -> Iterator[ApiServer]:
    api = ApiServer()
    api.faults = ApiServerFaults()  # none until a test adds one
    api.faults.target_tokens.add(api.token)
    with api:
        yield api


@pytest.fixture
def settings(server: ApiServer, tmp_path: Any) -> Iterator[Settings]:
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    cluster_module.reset_connections()
    yield Settings(
        cluster_name="c", region="us-east-1", kubeconfig=kubeconfig, kube_client_qps=20, kube_client_burst=5
    )
    cluster_module.reset_connections()


class Sent:
    """Counts the HTTP requests the ``ApiClient`` sends (every one, whatever the verb)."""

    def __init__(self, api_client: Any) -> None:
        self.count = 0
        self._lock = threading.Lock()
        original = api_client.call_api

        def counting(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.count += 1
            return original(*args, **kwargs)

        api_client.call_api = counting


def _limited(settings: Settings, qps: float, burst: int) -> tuple[Cluster, TokenBucket, FakeClock, Sent]:
    clock = FakeClock()
    bucket = TokenBucket(qps, burst, clock=clock)
    api_client = cluster_module.connect(settings).api_client
    return Cluster(api_client, limiter=bucket), bucket, clock, Sent(api_client)


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"rate-limit-test": "yes"}}}


def test_requests_past_the_burst_take_the_buckets_time(settings: Settings) -> None:
    qps, burst, extra = 10.0, 4, 6
    cluster, bucket, clock, sent = _limited(settings, qps, burst)
    start = clock.monotonic()
    for i in range(burst + extra):
        cluster.create(NODES, _node(f"n{i}"))
    assert sent.count == burst + extra
    assert bucket.waits == extra
    assert clock.monotonic() - start >= extra / qps - 1e-9, "each request past the burst waited 1/qps"
    assert len(cluster.list_nodes(label_selector="rate-limit-test=yes")) == burst + extra


def test_every_kind_of_request_takes_a_token(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "LIST_PAGE_SIZE", 2)  # 5 nodes: three list pages
    cluster, bucket, clock, sent = _limited(settings, 50.0, 3)
    for i in range(5):
        cluster.create(NODES, _node(f"n{i}"))
    assert len(cluster.list_nodes()) == 5
    cluster.patch_node("n0", {"metadata": {"labels": {"patched": "yes"}}})
    cluster.taint_node("n1", [{"key": "k", "effect": "NoSchedule"}], cordon=True)  # GET + PATCH
    cluster.request(
        "POST", "/api/v1/namespaces/default/serviceaccounts", body={"metadata": {"name": "default"}}
    )
    pod = cluster.create(
        PODS,
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    assert cluster.evict(pod).outcome.value == "evicted"
    cluster.list_pending_pods()
    cluster.wait_for_pending_pods(1, lambda _pod: True)  # the watch's request (ends within 1 s)
    assert bucket.requests == sent.count, "every request the client sent took a token"
    assert sent.count >= 5 + 3 + 1 + 2 + 1 + 1 + 1 + 1 + 1
    assert bucket.waits == bucket.requests - 3
    assert clock.monotonic() - 1000.0 == pytest.approx((bucket.requests - 3) / 50.0)


def test_nodewright_tops_reflector_lists_and_watches_through_the_limiter(settings: Settings) -> None:
    cluster, bucket, _, sent = _limited(settings, 50.0, 1)
    cluster.create(NODES, _node("n0"))
    reflector = Reflector(cluster, NODES, watch_seconds=1)
    reflector.list()
    reflector.watch()  # one watch request; the server ends it after a second
    assert [o["metadata"]["name"] for o in reflector.objects()] == ["n0"]
    assert bucket.requests == sent.count == 3
    assert bucket.waits == 2


def test_callers_in_a_container_share_the_limiter_the_settings_size(settings: Settings) -> None:
    handler = cluster_module.connect(settings)
    other = cluster_module.connect(settings)
    assert handler.limiter is other.limiter is not None
    assert (handler.limiter.qps, handler.limiter.burst) == (20.0, 5)
    before = handler.limiter.requests
    handler.list_nodes()
    other.list_nodes()
    assert handler.limiter.requests == before + 2


def test_a_429_with_retry_after_from_the_emulator_is_waited_out_on_the_clock(
    settings: Settings, server: ApiServer
) -> None:
    """API Priority and Fairness's answer, as the sandbox's ``throttle`` fault gives it: the read is
    asked again after Retry-After, and the retry takes a token of its own."""
    faults = server.faults
    faults.add(ApiFault("throttle", times=1, retry_after=1))
    cluster, bucket, clock, sent = _limited(settings, 50.0, 10)
    assert cluster.list_nodes() == []
    assert faults.hits == {"throttle": 1}
    assert sent.count == bucket.requests == 2
    assert clock.slept == [1.0], "Retry-After: 1 honoured on the injected clock"
