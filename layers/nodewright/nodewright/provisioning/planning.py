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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.provisioning import nodeclaims
from nodewright.state import nodepools
from nodewright.state.pods import is_terminal
from nodewright.state.pods import key as pod_key
from nodewright.state.world import World, nodeclass_name

if TYPE_CHECKING:
    from nodewright.scheduling import InstanceType


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


def plan(world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]]) -> PlanView:
    """The scheduling core's plan for ``pending`` pods, against everything the world already holds."""
    snapshot, unreadable = build_snapshot(world, pending, pools)
    view = _schedule(world, pending, snapshot)
    view.unschedulable.update(unreadable)
    return view


def build_snapshot(
    world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]]
) -> tuple[Any, dict[str, str]]:
    """The scheduling core's ``Snapshot`` (pending pods, nodes with their pods, in-flight NodeClaims
    as nodes, usable NodePools with instance types, limits and usage, DaemonSets, volumes), and
    the pods that could not be read, each with the reason."""
    from nodewright.scheduling import model
    from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

    bound: dict[str, list[Any]] = {}
    for pod in world.pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name and not is_terminal(pod):
            bound.setdefault(node_name, []).append(model.pod_from_k8s(pod))
    nodes = [model.node_from_k8s(node, bound.get(nodeclaims.name_of(node), ())) for node in world.nodes]
    live_claims = [c for c in world.nodeclaims if not nodeclaims.is_deleting(c)]
    nodes += [in_flight_node(claim, world) for claim in live_claims if world.node_of(claim) is None]
    usage = nodepools.usage(world, MAX_CANDIDATE_TYPES)
    pending_pods, unreadable = model.pods_from_k8s(pending)
    snapshot = model.Snapshot(
        pods=pending_pods,
        nodepools=[nodepool_input(pool, world, usage.get(nodeclaims.name_of(pool), {})) for pool in pools],
        nodes=nodes,
        daemonsets=[model.daemonset_from_k8s(d) for d in world.daemonsets],
        claims=[model.pvc_from_k8s(c) for c in world.persistent_volume_claims],
        volumes=[model.pv_from_k8s(v) for v in world.persistent_volumes],
        storage_classes=[model.storage_class_from_k8s(s) for s in world.storage_classes],
    )
    return snapshot, unreadable


def nodepool_input(pool: Mapping[str, Any], world: World, in_use: Mapping[str, float]) -> Any:
    """A v1 NodePool as the scheduler's ``NodePoolInput`` (limits and usage in canonical units)."""
    from nodewright.scheduling import model
    from nodewright.scheduling.requirements import Requirements
    from nodewright.scheduling.resources import parse_resources

    spec = pool.get("spec") or {}
    template = spec.get("template") or {}
    template_spec = template.get("spec") or {}
    name = nodeclaims.name_of(pool)
    nodeclass = world.nodeclass(nodeclass_name(pool))
    return model.NodePoolInput(
        name=name,
        requirements=Requirements.from_k8s(template_spec.get("requirements")),
        instance_types=world.instance_types(nodeclass_name(pool)),
        node_price=world.cloud.node_price(nodeclass) if world.cloud and nodeclass else 0.0,
        weight=int(spec.get("weight") or 0),
        labels={**((template.get("metadata") or {}).get("labels") or {}), labels.NODEPOOL: name},
        taints=tuple(model.taint_from_k8s(t) for t in template_spec.get("taints") or ()),
        startup_taints=tuple(model.taint_from_k8s(t) for t in template_spec.get("startupTaints") or ()),
        limits=parse_resources(spec.get("limits")),
        in_use={k: int(v) for k, v in in_use.items()},
    )


def candidates_for(world: World, claim: Mapping[str, Any]) -> list[InstanceType]:
    """The NodeClaim's candidate types, cheapest first, at most ``MAX_CANDIDATE_TYPES``."""
    from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

    return world.candidates_for(claim, MAX_CANDIDATE_TYPES)


def in_flight_node(claim: Mapping[str, Any], world: World) -> Any:
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
        candidates = candidates_for(world, claim)
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


def _schedule(world: World, pending: list[dict[str, Any]], snapshot: Any) -> PlanView:
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
