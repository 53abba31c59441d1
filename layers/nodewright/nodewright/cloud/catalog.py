"""The instance catalog: what EC2 offers in the region, priced and marked available or not.

DescribeInstanceTypes (~1,400 items, several pages) and DescribeInstanceTypeOfferings
(location type availability-zone) are fetched once per warm container and kept 5 minutes,
so an invocation never pages through them twice. Paging and parsing them costs a cold container
2 to 5 CPU seconds (botocore's XML parsing of some 4 MB), which in an AZ-wide reclaim comes before
every cold container's replacement can plan; so the container that paged EC2 keeps what it got as
a snapshot in the state table (gzipped JSON, about 100 KB: one GetItem and 40 ms to read back), and
a container without a catalog uses a snapshot younger than ``CATALOG_SNAPSHOT_MAX_AGE_SECONDS``
instead of paging. The provisioner, every minute, thus pages EC2 about every 10 minutes and the
catalog a plan sees is at most 15 minutes old (it was 5): instance types and the zones that offer
them change in weeks, and what changes by the minute (offerings EC2 refused) is read apart, below.
A snapshot that cannot be read or written costs only the paging it would have saved.

Prices come from the state store's price table (kept a minute), unavailable offerings from the
state store on every call (they are the one part that changes between plans). The scheduling core
turns each item into its instance-type model (``instance_type_from_ec2``): the cloud fetches, the
scheduler interprets.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from nodewright.cloud.cache import TTLCache
from nodewright.cloud.pricetable import (
    PriceTable,
    estimate_on_demand_price,
    estimate_spot_price,
    windows_license_per_hour,
)
from nodewright.observability import logger, metrics

if TYPE_CHECKING:
    from nodewright.state.interfaces import StateStore

CATALOG_TTL_SECONDS = 300.0
# A container without a catalog uses the state table's snapshot while it is younger than this.
CATALOG_SNAPSHOT_MAX_AGE_SECONDS = 2 * CATALOG_TTL_SECONDS
CATALOG_SNAPSHOT_VERSION = 1
PRICE_TABLE_TTL_SECONDS = 60.0
SPOT = "spot"
ON_DEMAND = "on-demand"


RESERVED = "reserved"


@dataclass(frozen=True)
class RawOffering:
    """One (zone, capacity type) of a type before it becomes the scheduler's ``Offering``; a
    ``reserved`` one is one capacity reservation (its id, type, interruptible, free slots)."""

    zone: str
    capacity_type: str
    price: float
    available: bool
    estimated: bool = False
    reservation_id: str = ""
    reservation_type: str = ""
    interruptible: bool = False
    reservation_capacity: int = 0

    @property
    def unavailable_key(self) -> tuple[str, str]:
        """(zone, capacity type) as the unavailable-offerings store keys it: a reserved offering by its
        reservation (``reserved:<id>``), so an exhausted reservation never hides another one."""
        return self.zone, reserved_key(self.reservation_id) if self.reservation_id else self.capacity_type


def reserved_key(reservation_id: str) -> str:
    """The capacity-type slot of the unavailable-offerings store for one reservation."""
    return f"{RESERVED}:{reservation_id}"


@dataclass(frozen=True)
class CatalogData:
    types: Mapping[str, Mapping[str, Any]]  # name → DescribeInstanceTypes item
    zones: Mapping[str, frozenset[str]]  # name → zones that offer it
    fetched_at: float


# Per warm container, keyed by (region, endpoint): every CloudProvider in the container shares it.
_CATALOGS: TTLCache[CatalogData] = TTLCache(CATALOG_TTL_SECONDS)
_PRICES: TTLCache[PriceTable] = TTLCache(PRICE_TABLE_TTL_SECONDS)
_ESTIMATE_WARNED: set[str] = set()
_warn_lock = threading.Lock()


def catalog_data(types: Iterable[Mapping[str, Any]], offerings: Iterable[Mapping[str, Any]]) -> CatalogData:
    """DescribeInstanceTypes items and DescribeInstanceTypeOfferings (availability-zone) rows as one
    catalog: the one way the API's answers, or a saved copy of them, become ``CatalogData``."""
    zones: dict[str, set[str]] = {}
    for offering in offerings:
        zones.setdefault(offering["InstanceType"], set()).add(offering["Location"])
    return CatalogData(
        types={item["InstanceType"]: item for item in types},
        zones={k: frozenset(v) for k, v in zones.items()},
        fetched_at=time.time(),
    )


def fetch_catalog(ec2: Any) -> CatalogData:
    """Page through DescribeInstanceTypes and DescribeInstanceTypeOfferings once."""
    types = [
        item
        for page in ec2.get_paginator("describe_instance_types").paginate()
        for item in page.get("InstanceTypes", [])
    ]
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType="availability-zone")
    offerings = [offering for page in pages for offering in page.get("InstanceTypeOfferings", [])]
    return catalog_data(types, offerings)


