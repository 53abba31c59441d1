"""The status of EC2NodeClasses and NodePools, kept as Karpenter v1.14's status controllers keep it, for
the users, dashboards and GitOps tools (Argo CD, Flux) that read ``kubectl get ec2nodeclass`` and
``kubectl get nodepool``. One entry point, ``reconcile(ctx)``, that the ``disruption`` function runs
after each of its passes (every minute): it already reads the same objects and resolves the same
selectors for drift, with the same per-container caches, and it leaves the provisioner's loop (the
latency users wait on) untouched.

Per EC2NodeClass (not being deleted), from what EC2 answers now (``CloudProvider.nodeclass_status``):

- ``status.subnets`` (most free IPs first, with zone IDs), ``securityGroups`` (with names), ``amis``
  (with their requirements), ``instanceProfile`` (created for ``role`` when needed),
  ``capacityReservations`` (the active reservations the terms select, ``expiring`` from 40 minutes
  before a Capacity Block's end);
- conditions with Karpenter's types and reasons: ``SubnetsReady``, ``SecurityGroupsReady``,
  ``AMIsReady``, ``InstanceProfileReady``, ``CapacityReservationsReady`` (informational),
  ``PlacementGroupReady`` (when a group is selected),
  ``ValidationSucceeded``, Nodewright's informational ``FieldsNotActedOn``, and the root ``Ready``
  (True when every other but ``FieldsNotActedOn`` is; else ``UnhealthyDependents`` naming them).

Per NodeOverlay (with the stack's ``nodeOverlay`` gate, Karpenter's): ``ValidationSucceeded`` as
Karpenter's nodeoverlay controller writes it (True; False ``RuntimeValidation`` with the errors, or
``Conflict`` "conflict with another overlay") under the root ``Ready`` (``UnhealthyDependents``), from
the same resolution every plan applies (``state.overlays``).

Per NodePool: ``status.nodes`` and ``status.resources`` (the capacity of its NodeClaims, ``nodes``
included, as Karpenter's counter controller sums it), ``nodeClassObservedGeneration``, and the
conditions of the one NodePool triage (``state.nodepools``), which now sees the EC2NodeClass's
``Ready``: a NodePool whose EC2NodeClass resolves no subnet is not Ready, as in Karpenter.

A status is written only when it changed (conditions compared without their transition times), so a
quiet minute writes nothing. Events: ``NodeClassNotReady`` when an EC2NodeClass becomes not ready,
``FieldsNotActedOn`` when the fields it sets that Nodewright does not act on change.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api.features import (
    ALL_ACTED_ON_REASON,
    FIELDS_NOT_ACTED_ON,
    NOT_ACTED_ON_REASON,
    not_acted_on,
    summary,
)
from nodewright.cluster.objects import is_deleting, name_of, nodeclass_name, set_condition
from nodewright.state import nodepools
from nodewright.state.world import World, nodepool_name

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj

READY = "Ready"
VALIDATION_SUCCEEDED = "ValidationSucceeded"
# Conditions that do not hold an object's readiness: a failed DescribeCapacityReservations costs the
# reserved offerings of that minute, never the EC2NodeClass's on-demand and spot launches.
INFORMATIONAL = frozenset({FIELDS_NOT_ACTED_ON, "CapacityReservationsReady"})


@dataclass
class StatusReport:
    """What one reconcile wrote: the objects whose status changed, and the EC2NodeClasses not ready."""

    nodeclasses: list[str] = field(default_factory=list)
    nodepools: list[str] = field(default_factory=list)
    not_ready: dict[str, str] = field(default_factory=dict)
    nodeoverlays: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "nodeclassStatuses": self.nodeclasses,
            "nodepoolStatuses": self.nodepools,
            "nodeclassesNotReady": self.not_ready,
            "nodeoverlayStatuses": self.nodeoverlays,
        }


def reconcile(ctx: Context) -> StatusReport:
    """Bring every EC2NodeClass's and NodePool's status up to date (see the module)."""
    report = StatusReport()
    cluster = ctx.cluster
    nodeclasses = cluster.list_ec2nodeclasses()
    for index, nodeclass in enumerate(nodeclasses):
        if not is_deleting(nodeclass):
            nodeclasses[index] = _nodeclass(ctx, nodeclass, report)
    world = World(
        taken_at=ctx.clock.now(),
        nodeclaims=cluster.list_nodeclaims(),
        nodes=[],
        pods=[],
        nodepools=cluster.list_nodepools(),
        nodeclasses=nodeclasses,
    )
    verdicts = nodepools.triage(world, static_capacity=ctx.settings.static_capacity)
    nodepools.record(ctx, world, verdicts)
    counts = _counts(world)
    for pool in world.nodepools:
        name = name_of(pool)
        nodeclass = world.nodeclass(nodeclass_name(pool)) or {}
        wanted: dict[str, Any] = {
            "nodes": int(counts[name].get("nodes", 0)),
            "resources": {k: _quantity(k, v) for k, v in sorted(counts[name].items())},
        }
        generation = (nodeclass.get("metadata") or {}).get("generation")
        if generation is not None:
            wanted["nodeClassObservedGeneration"] = generation
        current = pool.get("status") or {}
        if any(current.get(k) != v for k, v in wanted.items()):
            cluster.patch_nodepool_status(name, wanted)
            report.nodepools.append(name)
        elif name in verdicts.changed:
            report.nodepools.append(name)
    if ctx.settings.node_overlay:
        world.cloud = ctx.cloud
        world.nodeoverlays = cluster.list_nodeoverlays()
        _nodeoverlays(ctx, world, report)
    return report


def _nodeoverlays(ctx: Context, world: World, report: StatusReport) -> None:
    """Each NodeOverlay's ``ValidationSucceeded`` and ``Ready`` (see the module), written when changed."""
    resolution = world.overlays
    if resolution is None:
        return
    for overlay in world.nodeoverlays:
        name = name_of(overlay)
        verdict = resolution.verdicts.get(name)
        if verdict is None:  # a document without a name: the API server never stores one
            continue
        status = _Status(overlay, ctx.clock.now())
        status.put(VALIDATION_SUCCEEDED, verdict.ok, verdict.reason, verdict.message)
        unhealthy = "" if verdict.ok else f"{VALIDATION_SUCCEEDED}=False"
        status.put(READY, verdict.ok, READY if verdict.ok else "UnhealthyDependents", unhealthy)
        wanted = {"conditions": status.conditions}
        if not _same(overlay.get("status") or {}, wanted):
            ctx.cluster.patch_nodeoverlay_status(name, wanted)
            report.nodeoverlays.append(name)


