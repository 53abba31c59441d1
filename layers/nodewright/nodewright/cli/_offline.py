"""The instance catalog without an AWS account: moto's saved copy of EC2's answers, read by the
production catalog code.

moto ships the DescribeInstanceTypes items and the per-zone DescribeInstanceTypeOfferings rows of
every region as data files. ``offline_catalog`` reads them (a fraction of a second, where asking
moto's emulated EC2 takes half a minute on a busy 2-core machine) and hands them to
``nodewright.cloud.catalog.Catalog``, so `nodewright plan` and the scheduling benchmark see exactly
the instance types, offerings, prices and allocatable a provisioning pass would. moto is a
development-side package (``.[dev]``); it is located, never imported.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any


class NoOfflineCatalog(LookupError):
    """moto's data files are missing, or hold no catalog for the region; the message says what to do."""


def _resources() -> Path:
    spec = importlib.util.find_spec("moto")
    if spec is None or spec.origin is None:
        raise NoOfflineCatalog(
            "the offline instance catalog is moto's data files: pip install -e '.[dev]' (make does it)"
        )
    return Path(spec.origin).parent / "ec2" / "resources"


def _read(path: Path) -> Any:
    return json.loads(gzip.decompress(path.read_bytes()))


@functools.cache
def catalog_data(region: str) -> Any:
    """``CatalogData`` for the region from moto's files (cached per process)."""
    from nodewright.cloud.catalog import catalog_data as build

    resources = _resources()
    offerings_file = resources / "instance_type_offerings" / "availability-zone" / f"{region}.json.gz"
    if not offerings_file.is_file():
        raise NoOfflineCatalog(
            f"no offline instance catalog for region {region!r}; use a region such as us-west-2"
        )
    offerings = _read(offerings_file)
    offered = {row["InstanceType"] for row in offerings}
    types = [info for name, info in _read(resources / "instance_types.json.gz").items() if name in offered]
    return build(types, offerings)


def offline_catalog(region: str, prices: Any) -> Any:
    """A production ``Catalog`` over the region's offline data, priced by ``prices`` (a ``PriceTable``);
    types the table lacks are ranked by the production estimate."""
    from nodewright.cloud.catalog import Catalog
    from nodewright.cloud.state import InMemoryStateStore

    data = catalog_data(region)
    store = InMemoryStateStore()
    store.put_price_table(prices)
    return Catalog(None, store, (region, f"offline:{id(prices)}"), loader=lambda _ec2: data)
