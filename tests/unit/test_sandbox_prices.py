"""The sandbox's prices: real on-demand prices when present, the production estimate otherwise, and
a spot market that differs by zone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nodewright.cloud.catalog import CatalogData
from nodewright.cloud.pricetable import estimate_on_demand_price

from sandbox.aws import prices

M5_LARGE = {
    "InstanceType": "m5.large",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "SupportedUsageClasses": ["on-demand", "spot"],
}
ZONES = frozenset({"us-east-1a", "us-east-1b"})
CATALOG = CatalogData(types={"m5.large": M5_LARGE}, zones={"m5.large": ZONES}, fetched_at=0)


@pytest.fixture
def no_cache() -> Iterator[None]:
    prices.reference_on_demand.cache_clear()
    yield
    prices.reference_on_demand.cache_clear()


def test_spot_is_a_60_to_70_percent_discount_that_depends_on_the_zone() -> None:
    by_zone = {z: prices.spot_price(1.0, "m5.large", z) for z in ("us-east-1a", "us-east-1b", "us-east-1c")}
    assert all(0.30 <= p <= 0.40 for p in by_zone.values())
    assert len(set(by_zone.values())) > 1
    assert prices.spot_price(1.0, "m5.large", "us-east-1a") == by_zone["us-east-1a"]  # deterministic


def test_table_uses_the_reference_prices_when_present(shared_data, no_cache) -> None:
    table = prices.price_table(CATALOG)
    assert table.on_demand_price("m5.large") == pytest.approx(0.096)
    assert len(table.on_demand) > 1000
    assert table.spot_price("m5.large", "us-east-1b") < table.on_demand_price("m5.large")
    assert set(table.spot) == {("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")}


def test_without_reference_data_on_demand_is_left_to_the_production_estimate(monkeypatch, no_cache) -> None:
    monkeypatch.setattr(prices, "ondemand_prices_file", lambda: None)
    table = prices.price_table(CATALOG)
    assert table.on_demand_price("m5.large") is None  # the catalog estimates it, and says so
    estimate = estimate_on_demand_price(M5_LARGE)
    assert table.spot_price("m5.large", "us-east-1a") == prices.spot_price(estimate, "m5.large", "us-east-1a")


def test_types_not_sold_as_spot_get_no_spot_price(no_cache) -> None:
    on_demand_only = {**M5_LARGE, "SupportedUsageClasses": ["on-demand"]}
    catalog = CatalogData(types={"m5.large": on_demand_only}, zones={"m5.large": ZONES}, fetched_at=0)
    assert not prices.price_table(catalog).spot
