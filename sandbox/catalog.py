"""moto's bundled copy of the real EC2 catalog, handed to the production catalog code.

moto ships the DescribeInstanceTypes items and each region's DescribeInstanceTypeOfferings as data
files; this module is the development side's one reader of them. Everything after the read is the
production path (``nodewright.cloud.catalog.CatalogData`` → ``Catalog``): the sandbox seeds its
prices from it, and ``nodewright plan`` uses it offline through the ``nodewright.offline_catalog``
entry point (pyproject.toml) instead of asking EC2.
"""

from __future__ import annotations

import functools
import gzip
import importlib.resources
import json
import time
from typing import Any

from nodewright.cloud.catalog import CatalogData
from nodewright.cloud.pricetable import PriceTable


def _moto_json(*parts: str) -> Any:
    resource = importlib.resources.files("moto.ec2").joinpath("resources", *parts)
    with resource.open("rb") as raw, gzip.open(raw) as unzipped:
        return json.load(unzipped)


@functools.cache
def _instance_types() -> dict[str, dict[str, Any]]:
    return _moto_json("instance_types.json.gz")


@functools.cache
def bundled_catalog(region: str) -> CatalogData:
    """The types offered in ``region`` and the zones of each, as ``fetch_catalog`` would return them."""
    try:
        offerings = _moto_json("instance_type_offerings", "availability-zone", f"{region}.json.gz")
    except FileNotFoundError as exc:
        raise LookupError(f"no bundled instance catalog for region {region!r}; try us-west-2") from exc
    zones: dict[str, set[str]] = {}
    for offering in offerings:
        zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    types = _instance_types()
    return CatalogData(
        types={name: types[name] for name in zones if name in types},
        zones={name: frozenset(found) for name, found in zones.items() if name in types},
        fetched_at=time.time(),
    )


def offline_source(region: str) -> tuple[CatalogData, PriceTable]:
    """``nodewright plan``'s offline catalog: moto's bundled catalog priced as the sandbox is."""
    from sandbox.prices import price_table

    catalog = bundled_catalog(region)
    return catalog, price_table(catalog)
