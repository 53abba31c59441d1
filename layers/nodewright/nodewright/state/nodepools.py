"""Which NodePools a pass may use, and what each one already holds against its limits: one triage
for every flow (provisioning plans only onto usable NodePools; disruption only disrupts within them).

A NodePool is usable when it is not being deleted, it is valid, and its EC2NodeClass exists, is
valid and is not reported not ready. An unusable one is skipped with a reason and status conditions
saying what is wrong (``ValidationSucceeded``, ``NodeClassReady``, ``Ready``); the others keep
working. A field Nodewright does not act on never makes a NodePool unusable: ``FieldsNotActedOn``
and an event name it. ``record`` writes the conditions only when they change, so an idle pass
writes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodewright.api.features import (
    ALL_ACTED_ON_REASON,
    FIELDS_NOT_ACTED_ON,
    NOT_ACTED_ON_REASON,
    STATIC_CAPACITY_OFF,
    not_acted_on,
    summary,
)
from nodewright.api.labels import DISRUPTED_TAINT_KEY
from nodewright.cluster.objects import condition, name_of, set_condition
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj
    from nodewright.state.views import ClaimView, PoolView

VALIDATION_SUCCEEDED = "ValidationSucceeded"
NODECLASS_READY = "NodeClassReady"
READY = "Ready"

Validator = Callable[[Mapping[str, Any]], list[str]]


@dataclass
class PoolTriage:
    """NodePools split into those a pass may use (highest weight first) and those skipped (each with
    its reason), and the status conditions each NodePool should carry (``changed``: the ones whose
    conditions differ from what the cluster holds)."""

    usable: list[Obj] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    conditions: dict[str, list[Obj]] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)

    def is_usable(self, name: str) -> bool:
        return any(name_of(pool) == name for pool in self.usable)


def validation_errors(document: Mapping[str, Any]) -> list[str]:
    """Error messages (not warnings) of ``nodewright.api`` validation for one stored object."""
    from nodewright.api.validation import validate_document

    return [str(f) for f in validate_document(dict(document)) if f.is_error]


def triage(world: World, validate: Validator | None = None, *, static_capacity: bool = True) -> PoolTriage:
    """Validate every NodePool and its EC2NodeClass (pure: ``record`` writes the verdicts).

    ``validate(doc)`` returns the error messages for one document (empty when valid); by default
    ``validation_errors``. The conditions are Karpenter v1.14's, with its reasons (True: the type's
    name): ``ValidationSucceeded``; ``NodeClassReady`` (False: ``NodeClassNotFound``, or
    ``NodeClassNotReady`` when the EC2NodeClass is invalid or its own ``Ready`` is False, as the
    status controller ``nodewright.status`` writes it); ``Ready`` (False: ``UnhealthyDependents``);
    and Nodewright's ``FieldsNotActedOn``, which names the fields set but not acted on and never
    makes the NodePool unusable: ``spec.replicas`` too when ``static_capacity`` (the stack's setting,
    Karpenter's StaticCapacity gate) is off.
    """
    validate = validate or validation_errors
    result = PoolTriage()
    nodeclass_errors = {name_of(c): validate(c) for c in world.nodeclasses}
    now = world.taken_at
    for pool in sorted(world.pool_views, key=_weight_order):
        name = pool.name
        if pool.deleting:
            result.skipped[name] = f"NodePool {name} is being deleted"
            continue
        errors = validate(pool.raw)
        class_reason, class_problem = _nodeclass_problem(world, pool.nodeclass, nodeclass_errors)
        status = _Conditions(pool, now)
        put = status.put
        if errors:
            message = "; ".join(errors)
            put(VALIDATION_SUCCEEDED, False, "ValidationFailed", message)
            result.skipped[name] = f"NodePool {name} is invalid: {message}"
        else:
            put(VALIDATION_SUCCEEDED, True, VALIDATION_SUCCEEDED)
        put(NODECLASS_READY, not class_problem, class_reason, class_problem)
        if class_problem and name not in result.skipped:
            result.skipped[name] = f"NodePool {name}: {class_problem}"
        inert = not_acted_on(pool.raw)
        if not static_capacity and is_static(pool):
            inert.append(STATIC_CAPACITY_OFF)
        put(
            FIELDS_NOT_ACTED_ON,
            bool(inert),
            NOT_ACTED_ON_REASON if inert else ALL_ACTED_ON_REASON,
            summary(inert),
        )
        ready = name not in result.skipped
        put(READY, ready, READY if ready else "UnhealthyDependents", "" if ready else result.skipped[name])
        result.conditions[name] = conditions = status.conditions
        if _changed(pool, conditions):
            result.changed.append(name)
        if ready:
            result.usable.append(pool.raw)
    return result


class _Conditions:
    """A NodePool's status conditions being set at one moment, each stamped with its generation."""

    def __init__(self, pool: PoolView, now: datetime) -> None:
        self.conditions: list[Obj] = pool.conditions_to_write()
        self.generation = pool.generation
        self.now = now

    def put(self, kind: str, ok: bool, reason: str, message: str = "") -> None:
        self.conditions = set_condition(
            self.conditions,
            kind,
            ok,
            reason=reason,
            message=message,
            now=self.now,
            observed_generation=self.generation,
        )


def _nodeclass_problem(world: World, name: str, errors: Mapping[str, list[str]]) -> tuple[str, str]:
    """(reason, message) of the NodePool's ``NodeClassReady`` ("" message: it is ready)."""
    if name not in errors:
        return (
            "NodeClassNotFound",
            f"EC2NodeClass {name!r} not found; apply it or fix spec.template.spec.nodeClassRef",
        )
    if errors[name]:
        return "NodeClassNotReady", f"EC2NodeClass {name!r} is invalid: " + "; ".join(errors[name])
    ready = condition(world.nodeclass(name) or {}, READY)
    if ready is not None and ready.get("status") == "False":
        return (
            "NodeClassNotReady",
            f"EC2NodeClass {name!r} is not ready: {ready.get('message') or ready.get('reason')}",
        )
    return NODECLASS_READY, ""


def record(ctx: Context, world: World, verdicts: PoolTriage) -> None:
    """Write changed conditions to the NodePools' status; an event when a NodePool becomes unusable,
    and one when the fields it sets but Nodewright does not act on change."""
    for name in verdicts.changed:
        view = world.pool_view(name)
        pool = view.raw if view is not None else {"kind": "NodePool", "metadata": {"name": name}}
        ctx.cluster.patch_nodepool_status(name, {"conditions": verdicts.conditions[name]})
        if name in verdicts.skipped:
            ctx.cluster.record_event(pool, "InvalidNodePool", verdicts.skipped[name], event_type="Warning")
            ctx.logger.warning("NodePool skipped", extra={"nodepool": name, "reason": verdicts.skipped[name]})
        inert = _message(verdicts.conditions[name], FIELDS_NOT_ACTED_ON, only_true=True)
        if inert and inert != _message(view.conditions if view is not None else [], FIELDS_NOT_ACTED_ON):
            ctx.cluster.record_event(pool, FIELDS_NOT_ACTED_ON, inert, event_type="Warning")


def _message(conditions: Iterable[Mapping[str, Any]], kind: str, *, only_true: bool = False) -> str:
    for cond in conditions:
        if cond.get("type") == kind and (not only_true or cond.get("status") == "True"):
            return str(cond.get("message") or "")
    return ""


def usage(world: World, candidate_limit: int) -> dict[str, dict[str, float]]:
    """Resources each NodePool already holds: every live NodeClaim counts, launched or in flight
    (``charged_capacity``), and one ``nodes`` each."""
    by_pool: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for claim in world.claim_views:
        if not claim.nodepool or claim.deleting:
            continue
        for resource, amount in charged_capacity(world, claim, candidate_limit).items():
            by_pool[claim.nodepool][resource] += amount
        by_pool[claim.nodepool]["nodes"] += 1
    return {pool: dict(resources) for pool, resources in by_pool.items()}


def charged_capacity(world: World, claim: ClaimView, candidate_limit: int) -> dict[str, float]:
    """What a NodeClaim counts against its NodePool's limits: its capacity once launched, before
    that the largest candidate's (Karpenter charges in-flight claims with the largest type)."""
    from nodewright.scheduling.resources import parse_resources

    if claim.capacity:
        return {k: float(v) for k, v in parse_resources(claim.capacity).items()}
    candidates = world.candidates_for(claim, candidate_limit)
    keys: set[str] = set().union(*(c.capacity for c in candidates)) if candidates else set()
    return {k: float(max(c.capacity.get(k, 0) for c in candidates)) for k in keys}


# --- static NodePools (``spec.replicas``) ---------------------------------------------------------


def replicas(pool: PoolView) -> int | None:
    """A static NodePool's ``spec.replicas``; None for a dynamic one."""
    return pool.replicas


def is_static(pool: PoolView) -> bool:
    """Karpenter's ``IsStaticNodePool``: ``spec.replicas`` is set. Such a NodePool keeps that many
    nodes whatever the pods; no plan places pending pods on a new NodeClaim of it, consolidation and
    emptiness leave its nodes alone (``provisioning.static`` runs it)."""
    return replicas(pool) is not None


def node_limit(pool: PoolView) -> int | None:
    """``spec.limits.nodes`` (the only limit a static NodePool may have), or None."""
    from nodewright.scheduling.resources import NODES, parse_resources

    limit = parse_resources(pool.limits).get(NODES)
    return None if limit is None else int(limit)


@dataclass
class StaticNodes:
    """A static NodePool's NodeClaims as Karpenter's NodePoolState counts them: ``active`` (neither
    being deleted nor replaced), ``drifting`` (their node tainted ``karpenter.sh/disrupted`` by a
    disruption command that replaces them first), ``deleting``. ``limits.nodes`` bounds all three."""

    active: list[ClaimView] = field(default_factory=list)
    drifting: list[ClaimView] = field(default_factory=list)
    deleting: list[ClaimView] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.active) + len(self.drifting) + len(self.deleting)


