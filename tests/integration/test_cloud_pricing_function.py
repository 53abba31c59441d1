"""The pricing Lambda handler end to end: Stubber for the Pricing API, moto for spot history and DynamoDB."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import ANY, Stubber
from fakes import FakeLambdaContext
from moto import mock_aws
from nodewright.cloud import aws
from nodewright.cloud.state import DynamoDBStateStore, create_state_table
from nodewright.settings import Settings

from sandbox.runtime.lambdas import load_function

TABLE = "nodewright-state"


@pytest.fixture
def pricing_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("CLUSTER_NAME", "c1")
    monkeypatch.setenv("STATE_TABLE", TABLE)
    with mock_aws():
        aws.reset_clients()
        create_state_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE)
        yield
        aws.reset_clients()


def product(instance_type: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": instance_type, "operatingSystem": "Linux"}},
            "terms": {
                "OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}
            },
        }
    )


def test_handler_refreshes_the_table_every_function_reads(pricing_env: None) -> None:
    settings = Settings.from_env()
    pricing = aws.client("pricing", settings, region=aws.PRICING_API_REGION)
    app = load_function("pricing")
    with Stubber(pricing) as stub:
        stub.add_response("get_products", {"PriceList": [product("m5.large", "0.096")]}, {
            "ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1"})  # fmt: skip
        result = app.handler({"source": "aws.events"}, FakeLambdaContext("pricing", memory_limit_in_mb=256))
    assert result["onDemandPrices"] == 1
    assert result["spotPrices"] > 0  # moto's spot price history
    table = DynamoDBStateStore(settings).price_table()
    assert table.on_demand_price("m5.large") == 0.096
    assert table.spot
