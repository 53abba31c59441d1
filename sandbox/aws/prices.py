"""What AWS's price APIs answer in the sandbox (moto has no Pricing API; its spot prices are a constant).

**On-demand**: the real us-east-1 table in ``../shared/data`` when present, read by the production
``PriceTable.from_ondemand_file``; otherwise none, and the production catalog ranks every type by
its documented estimate (``nodewright.cloud.pricetable.estimate_on_demand_price``) exactly as it
does in a region whose price table is missing. There is no sandbox estimator.

**Spot**, per (instance type, zone): the sandbox's stand-in for the spot market, a discount from
the on-demand price (the real one, or the production estimate) that differs by zone,
deterministically, so that a cheapest zone exists and runs are repeatable::

    spot = on_demand * (0.30 + 0.10 * (crc32("<type>/<zone>") % 1000) / 1000)

i.e. 60-70 % off on-demand, the range AWS's spot advisor shows for most general-purpose types.
"""

from __future__ import annotations

import functools
import time
import zlib
from typing import Any

from nodewright.cloud.catalog import CatalogData
from nodewright.cloud.pricetable import PriceTable, estimate_on_demand_price

from sandbox.shared_data import ondemand_prices_file

SPOT_FLOOR = 0.30
SPOT_SPREAD = 0.10


def spot_price(on_demand: float, instance_type: str, zone: str) -> float:
    """The spot price of one offering: a 60-70 % discount that depends on (type, zone)."""
    spread = (zlib.crc32(f"{instance_type}/{zone}".encode()) % 1000) / 1000
    return round(on_demand * (SPOT_FLOOR + SPOT_SPREAD * spread), 5)


@functools.cache
def reference_on_demand() -> dict[str, float]:
    """The real on-demand prices when ../shared/data has them, else none."""
    path = ondemand_prices_file()
    if path is None:
        return {}
    return {name: price for name, price in PriceTable.from_ondemand_file(path).on_demand.items() if price > 0}


def price_table(catalog: CatalogData) -> PriceTable:
    """The price table the sandbox's pricing source would store for ``catalog``'s types and zones."""
    on_demand = reference_on_demand()
    spot = {}
    for name, info in catalog.types.items():
        base = on_demand.get(name) or estimate_on_demand_price(info)
        if "spot" not in (info.get("SupportedUsageClasses") or ["spot"]):
            continue
        for zone in catalog.zones.get(name, ()):
            spot[(name, zone)] = spot_price(base, name, zone)
    source = (
        "sandbox: reference on-demand prices" if on_demand else "sandbox: no on-demand prices (estimated)"
    )
    return PriceTable(on_demand=dict(on_demand), spot=spot, updated_at=time.time(), source=source)


class SpotHistory:
    """moto's DescribeSpotPriceHistory answering the sandbox's spot market instead of its constant
    placeholder (0.00001), so the pricing function, when it runs, stores the same spot prices the
    sandbox was seeded with. Installed by a running Sandbox (moto is process-global)."""

    _original: Any = None

    @classmethod
    def install(cls) -> None:
        from moto.core.responses import ActionResult
        from moto.ec2.responses.spot_instances import SpotInstances

        if cls._original is not None:
            return
        cls._original = SpotInstances.describe_spot_price_history

        def describe_spot_price_history(self: SpotInstances) -> ActionResult:  # the response object
            answer = cls._original(self)
            table = _region_table(self.region)
            for item in answer.result.get("SpotPriceHistory", []):
                price = table.spot_price(item["InstanceType"], item["AvailabilityZone"])
                if price is not None:
                    item["SpotPrice"] = f"{price:.6f}"
            return answer

        SpotInstances.describe_spot_price_history = describe_spot_price_history

    @classmethod
    def uninstall(cls) -> None:
        from moto.ec2.responses.spot_instances import SpotInstances

        if cls._original is not None:
            SpotInstances.describe_spot_price_history = cls._original
            cls._original = None


@functools.cache
def _region_table(region: str) -> PriceTable:
    from sandbox.aws.catalog import bundled_catalog

    return price_table(bundled_catalog(region))
