"""The bridge from a World to the scheduling core's ``Snapshot``: the one simulation every flow asks.

Provisioning asks "where do these pending pods go?"; disruption asks "these pods, without these
nodes: what is the cheapest way to place them?" (consolidation and drift). Both are the same
question to ``scheduling.plan``, asked through ``Simulation``, so the two can never disagree.

``Simulation(world, pools)`` parses the world once (nodes with the pods bound to them, NodeClaims
still in flight as capacity, the usable NodePools with their instance types, limits and usage,
DaemonSets, volumes); ``snapshot(pending, without=...)`` then builds a ``Snapshot`` for any set of
pods and any set of nodes taken away, cheaply enough for the hundreds of simulations one
consolidation pass makes (each pod version's scheduling spec is read once for all of them).
``build_snapshot`` is the one-shot form the provisioning pass uses.

Nodes not yet initialized and NodeClaims in flight are capacity for every question (Karpenter's
provisioner counts them too); ``Simulation.uninitialized`` names them, because a disruption must
not count on them for the pods it moves (they may never become Ready).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.api.models import INITIALIZED
from nodewright.state import nodepools
from nodewright.state.pods import is_terminal
from nodewright.state.pods import node_name as bound_node
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.api.models import NodePool
    from nodewright.scheduling import InstanceType, Plan, Snapshot
    from nodewright.state.views import ClaimView, NodeView


class Simulation:
    """The world parsed once for the scheduling core; ``snapshot`` per question (see the module)."""

    def __init__(self, world: World, pools: list[dict[str, Any]], *, asked_once: bool = False) -> None:
        from nodewright.scheduling import model
        from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

        self.world = world
        # Each pod version's PodSpec, read once for every snapshot of this world (model.pod_from_k8s):
        # a consolidation search asks hundreds, with the same pods displaced. Not for a simulation
        # ``asked_once`` (the provisioning pass's), where it would only hold memory.
        self._specs: model.SpecsByVersion | None = None if asked_once else {}
        bound: dict[str, list[Any]] = {}
        for pod in world.pods:
            node_name = bound_node(pod)
            if node_name and not is_terminal(pod):
                bound.setdefault(node_name, []).append(model.pod_from_k8s(pod, self._specs))
        # Registered nodes by name, then NodeClaims still in flight (named after the NodeClaim).
        live_claims = [c for c in world.claim_views if not c.deleting]
        settling = {
            node.name: claim
            for claim in live_claims
            if (node := world.node_view_of(claim)) is not None and not claim.is_true(INITIALIZED)
        }
        self.nodes: list[tuple[str, Any]] = []
        for node in world.node_views:
            counted = as_capacity(node, settling.get(node.name))
            self.nodes.append((node.name, model.node_from_k8s(counted, bound.get(node.name, ()))))
        self.nodes += [
            (claim.name, in_flight_node(claim, world))
            for claim in live_claims
            if world.node_view_of(claim) is None
        ]
        # Capacity that is not there yet, by the name a plan places pods on: the NodeClaim's own
        # while no Node has registered, else the Node's.
        self.uninitialized: dict[str, str] = {}
        for claim in live_claims:
            node = world.node_view_of(claim)
            if node is None:
                self.uninitialized[claim.name] = f"nodeclaim/{claim.name}"
            elif not claim.is_true(INITIALIZED):
                self.uninitialized[node.name] = f"nodeclaim/{claim.name}, node/{node.name}"
        usage = nodepools.usage(world, MAX_CANDIDATE_TYPES)
        # A static NodePool's nodes are capacity like any other, but no plan adds a node to it: its
        # replicas alone say how many it has (Karpenter's provisioner skips static NodePools).
        self.nodepools = [
            nodepool_input(pool, world, usage.get(pool.name, {}))
            for pool in world.nodepool_models(pools)
            if not pool.spec.is_static
        ]
        self.daemonsets = [model.daemonset_from_k8s(d) for d in world.daemonsets]
        self.claims = [model.pvc_from_k8s(c) for c in world.persistent_volume_claims]
        self.volumes = [model.pv_from_k8s(v) for v in world.persistent_volumes]
        self.storage_classes = [model.storage_class_from_k8s(s) for s in world.storage_classes]

    def snapshot(
        self, pending: list[dict[str, Any]], *, without: Iterable[str] = ()
    ) -> tuple[Snapshot, dict[str, str]]:
        """The ``Snapshot`` for ``pending`` pods with the ``without`` nodes (or in-flight NodeClaims)
        taken away, and the pods that could not be read, each with the reason."""
        from nodewright.scheduling import model

        gone = set(without)
        pending_pods, unreadable = model.pods_from_k8s(pending, self._specs)
        snapshot = model.Snapshot(
            pods=pending_pods,
            nodepools=self.nodepools,
            nodes=[node for name, node in self.nodes if name not in gone],
            daemonsets=self.daemonsets,
            claims=self.claims,
            volumes=self.volumes,
            storage_classes=self.storage_classes,
            relax_min_values=self.world.relax_min_values,
        )
        return snapshot, unreadable


def build_snapshot(
    world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]]
) -> tuple[Snapshot, dict[str, str]]:
    """The scheduling core's ``Snapshot`` for ``pending`` pods against everything the world holds."""
    return Simulation(world, pools, asked_once=True).snapshot(pending)