def _nodeclass(ctx: Context, nodeclass: Obj, report: StatusReport) -> Obj:
    """One EC2NodeClass's status (see the module); the object as it is after the write."""
    name = name_of(nodeclass)
    resolution = ctx.cloud.nodeclass_status(nodeclass)
    status = _Status(nodeclass, ctx.clock.now())
    for kind, ok, reason, message in resolution.conditions:
        status.put(kind, ok, reason, message)
    if not any(kind == "PlacementGroupReady" for kind, *_ in resolution.conditions):
        status.drop("PlacementGroupReady")
    errors = nodepools.validation_errors(nodeclass)
    status.put(
        VALIDATION_SUCCEEDED,
        not errors,
        VALIDATION_SUCCEEDED if not errors else "ValidationFailed",
        "; ".join(errors),
    )
    inert = not_acted_on(nodeclass)
    status.put(
        FIELDS_NOT_ACTED_ON,
        bool(inert),
        NOT_ACTED_ON_REASON if inert else ALL_ACTED_ON_REASON,
        summary(inert),
    )
    unhealthy = [
        f"{c['type']}={c['status']} ({c.get('message') or c.get('reason')})"
        for c in status.conditions
        if c["type"] not in INFORMATIONAL | {READY} and c["status"] != "True"
    ]
    status.put(READY, not unhealthy, READY if not unhealthy else "UnhealthyDependents", "; ".join(unhealthy))
    wanted = {**resolution.status, "conditions": status.conditions}
    # Parts that no longer resolve are cleared, as Karpenter clears them (a merge patch drops a null);
    # capacity reservations only when no term selects any (a failed read keeps the list it had).
    for key in ("subnets", "securityGroups", "amis", "instanceProfile"):
        wanted.setdefault(key, None)
    if not (nodeclass.get("spec") or {}).get("capacityReservationSelectorTerms"):
        wanted.setdefault("capacityReservations", None)
    current = nodeclass.get("status") or {}
    if not _same(current, wanted):
        written = ctx.cluster.patch_ec2nodeclass_status(name, wanted)
        report.nodeclasses.append(name)
        _events(ctx, nodeclass, current, status.conditions)
        nodeclass = written or {**nodeclass, "status": {k: v for k, v in wanted.items() if v is not None}}
    if unhealthy:
        report.not_ready[name] = "; ".join(unhealthy)
    return nodeclass