def encode_snapshot(data: CatalogData) -> bytes:
    """``data`` as the state table keeps it: gzipped JSON of the items and each type's zones."""
    document = {
        "version": CATALOG_SNAPSHOT_VERSION,
        "types": list(data.types.values()),
        "zones": {name: sorted(zones) for name, zones in sorted(data.zones.items())},
    }
    return gzip.compress(json.dumps(document, separators=(",", ":")).encode(), mtime=0)


def decode_snapshot(blob: bytes, fetched_at: float) -> CatalogData:
    """What ``encode_snapshot`` kept, fetched from EC2 at ``fetched_at``; ValueError if it is not one
    (corrupt, or written by another version of the layer)."""
    try:
        document = json.loads(gzip.decompress(blob))
    except (OSError, EOFError, ValueError) as exc:  # gzip's BadGzipFile is an OSError
        raise ValueError(f"not a catalog snapshot: {exc}") from exc
    if not isinstance(document, dict) or document.get("version") != CATALOG_SNAPSHOT_VERSION:
        raise ValueError("catalog snapshot of another version")
    types, zones = document.get("types"), document.get("zones")
    if not isinstance(types, list) or not isinstance(zones, dict):
        raise ValueError("catalog snapshot without its types and zones")
    return CatalogData(
        types={item["InstanceType"]: item for item in types},
        zones={name: frozenset(found) for name, found in zones.items()},
        fetched_at=fetched_at,
    )


def prime_catalog(key: tuple[str, str | None], data: CatalogData) -> None:
    """Install catalog data for (region, endpoint) — tests and the sandbox load moto's list once."""
    _CATALOGS.put(key, data)


def clear_caches() -> None:
    _CATALOGS.clear()
    _PRICES.clear()
    with _warn_lock:
        _ESTIMATE_WARNED.clear()


def _warn_estimated(instance_types: Iterable[str]) -> None:
    """Log and count types ranked by an estimate: once per type per container, one line per batch.

    A region whose price table is missing (first deployment, Pricing API down) would otherwise
    log a line per type per plan.
    """
    with _warn_lock:
        fresh = sorted(set(instance_types) - _ESTIMATE_WARNED)
        _ESTIMATE_WARNED.update(fresh)
    if not fresh:
        return
    logger().warning(
        "no on-demand price for some instance types; ranking them by an estimate from vCPU/memory/GPUs",
        count=len(fresh),
        instance_types=fresh[:20],
    )
    metrics().add_metric(name="PriceEstimated", unit=MetricUnit.Count, value=len(fresh))


