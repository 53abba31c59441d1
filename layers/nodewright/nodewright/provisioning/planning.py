"""The bridge between the cluster's objects and the pure scheduling core.

Input side: the usable NodePools with what they already hold (every NodeClaim counts,
in flight or not), their EC2NodeClasses' instance types from the cloud provider, the
nodes, NodeClaims, DaemonSets and volumes as the scheduling core's snapshot.
Output side: a ``PlanView`` the flow reads — NodeClaims to create (NodePool,
requirements with the candidate instance types cheapest first, requests, pods), the pods
nominated to capacity that exists or is in flight, and a reason for every other pod.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.provisioning import nodeclaims, nodepools
from nodewright.provisioning.launch import Launched
from nodewright.provisioning.world import World, pod_key

if TYPE_CHECKING:
    from nodewright.context import Context


@dataclass
class ClaimPlan:
    """One NodeClaim the plan wants: requirements already carry the candidate instance types
    (``instance_types``: their names, cheapest first)."""

    nodepool: str
    requirements: list[dict[str, Any]]
    requests: dict[str, str]
    pods: list[dict[str, Any]]
    instance_types: list[str] = field(default_factory=list)
    price: float = 0.0  # $/h: the cheapest candidate offering plus the node's EBS volumes
    zones: list[str] = field(default_factory=list)
    capacity_types: list[str] = field(default_factory=list)
    volume_price: float = 0.0  # the EBS part of ``price``
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    startup_taints: list[dict[str, str]] = field(default_factory=list)


@dataclass
class PlanView:
    """Keys are ``namespace/name`` of pods; ``seconds`` is the scheduling core's own time."""

    new_claims: list[ClaimPlan] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def validation_errors(document: Mapping[str, Any]) -> list[str]:
    """Error messages (not warnings) of ``nodewright.api`` validation for one stored object."""
    from nodewright import api

    findings = api.validate_document(dict(document))
    return [str(f) for f in findings if getattr(f, "is_error", True)]


class Catalog:
    """Instance types per EC2NodeClass for one pass, asked of the cloud provider at most once each."""

    def __init__(self, ctx: Context, world: World) -> None:
        self._ctx = ctx
        self._world = world
        self._by_class: dict[str, list[Any]] = {}

    def instance_types(self, nodeclass_name: str) -> list[Any]:
        if nodeclass_name not in self._by_class:
            nodeclass = self._world.nodeclass(nodeclass_name)
            self._by_class[nodeclass_name] = (
                list(self._ctx.cloud.instance_types(nodeclass)) if nodeclass else []
            )
        return self._by_class[nodeclass_name]

    def node_price(self, nodeclass_name: str) -> float:
        """$/h every node of the EC2NodeClass costs beyond its instance: its EBS volumes."""
        from nodewright.cloud import ebs

        nodeclass = self._world.nodeclass(nodeclass_name)
        region = getattr(getattr(self._ctx, "settings", None), "region", None)
        return ebs.node_storage(nodeclass, region).per_hour if nodeclass else 0.0

    def candidates_for(self, claim: Mapping[str, Any]) -> list[Any]:
        """The NodeClaim's ``node.kubernetes.io/instance-type In`` list, in its order (cheapest first)."""
        from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

        spec = claim.get("spec") or {}
        allowed: list[str] = []
        for requirement in spec.get("requirements") or []:
            if requirement.get("key") == labels.INSTANCE_TYPE and requirement.get("operator") == "In":
                allowed = [str(v) for v in requirement.get("values") or []]
        by_name = {
            t.name: t for t in self.instance_types(str((spec.get("nodeClassRef") or {}).get("name", "")))
        }
        if not allowed:
            return list(by_name.values())[:MAX_CANDIDATE_TYPES]
        return [by_name[name] for name in allowed if name in by_name][:MAX_CANDIDATE_TYPES]

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        """From the shared price table (one cached state-store read), not the catalog: an idle pass
        over a cluster full of nodes must not page through DescribeInstanceTypes for a metric."""
        table = self._ctx.cloud.catalog.prices()
        if capacity_type == labels.CAPACITY_TYPE_SPOT:
            return table.spot_price(instance_type, zone)
        return table.on_demand_price(instance_type)

    def cluster_cost_per_hour(
        self, claims: Iterable[Mapping[str, Any]], launched: Sequence[Launched]
    ) -> float:
        """Sum of the hourly prices of every launched NodeClaim (this pass's launches included)."""
        seen: set[str] = set()
        total = 0.0
        for item in launched:
            seen.add(item.nodeclaim)
            total += item.price or 0.0
        for claim in claims:
            name = nodeclaims.name_of(claim)
            claim_labels = (claim.get("metadata") or {}).get("labels") or {}
            if (
                name in seen
                or not nodeclaims.is_true(claim, nodeclaims.LAUNCHED)
                or nodeclaims.is_deleting(claim)
            ):
                continue
            price = self.price(
                claim_labels.get(labels.INSTANCE_TYPE, ""),
                claim_labels.get(labels.ZONE, ""),
                claim_labels.get(labels.CAPACITY_TYPE, ""),
            )
            total += price or 0.0
        return total


