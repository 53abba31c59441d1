"""The provisioner's planning path on manifests or a live cluster's objects (``nodewright plan``).

Either source is read into the World a pass observes by the functions' own reader
(``state.world.observe``) through an implementation of the cluster edge: the API server's
(``--kubeconfig``: read, never written, one snapshot as a pass reads) or a manifest bundle's
(``cluster.manifests.ManifestCluster``: validated and converted as ``nodewright validate`` does,
workloads as the pending pods their controllers would create, RuntimeClasses applied as admission
would; a document it cannot use is reported, a kind nothing read is listed as ignored, never dropped
silently). NodeOverlays (``karpenter.sh/v1alpha1``) change the prices and capacity of the NodePools'
instance types as the functions apply them with the stack's ``nodeOverlay`` setting
(``state.overlays``), each reported applied or why not. A saved DescribeCapacityReservations answer
(the ``{"CapacityReservations": [...]}`` that ``aws ec2 describe-capacity-reservations --output
json`` prints) stands for the account's reservations: those an EC2NodeClass's
``capacityReservationSelectorTerms`` select become reserved offerings (``saved_reservations``).
NodePools go through the same triage and the same scheduling bridge as a provisioning pass; only
the instance catalog is handed in. A static NodePool's replicas are planned as the pass keeps them
(``provisioning.static``): its missing NodeClaims, and those beyond its replicas it would delete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nodewright.cloud.pricetable import PriceTable
from nodewright.provisioning import nodeclaims, planning, static
from nodewright.state import nodepools
from nodewright.state.pods import key as pod_key
from nodewright.state.pods import node_name
from nodewright.state.world import World, observe


@dataclass
class WhatIf:
    claims: list[planning.ClaimPlan] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)
    placements: dict[str, str] = field(default_factory=dict)  # pod → node/NAME or nodeclaim/NAME
    skipped_nodepools: dict[str, str] = field(default_factory=dict)
    manifest_problems: list[str] = field(default_factory=list)
    rejected: int = 0  # documents left out of the plan because they are invalid
    ignored: list[str] = field(default_factory=list)  # documents of kinds a plan does not use
    pods: int = 0
    region: str = ""
    region_source: str = ""
    source: str = ""  # the manifests, or the kubeconfig's API server
    # The NodeOverlays' verdicts (name → applied, reason, message), and the capacity reservations read.
    overlays: dict[str, dict[str, Any]] = field(default_factory=dict)
    capacity_reservations: list[dict[str, Any]] = field(default_factory=list)
    static_nodepools: list[str] = field(
        default_factory=list
    )  # spec.replicas: their NodeClaims are claims too
    static_scale_down: list[str] = field(
        default_factory=list
    )  # NodeClaims beyond a static NodePool's replicas
    static_held: dict[str, str] = field(default_factory=dict)  # why a static NodePool short of replicas waits

    @property
    def cost_per_hour(self) -> float:
        return sum(c.price for c in self.claims)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "region": {"name": self.region, "from": self.region_source},
            "pods": self.pods,
            "nodeClaims": [
                {
                    "nodePool": c.nodepool,
                    "pods": [pod_key(p) for p in c.pods],
                    "instanceTypes": c.instance_types,
                    "zones": c.zones,
                    "zoneIDs": c.zone_ids,
                    "capacityTypes": c.capacity_types,
                    "pricePerHour": round(c.price, 5),
                    "instancePricePerHour": round(c.price - c.volume_price, 5),
                    "ebsPricePerHour": round(c.volume_price, 5),
                    "requests": c.requests,
                    "labels": c.labels,
                    "taints": c.taints,
                    "startupTaints": c.startup_taints,
                    "requirements": c.requirements,
                    "capacityReservations": c.reservation_ids,
                    "nodeOverlays": c.overlays,
                    "priceOverlayApplied": c.price_overlay,
                    "static": c.nodepool in self.static_nodepools,
                }
                for c in self.claims
            ],
            "staticScaleDown": self.static_scale_down,
            "staticHeld": self.static_held,
            "nodeOverlays": self.overlays,
            "capacityReservations": self.capacity_reservations,
            "costPerHour": round(self.cost_per_hour, 5),
            "existingCapacity": dict(sorted(self.placements.items())),
            "pending": self.pending,
            "skippedNodePools": self.skipped_nodepools,
            "manifestProblems": self.manifest_problems,
            "ignored": self.ignored,
        }

    def render(self) -> str:
        ebs = sum(c.volume_price for c in self.claims)
        lines = [
            f"{self.pods} pod(s) → {len(self.claims)} NodeClaim(s), ${self.cost_per_hour:.4f}/h "
            f"(EBS ${ebs:.4f}/h of it); {len(self.placements)} on existing capacity",
            f"catalog: region {self.region} ({self.region_source}); cluster: {self.source}",
        ]
        for claim in self.claims:
            shown = ", ".join(claim.instance_types[:5]) + (" …" if len(claim.instance_types) > 5 else "")
            where = f"NodePool {claim.nodepool}"
            if claim.nodepool in self.static_nodepools:
                where = f"static {where} (a replica)"
            lines.append(
                f"  NodeClaim on {where}: {len(claim.pods)} pod(s), ${claim.price:.4f}/h "
                f"(instance ${claim.price - claim.volume_price:.4f} + EBS ${claim.volume_price:.4f}), "
                f"{'/'.join(claim.capacity_types)} in {', '.join(claim.zones)}"
            )
            lines.append(f"      candidates ({len(claim.instance_types)}, cheapest first): {shown}")
            if claim.reservation_ids:
                lines.append("      in capacity reservation(s): " + ", ".join(claim.reservation_ids))
            if claim.overlays:
                lines.append(f"      priced by NodeOverlay(s): {', '.join(claim.overlays)}")
            if claim.taints:
                lines.append("      taints: " + ", ".join(_taint_text(t) for t in claim.taints))
        if self.static_scale_down:
            lines.append("Beyond their static NodePool's replicas, deleted (drained first):")
            lines.extend(f"  nodeclaim/{name}" for name in self.static_scale_down)
        if self.static_held:
            lines.append("Static NodePools short of their replicas:")
            lines.extend(f"  {reason}" for _, reason in sorted(self.static_held.items()))
        if self.static_nodepools:
            lines.append(
                "(static NodePools run on a stack deployed with -c staticCapacity=true, Karpenter's "
                "StaticCapacity gate; off by default)"
            )
        if self.placements:
            lines.append(f"{len(self.placements)} pod(s) fit on existing capacity:")
            lines.extend(f"  {pod} → {target}" for pod, target in sorted(self.placements.items()))
        if self.pending:
            lines.append(f"{len(self.pending)} pod(s) would stay pending:")
            lines.extend(f"  {pod}: {reason}" for pod, reason in sorted(self.pending.items()))
        if self.overlays:
            lines.append("NodeOverlays (the functions apply them with the stack's nodeOverlay setting):")
            for name, verdict in sorted(self.overlays.items()):
                why = "applied" if verdict["applied"] else f"not applied: {verdict['reason']}"
                lines.append(f"  {name}: {why}" + (f" ({verdict['message']})" if verdict["message"] else ""))
        if self.skipped_nodepools:
            lines.append("NodePools skipped:")
            lines.extend(f"  {reason}" for _, reason in sorted(self.skipped_nodepools.items()))
        if self.manifest_problems:
            lines.append("Manifest problems:")
            lines.extend(f"  {problem}" for problem in self.manifest_problems)
        if self.ignored:
            lines.append("Ignored (kinds a plan does not use):")
            lines.extend(f"  {item}" for item in self.ignored)
        return "\n".join(lines)


def _taint_text(taint: Mapping[str, str]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


class _OfflineCloud:
    """What a plan observes of the cloud, offline: the instance types of an EC2NodeClass (the catalog
    handed in, already priced), what a node's EBS volumes cost in the region, and the price table
    those catalogs make (what the nodes already running cost, for ``plan --consolidate``)."""

    def __init__(self, instance_types: Callable[[Mapping[str, Any]], list[Any]], region: str) -> None:
        self._instance_types = instance_types
        self.region = region
        self.nodeclasses: Sequence[Mapping[str, Any]] = ()  # whose catalogs price the running nodes

    def instance_types(self, nodeclass: Mapping[str, Any]) -> list[Any]:
        return self._instance_types(nodeclass)

    def prices(self) -> PriceTable:
        on_demand: dict[str, float] = {}
        spot: dict[tuple[str, str], float] = {}
        for nodeclass in self.nodeclasses:
            for kind in self._instance_types(nodeclass):
                for offering in kind.offerings:
                    if offering.capacity_type == "spot":
                        spot[(kind.name, offering.zone)] = offering.price
                    else:
                        on_demand[kind.name] = offering.price
        return PriceTable(on_demand=on_demand, spot=spot, source="the plan's catalog")

    def node_price(self, nodeclass: Mapping[str, Any]) -> float:
        from nodewright.cloud.ebs import node_storage

        return node_storage(nodeclass, self.region).per_hour


class _WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class _ReadOnlyPass:
    """What ``state.world.observe`` reads through: the cluster (only its list calls), the clock, the cloud."""

    cluster: Any
    cloud: _OfflineCloud
    clock: _WallClock = field(default_factory=_WallClock)
    # The deployment settings a World takes: Karpenter's default minValues policy (Strict); the
    # cluster's NodeOverlays are read (a plan shows what they do; the functions need the nodeOverlay gate).
    settings: Any = field(default_factory=lambda: SimpleNamespace(relax_min_values=False, node_overlay=True))


InstanceTypes = Callable[[Mapping[str, Any]], list[Any]]


def what_if(paths: Iterable[str | Path], instance_types: InstanceTypes, region: str) -> WhatIf:
    """Plan the manifests in ``paths``; ``instance_types(nodeclass)`` is the catalog for a v1 EC2NodeClass."""
    world, result = manifest_world(paths, instance_types, region)
    pending = [p for p in world.pods if not node_name(p)]
    return plan_world(world, pending, region, result)


def what_if_live(cluster: Any, instance_types: InstanceTypes, region: str) -> WhatIf:
    """Plan a live cluster's pending pods against its current objects (``live_world``)."""
    world, result = live_world(cluster, instance_types, region)
    pending = world.provisionable_pods()
    return plan_world(world, pending, region, result)