class Catalog:
    """Instance types with offerings for one region, from the caches above."""

    def __init__(
        self,
        ec2: Any,
        store: StateStore,
        cache_key: tuple[str, str | None],
        loader: Callable[[Any], CatalogData] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._ec2 = ec2
        self._store = store
        self._key = cache_key
        self._loader = loader  # None: EC2, through the state table's snapshot
        self._clock = clock

    def data(self) -> CatalogData:
        if self._loader is not None:
            loader = self._loader
            return _CATALOGS.get_or_load(self._key, lambda: loader(self._ec2))
        return _CATALOGS.get_or_load(self._key, self._from_snapshot_or_ec2)

    def _from_snapshot_or_ec2(self) -> CatalogData:
        """The state table's snapshot while it is young enough, else EC2's pages (then kept as the
        snapshot). See the module docstring."""
        region = self._key[0]
        try:
            found = self._store.catalog_snapshot(region)
            if found is not None:
                blob, fetched_at = found
                age = self._clock() - fetched_at
                if 0.0 <= age < CATALOG_SNAPSHOT_MAX_AGE_SECONDS:
                    return decode_snapshot(blob, fetched_at)
        except Exception as exc:  # the snapshot only saves work: EC2 still answers
            logger().warning("catalog snapshot unreadable; paging EC2", error=f"{type(exc).__name__}: {exc}")
        data = dataclasses.replace(fetch_catalog(self._ec2), fetched_at=self._clock())
        try:
            self._store.put_catalog_snapshot(region, encode_snapshot(data), data.fetched_at)
        except Exception as exc:  # the next cold container pages EC2 too, no worse than before
            logger().warning("catalog snapshot not kept", error=f"{type(exc).__name__}: {exc}")
        return data

    def info(self, instance_type: str) -> Mapping[str, Any] | None:
        return self.data().types.get(instance_type)

    def prices(self) -> PriceTable:
        return _PRICES.get_or_load(self._key, self._store.price_table)

    def on_demand_price(self, instance_type: str) -> tuple[float, bool]:
        """(price, estimated?): the real price, or the documented estimate (warned once per type)."""
        price = self.prices().on_demand_price(instance_type)
        if price is not None:
            return price, False
        _warn_estimated([instance_type])
        return estimate_on_demand_price(self.info(instance_type) or {}), True

    def offerings(
        self,
        instance_type: str,
        zones: Iterable[str] | None = None,
        unavailable: set[tuple[str, str, str]] | None = None,
    ) -> list[RawOffering]:
        """Every (zone, capacity type) the type is sold in, restricted to ``zones``, priced."""
        data = self.data()
        info = data.types.get(instance_type)
        if info is None:
            return []
        allowed = set(zones) if zones is not None else None
        usage = set(info.get("SupportedUsageClasses") or [ON_DEMAND])
        unavailable = unavailable if unavailable is not None else set()
        od_price, od_estimated = self.on_demand_price(instance_type)
        table = self.prices()
        found: list[RawOffering] = []
        for zone in sorted(data.zones.get(instance_type, ())):
            if allowed is not None and zone not in allowed:
                continue
            if SPOT in usage:
                spot = table.spot_price(instance_type, zone)
                found.append(
                    RawOffering(
                        zone=zone,
                        capacity_type=SPOT,
                        price=spot if spot is not None else estimate_spot_price(od_price),
                        available=(instance_type, zone, SPOT) not in unavailable,
                        estimated=spot is None,
                    )
                )
            if ON_DEMAND in usage:
                found.append(
                    RawOffering(
                        zone=zone,
                        capacity_type=ON_DEMAND,
                        price=od_price,
                        available=(instance_type, zone, ON_DEMAND) not in unavailable,
                        estimated=od_estimated,
                    )
                )
        return found

    def reserved_offerings(
        self,
        instance_type: str,
        reservations: Iterable[Any],
        zones: Iterable[str] | None = None,
        unavailable: set[tuple[str, str, str]] | None = None,
        now: datetime | None = None,
    ) -> list[RawOffering]:
        """One ``reserved`` offering per capacity reservation of the type (``cloud.reservations``), in
        the ``zones`` given, priced as Karpenter prices them (``reserved_price``); available while it
        has a free slot, is not expiring and was not found exhausted by a launch (marked unavailable)."""
        from nodewright.cloud.reservations import EXPIRING, reserved_price

        allowed = set(zones) if zones is not None else None
        unavailable = unavailable if unavailable is not None else set()
        now = now or datetime.now(UTC)
        found: list[RawOffering] = []
        for reservation in reservations:
            if reservation.instance_type != instance_type:
                continue
            if allowed is not None and reservation.zone not in allowed:
                continue
            od_price, _ = self.on_demand_price(instance_type)
            found.append(
                RawOffering(
                    zone=reservation.zone,
                    capacity_type=RESERVED,
                    price=reserved_price(od_price),
                    available=reservation.available > 0
                    and reservation.state(now) != EXPIRING
                    and (instance_type, reservation.zone, reserved_key(reservation.id)) not in unavailable,
                    reservation_id=reservation.id,
                    reservation_type=reservation.reservation_type,
                    interruptible=reservation.interruptible,
                    reservation_capacity=max(0, reservation.available),
                )
            )
        return found

    def instance_types(
        self,
        zones: Iterable[str] | None = None,
        kubelet: Any = None,
        zone_ids: Mapping[str, str] | None = None,
        reservations: Iterable[Any] = (),
        shape: Any = None,
        *,
        unavailable: Iterable[tuple[str, str, str]] | None = None,
    ) -> list[Any]:
        """The scheduler's InstanceType for every type offered in ``zones`` that Karpenter's AWS provider
        offers (HVM, x86_64 or arm64: no mac types). ``zone_ids`` (zone → zone ID, as the subnets
        say it) labels each offering with ``topology.k8s.aws/zone-id``.

        ``kubelet`` is the NodeClass's v1 ``kubelet`` dict (or the scheduler's KubeletSettings);
        it changes allocatable (maxPods, podsPerCore, reserved, evictionHard). ``reservations``
        (``cloud.reservations.CapacityReservation``) add a reserved offering each to their type.
        ``shape`` (``node_shape(nodeclass)``) is the node the EC2NodeClass makes: its OS and
        ephemeral storage; a Windows shape offers only the types a Windows AMI runs on, priced with
        its licence. ``unavailable``: the offerings marked unavailable, when the caller has read them
        already (else the state store is asked).
        """
        # Imported here: the catalog is also used by the CLI, whose --help must stay fast.
        from nodewright.scheduling.instancetypes import (
            KubeletSettings,
            Offering,
            instance_type_from_ec2,
            unsupported_reason,
        )

        if isinstance(kubelet, Mapping):
            kubelet = KubeletSettings(
                max_pods=kubelet.get("maxPods"),
                pods_per_core=kubelet.get("podsPerCore"),
                system_reserved={k: str(v) for k, v in (kubelet.get("systemReserved") or {}).items()},
                kube_reserved={k: str(v) for k, v in (kubelet.get("kubeReserved") or {}).items()},
                eviction_hard={k: str(v) for k, v in (kubelet.get("evictionHard") or {}).items()},
            )
        zone_list = list(zones) if zones is not None else None
        reserved_list = list(reservations)
        marked = set(unavailable) if unavailable is not None else self._store.unavailable_offerings()
        prices = self.prices()
        _warn_estimated(name for name in self.data().types if prices.on_demand_price(name) is None)
        result = []
        for name, info in sorted(self.data().types.items()):
            if unsupported_reason(info) is not None:  # as the AWS provider's DescribeInstanceTypes filters
                continue
            if shape is not None and shape.excludes(info):
                continue
            raw = self.offerings(name, zone_list, marked)
            if reserved_list:
                raw += self.reserved_offerings(name, reserved_list, zone_list, marked)
            if not raw:
                continue
            if shape is not None and shape.windows:
                raw = windows_offerings(info, raw)
            offerings = [
                Offering(
                    o.zone,
                    o.capacity_type,
                    o.price,
                    o.available,
                    (zone_ids or {}).get(o.zone, ""),
                    reservation_id=o.reservation_id,
                    reservation_type=o.reservation_type,
                    interruptible=o.interruptible,
                    reservation_capacity=o.reservation_capacity,
                )
                for o in raw
            ]
            try:
                result.append(instance_type_from_ec2(info, offerings, kubelet=kubelet, shape=shape))
            except (KeyError, TypeError, ValueError) as exc:  # one odd item never hides the others
                logger().warning("skipping a malformed instance type", instance_type=name, error=str(exc))
        return result


# --- the node an EC2NodeClass makes: its OS and its storage ---------------------------------------


def node_shape(nodeclass: Mapping[str, Any]) -> Any:
    """The scheduler's ``NodeShape`` of every node of this EC2NodeClass: its AMI family's OS (and
    Windows build), and its ephemeral storage as Karpenter v1.14's ``ephemeralStorage`` finds it — the
    size of the ``rootVolume`` mapping; else, when mappings are given, a Custom family's last one, or
    the one on the family's ephemeral device (``EPHEMERAL_BLOCK_DEVICE``); else that device's default
    size (20 GiB; Windows 50 GiB); ``instanceStorePolicy: RAID0`` makes the instance store count
    instead on the types that have one."""
    from nodewright.api import labels
    from nodewright.cloud.launchtemplates import EPHEMERAL_BLOCK_DEVICE, default_block_devices
    from nodewright.cloud.nodeclass import NodeClass
    from nodewright.scheduling.instancetypes import DEFAULT_EPHEMERAL_STORAGE, OS_WINDOWS, NodeShape
    from nodewright.scheduling.resources import EPHEMERAL_STORAGE, parse_resource

    nc = NodeClass(nodeclass)
    family = nc.ami_family
    mappings = nc.block_device_mappings
    device = EPHEMERAL_BLOCK_DEVICE.get(family)

    def size(mapping: Mapping[str, Any] | None) -> int | None:
        value = ((mapping or {}).get("ebs") or {}).get("volumeSize")
        if value is None:
            return None
        return parse_resource(EPHEMERAL_STORAGE, value if isinstance(value, str) else f"{value}Gi")

    found: int | None = None
    if mappings:
        found = size(next((m for m in mappings if m.get("rootVolume")), None))
        if found is None and family == "Custom":
            found = size(mappings[-1])
        elif found is None:
            found = size(next((m for m in mappings if m.get("deviceName") == device), None))
    if found is None:
        found = size(next((m for m in default_block_devices(family) if m["deviceName"] == device), None))
    windows_build = labels.WINDOWS_BUILDS.get(family, "")
    return NodeShape(
        os=OS_WINDOWS if windows_build else NodeShape().os,
        windows_build=windows_build,
        root_storage=found if found is not None else DEFAULT_EPHEMERAL_STORAGE,
        instance_store_raid0=nc.instance_store_policy == "RAID0",
    )


def windows_offerings(info: Mapping[str, Any], offerings: Iterable[RawOffering]) -> list[RawOffering]:
    """The offerings of a type run as Windows Server: the Linux price the price table holds plus the
    licence (``windows_license_per_hour``), always marked estimated — Nodewright fetches no Windows
    price list (Karpenter ranks Windows types by their Linux prices)."""
    licence = windows_license_per_hour(info)
    return [
        o  # a reservation's price is the Linux on-demand price / 10^7 as Karpenter's, not a market's
        if o.reservation_id
        else RawOffering(o.zone, o.capacity_type, round(o.price + licence, 6), o.available, estimated=True)
        for o in offerings
    ]
