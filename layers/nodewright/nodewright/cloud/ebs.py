"""What a node's EBS volumes cost: a bundled price table, like the instance prices, per volume.

A node costs more than its instance: its root volume (the EC2NodeClass's ``blockDeviceMappings``,
else the AMI family's default: 20 GiB gp3; Bottlerocket 4 GiB + 20 GiB) is billed per node, which
makes ten tiny nodes dearer than they look. The planner adds this to every node's price.

The table holds AWS's published EBS list prices for us-east-1, which us-east-2 and us-west-2
share (USD): gp3 $0.08 per GiB-month, plus $0.005 per provisioned IOPS-month above 3,000 and
$0.04 per MiB/s-month above 125; gp2 $0.10 per GiB-month; io1 and io2 $0.125 per GiB-month plus
$0.065 per IOPS-month (io2's cheaper tiers above 32,000 IOPS are not modelled, so an io2 figure
is an upper bound); st1 $0.045, sc1 $0.015, standard $0.05 per GiB-month (its per-I/O charge is
not modelled). Other regions are priced with the same figures and marked estimated. A month is
730 hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodewright.cloud.launchtemplates import default_block_devices, volume_gib
from nodewright.cloud.nodeclass import NodeClass

HOURS_PER_MONTH = 730.0
PRICED_REGIONS = frozenset({"us-east-1", "us-east-2", "us-west-2"})
DEFAULT_VOLUME_TYPE = "gp3"  # Karpenter's DefaultEBS
DEFAULT_VOLUME_GIB = 20


@dataclass(frozen=True)
class VolumeRate:
    """USD per month: per GiB, and per provisioned IOPS and MiB/s beyond what the size includes."""

    per_gib: float
    per_iops: float = 0.0
    included_iops: int = 0
    per_mibps: float = 0.0
    included_mibps: int = 0


RATES: Mapping[str, VolumeRate] = {
    "gp3": VolumeRate(0.08, 0.005, 3000, 0.04, 125),
    "gp2": VolumeRate(0.10),
    "io1": VolumeRate(0.125, 0.065),
    "io2": VolumeRate(0.125, 0.065),
    "st1": VolumeRate(0.045),
    "sc1": VolumeRate(0.015),
    "standard": VolumeRate(0.05),
}


@dataclass(frozen=True)
class NodeStorage:
    """The EBS volumes every node of an EC2NodeClass gets, and their price per node-hour."""

    per_hour: float
    volumes: tuple[str, ...]  # "20Gi gp3", ...
    estimated: bool  # a region the table does not price, or a volume type it does not know


def volume_price_per_hour(ebs: Mapping[str, Any]) -> tuple[float, bool]:
    """(USD per hour, estimated?) of one ``blockDeviceMappings[].ebs`` volume."""
    volume_type = str(ebs.get("volumeType") or DEFAULT_VOLUME_TYPE)
    rate = RATES.get(volume_type)
    estimated = rate is None
    rate = rate or RATES[DEFAULT_VOLUME_TYPE]
    size = ebs.get("volumeSize")
    monthly = rate.per_gib * (volume_gib(size) if size is not None else DEFAULT_VOLUME_GIB)
    if ebs.get("iops") is not None:
        monthly += rate.per_iops * max(0, int(ebs["iops"]) - rate.included_iops)
    if ebs.get("throughput") is not None:
        monthly += rate.per_mibps * max(0, int(ebs["throughput"]) - rate.included_mibps)
    return monthly / HOURS_PER_MONTH, estimated


def node_volumes(nodeclass: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The EC2NodeClass's ``blockDeviceMappings``, or its AMI family's defaults."""
    nc = NodeClass(nodeclass)
    return nc.block_device_mappings or default_block_devices(nc.ami_family)


def node_storage(nodeclass: Mapping[str, Any], region: str | None) -> NodeStorage:
    """What the EBS volumes of one node of this EC2NodeClass cost per hour in the region."""
    total, estimated = 0.0, region not in PRICED_REGIONS
    described: list[str] = []
    for device in node_volumes(nodeclass):
        ebs = device.get("ebs") or {}
        price, guessed = volume_price_per_hour(ebs)
        total += price
        estimated = estimated or guessed
        size = ebs.get("volumeSize", f"{DEFAULT_VOLUME_GIB}Gi")
        described.append(f"{size} {ebs.get('volumeType') or DEFAULT_VOLUME_TYPE}")
    return NodeStorage(total, tuple(described), estimated)


def describe(storage: NodeStorage) -> str:
    """``EBS 20Gi gp3: $0.0022/h per node`` (``~`` when estimated)."""
    mark = "~" if storage.estimated else ""
    volumes = " + ".join(storage.volumes) or "no EBS volume"
    return f"EBS {volumes}: {mark}${storage.per_hour:.4f}/h per node"
