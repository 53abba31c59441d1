"""The state store: one DynamoDB table with TTL items, shared by every function.

Schema (fixed with the CDK stack and the sandbox): partition key ``pk`` (S), sort key
``sk`` (S), TTL attribute ``expires_at`` (N, epoch seconds). Items:

- unavailable offerings: ``pk="offering#unavailable"``, ``sk="<type>#<zone>#<capacity type>"``,
  3-minute TTL. DynamoDB deletes expired items lazily, so reads also filter on ``expires_at``.
- prices: ``pk="prices"``, ``sk="on-demand"`` and one ``sk="spot#<zone>"`` per zone (keeps each
  item far below DynamoDB's 400 KB limit); the price map is a JSON string. No TTL: a stale
  price is better than none if the refresh stops.
- markers: ``pk="marker"``, ``sk=<key>``, a small string value a flow keeps between invocations
  (e.g. when a pod was last pending), optional TTL.
- the instance catalog's snapshot: ``pk="catalog"``, ``sk=<region>``, the DescribeInstanceTypes
  items and the zones offering each type as gzipped JSON (``data``, binary: about 100 KB for 1,400
  types) and when EC2 was asked (``fetched_at``); written by a container that paged EC2, read by
  cold containers instead of paging (``cloud.catalog``). No TTL: its age is checked on read.
- Powertools Idempotency records (``idempotency_persistence``), static ``pk`` per function.

``InMemoryStateStore`` has the same interface (``state.interfaces.StateStore``) for pure tests and
the offline CLI.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from nodewright.cloud.aws import client
from nodewright.cloud.pricetable import PriceTable
from nodewright.settings import Settings

if TYPE_CHECKING:
    from nodewright.state.interfaces import StateStore

UNAVAILABLE_PK = "offering#unavailable"
PRICES_PK = "prices"
MARKER_PK = "marker"
ON_DEMAND_SK = "on-demand"
SPOT_SK_PREFIX = "spot#"
UNAVAILABLE_TTL_SECONDS = 180
CATALOG_PK = "catalog"
# DynamoDB refuses items over 400 KB (names and attributes included): a larger snapshot is not kept.
CATALOG_SNAPSHOT_MAX_BYTES = 350_000

OfferingKey = tuple[str, str, str]  # (instance type, zone, capacity type)


def _offering_sk(instance_type: str, zone: str, capacity_type: str) -> str:
    return f"{instance_type}#{zone}#{capacity_type}"


def _parse_offering_sk(sk: str) -> OfferingKey | None:
    parts = sk.split("#")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


class InMemoryStateStore:
    """The state store in a dict: for pure tests and the offline CLI (nothing is shared)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._unavailable: dict[OfferingKey, tuple[float, str]] = {}
        self._prices = PriceTable()
        self._markers: dict[str, tuple[float | None, str]] = {}
        self._catalogs: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()

    def mark_unavailable(
        self,
        instance_type: str,
        zone: str,
        capacity_type: str,
        reason: str = "",
        ttl: int = UNAVAILABLE_TTL_SECONDS,
    ) -> None:
        with self._lock:
            self._unavailable[(instance_type, zone, capacity_type)] = (self._clock() + ttl, reason)

    def unavailable_offerings(self) -> set[OfferingKey]:
        now = self._clock()
        with self._lock:
            return {key for key, (expires, _) in self._unavailable.items() if expires > now}

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (instance_type, zone, capacity_type) in self.unavailable_offerings()

    def put_price_table(self, table: PriceTable) -> None:
        with self._lock:
            self._prices = table

    def price_table(self) -> PriceTable:
        with self._lock:
            return self._prices

    def put_marker(self, key: str, value: str, ttl: int | None = None) -> None:
        with self._lock:
            self._markers[key] = (self._clock() + ttl if ttl else None, value)

    def get_marker(self, key: str) -> str | None:
        with self._lock:
            expires, value = self._markers.get(key, (None, None))
        return None if value is None or (expires is not None and expires <= self._clock()) else value

    def put_catalog_snapshot(self, region: str, data: bytes, fetched_at: float) -> None:
        if len(data) > CATALOG_SNAPSHOT_MAX_BYTES:
            raise ValueError(f"catalog snapshot of {len(data)} bytes is over {CATALOG_SNAPSHOT_MAX_BYTES}")
        with self._lock:
            self._catalogs[region] = (data, fetched_at)

    def catalog_snapshot(self, region: str) -> tuple[bytes, float] | None:
        with self._lock:
            return self._catalogs.get(region)


