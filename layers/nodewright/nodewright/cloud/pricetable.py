"""The price table every function reads, and the documented estimate used when a price is missing.

Kept free of AWS calls so the scheduling-facing code, the state store and the CLI can
all use it; ``cloud.pricing`` fills it from the Pricing API and spot price history.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Fallback estimate, USD per instance-hour, for a type with no known on-demand price (new
# type, Pricing API unreachable). Fitted on us-east-1 general-purpose Linux prices:
# m5.large (2 vCPU, 8 GiB) $0.096, c5.large (2 vCPU, 4 GiB) $0.085 → $0.037/vCPU + $0.00275/GiB;
# accelerators are priced by count because they dominate the bill (g4dn.xlarge ≈ $0.53).
ESTIMATE_PER_VCPU = 0.037
ESTIMATE_PER_GIB = 0.00275
ESTIMATE_PER_GPU = 0.45
# Spot with no history for (type, zone): assume the typical discount of ~60 % off on-demand.
ESTIMATE_SPOT_FRACTION = 0.4
# Windows Server licence included in a Windows instance's price, USD per vCPU-hour: the difference
# between the us-east-1 Windows and Linux on-demand prices of m5.large ($0.188 vs $0.096), c5.xlarge
# ($0.354 vs $0.170) and m5.24xlarge ($9.024 vs $4.608) alike. Burstable (T) types are charged it on
# their baseline only, so for them this overestimates. The price table holds Linux prices only.
WINDOWS_LICENSE_PER_VCPU = 0.046


def estimate_on_demand_price(info: Mapping[str, Any]) -> float:
    """A rough on-demand price from a DescribeInstanceTypes item (vCPU, memory, GPUs).

    Only used to rank types that have no real price; the launch still goes ahead.
    """
    vcpus = float((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0)
    gib = float((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0) / 1024.0
    gpus = sum(int(g.get("Count") or 0) for g in (info.get("GpuInfo") or {}).get("Gpus") or [])
    accelerators = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    gpus += sum(int(a.get("Count") or 0) for a in accelerators)
    return round(vcpus * ESTIMATE_PER_VCPU + gib * ESTIMATE_PER_GIB + gpus * ESTIMATE_PER_GPU, 6)


def windows_license_per_hour(info: Mapping[str, Any]) -> float:
    """What running a DescribeInstanceTypes item as Windows Server adds to its Linux price (an estimate:
    ``WINDOWS_LICENSE_PER_VCPU`` per default vCPU)."""
    vcpus = float((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0)
    return round(vcpus * WINDOWS_LICENSE_PER_VCPU, 6)


def estimate_spot_price(on_demand_price: float) -> float:
    """A spot price for a (type, zone) with no price history: a fraction of on-demand."""
    return round(on_demand_price * ESTIMATE_SPOT_FRACTION, 6)


@dataclass(frozen=True)
class PriceTable:
    """On-demand price per type and spot price per (type, zone), USD per hour."""

    on_demand: Mapping[str, float] = field(default_factory=dict)
    spot: Mapping[tuple[str, str], float] = field(default_factory=dict)
    updated_at: float | None = None
    source: str = ""

    def on_demand_price(self, instance_type: str) -> float | None:
        return self.on_demand.get(instance_type)

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        return self.spot.get((instance_type, zone))

    @classmethod
    def from_ondemand_file(cls, path: Any) -> PriceTable:
        """Read a ``{"prices": {type: usd}}`` JSON document (the shared reference price file).

        Raises ``OSError`` when it cannot be read and ``ValueError`` saying what is wrong when it
        is not such a document (not UTF-8, not JSON, another shape, a price that is no number)."""
        from nodewright.textfiles import decode_utf8

        text = decode_utf8(Path(path).read_bytes())  # a NotUtf8Error is a ValueError
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from exc
        prices = document.get("prices", document) if isinstance(document, dict) else None
        if not isinstance(prices, dict):
            raise ValueError('expected a JSON object {"prices": {type: usd}}')
        on_demand = {}
        for name, value in prices.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name}: {value!r} is not a price (USD per hour, a number)")
            on_demand[str(name)] = float(value)
        return cls(on_demand=on_demand, updated_at=time.time(), source=str(document.get("source", path)))
