"""Capacity reservations through the EC2 cloud provider, against the sandbox's EC2 (moto with
``sandbox.aws.ec2_reservations``): the terms select reservations, each becomes a reserved offering, a
reserved launch targets its reservation and comes back labelled, a full reservation is marked
unavailable, a Capacity Block launches with its market type, the status lists them, and an instance
whose reservation is no longer selected has drifted."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from nodewright.cloud import reservations
from nodewright.cloud.errors import InsufficientCapacityError
from nodewright.cloud.provider import CloudProvider
from test_cloud_provider import Env, FleetSpy, env, nodeclass, request

from sandbox.aws import ec2_reservations

__all__ = ["env"]

TERMS = [{"tags": {"team": "ml"}}]


@pytest.fixture
def ec2(env: Env) -> Iterator[Env]:
    ec2_reservations.install()
    reservations.clear_caches()
    yield env
    reservations.clear_caches()


def odcr(env: Env, instance_type: str = "m5.large", zone: str = "us-east-1b", count: int = 1) -> str:
    return env.ec2.create_capacity_reservation(
        InstanceType=instance_type,
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=count,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}
        ],
    )["CapacityReservation"]["CapacityReservationId"]


def bought_block(ends_in: timedelta) -> str:
    """A one-instance m5.large Capacity Block in us-east-1a, started an hour ago, tagged team=ml."""
    now = datetime.now(UTC)
    return ec2_reservations.add_capacity_block(
        "us-east-1",
        instance_type="m5.large",
        zone="us-east-1a",
        count=1,
        start=now - timedelta(hours=1),
        end=now + ends_in,
        tags={"team": "ml"},
    )


def reserved(provider: CloudProvider, nc: dict[str, Any], name: str) -> list[Any]:
    (found,) = [t for t in provider.instance_types(nc) if t.name == name]
    return [o for o in found.offerings if o.capacity_type == "reserved"]


def test_a_selected_reservation_is_one_reserved_offering_priced_near_zero(ec2: Env) -> None:
    rid = odcr(ec2, count=2)
    odcr(ec2, instance_type="c5.large")  # another reservation: not selected by this id
    provider = CloudProvider(ec2.settings)

    (offering,) = reserved(provider, nodeclass(capacityReservationSelectorTerms=[{"id": rid}]), "m5.large")
    assert (offering.zone, offering.reservation_id, offering.reservation_capacity) == ("us-east-1b", rid, 2)
    assert offering.reservation_type == "default"
    on_demand = next(o for o in offering_types(provider, "m5.large") if o.capacity_type == "on-demand")
    assert offering.price == pytest.approx(on_demand.price / 10_000_000)
    assert reserved(provider, nodeclass(), "m5.large") == []  # no terms: no reserved offering


def offering_types(provider: CloudProvider, name: str) -> list[Any]:
    (found,) = [t for t in provider.instance_types(nodeclass()) if t.name == name]
    return list(found.offerings)


def test_a_reserved_launch_targets_the_reservation_and_a_full_one_is_marked_unavailable(ec2: Env) -> None:
    rid = odcr(ec2)
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)
    types = [t for t in provider.instance_types(nc) if t.name == "m5.large"]

    result = provider.create(
        request("res-1", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved"}))
    )

    assert (result.capacity_type, result.reservation_id, result.reservation_type) == (
        "reserved",
        rid,
        "default",
    )
    instance = provider.get(result.instance_id)
    assert (instance.capacity_reservation_id, instance.reservation_targeted, instance.capacity_type) == (
        rid,
        True,
        "reserved",
    )
    # The offering still says one slot (the plan's view): EC2 refuses, the reservation is marked.
    with pytest.raises(InsufficientCapacityError, match="ReservationCapacityExceeded"):
        provider.create(
            request("res-2", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved"}))
        )
    assert ("m5.large", "us-east-1b", f"reserved:{rid}") in ec2.store.unavailable_offerings()
    reservations.clear_caches()
    (offering,) = reserved(provider, nc, "m5.large")
    assert not offering.available  # EC2 now says no slot, and the store too


def test_a_capacity_block_launches_with_its_market_type_into_a_capacity_block_fleet(ec2: Env) -> None:
    block = bought_block(timedelta(hours=3))
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)
    types = [t for t in provider.instance_types(nc) if t.name == "m5.large"]
    spy = FleetSpy(provider.ec2)

    result = provider.create(
        request(
            "block-1", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved", "on-demand"})
        )
    )

    assert (result.reservation_id, result.reservation_type) == (block, "capacity-block")
    assert spy.calls[-1]["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "capacity-block"
    raw = ec2.ec2.describe_instances(InstanceIds=[result.instance_id])["Reservations"][0]["Instances"][0]
    assert raw["InstanceLifecycle"] == "capacity-block"
    (status,) = provider.nodeclass_status(nc).status["capacityReservations"]
    assert status["reservationType"] == "capacity-block"
    assert status["state"] == "active"


def test_a_capacity_block_is_expiring_from_forty_minutes_before_its_end(ec2: Env) -> None:
    bought_block(timedelta(minutes=39))
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)

    (status,) = provider.nodeclass_status(nc).status["capacityReservations"]
    assert status["state"] == "expiring"
    (offering,) = reserved(provider, nc, "m5.large")
    assert not offering.available  # no node is launched into a block about to end


def test_instance_types_with_reservations_are_built_again_after_a_minute(
    ec2: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Capacity Block turns ``expiring`` with the clock alone, so a list with reserved offerings
    lives at most ``INSTANCE_TYPES_CACHE_SECONDS``."""
    from nodewright.cloud import provider as provider_module

    bought_block(timedelta(hours=2))
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)
    first = provider.instance_types(nc)
    assert provider.instance_types(nc)[0] is first[0]  # within the minute: the same list
    later = time.time() + provider_module.INSTANCE_TYPES_CACHE_SECONDS
    monkeypatch.setattr(provider_module, "time", SimpleNamespace(time=lambda: later))

    assert provider.instance_types(nc)[0] is not first[0]


