"""Capacity reservations: what an EC2NodeClass's ``capacityReservationSelectorTerms`` select in EC2.

As Karpenter's AWS provider (``pkg/providers/capacityreservation``): each term becomes one
DescribeCapacityReservations query, ``state = active`` always; a term with ``id`` asks for that
reservation, a term with ``tags`` and/or ``instanceMatchCriteria`` filters by them (and by
``owner-id`` when ``ownerID`` is set; a tag value ``*`` is ``tag-key``). The answers are merged by
id, and reservations whose end date has passed are dropped. Queries are kept a minute per warm
container (the status controller, the provisioner and drift all ask within the same minute).

Both kinds Karpenter launches into are read: On-Demand Capacity Reservations (``reservationType``
``default``) and Capacity Blocks for ML (``capacity-block``). A Capacity Block is *expiring* from 40
minutes before its end (Karpenter's ``capacityReservationExpirationPeriod``): EC2 starts reclaiming
its instances 30 minutes before the end and announces it 10 minutes before that, so its nodes are
drained then (``nodewright.capacityreservation``) and no new node is launched into it.

A reserved offering is priced at its type's on-demand price divided by ten million (Karpenter's
``ReservedCapacityResolver``): nearly free, so the scheduler prefers it, while keeping the types in
their on-demand order for consolidation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api.times import format_time
from nodewright.cloud.cache import TTLCache
from nodewright.observability import logger

DEFAULT = "default"
CAPACITY_BLOCK = "capacity-block"
ACTIVE = "active"
EXPIRING = "expiring"
# A Capacity Block's nodes are drained from this long before its end (EC2 reclaims from 30 minutes).
EXPIRATION_LEAD = timedelta(minutes=40)
RESERVED_PRICE_DIVISOR = 10_000_000.0
QUERY_TTL_SECONDS = 60.0
MATCH_CRITERIA = frozenset({"open", "targeted"})
NOT_FOUND_CODES = frozenset(
    {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}
)


# An interruptible Capacity Reservation (capacity an ODCR owner lends inside the organization, taken
# back with a 2-minute notice) is launched into by a ``reserved-capacity`` instant fleet whose
# ``ReservedCapacityOptions`` name this reservation type; its instances' lifecycle is the same word.
RESERVED_CAPACITY = "reserved-capacity"
INTERRUPTIBLE_RESERVATION = "interruptible-capacity-reservation"


def reservation_kind(offering: Any) -> tuple[str, bool]:
    """What one CreateFleet can launch into together: the reservation type and whether it is
    interruptible (an ODCR, a Capacity Block and an interruptible reservation each need their own
    ``DefaultTargetCapacityType``)."""
    return str(offering.reservation_type or DEFAULT), bool(offering.interruptible)


def reserved_price(on_demand_price: float) -> float:
    """What a reserved offering of a type costs in a plan (see the module)."""
    return on_demand_price / RESERVED_PRICE_DIVISOR


@dataclass(frozen=True)
class CapacityReservation:
    """One reservation as the scheduler and the status need it."""

    id: str
    instance_type: str
    zone: str
    owner_id: str
    match_criteria: str
    reservation_type: str
    available: int
    total: int
    end_time: datetime | None = None
    interruptible: bool = False
    tenancy: str = "default"
    tags: Mapping[str, str] = field(default_factory=dict)
    ec2_state: str = ACTIVE  # EC2's State (a live query asks for active ones only)

    def state(self, now: datetime) -> str:
        """``expiring`` for a Capacity Block within ``EXPIRATION_LEAD`` of its end, else ``active``."""
        if self.reservation_type != CAPACITY_BLOCK or self.end_time is None:
            return ACTIVE
        return EXPIRING if now >= self.end_time - EXPIRATION_LEAD else ACTIVE

    def status(self, now: datetime) -> dict[str, Any]:
        """The EC2NodeClass ``status.capacityReservations`` item, as Karpenter v1.14 writes it."""
        item: dict[str, Any] = {
            "availabilityZone": self.zone,
            "id": self.id,
            "instanceMatchCriteria": self.match_criteria,
            "instanceType": self.instance_type,
            "ownerID": self.owner_id,
            "reservationType": self.reservation_type,
            "state": self.state(now),
        }
        if self.end_time is not None:
            item["endTime"] = format_time(self.end_time)
        if self.interruptible:
            item["interruptible"] = True
        return item


def from_ec2(raw: Mapping[str, Any]) -> CapacityReservation | None:
    """A DescribeCapacityReservations item, or None (logged) for one Karpenter would not use: an
    instance match criteria or reservation type it does not know (guarding against EC2 adding more)."""
    criteria = str(raw.get("InstanceMatchCriteria") or "")
    reservation_type = str(raw.get("ReservationType") or DEFAULT)
    if criteria not in MATCH_CRITERIA or reservation_type not in (DEFAULT, CAPACITY_BLOCK):
        logger().warning(
            "capacity reservation skipped: unsupported instance match criteria or reservation type",
            capacity_reservation=raw.get("CapacityReservationId"),
            instance_match_criteria=criteria,
            reservation_type=reservation_type,
        )
        return None
    end = raw.get("EndDate")
    if isinstance(end, str):
        end = datetime.fromisoformat(end.replace("Z", "+00:00"))
    return CapacityReservation(
        id=str(raw["CapacityReservationId"]),
        instance_type=str(raw.get("InstanceType") or ""),
        zone=str(raw.get("AvailabilityZone") or ""),
        owner_id=str(raw.get("OwnerId") or ""),
        match_criteria=criteria,
        reservation_type=reservation_type,
        available=int(raw.get("AvailableInstanceCount") or 0),
        total=int(raw.get("TotalInstanceCount") or 0),
        end_time=end if isinstance(end, datetime) else None,
        interruptible=bool(raw.get("Interruptible")),
        tenancy=str(raw.get("Tenancy") or "default"),
        tags={
            str(t.get("Key")): str(t.get("Value", ""))
            for t in raw.get("Tags") or []
            if isinstance(t, Mapping)
        },
        ec2_state=str(raw.get("State") or ACTIVE),
    )


def queries(terms: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One DescribeCapacityReservations request per selector term (see the module)."""
    found: list[dict[str, Any]] = []
    for term in terms:
        active = [{"Name": "state", "Values": [ACTIVE]}]
        if term.get("id"):
            found.append({"CapacityReservationIds": [str(term["id"])], "Filters": active})
            continue
        tags = term.get("tags") or {}
        criteria = term.get("instanceMatchCriteria")
        if not tags and not criteria:
            continue
        filters = list(active)
        if term.get("ownerID"):
            filters.append({"Name": "owner-id", "Values": [str(term["ownerID"])]})
        for key, value in sorted(tags.items()):
            if value == "*":
                filters.append({"Name": "tag-key", "Values": [str(key)]})
            else:
                filters.append({"Name": f"tag:{key}", "Values": [str(value)]})
        if criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [str(criteria)]})
        found.append({"Filters": filters, "MaxResults": 1000})
    return found


