"""Capacity reservations end to end in the sandbox (API emulator, simulated scheduler/kubelet, moto
with ``sandbox.aws.ec2_reservations``), through the real provisioner and disruption handlers:

1. an On-Demand Capacity Reservation selected by tag: a pod lands on a node launched into it, and
   the node carries ``karpenter.sh/capacity-type: reserved`` and the reservation's three labels;
2. a Capacity Block: a pod selecting ``capacity-block`` lands in it; once the block is within 40
   minutes of its end (EC2's clock moved forward), the disruption function deletes its NodeClaim and
   the node is drained and gone before EC2 would reclaim the instance.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from handler_calls import disrupt, handlers_against, node_of, pod, provision, until_a_report
from nodewright.api import labels
from nodewright.cloud import reservations
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS, NODES, PODS
from waiting import wait_for

from sandbox.aws import ec2_reservations
from sandbox.aws.server import aws_client
from sandbox.scenarios.workloads import nodeclass, nodepool

# A guard against a hang, as the other sandbox modules have: two suites at once stretched a test
# of this module past the default 300 s.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

RESERVED_POOL = [
    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]},
    {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": labels.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-reserved", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture(scope="module")
def kube(sandbox: Any) -> Iterator[Any]:
    with handlers_against(sandbox):
        client = sandbox.admin_cluster()
        klass = nodeclass(sandbox)
        klass["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"team": "ml"}}]
        client.create(EC2NODECLASSES, klass)
        client.create(NODEPOOLS, nodepool("reserved", RESERVED_POOL))
        yield client


def test_a_pod_lands_in_an_on_demand_capacity_reservation_and_its_node_carries_its_labels(
    kube: Any, sandbox: Any
) -> None:
    ec2 = aws_client("ec2", sandbox.aws_endpoint, sandbox.region)
    zone = sandbox.zones[0]
    reservation = ec2.create_capacity_reservation(
        InstanceType="m5.2xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zone,
        InstanceCount=1,
        InstanceMatchCriteria="targeted",
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "ml"}]}
        ],
    )["CapacityReservation"]["CapacityReservationId"]
    kube.create(PODS, pod("trainer", "6"), namespace="default")
    wait_for("the pod unschedulable", lambda: len(kube.list_pending_pods()) == 1)

    # One launch for the pod, however many passes it takes (see test_nodeoverlay_sandbox.land).
    launched = [until_a_report(provision)["launched"]]
    wait_for(
        "the pod Running",
        lambda: node_of(kube, "trainer") is not None,
        step=lambda: launched.append(until_a_report(provision)["launched"]),
    )
    assert sum(launched) == 1, launched

    node = node_of(kube, "trainer")
    assert node is not None
    node_labels = node["metadata"]["labels"]
    assert node_labels[labels.CAPACITY_TYPE] == "reserved"
    assert node_labels[labels.CAPACITY_RESERVATION_ID] == reservation
    assert node_labels[labels.CAPACITY_RESERVATION_TYPE] == "default"
    assert node_labels[labels.CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert node_labels[labels.INSTANCE_TYPE] == "m5.2xlarge"
    instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
    described = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert described["CapacityReservationId"] == reservation
    (found,) = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation])[
        "CapacityReservations"
    ]
    assert found["AvailableInstanceCount"] == 0

    disrupt()  # the status controller writes what the terms select
    (klass,) = kube.list(EC2NODECLASSES)
    listed = {r["id"]: r for r in klass["status"]["capacityReservations"]}
    assert listed[reservation]["state"] == "active"
    assert listed[reservation]["instanceType"] == "m5.2xlarge"
    kube.delete(PODS, "trainer", namespace="default")


def test_a_capacity_blocks_end_drains_its_node_ahead_of_time(kube: Any, sandbox: Any) -> None:
    now = datetime.now(UTC)
    block = ec2_reservations.add_capacity_block(
        sandbox.region,
        instance_type="c5.2xlarge",
        zone=sandbox.zones[1],
        count=1,
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=2),
        tags={"team": "ml"},
    )
    selector = {labels.CAPACITY_RESERVATION_TYPE: "capacity-block"}
    kube.create(PODS, pod("block-job", "6", nodeSelector=selector), namespace="default")
    wait_for(
        "the pod unschedulable",
        lambda: any(p["metadata"]["name"] == "block-job" for p in kube.list_pending_pods()),
    )

    # A reservation bought a moment ago is seen once the minute the reservation queries are kept
    # is over: the warm container's cached answers expire (rather than the test waiting that minute).
    reservations.clear_caches()
    wait_for(
        "a NodeClaim launched into the block", lambda: until_a_report(provision)["launched"] >= 1, timeout=150
    )
    wait_for("the pod Running in the block", lambda: node_of(kube, "block-job") is not None, step=provision)
    node = node_of(kube, "block-job")
    assert node is not None
    assert node["metadata"]["labels"][labels.CAPACITY_RESERVATION_ID] == block
    assert node["metadata"]["labels"][labels.CAPACITY_RESERVATION_TYPE] == "capacity-block"
    claim_name = next(
        c["metadata"]["name"]
        for c in kube.list(NODECLAIMS)
        if c["metadata"]["labels"].get(labels.CAPACITY_RESERVATION_ID) == block
    )

    disrupt()
    assert any(c["metadata"]["name"] == claim_name for c in kube.list(NODECLAIMS))  # 2 h left: stays

    # EC2's clock: the block is now 39 minutes from its end (EC2 reclaims from 30 minutes before).
    (held,) = [r for r in ec2_reservations.reservations_in(sandbox.region) if r.id == block]
    held.end = datetime.now(UTC) + timedelta(minutes=39)

    def gone() -> bool:
        return not any(c["metadata"]["name"] == claim_name for c in kube.list(NODECLAIMS)) and not any(
            n["metadata"]["name"] == node["metadata"]["name"] for n in kube.list(NODES)
        )

    wait_for("the block's NodeClaim and node gone", gone, timeout=120, step=disrupt)
    ec2 = aws_client("ec2", sandbox.aws_endpoint, sandbox.region)
    instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
    state = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"][
        "Name"
    ]
    assert state in ("shutting-down", "terminated")

    def listed_expiring() -> bool:
        (klass,) = kube.list(EC2NODECLASSES)
        listed = {r["id"]: r for r in klass["status"].get("capacityReservations") or []}
        return block in listed and listed[block]["state"] == "expiring"

    # The status controller reads the terms' reservations again once its minute-old answer expires
    # (expired here, as above, rather than waited for).
    reservations.clear_caches()
    wait_for(
        "the block listed expiring in the EC2NodeClass status", listed_expiring, timeout=120, step=disrupt
    )
