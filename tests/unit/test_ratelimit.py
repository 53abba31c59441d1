"""The client-side request rate limit: a token bucket on the project's clock (``FakeClock`` here).

Every figure is read off the injected clock, never the wall clock: the bucket lets ``burst`` requests
through at once, then one per ``1/qps`` seconds, and refuses (taking nothing) a wait that would end
past the caller's deadline, as client-go's limiter refuses one past its context's deadline.
"""

from __future__ import annotations

import threading

import pytest
from fakes import FakeClock
from nodewright.cluster import ApiUnavailable, ClientThrottled, Cluster, TokenBucket
from nodewright.cluster.client import MIN_CALL_SECONDS
from nodewright.settings import KUBE_CLIENT_BURST, KUBE_CLIENT_QPS, Settings, SettingsError


def test_burst_requests_go_at_once_then_one_every_tick_of_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=5, burst=10, clock=clock)
    start = clock.monotonic()
    waits = [bucket.wait("GET /api/v1/nodes") for _ in range(15)]
    assert waits[:10] == [0.0] * 10
    assert waits[10:] == pytest.approx([0.2] * 5)
    assert clock.monotonic() - start == pytest.approx(1.0), "5 past the burst at 5/s take 1 s"
    assert (bucket.requests, bucket.waits) == (15, 5)
    assert bucket.waited_seconds == pytest.approx(1.0)


def test_tokens_come_back_at_the_rate_and_never_beyond_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    for _ in range(3):
        bucket.wait("x")
    clock.advance(0.25)  # 2.5 tokens back
    assert [bucket.reserve("x") for _ in range(3)] == pytest.approx([0.0, 0.0, 0.05])
    clock.advance(3600)  # an idle hour refills to the burst, not to 36,000
    assert [bucket.reserve("x") for _ in range(4)][-1] > 0
    assert bucket.waits == 2


def test_the_seconds_until_full_are_what_the_requests_owe_and_take_nothing() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=5, clock=clock)
    assert bucket.seconds_until_full() == 0.0
    for _ in range(7):  # two past the burst: the bucket owes them too
        bucket.reserve("x")
    assert bucket.seconds_until_full() == pytest.approx(0.7)
    clock.advance(0.3)
    assert bucket.seconds_until_full() == pytest.approx(0.4)
    assert bucket.requests == 7, "looking takes no token"
    clock.advance(0.4)
    assert bucket.seconds_until_full() == pytest.approx(0.0)
    assert [bucket.reserve("x") for _ in range(6)][-1] > 0, "full: the burst again, then paced"


def test_a_new_rate_paces_from_then_on_and_the_old_one_comes_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=5, burst=2, clock=clock)
    for _ in range(2):
        bucket.wait("x")
    assert bucket.set_rate(50, 4) == (5.0, 2)
    assert bucket.reserve("x") == pytest.approx(0.02), "one every 1/50 s"
    clock.advance(1)
    assert [bucket.reserve("x") for _ in range(5)][-1] == pytest.approx(0.02), "burst of 4, then paced"
    assert bucket.set_rate(5, 2) == (50.0, 4)
    clock.advance(10)
    assert [bucket.reserve("x") for _ in range(3)] == pytest.approx([0.0, 0.0, 0.2]), "the old burst"


def test_concurrent_reservations_queue_one_behind_the_other() -> None:
    """Waiters reserve in turn: the third caller past an empty bucket waits three ticks, not one."""
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=1, clock=clock)
    assert bucket.reserve("a") == 0.0
    assert [bucket.reserve("b"), bucket.reserve("c"), bucket.reserve("d")] == pytest.approx([0.5, 1.0, 1.5])


def test_a_wait_past_the_deadline_is_refused_at_once_and_takes_no_token() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock)
    bucket.wait("first")
    with pytest.raises(ClientThrottled) as refused:
        bucket.wait("GET /api/v1/pods", deadline=clock.monotonic() + 0.5)
    assert clock.slept == [], "refused without sleeping"
    assert isinstance(refused.value, ApiUnavailable)
    assert refused.value.transient
    assert "GET /api/v1/pods" in str(refused.value)
    assert "KUBE_CLIENT_QPS" in str(refused.value)
    assert bucket.requests == 1, "the refused call took nothing"
    assert bucket.wait("second", deadline=clock.monotonic() + 1.0) == pytest.approx(1.0)


