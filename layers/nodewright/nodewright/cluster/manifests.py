"""The cluster edge over a manifest bundle: ``ManifestCluster`` answers the reads of
``state.interfaces.Cluster`` from files, as the API server would answer them, and refuses every write.

``nodewright plan`` observes it through the functions' own ``state.world.observe``, so a bundle
becomes the same ``World`` a pass reads from the API server: one reader, two sources. It lives
beside ``cluster.Cluster`` (the API server) because it is the same edge, not a second model of the
cluster.

What the API server would hold for the bundle:

* documents are validated and converted to v1 exactly as ``nodewright validate``/``convert`` do
  (``api.manifests``); a document with errors is reported and left out while the rest is read (an
  EC2NodeClass whose gaps matter only to launching is read, with the gaps reported);
* workloads (Pods, Deployments, ReplicaSets, StatefulSets, Jobs) are the pods their controllers
  would create: unbound and Unschedulable, as the kube-scheduler would mark them; a Pod with
  ``spec.nodeName`` is bound to that node as the file has it; RuntimeClasses are applied as the
  admission controller would (a pod naming a missing one is refused, with the reason);
* a PodDisruptionBudget is read as the file has it (without a status it allows no eviction, as in a
  cluster until the disruption controller writes one); one whose selector cannot be read is refused;
* a NodePool, EC2NodeClass or NodeOverlay named twice: the later document wins (reported);
* every other kind, and every kind no list call asked for (``unread``), is reported, never
  dropped silently. A saved DescribeCapacityReservations answer is not a Kubernetes object; the
  plan reads it separately (``provisioning.whatif.saved_reservations``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from nodewright.api.shapes import dig
from nodewright.cluster.objects import name_of
from nodewright.state.pods import key as pod_key

if TYPE_CHECKING:
    from nodewright.cluster.client import EvictionResult
    from nodewright.cluster.resources import Resource
    from nodewright.ratelimit import TokenBucket
    from nodewright.state.interfaces import Cluster, Lease, Obj

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
WORKLOAD_KINDS = ("Pod", *TEMPLATED_KINDS)
# Kinds kept as the file has them, each answered by its list call (``list_nodes`` ...).
LISTED_KINDS = (
    "Node",
    "NodeClaim",
    "NodePool",
    "EC2NodeClass",
    "NodeOverlay",
    "DaemonSet",
    "PodDisruptionBudget",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "VolumeAttachment",
)
# Kinds read through the pods: the workloads, and the RuntimeClasses admission applies to them.
POD_KINDS = (*WORKLOAD_KINDS, "RuntimeClass")
NAMED_ONCE = ("NodePool", "EC2NodeClass", "NodeOverlay")  # cluster-scoped: the later document wins
# A plan simulates at most this many pods per workload: a typo'd replicas must not exhaust memory.
MAX_WORKLOAD_PODS = 100_000


class ReadOnlyCluster(RuntimeError):
    """A write asked of a manifest bundle: a what-if reads its cluster and never changes it."""


class WorkloadProblem(ValueError):
    """A workload whose shape a plan cannot read; the message names the field (``spec.replicas: …``)."""


@dataclass
class BundleReport:
    """What reading the bundle found besides the objects: refused documents, pods admission refused,
    and every document by kind (to say which kinds nothing read)."""

    problems: list[str] = field(default_factory=list)
    rejected: int = 0  # documents left out because they are invalid
    refused_pods: dict[str, str] = field(default_factory=dict)  # namespace/name → why admission refuses it
    labels: dict[str, list[str]] = field(default_factory=dict)  # kind → "file#index Kind/name" of each


class ManifestCluster:
    """``state.interfaces.Cluster`` over a manifest bundle: reads answer deep copies of what the
    files hold (see the module); writes raise ``ReadOnlyCluster``."""

    def __init__(self, paths: Iterable[str | Path]) -> None:
        files = list(paths)
        self.source = f"{len(files)} manifest file(s)"
        self.report = BundleReport()
        self.limiter: TokenBucket | None = None  # files: no API server to spare
        self._kinds: dict[str, list[Obj]] = {kind: [] for kind in LISTED_KINDS}
        self._pods: list[Obj] = []
        self._listed: set[str] = set()
        self._read(files)

    # -- reads -----------------------------------------------------------------------------------
    def list_pods(self) -> list[Obj]:
        self._listed.update(POD_KINDS)
        return copy.deepcopy(self._pods)

    def list_pending_pods(self) -> list[Obj]:
        return [p for p in self.list_pods() if (p.get("status") or {}).get("phase") == "Pending"]

    def wait_for_pending_pods(self, timeout_seconds: float, wanted: Callable[[Obj], bool]) -> None:
        """Nothing arrives in a bundle: returns at once."""

    def list_pods_on_node(self, node_name: str) -> list[Obj]:
        return [p for p in self.list_pods() if (p.get("spec") or {}).get("nodeName") == node_name]

    def list_nodes(self) -> list[Obj]:
        return self._list("Node")

    def list_nodeclaims(self) -> list[Obj]:
        return self._list("NodeClaim")

    def list_nodepools(self) -> list[Obj]:
        return self._list("NodePool")

    def list_ec2nodeclasses(self) -> list[Obj]:
        return self._list("EC2NodeClass")

    def list_nodeoverlays(self) -> list[Obj]:
        return self._list("NodeOverlay")

    def list_daemonsets(self) -> list[Obj]:
        return self._list("DaemonSet")

    def list_pdbs(self) -> list[Obj]:
        return self._list("PodDisruptionBudget")

    def list_persistent_volumes(self) -> list[Obj]:
        return self._list("PersistentVolume")

    def list_persistent_volume_claims(self) -> list[Obj]:
        return self._list("PersistentVolumeClaim")

    def list_storage_classes(self) -> list[Obj]:
        return self._list("StorageClass")

    def list_volume_attachments(self) -> list[Obj]:
        return self._list("VolumeAttachment")

    def find_node(self, name: str) -> Obj | None:
        return next((n for n in self.list_nodes() if name_of(n) == name), None)

    def find_nodeclaim(self, name: str) -> Obj | None:
        return next((c for c in self.list_nodeclaims() if name_of(c) == name), None)

    def set_call_deadline(self, deadline: float | None) -> None:
        """Reads are local: no call can outlive a deadline."""

    def unread(self) -> list[str]:
        """Each document of a kind in the bundle that no list call has read so far, or that no list
        call answers at all: "file#index Kind/name: a plan does not use Kind objects"."""
        return sorted(
            f"{label}: a plan does not use {kind} objects"
            for kind, labels in self.report.labels.items()
            if kind not in self._listed
            for label in labels
        )

    # -- writes: refused -------------------------------------------------------------------------
    def _refuse(self, what: str) -> NoReturn:
        raise ReadOnlyCluster(
            f"{what}: a manifest bundle is read, never written (`nodewright plan` is a what-if); "
            "apply the change to a cluster instead"
        )

    def patch_node(self, name: str, patch: Obj) -> Obj:
        self._refuse(f"patch node {name}")

    def update_node(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        self._refuse(f"update node {name}")

    def taint_node(self, name: str, taints: Iterable[Obj], *, cordon: bool = False) -> Obj:
        self._refuse(f"taint node {name}")

    def delete_node(self, name: str) -> Obj | None:
        self._refuse(f"delete node {name}")

    def create_nodeclaim(self, body: Obj) -> Obj:
        self._refuse("create a NodeClaim")

    def patch_nodeclaim(self, name: str, patch: Obj) -> Obj:
        self._refuse(f"patch NodeClaim {name}")

    def patch_nodeclaim_status(self, name: str, status: Obj) -> Obj:
        self._refuse(f"patch NodeClaim {name} status")

    def delete_nodeclaim(self, name: str) -> Obj | None:
        self._refuse(f"delete NodeClaim {name}")

    def patch_nodepool_status(self, name: str, status: Obj) -> Obj:
        self._refuse(f"patch NodePool {name} status")

    def patch_ec2nodeclass_status(self, name: str, status: Obj) -> Obj:
        self._refuse(f"patch EC2NodeClass {name} status")

    def patch_nodeoverlay_status(self, name: str, status: Obj) -> Obj:
        self._refuse(f"patch NodeOverlay {name} status")

    def add_finalizer(self, resource: Resource, name: str, finalizer: str) -> Obj | None:
        self._refuse(f"add finalizer {finalizer} to {name}")

    def remove_finalizer(self, resource: Resource, name: str, finalizer: str) -> Obj | None:
        self._refuse(f"remove finalizer {finalizer} from {name}")

    def evict(self, pod: Obj) -> EvictionResult:
        self._refuse(f"evict pod {name_of(pod)}")

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Obj | None:
        self._refuse(f"delete pod {namespace}/{name}")

    def record_event(
        self, involved: Obj, reason: str, message: str, *, event_type: str = "Normal"
    ) -> Obj | None:
        self._refuse(f"record a {reason} event")

    def writer_lease(self, identity: str, *, duration_seconds: int = 30, wait_seconds: float = 0.0) -> Lease:
        self._refuse("take the writers' lease")

    # -- reading the bundle ----------------------------------------------------------------------
    def _list(self, kind: str) -> list[Obj]:
        self._listed.add(kind)
        return copy.deepcopy(self._kinds[kind])

    def _read(self, paths: list[str | Path]) -> None:
        from nodewright.api.manifests import validate_files
        from nodewright.cloud.reservations import is_saved_answer

        report = self.report
        named: dict[str, dict[str, Obj]] = {kind: {} for kind in NAMED_ONCE}
        runtime_classes: dict[str, Obj] = {}
        pods: list[Obj] = []
        kubelet_pieces: list[Obj] = []
        for document in validate_files(paths).documents:
            if is_saved_answer(document.source.doc):
                continue  # the account's capacity reservations, not a Kubernetes object
            label = document.source.label
            errors = [str(f) for f in document.findings if f.is_error]
            kinds = {str(doc.get("kind")) for doc in document.v1}
            nameable = all(isinstance(dig(doc, "metadata", "name"), str) for doc in document.v1)
            if errors and (kinds != {"EC2NodeClass"} or not nameable):
                report.problems.append(f"{label}: " + "; ".join(errors))
                report.rejected += 1
                continue
            if errors:  # what an EC2NodeClass lacks (role, selectors) matters to launching, not to a plan
                report.problems.append(
                    f"{label}: planned anyway, but it cannot launch until fixed: " + "; ".join(errors)
                )
            for index, doc in enumerate(expand_lists(document.v1)):
                kind = str(doc.get("kind"))
                report.labels.setdefault(kind, []).append(label)
                if kind == "EC2NodeClass" and index in document.partial:
                    kubelet_pieces.append(doc)  # a v1alpha5 Provisioner's kubeletConfiguration
                elif kind in NAMED_ONCE:
                    self._keep_last(named[kind], doc)
                elif kind == "Pod" and dig(doc, "spec", "nodeName"):
                    pods.append(doc)  # bound: it holds its node's resources and topology
                elif kind in WORKLOAD_KINDS:
                    try:
                        pods.extend(readable_pods(doc))
                    except WorkloadProblem as exc:
                        report.problems.append(f"{label}: {exc}")
                        report.rejected += 1
                elif kind == "PodDisruptionBudget" and (problem := unreadable_pdb(doc)):
                    report.problems.append(f"{label}: {problem}")
                    report.rejected += 1
                elif kind in LISTED_KINDS:
                    self._kinds[kind].append(doc)
                elif kind == "RuntimeClass":
                    runtime_classes[name_of(doc)] = doc
        for piece in kubelet_pieces:
            target = named["EC2NodeClass"].setdefault(name_of(piece), piece)
            target.setdefault("spec", {}).setdefault("kubelet", (piece.get("spec") or {}).get("kubelet"))
        for kind in NAMED_ONCE:
            self._kinds[kind] = list(named[kind].values())
        for pod in pods:
            problem = apply_runtime_class(pod, runtime_classes)
            if problem:
                report.refused_pods[pod_key(pod)] = problem
            else:
                self._pods.append(pod)

    def _keep_last(self, by_name: dict[str, Obj], doc: Obj) -> None:
        name = name_of(doc)
        if name in by_name:
            self.report.problems.append(
                f"{doc.get('kind')} {name!r} appears twice; the later document is used"
            )
        by_name[name] = doc


def expand_lists(documents: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``kind: List`` (and ``PodList``...) as ``kubectl get -o yaml`` writes them, item by item."""
    expanded: list[dict[str, Any]] = []
    for doc in documents:
        if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
            expanded.extend(item for item in doc["items"] if isinstance(item, dict))
        else:
            expanded.append(doc)
    return expanded


def unreadable_pdb(doc: Mapping[str, Any]) -> str | None:
    """Why a PodDisruptionBudget from a file cannot be honoured (``state.pdbs`` cannot read its
    selector), else None: such a document is reported and left out, never half-read."""
    from nodewright.state.pdbs import UnreadablePdb, budget_of

    try:
        budget_of(doc)
    except UnreadablePdb as exc:
        return f"PodDisruptionBudget {name_of(dict(doc))}: {exc}"
    return None


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


# --- workloads: the pods their controllers would create -------------------------------------------


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
        "status": copy.deepcopy(PENDING_STATUS),
    }


if TYPE_CHECKING:

    def _is_a_cluster(bundle: ManifestCluster) -> Cluster:
        """mypy checks here that ``ManifestCluster`` implements the cluster edge the flows read."""
        return bundle