def manifest_world(
    paths: Iterable[str | Path], instance_types: InstanceTypes, region: str, *, clock: Any = None
) -> tuple[World, WhatIf]:
    """The World a pass would observe of the cluster the manifests describe, read by
    ``state.world.observe`` through ``cluster.manifests.ManifestCluster`` (the functions' own reader),
    and the result its problems and the kinds nothing read went into. ``clock``: what ``now`` is
    (default the wall clock)."""
    from nodewright.cluster.manifests import ManifestCluster

    cluster = ManifestCluster(paths)
    world = read_world(cluster, instance_types, region, clock=clock)
    bundle = cluster.report
    result = WhatIf(
        source=cluster.source,
        manifest_problems=list(bundle.problems),
        rejected=bundle.rejected,
        ignored=cluster.unread(),
        pending=dict(bundle.refused_pods),
    )
    return world, result


def live_world(
    cluster: Any, instance_types: InstanceTypes, region: str, *, clock: Any = None
) -> tuple[World, WhatIf]:
    """The World a pass observes of a live cluster (capacity first, then pods), read through list
    calls only."""
    world = read_world(cluster, instance_types, region, clock=clock)
    return world, WhatIf(source=f"live cluster at {cluster.host} (read-only)")


def read_world(cluster: Any, instance_types: InstanceTypes, region: str, *, clock: Any = None) -> World:
    """``state.world.observe`` over ``cluster`` (any ``state.interfaces.Cluster``: the API server's
    or a manifest bundle's), with the plan's offline cloud."""
    cloud = _OfflineCloud(instance_types, region)
    world = observe(_ReadOnlyPass(cluster, cloud, clock or _WallClock()))  # type: ignore[arg-type]
    cloud.nodeclasses = world.nodeclasses
    return world