def static_nodes(world: World, pool_name: str) -> StaticNodes:
    found = StaticNodes()
    for claim in world.claim_views:
        if claim.nodepool != pool_name:
            continue
        node = world.node_view_of(claim)
        if claim.deleting:
            found.deleting.append(claim)
        elif node is not None and node.has_taint(DISRUPTED_TAINT_KEY):
            found.drifting.append(claim)
        else:
            found.active.append(claim)
    return found


def static_room(pool: PoolView, nodes: StaticNodes, wanted: int) -> int:
    """How many of ``wanted`` more NodeClaims ``limits.nodes`` lets the NodePool have (Karpenter's
    ``ReserveNodeCount``: active, drifting and deleting ones all count until they are gone)."""
    limit = node_limit(pool)
    return wanted if limit is None else max(0, min(wanted, limit - nodes.total))


def static_template(world: World, pool: PoolView) -> tuple[Any, str]:
    """The NodeClaim (the scheduling core's ``NewClaim``) one more replica of a static NodePool is,
    or None and why none can be launched (``scheduling.static.static_claim``)."""
    from nodewright.scheduling.static import static_claim
    from nodewright.state.snapshot import nodepool_input

    (typed,) = world.nodepool_models([pool.raw])
    return static_claim(nodepool_input(typed, world, {}))