def plan(
    world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]], catalog: Catalog
) -> PlanView:
    """The scheduling core's plan for ``pending`` pods, against everything the world already holds."""
    snapshot, unreadable = build_snapshot(world, pending, pools, catalog)
    view = _schedule(world, pending, pools, catalog, snapshot)
    view.unschedulable.update(unreadable)
    return view


def build_snapshot(
    world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]], catalog: Catalog
) -> tuple[Any, dict[str, str]]:
    """The scheduling core's ``Snapshot`` (pending pods, nodes with their pods, in-flight NodeClaims
    as nodes, usable NodePools with instance types, limits and usage, DaemonSets, volumes), and
    the pods that could not be read, each with the reason."""
    from nodewright.scheduling import model

    bound: dict[str, list[Any]] = {}
    for pod in world.pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            bound.setdefault(node_name, []).append(model.pod_from_k8s(pod))
    nodes = [model.node_from_k8s(node, bound.get(nodeclaims.name_of(node), ())) for node in world.nodes]
    registered = set(world.nodes_by_provider_id())
    live_claims = [c for c in world.nodeclaims if not nodeclaims.is_deleting(c)]
    nodes += [
        in_flight_node(claim, catalog)
        for claim in live_claims
        if not nodeclaims.provider_id(claim) or nodeclaims.provider_id(claim) not in registered
    ]
    usage = nodepools.usage_by_nodepool(live_claims, lambda c: charged_capacity(c, catalog))
    pending_pods, unreadable = model.pods_from_k8s(pending)
    snapshot = model.Snapshot(
        pods=pending_pods,
        nodepools=[nodepool_input(pool, catalog, usage.get(nodeclaims.name_of(pool), {})) for pool in pools],
        nodes=nodes,
        daemonsets=[model.daemonset_from_k8s(d) for d in world.daemonsets],
        claims=[model.pvc_from_k8s(c) for c in world.persistent_volume_claims],
        volumes=[model.pv_from_k8s(v) for v in world.persistent_volumes],
        storage_classes=[model.storage_class_from_k8s(s) for s in world.storage_classes],
    )
    return snapshot, unreadable


def nodepool_input(pool: Mapping[str, Any], catalog: Catalog, in_use: Mapping[str, float]) -> Any:
    """A v1 NodePool as the scheduler's ``NodePoolInput`` (limits and usage in canonical units)."""
    from nodewright.scheduling import model
    from nodewright.scheduling.requirements import Requirements
    from nodewright.scheduling.resources import parse_resources

    spec = pool.get("spec") or {}
    template = spec.get("template") or {}
    template_spec = template.get("spec") or {}
    name = nodeclaims.name_of(pool)
    nodeclass = str((template_spec.get("nodeClassRef") or {}).get("name", ""))
    return model.NodePoolInput(
        name=name,
        requirements=Requirements.from_k8s(template_spec.get("requirements")),
        instance_types=catalog.instance_types(nodeclass),
        node_price=catalog.node_price(nodeclass),
        weight=int(spec.get("weight") or 0),
        labels={**((template.get("metadata") or {}).get("labels") or {}), labels.NODEPOOL: name},
        taints=tuple(model.taint_from_k8s(t) for t in template_spec.get("taints") or ()),
        startup_taints=tuple(model.taint_from_k8s(t) for t in template_spec.get("startupTaints") or ()),
        limits=parse_resources(spec.get("limits")),
        in_use={k: int(v) for k, v in in_use.items()},
    )


