"""NodeOverlays resolved against the NodePools' instance types, as Karpenter v1.14's nodeoverlay
controller and instance-type store do (kubernetes-sigs/karpenter ``pkg/controllers/nodeoverlay``
``controller.go`` at b1732bcd and ``store.go`` at 343bd365, the v1.14-era versions: one reconcile
compares every overlay against every NodePool's instance types).

``resolve(overlays, pools)`` walks the overlays highest weight first (equal weights: the name later in
the alphabet first, ``api.overlays.by_precedence``):

* an overlay failing its runtime validation (``api.overlays.runtime_errors``) is not applied
  (``RuntimeValidation``);
* per NodePool and instance type, an overlay *selects* the type when its requirements are compatible
  with the type's (its labels and every offering's zone, capacity type and reservation, the NodePool's
  name and template labels; a key the type does not define is incompatible unless the overlay only
  excludes it) and then the offerings whose own requirements it is compatible with;
* it *conflicts* when an overlay of the same weight already set the price of one of those offerings, or
  one of the same capacity resources of that type: it is then applied nowhere (``Conflict``, "conflict
  with another overlay"), in no NodePool, so an overlay applies whole or not at all;
* otherwise each selected offering without a price change gets this one (a higher weight's stays), and
  the type's capacity gains each resource no higher weight set.

``Resolution.apply(pool, types)`` returns the types with those changes: offering prices adjusted
(``api.overlays.adjusted_price``), capacity and allocatable extended (a ``hugepages-*`` resource is
taken out of the allocatable memory, as Karpenter's allocatable does). Pure: the World calls it where it
builds a pass's instance types (``state.world``), so provisioning, consolidation and ``nodewright plan``
all see the same overlaid catalog; the scheduling core never knows overlays exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from nodewright.api import labels as wk
from nodewright.api.overlays import (
    CONFLICT_MESSAGE,
    HUGEPAGES_PREFIX,
    REASON_CONFLICT,
    REASON_RUNTIME_VALIDATION,
    VALIDATION_SUCCEEDED,
    NodeOverlay,
    adjusted_price,
    by_precedence,
    runtime_errors,
)
from nodewright.scheduling.instancetypes import RESERVATION_KEYS, TENANCIES, InstanceType, Offering
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.resources import MEMORY, parse_resource

OfferingKey = tuple[str, str, str]  # (zone, capacity type, reservation id): Karpenter's offering requirements


def offering_key(offering: Offering) -> OfferingKey:
    return offering.zone, offering.capacity_type, offering.reservation_id


@dataclass(frozen=True)
class PoolFacts:
    """What an overlay is matched against in one NodePool: its template labels and its instance types."""

    labels: Mapping[str, str]
    instance_types: Sequence[InstanceType]


@dataclass(frozen=True)
class Verdict:
    """An overlay's ``ValidationSucceeded`` condition: applied, or why not."""

    ok: bool
    reason: str
    message: str = ""


@dataclass
class _Price:
    change: str
    overlay: str
    lowest_weight: int  # the weight of the last overlay that selected the offering


@dataclass
class _Capacity:
    resources: dict[str, str] = field(default_factory=dict)
    overlays: list[str] = field(default_factory=list)
    lowest_weight_resources: Mapping[str, str] = field(default_factory=dict)
    lowest_weight: int = 0


@dataclass
class _TypeUpdate:
    prices: dict[OfferingKey, _Price] = field(default_factory=dict)
    capacity: _Capacity | None = None


