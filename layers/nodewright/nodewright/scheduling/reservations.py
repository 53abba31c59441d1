"""Capacity reservations shared among a plan's NodeClaims, as Karpenter's ``ReservationManager`` does.

A reserved offering is priced near zero (``cloud.reservations.reserved_price``), so the packer
prefers the types a reservation holds; but a reservation takes only so many instances
(``Offering.reservation_capacity``, from EC2's ``AvailableInstanceCount``). After the packing,
``allocate`` walks the new NodeClaims in plan order and gives each one slot in every reservation its
candidates could launch into that still has one (Karpenter reserves every compatible offering for a
NodeClaim, so the launch may try all of them and never over-launches any), of one kind only:
CreateFleet's ``DefaultTargetCapacityType`` is ``on-demand`` for an On-Demand Capacity Reservation,
``capacity-block`` for a Capacity Block and ``reserved-capacity`` for an interruptible reservation,
one per fleet; the kind of the cheapest reserved offering wins, a Capacity Block on a tie (Karpenter's
capacity-block design), then a reservation that cannot be taken back.

* A NodeClaim that holds reservations is narrowed to them: ``karpenter.sh/capacity-type In
  [reserved]``, ``karpenter.k8s.aws/capacity-reservation-id In [...]``, the candidates that have one
  of those offerings (cheapest first), so its launch targets the reservations.
* A NodeClaim that holds none falls back, as Karpenter's default ``Fallback`` mode does: its reserved
  offerings are dropped, its candidates re-priced by what is left (on-demand or spot) and re-sorted,
  and its capacity types narrowed to those. When nothing is left (a NodePool that allows only
  ``reserved``), the NodeClaim is not made and its pods get the reason.

Pure: a plan in, the same plan narrowed.
"""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as wk
from nodewright.scheduling.requirements import Requirement
from nodewright.scheduling.results import CandidateType, NewClaim, Plan

CAPACITY_BLOCK = "capacity-block"
EXHAUSTED = (
    "every capacity reservation its NodePool allows is in use (karpenter.sh/capacity-type reserved only)"
)


def kind_order(offering: Any) -> tuple[bool, bool]:
    """Among reserved offerings of one price, the kind preferred: a Capacity Block (Karpenter's
    capacity-block design), then capacity that cannot be taken back before an interruptible one."""
    return offering.reservation_type != CAPACITY_BLOCK, bool(offering.interruptible)


def allocate(plan: Plan) -> None:
    """Share the reservations among ``plan.new_claims`` (see the module); narrows them in place."""
    remaining: dict[str, int] = {}
    for claim in plan.new_claims:
        for candidate in claim.instance_types:
            for offering in candidate.offerings:
                if offering.reservation_id:
                    remaining.setdefault(offering.reservation_id, offering.reservation_capacity)
    if not remaining:
        return
    kept: list[NewClaim] = []
    for claim in plan.new_claims:
        held = _hold(claim, remaining)
        narrowed = _narrow(claim, held)
        if narrowed is None:
            for pod in claim.pods:
                plan.unschedulable[pod] = EXHAUSTED
            continue
        kept.append(narrowed)
    plan.new_claims[:] = kept


def _hold(claim: NewClaim, remaining: dict[str, int]) -> frozenset[str]:
    """The reservations this NodeClaim takes a slot in (and takes it): those of its candidates with
    a slot left, of the reservation type of the cheapest of them."""
    open_offerings = [
        o
        for candidate in claim.instance_types
        for o in candidate.offerings
        if o.reservation_id and remaining.get(o.reservation_id, 0) > 0
    ]
    if not open_offerings:
        return frozenset()
    cheapest = min(
        open_offerings, key=lambda o: (o.price, o.reservation_type != CAPACITY_BLOCK, o.interruptible)
    )
    held = frozenset(
        o.reservation_id
        for o in open_offerings
        if (o.reservation_type, o.interruptible) == (cheapest.reservation_type, cheapest.interruptible)
    )
    for reservation in held:
        remaining[reservation] -= 1
    return held


def _narrow(claim: NewClaim, held: frozenset[str]) -> NewClaim | None:
    """The NodeClaim targeting ``held`` (or, with none, without reserved offerings); None when no
    candidate is left."""
    candidates: list[CandidateType] = []
    for candidate in claim.instance_types:
        offerings = tuple(
            o for o in candidate.offerings if (o.reservation_id in held if held else not o.reservation_id)
        )
        if offerings:
            price = min(o.price for o in offerings)
            candidates.append(CandidateType(candidate.name, price, offerings))
    if not candidates:
        return None
    candidates.sort(key=lambda c: (c.price, c.name))
    requirements = claim.requirements.with_requirement(
        Requirement(wk.INSTANCE_TYPE, False, frozenset(c.name for c in candidates))
    ).with_requirement(
        Requirement(
            wk.CAPACITY_TYPE, False, frozenset(o.capacity_type for c in candidates for o in c.offerings)
        )
    )
    if held:
        requirements = requirements.with_requirement(Requirement(wk.CAPACITY_RESERVATION_ID, False, held))
    claim.instance_types = candidates
    claim.requirements = requirements
    return claim


__all__ = ["EXHAUSTED", "allocate", "kind_order"]