def _events(ctx: Context, nodeclass: Obj, before: dict[str, Any], conditions: list[Obj]) -> None:
    old = {c.get("type"): c for c in before.get("conditions") or []}
    new = {c["type"]: c for c in conditions}
    if new[READY]["status"] == "False" and (old.get(READY) or {}).get("status") != "False":
        ctx.cluster.record_event(nodeclass, "NodeClassNotReady", new[READY]["message"], event_type="Warning")
        ctx.logger.warning(
            "EC2NodeClass not ready", extra={"nodeclass": name_of(nodeclass), "reason": new[READY]["message"]}
        )
    inert = new[FIELDS_NOT_ACTED_ON]
    if inert["status"] == "True" and inert["message"] != (old.get(FIELDS_NOT_ACTED_ON) or {}).get("message"):
        ctx.cluster.record_event(nodeclass, FIELDS_NOT_ACTED_ON, inert["message"], event_type="Warning")


class _Status:
    """An object's conditions being set at one moment, each with the object's generation."""

    def __init__(self, obj: Obj, now: Any) -> None:
        self.conditions: list[Obj] = list((obj.get("status") or {}).get("conditions") or [])
        self.generation = (obj.get("metadata") or {}).get("generation")
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

    def drop(self, kind: str) -> None:
        self.conditions = [c for c in self.conditions if c.get("type") != kind]


def _same(current: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether writing ``wanted`` would change nothing (transition times aside)."""

    def essence(conditions: list[Obj]) -> set[tuple[Any, ...]]:
        return {
            (
                c.get("type"),
                c.get("status"),
                c.get("reason"),
                c.get("message") or "",
                c.get("observedGeneration"),
            )
            for c in conditions
        }

    for key, value in wanted.items():
        if key == "conditions":
            if essence(current.get("conditions") or []) != essence(value):
                return False
        elif current.get(key) != value:
            return False
    return True


def _counts(world: World) -> dict[str, dict[str, float]]:
    """Per NodePool: its NodeClaims (``nodes``, also a resource its limits may cap) and the sum of
    their recorded capacity."""
    from nodewright.scheduling.resources import parse_resources

    found: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for pool in world.nodepools:
        found[name_of(pool)]["nodes"] += 0
    for claim in world.nodeclaims:
        owner = nodepool_name(claim)
        if not owner or owner not in found:
            continue
        found[owner]["nodes"] += 1
        for resource, amount in parse_resources((claim.get("status") or {}).get("capacity")).items():
            found[owner][resource] += amount
    return found


def _quantity(resource: str, amount: float) -> str:
    from nodewright.scheduling.resources import format_resource

    return format_resource(resource, int(amount))
