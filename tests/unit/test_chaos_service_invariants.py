"""The chaos run's service invariants (``sandbox.scenarios.reliability``): when capacity exists for a
pending pod
(``look_at_capacity``, the provisioner's own planning on the offerings as they truly are) and the two
clocks of ``check_service`` (pending with capacity, $/h above the fresh plan), and how a run names
the tracebacks it saw."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeClock, FakeCluster
from nodewright.state import nodepools
from test_disruption_consolidation import NODECLASS, NODEPOOL, ZONE, add_node, add_pod
from test_scheduling_support import catalog

from sandbox.scenarios.reliability import (
    CONSOLIDATION_WINDOW_SECONDS,
    PENDING_LIMIT_SECONDS,
    CapacityLook,
    Tracker,
    check_service,
    look_at_capacity,
)

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    monkeypatch.setattr(nodepools, "validation_errors", lambda doc: [])
    fake = FakeCluster(FakeClock())
    fake.host = "fake"  # type: ignore[attr-defined]
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["limits"] = {"cpu": "6"}
    fake.add("NodePool", pool)
    fake.add("EC2NodeClass", NODECLASS)
    return fake


def offered(nodeclass: dict[str, Any]) -> list[Any]:
    return catalog(spot=False, zones=(ZONE,))


def look(cluster: FakeCluster, instance_types: Any = offered, never: set[str] | None = None) -> CapacityLook:
    return look_at_capacity(cluster, instance_types, "us-west-2", never or set())


def test_a_pod_that_fits_within_the_limits_has_capacity_and_one_past_them_has_none(cluster) -> None:
    add_node(cluster, "a", "m5.xlarge")
    cluster.objects["NodeClaim"]["a"]["status"]["capacity"] = {"cpu": "4", "memory": "16Gi", "pods": "58"}
    add_pod(cluster, "fits-on-a", None, cpu="1")
    add_pod(cluster, "needs-a-new-node", None, cpu="5")  # an 8-CPU node: past the pool's 6 CPUs
    found = look(cluster)
    assert found.placeable == {"default/fits-on-a"}
    assert "limit" in found.unhostable["default/needs-a-new-node"]
    cluster.objects["NodePool"]["default"]["spec"]["limits"] = {"cpu": "12"}
    assert look(cluster).placeable == {"default/fits-on-a", "default/needs-a-new-node"}


def test_a_pod_whose_every_fitting_offering_is_out_of_capacity_has_none(cluster) -> None:
    add_pod(cluster, "p", None, cpu="1")
    assert look(cluster).placeable == {"default/p"}

    def iced(nodeclass: dict[str, Any]) -> list[Any]:
        return [
            replace(t, offerings=tuple(replace(o, available=False) for o in t.offerings))
            for t in offered(nodeclass)
        ]

    found = look(cluster, iced)
    assert found.placeable == set()
    assert set(found.unhostable) == {"default/p"}


def test_a_pod_nominated_to_a_node_that_never_registers_is_held_by_the_fault(cluster) -> None:
    add_node(cluster, "a", "m5.large")
    claim = cluster.objects["NodeClaim"]["a"]
    instance = claim["status"]["instanceID"]
    del cluster.objects["Node"][claim["status"]["nodeName"]]  # launched, never joined
    add_pod(cluster, "p", None, cpu="500m")
    assert look(cluster).placeable == {"default/p"}
    found = look(cluster, never={instance})
    assert found.held == {"default/p"}
    assert found.placeable == set()


def test_the_pods_whose_topology_counts_a_held_pod_are_held_with_it(cluster) -> None:
    """Two replicas with hostname anti-affinity and room for one on the node that never joins: the
    plan holds whichever it places there first; the fault holds the other too (its place depends
    on where the first lands), not an unrelated pod."""
    cluster.objects["NodePool"]["default"]["spec"]["limits"] = {"cpu": "100"}
    add_node(cluster, "a", "m5.large")
    claim = cluster.objects["NodeClaim"]["a"]
    del cluster.objects["Node"][claim["status"]["nodeName"]]
    apart = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    for name in ("web-1", "web-2"):
        add_pod(cluster, name, None, cpu="1500m")
        pod = cluster.objects["Pod"][name]
        pod["metadata"]["labels"] = {"app": "web"}
        pod["spec"]["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}
        }
    add_pod(cluster, "other", None, cpu="1")  # past what the node that never joins has left then
    first = look(cluster)
    assert first.placeable == {"default/web-1", "default/web-2", "default/other"}, first.unhostable
    found = look(cluster, never={claim["status"]["instanceID"]})
    assert found.held == {"default/web-1", "default/web-2"}
    assert found.placeable == {"default/other"}


def test_the_cluster_is_priced_against_a_fresh_plan_of_the_same_pods(cluster) -> None:
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.large")
    add_pod(cluster, "on-a", "node-a", cpu="250m")
    add_pod(cluster, "on-b", "node-b", cpu="250m")
    found = look(cluster)
    assert found.cluster_per_hour == pytest.approx(0.192 + 0.096, abs=0.02)  # plus EBS volumes
    assert 0 < found.fresh_per_hour < found.cluster_per_hour / 1.2  # one small node holds both pods
    assert found.cost_ratio > 1.2


def test_a_node_that_never_registers_is_held_by_the_fault_out_of_the_clusters_cost(cluster) -> None:
    """The product, like Karpenter, keeps a NodeClaim whose instance never joins until its 15-minute
    registration timeout: its $/h is the fault's, not a consolidation the product failed to make."""
    add_node(cluster, "a", "m5.large")
    add_node(cluster, "b", "m5.large")
    add_pod(cluster, "on-a", "node-a", cpu="250m")
    claim = cluster.objects["NodeClaim"]["b"]
    del cluster.objects["Node"][claim["status"]["nodeName"]]  # launched, never joined
    counted = look(cluster)
    held = look(cluster, never={claim["status"]["instanceID"]})
    assert held.held_per_hour == pytest.approx(counted.cluster_per_hour / 2)
    assert held.cluster_per_hour == pytest.approx(counted.cluster_per_hour / 2)
    assert held.fresh_per_hour == counted.fresh_per_hour


