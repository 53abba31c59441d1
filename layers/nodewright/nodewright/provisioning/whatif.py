"""The provisioner's planning path on manifests or a live cluster's objects (``nodewright plan``).

Manifests are validated and converted to v1 exactly as ``nodewright validate``/``convert`` do; a
document with errors is reported and left out while the rest is planned. Workloads (Pods,
Deployments, ReplicaSets, StatefulSets, Jobs) become the pending pods the kube-scheduler would
have marked Unschedulable; a Pod with ``spec.nodeName`` is bound to that node. Nodes, NodeClaims,
DaemonSets, PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes and StorageClasses
become the cluster the plan places them in (a PodDisruptionBudget as the file has it: without a
status it allows no eviction, as in a cluster until the disruption controller writes one);
RuntimeClasses are applied to the pods that name them as admission would (overhead, nodeSelector,
tolerations). NodeOverlays (``karpenter.sh/v1alpha1``) change the prices and capacity of the
NodePools' instance types as the functions apply them with the stack's ``nodeOverlay`` setting
(``state.overlays``), each reported applied or why not. A saved DescribeCapacityReservations answer
(the ``{"CapacityReservations": [...]}`` that ``aws ec2 describe-capacity-reservations --output
json`` prints) stands for the account's reservations: those an EC2NodeClass's
``capacityReservationSelectorTerms`` select become reserved offerings (``saved_reservations``). Every
other kind is reported as ignored, never dropped silently. A live cluster (``--kubeconfig``) is
read, never written: one snapshot, as a pass reads. NodePools go through the same triage and the
same scheduling bridge as a provisioning pass; only the instance catalog is handed in. A static
NodePool's replicas are planned as the pass keeps them (``provisioning.static``): its missing
NodeClaims, and those beyond its replicas it would delete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nodewright.api.shapes import dig
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.reservations import is_saved_answer
from nodewright.provisioning import nodeclaims, planning, static
from nodewright.state import nodepools
from nodewright.state.pods import key as pod_key
from nodewright.state.world import World, observe

PENDING_STATUS = {
    "phase": "Pending",
    "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
}
TEMPLATED_KINDS = {
    "Deployment": "ReplicaSet",
    "ReplicaSet": "ReplicaSet",
    "StatefulSet": "StatefulSet",
    "Job": "Job",
}
# Kinds that describe the cluster the pods land in: World field each one fills.
CLUSTER_KINDS = {
    "Node": "nodes",
    "NodeClaim": "nodeclaims",
    "DaemonSet": "daemonsets",
    "PodDisruptionBudget": "pdbs",
    "PersistentVolumeClaim": "persistent_volume_claims",
    "PersistentVolume": "persistent_volumes",
    "StorageClass": "storage_classes",
}


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


# A plan simulates at most this many pods per workload: a typo'd replicas must not exhaust memory.
MAX_WORKLOAD_PODS = 100_000


class WorkloadProblem(ValueError):
    """A workload whose shape a plan cannot read; the message names the field (``spec.replicas: …``)."""


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WorkloadProblem(f"{path}: must be an object, not {type(value).__name__}")
    return value


def _pod_count(spec: Mapping[str, Any], kind: str) -> int:
    field_name = "parallelism" if kind == "Job" else "replicas"
    value = spec.get(field_name, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WorkloadProblem(f"spec.{field_name}: must be a whole number of pods, got {value!r:.40}")
    if value > MAX_WORKLOAD_PODS:
        raise WorkloadProblem(
            f"spec.{field_name}: {value:,} pods is more than a plan simulates ({MAX_WORKLOAD_PODS:,} per "
            "workload); plan a smaller copy"
        )
    return value


def pods_of(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods a workload would create, as the scheduler would see them: unbound and Unschedulable.

    Raises ``WorkloadProblem`` for a shape no API server would accept (``replicas: "ten"``,
    ``template: [1]``) or a pod count past ``MAX_WORKLOAD_PODS``.
    """
    kind = str(workload.get("kind"))
    meta = _mapping(workload.get("metadata"), "metadata")
    namespace = meta.get("namespace") or "default"
    if kind == "Pod":
        spec = _mapping(workload.get("spec"), "spec")
        return [_pending_pod(str(meta.get("name", "pod")), namespace, meta, spec, None)]
    spec = _mapping(workload.get("spec"), "spec")
    template = _mapping(spec.get("template"), "spec.template")
    replicas = _pod_count(spec, kind)
    name = str(meta.get("name", "workload"))
    owner = {"kind": TEMPLATED_KINDS[kind], "name": name}
    pod_meta = _mapping(template.get("metadata"), "spec.template.metadata")
    pod_spec = _mapping(template.get("spec"), "spec.template.spec")
    return [_pending_pod(f"{name}-{i}", namespace, pod_meta, pod_spec, owner) for i in range(replicas)]