# Per warm container: (region, endpoint, query) → the reservations it answered, a minute.
_QUERIES: TTLCache[list[CapacityReservation]] = TTLCache(QUERY_TTL_SECONDS)


class ReservationResolver:
    """DescribeCapacityReservations for one region, cached per query (see the module)."""

    def __init__(self, ec2: Any, cache_key: tuple[str, str | None]) -> None:
        self._ec2 = ec2
        self._key = cache_key
        self._lock = threading.Lock()

    def select(
        self, terms: Sequence[Mapping[str, Any]], now: datetime | None = None
    ) -> list[CapacityReservation]:
        """The active reservations the terms select, by id, not yet ended."""
        now = now or datetime.now(UTC)
        found: dict[str, CapacityReservation] = {}
        for query in queries(terms):
            key = (*self._key, repr(sorted(query.items())))
            answered = _QUERIES.get(key)
            if answered is None:
                answered = _QUERIES.put(key, self._describe(query))
            for reservation in answered:
                found.setdefault(reservation.id, reservation)
        return sorted(
            (r for r in found.values() if r.end_time is None or r.end_time > now), key=lambda r: r.id
        )

    def by_ids(self, ids: Iterable[str]) -> dict[str, CapacityReservation]:
        """The active reservations among ``ids`` (uncached: the expiration check must see EC2 now)."""
        found: dict[str, CapacityReservation] = {}
        for reservation_id in sorted(set(ids)):
            for reservation in self._describe(
                {
                    "CapacityReservationIds": [reservation_id],
                    "Filters": [{"Name": "state", "Values": [ACTIVE]}],
                }
            ):
                found[reservation.id] = reservation
        return found

    def _describe(self, query: Mapping[str, Any]) -> list[CapacityReservation]:
        found: list[CapacityReservation] = []
        request = dict(query)
        while True:
            try:
                page = self._ec2.describe_capacity_reservations(**request)
            except ClientError as exc:
                # Asked by id: a reservation that is gone (or was never there) is simply not selected.
                if (
                    exc.response.get("Error", {}).get("Code") in NOT_FOUND_CODES
                    and "CapacityReservationIds" in request
                ):
                    return []
                raise
            found.extend(
                r for raw in page.get("CapacityReservations", []) if (r := from_ec2(raw)) is not None
            )
            token = page.get("NextToken")
            if not token:
                return found
            request["NextToken"] = token