@dataclass
class Resolution:
    """The overlays' verdicts and the changes they make, per NodePool and instance type."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)
    updates: dict[str, dict[str, _TypeUpdate]] = field(default_factory=dict)

    def apply(self, pool: str, instance_types: Sequence[InstanceType]) -> list[InstanceType]:
        """``instance_types`` of ``pool`` as the overlays change them (the same objects where none does)."""
        changes = self.updates.get(pool)
        if not changes:
            return list(instance_types)
        return [_changed(t, changes[t.name]) if t.name in changes else t for t in instance_types]

    def applied(self, pool: str, instance_type: str) -> AppliedOverlays:
        """Which overlays changed this type in this NodePool (``nodewright catalog``'s "why")."""
        update = (self.updates.get(pool) or {}).get(instance_type)
        if update is None:
            return AppliedOverlays()
        return AppliedOverlays(
            prices={key: price.overlay for key, price in update.prices.items()},
            capacity=tuple(update.capacity.overlays) if update.capacity else (),
        )


@dataclass(frozen=True)
class AppliedOverlays:
    prices: Mapping[OfferingKey, str] = field(default_factory=dict)
    capacity: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return sorted({*self.prices.values(), *self.capacity})


def resolve(overlays: Iterable[NodeOverlay], pools: Mapping[str, PoolFacts]) -> Resolution:
    """Every overlay's verdict and the changes of those applied (see the module)."""
    resolution = Resolution()
    own: dict[tuple[str, str], Requirements] = {}  # a type's requirements in a NodePool, built once
    for overlay in by_precedence(overlays):
        errors = runtime_errors(overlay)
        try:
            wanted = Requirements.from_k8s(overlay.requirements)
        except (TypeError, ValueError) as exc:  # what no API server stores; a manifest may hold it
            errors.append(str(exc))
        if errors:
            resolution.verdicts[overlay.name] = Verdict(False, REASON_RUNTIME_VALIDATION, "; ".join(errors))
            continue
        selected = {
            pool: [
                (t, found) for t in facts.instance_types if (found := _selected(pool, facts, t, wanted, own))
            ]
            for pool, facts in pools.items()
        }
        if any(
            _conflicts(resolution.updates.get(pool, {}).get(t.name), overlay, offerings)
            for pool, matches in selected.items()
            for t, offerings in matches
        ):
            resolution.verdicts[overlay.name] = Verdict(False, REASON_CONFLICT, CONFLICT_MESSAGE)
            continue
        for pool, matches in selected.items():
            for instance_type, offerings in matches:
                update = resolution.updates.setdefault(pool, {}).setdefault(instance_type.name, _TypeUpdate())
                _store(update, overlay, offerings)
        resolution.verdicts[overlay.name] = Verdict(True, VALIDATION_SUCCEEDED)
    return resolution


def offering_requirements(offering: Offering) -> Requirements:
    """An offering's own requirements, as the AWS provider writes them: its zone (and zone ID), its
    capacity type, and its reservation's id, type and interruptible (``DoesNotExist`` when it has none)."""
    found = [
        Requirement(wk.ZONE, False, frozenset({offering.zone})),
        Requirement(wk.CAPACITY_TYPE, False, frozenset({offering.capacity_type})),
    ]
    if offering.zone_id:
        found.append(Requirement(wk.TOPOLOGY_ZONE_ID, False, frozenset({offering.zone_id})))
    for key in RESERVATION_KEYS:
        value = offering.label(key)
        found.append(Requirement(key, False, frozenset({value} if value is not None else ())))
    return Requirements(found)


def _type_requirements(pool: str, facts: PoolFacts, instance_type: InstanceType) -> Requirements:
    """The type's requirements in this NodePool (Karpenter's ``getOverlaidOfferings``): its labels and
    every offering's (available or not), its tenancies, the NodePool's name and template labels."""
    offerings = instance_type.offerings
    found = [
        Requirement(wk.ZONE, False, frozenset(o.zone for o in offerings)),
        Requirement(wk.CAPACITY_TYPE, False, frozenset(o.capacity_type for o in offerings)),
        Requirement(wk.INSTANCE_TENANCY, False, TENANCIES),
    ]
    zone_ids = frozenset(o.zone_id for o in offerings if o.zone_id)
    if zone_ids:
        found.append(Requirement(wk.TOPOLOGY_ZONE_ID, False, zone_ids))
    reserved = [o for o in offerings if o.reservation_id]
    for key in RESERVATION_KEYS:
        found.append(Requirement(key, False, frozenset(o.label(key) or "" for o in reserved)))
    own = {**instance_type.labels, **facts.labels, wk.NODEPOOL: pool}
    return Requirements.from_labels(own).intersect(Requirements(found))


def _selected(
    pool: str,
    facts: PoolFacts,
    instance_type: InstanceType,
    wanted: Requirements,
    own: dict[tuple[str, str], Requirements],
) -> list[Offering]:
    """The offerings of the type the overlay selects in this NodePool ([] when it selects none)."""
    key = (pool, instance_type.name)
    if key not in own:
        own[key] = _type_requirements(pool, facts, instance_type)
    if own[key].conflict(wanted) is not None:
        return []
    return [
        o
        for o in instance_type.offerings
        if wanted.conflict(offering_requirements(o), allow_undefined=wk.WELL_KNOWN_LABELS) is None
    ]


def _conflicts(update: _TypeUpdate | None, overlay: NodeOverlay, offerings: Sequence[Offering]) -> bool:
    """Whether an overlay of the same weight already changed what this one would (Karpenter's
    ``isOfferingUpdateConflicting`` / ``isCapacityUpdateConflicting``; overlays come highest weight
    first, so the last weight recorded is the lowest so far)."""
    if update is None:
        return False
    if overlay.price_change is not None:
        for offering in offerings:
            price = update.prices.get(offering_key(offering))
            if price is not None and price.lowest_weight == overlay.weight:
                return True
    capacity = update.capacity
    return bool(
        overlay.capacity
        and capacity is not None
        and capacity.lowest_weight == overlay.weight
        and set(overlay.capacity) & set(capacity.lowest_weight_resources)
    )


def _store(update: _TypeUpdate, overlay: NodeOverlay, offerings: Sequence[Offering]) -> None:
    """Record what this overlay changes that no higher weight already did."""
    change = overlay.price_change
    if change is not None:
        for offering in offerings:
            key = offering_key(offering)
            if key in update.prices:
                update.prices[key].lowest_weight = overlay.weight
            else:
                update.prices[key] = _Price(change, overlay.name, overlay.weight)
    if overlay.capacity:
        capacity = update.capacity or _Capacity()
        added = {k: v for k, v in overlay.capacity.items() if k not in capacity.resources}
        capacity.resources.update(added)
        if added:
            capacity.overlays.append(overlay.name)
        capacity.lowest_weight_resources = overlay.capacity
        capacity.lowest_weight = overlay.weight
        update.capacity = capacity


def _changed(instance_type: InstanceType, update: _TypeUpdate) -> InstanceType:
    """A copy of the type with the update's prices and capacity (the original is shared by the other
    NodePools and must stay as the cloud answered)."""
    offerings = tuple(
        replace(o, price=adjusted_price(o.price, price.change), price_overlaid=True)
        if (price := update.prices.get(offering_key(o)))
        else o
        for o in instance_type.offerings
    )
    capacity = dict(instance_type.capacity)
    allocatable = dict(instance_type.allocatable)
    added = update.capacity.resources if update.capacity else {}
    for name, quantity in added.items():
        amount = parse_resource(name, quantity)
        capacity[name] = amount
        allocatable[name] = amount  # no kubelet reservation covers an extended resource
    hugepages = sum(v for k, v in capacity.items() if k.startswith(HUGEPAGES_PREFIX))
    if any(k.startswith(HUGEPAGES_PREFIX) for k in added):
        allocatable[MEMORY] = max(0, instance_type.allocatable.get(MEMORY, 0) - hugepages)
    return InstanceType(
        instance_type.name,
        dict(instance_type.labels),
        capacity,
        instance_type.overhead,
        offerings,
        allocatable,
    )


__all__ = ["AppliedOverlays", "PoolFacts", "Resolution", "Verdict", "offering_requirements", "resolve"]
