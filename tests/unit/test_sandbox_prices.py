"""The sandbox price source: real on-demand prices when present, else the documented estimate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox import prices

M5_LARGE = {
    "InstanceType": "m5.large",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
}


@pytest.fixture
def no_cache() -> Iterator[None]:
    prices.on_demand_prices.cache_clear()
    yield
    prices.on_demand_prices.cache_clear()


def test_estimate_follows_the_documented_formula() -> None:
    assert prices.estimate_on_demand(M5_LARGE) == pytest.approx(2 * 0.0355 + 8 * 0.0035)  # 0.099, real 0.096
    graviton = {**M5_LARGE, "ProcessorInfo": {"SupportedArchitectures": ["arm64"]}}
    assert prices.estimate_on_demand(graviton) == pytest.approx(0.099 * 0.8)
    gpu = {**M5_LARGE, "GpuInfo": {"Gpus": [{"Count": 1}]}}
    assert prices.estimate_on_demand(gpu) == pytest.approx(0.099 + 0.33)


def test_spot_is_a_60_to_70_percent_discount_that_depends_on_the_zone() -> None:
    by_zone = {z: prices.spot_price(1.0, "m5.large", z) for z in ("us-east-1a", "us-east-1b", "us-east-1c")}
    assert all(0.30 <= p <= 0.40 for p in by_zone.values())
    assert len(set(by_zone.values())) > 1
    assert prices.spot_price(1.0, "m5.large", "us-east-1a") == by_zone["us-east-1a"]  # deterministic


def test_table_uses_the_reference_prices_when_present(shared_data, no_cache) -> None:
    on_demand, spot = prices.sandbox_price_table(("us-east-1a", "us-east-1b"))
    assert on_demand["m5.large"] == pytest.approx(0.096)
    assert len(on_demand) > 1000
    assert spot[("m5.large", "us-east-1b")] < on_demand["m5.large"]
    assert len(spot) == 2 * len(on_demand)


def test_table_falls_back_to_the_estimate_without_reference_data(monkeypatch, no_cache) -> None:
    monkeypatch.setattr(prices, "ondemand_prices_file", lambda: None)
    on_demand, spot = prices.sandbox_price_table(("us-east-1a",))
    assert on_demand["m5.large"] == pytest.approx(0.099)
    assert ("m5.large", "us-east-1a") in spot
