"""Prices from Stubber-fed Pricing API and spot history documents; the refresh and its fallbacks."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from nodewright.cloud.pricetable import (
    PriceTable,
    estimate_on_demand_price,
    estimate_spot_price,
)
from nodewright.cloud.pricing import (
    fetch_on_demand_prices,
    fetch_spot_prices,
    on_demand_filters,
    parse_price_list_item,
    refresh,
)
from nodewright.cloud.state import InMemoryStateStore
from nodewright.settings import Settings

SETTINGS = Settings(cluster_name="c1", region="us-east-1")


def price_list_item(instance_type: str, usd: str, sku: str = "JRTCKXETXF7YS6EN") -> str:
    """A GetProducts PriceList entry as the Pricing API returns it (a JSON string per product)."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "enhancedNetworkingSupported": "Yes",
                    "intelTurboAvailable": "Yes",
                    "memory": "8 GiB",
                    "dedicatedEbsThroughput": "Up to 4750 Mbps",
                    "vcpu": "2",
                    "capacitystatus": "Used",
                    "locationType": "AWS Region",
                    "storage": "EBS only",
                    "instanceFamily": "General purpose",
                    "operatingSystem": "Linux",
                    "regionCode": "us-east-1",
                    "physicalProcessor": "Intel Xeon Platinum 8175",
                    "servicecode": "AmazonEC2",
                    "networkPerformance": "Up to 10 Gigabit",
                    "servicename": "Amazon Elastic Compute Cloud",
                    "instanceType": instance_type,
                    "tenancy": "Shared",
                    "usagetype": f"BoxUsage:{instance_type}",
                    "normalizationSizeFactor": "4",
                    "licenseModel": "No License required",
                    "operation": "RunInstances",
                    "location": "US East (N. Virginia)",
                    "preInstalledSw": "NA",
                    "marketoption": "OnDemand",
                },
                "sku": sku,
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                                "appliesTo": [],
                                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2025-12-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                }
            },
            "version": "20251201000000",
            "publicationDate": "2025-12-01T00:00:00Z",
        }
    )


def pricing_client() -> Any:
    return boto3.client("pricing", region_name="us-east-1")


def expected_products_params(token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "ServiceCode": "AmazonEC2",
        "Filters": on_demand_filters("us-east-1"),
        "FormatVersion": "aws_v1",
    }
    if token:
        params["NextToken"] = token
    return params


def test_filters_ask_for_linux_shared_no_software_used_capacity_in_the_region() -> None:
    terms = {f["Field"]: f["Value"] for f in on_demand_filters("eu-west-1")}
    assert terms == {
        "regionCode": "eu-west-1",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
    }
    assert all(f["Type"] == "TERM_MATCH" for f in on_demand_filters("eu-west-1"))


def test_on_demand_prices_come_from_every_page_of_get_products() -> None:
    client = pricing_client()
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {
                "PriceList": [
                    price_list_item("m5.large", "0.0960000000"),
                    price_list_item("c5.large", "0.0850000000"),
                ],
                "FormatVersion": "aws_v1",
                "NextToken": "page-2",
            },
            expected_products_params(),
        )
        stub.add_response(
            "get_products",
            {"PriceList": [price_list_item("m6g.large", "0.0770000000")], "FormatVersion": "aws_v1"},
            expected_products_params("page-2"),
        )
        prices = fetch_on_demand_prices(client, "us-east-1")
        stub.assert_no_pending_responses()
    assert prices == {"m5.large": 0.096, "c5.large": 0.085, "m6g.large": 0.077}


def test_zero_price_dimension_is_not_a_price_and_lowest_sku_wins() -> None:
    assert parse_price_list_item(price_list_item("m5.large", "0.0000000000")) is None
    client = pricing_client()
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {
                "PriceList": [
                    price_list_item("m5.large", "0.1100000000", sku="AAAA"),
                    price_list_item("m5.large", "0.0960000000", sku="BBBB"),
                    price_list_item("m5.large", "0.0000000000", sku="CCCC"),
                ]
            },
            expected_products_params(),
        )
        assert fetch_on_demand_prices(client, "us-east-1") == {"m5.large": 0.096}


