"""NodeOverlay (``karpenter.sh/v1alpha1``), as Karpenter v1.14 reads it: the object, its order, its price
arithmetic, its runtime validation and the words of its status.

What Karpenter does with it is in ``nodewright.state.overlays`` (which instance types and offerings an
overlay selects, weight and conflicts, the adjusted instance types); this module only reads the
object. Written from kubernetes-sigs/karpenter ``pkg/apis/v1alpha1/nodeoverlay.go``,
``nodeoverlay_validation.go``, ``nodeoverlay_status.go`` (commit 0546b80b, the v1.14-era API with the
Gte/Lte operators) and ``pkg/cloudprovider/types.go`` ``AdjustedPrice``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels
from nodewright.api.models import READY
from nodewright.api.schema import (
    LABEL_VALUE_PATTERN,
    OVERLAY_PRICE_ADJUSTMENT_PATTERN,
    OVERLAY_PRICE_PATTERN,
    OVERLAY_RESTRICTED_RESOURCES,
    QUALIFIED_NAME_PATTERN,
    REQUIREMENT_OPERATORS,
)
from nodewright.api.shapes import as_dict, as_list

API_VERSION = "karpenter.sh/v1alpha1"
KIND = "NodeOverlay"
# Status conditions (Karpenter's ``ConditionTypeValidationSucceeded`` under the root ``Ready``), the
# reasons its controller writes and its message for a conflict.
VALIDATION_SUCCEEDED = "ValidationSucceeded"
REASON_RUNTIME_VALIDATION = "RuntimeValidation"
REASON_CONFLICT = "Conflict"
CONFLICT_MESSAGE = "conflict with another overlay"
# Karpenter's ``WellKnownValuesForRequirements``: an ``In`` requirement on these keys needs one of
# these values, or the overlay fails its runtime validation.
WELL_KNOWN_VALUES: Mapping[str, frozenset[str]] = {
    labels.CAPACITY_TYPE: frozenset(
        {labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_RESERVED}
    )
}
# Annotations on a NodeClaim whose candidates an overlay changed (Karpenter's
# ``v1alpha1.PriceOverlayAppliedAnnotationKey`` / ``CapacityOverlayAppliedAnnotationKey``): the launch
# then ranks its overrides by the overlaid price (prioritized allocation), not EC2's lowest price.
PRICE_OVERLAY_APPLIED = "karpenter.sh/price-overlay-applied"
CAPACITY_OVERLAY_APPLIED = "karpenter.sh/capacity-overlay-applied"
HUGEPAGES_PREFIX = "hugepages-"

_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
_PRICE = re.compile(OVERLAY_PRICE_PATTERN)
_ADJUSTMENT = re.compile(OVERLAY_PRICE_ADJUSTMENT_PATTERN)


@dataclass(frozen=True)
class NodeOverlay:
    """One NodeOverlay's spec as the resolution reads it (``from_manifest``)."""

    name: str
    requirements: tuple[Mapping[str, Any], ...]
    weight: int = 0  # no weight: 0, below every weighted overlay
    price: str | None = None
    price_adjustment: str | None = None
    capacity: Mapping[str, str] = field(default_factory=dict)
    generation: int | None = None

    @property
    def price_change(self) -> str | None:
        """The overlay's price change (``price`` or ``priceAdjustment``; the CRD forbids both)."""
        return self.price if self.price is not None else self.price_adjustment


