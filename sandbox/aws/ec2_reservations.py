"""The sandbox's EC2 capacity reservations: On-Demand Capacity Reservations and Capacity Blocks for ML.

moto 5.2 has none of this API, so this module adds it to moto's EC2, answering as EC2 does:

* ``CreateCapacityReservation`` (an ODCR: type, platform, zone, count, ``open``/``targeted``, end date,
  tags), ``DescribeCapacityReservations`` (by id, with EC2's filters: ``state``, ``owner-id``,
  ``instance-type``, ``availability-zone``, ``instance-match-criteria``, ``reservation-type``,
  ``tag:<key>``, ``tag-key``; ``MaxResults``/``NextToken``; an unknown id is
  ``InvalidCapacityReservationId.NotFound``), ``CancelCapacityReservation``. ``AvailableInstanceCount``
  is the total less the live instances running in the reservation, counted at every answer.
* Capacity Blocks: EC2 sells them through ``DescribeCapacityBlockOfferings``/``PurchaseCapacityBlock``
  for a future date; the sandbox stands for a purchase with :func:`add_capacity_block` (an account
  that bought one). A block is ``scheduled`` before its start, ``active`` until its end, then
  ``expired``; from 30 minutes before its end EC2 terminates the instances still in it (done here
  whenever reservations are read or launched into, as EC2 does on its own clock).
* Launches (CreateFleet's instant fleets, through moto's ``Fleet``), the overrides tried in the
  order of the fleet's on-demand allocation strategy (``sandbox.aws.ec2_fleet_allocation``): an
  instance whose launch template targets a reservation
  (``CapacityReservationSpecification.CapacityReservationTarget``) runs in it
  only if the reservation is active, of the instance's type and zone, and has a free slot; else the
  fleet answers ``ReservationCapacityExceeded`` (full) or ``InvalidParameterCombination`` (another
  type or zone) for that override and tries the next, as EC2 does. A Capacity Block needs the fleet's
  ``DefaultTargetCapacityType: capacity-block`` and the template's ``MarketType: capacity-block``; its
  instances report ``InstanceLifecycle: capacity-block``. An untargeted on-demand instance that
  matches an active ``open`` reservation with a free slot runs in it (EC2's open matching).
  DescribeInstances then shows ``CapacityReservationId`` and ``CapacityReservationSpecification``.
* Interruptible Capacity Reservations (lent by an ODCR owner of the organization;
  :func:`add_interruptible_reservation`): ``Interruptible: true``, launched into only by an instant
  fleet of ``DefaultTargetCapacityType: reserved-capacity`` whose ``ReservedCapacityOptions`` name
  ``interruptible-capacity-reservation`` (any other fleet targeting one is refused), never matched
  as ``open``; their instances' lifecycle is ``interruptible-capacity-reservation``.

:func:`install` patches moto (idempotent, never undone: with no reservation in an account, moto
answers as before);
the sandbox calls it when it starts its moto server (``sandbox.aws.server.MotoServer``).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sandbox.aws import ec2_fleet_allocation

CAPACITY_BLOCK = "capacity-block"
RECLAIM_BEFORE_END = timedelta(minutes=30)  # EC2 starts terminating a block's instances then
_LIVE = ("pending", "running", "stopping", "stopped")

_lock = threading.RLock()
_installed: dict[str, Callable[..., Any]] = {}
_fleet_errors = threading.local()  # errors of the fleet being built, for its response
# The reserved capacity the fleet being built asked for: ``kind`` None (on-demand), ``capacity-block``
# or ``reserved-capacity``; ``types``: a reserved-capacity fleet's ReservedCapacityOptions.ReservationTypes.
_fleet_target = threading.local()
RESERVED_CAPACITY = "reserved-capacity"
INTERRUPTIBLE = "interruptible-capacity-reservation"
RESERVATION_TYPES = ("on-demand-capacity-reservation", CAPACITY_BLOCK, INTERRUPTIBLE)


@dataclass
class Reservation:
    id: str
    owner_id: str
    instance_type: str
    platform: str
    zone: str
    total: int
    match_criteria: str = "open"
    reservation_type: str = "default"
    tenancy: str = "default"
    start: datetime = field(default_factory=lambda: datetime.now(UTC))
    end: datetime | None = None
    cancelled: bool = False
    # Interruptible: capacity an ODCR owner of the organization lends (EC2's
    # CreateInterruptibleCapacityReservationAllocation) and can take back with a 2-minute notice.
    interruptible: bool = False
    created: datetime = field(default_factory=lambda: datetime.now(UTC))

    def state(self, now: datetime) -> str:
        if self.cancelled:
            return "cancelled"
        if self.end is not None and now >= self.end:
            return "expired"
        if now < self.start:
            return "scheduled" if self.reservation_type == CAPACITY_BLOCK else "pending"
        return "active"


def _reservations(backend: Any) -> dict[str, Reservation]:
    store = backend.__dict__.get("_sandbox_reservations")
    if store is None:
        store = backend.__dict__.setdefault("_sandbox_reservations", {})
    return store


def _tags(backend: Any, reservation_id: str) -> dict[str, str]:
    """A reservation's tags, kept where EC2 keeps every resource's (moto's tag store: CreateTags and
    DescribeTags see them, and so does the IAM enforcement's ``aws:ResourceTag``)."""
    return dict(backend.tags.get(reservation_id, {}))


def _in_use(backend: Any, reservation_id: str) -> list[Any]:
    return [
        i
        for i in backend.all_instances()
        if getattr(i, "capacity_reservation_id", None) == reservation_id and i.state in _LIVE
    ]


def _available(backend: Any, reservation: Reservation, now: datetime) -> int:
    if reservation.state(now) != "active":
        return 0
    return max(0, reservation.total - len(_in_use(backend, reservation.id)))


def _reclaim(backend: Any, now: datetime) -> None:
    """EC2's clock: terminate what is still running in a block from 30 minutes before its end; an
    On-Demand Capacity Reservation that expired or was cancelled lets its instances run on as plain
    on-demand instances (DescribeInstances no longer names the reservation)."""
    for reservation in list(_reservations(backend).values()):
        if reservation.reservation_type != CAPACITY_BLOCK:
            if reservation.state(now) in ("expired", "cancelled"):
                for instance in _in_use(backend, reservation.id):
                    instance.capacity_reservation_id = None
                    instance.capacity_reservation_specification = {"CapacityReservationPreference": "open"}
            continue
        if reservation.end is None:
            continue
        if now >= reservation.end - RECLAIM_BEFORE_END:
            ids = [i.id for i in _in_use(backend, reservation.id)]
            if ids:
                backend.terminate_instances(ids)


def _as_ec2(backend: Any, reservation: Reservation, now: datetime) -> dict[str, Any]:
    item: dict[str, Any] = {
        "CapacityReservationId": reservation.id,
        "OwnerId": reservation.owner_id,
        "CapacityReservationArn": (
            f"arn:aws:ec2:{backend.region_name}:{reservation.owner_id}:capacity-reservation/{reservation.id}"
        ),
        "InstanceType": reservation.instance_type,
        "InstancePlatform": reservation.platform,
        "AvailabilityZone": reservation.zone,
        "Tenancy": reservation.tenancy,
        "TotalInstanceCount": reservation.total,
        "AvailableInstanceCount": _available(backend, reservation, now),
        "EbsOptimized": False,
        "EphemeralStorage": False,
        "State": reservation.state(now),
        "StartDate": reservation.start,
        "EndDateType": "limited" if reservation.end else "unlimited",
        "InstanceMatchCriteria": reservation.match_criteria,
        "CreateDate": reservation.created,
        "Tags": [{"Key": k, "Value": v} for k, v in sorted(_tags(backend, reservation.id).items())],
        "ReservationType": reservation.reservation_type,
        "Interruptible": reservation.interruptible,
    }
    if reservation.end is not None:
        item["EndDate"] = reservation.end
    return item


def _matches(item: dict[str, Any], filters: dict[str, list[str]], tags: dict[str, str]) -> bool:
    fields = {
        "state": item["State"],
        "owner-id": item["OwnerId"],
        "instance-type": item["InstanceType"],
        "availability-zone": item["AvailabilityZone"],
        "instance-match-criteria": item["InstanceMatchCriteria"],
        "reservation-type": item["ReservationType"],
        "tenancy": item["Tenancy"],
        "instance-platform": item["InstancePlatform"],
        "capacity-reservation-id": item["CapacityReservationId"],
    }
    for name, values in filters.items():
        if name == "tag-key":
            if not any(v in tags for v in values):
                return False
        elif name.startswith("tag:"):
            if tags.get(name[4:]) not in values:
                return False
        elif name in fields:
            if fields[name] not in values:
                return False
        else:
            from moto.ec2.exceptions import EC2ClientError

            raise EC2ClientError("InvalidParameterValue", f"The filter '{name}' is invalid")
    return True


# --- the API -----------------------------------------------------------------------------------------


def _create(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    backend = self.ec2_backend
    count = int(self._get_param("InstanceCount") or 0)
    if count < 1:
        raise EC2ClientError("InvalidParameterValue", "InstanceCount must be at least 1")
    zone = self._get_param("AvailabilityZone")
    if not zone:
        raise EC2ClientError("MissingParameter", "The request must contain the parameter AvailabilityZone")
    end = self._get_param("EndDate")
    tags = self._parse_tag_specification().get("capacity-reservation", {})
    reservation = Reservation(
        id=f"cr-{secrets.token_hex(9)[:17]}",
        owner_id=backend.account_id,
        instance_type=self._get_param("InstanceType"),
        platform=self._get_param("InstancePlatform") or "Linux/UNIX",
        zone=zone,
        total=count,
        match_criteria=self._get_param("InstanceMatchCriteria") or "open",
        tenancy=self._get_param("Tenancy") or "default",
        end=_when(end) if end else None,
    )
    with _lock:
        _reservations(backend)[reservation.id] = reservation
        if tags:
            backend.create_tags([reservation.id], dict(tags))
    return ActionResult({"CapacityReservation": _as_ec2(backend, reservation, datetime.now(UTC))})


def _describe(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    backend = self.ec2_backend
    now = datetime.now(UTC)
    ids = list(self._get_param("CapacityReservationIds", []) or [])
    filters = self._filters_from_querystring()
    with _lock:
        _reclaim(backend, now)
        known = _reservations(backend)
        for reservation_id in ids:
            if reservation_id not in known:
                raise EC2ClientError(
                    "InvalidCapacityReservationId.NotFound",
                    f"The capacity reservation ID '{reservation_id}' does not exist",
                )
        chosen = [known[i] for i in ids] if ids else sorted(known.values(), key=lambda r: r.created)
        items = [
            item for r in chosen if _matches(item := _as_ec2(backend, r, now), filters, _tags(backend, r.id))
        ]
    start = int(self._get_param("NextToken") or 0)
    size = int(self._get_param("MaxResults") or 1000)
    page = items[start : start + size]
    token = str(start + size) if start + size < len(items) else None
    return ActionResult({"CapacityReservations": page, "NextToken": token})


def _cancel(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    reservation_id = self._get_param("CapacityReservationId")
    with _lock:
        reservation = _reservations(self.ec2_backend).get(reservation_id)
        if reservation is None:
            raise EC2ClientError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist",
            )
        if reservation.reservation_type == CAPACITY_BLOCK:
            raise EC2ClientError("InvalidParameterValue", "Capacity Blocks cannot be cancelled")
        reservation.cancelled = True
        _reclaim(self.ec2_backend, datetime.now(UTC))
    return ActionResult({"Return": True})


def _when(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


# --- launches ------------------------------------------------------------------------------------------


def _template_data(backend: Any, spec: Any) -> dict[str, Any]:
    template_spec = getattr(spec, "launch_template_spec", None) or {}
    template_id = template_spec.get("LaunchTemplateId")
    if not template_id:
        return {}
    template = backend.get_launch_template(template_id=template_id)
    version = template_spec.get("Version") or template.default_version_number
    return dict(template.get_version(version).data)


def _refusal(spec: Any, code: str, message: str, lifecycle: str) -> dict[str, Any]:
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": dict(getattr(spec, "launch_template_spec", None) or {}),
            "Overrides": dict(getattr(spec, "overrides", None) or {}),
        },
        "Lifecycle": lifecycle,
        "ErrorCode": code,
        "ErrorMessage": message,
    }


def _reservation_type_of(reservation: Reservation) -> str:
    """The word a reserved-capacity fleet's ReservationTypes uses for the kind of this reservation."""
    if reservation.interruptible:
        return INTERRUPTIBLE
    return CAPACITY_BLOCK if reservation.reservation_type == CAPACITY_BLOCK else RESERVATION_TYPES[0]


def _place(
    backend: Any, spec: Any, fleet: tuple[str | None, frozenset[str]], now: datetime
) -> tuple[Reservation | None, dict | None]:
    """(the reservation this launch spec's instance runs in, or the fleet error refusing it);
    ``fleet``: the fleet's reserved kind and a reserved-capacity fleet's reservation types."""
    kind, reservation_types = fleet
    block_fleet = kind == CAPACITY_BLOCK
    data = _template_data(backend, spec)
    target = (
        (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    ).get("CapacityReservationId")
    market = (data.get("InstanceMarketOptions") or {}).get("MarketType")
    lifecycle = CAPACITY_BLOCK if block_fleet else INTERRUPTIBLE if kind == RESERVED_CAPACITY else "on-demand"
    zone = backend.get_subnet(spec.subnet_id).availability_zone if spec.subnet_id else ""
    reservations = _reservations(backend)
    if kind == RESERVED_CAPACITY and not target:
        return None, _refusal(
            spec,
            "InvalidParameterCombination",
            "A reserved-capacity fleet launches only into the Capacity Reservations its launch templates "
            "target",
            lifecycle,
        )
    if block_fleet and (not target or market != CAPACITY_BLOCK):
        return None, _refusal(
            spec,
            "InvalidParameterCombination",
            "A capacity-block fleet needs launch templates with MarketType capacity-block targeting a "
            "Capacity Block",
            lifecycle,
        )
    if target:
        reservation = reservations.get(target)
        if reservation is None:
            return None, _refusal(
                spec,
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{target}' does not exist",
                lifecycle,
            )
        if kind == RESERVED_CAPACITY and _reservation_type_of(reservation) not in reservation_types:
            return None, _refusal(
                spec,
                "InvalidParameterCombination",
                f"The Capacity Reservation {target} is of a reservation type "
                f"({_reservation_type_of(reservation)}) the fleet's ReservedCapacityOptions do not name "
                f"({', '.join(sorted(reservation_types))})",
                lifecycle,
            )
        if reservation.interruptible and kind != RESERVED_CAPACITY:
            return None, _refusal(
                spec,
                "InvalidParameterCombination",
                f"Launching into the interruptible Capacity Reservation {target} needs an instant fleet of "
                "DefaultTargetCapacityType reserved-capacity with ReservedCapacityOptions naming "
                "interruptible-capacity-reservation",
                lifecycle,
            )
        if (reservation.reservation_type == CAPACITY_BLOCK) != (market == CAPACITY_BLOCK):
            return None, _refusal(
                spec,
                "InvalidParameterCombination",
                "Launching into a Capacity Block needs MarketType capacity-block (and only then)",
                lifecycle,
            )
        if reservation.instance_type != spec.instance_type or reservation.zone != zone:
            return None, _refusal(
                spec,
                "InvalidParameterCombination",
                f"The instance type and Availability Zone ({spec.instance_type}, {zone}) do not match "
                f"those of the Capacity Reservation {target} "
                f"({reservation.instance_type}, {reservation.zone})",
                lifecycle,
            )
        if _available(backend, reservation, now) < 1:
            return None, _refusal(
                spec,
                "ReservationCapacityExceeded",
                f"The requested amount of instance capacity exceeds the capacity available in the "
                f"Capacity Reservation {target}",
                lifecycle,
            )
        return reservation, None
    for reservation in sorted(reservations.values(), key=lambda r: r.created):  # open matching
        if (
            reservation.match_criteria == "open"
            and reservation.reservation_type != CAPACITY_BLOCK
            and not reservation.interruptible
            and reservation.instance_type == spec.instance_type
            and reservation.zone == zone
            and _available(backend, reservation, now) > 0
        ):
            return reservation, None
    return None, None


def _create_on_demand_requests(self: Any, weight_to_add: float) -> None:
    """moto's on-demand fulfilment as EC2's: the launch specs in the order the fleet's allocation
    strategy gives them (``sandbox.aws.ec2_fleet_allocation``; moto took the first), each launched into the
    reservation it targets or matches, until one launches."""
    backend = self.ec2_backend
    now = datetime.now(UTC)
    strategy = (self.on_demand_options or {}).get("AllocationStrategy")
    self.launch_specs = ec2_fleet_allocation.order(self.launch_specs, strategy, backend.region_name)
    fleet: tuple[str | None, frozenset[str]] = (
        getattr(_fleet_target, "kind", None),
        getattr(_fleet_target, "types", frozenset()),
    )
    if not _reservations(backend) and fleet[0] is None:
        return _installed["on_demand"](self, weight_to_add)
    errors: list[dict[str, Any]] = []
    launched = 0
    with _lock:
        _reclaim(backend, now)
        for spec in self.launch_specs:
            if launched >= weight_to_add:
                break
            reservation, error = _place(backend, spec, fleet, now)
            if error is not None:
                errors.append(error)
                continue
            result = backend.run_instances(
                image_id=spec.image_id,
                count=1,
                instance_type=spec.instance_type,
                is_instance_type_default=False,
                key_name=spec.key_name,
                security_group_names=spec.group_set,
                user_data=spec.user_data,
                placement=None,
                kernel_id=None,
                ramdisk_id=None,
                monitoring_enabled=spec.monitoring,
                subnet_id=spec.subnet_id,
                fleet_id=self.id,
                tags=spec.tag_specifications,
            )
            for instance in result.instances:
                if reservation is not None:
                    targeted = bool(_target_of(backend, spec))
                    instance.capacity_reservation_id = reservation.id
                    instance.capacity_reservation_specification = {
                        "CapacityReservationPreference": "open",
                        **(
                            {"CapacityReservationTarget": {"CapacityReservationId": reservation.id}}
                            if targeted
                            else {}
                        ),
                    }
                    if reservation.reservation_type == CAPACITY_BLOCK:
                        instance.lifecycle = CAPACITY_BLOCK  # InstanceLifecycle: capacity-block
                    elif reservation.interruptible:
                        instance.lifecycle = INTERRUPTIBLE
                self.on_demand_instances.append({"id": result.id, "instance": instance, "launch_spec": spec})
                launched += 1
        self.fulfilled_capacity += launched
    pending = getattr(_fleet_errors, "errors", None)
    if pending is not None:
        pending.extend(errors)
    return None


def _target_of(backend: Any, spec: Any) -> str | None:
    data = _template_data(backend, spec)
    return ((data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}).get(
        "CapacityReservationId"
    )


def _fleet_response(self: Any) -> Any:
    """CreateFleet's answer with the reservations' refusals in ``Errors`` (beside any other's)."""
    if getattr(_fleet_errors, "errors", None) is not None:  # wrapped twice: the outer one reports
        return _installed["response"](self)
    _fleet_errors.errors = []
    read = self._get_param

    options = read("ReservedCapacityOptions") or {}
    target_type = (read("TargetCapacitySpecification") or {}).get("DefaultTargetCapacityType")
    if options and target_type != RESERVED_CAPACITY:
        from moto.ec2.exceptions import EC2ClientError

        _fleet_errors.errors = None
        raise EC2ClientError(
            "InvalidParameterCombination",
            "ReservedCapacityOptions can be specified only with DefaultTargetCapacityType reserved-capacity",
        )

    def get_param(name: str, if_none: Any = None) -> Any:
        # A capacity-block or reserved-capacity fleet is fulfilled as an on-demand one, from the
        # reservations its templates target only.
        value = read(name, if_none)
        if name == "TargetCapacitySpecification" and target_type in (CAPACITY_BLOCK, RESERVED_CAPACITY):
            _fleet_target.kind = target_type
            _fleet_target.types = frozenset(options.get("ReservationTypes") or RESERVATION_TYPES)
            return {**value, "DefaultTargetCapacityType": "on-demand"}
        return value

    self._get_param = get_param
    try:
        result = _installed["response"](self)
        errors = list(_fleet_errors.errors)
    finally:
        _fleet_errors.errors = None
        _fleet_target.kind = None
        _fleet_target.types = frozenset()
        del self._get_param
    if errors and hasattr(result, "result") and isinstance(result.result, dict):
        result.result["Errors"] = [*(result.result.get("Errors") or []), *errors]
    return result


def install() -> None:
    """Give moto's EC2 the reservations API and launches into reservations (see the module).

    Idempotent, and safe beside the sandbox's other moto patches whatever their order: a patch of
    ours is put in place unless it is already in the chain of wrappers the method is now (another
    module's ``uninstall`` may have put back a method without it), and left alone when it is (the
    fault injector wraps ours once the sandbox is up: wrapping it again made each CreateFleet call
    itself until Python gave up). Our wrappers pass through when one of ours is already on the call stack.
    ``Fleet.__init__`` is left to ``fleet_network``: a capacity-block request is read as an
    on-demand one by the response."""
    from moto.ec2.models.fleets import Fleet
    from moto.ec2.responses import EC2Response
    from moto.ec2.responses.fleets import Fleets

    with _lock:
        if _needs_wrapping("on_demand", Fleet.create_on_demand_requests, _create_on_demand_requests):
            _installed["on_demand"] = Fleet.create_on_demand_requests
            Fleet.create_on_demand_requests = _create_on_demand_requests
        if _needs_wrapping("response", Fleets.create_fleet, _fleet_response):
            _installed["response"] = Fleets.create_fleet
            Fleets.create_fleet = _fleet_response
        # moto's EC2Response has no capacity-reservation actions: the sandbox adds them.
        EC2Response.create_capacity_reservation = _create  # type: ignore[attr-defined]
        EC2Response.describe_capacity_reservations = _describe  # type: ignore[attr-defined]
        EC2Response.cancel_capacity_reservation = _cancel  # type: ignore[attr-defined]


def _needs_wrapping(key: str, current: Any, ours: Any) -> bool:
    """Whether to put ``ours`` over ``current``: not when ours is already in ``current``'s chain of
    the sandbox's wrappers (``_inner``); otherwise yes. ``fleet_network`` also wraps CreateFleet's
    answer, and its ``uninstall`` puts back what it wrapped: a chain that no longer holds ours (seen:
    every capacity-block launch after the first test launched nothing, answering no error)."""
    del key
    seen = current
    for _ in range(8):  # the sandbox has three wrappers; a longer chain would be a cycle
        if seen is ours:
            return False
        if seen is None:
            break
        seen = _inner(seen)
    return True


def _inner(wrapper: Any) -> Any:
    """What one of the sandbox's CreateFleet wrappers calls (None: moto's own method, or unknown)."""
    from sandbox.aws import faults, fleet_network

    if wrapper is fleet_network._create_fleet_response:
        return fleet_network._original.get("response")
    if wrapper is faults._patched_response_create_fleet:
        return faults._originals.get("response")
    if wrapper is _fleet_response:
        return _installed.get("response")
    if wrapper is _create_on_demand_requests:
        return _installed.get("on_demand")
    return None


# --- what an account holds (the sandbox's stand-in for a purchase) ---------------------------------------


def add_capacity_block(
    region: str,
    *,
    instance_type: str,
    zone: str,
    count: int,
    start: datetime,
    end: datetime,
    tags: dict[str, str] | None = None,
    account_id: str | None = None,
) -> str:
    """A Capacity Block the account bought (EC2's ``PurchaseCapacityBlock`` of an offering): its id."""
    return _hold(
        region,
        account_id,
        tags,
        instance_type=instance_type,
        zone=zone,
        total=count,
        reservation_type=CAPACITY_BLOCK,
        start=start,
        end=end,
    )


def add_interruptible_reservation(
    region: str,
    *,
    instance_type: str,
    zone: str,
    count: int,
    owner_id: str = "210987654321",
    tags: dict[str, str] | None = None,
    account_id: str | None = None,
) -> str:
    """An interruptible Capacity Reservation lent to the account (what the owner's
    ``CreateInterruptibleCapacityReservationAllocation`` makes of its ODCR's unused instances, seen
    from the organization's other accounts): its id."""
    return _hold(
        region, account_id, tags, instance_type=instance_type, zone=zone, total=count, owner_id=owner_id,
        interruptible=True,
    )  # fmt: skip


def _hold(region: str, account_id: str | None, tags: dict[str, str] | None, **fields: Any) -> str:
    """A targeted reservation the account holds without having created it through the API."""
    from moto.backends import get_backend
    from moto.core.models import DEFAULT_ACCOUNT_ID

    install()
    backend = get_backend("ec2")[account_id or DEFAULT_ACCOUNT_ID][region]
    reservation = Reservation(
        id=f"cr-{secrets.token_hex(9)[:17]}",
        owner_id=fields.pop("owner_id", backend.account_id),
        platform="Linux/UNIX",
        match_criteria="targeted",
        **fields,
    )
    with _lock:
        _reservations(backend)[reservation.id] = reservation
        if tags:
            backend.create_tags([reservation.id], dict(tags))
    return reservation.id


def reservations_in(region: str, account_id: str | None = None) -> Iterable[Reservation]:
    """Every reservation of the account in the region (tests look at what EC2 holds)."""
    from moto.backends import get_backend
    from moto.core.models import DEFAULT_ACCOUNT_ID

    backend = get_backend("ec2")[account_id or DEFAULT_ACCOUNT_ID][region]
    with _lock:
        return list(_reservations(backend).values())


__all__ = [
    "CAPACITY_BLOCK",
    "INTERRUPTIBLE",
    "Reservation",
    "add_capacity_block",
    "add_interruptible_reservation",
    "install",
    "reservations_in",
]
