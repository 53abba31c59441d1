"""The EC2 provider asked by a pass's concurrent launches at once (``provisioning.parallel``), against
moto: one warm container's caches answer every thread, a missing entry is loaded once (the instance
profile's role is added once: IAM refuses a second), and the subnets' in-flight IPs are counted when
a launch chooses them, so concurrent launches do not all take the last free IP of one subnet."""

from __future__ import annotations

import threading
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from nodewright.cloud.cache import TTLCache
from nodewright.cloud.errors import NoSubnetError
from nodewright.cloud.provider import CloudProvider
from test_cloud_provider import Env, env, nodeclass, request  # noqa: F401 - the fixtures

THREADS = 6
BARRIER_TIMEOUT_SECONDS = 60.0


def at_once(work: Any, count: int = THREADS) -> list[Any]:
    """``work(i)`` in ``count`` threads released together; their results (an exception is a result)."""
    start = threading.Barrier(count, timeout=BARRIER_TIMEOUT_SECONDS)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        start.wait()
        try:
            results[index] = work(index)
        except Exception as exc:  # kept, for the test to show
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def calls_of(client: Any, operation: str) -> Counter[str]:
    seen: Counter[str] = Counter()
    client.meta.events.register(
        f"before-call.{client.meta.service_model.endpoint_prefix}.{operation}",
        lambda **_: seen.update([operation]),
    )
    return seen


def test_concurrent_launches_from_a_cold_container_each_get_an_instance(env: Env) -> None:  # noqa: F811
    provider = CloudProvider(env.settings)
    added = calls_of(provider.templates._iam, "AddRoleToInstanceProfile")
    created = calls_of(provider.ec2, "CreateLaunchTemplate")

    results = at_once(lambda i: provider.create(request(f"default-{i:05d}", fresh=True)))

    failures = [r for r in results if isinstance(r, Exception)]
    assert failures == []
    assert len({r.instance_id for r in results}) == THREADS
    assert added["AddRoleToInstanceProfile"] == 1  # a second would be refused: one role a profile
    templates = {t["LaunchTemplateName"] for t in env.ec2.describe_launch_templates()["LaunchTemplates"]}
    assert created["CreateLaunchTemplate"] == len(templates)
    assert {i.nodeclaim for i in provider.list()} == {f"default-{i:05d}" for i in range(THREADS)}


def test_a_launch_counts_an_ip_of_each_subnet_it_chose_until_it_knows_which_it_used(env: Env) -> None:  # noqa: F811
    provider = CloudProvider(env.settings)
    network = provider.network
    terms = [{"id": env.small_subnet}, {"id": env.subnets["us-east-1b"]}]
    small = next(s for s in network.subnets("default", terms) if s.id == env.small_subnet)
    network.take_ips(env.small_subnet, small.available_ips - 1)  # one IP left in us-east-1a

    first = network.reserve_subnets("default", terms)
    second = network.reserve_subnets("default", terms)  # in flight with the first

    assert first["us-east-1a"].id == env.small_subnet
    assert "us-east-1a" not in second  # the first launch holds the last IP
    with pytest.raises(NoSubnetError, match="out of free IPs"):
        network.reserve_subnets("default", terms, zones=["us-east-1a"])
    network.release_ips([env.small_subnet])  # the first launch used its us-east-1b subnet
    assert network.reserve_subnets("default", terms)["us-east-1a"].id == env.small_subnet


def test_a_launch_gives_back_the_ips_of_the_subnets_its_instance_did_not_use(env: Env) -> None:  # noqa: F811
    provider = CloudProvider(env.settings)
    network = provider.network
    terms = [{"tags": {"karpenter.sh/discovery": "c1"}}]
    free_before = {s.id: s.available_ips for s in network.subnets("default", terms)}

    result = provider.create(request(fresh=True))

    chosen = network.zonal_subnets("default", terms)
    for subnet in chosen.values():
        taken = 1 if subnet.id == result.subnet_id else 0
        assert network._inflight.get(subnet.id, 0) == taken, (subnet.id, free_before[subnet.id])


def test_a_missing_cache_entry_is_loaded_once_however_many_threads_ask() -> None:
    cache: TTLCache[str] = TTLCache(60.0)
    loads: list[int] = []
    release = threading.Event()
    entered = threading.Semaphore(0)

    def load() -> str:
        loads.append(1)
        assert release.wait(BARRIER_TIMEOUT_SECONDS)
        return "answer"

    def ask(_: int) -> str:
        entered.release()
        return cache.get_or_load("key", load)

    def release_once_all_asked() -> None:
        for _ in range(THREADS):
            entered.acquire()
        release.set()

    waiter = threading.Thread(target=release_once_all_asked)
    waiter.start()
    answers = at_once(ask)
    waiter.join()

    assert answers == ["answer"] * THREADS
    assert len(loads) == 1


