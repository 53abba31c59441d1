"""The World: what one pass of any flow observes, read once and looked up through typed accessors.

Reading order undershoots: capacity first (NodeClaims, nodes, NodePools, ... in parallel; a writer
holds the writers' lease, so no NodeClaim appears behind its back), then pods. A pod that binds in
between shows up bound or not pending, never as a pending pod launched for twice.

What a pass asks of the cloud is observed lazily and at most once per pass: the instance types an
EC2NodeClass allows (``instance_types``), and the shared price table (``price_of``). An idle
disruption pass that removes nothing never asks. The NodeOverlays (read only with the stack's
``nodeOverlay`` setting, Karpenter's feature gate) are applied here and nowhere else: a NodePool's
instance types (``pool_instance_types``), a NodeClaim's candidates and its price are the overlaid ones
(``state.overlays``), so every plan, consolidation and ``nodewright plan`` sees the same catalog.

Every lookup that crosses objects is written here once: the NodePool of a NodeClaim or Node
(``nodepool_of``), the EC2NodeClass of a NodePool or NodeClaim (``nodeclass_of``, null-safe: an
object without ``nodeClassRef`` has none), the Node of a NodeClaim (``node_of``, by the EC2
instance both name),
the pods bound to a node (``pods_on``), the $/h of a NodeClaim (``price_of``), the
PodDisruptionBudgets' rules (``pdb_limits``, ``state.pdbs``).
"""

from __future__ import annotations

import contextlib
import gc
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.api.models import NodePool
from nodewright.cluster.objects import (
    labels_of,
    name_of,
    nodeclaim_instance_id,
    nodeclass_name,
)
from nodewright.state.views import ClaimView, NodeView, PoolView, by_instance_id

if TYPE_CHECKING:
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.context import Context
    from nodewright.scheduling import InstanceType
    from nodewright.state.interfaces import CloudView, Obj
    from nodewright.state.overlays import Resolution
    from nodewright.state.pdbs import PdbLimits

# Recorded by ``termination.request`` on the NodeClaim (or the Node without one): the drain evicts every
# pod whatever its PDBs and do-not-disrupt say, because the instance goes anyway (an interruption).
INVOLUNTARY_ANNOTATION = "nodewright.io/termination-involuntary"


@dataclass
class _CloudFacts:
    """What one pass asked of the cloud (per EC2NodeClass), and what the NodeOverlays made of it (per
    NodePool): shared by every World derived from the pass's, which hold the same NodePools."""

    by_nodeclass: dict[str, list[InstanceType]] = field(default_factory=dict)
    by_nodepool: dict[str, list[InstanceType]] = field(default_factory=dict)
    overlays: Resolution | None = None