def static_drift_replacement(world: World, pool: PoolView) -> tuple[Any, str]:
    """The one-for-one replacement of a drifted node of a static NodePool (Karpenter's ``StaticDrift``),
    or None and why it waits: while the NodePool scales down (more nodes than replicas), or when
    ``limits.nodes`` leaves no room for the replacement beside the node it replaces."""
    name = pool.name
    nodes = static_nodes(world, name)
    wanted = replicas(pool) or 0
    if len(nodes.active) + len(nodes.drifting) > wanted:
        return None, f"NodePool {name} has more nodes than its {wanted} replicas: it scales down first"
    if static_room(pool, nodes, 1) < 1:
        return None, f"NodePool {name}: limits.nodes {node_limit(pool)} leaves no room for a replacement"
    return static_template(world, pool)


def orphaned_claims(world: World) -> list[Obj]:
    """NodeClaims whose NodePool is gone or being deleted: they are deleted gracefully."""
    live = {p.name for p in world.pool_views if not p.deleting}
    return [c.raw for c in world.claim_views if not c.deleting and c.nodepool and c.nodepool not in live]


def _weight_order(pool: PoolView) -> tuple[int, str]:
    """Higher ``spec.weight`` first, then by name, so plans are deterministic."""
    return (-pool.weight, pool.name)


def _changed(pool: PoolView, conditions: Iterable[Mapping[str, Any]]) -> bool:
    def essence(conds: Iterable[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
        return {(c.get("type"), c.get("status"), c.get("reason"), c.get("message") or "") for c in conds}

    return essence(pool.conditions) != essence(conditions)
