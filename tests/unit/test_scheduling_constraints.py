"""One table row per constraint: the placement it must produce, and the reason when it cannot."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from nodewright.api import labels as wk
from nodewright.scheduling import (
    DaemonSetInput,
    PersistentVolume,
    PersistentVolumeClaim,
    Plan,
    Pod,
    Requirement,
    Snapshot,
    StorageClass,
    Taint,
    plan,
)
from nodewright.scheduling.model import HostPort
from test_scheduling_support import (
    ZONES,
    catalog,
    claim_of,
    node,
    nodepool,
    pods,
    requirements,
    spec,
    spread,
    term,
    toleration,
    zone_of,
)

ON_DEMAND = {wk.CAPACITY_TYPE: ("In", ["on-demand"])}


def names(claim) -> list[str]:
    return [c.name for c in claim.instance_types]


# --- placements -----------------------------------------------------------------------------------


def _node_selector_arm() -> tuple[Snapshot, Callable[[Plan], None]]:
    snapshot = Snapshot(pods(3, spec(node_selector=((wk.ARCH, "arm64"),))), [nodepool()])

    def check(result: Plan) -> None:
        assert not result.unschedulable
        assert all(names(c) == ["m6g.large"] for c in result.new_claims)

    return snapshot, check


def _required_affinity_second_term() -> tuple[Snapshot, Callable[[Plan], None]]:
    terms = (
        requirements(**{wk.INSTANCE_TYPE: ("In", ["x9.huge"])}),
        requirements(**{wk.INSTANCE_FAMILY: ("In", ["r5"])}),
    )
    snapshot = Snapshot(pods(2, spec(required_terms=terms)), [nodepool()])

    def check(result: Plan) -> None:
        assert not result.unschedulable
        assert {n for c in result.new_claims for n in names(c)} == {"r5.large"}

    return snapshot, check


def _preferred_affinity_honoured() -> tuple[Snapshot, Callable[[Plan], None]]:
    preferred = ((10, requirements(**{wk.ZONE: ("In", ["us-east-1b"])})),)
    snapshot = Snapshot(pods(2, spec(preferred_terms=preferred)), [nodepool()])
    return snapshot, lambda r: assert_all_zone(r, "us-east-1b")


def _preferred_affinity_relaxed() -> tuple[Snapshot, Callable[[Plan], None]]:
    preferred = ((10, requirements(**{wk.ZONE: ("In", ["mars-1a"])})),)
    snapshot = Snapshot(pods(2, spec(preferred_terms=preferred)), [nodepool()])
    return snapshot, lambda r: assert_placed(r, 2)


def _toleration_lets_pod_onto_tainted_pool() -> tuple[Snapshot, Callable[[Plan], None]]:
    pool = nodepool("gpu", taints=(Taint("dedicated", "gpu"),))
    snapshot = Snapshot(pods(1, spec(tolerations=(toleration("dedicated"),))), [pool])
    return snapshot, lambda r: assert_placed(r, 1)


def _startup_taints_do_not_block() -> tuple[Snapshot, Callable[[Plan], None]]:
    pool = nodepool(startup_taints=(Taint("node.cilium.io/agent-not-ready", "true"),))
    return Snapshot(pods(1, spec()), [pool]), lambda r: assert_placed(r, 1)


def _prefer_no_schedule_avoided_then_relaxed() -> tuple[Snapshot, Callable[[Plan], None]]:
    soft = nodepool("soft", weight=10, taints=(Taint("spotty", "", "PreferNoSchedule"),))
    plain = nodepool("plain")
    snapshot = Snapshot(pods(1, spec()), [soft, plain])

    def check(result: Plan) -> None:
        assert [c.nodepool for c in result.new_claims] == ["plain"]
        only_soft = plan(
            Snapshot(pods(1, spec()), [nodepool("soft", taints=(Taint("spotty", "", "PreferNoSchedule"),))])
        )
        assert [c.nodepool for c in only_soft.new_claims] == ["soft"]

    return snapshot, check


def _zone_spread_balances() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(labels={"app": "w"}, spreads=(spread(wk.ZONE, app="w"),))
    existing = node("old", "us-east-1a", bound=[Pod("default", "running", s, "old")], cpu=0)
    snapshot = Snapshot(pods(5, s), [nodepool()], [existing])

    def check(result: Plan) -> None:
        zones = Counter(zone_of(result.new_claims[i]) for i in claim_of(result).values())
        assert zones == {"us-east-1a": 1, "us-east-1b": 2, "us-east-1c": 2}

    return snapshot, check


def _hostname_spread_one_per_node() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(cpu=100, labels={"app": "h"}, spreads=(spread(wk.HOSTNAME, app="h"),))
    snapshot = Snapshot(pods(4, s), [nodepool()])
    return snapshot, lambda r: assert_distinct_claims(r, 4)


def _hostname_anti_affinity_avoids_existing() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(cpu=100, labels={"app": "a"}, affinity=(term(wk.HOSTNAME, anti=True, app="a"),))
    busy = node("busy", bound=[Pod("default", "a-old", s, "busy")])
    free = node("free")
    snapshot = Snapshot(pods(3, s), [nodepool()], [busy, free])

    def check(result: Plan) -> None:
        assert list(result.placements.values()) == ["free"]
        assert_distinct_claims(result, 2)

    return snapshot, check


def _zone_affinity_pins_one_zone() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(labels={"app": "z"}, affinity=(term(wk.ZONE, app="z"),))
    snapshot = Snapshot(pods(40, s), [nodepool()])
    return snapshot, lambda r: assert_zones(r, 1)


def _pod_affinity_to_running_pod_on_hostname() -> tuple[Snapshot, Callable[[Plan], None]]:
    db = spec(labels={"app": "db"})
    target = node("db-node", bound=[Pod("default", "db-0", db, "db-node")])
    other = node("other")
    s = spec(cpu=100, affinity=(term(wk.HOSTNAME, app="db"),))
    snapshot = Snapshot(pods(2, s), [nodepool()], [other, target])
    return snapshot, lambda r: assert_on(r, {"db-node"}, 2)


def _zone_affinity_follows_planned_pods() -> tuple[Snapshot, Callable[[Plan], None]]:
    db = spec(cpu=1000, labels={"app": "db"})
    app = spec(cpu=100, affinity=(term(wk.ZONE, app="db"),))
    snapshot = Snapshot(pods(1, db, "db") + pods(12, app, "app"), [nodepool()])

    def check(result: Plan) -> None:
        assert not result.unschedulable, result.unschedulable
        zones = {zone_of(c) for c in result.new_claims}
        assert len(zones) == 1
        assert None not in zones

    return snapshot, check


def _hostname_affinity_rides_with_planned_pods() -> tuple[Snapshot, Callable[[Plan], None]]:
    db = spec(cpu=1000, labels={"app": "db"})
    web = spec(cpu=100, affinity=(term(wk.HOSTNAME, app="db"),))
    snapshot = Snapshot(pods(1, db, "db") + pods(3, web, "web"), [nodepool()])

    def check(result: Plan) -> None:
        assert not result.unschedulable, result.unschedulable
        (claim,) = result.new_claims
        assert sorted(claim.pods) == [
            "default/db-0000",
            "default/web-0000",
            "default/web-0001",
            "default/web-0002",
        ]
        assert claim.requests["cpu"] == 1300
        by_name = {t.name: t for t in catalog()}
        assert all(by_name[c.name].allocatable["cpu"] >= 1300 for c in claim.instance_types)

    return snapshot, check


def _capacity_type_spread() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(labels={"app": "c"}, spreads=(spread(wk.CAPACITY_TYPE, app="c"),))
    pool = nodepool(requirements=requirements())

    def check(result: Plan) -> None:
        kinds = Counter()
        for claim in result.new_claims:
            kinds[next(iter(claim.requirements[wk.CAPACITY_TYPE].values))] += len(claim.pods)
        assert kinds == {"spot": 2, "on-demand": 2}

    return Snapshot(pods(4, s), [pool]), check


def _bound_volume_pins_zone() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(claims=("data",))
    pv = PersistentVolume("pv-1", (requirements(**{wk.ZONE: ("In", ["us-east-1c"])}),))
    snapshot = Snapshot(
        pods(1, s), [nodepool()], claims=[PersistentVolumeClaim("default", "data", "pv-1")], volumes=[pv]
    )
    return snapshot, lambda r: assert_all_zone(r, "us-east-1c")


def _wait_for_first_consumer_topology() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(claims=("data",))
    sc = StorageClass("gp3", True, (requirements(**{wk.ZONE: ("In", ["us-east-1b"])}),))
    snapshot = Snapshot(
        pods(1, s),
        [nodepool()],
        claims=[PersistentVolumeClaim("default", "data", None, "gp3")],
        storage_classes=[sc],
    )
    return snapshot, lambda r: assert_all_zone(r, "us-east-1b")


def _host_ports_separate_pods() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(cpu=100, host_ports=(HostPort(8080),))
    used = node("used", bound=[Pod("default", "x", spec(cpu=100, host_ports=(HostPort(8080),)), "used")])
    snapshot = Snapshot(pods(3, s), [nodepool()], [used])

    def check(result: Plan) -> None:
        assert not result.placements
        assert_distinct_claims(result, 3)

    return snapshot, check


def _gpu_pod_gets_gpu_type() -> tuple[Snapshot, Callable[[Plan], None]]:
    s = spec(extra={"nvidia.com/gpu": 1})
    return Snapshot(pods(1, s), [nodepool("gpu-workload")]), lambda r: assert_types(r, {"p3.2xlarge"})


def _existing_and_in_flight_capacity_first() -> tuple[Snapshot, Callable[[Plan], None]]:
    registered = node("registered", cpu=1000)
    in_flight = node("claim-1", cpu=1000, in_flight=True)
    snapshot = Snapshot(pods(4, spec(cpu=500)), [nodepool()], [in_flight, registered])

    def check(result: Plan) -> None:
        assert Counter(result.placements.values()) == {"registered": 2, "claim-1": 2}
        assert not result.new_claims

    return snapshot, check


def _cordoned_node_skipped() -> tuple[Snapshot, Callable[[Plan], None]]:
    snapshot = Snapshot(pods(1, spec()), [nodepool()], [node("cordoned", unschedulable=True)])
    return (
        snapshot,
        lambda r: assert_placed(r, 1) if not r.placements else pytest.fail("used a cordoned node"),
    )


def _daemonset_overhead_counts() -> tuple[Snapshot, Callable[[Plan], None]]:
    daemon = DaemonSetInput("agent", spec(cpu=1500, memory_mib=100))
    snapshot = Snapshot(pods(1, spec(cpu=500)), [nodepool()], daemonsets=[daemon])
    return snapshot, lambda r: assert_types_exclude(r, {"c5.large", "m5.large", "r5.large", "m6g.large"})


def _lower_weight_pool_after_limit() -> tuple[Snapshot, Callable[[Plan], None]]:
    full = nodepool("full", weight=50, limits={"cpu": 4000}, in_use={"cpu": 4000})
    spare = nodepool("spare")
    snapshot = Snapshot(pods(2, spec()), [full, spare])
    return snapshot, lambda r: assert_pools(r, {"spare"})


def _candidates_cheapest_first_with_offerings() -> tuple[Snapshot, Callable[[Plan], None]]:
    snapshot = Snapshot(pods(1, spec(cpu=100)), [nodepool()])

    def check(result: Plan) -> None:
        (claim,) = result.new_claims
        prices = [c.price for c in claim.instance_types]
        assert prices == sorted(prices)
        assert all(o.capacity_type == "on-demand" for c in claim.instance_types for o in c.offerings)
        assert {o.zone for o in claim.instance_types[0].offerings} == set(ZONES)
        assert claim.requirements[wk.INSTANCE_TYPE].values == {c.name for c in claim.instance_types}
        assert claim.label_values()[wk.NODEPOOL] == ["default"]
        assert claim.label_values()[wk.CAPACITY_TYPE] == ["on-demand"]
        assert {"key": wk.NODEPOOL, "operator": "In", "values": ["default"]} in claim.requirements.to_k8s()

    return snapshot, check


PLACEMENTS = {
    "nodeSelector arm64 → arm types only": _node_selector_arm,
    "required node affinity: second OR term when the first fits nothing": _required_affinity_second_term,
    "preferred node affinity honoured": _preferred_affinity_honoured,
    "preferred node affinity relaxed when impossible": _preferred_affinity_relaxed,
    "toleration admits pod to a tainted NodePool": _toleration_lets_pod_onto_tainted_pool,
    "startupTaints do not block": _startup_taints_do_not_block,
    "PreferNoSchedule avoided, then relaxed": _prefer_no_schedule_avoided_then_relaxed,
    "zone spread fills the emptier zones": _zone_spread_balances,
    "hostname spread maxSkew 1 → one pod per node": _hostname_spread_one_per_node,
    "hostname anti-affinity skips nodes with a matching pod": _hostname_anti_affinity_avoids_existing,
    "zone self-affinity keeps one zone": _zone_affinity_pins_one_zone,
    "hostname affinity lands beside the running pod": _pod_affinity_to_running_pod_on_hostname,
    "zone affinity to planned pods pins both to one zone": _zone_affinity_follows_planned_pods,
    "hostname affinity to planned pods rides on their claim": _hostname_affinity_rides_with_planned_pods,
    "capacity-type spread splits spot/on-demand": _capacity_type_spread,
    "bound PV pins the zone": _bound_volume_pins_zone,
    "WaitForFirstConsumer allowedTopologies pin the zone": _wait_for_first_consumer_topology,
    "host ports: one per node, not where taken": _host_ports_separate_pods,
    "extended resource nvidia.com/gpu picks a GPU type": _gpu_pod_gets_gpu_type,
    "existing then in-flight capacity before new nodes": _existing_and_in_flight_capacity_first,
    "cordoned node not used": _cordoned_node_skipped,
    "DaemonSet overhead removes too-small types": _daemonset_overhead_counts,
    "limit reached → next NodePool by weight": _lower_weight_pool_after_limit,
    "candidates cheapest first, offerings filtered": _candidates_cheapest_first_with_offerings,
}


@pytest.mark.parametrize("case", list(PLACEMENTS), ids=list(PLACEMENTS))
def test_constraint_placement(case: str) -> None:
    snapshot, check = PLACEMENTS[case]()
    check(plan(snapshot))


# --- reasons --------------------------------------------------------------------------------------


def _reason_cases() -> dict[str, tuple[Snapshot, str, int]]:
    """name → (snapshot, substring every unschedulable reason has, expected unschedulable count)."""
    zone_anti = spec(labels={"app": "za"}, affinity=(term(wk.ZONE, anti=True, app="za"),))
    min_domains = spec(labels={"app": "md"}, spreads=(spread(wk.ZONE, min_domains=4, app="md"),))
    return {
        "custom label no NodePool defines": (
            Snapshot(pods(1, spec(node_selector=(("team", "a"),))), [nodepool()]),
            "NodePool default: label team is not defined",
            1,
        ),
        "untolerated NodePool taint": (
            Snapshot(pods(1, spec()), [nodepool("gpu", taints=(Taint("dedicated", "gpu"),))]),
            "NodePool gpu: taint dedicated=gpu:NoSchedule not tolerated",
            1,
        ),
        "extended resource no type has": (
            Snapshot(
                pods(1, spec(extra={"nvidia.com/gpu": 2})), [nodepool("gpu-workload", limits={"cpu": 10**6})]
            ),
            "no instance type in NodePool gpu-workload has nvidia.com/gpu: 2 within limits",
            1,
        ),
        "pod bigger than every type": (
            Snapshot(pods(1, spec(cpu=500_000)), [nodepool()]),
            "no instance type in NodePool default has cpu: 500",
            1,
        ),
        "hostname affinity to nothing": (
            Snapshot(pods(1, spec(affinity=(term(wk.HOSTNAME, app="ghost"),))), [nodepool()]),
            f"pod affinity on {wk.HOSTNAME}: no running or planned pod matches",
            1,
        ),
        "cpu limit reached": (
            Snapshot(pods(1, spec()), [nodepool(limits={"cpu": 1000}, in_use={"cpu": 1000})]),
            "NodePool default: cpu limit 1 reached",
            1,
        ),
        "limit reached while packing": (
            Snapshot(pods(8, spec(cpu=1500)), [nodepool(limits={"cpu": 8000})]),
            "NodePool default: cpu limit 8 reached",
            None,
        ),
        "zone anti-affinity with more pods than zones": (
            Snapshot(pods(4, zone_anti), [nodepool()]),
            f"pod anti-affinity on {wk.ZONE}",
            1,
        ),
        "minDomains above the zones available": (
            Snapshot(pods(5, min_domains), [nodepool()]),
            "minDomains 4",
            2,
        ),
        "missing PersistentVolumeClaim": (
            Snapshot(pods(1, spec(claims=("gone",))), [nodepool()]),
            "PersistentVolumeClaim default/gone not found",
            1,
        ),
        "node affinity conflicts with the NodePool": (
            Snapshot(pods(1, spec(node_selector=((wk.CAPACITY_TYPE, "spot"),))), [nodepool()]),
            f"NodePool default: {wk.CAPACITY_TYPE} In [spot] conflicts",
            1,
        ),
        "a local volume on another node": (
            Snapshot(
                pods(1, spec(claims=("data",))),
                [nodepool()],
                claims=[PersistentVolumeClaim("default", "data", "local-1")],
                volumes=[PersistentVolume("local-1", (requirements(**{wk.HOSTNAME: ("In", ["node-a"])}),))],
            ),
            f"no instance type in NodePool default matches {wk.HOSTNAME} In [node-a]",
            1,
        ),
        "minValues not met": (
            Snapshot(
                pods(1, spec(extra={"nvidia.com/gpu": 1})),
                [
                    nodepool(
                        requirements=requirements(**ON_DEMAND).with_requirement(
                            Requirement.create(wk.INSTANCE_FAMILY, "Exists", (), 2)
                        )
                    )
                ],
            ),
            f"minValues 2 for {wk.INSTANCE_FAMILY} not met",
            1,
        ),
    }


REASONS = _reason_cases()


@pytest.mark.parametrize("case", list(REASONS), ids=list(REASONS))
def test_constraint_reason(case: str) -> None:
    snapshot, expected, count = REASONS[case]
    result = plan(snapshot)
    assert result.unschedulable, "expected unschedulable pods"
    if count is not None:
        assert len(result.unschedulable) == count
    assert all(expected in reason for reason in result.unschedulable.values()), result.unschedulable


def test_limit_is_never_exceeded_while_packing() -> None:
    result = plan(Snapshot(pods(8, spec(cpu=1500)), [nodepool(limits={"cpu": 8000})]))
    by_name = {t.name: t for t in catalog()}
    charged = sum(
        max(by_name[c.name].capacity["cpu"] for c in claim.instance_types) for claim in result.new_claims
    )
    assert 0 < charged <= 8000
    assert len(result.unschedulable) + sum(len(c.pods) for c in result.new_claims) == 8


# --- helpers --------------------------------------------------------------------------------------


def assert_placed(result: Plan, count: int) -> None:
    assert not result.unschedulable, result.unschedulable
    assert len(result.placements) + sum(len(c.pods) for c in result.new_claims) == count


def assert_all_zone(result: Plan, zone: str) -> None:
    assert not result.unschedulable, result.unschedulable
    assert result.new_claims
    assert all(zone_of(c) == zone for c in result.new_claims)


def assert_zones(result: Plan, count: int) -> None:
    assert not result.unschedulable
    assert len({zone_of(c) for c in result.new_claims}) == count
    assert None not in {zone_of(c) for c in result.new_claims}


def assert_distinct_claims(result: Plan, count: int) -> None:
    assert not result.unschedulable, result.unschedulable
    assert len(result.new_claims) == count
    assert all(len(c.pods) == 1 for c in result.new_claims)


def assert_on(result: Plan, nodes: set[str], count: int) -> None:
    assert not result.unschedulable
    assert not result.new_claims
    assert set(result.placements.values()) == nodes
    assert len(result.placements) == count


def assert_types(result: Plan, types: set[str]) -> None:
    assert not result.unschedulable, result.unschedulable
    assert {n for c in result.new_claims for n in names(c)} == types


def assert_types_exclude(result: Plan, types: set[str]) -> None:
    assert not result.unschedulable
    assert result.new_claims
    assert not ({n for c in result.new_claims for n in names(c)} & types)


def assert_pools(result: Plan, pools: set[str]) -> None:
    assert not result.unschedulable, result.unschedulable
    assert {c.nodepool for c in result.new_claims} == pools


def _gpu_pod_under_min_values(relax: bool) -> Snapshot:
    """A GPU pod under a NodePool asking for two instance families (minValues 2): only one family in
    the catalog has a GPU, so the candidates cannot meet it."""
    family = Requirement.create(wk.INSTANCE_FAMILY, "Exists", (), 2)
    return Snapshot(
        pods(1, spec(extra={"nvidia.com/gpu": 1})),
        [nodepool(requirements=requirements(**ON_DEMAND).with_requirement(family))],
        relax_min_values=relax,
    )


def test_best_effort_min_values_launches_with_what_there_is_and_says_it_relaxed() -> None:
    """Karpenter's --min-values-policy BestEffort: the NodeClaim is planned, its requirement's
    minValues lowered to the families its candidates offer, and marked relaxed; Strict refuses."""
    strict = plan(_gpu_pod_under_min_values(relax=False))
    assert strict.new_claims == []
    assert all(
        f"minValues 2 for {wk.INSTANCE_FAMILY} not met" in why for why in strict.unschedulable.values()
    )

    relaxed = plan(_gpu_pod_under_min_values(relax=True))
    assert relaxed.unschedulable == {}
    [claim] = relaxed.new_claims
    assert claim.min_values_relaxed
    families = {
        by.labels[wk.INSTANCE_FAMILY] for by in catalog() if by.name in {c.name for c in claim.instance_types}
    }
    assert claim.requirements[wk.INSTANCE_FAMILY].min_values == len(families) == 1


def test_min_values_met_is_never_marked_relaxed() -> None:
    family = Requirement.create(wk.INSTANCE_FAMILY, "Exists", (), 2)
    snapshot = Snapshot(
        pods(1, spec(cpu=500)),
        [nodepool(requirements=requirements(**ON_DEMAND).with_requirement(family))],
        relax_min_values=True,
    )
    [claim] = plan(snapshot).new_claims
    assert not claim.min_values_relaxed
    assert claim.requirements[wk.INSTANCE_FAMILY].min_values == 2