@dataclass
class World:
    """Plain Kubernetes dicts exactly as the API server returned them, plus lazy cloud facts."""

    taken_at: datetime
    nodeclaims: list[Obj]
    nodes: list[Obj]
    pods: list[Obj]
    nodepools: list[Obj]
    nodeclasses: list[Obj]
    daemonsets: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    persistent_volumes: list[Obj] = field(default_factory=list)
    persistent_volume_claims: list[Obj] = field(default_factory=list)
    storage_classes: list[Obj] = field(default_factory=list)
    cloud: CloudView | None = None
    # The deployment's minValues policy (Settings.relax_min_values: Karpenter's BestEffort), so every
    # simulation of this World plans with it: provisioning, an interruption's replacement, disruption.
    relax_min_values: bool = False
    # The NodeOverlays (none unless the deployment's nodeOverlay gate is on or a plan's manifests hold some).
    nodeoverlays: list[Obj] = field(default_factory=list)
    # What the pass asked of the cloud, shared with worlds derived from this one.
    _cloud_facts: _CloudFacts = field(default_factory=_CloudFacts, init=False, repr=False)
    # The NodePools typed (``nodepool_model``), each parsed once; shared with worlds derived from
    # this one, which hold the same NodePools.
    _nodepool_models: dict[str, NodePool] = field(default_factory=dict, init=False, repr=False)

    # -- objects by name -------------------------------------------------------------------------------
    def nodepool(self, name: str) -> Obj | None:
        return self._nodepools_by_name.get(name)

    def nodeclass(self, name: str) -> Obj | None:
        return self._nodeclasses_by_name.get(name)

    def nodepool_model(self, name: str) -> NodePool | None:
        """The NodePool ``name`` as the typed ``api.models.NodePool`` (Karpenter v1's defaults
        applied), parsed on first ask and once per pass: what every reader of its fields reads.
        Ask it of a NodePool that passed validation (``state.nodepools.triage``): the model assumes
        the API server's schema."""
        typed = self._nodepool_models.get(name)
        if typed is None:
            raw = self.nodepool(name)
            if raw is None:
                return None
            typed = self._nodepool_models[name] = NodePool.from_dict(raw)
        return typed

    def nodepool_models(self, pools: Iterable[Mapping[str, Any]]) -> list[NodePool]:
        """The typed models of ``pools`` (this world's, e.g. a triage's usable ones), in their order;
        a NodePool not of this world is parsed on its own."""
        found = []
        for pool in pools:
            name = name_of(pool)
            typed = self.nodepool_model(name) if self.nodepool(name) is pool else None
            found.append(typed if typed is not None else NodePool.from_dict(dict(pool)))
        return found

    @cached_property
    def pool_views(self) -> list[PoolView]:
        """Every NodePool as the typed ``state.views.PoolView`` (what the triage reads of it, valid
        or not), in ``nodepools`` order, each read once per pass."""
        return [PoolView.of(p) for p in self.nodepools]

    def pool_view(self, name: str) -> PoolView | None:
        """The NodePool ``name`` as its ``state.views.PoolView``."""
        return self._pool_views_by_name.get(name)

    def nodepool_of(self, obj: Mapping[str, Any]) -> Obj | None:
        """The NodePool a NodeClaim or Node belongs to (its ``karpenter.sh/nodepool`` label)."""
        name = nodepool_name(obj)
        return self.nodepool(name) if name else None

    def nodeclass_of(self, obj: Mapping[str, Any]) -> Obj | None:
        """The EC2NodeClass a NodePool or NodeClaim refers to; None when it has no reference or the
        EC2NodeClass does not exist."""
        name = nodeclass_name(obj)
        return self.nodeclass(name) if name else None

    # -- nodes, NodeClaims, pods ---------------------------------------------------------------------
    def node_of(self, claim: Mapping[str, Any]) -> Obj | None:
        """The registered Node of a NodeClaim (the same EC2 instance); None before it registers."""
        instance = nodeclaim_instance_id(claim)
        node = self._node_views_by_instance_id.get(instance) if instance else None
        return node.raw if node is not None else None

    @cached_property
    def claim_views(self) -> list[ClaimView]:
        """Every NodeClaim as the typed ``state.views.ClaimView``, in ``nodeclaims`` order, each read
        once per pass."""
        return [ClaimView.of(c) for c in self.nodeclaims]

    @cached_property
    def node_views(self) -> list[NodeView]:
        """Every Node as the typed ``state.views.NodeView``, in ``nodes`` order, each read once per pass."""
        return [NodeView.of(n) for n in self.nodes]

    def node_view_of(self, claim: ClaimView) -> NodeView | None:
        """The registered Node of a NodeClaim, as the typed ``state.views.NodeView`` (``node_of``)."""
        return self._node_views_by_instance_id.get(claim.instance_id) if claim.instance_id else None

    def pods_on(self, node: Mapping[str, Any] | str) -> list[Obj]:
        """Every pod bound to the node (a Node object or its name), whatever its phase."""
        return list(self._pods_by_node.get(node if isinstance(node, str) else name_of(dict(node)), ()))

    # -- what the cloud offers ------------------------------------------------------------------------
    def instance_types(self, nodeclass_name: str) -> list[InstanceType]:
        """The scheduler's instance types the EC2NodeClass allows, asked of the cloud once per pass."""
        known = self._cloud_facts.by_nodeclass
        if nodeclass_name not in known:
            nodeclass = self.nodeclass(nodeclass_name)
            known[nodeclass_name] = (
                list(self.cloud.instance_types(nodeclass)) if nodeclass and self.cloud else []
            )
        return known[nodeclass_name]

    def pool_instance_types(self, nodepool_name: str) -> list[InstanceType]:
        """The instance types a NodePool plans with: its EC2NodeClass's, as the NodeOverlays change them
        in this NodePool (the same list when no overlay applies)."""
        pool = self.nodepool(nodepool_name)
        types = self.instance_types(nodeclass_name(pool)) if pool else []
        overlays = self.overlays
        if overlays is None:
            return types
        known = self._cloud_facts.by_nodepool
        if nodepool_name not in known:
            known[nodepool_name] = overlays.apply(nodepool_name, types)
        return known[nodepool_name]

    @property
    def overlays(self) -> Resolution | None:
        """The NodeOverlays resolved against every NodePool's instance types (``state.overlays``), once
        per pass; None without overlays."""
        facts = self._cloud_facts
        if not self.nodeoverlays:
            return None
        if facts.overlays is None:
            from nodewright.api.overlays import from_manifest
            from nodewright.state.overlays import PoolFacts, resolve

            pools = {
                p.name: PoolFacts(p.template_labels, self.instance_types(p.nodeclass))
                for p in self.pool_views
                if p.nodeclass and self.nodeclass(p.nodeclass) is not None
            }
            facts.overlays = resolve([from_manifest(o) for o in self.nodeoverlays], pools)
        return facts.overlays

    def candidates_for(self, claim: ClaimView, limit: int) -> list[InstanceType]:
        """A NodeClaim's candidate types: its ``node.kubernetes.io/instance-type In`` list in its
        order (cheapest first), those its NodePool (its EC2NodeClass, as the overlays change it) still
        offers, at most ``limit``."""
        pool = claim.nodepool
        if pool and self.nodepool(pool):
            types = self.pool_instance_types(pool)
        else:
            types = self.instance_types(claim.nodeclass)
        by_name = {t.name: t for t in types}
        allowed: list[str] = []
        for requirement in claim.requirements:
            if requirement.get("key") == labels.INSTANCE_TYPE and requirement.get("operator") == "In":
                allowed = [str(v) for v in requirement.get("values") or []]
        if not allowed:
            return list(by_name.values())[:limit]
        return [by_name[name] for name in allowed if name in by_name][:limit]

    def price_of(self, claim: Mapping[str, Any]) -> float | None:
        """$/h of a launched NodeClaim (or Node) from its type, zone and capacity-type labels, read
        from the shared price table (one cached state-store read, never the instance catalog)."""
        found = labels_of(claim)
        instance_type, zone = found.get(labels.INSTANCE_TYPE, ""), found.get(labels.ZONE, "")
        capacity_type = found.get(labels.CAPACITY_TYPE, labels.CAPACITY_TYPE_ON_DEMAND)
        if not instance_type:
            return None
        if found.get(labels.OS) == "windows":  # the table prices Linux: the catalog's adds the licence
            windows = self._offering_price(claim, instance_type, zone, capacity_type)
            if windows is not None:
                return windows
        price = None
        if self.overlays is not None and (pool := nodepool_name(claim)) and self.nodepool(pool):
            reservation = found.get(labels.CAPACITY_RESERVATION_ID, "")
            overlaid = self._offering_price(
                claim, instance_type, zone, capacity_type, reservation, nodepool=pool
            )
            if overlaid is not None:  # what the NodePool's overlays make the offering cost
                return overlaid
        if capacity_type == labels.CAPACITY_TYPE_RESERVED:  # what its reserved offering costs (near 0)
            reservation = found.get(labels.CAPACITY_RESERVATION_ID, "")
            return self._offering_price(claim, instance_type, zone, capacity_type, reservation)
        if self.prices is not None:
            if capacity_type == labels.CAPACITY_TYPE_SPOT:
                price = self.prices.spot_price(instance_type, zone)
            else:
                price = self.prices.on_demand_price(instance_type)
        return price if price is not None else self._offering_price(claim, instance_type, zone, capacity_type)

    def _offering_price(
        self,
        claim: Mapping[str, Any],
        instance_type: str,
        zone: str,
        capacity_type: str,
        reservation: str = "",
        *,
        nodepool: str = "",
    ) -> float | None:
        """A type the table does not price is priced as the launch ranked it: the catalog's offering
        price (the documented estimate, counted by ``PriceEstimated``), so the two never disagree; a
        reserved node by its reservation's offering (the reservation no longer selected: nothing); with
        ``nodepool``, the offering as that NodePool's overlays price it."""
        name = nodeclass_name(claim)
        types = self.pool_instance_types(nodepool) if nodepool else self.instance_types(name) if name else []
        for candidate in types:
            if candidate.name == instance_type:
                for offering in candidate.offerings:
                    if (
                        offering.zone == zone
                        and offering.capacity_type == capacity_type
                        and offering.reservation_id == reservation
                    ):
                        return offering.price
        return None

    @cached_property
    def prices(self) -> PriceTable | None:
        return self.cloud.prices() if self.cloud is not None else None

    # -- derived worlds --------------------------------------------------------------------------------
    def provisionable_pods(self) -> list[Obj]:
        """The pending pods a new node could help (``state.pods.is_provisionable``): what every plan
        places, with the ``displaced_pods`` of the nodes going."""
        from nodewright.state.pods import is_provisionable

        return [p for p in self.pods if is_provisionable(p)]

    @cached_property
    def pdb_limits(self) -> PdbLimits:
        """The PodDisruptionBudgets, as the Eviction API and Karpenter read them (``state.pdbs``)."""
        from nodewright.state.pdbs import PdbLimits

        return PdbLimits(self.pdbs, now=self.taken_at)

    def going_node_names(self) -> set[str]:
        """The nodes on their way out: the Node or its NodeClaim is being deleted (a termination,
        an interruption, a disruption command once its replacements are up).

        Their pods that will leave still need a place, so every plan counts them as pending
        (``displaced_pods``), as Karpenter's provisioner schedules the pods of deleting nodes: the
        capacity launched ahead for them is then never handed to other pods.
        """
        going = {n.name for n in self.node_views if n.deleting}
        for claim in self.claim_views:
            if claim.deleting and (node := self.node_view_of(claim)) is not None:
                going.add(node.name)
        return going

    def forced_node_names(self) -> set[str]:
        """The going nodes whose termination evicts every pod regardless (``INVOLUNTARY_ANNOTATION``
        on the NodeClaim, or on the Node when it has none)."""
        forced = {n.name for n in self.node_views if n.deleting and _involuntary(n)}
        for claim in self.claim_views:
            if _involuntary(claim) and (node := self.node_view_of(claim)) is not None:
                forced.add(node.name)
        return forced

    def displaced_pods(self, going: Iterable[str], *, forced: Iterable[str] = ()) -> list[Obj]:
        """The pods of the ``going`` nodes that will need a place, as the scheduler will see them once
        evicted (``as_pending``): on a node whose drain evicts regardless (``forced``, and those
        ``forced_node_names`` finds) every ``is_reschedulable`` pod; elsewhere only the
        ``is_currently_reschedulable`` ones — a pod a PDB or do-not-disrupt holds may never leave."""
        from nodewright.state.pods import as_pending, is_currently_reschedulable, is_reschedulable

        regardless = set(forced) | self.forced_node_names()

        def leaves(pod: Obj, node: str) -> bool:
            if node in regardless:
                return is_reschedulable(pod)
            return is_currently_reschedulable(pod, self.pdb_limits, self.taken_at)

        # In node-name order: the plan is the same whatever order the set came in.
        return [as_pending(p) for name in sorted(set(going)) for p in self.pods_on(name) if leaves(p, name)]

    def without_nodes(self, going: Iterable[str]) -> World:
        """The world after the ``going`` nodes, their NodeClaims and their pods are gone (this one
        when none goes)."""
        names = set(going)
        if not names:
            return self
        from nodewright.state.pods import node_name

        gone_instances = {n.instance_id for n in self.node_views if n.name in names} - {None}
        claims = [
            c for c in self.claim_views if c.node_name not in names and c.instance_id not in gone_instances
        ]
        nodes = [n for n in self.node_views if n.name not in names]
        derived = replace(
            self,
            nodeclaims=[c.raw for c in claims],
            nodes=[n.raw for n in nodes],
            pods=[p for p in self.pods if node_name(p) not in names],
        )
        derived._cloud_facts = self._cloud_facts  # the cloud is asked once per pass
        derived._nodepool_models = self._nodepool_models  # the same NodePools
        # The same objects: their views are this world's (where ``cached_property`` keeps them).
        derived.__dict__["claim_views"] = claims
        derived.__dict__["node_views"] = nodes
        derived.__dict__["pool_views"] = self.pool_views
        return derived

    # -- indexes -------------------------------------------------------------------------------------
    @cached_property
    def _nodepools_by_name(self) -> dict[str, Obj]:
        return {name_of(p): p for p in self.nodepools}

    @cached_property
    def _pool_views_by_name(self) -> dict[str, PoolView]:
        return {p.name: p for p in self.pool_views}

    @cached_property
    def _node_views_by_instance_id(self) -> dict[str, NodeView]:
        return by_instance_id(self.node_views)

    @cached_property
    def _nodeclasses_by_name(self) -> dict[str, Obj]:
        return {name_of(c): c for c in self.nodeclasses}

    @cached_property
    def _pods_by_node(self) -> dict[str, list[Obj]]:
        from nodewright.state.pods import node_name

        by_node: dict[str, list[Obj]] = defaultdict(list)
        for pod in self.pods:
            bound = node_name(pod)
            if bound:
                by_node[str(bound)].append(pod)
        return by_node