def test_an_instance_whose_reservation_is_no_longer_selected_has_drifted(ec2: Env) -> None:
    rid = odcr(ec2)
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)
    types = [t for t in provider.instance_types(nc) if t.name == "m5.large"]
    result = provider.create(
        request("drift-1", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved"}))
    )
    instance = provider.get(result.instance_id)
    instance = dataclasses.replace(instance, security_groups=frozenset({ec2.security_group}))

    assert provider.drift_reason(instance, nc) is None
    other = nodeclass(capacityReservationSelectorTerms=[{"tags": {"team": "web"}}])
    assert provider.drift_reason(instance, other) == "CapacityReservationDrift"
    # An on-demand instance EC2 merely counted against an open reservation is never judged so.
    untargeted = dataclasses.replace(instance, reservation_targeted=False)
    assert provider.drift_reason(untargeted, other) is None
    # A cancelled reservation lets its instance run on as on-demand, without it.
    ec2.ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    ec2.ec2.describe_capacity_reservations()  # EC2's clock moves on
    after = provider.get(result.instance_id)
    assert (after.capacity_reservation_id, after.capacity_type) == (None, "on-demand")


def test_a_capacity_block_bought_while_the_fault_injector_is_installed_still_launches(ec2: Env) -> None:
    """The sandbox installs the reservations before the fault injector wraps CreateFleet; buying a
    block afterwards (``add_capacity_block`` installs again) must not wrap the wrapper that wraps
    it: each CreateFleet recursed until Python gave up and moto answered 500."""
    from sandbox.aws import faults

    injector = faults.FaultInjector()
    faults.install(injector)
    try:
        block = bought_block(timedelta(hours=3))
        provider = CloudProvider(ec2.settings)
        nc = nodeclass(capacityReservationSelectorTerms=TERMS)
        types = [t for t in provider.instance_types(nc) if t.name == "m5.large"]
        result = provider.create(
            request("block-2", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved"}))
        )
        assert result.reservation_id == block
    finally:
        faults.uninstall(injector)


def test_a_capacity_block_fleet_names_no_on_demand_allocation(ec2: Env) -> None:
    """As Karpenter's fleet builder: OnDemandOptions only for on-demand and On-Demand Capacity
    Reservations; a capacity-block fleet carries no on-demand allocation strategy."""
    bought_block(timedelta(hours=3))
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)
    types = [t for t in provider.instance_types(nc) if t.name == "m5.large"]
    spy = FleetSpy(provider.ec2)
    provider.create(
        request("block-3", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved"}))
    )
    assert "OnDemandOptions" not in spy.calls[-1]


def test_an_interruptible_reservation_is_launched_into_by_a_reserved_capacity_fleet(ec2: Env) -> None:
    """Karpenter's reserved launch into an interruptible Capacity Reservation: a reserved-capacity
    instant fleet naming interruptible-capacity-reservation (EC2 refuses any other fleet into it); the
    instance is labelled interruptible."""
    rid = ec2_reservations.add_interruptible_reservation(
        "us-east-1", instance_type="m5.large", zone="us-east-1b", count=1, tags={"team": "ml"}
    )
    provider = CloudProvider(ec2.settings)
    nc = nodeclass(capacityReservationSelectorTerms=TERMS)
    types = [t for t in provider.instance_types(nc) if t.name == "m5.large"]
    (offering,) = reserved(provider, nc, "m5.large")
    assert offering.interruptible
    spy = FleetSpy(provider.ec2)

    result = provider.create(
        request("iodcr-1", nodeclass=nc, instance_types=types, capacity_types=frozenset({"reserved"}))
    )

    assert (result.reservation_id, result.interruptible) == (rid, True)
    params = spy.calls[-1]
    assert params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "reserved-capacity"
    assert params["ReservedCapacityOptions"] == {"ReservationTypes": ["interruptible-capacity-reservation"]}
    assert "OnDemandOptions" not in params
    raw = ec2.ec2.describe_instances(InstanceIds=[result.instance_id])["Reservations"][0]["Instances"][0]
    assert raw["InstanceLifecycle"] == "interruptible-capacity-reservation"
    assert provider.get(result.instance_id).capacity_type == "reserved"


def test_the_sandboxs_ec2_refuses_an_on_demand_fleet_into_an_interruptible_reservation(ec2: Env) -> None:
    rid = ec2_reservations.add_interruptible_reservation(
        "us-east-1", instance_type="m5.large", zone="us-east-1b", count=1
    )
    template = ec2.ec2.create_launch_template(
        LaunchTemplateName="iodcr-on-demand",
        LaunchTemplateData={
            "ImageId": "ami-12c6146b",
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": rid}},
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    answer = ec2.ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
                "Overrides": [{"InstanceType": "m5.large", "SubnetId": ec2.subnets["us-east-1b"]}],
            }
        ],
    )
    assert not answer.get("Instances")
    (error,) = answer["Errors"]
    assert error["ErrorCode"] == "InvalidParameterCombination"
    assert "reserved-capacity" in error["ErrorMessage"]


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ([{"tags": {"team": "*"}}], {"ml", "web", "lent"}),
        ([{"tags": {"team": "ml"}}], {"ml", "lent"}),
        ([{"tags": {"team": "ml"}, "ownerID": "210987654321"}], {"lent"}),
        ([{"tags": {"team": "ml"}, "ownerID": "123456789012"}], {"ml"}),
        ([{"instanceMatchCriteria": "open"}], {"web", "untagged"}),
        ([{"tags": {"team": "web"}, "instanceMatchCriteria": "targeted"}], set()),
        ([{"tags": {"team": "web"}}, {"tags": {"team": "ml"}, "ownerID": "210987654321"}], {"web", "lent"}),
    ],
)
def test_the_live_query_and_the_offline_plan_select_the_same_reservations(
    ec2: Env, terms: list[dict[str, Any]], expected: set[str]
) -> None:
    """``capacityReservationSelectorTerms`` as Karpenter reads them (a ``*`` tag value is any value
    of that key, ``ownerID`` narrows a tags term, terms are ORed), once as the DescribeCapacityReservations
    filters the functions send and once as ``selected_by`` applies them to a saved answer
    (``nodewright plan``): both select the same reservations."""
    ids = {
        "ml": odcr(ec2),
        "web": ec2.ec2.create_capacity_reservation(
            InstanceType="c5.large",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=1,
            InstanceMatchCriteria="open",
            TagSpecifications=[
                {"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "web"}]}
            ],
        )["CapacityReservation"]["CapacityReservationId"],
        "untagged": ec2.ec2.create_capacity_reservation(
            InstanceType="m5.large",
            InstancePlatform="Linux/UNIX",
            AvailabilityZone="us-east-1a",
            InstanceCount=1,
            InstanceMatchCriteria="open",
        )["CapacityReservation"]["CapacityReservationId"],
        "lent": ec2_reservations.add_interruptible_reservation(
            "us-east-1", instance_type="m5.large", zone="us-east-1b", count=1, tags={"team": "ml"}
        ),
    }
    names = {rid: name for name, rid in ids.items()}
    saved = reservations.from_saved_answer(ec2.ec2.describe_capacity_reservations(), "saved")
    assert len(saved) == len(ids)

    live = reservations.ReservationResolver(ec2.ec2, ("us-east-1", None)).select(terms)
    offline = reservations.selected_by(terms, saved, datetime.now(UTC))

    assert {names[r.id] for r in live} == expected
    assert {names[r.id] for r in offline} == expected