def from_manifest(doc: Mapping[str, Any]) -> NodeOverlay:
    """A NodeOverlay object (as the API server stores it, or a manifest) as the resolution reads it."""
    meta = as_dict(doc.get("metadata"))
    spec = as_dict(doc.get("spec"))
    weight = spec.get("weight")
    return NodeOverlay(
        name=str(meta.get("name") or ""),
        requirements=tuple(as_dict(r) for r in as_list(spec.get("requirements"))),
        weight=weight if isinstance(weight, int) and not isinstance(weight, bool) else 0,
        price=_text(spec.get("price")),
        price_adjustment=_text(spec.get("priceAdjustment")),
        capacity={str(k): str(v) for k, v in as_dict(spec.get("capacity")).items()},
        generation=meta.get("generation") if isinstance(meta.get("generation"), int) else None,
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def by_precedence(overlays: Iterable[NodeOverlay]) -> list[NodeOverlay]:
    """Karpenter's ``OrderByWeight``: the highest weight first; on equal weights the name later in
    the alphabet first (so between two equal overlays that conflict, the earlier name loses)."""
    by_name = sorted(overlays, key=lambda o: o.name, reverse=True)
    return sorted(by_name, key=lambda o: -o.weight)  # stable: names stay in order within a weight


def adjusted_price(price: float, change: str | None) -> float:
    """Karpenter's ``AdjustedPrice``: an unsigned value replaces the price; ``+x``/``-x`` adds; ``+x%``/
    ``-x%`` scales; never below zero."""
    if not change:
        return price
    if not change.startswith(("+", "-")):
        return float(change)
    adjusted = price * (1 + float(change[:-1]) / 100) if change.endswith("%") else price + float(change)
    return adjusted if adjusted >= 0 else 0.0


def runtime_errors(overlay: NodeOverlay) -> list[str]:
    """Karpenter's ``RuntimeValidate`` (what the CRD cannot check): per requirement, a supported
    operator, no restricted label, a qualified key and valid values, ``In`` with values, ``Gt``/``Lt``
    with one non-negative integer, a well-known key's ``In`` naming one of its known values. And
    what a manifest read offline never met an API server for (``price`` and ``priceAdjustment``
    both set, or malformed, a restricted capacity resource). An overlay with errors is not applied."""
    errors: list[str] = []
    for requirement in overlay.requirements:
        key = labels.normalized_label(str(requirement.get("key") or ""))
        operator = str(requirement.get("operator") or "")
        values = [str(v) for v in as_list(requirement.get("values"))]
        if operator not in REQUIREMENT_OPERATORS:
            errors.append(
                f"key {key} has an unsupported operator {operator} not in {', '.join(REQUIREMENT_OPERATORS)}"
            )
        if labels.is_restricted_label(key):
            errors.append(f"label {key} is restricted")
        if not _QUALIFIED_NAME.match(key):
            errors.append(f"key {key} is not a qualified name")
        errors.extend(
            f"invalid value {value} for key {key}" for value in values if not _LABEL_VALUE.match(value)
        )
        if operator == "In" and not values:
            errors.append(f"key {key} with operator In must have a value defined")
        if operator in ("Gt", "Lt", "Gte", "Lte") and (len(values) != 1 or not values[0].isdigit()):
            errors.append(f"key {key} with operator {operator} must have a single positive integer value")
        known = WELL_KNOWN_VALUES.get(key)
        if known is not None and operator == "In" and values and not known & set(values):
            errors.append(
                f"no valid values found in {values} for {key}, expected one of: {sorted(known)}, "
                f"got: {values}"
            )
    if overlay.price is not None and overlay.price_adjustment is not None:
        errors.append("cannot set both 'price' and 'priceAdjustment'")
    if overlay.price is not None and not _PRICE.match(overlay.price):
        errors.append(f"price {overlay.price!r} is not a price (e.g. 0.25)")
    if overlay.price_adjustment is not None and not _ADJUSTMENT.match(overlay.price_adjustment):
        errors.append(
            f"priceAdjustment {overlay.price_adjustment!r} is not a change (e.g. -0.05, +10%, -15%)"
        )
    errors.extend(
        f"capacity {name}: invalid resource restricted (only extended resources may be added)"
        for name in overlay.capacity
        if name in OVERLAY_RESTRICTED_RESOURCES
    )
    return errors


__all__ = [
    "API_VERSION",
    "CAPACITY_OVERLAY_APPLIED",
    "CONFLICT_MESSAGE",
    "HUGEPAGES_PREFIX",
    "KIND",
    "PRICE_OVERLAY_APPLIED",
    "READY",
    "REASON_CONFLICT",
    "REASON_RUNTIME_VALIDATION",
    "VALIDATION_SUCCEEDED",
    "NodeOverlay",
    "adjusted_price",
    "by_precedence",
    "from_manifest",
    "runtime_errors",
]
