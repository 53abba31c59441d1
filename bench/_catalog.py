"""The real EC2 catalog moto ships, with real on-demand prices when ../shared/data has them.

Dev-side only (moto is a dev dependency). Loaded once per process (``functools.cache``).
"""

from __future__ import annotations

import functools
import gzip
import importlib.resources
import json
from collections.abc import Mapping

from nodewright.scheduling import InstanceType, Offering, instance_type_from_ec2

from sandbox.shared_data import ondemand_prices_file

REGION = "us-east-1"

# Estimated on-demand $/h when the real price table is absent: a linear fit of us-east-1
# general-purpose prices (c5/m5/r5 .large: $0.085 / $0.096 / $0.126) per vCPU and per GiB, plus
# a flat amount per accelerator. PLACEHOLDER-free but approximate: real figures need the table.
ESTIMATE_PER_VCPU = 0.0352
ESTIMATE_PER_GIB = 0.0032
ESTIMATE_PER_GPU = 0.50


def estimate_price(info: Mapping) -> float:
    """A documented estimate of a type's on-demand $/h (see the constants above)."""
    vcpus = int(info["VCpuInfo"]["DefaultVCpus"])
    gib = int(info["MemoryInfo"]["SizeInMiB"]) / 1024
    gpus = sum(int(g.get("Count", 0)) for g in (info.get("GpuInfo") or {}).get("Gpus") or ())
    return round(vcpus * ESTIMATE_PER_VCPU + gib * ESTIMATE_PER_GIB + gpus * ESTIMATE_PER_GPU, 4)


def _moto_json(*parts: str) -> object:
    resource = importlib.resources.files("moto.ec2").joinpath("resources", *parts)
    with resource.open("rb") as raw, gzip.open(raw) as unzipped:
        return json.load(unzipped)


@functools.cache
def describe_instance_types() -> dict[str, dict]:
    """name → DescribeInstanceTypes item (moto's copy of the real catalog)."""
    return _moto_json("instance_types.json.gz")  # type: ignore[return-value]


@functools.cache
def zones_by_type() -> dict[str, tuple[str, ...]]:
    offered: dict[str, set[str]] = {}
    for row in _moto_json("instance_type_offerings", "availability-zone", f"{REGION}.json.gz"):  # type: ignore[union-attr]
        offered.setdefault(row["InstanceType"], set()).add(row["Location"])
    return {name: tuple(sorted(zones)) for name, zones in offered.items()}


@functools.cache
def prices() -> tuple[dict[str, float], str]:
    """On-demand prices and where they came from (the real table, or ``estimate_price``)."""
    path = ondemand_prices_file()
    if path is not None:
        return dict(json.loads(path.read_text())["prices"]), str(path)
    return {
        name: estimate_price(info) for name, info in describe_instance_types().items()
    }, "estimate_price()"


@functools.cache
def catalog(capacity_types: tuple[str, ...] = ("on-demand",)) -> tuple[InstanceType, ...]:
    """Every us-east-1 type with a price, offered on-demand in the zones moto lists for it."""
    price_table, _ = prices()
    zones = zones_by_type()
    result = []
    for name, info in sorted(describe_instance_types().items()):
        price = price_table.get(name)
        if price is None or name not in zones:
            continue
        offerings = [Offering(zone, ct, price) for zone in zones[name] for ct in capacity_types]
        result.append(instance_type_from_ec2(info, offerings))
    return tuple(result)
