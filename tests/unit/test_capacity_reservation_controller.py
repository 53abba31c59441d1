"""``nodewright.capacityreservation``: a Capacity Block's nodes are deleted (drained) from 40 minutes
before its end, and a node whose On-Demand Capacity Reservation ended is relabelled on-demand
(Karpenter's ``capacityreservation.expiration`` and ``capacitytype`` controllers)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context, instance
from nodewright import capacityreservation
from nodewright.api import labels
from nodewright.cloud.reservations import CapacityReservation


def reservation(rid: str, kind: str, end_in: timedelta | None, clock: FakeClock) -> CapacityReservation:
    return CapacityReservation(
        id=rid,
        instance_type="p5.48xlarge",
        zone="us-west-2a",
        owner_id="123456789012",
        match_criteria="targeted",
        reservation_type=kind,
        available=0,
        total=1,
        end_time=clock.now() + end_in if end_in is not None else None,
    )


def claim(name: str, rid: str, instance_id: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                labels.CAPACITY_TYPE: labels.CAPACITY_TYPE_RESERVED,
                labels.CAPACITY_RESERVATION_ID: rid,
                labels.NODEPOOL: "gpu",
            },
        },
        "status": {"providerID": f"aws:///us-west-2a/{instance_id}", "instanceID": instance_id},
    }


def setup() -> tuple[Any, FakeCluster, FakeCloudProvider, FakeClock]:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    return fake_context(cluster, cloud, clock), cluster, cloud, clock


def test_a_capacity_blocks_nodes_are_deleted_from_forty_minutes_before_its_end() -> None:
    ctx, cluster, cloud, clock = setup()
    cloud.reservations["cr-late"] = reservation("cr-late", "capacity-block", timedelta(minutes=41), clock)
    cloud.reservations["cr-soon"] = reservation("cr-soon", "capacity-block", timedelta(minutes=39), clock)
    cloud.reservations["cr-odcr"] = reservation("cr-odcr", "default", timedelta(minutes=5), clock)
    cluster.add("NodeClaim", claim("late", "cr-late", "i-1"))
    cluster.add("NodeClaim", claim("soon", "cr-soon", "i-2"))
    cluster.add("NodeClaim", claim("odcr", "cr-odcr", "i-3"))

    report = capacityreservation.reconcile(ctx)

    assert report.expired == ["soon"]
    assert {c["metadata"]["name"] for c in cluster.list_nodeclaims()} == {"late", "odcr"}
    assert [e[2] for e in cluster.events] == ["CapacityBlockExpiring"]
    clock.advance(120)  # 39 minutes left for cr-late now
    assert capacityreservation.reconcile(ctx).expired == ["late"]


def test_a_node_whose_reservation_ended_is_relabelled_on_demand() -> None:
    ctx, cluster, cloud, clock = setup()
    cluster.add("NodeClaim", claim("ended", "cr-gone", "i-0123456789abcdef9"))
    cluster.add(
        "Node",
        {
            "metadata": {
                "name": "ip-10-0-0-9",
                "labels": {labels.CAPACITY_TYPE: "reserved", labels.CAPACITY_RESERVATION_ID: "cr-gone"},
            },
            "spec": {"providerID": "aws:///us-west-2a/i-0123456789abcdef9"},
        },
    )
    running = instance(
        "i-0123456789abcdef9", "p5.48xlarge", "us-west-2a", "on-demand", "ended", launch_time=clock.now()
    )
    cloud.instances["i-0123456789abcdef9"] = dataclasses.replace(running)

    report = capacityreservation.reconcile(ctx)

    assert report.demoted == ["ended"]
    (nodeclaim,) = cluster.list_nodeclaims()
    assert nodeclaim["metadata"]["labels"][labels.CAPACITY_TYPE] == "on-demand"
    assert labels.CAPACITY_RESERVATION_ID not in nodeclaim["metadata"]["labels"]
    (node,) = cluster.list_nodes()
    assert node["metadata"]["labels"] == {labels.CAPACITY_TYPE: "on-demand"}
    assert capacityreservation.reconcile(ctx).demoted == []  # done once