def _involuntary(view: ClaimView | NodeView) -> bool:
    return view.annotations.get(INVOLUNTARY_ANNOTATION) == "true"


def nodes_by_instance_id(nodes: Iterable[Obj]) -> dict[str, Obj]:
    """Nodes by their EC2 instance (``state.views.by_instance_id``'s rule), for callers holding
    plain Nodes rather than a World."""
    return {instance: view.raw for instance, view in by_instance_id(map(NodeView.of, nodes)).items()}


def nodeclaims_by_instance_id(nodeclaims: Iterable[Obj]) -> dict[str, Obj]:
    """NodeClaims by their EC2 instance (``state.views.by_instance_id``'s rule), for callers holding
    plain NodeClaims rather than a World."""
    return {instance: view.raw for instance, view in by_instance_id(map(ClaimView.of, nodeclaims)).items()}


def nodepool_name(obj: Mapping[str, Any]) -> str:
    """The ``karpenter.sh/nodepool`` label of a NodeClaim or Node ('' when absent)."""
    return str(labels_of(obj).get(labels.NODEPOOL) or "")


@contextlib.contextmanager
def _read_as_long_lived() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a pass reads the cluster, and what is alive
    after frozen (``gc.freeze``) until the next pass reads: the objects a pass observes live as long
    as the pass, and JSON makes no reference cycles, so the collector has nothing to find in them.

    Left running, it walks every object again each time the heap grows by a quarter (CPython's rule
    for a full collection), and decoding a cluster's lists is nothing but growth: at 50,000 pods it
    was three quarters of the CPU of reading them (6 of 8 s). Frozen objects are still freed as
    soon as nothing refers to them (reference counting); only a cycle among them waits, until the
    next pass unfreezes them first, so at most one pass's cycles wait."""
    gc.unfreeze()  # the previous pass's objects: collectable again
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def observe(ctx: Context) -> World:
    """Read everything a pass needs: capacity first (in parallel), then pods (see the module).
    The collector stays out of the read (``_read_as_long_lived``)."""
    with _read_as_long_lived():
        return _observe(ctx)


def _observe(ctx: Context) -> World:
    cluster = ctx.cluster
    readers: dict[str, Callable[[], list[Obj]]] = {
        "nodeclaims": cluster.list_nodeclaims,
        "nodes": cluster.list_nodes,
        "nodepools": cluster.list_nodepools,
        "nodeclasses": cluster.list_ec2nodeclasses,
        "daemonsets": cluster.list_daemonsets,
        "pdbs": cluster.list_pdbs,
        "persistent_volumes": cluster.list_persistent_volumes,
        "persistent_volume_claims": cluster.list_persistent_volume_claims,
        "storage_classes": cluster.list_storage_classes,
    }
    if ctx.settings.node_overlay:  # Karpenter's NodeOverlay feature gate (off by default, as there)
        readers["nodeoverlays"] = cluster.list_nodeoverlays
    with ThreadPoolExecutor(max_workers=len(readers)) as pool:
        futures = {name: pool.submit(read) for name, read in readers.items()}
        capacity = {name: future.result() for name, future in futures.items()}
    pods = cluster.list_pods()
    return World(
        taken_at=ctx.clock.now(),
        pods=pods,
        cloud=ctx.cloud,
        relax_min_values=ctx.settings.relax_min_values,
        **capacity,
    )
