"""The sandbox's price source: moto has no Pricing API and its spot prices are a constant placeholder.

**On-demand** (USD per instance-hour, Linux): the real table in
``sandbox.shared_data.ondemand_prices_file()`` when present; otherwise an estimate for every
instance type in moto's catalog::

    price = vCPUs * 0.0355 + memory_GiB * 0.0035 + GPUs * 0.33 + accelerators * 0.20
    price *= 0.80 for arm64 (Graviton)           # AWS prices Graviton ~20 % below x86

The per-vCPU and per-GiB rates are the least-squares fit of us-east-1 m5/c5/r5 ``.large``
(0.096, 0.085, 0.126 → estimate 0.099, 0.085, 0.127); the per-GPU rate fits g4dn.xlarge (0.526).

**Spot**, per (instance type, zone): a documented discount from on-demand that differs by zone,
deterministically, so that a cheapest zone exists and tests are repeatable::

    spot = on_demand * (0.30 + 0.10 * (crc32("<type>/<zone>") % 1000) / 1000)

i.e. 60-70 % off on-demand, the range AWS's spot advisor shows for most general-purpose types.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from functools import cache

from sandbox.shared_data import ondemand_prices_file

DEFAULT_ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
VCPU_RATE = 0.0355
GIB_RATE = 0.0035
GPU_RATE = 0.33
ACCELERATOR_RATE = 0.20
ARM_FACTOR = 0.80
SPOT_FLOOR = 0.30
SPOT_SPREAD = 0.10


def estimate_on_demand(instance_type_info: dict) -> float:
    """Estimated on-demand price of one moto/EC2 ``InstanceTypeInfo`` (see the module docstring)."""
    vcpus = instance_type_info.get("VCpuInfo", {}).get("DefaultVCpus", 0)
    gib = instance_type_info.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024
    gpus = sum(g.get("Count", 0) for g in instance_type_info.get("GpuInfo", {}).get("Gpus", []))
    accelerators = sum(
        a.get("Count", 0)
        for a in instance_type_info.get("InferenceAcceleratorInfo", {}).get("Accelerators", [])
    )
    price = vcpus * VCPU_RATE + gib * GIB_RATE + gpus * GPU_RATE + accelerators * ACCELERATOR_RATE
    architectures = instance_type_info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    if architectures and all(a.startswith("arm64") for a in architectures):
        price *= ARM_FACTOR
    return round(price, 5)


def spot_price(on_demand: float, instance_type: str, zone: str) -> float:
    """The spot price of one offering: a 60-70 % discount that depends on (type, zone)."""
    spread = (zlib.crc32(f"{instance_type}/{zone}".encode()) % 1000) / 1000
    return round(on_demand * (SPOT_FLOOR + SPOT_SPREAD * spread), 5)


@cache
def on_demand_prices() -> dict[str, float]:
    """Real on-demand prices when the reference file is present, else the estimate."""
    path = ondemand_prices_file()
    if path is not None:
        document = json.loads(path.read_text())
        return {name: float(price) for name, price in document["prices"].items() if float(price) > 0}
    from sandbox.aws import preload_moto_ec2

    preload_moto_ec2()
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    return {name: estimate_on_demand(info) for name, info in INSTANCE_TYPES.items()}


def sandbox_price_table(
    zones: Iterable[str] = DEFAULT_ZONES,
) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """``(on_demand[type], spot[(type, zone)])`` in USD per hour for every known instance type."""
    on_demand = dict(on_demand_prices())
    zones = tuple(zones)
    spot = {
        (name, zone): spot_price(price, name, zone) for name, price in on_demand.items() for zone in zones
    }
    return on_demand, spot