class DynamoDBStateStore:
    """The shared DynamoDB state table (env ``STATE_TABLE``)."""

    def __init__(
        self,
        settings: Settings,
        table_name: str | None = None,
        clock: Callable[[], float] = time.time,
        dynamodb: Any = None,
    ) -> None:
        name = table_name or settings.state_table
        if not name:
            raise ValueError("STATE_TABLE is not set; the stack sets it to the state table's name")
        self.table_name = name
        self._clock = clock
        self._ddb = dynamodb or client("dynamodb", settings)

    # -- unavailable offerings -------------------------------------------------------------
    def mark_unavailable(
        self,
        instance_type: str,
        zone: str,
        capacity_type: str,
        reason: str = "",
        ttl: int = UNAVAILABLE_TTL_SECONDS,
    ) -> None:
        """Record that (type, zone, capacity type) cannot be launched for ``ttl`` seconds."""
        now = int(self._clock())
        self._ddb.put_item(
            TableName=self.table_name,
            Item={
                "pk": {"S": UNAVAILABLE_PK},
                "sk": {"S": _offering_sk(instance_type, zone, capacity_type)},
                "expires_at": {"N": str(now + ttl)},
                "marked_at": {"N": str(now)},
                "reason": {"S": reason or "unknown"},
            },
        )

    def unavailable_offerings(self) -> set[OfferingKey]:
        """Every offering marked unavailable whose TTL has not passed yet."""
        now = self._clock()
        found: set[OfferingKey] = set()
        for item in self._query(UNAVAILABLE_PK):
            if float(item.get("expires_at", {}).get("N", "0")) <= now:
                continue  # expired but not yet swept by DynamoDB TTL
            key = _parse_offering_sk(item["sk"]["S"])
            if key:
                found.add(key)
        return found

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        response = self._ddb.get_item(
            TableName=self.table_name,
            Key={"pk": {"S": UNAVAILABLE_PK}, "sk": {"S": _offering_sk(instance_type, zone, capacity_type)}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return bool(item) and float(item["expires_at"]["N"]) > self._clock()

    # -- prices ------------------------------------------------------------------------------
    def put_price_table(self, table: PriceTable) -> None:
        """Write the whole table: one on-demand item, one spot item per zone.

        Called by the 12-hourly refresh and by the sandbox to seed its own prices.
        """
        updated = str(int(table.updated_at if table.updated_at is not None else self._clock()))
        by_zone: dict[str, dict[str, float]] = {}
        for (instance_type, zone), price in table.spot.items():
            by_zone.setdefault(zone, {})[instance_type] = price
        items = [(ON_DEMAND_SK, dict(table.on_demand))] + [
            (SPOT_SK_PREFIX + zone, prices) for zone, prices in sorted(by_zone.items())
        ]
        for sk, prices in items:
            self._ddb.put_item(
                TableName=self.table_name,
                Item={
                    "pk": {"S": PRICES_PK},
                    "sk": {"S": sk},
                    "prices": {"S": json.dumps(prices, separators=(",", ":"), sort_keys=True)},
                    "updated_at": {"N": updated},
                    "source": {"S": table.source or "unknown"},
                },
            )

    def price_table(self) -> PriceTable:
        on_demand: dict[str, float] = {}
        spot: dict[tuple[str, str], float] = {}
        updated: list[float] = []
        source = ""
        for item in self._query(PRICES_PK):
            sk = item["sk"]["S"]
            prices = json.loads(item["prices"]["S"])
            updated.append(float(item.get("updated_at", {}).get("N", "0")))
            if sk == ON_DEMAND_SK:
                on_demand.update({k: float(v) for k, v in prices.items()})
                source = item.get("source", {}).get("S", "")
            elif sk.startswith(SPOT_SK_PREFIX):
                zone = sk[len(SPOT_SK_PREFIX) :]
                spot.update({(k, zone): float(v) for k, v in prices.items()})
        oldest = min(updated) if updated else None
        return PriceTable(on_demand=on_demand, spot=spot, updated_at=oldest, source=source)

    # -- markers -----------------------------------------------------------------------------
    def put_marker(self, key: str, value: str, ttl: int | None = None) -> None:
        """Keep a small string between invocations (optionally expiring after ``ttl`` seconds)."""
        item = {"pk": {"S": MARKER_PK}, "sk": {"S": key}, "value": {"S": value}}
        if ttl:
            item["expires_at"] = {"N": str(int(self._clock()) + ttl)}
        self._ddb.put_item(TableName=self.table_name, Item=item)

    def get_marker(self, key: str) -> str | None:
        response = self._ddb.get_item(
            TableName=self.table_name, Key={"pk": {"S": MARKER_PK}, "sk": {"S": key}}, ConsistentRead=True
        )
        item = response.get("Item")
        if not item or ("expires_at" in item and float(item["expires_at"]["N"]) <= self._clock()):
            return None
        return str(item["value"]["S"])

    # -- the instance catalog's snapshot -----------------------------------------------------
    def put_catalog_snapshot(self, region: str, data: bytes, fetched_at: float) -> None:
        """Keep ``data`` (``cloud.catalog.encode_snapshot``) as the region's catalog snapshot, fetched
        from EC2 at ``fetched_at`` (epoch seconds); ValueError when it would not fit in an item."""
        if len(data) > CATALOG_SNAPSHOT_MAX_BYTES:
            raise ValueError(f"catalog snapshot of {len(data)} bytes is over {CATALOG_SNAPSHOT_MAX_BYTES}")
        self._ddb.put_item(
            TableName=self.table_name,
            Item={
                "pk": {"S": CATALOG_PK},
                "sk": {"S": region},
                "data": {"B": data},
                "fetched_at": {"N": repr(float(fetched_at))},
            },
        )

    def catalog_snapshot(self, region: str) -> tuple[bytes, float] | None:
        """The region's catalog snapshot and when it was fetched from EC2, if one was kept."""
        item = self._ddb.get_item(
            TableName=self.table_name, Key={"pk": {"S": CATALOG_PK}, "sk": {"S": region}}
        ).get("Item")
        if not item:
            return None
        return bytes(item["data"]["B"]), float(item["fetched_at"]["N"])

    def _query(self, pk: str) -> Iterable[dict[str, Any]]:
        paginator = self._ddb.get_paginator("query")
        for page in paginator.paginate(
            TableName=self.table_name,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            ConsistentRead=True,
        ):
            yield from page.get("Items", [])


def create_state_table(dynamodb: Any, table_name: str) -> None:
    """Create the state table with its fixed schema and TTL (the sandbox and tests; in AWS the stack does)."""
    dynamodb.create_table(
        TableName=table_name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


def state_store(settings: Settings) -> StateStore:
    """The DynamoDB store when ``STATE_TABLE`` is set, else an in-memory one (offline CLI)."""
    return DynamoDBStateStore(settings) if settings.state_table else InMemoryStateStore()


def idempotency_persistence(settings: Settings, *, static_pk_value: str | None = None) -> Any:
    """Powertools Idempotency on the same state table (``pk``/``sk``/``expires_at``); a
    ``static_pk_value`` shares one key space between functions (else it is per function name)."""
    # Only the interruption functions use idempotency: keep its import off everyone's cold start.
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    if not settings.state_table:
        raise ValueError("STATE_TABLE is not set; idempotency needs the state table")
    return DynamoDBPersistenceLayer(
        table_name=settings.state_table,
        key_attr="pk",
        sort_key_attr="sk",
        expiry_attr="expires_at",
        static_pk_value=static_pk_value,
        boto3_client=client("dynamodb", settings),
    )
