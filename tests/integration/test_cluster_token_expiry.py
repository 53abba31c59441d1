"""EKS tokens and per-container caches across a frozen Lambda container, against the API emulator.

Lambda freezes a container between invocations; ``time.monotonic`` need not advance meanwhile.
These tests hold the monotonic clock still and jump the wall clock, as an hour-long freeze does,
and check the token is re-signed and the caches reload; and that a 401 is answered by one
re-signed retry, never by a loop.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.client import ApiClient, Configuration
from nodewright.cloud.cache import TTLCache
from nodewright.cluster import auth
from nodewright.cluster.client import Cluster
from nodewright.cluster.errors import ApiError

from sandbox.apiserver import ApiServer

pytestmark = pytest.mark.timeout(60)

GOOD = "k8s-aws-v1.good"


class WallClock:
    """A wall clock a test moves; nothing here reads time.monotonic, as in a frozen container."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def jump(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer(token=GOOD) as srv:
        yield srv


def eks_style_cluster(server: ApiServer, tokens: list[str], clock: WallClock) -> tuple[Cluster, list[str]]:
    """A Cluster whose token comes from a TokenRefresher (as auth.eks_configuration builds it)."""
    signed: list[str] = []

    def sign() -> str:
        token = tokens[min(len(signed), len(tokens) - 1)]
        signed.append(token)
        return token

    configuration = Configuration(host=server.url)
    refresher = auth.TokenRefresher("demo", sign, clock=clock)
    refresher(configuration)  # the first token is signed at setup, as eks_configuration does
    configuration.refresh_api_key_hook = refresher
    return Cluster(ApiClient(configuration)), signed


def test_a_token_signed_before_a_long_freeze_is_re_signed_before_the_next_request(server) -> None:
    clock = WallClock()
    cluster, signed = eks_style_cluster(server, [GOOD, GOOD], clock)
    cluster.list_nodes()
    cluster.list_nodes()
    assert len(signed) == 1  # reused within the refresh interval
    clock.jump(60 * 60)  # an hour frozen: the monotonic clock did not move, the wall clock did
    cluster.list_nodes()
    assert len(signed) == 2


def test_a_wall_clock_stepped_back_re_signs_rather_than_trusting_the_old_token() -> None:
    clock = WallClock()
    signed: list[str] = []

    def sign() -> str:
        signed.append(f"k8s-aws-v1.{len(signed)}")
        return signed[-1]

    refresher = auth.TokenRefresher("demo", sign, clock)
    config = Configuration()
    refresher(config)
    clock.jump(-3600)
    refresher(config)
    assert config.api_key["authorization"] == signed[-1] == "k8s-aws-v1.1"


def test_a_401_is_answered_by_one_re_signed_retry(server) -> None:
    clock = WallClock()
    cluster, signed = eks_style_cluster(server, ["k8s-aws-v1.expired", GOOD], clock)
    assert cluster.list_nodes() == []  # 401 with the expired token, then 200 with the new one
    assert signed == ["k8s-aws-v1.expired", GOOD]


def test_a_token_the_server_keeps_refusing_fails_after_one_retry(server) -> None:
    clock = WallClock()
    cluster, signed = eks_style_cluster(server, ["k8s-aws-v1.bad"], clock)
    with pytest.raises(ApiError) as caught:
        cluster.list_nodes()
    assert caught.value.status == 401
    assert len(signed) == 2  # setup + exactly one re-sign: no retry loop


def test_a_kubeconfig_token_is_not_retried(server, tmp_path) -> None:
    configuration = Configuration(host=server.url)
    configuration.api_key["authorization"] = "not-the-token"
    configuration.api_key_prefix["authorization"] = "Bearer"
    assert auth.reauthenticate(configuration) is False
    with pytest.raises(ApiError) as caught:
        Cluster(ApiClient(configuration)).list_nodes()
    assert caught.value.status == 401


def test_cached_lookups_expire_by_the_wall_clock_across_a_freeze() -> None:
    clock = WallClock()
    cache: TTLCache[str] = TTLCache(300, clock=clock)
    loads: list[int] = []
    assert cache.get_or_load("subnets", lambda: loads.append(1) or "v1") == "v1"
    clock.jump(299)
    assert cache.get_or_load("subnets", lambda: loads.append(1) or "v2") == "v1"
    clock.jump(2)
    assert cache.get_or_load("subnets", lambda: loads.append(1) or "v3") == "v3"
    clock.jump(-600)  # a step back: an entry "from the future" is not trusted
    assert cache.get("subnets") is None
    assert len(loads) == 2


def test_the_real_cache_and_refresher_default_to_the_wall_clock() -> None:
    import time

    assert TTLCache(1).clock is time.time
    assert auth.TokenRefresher("c", lambda: "t")._clock is time.time