def fresh_plan(world: World, pods: list[dict[str, Any]], pools: list[dict[str, Any]]) -> Plan:
    """Our scheduler's plan of ``pods`` on an empty cluster with the world's NodePools and catalog:
    what the same pods would cost bought today. The yardstick consolidation is measured against
    (``nodewright bench consolidation``, the chaos run's cost invariant); a pod the NodePools cannot
    host is left in ``unschedulable`` and costs nothing."""
    from dataclasses import replace

    from nodewright import scheduling
    from nodewright.state.pods import as_pending

    empty = replace(world, nodeclaims=[], nodes=[], pods=[])
    empty._cloud_facts = world._cloud_facts  # the cloud is asked once
    snapshot, _ = Simulation(empty, pools, asked_once=True).snapshot([as_pending(p) for p in pods])
    return scheduling.plan(snapshot)


def nodepool_input(pool: NodePool, world: World, in_use: Mapping[str, float]) -> Any:
    """A v1 NodePool (typed: ``World.nodepool_model``) as the scheduler's ``NodePoolInput`` (limits
    and usage in canonical units)."""
    from nodewright.scheduling import model
    from nodewright.scheduling.resources import parse_resources

    template = pool.spec.template
    name, nodeclass_ref = pool.name, template.spec.node_class_ref.name
    nodeclass = world.nodeclass(nodeclass_ref)
    return model.NodePoolInput(
        name=name,
        requirements=model.requirements_from_model(template.spec.requirements),
        instance_types=world.pool_instance_types(name),
        node_price=world.cloud.node_price(nodeclass) if world.cloud and nodeclass else 0.0,
        weight=int(pool.spec.weight or 0),
        labels={**template.metadata.labels, labels.NODEPOOL: name, labels.EC2NODECLASS: nodeclass_ref},
        taints=tuple(model.taint_from_model(t) for t in template.spec.taints),
        startup_taints=tuple(model.taint_from_model(t) for t in template.spec.startup_taints),
        limits=parse_resources(pool.spec.limits),
        in_use={k: int(v) for k, v in in_use.items()},
    )


def candidates_for(world: World, claim: ClaimView) -> list[InstanceType]:
    """The NodeClaim's candidate types, cheapest first, at most ``MAX_CANDIDATE_TYPES``."""
    from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

    return world.candidates_for(claim, MAX_CANDIDATE_TYPES)


# Karpenter's known ephemeral taints (scheduling.KnownEphemeralTaints): a node carries them while it
# starts; its NodeClaim's startupTaints are added to them until it is initialized.
EPHEMERAL_TAINTS = frozenset(
    {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        (labels.UNREGISTERED_TAINT_KEY, "NoExecute"),
    }
)


def as_capacity(node: NodeView, settling_claim: ClaimView | None) -> Mapping[str, Any]:
    """The node as the simulation counts it: the node of a NodeClaim not yet initialized (Karpenter's
    ``StateNode.Taints``) without the ephemeral taints and the NodeClaim's startupTaints, which
    only mean "still starting", and with its NodeClaim's allocatable until the kubelet reports its
    own. Else the pods nominated to it would look unplaceable and every pass between registration
    and readiness would launch another node for them."""
    if settling_claim is None:
        return node.raw
    startup = {(t.get("key"), t.get("effect")) for t in settling_claim.startup_taints}
    kept = [t for t in node.taints if (t.get("key"), t.get("effect")) not in EPHEMERAL_TAINTS | startup]
    raw = node.raw
    # Until the kubelet reports it, the node holds what its NodeClaim was launched with (Karpenter's too).
    allocatable = node.allocatable or settling_claim.allocatable
    return {
        **raw,
        "spec": {**(raw.get("spec") or {}), "taints": kept},
        "status": {**(raw.get("status") or {}), "allocatable": allocatable or {}},
    }


def in_flight_node(claim: ClaimView, world: World) -> Any:
    """A NodeClaim without a registered Node, as capacity: its recorded allocatable once launched,
    before that the least any of its candidate types would give (what every candidate can hold)."""
    from nodewright.scheduling import model
    from nodewright.scheduling.requirements import Requirements
    from nodewright.scheduling.resources import parse_resources

    if claim.allocatable:
        allocatable = parse_resources(claim.allocatable)
    else:
        candidates = candidates_for(world, claim)
        keys = set().union(*(c.allocatable for c in candidates)) if candidates else set()
        allocatable = {k: min(c.allocatable.get(k, 0) for c in candidates) for k in keys}
    node_labels = {**Requirements.from_k8s(claim.requirements).labels(), **claim.labels}
    return model.Node(
        name=claim.name,
        labels=node_labels,
        allocatable=allocatable,
        taints=tuple(model.taint_from_k8s(t) for t in claim.taints),
        in_flight=True,
    )


__all__ = [
    "EPHEMERAL_TAINTS",
    "Simulation",
    "as_capacity",
    "build_snapshot",
    "candidates_for",
    "fresh_plan",
    "in_flight_node",
    "nodepool_input",
]