def test_spot_prices_keep_the_latest_record_per_type_and_zone() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)

    def record(instance_type: str, zone: str, price: str, age_minutes: int) -> dict[str, Any]:
        return {
            "AvailabilityZone": zone,
            "InstanceType": instance_type,
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": price,
            "Timestamp": now - timedelta(minutes=age_minutes),
        }

    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_spot_price_history",
            {
                "SpotPriceHistory": [
                    record("m5.large", "us-east-1a", "0.0400", 30),
                    record("m5.large", "us-east-1a", "0.0350", 5),
                ],
                "NextToken": "more",
            },
            {"StartTime": now, "ProductDescriptions": ["Linux/UNIX"]},
        )
        stub.add_response(
            "describe_spot_price_history",
            {"SpotPriceHistory": [record("m5.large", "us-east-1b", "0.0410", 10)]},
            {"StartTime": now, "ProductDescriptions": ["Linux/UNIX"], "NextToken": "more"},
        )
        prices = fetch_spot_prices(ec2, now=now)
    assert prices == {("m5.large", "us-east-1a"): 0.035, ("m5.large", "us-east-1b"): 0.041}


def test_refresh_writes_both_halves_into_the_state_store() -> None:
    pricing, ec2 = pricing_client(), boto3.client("ec2", region_name="us-east-1")
    store = InMemoryStateStore()
    with Stubber(pricing) as p, Stubber(ec2) as e:
        p.add_response(
            "get_products", {"PriceList": [price_list_item("m5.large", "0.096")]}, expected_products_params()
        )
        e.add_response(
            "describe_spot_price_history",
            {
                "SpotPriceHistory": [
                    {
                        "AvailabilityZone": "us-east-1a",
                        "InstanceType": "m5.large",
                        "SpotPrice": "0.04",
                        "Timestamp": datetime.now(UTC),
                    }
                ]
            },
            {"StartTime": ANY, "ProductDescriptions": ["Linux/UNIX"]},
        )
        table = refresh(SETTINGS, store=store, pricing=pricing, ec2=ec2)
    assert store.price_table() == table
    assert table.on_demand_price("m5.large") == 0.096
    assert table.spot_price("m5.large", "us-east-1a") == 0.04
    assert table.source == "pricing-api+spot-price-history"


def test_refresh_keeps_previous_on_demand_prices_when_the_pricing_api_fails() -> None:
    pricing, ec2 = pricing_client(), boto3.client("ec2", region_name="us-east-1")
    store = InMemoryStateStore()
    store.put_price_table(PriceTable(on_demand={"m5.large": 0.096}, spot={("m5.large", "us-east-1a"): 0.05}))
    with Stubber(pricing) as p, Stubber(ec2) as e:
        p.add_client_error("get_products", service_error_code="ThrottlingException", http_status_code=400)
        e.add_client_error("describe_spot_price_history", service_error_code="UnauthorizedOperation")
        table = refresh(SETTINGS, store=store, pricing=pricing, ec2=ec2)
    assert table.on_demand == {"m5.large": 0.096}
    assert table.spot == {("m5.large", "us-east-1a"): 0.05}


def test_estimate_ranks_a_type_with_no_price_by_vcpu_memory_and_gpus() -> None:
    m5 = {"VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 8192}}
    c5 = {"VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 4096}}
    g4 = {
        "VCpuInfo": {"DefaultVCpus": 4},
        "MemoryInfo": {"SizeInMiB": 16384},
        "GpuInfo": {"Gpus": [{"Name": "T4", "Manufacturer": "NVIDIA", "Count": 1}]},
    }
    assert estimate_on_demand_price(m5) == pytest.approx(0.096, abs=1e-3)
    assert estimate_on_demand_price(c5) == pytest.approx(0.085, abs=1e-3)
    assert estimate_on_demand_price(g4) > 0.5
    assert estimate_spot_price(0.1) == pytest.approx(0.04)
    assert estimate_on_demand_price({}) == 0


def test_reference_price_file_loads_as_a_price_table(shared_data: Any) -> None:
    from sandbox.shared_data import ondemand_prices_file

    path = ondemand_prices_file()
    if path is None:
        pytest.skip("the reference on-demand price file is absent")
    table = PriceTable.from_ondemand_file(path)
    assert len(table.on_demand) > 1000
    assert table.on_demand_price("m5.large") == pytest.approx(0.096)
