"""The DynamoDB state store on moto: TTL items, the price table, Powertools idempotency on the same table."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws
from nodewright.cloud import aws
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.state import DynamoDBStateStore, create_state_table, idempotency_persistence
from nodewright.settings import Settings

TABLE = "nodewright-state"
SETTINGS = Settings(cluster_name="c1", region="us-east-1", state_table=TABLE)


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def table() -> Iterator[None]:
    with mock_aws():
        aws.reset_clients()
        create_state_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE)
        yield
        aws.reset_clients()


def test_unavailable_offerings_are_shared_items_with_a_three_minute_ttl(table: None) -> None:
    clock = Clock()
    writer, reader = DynamoDBStateStore(SETTINGS, clock=clock), DynamoDBStateStore(SETTINGS, clock=clock)
    writer.mark_unavailable("m5.large", "us-east-1a", "spot", reason="InsufficientInstanceCapacity")
    assert reader.unavailable_offerings() == {("m5.large", "us-east-1a", "spot")}
    assert reader.is_unavailable("m5.large", "us-east-1a", "spot")
    item = boto3.client("dynamodb", region_name="us-east-1").get_item(
        TableName=TABLE, Key={"pk": {"S": "offering#unavailable"}, "sk": {"S": "m5.large#us-east-1a#spot"}}
    )["Item"]
    assert int(item["expires_at"]["N"]) == int(clock.now) + 180
    assert item["reason"]["S"] == "InsufficientInstanceCapacity"
    clock.now += 181  # DynamoDB's TTL sweep is lazy: the read filters expired items itself
    assert reader.unavailable_offerings() == set()
    assert not reader.is_unavailable("m5.large", "us-east-1a", "spot")


def test_price_table_is_split_per_zone_and_read_back_whole(table: None) -> None:
    store = DynamoDBStateStore(SETTINGS)
    spot = {(f"t{i}.large", zone): i / 1000 for i in range(300) for zone in ("us-east-1a", "us-east-1b")}
    table_in = PriceTable(
        on_demand={f"t{i}.large": i / 100 for i in range(300)}, spot=spot, updated_at=5, source="x"
    )
    store.put_price_table(table_in)
    keys = boto3.client("dynamodb", region_name="us-east-1").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "prices"}},
    )["Items"]
    assert sorted(i["sk"]["S"] for i in keys) == ["on-demand", "spot#us-east-1a", "spot#us-east-1b"]
    assert store.price_table() == table_in


def test_idempotency_persistence_uses_the_same_table_keys(table: None) -> None:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function

    calls = []
    persistence = idempotency_persistence(SETTINGS)
    config = IdempotencyConfig()
    config.register_lambda_context(SimpleNamespace(get_remaining_time_in_millis=lambda: 60_000))

    @idempotent_function(data_keyword_argument="message", persistence_store=persistence, config=config)
    def handle(message: dict[str, str]) -> str:
        calls.append(message["id"])
        return f"handled {message['id']}"

    assert handle(message={"id": "evt-1"}) == "handled evt-1"
    assert handle(message={"id": "evt-1"}) == "handled evt-1"
    assert calls == ["evt-1"]
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=TABLE)["Items"]
    assert len(items) == 1
    assert {"pk", "sk", "expires_at"} <= set(items[0])


def test_markers_survive_between_stores_and_expire(table: None) -> None:
    clock = Clock()
    DynamoDBStateStore(SETTINGS, clock=clock).put_marker(
        "provisioner/last-active", "2026-01-01T00:00:00Z", ttl=60
    )
    reader = DynamoDBStateStore(SETTINGS, clock=clock)
    assert reader.get_marker("provisioner/last-active") == "2026-01-01T00:00:00Z"
    assert reader.get_marker("other") is None
    clock.now += 61
    assert reader.get_marker("provisioner/last-active") is None


def test_store_without_a_table_name_says_which_variable_to_set() -> None:
    with pytest.raises(ValueError, match="STATE_TABLE"):
        DynamoDBStateStore(Settings(cluster_name="c1", region="us-east-1"))


def test_the_catalog_snapshot_is_one_binary_item_read_back_whole(table: None) -> None:
    from nodewright.cloud.catalog import CatalogData, decode_snapshot, encode_snapshot
    from nodewright.cloud.state import CATALOG_SNAPSHOT_MAX_BYTES

    types = {
        f"t{i}.large": {"InstanceType": f"t{i}.large", "VCpuInfo": {"DefaultVCpus": 2}} for i in range(500)
    }
    zones = {name: frozenset({"us-east-1a", "us-east-1b"}) for name in types}
    data = CatalogData(types=types, zones=zones, fetched_at=1_700_000_000.5)
    writer, reader = DynamoDBStateStore(SETTINGS), DynamoDBStateStore(SETTINGS)
    assert reader.catalog_snapshot("us-east-1") is None
    writer.put_catalog_snapshot("us-east-1", encode_snapshot(data), data.fetched_at)
    blob, fetched_at = reader.catalog_snapshot("us-east-1") or (b"", 0.0)
    assert fetched_at == data.fetched_at
    assert decode_snapshot(blob, fetched_at) == data
    assert reader.catalog_snapshot("eu-west-1") is None, "one snapshot per region"
    with pytest.raises(ValueError, match="over"):
        writer.put_catalog_snapshot("us-east-1", b"x" * (CATALOG_SNAPSHOT_MAX_BYTES + 1), 0.0)
