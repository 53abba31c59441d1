"""Prices: on-demand from the AWS Pricing API, spot from DescribeSpotPriceHistory.

``refresh(settings)`` runs every 12 hours (the ``pricing`` function) and writes the
table into the state store; every other function reads it from there. A source that
fails keeps the previous prices for that half of the table: refresh logs, counts and
carries on, it never leaves the table empty because one API was unreachable.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from nodewright.cloud.aws import PRICING_API_REGION, client
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.state import state_store
from nodewright.observability import logger, metrics
from nodewright.settings import Settings

if TYPE_CHECKING:
    from nodewright.state.interfaces import StateStore

__all__ = ["PriceTable", "fetch_on_demand_prices", "fetch_spot_prices", "on_demand_filters", "refresh"]


def on_demand_filters(region: str) -> list[dict[str, str]]:
    """GetProducts filters for Linux, shared-tenancy, no-software, used-capacity on-demand EC2 prices."""
    terms = {
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
    }
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in terms.items()]


def parse_price_list_item(document: str | Mapping[str, Any]) -> tuple[str, float] | None:
    """(instance type, USD/hour) from one GetProducts PriceList JSON document; None if it has no price.

    A product has one OnDemand term with one hourly price dimension; a $0 dimension (e.g.
    a reservation placeholder) is not a price.
    """
    product = json.loads(document) if isinstance(document, str) else document
    attributes = (product.get("product") or {}).get("attributes") or {}
    instance_type = attributes.get("instanceType")
    if not instance_type:
        return None
    for term in ((product.get("terms") or {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            if dimension.get("unit") not in ("Hrs", "Hours", None):
                continue
            usd: Any = (dimension.get("pricePerUnit") or {}).get("USD")
            try:
                price = float(usd)
            except (TypeError, ValueError):
                continue
            if price > 0:
                return instance_type, price
    return None


def fetch_on_demand_prices(pricing: Any, region: str) -> dict[str, float]:
    """On-demand Linux prices of every instance type in ``region`` from the Pricing API."""
    prices: dict[str, float] = {}
    paginator = pricing.get_paginator("get_products")
    pages = paginator.paginate(
        ServiceCode="AmazonEC2", Filters=on_demand_filters(region), FormatVersion="aws_v1"
    )
    for page in pages:
        for document in page.get("PriceList", []):
            parsed = parse_price_list_item(document)
            if parsed:
                instance_type, price = parsed
                # Several SKUs can survive the filters (e.g. license variants); keep the lowest.
                prices[instance_type] = min(price, prices.get(instance_type, price))
    return prices


def fetch_spot_prices(ec2: Any, now: datetime | None = None) -> dict[tuple[str, str], float]:
    """The latest Linux spot price per (instance type, zone).

    With StartTime = now, DescribeSpotPriceHistory returns the price in effect now for
    each (type, zone); several records can still come back, so the newest wins.
    """
    start = now or datetime.now(UTC)
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    paginator = ec2.get_paginator("describe_spot_price_history")
    for page in paginator.paginate(StartTime=start, ProductDescriptions=["Linux/UNIX"]):
        for record in page.get("SpotPriceHistory", []):
            key = (record["InstanceType"], record["AvailabilityZone"])
            stamp = record.get("Timestamp") or start
            try:
                price = float(record["SpotPrice"])
            except (KeyError, TypeError, ValueError):
                continue
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, price)
    return {key: price for key, (_, price) in latest.items()}


def _count(metric: str, value: float = 1) -> None:
    metrics().add_metric(name=metric, unit=MetricUnit.Count, value=value)


def refresh(
    settings: Settings, store: StateStore | None = None, pricing: Any = None, ec2: Any = None
) -> PriceTable:
    """Fetch both halves of the price table and write it into the state store.

    A half whose API fails keeps the previous values from the store (warning + metric
    ``PriceRefreshErrors``); the function never raises because of one source.
    """
    log = logger()
    store = store if store is not None else state_store(settings)
    previous = store.price_table()
    pricing = pricing or client("pricing", settings, region=PRICING_API_REGION)
    ec2 = ec2 or client("ec2", settings)

    on_demand: Mapping[str, float] = previous.on_demand
    spot: Mapping[tuple[str, str], float] = previous.spot
    sources: list[str] = []
    try:
        fetched = fetch_on_demand_prices(pricing, settings.region)
        if fetched:
            on_demand = fetched
            sources.append("pricing-api")
        else:
            log.warning("Pricing API returned no prices; keeping the previous ones", region=settings.region)
            _count("PriceRefreshErrors")
    except (ClientError, BotoCoreError) as exc:
        log.warning("Pricing API unreachable; keeping the previous on-demand prices", error=str(exc))
        _count("PriceRefreshErrors")
    try:
        spot = fetch_spot_prices(ec2) or spot
        sources.append("spot-price-history")
    except (ClientError, BotoCoreError) as exc:
        log.warning("DescribeSpotPriceHistory failed; keeping the previous spot prices", error=str(exc))
        _count("PriceRefreshErrors")

    table = PriceTable(
        on_demand=on_demand, spot=spot, updated_at=time.time(), source="+".join(sources) or previous.source
    )
    store.put_price_table(table)
    log.info("price table refreshed", on_demand=len(on_demand), spot=len(spot), source=table.source)
    _count("OnDemandPrices", len(on_demand))
    _count("SpotPrices", len(spot))
    return table
