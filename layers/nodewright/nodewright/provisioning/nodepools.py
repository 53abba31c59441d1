"""Which NodePools a pass may use, and what each one already consumes of its limits.

An invalid NodePool (or one whose EC2NodeClass is missing or invalid) is skipped
with a status condition and an event saying what is wrong; the other NodePools keep
working. Conditions are written only when they change, so an idle pass writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.cluster.resources import NODEPOOLS
from nodewright.provisioning import nodeclaims
from nodewright.provisioning.world import World

if TYPE_CHECKING:
    from nodewright.context import Context

VALIDATION_SUCCEEDED = "ValidationSucceeded"
NODECLASS_READY = "NodeClassReady"
READY = "Ready"


@dataclass
class PoolTriage:
    """NodePools split into those a plan may use and those skipped (each with its reason), and the
    status conditions each NodePool should carry (``changed``: the ones whose conditions differ)."""

    usable: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)


def triage(world: World, validate: Callable[[Mapping[str, Any]], list[str]]) -> PoolTriage:
    """Validate every NodePool and its EC2NodeClass (pure: ``record`` writes the verdicts).

    ``validate(doc)`` returns the error messages for one document (empty when valid).
    """
    result = PoolTriage()
    nodeclass_errors = {nodeclaims.name_of(c): validate(c) for c in world.nodeclasses}
    now = world.taken_at
    for pool in sorted(world.nodepools, key=_weight_order):
        name = nodeclaims.name_of(pool)
        if nodeclaims.is_deleting(pool):
            result.skipped[name] = f"NodePool {name} is being deleted"
            continue
        errors = validate(pool)
        ref = ((pool.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef") or {}
        class_name = ref.get("name", "")
        class_problem = ""
        if class_name not in nodeclass_errors:
            class_problem = (
                f"EC2NodeClass {class_name!r} not found; apply it or fix spec.template.spec.nodeClassRef"
            )
        elif nodeclass_errors[class_name]:
            class_problem = f"EC2NodeClass {class_name!r} is invalid: " + "; ".join(
                nodeclass_errors[class_name]
            )
        conditions = list((pool.get("status") or {}).get("conditions") or [])
        if errors:
            message = "; ".join(errors)
            conditions = nodeclaims.set_condition(
                conditions, VALIDATION_SUCCEEDED, False, reason="ValidationFailed", message=message, now=now
            )
            result.skipped[name] = f"NodePool {name} is invalid: {message}"
        else:
            conditions = nodeclaims.set_condition(
                conditions, VALIDATION_SUCCEEDED, True, reason="Valid", now=now
            )
        conditions = nodeclaims.set_condition(
            conditions,
            NODECLASS_READY,
            not class_problem,
            reason="NodeClassNotReady" if class_problem else "Ready",
            message=class_problem,
            now=now,
        )
        if class_problem and name not in result.skipped:
            result.skipped[name] = f"NodePool {name}: {class_problem}"
        ready = name not in result.skipped
        conditions = nodeclaims.set_condition(
            conditions,
            READY,
            ready,
            reason="Ready" if ready else "NotReady",
            message="" if ready else result.skipped[name],
            now=now,
        )
        result.conditions[name] = conditions
        if _changed(pool, conditions):
            result.changed.append(name)
        if ready:
            result.usable.append(pool)
    return result


def record(ctx: Context, world: World, verdicts: PoolTriage) -> None:
    """Write changed conditions to the NodePools' status; an event when a NodePool becomes unusable."""
    for name in verdicts.changed:
        ctx.cluster.patch(
            NODEPOOLS, name, {"status": {"conditions": verdicts.conditions[name]}}, subresource="status"
        )
        if name in verdicts.skipped:
            pool = world.nodepool(name) or {"kind": "NodePool", "metadata": {"name": name}}
            ctx.cluster.record_event(pool, "InvalidNodePool", verdicts.skipped[name], event_type="Warning")
            ctx.logger.warning("NodePool skipped", extra={"nodepool": name, "reason": verdicts.skipped[name]})


def _weight_order(pool: Mapping[str, Any]) -> tuple[int, str]:
    """Higher ``spec.weight`` first, then by name, so plans are deterministic."""
    return (-int((pool.get("spec") or {}).get("weight") or 0), nodeclaims.name_of(pool))


def _changed(pool: Mapping[str, Any], conditions: list[dict[str, Any]]) -> bool:
    def essence(conds: Iterable[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
        return {(c.get("type"), c.get("status"), c.get("reason"), c.get("message") or "") for c in conds}

    return essence((pool.get("status") or {}).get("conditions") or []) != essence(conditions)


def usage_by_nodepool(
    claims: Iterable[Mapping[str, Any]], charge: Callable[[Mapping[str, Any]], Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """Resources each NodePool already holds: every NodeClaim counts, launched or still in flight.

    ``charge(claim)`` gives one claim's resources (its ``status.capacity`` once launched; before
    that, the largest candidate type's capacity, as Karpenter charges in-flight claims). Each
    claim also counts one ``nodes``.
    """
    usage: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for claim in claims:
        pool = nodeclaims.nodepool_of(claim)
        if not pool:
            continue
        for resource, amount in charge(claim).items():
            usage[pool][resource] += amount
        usage[pool]["nodes"] += 1
    return {pool: dict(resources) for pool, resources in usage.items()}


def orphaned_claims(world: World) -> list[dict[str, Any]]:
    """NodeClaims whose NodePool is gone or being deleted: they are deleted gracefully."""
    live = {nodeclaims.name_of(p) for p in world.nodepools if not nodeclaims.is_deleting(p)}
    return [
        claim
        for claim in world.nodeclaims
        if not nodeclaims.is_deleting(claim)
        and (pool := ((claim.get("metadata") or {}).get("labels") or {}).get(labels.NODEPOOL))
        and pool not in live
    ]
