"""A provisioning pass launches its NodeClaims at once (``provisioning.parallel``), at most
``settings.launch_concurrency`` of them, and one launch's failure or crash touches its NodeClaim
alone. The fake cloud blocks each CreateFleet until as many are in flight as the test expects (a
barrier with a timeout): launches made one after another never get there, and fail the test."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
from fakes import FakeCloudProvider
from nodewright.api import labels
from nodewright.cloud import errors as cloud_errors
from nodewright.cloud.provider import LaunchRequest, LaunchResult
from nodewright.provisioning import flow, nodeclaims, parallel, planning
from nodewright.state.guard import WriteGuard
from test_provisioning_flow import FunctionDied, hand_made_nodeclaim, pending_pod, world  # noqa: F401 - the fixture

BARRIER_TIMEOUT_SECONDS = 30.0  # only a broken implementation ever waits this long


class AllInFlight:
    """``cloud.create`` that returns only once ``parties`` calls are in flight together (a barrier);
    records the most ever in flight and the threads that made the calls."""

    def __init__(self, cloud: FakeCloudProvider, parties: int) -> None:
        self.real = cloud.create
        self.barrier = threading.Barrier(parties, timeout=BARRIER_TIMEOUT_SECONDS)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.threads: set[str] = set()
        self.failing: dict[str, BaseException] = {}
        cloud.create = self  # type: ignore[method-assign]

    def __call__(self, request: LaunchRequest) -> LaunchResult:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.threads.add(threading.current_thread().name)
        try:
            self.barrier.wait()
            failure = self.failing.get(request.nodeclaim_name)
            if failure is not None:
                raise failure
            return self.real(request)
        finally:
            with self.lock:
                self.in_flight -= 1


POD_KEY = "test.nodewright.io/pod"  # each NodeClaim names its pod in a requirement of its own


class ManyNodes:
    """Stands in for the scheduling core: each pending pod gets a NodeClaim of its own, unless a
    NodeClaim made for it exists already (in flight, as the scheduler counts it)."""

    def __call__(self, observed: Any, pending: list[dict[str, Any]], pools: list[Any]) -> Any:
        covered = {
            value
            for claim in observed.nodeclaims
            for requirement in claim["spec"]["requirements"]
            if requirement["key"] == POD_KEY
            for value in requirement["values"]
        }
        view = planning.PlanView()
        for pod in pending:
            name = pod["metadata"]["name"]
            if name in covered:
                continue
            requirements = [
                {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
                {"key": POD_KEY, "operator": "In", "values": [name]},
            ]
            view.new_claims.append(planning.ClaimPlan("default", requirements, {"cpu": "1"}, [pod]))
        return view


@pytest.fixture
def many(world: Any, monkeypatch: pytest.MonkeyPatch) -> Any:  # noqa: F811
    monkeypatch.setattr(planning, "plan", ManyNodes())
    return world


def with_concurrency(ctx: Any, limit: int) -> None:
    ctx.settings = replace(ctx.settings, launch_concurrency=limit)


def test_a_pass_with_five_nodeclaims_launches_them_at_once(many: Any) -> None:
    ctx, cluster, cloud = many
    for index in range(5):
        cluster.add("Pod", pending_pod(f"p{index}"))
    fleet = AllInFlight(cloud, parties=5)

    report = flow.provision(ctx)

    assert fleet.peak == 5
    assert len(report.created) == 5
    assert sorted(x.nodeclaim for x in report.launched) == sorted(report.created)
    assert report.failures == []
    for name in report.created:
        assert nodeclaims.is_true(cluster.objects["NodeClaim"][name], "Launched")
    assert len(cloud.instances) == 5
    # Every pod is nominated to the NodeClaim made for it, whatever order the creates finished in.
    for index in range(5):
        claim = report.nominated[f"default/p{index}"].removeprefix("nodeclaim/")
        assert cluster.objects["NodeClaim"][claim]


def test_nodeclaims_left_unlaunched_by_a_crashed_pass_are_launched_at_once_too(many: Any) -> None:
    ctx, cluster, cloud = many
    for name in ("a", "b", "c"):
        cluster.add("NodeClaim", hand_made_nodeclaim(name))
    fleet = AllInFlight(cloud, parties=3)

    report = flow.provision(ctx)

    assert fleet.peak == 3
    assert [x.nodeclaim for x in report.launched] == ["a", "b", "c"]  # reported in the order asked


def test_the_launches_in_flight_never_exceed_the_launch_concurrency(many: Any) -> None:
    ctx, cluster, cloud = many
    with_concurrency(ctx, 2)
    for index in range(4):
        cluster.add("Pod", pending_pod(f"p{index}"))
    fleet = AllInFlight(cloud, parties=2)  # two at a time: (1, 2), then (3, 4)

    report = flow.provision(ctx)

    assert len(report.launched) == 4
    assert fleet.peak == 2
    assert len(fleet.threads) == 2


def test_a_launch_that_fails_abandons_only_its_own_nodeclaim(many: Any) -> None:
    ctx, cluster, cloud = many
    for index in range(4):
        cluster.add("Pod", pending_pod(f"p{index}"))
    fleet = AllInFlight(cloud, parties=4)
    doomed: dict[str, str] = {}
    real_create = cluster.create_nodeclaim

    def create_nodeclaim(body: dict[str, Any]) -> dict[str, Any]:
        created = real_create(body)
        name = created["metadata"]["name"]
        with fleet.lock:  # the first two NodeClaims created fail, each its own way
            if len(doomed) < 2:
                kind = "capacity" if not doomed else "unexpected"
                doomed[name] = kind
                fleet.failing[name] = (
                    cloud_errors.InsufficientCapacityError(name, [])
                    if kind == "capacity"
                    else RuntimeError("the connection was reset")
                )
        return created

    cluster.create_nodeclaim = create_nodeclaim  # type: ignore[method-assign]

    report = flow.provision(ctx)

    assert fleet.peak == 4
    by_kind = {kind: name for name, kind in doomed.items()}
    assert sorted((f.nodeclaim, f.code) for f in report.failures) == sorted(
        [(by_kind["capacity"], "InsufficientInstanceCapacity"), (by_kind["unexpected"], "RuntimeError")]
    )
    survivors = sorted(set(report.created) - set(doomed))
    assert sorted(x.nodeclaim for x in report.launched) == survivors
    for name in survivors:
        assert nodeclaims.is_true(cluster.objects["NodeClaim"][name], "Launched")
    # Out of capacity: its NodeClaim goes (no instance exists); unexpected: kept, retried next pass.
    assert by_kind["capacity"] not in cluster.objects["NodeClaim"]
    kept = cluster.objects["NodeClaim"][by_kind["unexpected"]]
    assert (nodeclaims.condition(kept, "Launched") or {}).get("reason") == "LaunchFailed"
    assert len(cloud.instances) == 2


def test_a_crash_during_concurrent_launches_leaves_one_instance_per_nodeclaim_after_the_next_pass(
    many: Any,
) -> None:
    ctx, cluster, cloud = many
    for index in range(3):
        cluster.add("Pod", pending_pod(f"p{index}"))
    fleet = AllInFlight(cloud, parties=3)
    first = threading.Event()
    real = fleet.real

    def dies_once_after_the_fleet(request: LaunchRequest) -> LaunchResult:
        result = real(request)
        if not first.is_set():
            first.set()
            raise FunctionDied("killed right after CreateFleet answered")
        return result

    fleet.real = dies_once_after_the_fleet  # type: ignore[method-assign]

    with pytest.raises(FunctionDied):
        flow.provision(ctx)
    assert len(cloud.instances) == 3
    cloud.create = fleet.real  # the next pass launches one at a time: no barrier to meet

    flow.provision(ctx)

    claims = cluster.objects["NodeClaim"]
    assert len(claims) == 3
    assert all(nodeclaims.is_true(c, "Launched") for c in claims.values())
    assert sorted(i.nodeclaim for i in cloud.instances.values()) == sorted(claims)  # one each


def test_a_guard_that_says_stop_mid_way_leaves_the_rest_for_the_next_pass(many: Any) -> None:
    ctx, cluster, cloud = many
    for index in range(6):
        cluster.add("Pod", pending_pod(f"p{index}"))

    class StopsAfter:
        """Says stop from its fourth answer on (the renewal failed), to every thread alike."""

        def __init__(self) -> None:
            self.asked = 0
            self.lock = threading.Lock()

        def why_stop(self) -> str | None:
            with self.lock:
                self.asked += 1
                return "the writers' lease could not be renewed" if self.asked > 3 else None

        def out_of_time(self) -> str | None:  # WriteGuard's: the stop said already, never renewing
            with self.lock:
                return "the writers' lease could not be renewed" if self.asked > 3 else None

    report = flow.provision(ctx, StopsAfter())  # type: ignore[arg-type]

    assert report.stopped == "the writers' lease could not be renewed"
    created_and_unlaunched = [
        c for c in cluster.objects["NodeClaim"].values() if not nodeclaims.is_true(c, "Launched")
    ]
    for claim in created_and_unlaunched:  # never marked failed: the next pass launches it
        assert nodeclaims.condition(claim, "Launched") is None

    following = flow.provision(ctx)

    assert following.stopped is None
    claims = cluster.objects["NodeClaim"]
    assert len(claims) == 6  # every pod got its NodeClaim once, across the two passes
    assert all(nodeclaims.is_true(c, "Launched") for c in claims.values())
    assert sorted(i.nodeclaim for i in cloud.instances.values()) == sorted(claims)


def test_the_write_guard_renews_the_lease_once_for_threads_asking_together(many: Any) -> None:
    ctx, cluster, _cloud = many
    guard = WriteGuard(cluster.lease, deadline=float("inf"), lease_seconds=30, monotonic=ctx.clock.monotonic)
    ctx.clock.advance(11)  # a renewal is due
    threads = 8
    start = threading.Barrier(threads, timeout=BARRIER_TIMEOUT_SECONDS)
    answers: list[str | None] = []

    def ask() -> None:
        start.wait()
        answers.append(guard.why_stop())

    workers = [threading.Thread(target=ask) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert answers == [None] * threads
    assert cluster.lease.renewals == 1


def test_parallel_each_keeps_the_order_and_raises_the_first_failure_after_the_running_tasks() -> None:
    barrier = threading.Barrier(2, timeout=BARRIER_TIMEOUT_SECONDS)
    finished: list[int] = []

    def ok(index: int) -> int:
        barrier.wait()
        finished.append(index)
        return index

    assert parallel.each([lambda i=i: ok(i) for i in range(4)], limit=2) == [0, 1, 2, 3]

    started: list[int] = []

    def fails() -> int:
        started.append(0)
        raise ValueError("boom")

    def later(index: int) -> int:
        started.append(index)
        return index

    with pytest.raises(ValueError, match="boom"):
        parallel.each([fails, *(lambda i=i: later(i) for i in range(1, 4))], limit=1)
    assert started == [0]  # one at a time: the tasks after the failure never started
    with pytest.raises(ValueError, match="a concurrency limit must be at least 1"):
        parallel.each([fails], limit=0)