def test_try_accept_takes_a_token_that_is_there_and_refuses_without_waiting_when_none_is() -> None:
    """client-go's ``TryAccept`` (Karpenter's recorder drops a rate-limited event through it): the
    burst goes through at once, then one per ``1/qps``; a refusal takes nothing and never sleeps."""
    clock = FakeClock()
    bucket = TokenBucket(qps=5, burst=10, clock=clock)
    assert [bucket.try_accept() for _ in range(11)] == [True] * 10 + [False]
    clock.advance(0.2)
    assert [bucket.try_accept(), bucket.try_accept()] == [True, False]
    assert clock.slept == []
    assert (bucket.requests, bucket.waits) == (11, 0)


def test_the_bucket_is_shared_safely_by_threads() -> None:
    """Many threads at once never get more than burst + rate x time through (counted, not timed)."""
    clock = FakeClock()
    lock = threading.Lock()
    bucket = TokenBucket(qps=100, burst=20, clock=clock)
    waits: list[float] = []

    def worker() -> None:
        for _ in range(50):
            wait = bucket.reserve("x")
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert bucket.requests == 400
    # The clock never moved: the last reservation is due when 380 tokens past the burst have come.
    assert max(waits) == pytest.approx(380 / 100)
    assert sorted(waits) == pytest.approx([max(0.0, (i - 19) / 100) for i in range(400)])


def test_a_bucket_without_rate_or_burst_is_refused() -> None:
    with pytest.raises(ValueError, match="qps > 0"):
        TokenBucket(qps=0, burst=10)
    with pytest.raises(ValueError, match="burst >= 1"):
        TokenBucket(qps=5, burst=0)


def test_a_cluster_call_that_the_limit_would_hold_past_its_deadline_is_not_started() -> None:
    """The deadline the invocation sets binds the limiter's wait as it binds the call: a wait that
    leaves less than MIN_CALL_SECONDS fails fast, before any request leaves."""

    class NoServer:
        def param_serialize(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("no request may be built")

    clock = FakeClock()
    bucket = TokenBucket(qps=1, burst=1, clock=clock)
    bucket.wait("earlier call")
    cluster = Cluster(NoServer(), limiter=bucket)
    cluster.set_call_deadline(clock.monotonic() + 1.0 + MIN_CALL_SECONDS - 0.01)
    with pytest.raises(ClientThrottled, match="GET /api/v1/nodes"):
        cluster.list_nodes()
    assert clock.slept == []


def test_settings_read_the_rate_limit_and_default_to_the_documented_numbers() -> None:
    env = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}
    default = Settings.from_env(env)
    assert (default.kube_client_qps, default.kube_client_burst) == (KUBE_CLIENT_QPS, KUBE_CLIENT_BURST)
    set_ = Settings.from_env({**env, "KUBE_CLIENT_QPS": "12.5", "KUBE_CLIENT_BURST": "30"})
    assert (set_.kube_client_qps, set_.kube_client_burst) == (12.5, 30)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("KUBE_CLIENT_QPS", "0", "KUBE_CLIENT_QPS='0': use a number above zero"),
        ("KUBE_CLIENT_QPS", "fast", "KUBE_CLIENT_QPS='fast': use a number above zero"),
        ("KUBE_CLIENT_QPS", "inf", "KUBE_CLIENT_QPS='inf': use a number above zero"),
        ("KUBE_CLIENT_BURST", "-1", "KUBE_CLIENT_BURST='-1': use a whole number above zero"),
        ("KUBE_CLIENT_BURST", "2.5", "KUBE_CLIENT_BURST='2.5': use a whole number above zero"),
    ],
)
def test_a_rate_limit_the_layer_cannot_use_is_refused_by_name(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1", name: value})