def in_flight_node(claim: Mapping[str, Any], catalog: Catalog) -> Any:
    """A NodeClaim without a registered Node, as capacity: its recorded allocatable once launched,
    before that the least any of its candidate types would give (what every candidate can hold)."""
    from nodewright.scheduling import model
    from nodewright.scheduling.requirements import Requirements
    from nodewright.scheduling.resources import parse_resources

    spec = claim.get("spec") or {}
    recorded = (claim.get("status") or {}).get("allocatable")
    if recorded:
        allocatable = parse_resources(recorded)
    else:
        candidates = catalog.candidates_for(claim)
        keys = set().union(*(c.allocatable for c in candidates)) if candidates else set()
        allocatable = {k: min(c.allocatable.get(k, 0) for c in candidates) for k in keys}
    node_labels = {
        **Requirements.from_k8s(spec.get("requirements")).labels(),
        **((claim.get("metadata") or {}).get("labels") or {}),
    }
    return model.Node(
        name=nodeclaims.name_of(claim),
        labels=node_labels,
        allocatable=allocatable,
        taints=tuple(model.taint_from_k8s(t) for t in spec.get("taints") or ()),
        in_flight=True,
    )


def charged_capacity(claim: Mapping[str, Any], catalog: Catalog) -> dict[str, float]:
    """What a NodeClaim counts against its NodePool's limits: its capacity once launched, before
    that the largest candidate's (Karpenter charges in-flight claims with the largest type)."""
    from nodewright.scheduling.resources import parse_resources

    recorded = (claim.get("status") or {}).get("capacity")
    if recorded:
        return dict(parse_resources(recorded))
    candidates = catalog.candidates_for(claim)
    keys = set().union(*(c.capacity for c in candidates)) if candidates else set()
    return {k: max(c.capacity.get(k, 0) for c in candidates) for k in keys}


def _schedule(
    world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]], catalog: Catalog, snapshot: Any
) -> PlanView:
    """Run the scheduling core and translate its ``Plan`` into what the flow creates and reports."""
    from nodewright import scheduling
    from nodewright.scheduling.resources import format_resource
    from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

    started = time.perf_counter()
    result = scheduling.plan(snapshot)
    view = PlanView(seconds=time.perf_counter() - started)
    claim_names = {nodeclaims.name_of(c) for c in world.nodeclaims}
    for pod, target in result.placements.items():
        view.nominated[pod] = f"nodeclaim/{target}" if target in claim_names else f"node/{target}"
    view.unschedulable.update(result.unschedulable)
    by_key = {pod_key(p): p for p in pending}
    for claim in result.new_claims:
        names = [c.name for c in claim.instance_types][:MAX_CANDIDATE_TYPES]
        requirements = [r for r in claim.requirements.to_k8s() if r.get("key") != labels.INSTANCE_TYPE]
        # The candidates in the scheduler's order (cheapest first): the launcher and a resumed
        # launch after a crash read them back from here.
        requirements.append({"key": labels.INSTANCE_TYPE, "operator": "In", "values": names})
        view.new_claims.append(
            ClaimPlan(
                nodepool=claim.nodepool,
                requirements=requirements,
                requests={k: format_resource(k, v) for k, v in sorted(claim.requests.items())},
                pods=[by_key[k] for k in claim.pods if k in by_key],
                instance_types=names,
                price=claim.price,
                zones=sorted({o.zone for c in claim.instance_types for o in c.offerings}),
                capacity_types=sorted({o.capacity_type for c in claim.instance_types for o in c.offerings}),
                volume_price=claim.volume_price,
                labels={**claim.labels, **claim.requirements.labels()},
                taints=[_taint(t) for t in claim.taints],
                startup_taints=[_taint(t) for t in claim.startup_taints],
            )
        )
    return view


def _taint(taint: Any) -> dict[str, str]:
    """A scheduling-core Taint in the Kubernetes shape."""
    shaped = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        shaped["value"] = taint.value
    return shaped