def _look(placeable: set[str] | None = None, cluster: float = 1.0, fresh: float = 1.0) -> CapacityLook:
    return CapacityLook(set(placeable or ()), set(), {}, cluster, fresh, [])


def test_a_pod_pending_past_the_limit_while_capacity_exists_is_one_violation() -> None:
    tracker = Tracker()
    found = []
    for second in range(0, 200, 20):
        at = T0 + timedelta(seconds=second)
        violations, figures = check_service(_look({"default/p"}), {"default/p"}, at, tracker, [])
        found += violations
    assert [v.invariant for v in found] == ["pod-pending-with-capacity"]  # once per episode
    assert figures["pendingWithCapacitySeconds"] == 180


@pytest.mark.parametrize(
    ("capacity", "faults"), [(False, []), (True, ["api-server"])], ids=["no-capacity", "fault-in-effect"]
)
def test_a_look_without_capacity_or_with_a_fault_starts_the_pods_clock_again(capacity, faults) -> None:
    tracker = Tracker()
    found = []
    for second in range(0, 200, 20):
        at = T0 + timedelta(seconds=second)
        interrupted = second == 60  # every third look: no place for it, or the functions faulted
        placeable = {"default/p"} if not (interrupted and not capacity) else set()
        violations, _ = check_service(
            _look(placeable), {"default/p"}, at, tracker, faults if interrupted else []
        )
        found += violations
        if second < 140:
            assert not violations, second
    assert PENDING_LIMIT_SECONDS == 60
    assert [v.invariant for v in found] == ["pod-pending-with-capacity"]  # 80 s after the reset


def test_a_pod_no_nodepool_can_host_is_never_a_violation() -> None:
    tracker = Tracker()
    for second in range(0, 600, 20):
        violations, _ = check_service(
            _look(set()), {"default/huge"}, T0 + timedelta(seconds=second), tracker, []
        )
        assert violations == []


def test_cost_above_the_bound_for_longer_than_the_consolidation_window_is_one_violation() -> None:
    tracker = Tracker()
    found = []
    for second in range(0, 900, 30):
        ratio_look = _look(cluster=1.3, fresh=1.0) if second != 150 else _look(cluster=1.2, fresh=1.0)
        violations, _ = check_service(ratio_look, set(), T0 + timedelta(seconds=second), tracker, [])
        found += [(second, v.invariant) for v in violations]
    # at the bound at 150 s: the clock starts again at 180 s and passes the window after 480 s
    assert found == [(180 + int(CONSOLIDATION_WINDOW_SECONDS) + 30, "cost-above-fresh-plan")]


def test_nodes_left_when_no_pod_needs_them_are_infinitely_above_the_plan() -> None:
    assert _look(cluster=0.5, fresh=0.0).cost_ratio == float("inf")
    assert _look(cluster=0.0, fresh=0.0).cost_ratio == 1.0


def test_a_run_names_the_exception_each_traceback_ended_with_plain_or_inside_a_json_log_line() -> None:
    from sandbox.scenarios.chaos import traceback_errors

    plain = (
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    g()\nKeyError: 'nodeName'\n"
    )
    chained = (
        'Traceback (most recent call last):\n  File "a.py", line 2\nValueError: inner\n\n'
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "b.py", line 3\nRuntimeError: outer\n'
    )
    as_json = (
        '{"level":"ERROR","message":"pass failed","exception":"Traceback (most recent call last):\\n'
        '  File \\"c.py\\", line 4, in h\\n    k()\\nTypeError: bad operand","exception_name":"TypeError"}\n'
    )

    found = traceback_errors(plain + chained + as_json)

    assert found == [
        "KeyError: 'nodeName'",
        "ValueError: inner",
        "RuntimeError: outer",
        "TypeError: bad operand",
    ]
    assert len(found) == (plain + chained + as_json).count("Traceback"), "one per traceback, none twice"