def selected_by(
    terms: Sequence[Mapping[str, Any]], reservations: Iterable[CapacityReservation], now: datetime
) -> list[CapacityReservation]:
    """What ``queries(terms)`` would answer from these reservations, without EC2 (``nodewright plan``
    over a saved DescribeCapacityReservations answer): the active ones not yet ended that a term
    selects, by id. The same rules as the filters a live query sends."""
    chosen: dict[str, CapacityReservation] = {}
    for reservation in reservations:
        if reservation.ec2_state != ACTIVE or (reservation.end_time and reservation.end_time <= now):
            continue
        if any(_term_selects(term, reservation) for term in terms):
            chosen[reservation.id] = reservation
    return [chosen[key] for key in sorted(chosen)]


def _term_selects(term: Mapping[str, Any], reservation: CapacityReservation) -> bool:
    if term.get("id"):
        return reservation.id == str(term["id"])
    tags = term.get("tags") or {}
    criteria = term.get("instanceMatchCriteria")
    if not tags and not criteria:
        return False  # as ``queries``: such a term sends no query
    if term.get("ownerID") and reservation.owner_id != str(term["ownerID"]):
        return False
    for key, value in tags.items():
        if value == "*" and key not in reservation.tags:
            return False
        if value != "*" and reservation.tags.get(key) != str(value):
            return False
    return not criteria or reservation.match_criteria == criteria


class SavedAnswerError(ValueError):
    """A saved DescribeCapacityReservations answer that cannot be read; the message says where."""


def from_saved_answer(doc: Mapping[str, Any], source: str) -> list[CapacityReservation]:
    """The reservations of a saved DescribeCapacityReservations answer: the mapping
    ``aws ec2 describe-capacity-reservations --output json`` prints (``{"CapacityReservations": [...]}``),
    each item as EC2 gives it. An item without its id, type or zone raises ``SavedAnswerError``."""
    items = doc.get("CapacityReservations")
    if not isinstance(items, list):
        raise SavedAnswerError(f"{source}: CapacityReservations must be a list of EC2's reservation items")
    found = []
    for index, raw in enumerate(items):
        fields = ("CapacityReservationId", "InstanceType", "AvailabilityZone")
        missing = [k for k in fields if not raw.get(k)] if isinstance(raw, Mapping) else list(fields)
        if missing:
            raise SavedAnswerError(
                f"{source}: CapacityReservations[{index}] lacks {', '.join(missing) or 'its fields'}; "
                "save the answer of aws ec2 describe-capacity-reservations --output json"
            )
        reservation = from_ec2(raw)
        if reservation is not None:
            found.append(reservation)
    return found


def is_saved_answer(doc: Any) -> bool:
    """Whether a document is a saved DescribeCapacityReservations answer (not a Kubernetes object)."""
    return isinstance(doc, Mapping) and "CapacityReservations" in doc and "kind" not in doc


def clear_caches() -> None:
    _QUERIES.clear()


__all__ = [
    "ACTIVE",
    "CAPACITY_BLOCK",
    "DEFAULT",
    "EXPIRATION_LEAD",
    "EXPIRING",
    "INTERRUPTIBLE_RESERVATION",
    "RESERVED_CAPACITY",
    "CapacityReservation",
    "ReservationResolver",
    "SavedAnswerError",
    "clear_caches",
    "from_ec2",
    "from_saved_answer",
    "is_saved_answer",
    "queries",
    "reservation_kind",
    "reserved_price",
    "selected_by",
]