def usable_nodepools(world: World) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The NodePools a pass would use (judged as the provisioner judges them), and why the others not."""
    verdicts = nodepools.triage(world, _pool_errors_only)
    return verdicts.usable, verdicts.skipped


def plan_world(world: World, pending: list[dict[str, Any]], region: str, result: WhatIf) -> WhatIf:
    """The provisioner's triage and planning over the world, filled into ``result``: the static
    NodePools' replicas as a pass with ``staticCapacity`` on keeps them (``provisioning.static``), then
    the pending pods."""
    result.pods = len(pending)
    result.region = result.region or region
    verdicts = nodepools.triage(world, _pool_errors_only)
    result.skipped_nodepools = verdicts.skipped
    scaled = static.StaticReport()
    replicas = static.plan(world, verdicts, scaled)
    result.static_held = scaled.held
    result.static_nodepools = sorted(p.name for p in world.pool_views if nodepools.is_static(p))
    result.static_scale_down = [
        nodeclaims.name_of(claim)
        for pool in world.pool_views
        if nodepools.is_static(pool)
        for claim in static.surplus(world, pool)
    ]
    view = planning.plan(world, pending, verdicts.usable)
    result.claims = [*replicas, *view.new_claims]
    overlays = world.overlays
    if overlays is not None:
        result.overlays = {
            name: {"applied": v.ok, "reason": v.reason, "message": v.message}
            for name, v in sorted(overlays.verdicts.items())
        }
        for claim in result.claims:  # "why this type": the overlays that priced its cheapest candidate
            if claim.instance_types:
                claim.overlays = overlays.applied(claim.nodepool, claim.instance_types[0]).names
    result.pending.update(view.unschedulable)
    result.placements = view.nominated
    return result


def saved_reservations(paths: Iterable[str | Path]) -> tuple[list[Any], list[str]]:
    """The capacity reservations of the saved DescribeCapacityReservations answers among the manifests
    (``cloud.reservations.from_saved_answer``), and a problem line per answer that cannot be read."""
    from nodewright.api.manifests import load_files, manifest_paths
    from nodewright.cloud.reservations import SavedAnswerError, from_saved_answer, is_saved_answer

    found: list[Any] = []
    problems: list[str] = []
    for loaded in load_files(manifest_paths(paths)):
        if not is_saved_answer(loaded.doc):
            continue
        try:
            found.extend(from_saved_answer(loaded.doc, f"{loaded.file}#{loaded.index}"))
        except SavedAnswerError as exc:
            problems.append(str(exc))
    return found, problems


def _pool_errors_only(document: Mapping[str, Any]) -> list[str]:
    """NodePools are judged as the provisioner judges them; EC2NodeClass gaps were reported above."""
    return [] if document.get("kind") == "EC2NodeClass" else nodepools.validation_errors(document)