def test_instance_types_are_built_again_only_when_what_they_are_made_of_changes(env: Env) -> None:  # noqa: F811
    provider = CloudProvider(env.settings)
    first = provider.instance_types(nodeclass())

    again = provider.instance_types(nodeclass())
    assert [t.name for t in again] == [t.name for t in first]
    assert all(a is b for a, b in zip(again, first, strict=True))  # the same list: nothing changed

    provider.mark_unavailable("c5.large", "us-east-1a", "spot", reason="InsufficientInstanceCapacity")
    marked = {t.name: t for t in provider.instance_types(nodeclass())}
    spot_1a = [o for o in marked["c5.large"].offerings if (o.zone, o.capacity_type) == ("us-east-1a", "spot")]
    assert [o.available for o in spot_1a] == [False]

    edited = provider.instance_types(nodeclass(kubelet={"maxPods": 10}))
    assert {t.allocatable["pods"] for t in edited} == {10}  # another spec: built for it


def test_instance_types_outlive_a_subnet_losing_free_addresses(env: Env) -> None:  # noqa: F811
    """Every launch and every pod's IP takes a subnet's address: the list is made of the subnets'
    zones, so a subnet described again with fewer free addresses must not cost a rebuild."""
    provider = CloudProvider(env.settings)
    terms = nodeclass()["spec"]["subnetSelectorTerms"]
    first = provider.instance_types(nodeclass())
    before = {s.id: s.available_ips for s in provider.network.subnets("default", terms)}
    env.ec2.create_network_interface(SubnetId=env.subnets["us-east-1a"])  # a pod's or a node's address
    provider.network._subnets.clear()  # the subnets' cache expired: described again

    after = {s.id: s.available_ips for s in provider.network.subnets("default", terms)}
    again = provider.instance_types(nodeclass())

    assert after[env.subnets["us-east-1a"]] == before[env.subnets["us-east-1a"]] - 1
    assert all(a is b for a, b in zip(again, first, strict=True))


def test_instance_types_outlive_the_clock_and_a_price_table_read_again_with_the_same_prices(
    env: Env,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst's first pass after a quiet minute plans with the list the last pass built: without
    capacity reservations nothing in it follows the clock, and the price table read again (a new
    object every minute) holds the same prices."""
    from nodewright.cloud import catalog
    from nodewright.cloud import provider as provider_module

    provider = CloudProvider(env.settings)
    first = provider.instance_types(nodeclass())
    prices = provider.prices()
    catalog._PRICES.clear()  # the minute's price-table cache expired: read from the store again
    reread = provider.prices()
    assert reread is not prices
    assert reread == prices
    later = time.time() + 3600.0
    monkeypatch.setattr(provider_module, "time", SimpleNamespace(time=lambda: later))

    again = provider.instance_types(nodeclass())

    assert all(a is b for a, b in zip(again, first, strict=True))


def test_a_pass_reads_the_unavailable_offerings_once_and_sees_its_own_marks_at_once(env: Env) -> None:  # noqa: F811
    provider = CloudProvider(env.settings)
    queries = calls_of(env.store._ddb, "Query")
    moment = [1000.0]
    provider._unavailable.clock = lambda: moment[0]  # the read's age, on a clock the test moves

    assert at_once(lambda _: provider.unavailable_offerings()) == [set()] * THREADS
    assert queries["Query"] == 1  # one read for every launch of the pass

    provider.mark_unavailable("m5.large", "us-east-1a", "spot", reason="InsufficientInstanceCapacity")
    env.store.mark_unavailable("c5.large", "us-east-1b", "on-demand", reason="another function's")
    assert provider.unavailable_offerings() == {("m5.large", "us-east-1a", "spot")}  # its own, at once

    moment[0] += 1.0  # the read is a second old: read again, another function's mark with it
    assert provider.unavailable_offerings() == {
        ("m5.large", "us-east-1a", "spot"),
        ("c5.large", "us-east-1b", "on-demand"),
    }


def test_each_aws_client_keeps_a_connection_for_every_launch_in_flight() -> None:
    from dataclasses import replace

    from nodewright.cloud import aws
    from nodewright.settings import Settings

    settings = Settings(cluster_name="c1", region="us-east-1", aws_endpoint_url="http://127.0.0.1:1")
    assert aws.client("ec2", settings).meta.config.max_pool_connections == settings.launch_concurrency
    wider = replace(settings, launch_concurrency=32)
    assert aws.client("ec2", wider).meta.config.max_pool_connections == 32
    narrow = replace(settings, launch_concurrency=2)
    assert aws.client("ec2", narrow).meta.config.max_pool_connections == aws.DEFAULT_POOL_CONNECTIONS
    aws.reset_clients()
