"""Capacity reservations in the scheduling core: reserved offerings are preferred (priced near zero),
a reservation's free slots are shared among the plan's NodeClaims, the rest falls back to on-demand,
and a NodePool that names no capacity type launches no reserved capacity (Karpenter's rules)."""

from __future__ import annotations

from nodewright.api import labels as wk
from nodewright.scheduling import Offering, Snapshot, instance_type_from_ec2, plan
from nodewright.scheduling.reservations import EXHAUSTED
from test_scheduling_support import TYPES, ZONES, ec2_info, nodepool, pods, requirements, spec

RESERVED = "reserved"


def catalog_with(reserved: dict[str, tuple[str, str, int, str]]) -> list:
    """The synthetic on-demand catalog plus reserved offerings: type → (id, zone, free slots, type)."""
    result = []
    for name, row in sorted(TYPES.items()):
        offerings = [Offering(z, "on-demand", row[5]) for z in ZONES]
        if name in reserved:
            rid, zone, free, kind = reserved[name]
            offerings.append(
                Offering(
                    zone,
                    RESERVED,
                    row[5] / 10_000_000,
                    free > 0,
                    reservation_id=rid,
                    reservation_type=kind,
                    reservation_capacity=free,
                )
            )
        result.append(instance_type_from_ec2(ec2_info(name), offerings))
    return result


def pool(capacity_types: list[str], reserved: dict[str, tuple[str, str, int, str]], **extra):
    terms = {wk.CAPACITY_TYPE: ("In", capacity_types)} if capacity_types else {}
    return nodepool(instance_types=catalog_with(reserved), requirements=requirements(**terms, **extra))


# One pod per node: a 1.5-CPU pod fills a 2-vCPU type.
BIG = spec(cpu=1500, memory_mib=1024)


def test_a_reserved_offering_is_preferred_and_the_claim_targets_its_reservation() -> None:
    reserved = {"m5.xlarge": ("cr-1", "us-east-1b", 1, "default")}
    result = plan(Snapshot(pods(1, BIG), [pool(["reserved", "on-demand"], reserved)]))

    (claim,) = result.new_claims
    assert [c.name for c in claim.instance_types] == ["m5.xlarge"]  # dearer on-demand, reserved: free
    assert claim.requirements.get(wk.CAPACITY_TYPE).values == {RESERVED}
    assert claim.requirements.get(wk.CAPACITY_RESERVATION_ID).values == {"cr-1"}
    assert {o.zone for o in claim.instance_types[0].offerings} == {"us-east-1b"}
    assert claim.instance_price < 0.001


def test_a_reservation_takes_only_its_free_slots_and_the_other_claims_fall_back_to_on_demand() -> None:
    reserved = {"c5.large": ("cr-1", "us-east-1a", 2, "default")}
    result = plan(Snapshot(pods(5, BIG), [pool(["reserved", "on-demand"], reserved)]))

    held = [c for c in result.new_claims if c.requirements.get(wk.CAPACITY_RESERVATION_ID)]
    fallback = [c for c in result.new_claims if not c.requirements.get(wk.CAPACITY_RESERVATION_ID)]
    assert len(held) == 2
    assert len(fallback) == 3
    assert sum(len(c.pods) for c in result.new_claims) == 5
    for claim in fallback:
        assert claim.requirements.get(wk.CAPACITY_TYPE).values == {"on-demand"}
        assert all(o.capacity_type == "on-demand" for c in claim.instance_types for o in c.offerings)
        assert claim.instance_types[0].name == "m6g.large"  # the cheapest on-demand type again


def test_a_nodepool_that_names_no_capacity_type_launches_no_reserved_capacity() -> None:
    reserved = {"m5.xlarge": ("cr-1", "us-east-1b", 3, "default")}
    result = plan(Snapshot(pods(1, BIG), [pool([], reserved)]))

    (claim,) = result.new_claims
    assert all(o.capacity_type != RESERVED for c in claim.instance_types for o in c.offerings)
    assert claim.requirements.get(wk.CAPACITY_RESERVATION_ID) is None


def test_a_reserved_only_nodepool_leaves_the_pods_beyond_its_reservations_pending_with_the_reason() -> None:
    reserved = {"c5.large": ("cr-1", "us-east-1a", 1, "default")}
    result = plan(Snapshot(pods(3, BIG), [pool(["reserved"], reserved)]))

    assert len(result.new_claims) == 1
    assert len(result.unschedulable) == 2
    assert set(result.unschedulable.values()) == {EXHAUSTED}


def test_a_pod_selecting_capacity_blocks_gets_only_a_capacity_block() -> None:
    reserved = {
        "c5.large": ("cr-odcr", "us-east-1a", 1, "default"),
        "m5.large": ("cr-block", "us-east-1c", 1, "capacity-block"),
    }
    pod = spec(cpu=1500, memory_mib=1024, node_selector=((wk.CAPACITY_RESERVATION_TYPE, "capacity-block"),))
    result = plan(Snapshot(pods(1, pod), [pool(["reserved", "on-demand"], reserved)]))

    (claim,) = result.new_claims
    assert claim.requirements.get(wk.CAPACITY_RESERVATION_ID).values == {"cr-block"}
    assert [c.name for c in claim.instance_types] == ["m5.large"]


def test_an_exhausted_or_expiring_reservation_is_not_offered() -> None:
    reserved = {"m5.xlarge": ("cr-1", "us-east-1b", 0, "default")}
    result = plan(Snapshot(pods(1, BIG), [pool(["reserved", "on-demand"], reserved)]))

    (claim,) = result.new_claims
    assert claim.requirements.get(wk.CAPACITY_RESERVATION_ID) is None
    assert claim.instance_types[0].name == "m6g.large"  # the cheapest on-demand type


def test_a_nodeclaim_holds_one_kind_of_reservation_the_uninterruptible_one_on_a_tie() -> None:
    """One CreateFleet launches into one kind (ODCR, Capacity Block or interruptible reservation):
    with an ODCR and an interruptible reservation priced alike, the NodeClaim holds the ODCR only."""
    from nodewright.scheduling import instance_type_from_ec2
    from test_scheduling_support import ec2_info

    def offering(rid: str, zone: str, interruptible: bool) -> Offering:
        return Offering(
            zone,
            RESERVED,
            0.096 / 10_000_000,
            True,
            reservation_id=rid,
            reservation_type="default",
            interruptible=interruptible,
            reservation_capacity=1,
        )

    m5 = instance_type_from_ec2(
        ec2_info("m5.large"),
        [
            Offering("us-east-1a", "on-demand", 0.096),
            offering("cr-lent", "us-east-1a", True),
            offering("cr-own", "us-east-1b", False),
        ],
    )
    result = plan(
        Snapshot(
            pods(2, BIG),
            [
                nodepool(
                    instance_types=[m5], requirements=requirements(**{wk.CAPACITY_TYPE: ("In", ["reserved"])})
                )
            ],
        )
    )
    held = [sorted(c.requirements.get(wk.CAPACITY_RESERVATION_ID).values) for c in result.new_claims]
    assert held == [["cr-own"], ["cr-lent"]]  # the ODCR first, then (its slot used) the lent one
