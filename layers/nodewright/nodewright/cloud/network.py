"""Subnets and security groups by EC2NodeClass selector terms.

A term is ``{"id": ...}``, ``{"tags": {...}}`` (value ``"*"`` = any value) or, for security
groups, ``{"name": ...}``; fields of one term are ANDed, terms are ORed (Karpenter's rule).
One subnet per zone is chosen for a launch: the one with the most free IPs, minus the IPs
that launches from this container have taken since the subnets were last described. A launch
reserves an IP in each subnet it may use when it chooses them (``reserve_subnets``, under the lock)
and gives back the ones it did not use (``release_ips``), as Karpenter's subnet provider counts
in-flight IPs: the concurrent launches of one pass see each other's, not all the same free count.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud.cache import TTLCache
from nodewright.cloud.errors import NoSubnetError, PlacementGroupError, SelectorNoMatchError

SELECTOR_CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class PlacementGroup:
    """A placement group as DescribePlacementGroups shows it."""

    id: str
    name: str
    strategy: str
    state: str
    partition_count: int | None = None


@dataclass(frozen=True)
class Subnet:
    id: str
    zone: str
    zone_id: str
    available_ips: int
    vpc_id: str


def term_filters(
    term: Mapping[str, Any], id_filter: str, name_filter: str | None = None
) -> list[dict[str, Any]]:
    """EC2 Describe* filters for one selector term (fields ANDed)."""
    filters: list[dict[str, Any]] = []
    if term.get("id"):
        filters.append({"Name": id_filter, "Values": [str(term["id"])]})
    if term.get("name") and name_filter:
        filters.append({"Name": name_filter, "Values": [str(term["name"])]})
    for key, value in (term.get("tags") or {}).items():
        if value in ("*", "", None):
            filters.append({"Name": "tag-key", "Values": [str(key)]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [str(value)]})
    return filters


def _freeze(terms: Iterable[Mapping[str, Any]]) -> str:
    return json.dumps(list(terms), sort_keys=True, default=str)


class NetworkResolver:
    """Resolves subnets and security groups; caches them per warm container for a minute."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2
        self._subnets: TTLCache[list[Subnet]] = TTLCache(SELECTOR_CACHE_SECONDS)
        self._groups: TTLCache[list[tuple[str, str]]] = TTLCache(SELECTOR_CACHE_SECONDS)
        self._placement_groups: TTLCache[PlacementGroup] = TTLCache(SELECTOR_CACHE_SECONDS)
        self._inflight: dict[str, int] = {}
        self._lock = threading.Lock()

    def subnets(self, nodeclass_name: str, terms: list[dict[str, Any]]) -> list[Subnet]:
        """Every subnet matching the terms; raises NoSubnetError naming the selector when none does."""
        if not terms:
            raise NoSubnetError(nodeclass_name, terms)
        cached = self._subnets.get_or_load(_freeze(terms), lambda: self._describe_subnets(terms))
        if not cached:
            raise NoSubnetError(nodeclass_name, terms)
        return cached

    def _describe_subnets(self, terms: list[dict[str, Any]]) -> list[Subnet]:
        found: dict[str, Subnet] = {}
        for term in terms:
            filters = term_filters(term, "subnet-id")
            if not filters:
                continue
            for page in self._ec2.get_paginator("describe_subnets").paginate(Filters=filters):
                for raw in page.get("Subnets", []):
                    found[raw["SubnetId"]] = Subnet(
                        id=raw["SubnetId"],
                        zone=raw["AvailabilityZone"],
                        zone_id=raw.get("AvailabilityZoneId", ""),
                        available_ips=int(raw.get("AvailableIpAddressCount", 0)),
                        vpc_id=raw.get("VpcId", ""),
                    )
        described = sorted(found.values(), key=lambda s: s.id)
        with self._lock:  # a fresh description already counts the IPs launches took
            for subnet in described:
                self._inflight.pop(subnet.id, None)
        return described

    def zonal_subnets(
        self, nodeclass_name: str, terms: list[dict[str, Any]], zones: Iterable[str] | None = None
    ) -> dict[str, Subnet]:
        """One subnet per zone (most free IPs after in-flight launches), restricted to ``zones``."""
        in_zones = self._in_zones(nodeclass_name, terms, zones)
        with self._lock:
            return self._choose(nodeclass_name, terms, zones, in_zones)

    def reserve_subnets(
        self, nodeclass_name: str, terms: list[dict[str, Any]], zones: Iterable[str] | None = None
    ) -> dict[str, Subnet]:
        """``zonal_subnets`` for a launch: an IP of each subnet chosen is counted in flight at once,
        in the same lock as the choice; ``release_ips`` gives back those the launch did not use."""
        in_zones = self._in_zones(nodeclass_name, terms, zones)
        with self._lock:
            chosen = self._choose(nodeclass_name, terms, zones, in_zones)
            for subnet in chosen.values():
                self._inflight[subnet.id] = self._inflight.get(subnet.id, 0) + 1
            return chosen

    def _in_zones(
        self, nodeclass_name: str, terms: list[dict[str, Any]], zones: Iterable[str] | None
    ) -> list[Subnet]:
        allowed = set(zones) if zones is not None else None
        return [s for s in self.subnets(nodeclass_name, terms) if allowed is None or s.zone in allowed]

    def _choose(
        self,
        nodeclass_name: str,
        terms: list[dict[str, Any]],
        zones: Iterable[str] | None,
        in_zones: list[Subnet],
    ) -> dict[str, Subnet]:
        """The subnet with the most free IPs per zone; the caller holds the lock."""
        best: dict[str, tuple[int, Subnet]] = {}
        for subnet in in_zones:
            free = subnet.available_ips - self._inflight.get(subnet.id, 0)
            if free > 0 and (subnet.zone not in best or free > best[subnet.zone][0]):
                best[subnet.zone] = (free, subnet)
        if not best:
            full = f"every matching subnet is out of free IPs: {[s.id for s in in_zones]}" if in_zones else ""
            raise NoSubnetError(nodeclass_name, terms, set(zones) if zones is not None else None, detail=full)
        return {zone: subnet for zone, (_, subnet) in best.items()}

    def take_ips(self, subnet_id: str, count: int = 1) -> None:
        """Record IPs used by a launch until the next DescribeSubnets reflects them."""
        with self._lock:
            self._inflight[subnet_id] = self._inflight.get(subnet_id, 0) + count

    def release_ips(self, subnet_ids: Iterable[str]) -> None:
        """Give back one reserved IP of each subnet (``reserve_subnets``) a launch did not use."""
        with self._lock:
            for subnet_id in subnet_ids:
                if self._inflight.get(subnet_id, 0) > 0:
                    self._inflight[subnet_id] -= 1

    def security_groups(self, nodeclass_name: str, terms: list[dict[str, Any]]) -> list[str]:
        """Ids of every security group matching the terms; raises naming the selector when none does."""
        return [group_id for group_id, _ in self.security_group_names(nodeclass_name, terms)]

    def security_group_names(self, nodeclass_name: str, terms: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """(id, name) of every security group matching the terms; raises as ``security_groups``."""
        cached = self._groups.get_or_load(_freeze(terms), lambda: self._describe_groups(terms))
        if not cached:
            raise SelectorNoMatchError("securityGroup", nodeclass_name, terms)
        return cached

    def _describe_groups(self, terms: list[dict[str, Any]]) -> list[tuple[str, str]]:
        found: dict[str, str] = {}
        for term in terms:
            filters = term_filters(term, "group-id", "group-name")
            if not filters:
                continue
            for page in self._ec2.get_paginator("describe_security_groups").paginate(Filters=filters):
                found.update((g["GroupId"], g.get("GroupName", "")) for g in page.get("SecurityGroups", []))
        return sorted(found.items())

    def placement_group(self, nodeclass_name: str, selector: Mapping[str, str]) -> PlacementGroup:
        """The placement group ``placementGroupSelector`` names (``name`` or ``id``), if available.

        Raises ``PlacementGroupError`` (naming the selector) when EC2 knows none or it is not in the
        ``available`` state: a launch into it would fail, so the EC2NodeClass is not ready.
        """
        key = _freeze([selector])
        cached = self._placement_groups.get(key)
        if cached is not None:
            return cached
        kwargs = {"GroupIds": [selector["id"]]} if selector.get("id") else {"GroupNames": [selector["name"]]}
        try:
            found = self._ec2.describe_placement_groups(**kwargs).get("PlacementGroups", [])
        except ClientError as exc:
            if exc.response["Error"]["Code"] in (
                "InvalidPlacementGroup.Unknown",
                "InvalidPlacementGroupId.Malformed",
            ):
                raise PlacementGroupError(nodeclass_name, dict(selector), "not found") from exc
            raise
        if not found:
            raise PlacementGroupError(nodeclass_name, dict(selector), "not found")
        raw = found[0]
        group = PlacementGroup(
            id=raw.get("GroupId", ""),
            name=raw.get("GroupName", ""),
            strategy=raw.get("Strategy", ""),
            state=raw.get("State", ""),
            partition_count=raw.get("PartitionCount"),
        )
        if group.state != "available":
            raise PlacementGroupError(
                nodeclass_name, dict(selector), f"it is {group.state or 'unknown'}, not available"
            )
        return self._placement_groups.put(key, group)