def readable_pods(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``pods_of``, each read once as the scheduling simulation reads it (``pod_from_k8s``).

    Files reach a plan without an API server's validation, so a template the simulation cannot read
    (``labels: 1``, ``containers: 7``, ``cpu: ten``) is a ``WorkloadProblem`` of its workload here,
    not a traceback in the middle of the plan. A template's pods are alike: one read checks them all.
    """
    from nodewright.scheduling.model import pod_from_k8s

    try:
        pods = pods_of(workload)
        if pods:
            # The simulation groups pods by their read spec: a list or an object where a string
            # belongs (a toleration's key, a selector's value) cannot be grouped, so it is caught here.
            hash(pod_from_k8s(pods[0]).spec)
    except WorkloadProblem:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise WorkloadProblem(
            f"cannot read its pod template ({type(exc).__name__}: {str(exc)[:200]}); "
            "`kubectl apply --dry-run=server -f` names the field an API server would reject"
        ) from exc
    return pods


def _pending_pod(
    name: str, namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any], owner: dict[str, str] | None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(meta.get("labels") or {}),
        "annotations": dict(meta.get("annotations") or {}),
    }
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "controller": True, **owner}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": dict(spec),
        "status": PENDING_STATUS,
    }


InstanceTypes = Callable[[Mapping[str, Any]], list[Any]]


def what_if(paths: Iterable[str | Path], instance_types: InstanceTypes, region: str) -> WhatIf:
    """Plan the manifests in ``paths``; ``instance_types(nodeclass)`` is the catalog for a v1 EC2NodeClass."""
    world, result = manifest_world(paths, instance_types, region)
    pending = [p for p in world.pods if not (p.get("spec") or {}).get("nodeName")]
    return plan_world(world, pending, region, result)


def what_if_live(cluster: Any, instance_types: InstanceTypes, region: str) -> WhatIf:
    """Plan a live cluster's pending pods against its current objects (``live_world``)."""
    world, result = live_world(cluster, instance_types, region)
    pending = world.provisionable_pods()
    return plan_world(world, pending, region, result)


def manifest_world(
    paths: Iterable[str | Path], instance_types: InstanceTypes, region: str
) -> tuple[World, WhatIf]:
    """The cluster the manifests describe, and the result its problems and unused kinds went into."""
    files = list(paths)
    result = WhatIf(source=f"{len(files)} manifest file(s)")
    world = _world_of_manifests(files, result)
    cloud = _OfflineCloud(instance_types, region)
    cloud.nodeclasses = world.nodeclasses
    world.cloud = cloud
    return world, result


def live_world(cluster: Any, instance_types: InstanceTypes, region: str) -> tuple[World, WhatIf]:
    """The World a pass observes (capacity first, then pods), read through list calls only."""
    cloud = _OfflineCloud(instance_types, region)
    world = observe(_ReadOnlyPass(cluster, cloud))  # type: ignore[arg-type]
    cloud.nodeclasses = world.nodeclasses
    return world, WhatIf(source=f"live cluster at {cluster.host} (read-only)")


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
    result.static_nodepools = sorted(nodeclaims.name_of(p) for p in world.nodepools if nodepools.is_static(p))
    result.static_scale_down = [
        nodeclaims.name_of(claim)
        for pool in world.nodepools
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


def _world_of_manifests(paths: Iterable[str | Path], result: WhatIf) -> World:
    """Every document as the cluster it describes; problems and unused kinds go into ``result``."""
    from nodewright.api.manifests import validate_files

    pools: dict[str, dict[str, Any]] = {}
    classes: dict[str, dict[str, Any]] = {}
    overlays: dict[str, dict[str, Any]] = {}
    objects: dict[str, list[dict[str, Any]]] = {name: [] for name in CLUSTER_KINDS.values()}
    runtime_classes: dict[str, dict[str, Any]] = {}
    pods: list[dict[str, Any]] = []
    kubelet_pieces: list[dict[str, Any]] = []
    for report in validate_files(paths).documents:
        if is_saved_answer(report.source.doc):
            continue  # the account's capacity reservations: read by ``saved_reservations``
        errors = [str(f) for f in report.findings if f.is_error]
        kinds = {str(doc.get("kind")) for doc in report.v1}
        named = all(isinstance(dig(doc, "metadata", "name"), str) for doc in report.v1)
        if errors and (kinds != {"EC2NodeClass"} or not named):
            result.manifest_problems.append(f"{report.source.label}: " + "; ".join(errors))
            result.rejected += 1
            continue
        if errors:  # what an EC2NodeClass lacks (role, selectors) matters to launching, not to a plan
            result.manifest_problems.append(
                f"{report.source.label}: planned anyway, but it cannot launch until fixed: "
                + "; ".join(errors)
            )
        for index, doc in enumerate(_expand_lists(report.v1)):
            kind = str(doc.get("kind"))
            if kind == "EC2NodeClass" and index in report.partial:
                kubelet_pieces.append(doc)  # a v1alpha5 Provisioner's kubeletConfiguration
            elif kind == "NodePool":
                _keep_last(pools, doc, result)
            elif kind == "EC2NodeClass":
                _keep_last(classes, doc, result)
            elif kind == "NodeOverlay":
                _keep_last(overlays, doc, result)
            elif kind == "Pod" and dig(doc, "spec", "nodeName"):
                pods.append(doc)  # bound: it holds its node's resources and topology
            elif kind in WORKLOAD_KINDS:
                try:
                    pods.extend(readable_pods(doc))
                except WorkloadProblem as exc:
                    result.manifest_problems.append(f"{report.source.label}: {exc}")
                    result.rejected += 1
            elif kind == "PodDisruptionBudget" and (problem := _unreadable_pdb(doc)):
                result.manifest_problems.append(f"{report.source.label}: {problem}")
                result.rejected += 1
            elif kind in CLUSTER_KINDS:
                objects[CLUSTER_KINDS[kind]].append(doc)
            elif kind == "RuntimeClass":
                runtime_classes[nodeclaims.name_of(doc)] = doc
            else:
                result.ignored.append(f"{report.source.label}: a plan does not use {kind} objects")
    for piece in kubelet_pieces:
        target = classes.setdefault(nodeclaims.name_of(piece), piece)
        target.setdefault("spec", {}).setdefault("kubelet", (piece.get("spec") or {}).get("kubelet"))
    admitted = []
    for pod in pods:
        problem = apply_runtime_class(pod, runtime_classes)
        if problem:
            result.pending[pod_key(pod)] = problem
        else:
            admitted.append(pod)
    return World(
        taken_at=datetime.now(UTC),
        pods=admitted,
        nodepools=list(pools.values()),
        nodeclasses=list(classes.values()),
        nodeoverlays=list(overlays.values()),
        **objects,  # type: ignore[arg-type]
    )


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


def _unreadable_pdb(doc: Mapping[str, Any]) -> str | None:
    """Why a PodDisruptionBudget from a file cannot be honoured (``state.pdbs`` cannot read its
    selector), else None: such a document is reported and left out, never half-read."""
    from nodewright.state.pdbs import UnreadablePdb, budget_of

    try:
        budget_of(doc)
    except UnreadablePdb as exc:
        return f"PodDisruptionBudget {nodeclaims.name_of(dict(doc))}: {exc}"
    return None


def _expand_lists(documents: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``kind: List`` (and ``PodList``...) as ``kubectl get -o yaml`` writes them, item by item."""
    expanded: list[dict[str, Any]] = []
    for doc in documents:
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            expanded.extend(item for item in doc["items"] if isinstance(item, dict))
        else:
            expanded.append(doc)
    return expanded


def apply_runtime_class(pod: dict[str, Any], runtime_classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What the RuntimeClass admission controller does to a pod naming one: set ``overhead`` from
    ``overhead.podFixed``, merge ``scheduling.nodeSelector`` and append ``scheduling.tolerations``.
    Returns why the pod would be refused (its RuntimeClass does not exist), else None."""
    spec = pod.setdefault("spec", {})
    name = spec.get("runtimeClassName")
    if not name:
        return None
    runtime_class = runtime_classes.get(str(name))
    if runtime_class is None:
        return f"RuntimeClass {name!r} not found: the API server would refuse the pod; apply the RuntimeClass"
    fixed = (runtime_class.get("overhead") or {}).get("podFixed")
    if fixed and not spec.get("overhead"):
        spec["overhead"] = dict(fixed)
    scheduling = runtime_class.get("scheduling") or {}
    if scheduling.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **scheduling["nodeSelector"]}
    if scheduling.get("tolerations"):
        spec["tolerations"] = [*(spec.get("tolerations") or []), *scheduling["tolerations"]]
    return None


WORKLOAD_KINDS = ("Pod", *TEMPLATED_KINDS)


def _pool_errors_only(document: Mapping[str, Any]) -> list[str]:
    """NodePools are judged as the provisioner judges them; EC2NodeClass gaps were reported above."""
    return [] if document.get("kind") == "EC2NodeClass" else nodepools.validation_errors(document)


def _keep_last(by_name: dict[str, dict[str, Any]], doc: dict[str, Any], result: WhatIf) -> None:
    name = nodeclaims.name_of(doc)
    if name in by_name:
        result.manifest_problems.append(
            f"{doc.get('kind')} {name!r} appears twice; the later document is used"
        )
    by_name[name] = doc
