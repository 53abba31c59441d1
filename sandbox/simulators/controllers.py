"""The kube-controller-manager pieces a node autoscaler relies on.

* ReplicaSet: keeps ``spec.replicas`` active pods (evicted or deleted pods come back as new
  Pending pods with a controller ownerReference); deletes extras, unscheduled and not-ready first.
* Deployment: one ReplicaSet per pod template (``<name>-<pod-template-hash>``); a changed template
  scales the old ReplicaSets to 0 at once (a Recreate-style roll, simpler than RollingUpdate).
* DaemonSet: one pod per node that the pod's node affinity selects and whose taints it tolerates
  (with the tolerations the real controller adds), pinned with a ``matchFields metadata.name``
  node affinity as the real controller does; the scheduler binds it. As kube-controller-manager's
  ``NodeShouldRunDaemonPod``: a node that gains an untolerated NoSchedule taint (a cordon, Karpenter's
  ``karpenter.sh/disrupted``) keeps its running daemon pod but gets no new one, and only an
  untolerated NoExecute taint (or lost node affinity) removes it.
* PodDisruptionBudget status as kube-controller-manager's disruption controller writes it
  (``pkg/controller/disruption``): expectedPods (the controllers' scale: a Deployment's, a
  ReplicaSet's; pods without a controller are not counted, with an ``UnmanagedPods`` event),
  currentHealthy, desiredHealthy, disruptionsAllowed (0 while nothing is expected),
  observedGeneration, the DisruptionAllowed condition; prunes ``disruptedPods``. A PDB over pods
  whose controller has no scale subresource (a DaemonSet) fails to sync: the fail-safe writes
  disruptionsAllowed 0 and DisruptionAllowed False/SyncFailed, and no observedGeneration.
* Namespace deletion: deletes a terminating namespace's objects, then finalizes it.
* ServiceAccounts: each active namespace's ``default`` ServiceAccount (pods need it to be admitted).
* Ephemeral volumes (kube-controller-manager's ephemeral-volume controller): each generic ephemeral
  volume of a pod not being deleted gets its PVC ``<pod>-<volume>`` from the volume's template,
  controlled by the pod (``controller`` and ``blockOwnerDeletion``), so the garbage collector
  deletes it after the pod; a same-named PVC the pod does not control is left alone, with a
  ``FailedBinding`` Warning on the pod, and the scheduler refuses the pod while it is there.
* Provisioning (a CSI driver's external-provisioner and the PV controller's binding): a claim of a
  class with a provisioner gets a PersistentVolume in the zone of the node the scheduler selected
  (``volume.kubernetes.io/selected-node``, WaitForFirstConsumer) or, binding Immediate, of the
  class's first allowed zone; the PV carries the zone as its node affinity, and both are Bound.
  A released volume (its claim gone) of reclaim policy Delete is deleted.
* Storage protection: a deleting PVC waits for the pods using it (through a claim or as their
  ephemeral volume's), a deleting PV for its claim.
* Attach/detach (kube-controller-manager's attach-detach controller with a CSI driver's
  external-attacher): a VolumeAttachment ``csi-<sha256(handle+driver+node)>`` for every CSI
  PersistentVolume a pod bound to a node mounts through its claim (generic ephemeral volumes too),
  attached at once; ``detach_seconds`` after no pod on that node uses it any more (the kubelet's
  unmount and EC2's detach), it is deleted and its ``external-attacher/<driver>`` finalizer removed.
* Node lifecycle: the ``node.kubernetes.io/unschedulable:NoSchedule`` taint follows the cordon.
* Pod garbage collection: pods bound to a node that no longer exists are force-deleted (the real
  PodGC waits 40 s first; the sandbox does not).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from sandbox.apiserver.admission import cluster_now
from sandbox.simulators.kube import (
    MERGE_PATCH,
    Kube,
    controller_uid,
    core,
    group,
    owner_reference,
    record_event,
)
from sandbox.simulators.loop import ReconcileLoop, log
from sandbox.simulators.scheduler import (
    match_label_selector,
    matches_node_affinity,
    now,
    untolerated_taint,
)
from sandbox.simulators.volumebinding import (
    SELECTED_NODE,
    claim_names,
    controlled_by,
    ephemeral_claim_name,
)

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery's rand.String alphabet
POD_TEMPLATE_HASH = "pod-template-hash"
DISRUPTED_POD_TIMEOUT = dt.timedelta(minutes=2)
DAEMONSET_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
Obj = dict[str, Any]


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(NAME_ALPHABET) for _ in range(length))


def template_hash(template: Obj) -> str:
    """A stable short hash of a pod template (the role of the pod-template-hash label)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in digest[:10])


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_active(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and not is_terminal(pod)


def is_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def pod_from_template(owner: Obj, api_version: str, kind: str, template: Obj, name_prefix: str) -> Obj:
    meta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name_prefix}-{random_suffix()}",
            "namespace": owner["metadata"]["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(owner, api_version, kind)],
        },
        "spec": json.loads(json.dumps(template.get("spec") or {})),
    }


def _changed(current: Obj, wanted: Obj) -> bool:
    return any(current.get(k) != v for k, v in wanted.items())


def _patch_status(kube: Kube, path: str, obj: Obj, status: Obj) -> None:
    """Write status with the object's resourceVersion (409 → the next pass retries with fresh data)."""
    body = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": status}
    try:
        kube.patch(f"{path}/status", body, MERGE_PATCH)
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise


class Snapshot:
    """One view of each kind per pass, shared by the controllers: read from the controller
    manager's informers (``ReconcileLoop.view``), as kube-controller-manager's controllers read their
    shared informers' caches rather than listing the cluster on every change."""

    def __init__(self, read: Callable[[str], list[Obj]], kube: Kube) -> None:
        self.kube = kube
        self.pods = read(core("pods"))
        self.nodes = read(core("nodes"))
        self.replicasets = read(group("apps/v1", "replicasets"))
        self.deployments = read(group("apps/v1", "deployments"))
        self.daemonsets = read(group("apps/v1", "daemonsets"))
        self.pdbs = read(group("policy/v1", "poddisruptionbudgets"))
        self.namespaces = read(core("namespaces"))
        self.accounts = read(core("serviceaccounts"))
        # What the volume controllers release, reclaim and detach on: before a volume goes, its
        # claim's absence is confirmed with the API server (``VolumeProvisioner._reclaim``), as the
        # real PV controller does, since the cache may not show a claim created a moment ago.
        self.claims = read(core("persistentvolumeclaims"))
        self.volumes = read(core("persistentvolumes"))
        self.attachments = read(VOLUME_ATTACHMENTS)

    def owned_by(self, uid: str, items: list[Obj]) -> list[Obj]:
        return [item for item in items if controller_uid(item) == uid]


class Controller(Protocol):
    """What the controller manager runs each pass: one reconcile over the shared snapshot."""

    def reconcile(self, snap: Snapshot) -> None: ...


class ReplicaSetController:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        for rs in snap.replicasets:
            if rs["metadata"].get("deletionTimestamp"):
                continue
            meta, spec = rs["metadata"], rs.get("spec") or {}
            pods = [p for p in snap.owned_by(meta["uid"], snap.pods) if is_active(p)]
            wanted = int(spec.get("replicas", 1))
            owner = {"kind": "ReplicaSet", "apiVersion": "apps/v1", **rs}
            for _ in range(wanted - len(pods)):
                pod = pod_from_template(rs, "apps/v1", "ReplicaSet", spec.get("template") or {}, meta["name"])
                created = self.kube.create(core("pods", meta["namespace"]), pod)
                record_event(
                    self.kube,
                    owner,
                    "SuccessfulCreate",
                    f"Created pod: {created['metadata']['name']}",
                    component="replicaset-controller",
                )
            if len(pods) > wanted:
                ranked = sorted(
                    pods,
                    key=lambda p: (
                        bool((p.get("spec") or {}).get("nodeName")),
                        (p.get("status") or {}).get("phase") == "Running",
                        is_ready(p),
                        -_age_key(p),
                    ),
                )
                for pod in ranked[: len(pods) - wanted]:
                    self.kube.delete_ignoring_missing(
                        core("pods", meta["namespace"], pod["metadata"]["name"])
                    )
                    record_event(
                        self.kube,
                        owner,
                        "SuccessfulDelete",
                        f"Deleted pod: {pod['metadata']['name']}",
                        component="replicaset-controller",
                    )
            ready = sum(is_ready(p) for p in pods)
            status = {
                "replicas": len(pods),
                "fullyLabeledReplicas": len(pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": meta.get("generation", 1),
            }
            if _changed(rs.get("status") or {}, status):
                _patch_status(
                    self.kube, group("apps/v1", "replicasets", meta["namespace"], meta["name"]), rs, status
                )


def _age_key(pod: Obj) -> float:
    stamp = pod["metadata"].get("creationTimestamp")
    if not stamp:
        return 0.0
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class DeploymentController:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        for deployment in snap.deployments:
            meta, spec = deployment["metadata"], deployment.get("spec") or {}
            if meta.get("deletionTimestamp") or spec.get("paused"):
                continue
            namespace = meta["namespace"]
            template = spec.get("template") or {}
            pod_hash = template_hash(template)
            wanted = int(spec.get("replicas", 1))
            owned = snap.owned_by(meta["uid"], snap.replicasets)
            current = next(
                (
                    rs
                    for rs in owned
                    if (rs["metadata"].get("labels") or {}).get(POD_TEMPLATE_HASH) == pod_hash
                ),
                None,
            )
            if current is None:
                current = self._create_replicaset(deployment, template, pod_hash, wanted)
                snap.replicasets.append(
                    current
                )  # the ReplicaSet controller creates its pods in this same pass
                self._scaled(deployment, current, 0, wanted)
            elif (before := int((current.get("spec") or {}).get("replicas", 0))) != wanted:
                self.kube.patch(
                    group("apps/v1", "replicasets", namespace, current["metadata"]["name"]),
                    {"spec": {"replicas": wanted}},
                    MERGE_PATCH,
                )
                self._scaled(deployment, current, before, wanted)
            for old in owned:
                if old is not current and (before := int((old.get("spec") or {}).get("replicas", 0))) != 0:
                    self.kube.patch(
                        group("apps/v1", "replicasets", namespace, old["metadata"]["name"]),
                        {"spec": {"replicas": 0}},
                        MERGE_PATCH,
                    )
                    self._scaled(deployment, old, before, 0)
            self._update_status(deployment, owned, current, wanted)

    def _scaled(self, deployment: Obj, replicaset: Obj, before: int, after: int) -> None:
        """The deployment controller's ScalingReplicaSet event."""
        if before == after:
            return
        direction = "up" if after > before else "down"
        record_event(
            self.kube,
            {"kind": "Deployment", "apiVersion": "apps/v1", **deployment},
            "ScalingReplicaSet",
            f"Scaled {direction} replica set {replicaset['metadata']['name']} from {before} to {after}",
            component="deployment-controller",
        )

    def _create_replicaset(self, deployment: Obj, template: Obj, pod_hash: str, replicas: int) -> Obj:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        labels = {**((template.get("metadata") or {}).get("labels") or {}), POD_TEMPLATE_HASH: pod_hash}
        selector = json.loads(json.dumps(spec.get("selector") or {}))
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = pod_hash
        body: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{pod_hash}",
                "namespace": meta["namespace"],
                "labels": labels,
                "ownerReferences": [owner_reference(deployment, "apps/v1", "Deployment")],
            },
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {**template, "metadata": {**(template.get("metadata") or {}), "labels": labels}},
            },
        }
        try:
            return self.kube.create(group("apps/v1", "replicasets", meta["namespace"]), body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            return self.kube.get(group("apps/v1", "replicasets", meta["namespace"], body["metadata"]["name"]))

    def _update_status(self, deployment: Obj, owned: list[Obj], current: Obj, wanted: int) -> None:
        def total(field: str, items: list[Obj]) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0) or 0) for rs in items)

        available = total("availableReplicas", owned)
        status = {
            "replicas": total("replicas", owned),
            "updatedReplicas": int((current.get("status") or {}).get("replicas", 0) or 0),
            "readyReplicas": total("readyReplicas", owned),
            "availableReplicas": available,
            "unavailableReplicas": max(0, wanted - available),
            "observedGeneration": deployment["metadata"].get("generation", 1),
        }
        existing = deployment.get("status") or {}
        is_available = "True" if available >= wanted else "False"
        conditions = existing.get("conditions") or []
        if not any(c.get("type") == "Available" and c.get("status") == is_available for c in conditions):
            stamp = now()
            status["conditions"] = [
                {
                    "type": "Available",
                    "status": is_available,
                    "reason": "MinimumReplicasAvailable"
                    if is_available == "True"
                    else "MinimumReplicasUnavailable",
                    "message": "Deployment has minimum availability."
                    if is_available == "True"
                    else "Deployment does not have minimum availability.",
                    "lastUpdateTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ]
        if _changed(existing, status):
            meta = deployment["metadata"]
            _patch_status(
                self.kube,
                group("apps/v1", "deployments", meta["namespace"], meta["name"]),
                deployment,
                status,
            )


def daemon_pod_target(pod: Obj) -> str | None:
    """The node a DaemonSet pod is pinned to (its nodeName, or the matchFields metadata.name value)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


def pin_to_node(spec: Obj, node_name: str) -> Obj:
    """The pod spec pinned to a node by ``matchFields metadata.name In [node]``, as the DS controller pins."""
    spec = json.loads(json.dumps(spec))
    affinity = spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }
    tolerations = spec.setdefault("tolerations", [])
    for toleration in DAEMONSET_TOLERATIONS:
        if toleration not in tolerations:
            tolerations.append(dict(toleration))
    return spec


class DaemonSetController:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def should_run(self, daemonset: Obj, node: Obj) -> tuple[bool, bool]:
        """(shouldRun, shouldContinueRunning) of kube-controller-manager's ``NodeShouldRunDaemonPod``:
        a new pod needs every NoSchedule/NoExecute taint tolerated; a running one only NoExecute."""
        template = (daemonset.get("spec") or {}).get("template") or {}
        spec = json.loads(json.dumps(template.get("spec") or {}))
        spec["tolerations"] = [*(spec.get("tolerations") or []), *DAEMONSET_TOLERATIONS]
        pod = {"metadata": template.get("metadata") or {}, "spec": spec}
        if not matches_node_affinity(pod, node):
            return False, False
        taint = untolerated_taint(pod, node)
        if taint is None:
            return True, True
        no_execute = {
            **node,
            "spec": {
                **(node.get("spec") or {}),
                "taints": [
                    t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"
                ],
            },
        }
        return False, untolerated_taint(pod, no_execute) is None

    def reconcile(self, snap: Snapshot) -> None:
        for daemonset in snap.daemonsets:
            meta = daemonset["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            namespace = meta["namespace"]
            verdicts = {n["metadata"]["name"]: self.should_run(daemonset, n) for n in snap.nodes}
            eligible = {name for name, (run, _) in verdicts.items() if run}
            keep = {name for name, (_, stay) in verdicts.items() if stay}
            by_node: dict[str, list[Obj]] = {}
            pods = [p for p in snap.owned_by(meta["uid"], snap.pods) if is_active(p)]
            for pod in pods:
                by_node.setdefault(daemon_pod_target(pod) or "", []).append(pod)
            template = (daemonset.get("spec") or {}).get("template") or {}
            for node_name in sorted(eligible - by_node.keys()):
                pod = pod_from_template(daemonset, "apps/v1", "DaemonSet", template, meta["name"])
                pod["spec"] = pin_to_node(pod["spec"], node_name)
                self.kube.create(core("pods", namespace), pod)
            for node_name, node_pods in by_node.items():
                extras = node_pods if node_name not in keep else node_pods[1:]
                for pod in extras:
                    self.kube.delete_ignoring_missing(core("pods", namespace, pod["metadata"]["name"]))
            scheduled = [p for p in pods if (p.get("spec") or {}).get("nodeName") in eligible]
            ready = sum(is_ready(p) for p in scheduled)
            status = {
                "desiredNumberScheduled": len(eligible),
                "currentNumberScheduled": len(scheduled),
                "updatedNumberScheduled": len(scheduled),
                "numberMisscheduled": sum(
                    1 for p in pods if (p.get("spec") or {}).get("nodeName") not in (None, *eligible)
                ),
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": max(0, len(eligible) - ready),
                "observedGeneration": meta.get("generation", 1),
            }
            if _changed(daemonset.get("status") or {}, status):
                _patch_status(
                    self.kube, group("apps/v1", "daemonsets", namespace, meta["name"]), daemonset, status
                )


def _scaled(value: int | str, total: int) -> int:
    """An int, or a percentage of ``total`` rounded up (as the disruption controller rounds)."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


UNMANAGED_PODS = (
    "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a "
    "result, the status of the PDB cannot be calculated correctly, which may result in undefined "
    'behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an '
    "integer value."
)


class _SyncFailed(Exception):
    """The disruption controller cannot compute a PDB's expected pods (its ``trySync`` error)."""


class DisruptionController:
    """PodDisruptionBudget status, computed as the kube-controller-manager's disruption controller does
    (``pkg/controller/disruption/disruption.go``: ``trySync``, ``getExpectedPodCount``,
    ``countHealthyPods``, ``updatePdbStatus``, ``failSafe``)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self._warned: set[tuple[str, str]] = set()  # (PDB uid, resourceVersion) told about unmanaged pods

    def _expected_scale(self, snap: Snapshot, pods: list[Obj]) -> tuple[int, list[str]]:
        """``getExpectedScale``: the sum of the scale of each pod's controller (a ReplicaSet of a
        Deployment counts as the Deployment), and the pods that have no controller."""
        replicasets = {rs["metadata"]["uid"]: rs for rs in snap.replicasets}
        deployments = {d["metadata"]["uid"]: d for d in snap.deployments}
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = _controller_ref(pod)
            if ref is None:
                unmanaged.append(pod["metadata"]["name"])
                continue
            uid = ref.get("uid")
            if uid in replicasets:
                replicaset = replicasets[uid]
                owner = _controller_ref(replicaset)
                if (
                    owner is not None
                    and owner.get("kind") == "Deployment"
                    and owner.get("uid") in deployments
                ):
                    scales[owner["uid"]] = int(
                        (deployments[owner["uid"]].get("spec") or {}).get("replicas", 1)
                    )
                elif owner is None or owner.get("kind") != "Deployment":
                    scales[str(uid)] = int((replicaset.get("spec") or {}).get("replicas", 1))
                else:  # its Deployment is gone: the finders find nothing
                    raise _SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
            elif ref.get("kind") == "DaemonSet":
                raise _SyncFailed("daemonsets.apps does not implement the scale subresource")
            else:
                raise _SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        return sum(scales.values()), unmanaged

    def _expected(self, snap: Snapshot, spec: Obj, pods: list[Obj]) -> tuple[int, int, list[str]]:
        """``getExpectedPodCount``: (expected pods, desired healthy, unmanaged pods)."""
        if spec.get("maxUnavailable") is not None:
            expected, unmanaged = self._expected_scale(snap, pods)
            return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected)), unmanaged
        minimum = spec.get("minAvailable")
        if isinstance(minimum, int):
            return len(pods), minimum, []
        if minimum is not None:
            expected, unmanaged = self._expected_scale(snap, pods)
            return expected, _scaled(minimum, expected), unmanaged
        return 0, 0, []

    def reconcile(self, snap: Snapshot) -> None:
        stamp = cluster_now()
        for pdb in snap.pdbs:
            meta, spec = pdb["metadata"], pdb.get("spec") or {}
            namespace = meta["namespace"]
            pods = [  # getPodsForPdb: every pod the selector matches, whatever its phase
                p
                for p in snap.pods
                if p["metadata"].get("namespace") == namespace
                and match_label_selector(p["metadata"].get("labels") or {}, spec.get("selector"))
            ]
            try:
                expected, desired, unmanaged = self._expected(snap, spec, pods)
            except _SyncFailed as exc:
                self._fail_safe(pdb, str(exc))
                continue
            if unmanaged and (meta["uid"], meta["resourceVersion"]) not in self._warned:
                self._warned.add((meta["uid"], meta["resourceVersion"]))
                record_event(
                    self.kube,
                    {**pdb, "kind": "PodDisruptionBudget", "apiVersion": "policy/v1"},
                    "UnmanagedPods",
                    UNMANAGED_PODS.format(selector=spec.get("selector")),
                    component="controllermanager",
                    event_type="Warning",
                )
            by_name = {p["metadata"]["name"]: p for p in pods}
            disrupted = {
                name: when
                for name, when in ((pdb.get("status") or {}).get("disruptedPods") or {}).items()
                if name in by_name
                and not by_name[name]["metadata"].get("deletionTimestamp")
                and stamp - dt.datetime.fromisoformat(when.replace("Z", "+00:00")) < DISRUPTED_POD_TIMEOUT
            }
            healthy = sum(
                1
                for p in pods
                if is_ready(p)
                and not p["metadata"].get("deletionTimestamp")
                and p["metadata"]["name"] not in disrupted
            )
            # updatePdbStatus: nothing is allowed while no pod is expected (a PDB whose first pods
            # appear before its status is updated must be safe).
            allowed = healthy - desired if expected > 0 and healthy > desired else 0
            status: Obj = {
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "expectedPods": expected,
                "disruptionsAllowed": allowed,
                "observedGeneration": meta.get("generation", 1),
                "disruptedPods": disrupted or None,
            }
            existing = pdb.get("status") or {}
            condition_status = "True" if allowed > 0 else "False"
            reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
            if not any(
                c.get("type") == "DisruptionAllowed"
                and c.get("status") == condition_status
                and c.get("reason") == reason
                for c in existing.get("conditions") or []
            ):
                status["conditions"] = [
                    {
                        "type": "DisruptionAllowed",
                        "status": condition_status,
                        "reason": reason,
                        "message": "",
                        "observedGeneration": meta.get("generation", 1),
                        "lastTransitionTime": now(),
                    }
                ]
            comparable = {k: v for k, v in status.items() if k != "disruptedPods"}
            if (
                _changed(existing, comparable)
                or (existing.get("disruptedPods") or None) != status["disruptedPods"]
            ):
                _patch_status(
                    self.kube,
                    group("policy/v1", "poddisruptionbudgets", namespace, meta["name"]),
                    pdb,
                    status,
                )

    def _fail_safe(self, pdb: Obj, message: str) -> None:
        """``failSafe``: disruptionsAllowed 0 and DisruptionAllowed False/SyncFailed, the rest of the
        status (observedGeneration included) left as it was."""
        meta = pdb["metadata"]
        existing = pdb.get("status") or {}
        condition = {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "SyncFailed",
            "message": message,
            "observedGeneration": existing.get("observedGeneration", 0),
        }
        current = [c for c in existing.get("conditions") or [] if c.get("type") == "DisruptionAllowed"]
        if (
            existing.get("disruptionsAllowed") == 0
            and current
            and all(current[0].get(k) == v for k, v in condition.items())
        ):
            return
        if not current or current[0].get("status") != "False":
            condition["lastTransitionTime"] = now()
        else:
            condition["lastTransitionTime"] = current[0].get("lastTransitionTime") or now()
        others = [c for c in existing.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
        _patch_status(
            self.kube,
            group("policy/v1", "poddisruptionbudgets", meta["namespace"], meta["name"]),
            pdb,
            {"disruptionsAllowed": 0, "conditions": [*others, condition]},
        )


def _controller_ref(obj: Obj) -> Obj | None:
    return next(
        (r for r in obj.get("metadata", {}).get("ownerReferences") or [] if r.get("controller")), None
    )


NAMESPACED_KINDS: list[Callable[[str], str]] = [
    lambda ns: group("apps/v1", "deployments", ns),
    lambda ns: group("apps/v1", "daemonsets", ns),
    lambda ns: group("apps/v1", "replicasets", ns),
    lambda ns: core("pods", ns),
    lambda ns: group("policy/v1", "poddisruptionbudgets", ns),
    lambda ns: core("persistentvolumeclaims", ns),
    lambda ns: group("coordination.k8s.io/v1", "leases", ns),
    lambda ns: core("events", ns),
]


class NamespaceController:
    """Empties a terminating namespace, then removes the ``kubernetes`` finalizer through ``/finalize``
    (the namespace goes once no spec finalizer is left: ShouldDeleteNamespaceDuringUpdate)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def _custom_kinds(self) -> list[Callable[[str], str]]:
        try:
            crds, _ = self.kube.list(group("apiextensions.k8s.io/v1", "customresourcedefinitions"))
        except ApiException:
            return []
        kinds: list[Callable[[str], str]] = []
        for crd in crds:
            spec = crd.get("spec") or {}
            if spec.get("scope") != "Namespaced":
                continue
            served = [v["name"] for v in spec.get("versions") or [] if v.get("served")]
            if served:
                group_version = f"{spec['group']}/{served[0]}"
                plural = spec["names"]["plural"]
                kinds.append(functools.partial(group, group_version, plural))
        return kinds

    def reconcile(self, snap: Snapshot) -> None:
        for namespace in snap.namespaces:
            meta = namespace["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            remaining = 0
            for path_of in [*NAMESPACED_KINDS, *self._custom_kinds()]:
                path = path_of(meta["name"])
                try:
                    items, _ = self.kube.list(path)
                except ApiException:
                    continue
                for item in items:
                    remaining += 1
                    if not item["metadata"].get("deletionTimestamp"):
                        self.kube.delete_ignoring_missing(f"{path}/{item['metadata']['name']}")
            finalizers = (namespace.get("spec") or {}).get("finalizers") or []
            if remaining == 0 and "kubernetes" in finalizers:
                # finalizeNamespace removes its own token only: other spec finalizers still hold it.
                kept = [f for f in finalizers if f != "kubernetes"]
                body = {**namespace, "spec": {**(namespace.get("spec") or {}), "finalizers": kept}}
                try:
                    self.kube.replace(core("namespaces", name=meta["name"], sub="finalize"), body)
                except ApiException as exc:
                    if exc.status not in (404, 409):
                        raise


class ServiceAccountsController:
    """kube-controller-manager's serviceaccounts controller: every active namespace has a
    ``default`` ServiceAccount (made again if deleted), which the ServiceAccount admission plugin
    requires of every pod that names none."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        self.ensure(snap.namespaces, snap.accounts)

    def ensure(self, namespaces: list[Obj], accounts: list[Obj]) -> None:
        have = {sa["metadata"]["namespace"] for sa in accounts if sa["metadata"]["name"] == "default"}
        for namespace in namespaces:
            meta = namespace["metadata"]
            if meta.get("deletionTimestamp") or meta["name"] in have:
                continue
            body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
            try:
                self.kube.create(core("serviceaccounts", meta["name"]), body)
            except ApiException as exc:
                if exc.status not in (403, 404, 409):  # terminating, gone, or made meanwhile
                    raise


class StorageProtectionController:
    """The pvc-protection and pv-protection controllers: a deleting PVC keeps its finalizer while a
    pod that is not terminated uses it; a deleting PV keeps its finalizer while it is Bound."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    @staticmethod
    def _in_use(claim: Obj, pods: list[Obj]) -> bool:
        """``podUsesPVC``: a pod not terminated mounts it, through a ``persistentVolumeClaim`` or as
        the ephemeral volume it controls (a same-named claim it does not own is not its volume)."""
        meta = claim["metadata"]
        return any(
            name == meta["name"] and (not ephemeral or controlled_by(claim, pod))
            for pod in pods
            if pod["metadata"]["namespace"] == meta["namespace"] and not is_terminal(pod)
            for name, ephemeral in claim_names(pod)
        )

    def reconcile(self, snap: Snapshot) -> None:
        deleting = [c for c in snap.claims if c["metadata"].get("deletionTimestamp")]
        if deleting:
            # As the real controller asks the API server before releasing: the pass's snapshot may
            # predate a pod that started using the claim.
            pods, _ = self.kube.list(core("pods"))
            for claim in deleting:
                meta = claim["metadata"]
                if not self._in_use(claim, pods):
                    path = core("persistentvolumeclaims", meta["namespace"], meta["name"])
                    self._release(path, claim, "pvc")
        for volume in snap.volumes:
            meta = volume["metadata"]
            if meta.get("deletionTimestamp") and (volume.get("status") or {}).get("phase") != "Bound":
                self._release(core("persistentvolumes", name=meta["name"]), volume, "pv")

    def _release(self, path: str, obj: Obj, kind: str) -> None:
        finalizer = f"kubernetes.io/{kind}-protection"
        finalizers = obj["metadata"].get("finalizers") or []
        if finalizer not in finalizers:
            return
        kept = [f for f in finalizers if f != finalizer]
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]},
            {"op": "replace", "path": "/metadata/finalizers", "value": kept},
        ]
        try:
            self.kube.patch(path, patch, "application/json-patch+json")
        except ApiException as exc:
            if exc.status not in (404, 409, 422):
                raise


class EphemeralVolumeController:
    """Each generic ephemeral volume's PVC, made from its template (see the module docstring)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        wanted = [
            (pod, volume)
            for pod in snap.pods
            if not pod["metadata"].get("deletionTimestamp")
            for volume in (pod.get("spec") or {}).get("volumes") or []
            if volume.get("ephemeral") is not None
        ]
        if not wanted:
            return
        existing = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in snap.claims}
        for pod, volume in wanted:
            meta = pod["metadata"]
            name = ephemeral_claim_name(pod, volume)
            claim = existing.get((meta["namespace"], name))
            if claim is None:
                self._create(pod, volume, name)
            elif not controlled_by(claim, pod):
                message = (
                    f"ephemeral volume {volume.get('name')}: PVC {meta['namespace']}/{name} was not "
                    f"created for pod {meta['namespace']}/{meta['name']} (pod is not owner)"
                )
                record_event(
                    self.kube,
                    {"apiVersion": "v1", "kind": "Pod", **pod},
                    "FailedBinding",
                    message,
                    component="ephemeral_volume",
                    event_type="Warning",
                )

    def _create(self, pod: Obj, volume: Obj, name: str) -> None:
        template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate") or {}
        template_meta = template.get("metadata") or {}
        metadata: Obj = {"name": name, "ownerReferences": [owner_reference(pod, "v1", "Pod")]}
        for key in ("labels", "annotations"):
            if template_meta.get(key):
                metadata[key] = dict(template_meta[key])
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": metadata,
            "spec": json.loads(json.dumps(template.get("spec") or {})),
        }
        try:
            self.kube.create(core("persistentvolumeclaims", pod["metadata"]["namespace"]), body)
        except ApiException as exc:
            if exc.status not in (403, 409):  # a terminating namespace, or made meanwhile
                raise


ZONE = "topology.kubernetes.io/zone"
STORAGE_CLASSES = group("storage.k8s.io/v1", "storageclasses")


class VolumeProvisioner:
    """A CSI external-provisioner with the PV controller's binding (see the module docstring)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        claims = snap.claims
        self._reclaim(claims, snap.volumes)
        unbound = [
            c
            for c in claims
            if not (c.get("spec") or {}).get("volumeName") and not c["metadata"].get("deletionTimestamp")
        ]
        if not unbound:
            return
        classes = {s["metadata"]["name"]: s for s in self.kube.list(STORAGE_CLASSES)[0]}
        zones = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE) for n in snap.nodes}
        for claim in unbound:
            storage_class = classes.get((claim.get("spec") or {}).get("storageClassName") or "")
            if storage_class is None or storage_class.get("provisioner") in (
                None,
                "",
                "kubernetes.io/no-provisioner",
            ):
                continue
            if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
                selected = (claim["metadata"].get("annotations") or {}).get(SELECTED_NODE)
                zone = zones.get(selected) if selected else None
            else:
                zone = _first_allowed_zone(storage_class)
            if zone:
                self._provision(claim, storage_class, zone)

    def _provision(self, claim: Obj, storage_class: Obj, zone: str) -> None:
        meta = claim["metadata"]
        spec = claim.get("spec") or {}
        name = f"pvc-{meta['uid']}"
        volume: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {"pv.kubernetes.io/provisioned-by": storage_class["provisioner"]},
            },
            "spec": {
                "capacity": {
                    "storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
                },
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
                "storageClassName": storage_class["metadata"]["name"],
                "csi": {
                    "driver": storage_class["provisioner"],
                    "volumeHandle": f"vol-{secrets.token_hex(8)}",
                },
                "claimRef": {
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                        ]
                    }
                },
            },
        }
        try:
            created = self.kube.create(core("persistentvolumes"), volume)
        except ApiException as exc:
            if exc.status != 409:
                raise
            created = self.kube.get(core("persistentvolumes", name=name))  # an earlier pass's: bind it
        _patch_status(self.kube, core("persistentvolumes", name=name), created, {"phase": "Bound"})
        path = core("persistentvolumeclaims", meta["namespace"], meta["name"])
        patch = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"volumeName": name},
        }
        try:
            bound = self.kube.patch(path, patch, MERGE_PATCH)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
            return
        _patch_status(
            self.kube,
            path,
            bound,
            {
                "phase": "Bound",
                "accessModes": volume["spec"]["accessModes"],
                "capacity": volume["spec"]["capacity"],
            },
        )

    def _reclaim(self, claims: list[Obj], volumes: list[Obj]) -> None:
        """A provisioned volume whose claim is gone is Released, and deleted (reclaim policy Delete).
        Gone means gone from the API server: the informer's absence is checked with a GET first, as
        the PV controller does before it releases a volume."""
        uids = {c["metadata"]["uid"] for c in claims}
        for volume in volumes:
            spec = volume.get("spec") or {}
            ref = spec.get("claimRef") or {}
            meta = volume["metadata"]
            if (
                not ref.get("uid")
                or ref["uid"] in uids
                or spec.get("persistentVolumeReclaimPolicy", "Delete") != "Delete"
                or meta.get("deletionTimestamp")
            ):
                continue
            claim = self.kube.get_or_none(
                core("persistentvolumeclaims", ref.get("namespace"), ref.get("name"))
            )
            if claim is not None and claim["metadata"].get("uid") == ref["uid"]:
                continue  # there after all: the cache had not caught up
            path = core("persistentvolumes", name=meta["name"])
            if (volume.get("status") or {}).get("phase") != "Released":
                _patch_status(self.kube, path, volume, {"phase": "Released"})
            self.kube.delete_ignoring_missing(path)


def _first_allowed_zone(storage_class: Obj) -> str | None:
    for term in storage_class.get("allowedTopologies") or []:
        for expression in term.get("matchLabelExpressions") or []:
            if expression.get("key") == ZONE and expression.get("values"):
                return str(expression["values"][0])
    return None


VOLUME_ATTACHMENTS = group("storage.k8s.io/v1", "volumeattachments")


class AttachDetachController:
    """Attachments follow the pods that mount CSI volumes (see the module docstring)."""

    def __init__(self, kube: Kube, detach_seconds: float = 5.0) -> None:
        self.kube = kube
        self.detach_seconds = detach_seconds
        self._unused_since: dict[str, float] = {}  # VolumeAttachment → when no pod used it any more

    @staticmethod
    def attachment_name(handle: str, driver: str, node: str) -> str:
        """``GetCSIAttachmentName`` of the CSI volume plugin."""
        return "csi-" + hashlib.sha256(f"{handle}{driver}{node}".encode()).hexdigest()

    def _wanted(self, snap: Snapshot, csi: dict[str, tuple[str, str]]) -> set[tuple[str, str]]:
        """(PersistentVolume, node) of every CSI volume a pod bound to a node (not finished) mounts."""
        if not csi:
            return set()
        volume_of = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): (c.get("spec") or {}).get("volumeName")
            for c in snap.claims
        }
        wanted = set()
        for pod in snap.pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node or is_terminal(pod):
                continue
            for name, _ in claim_names(pod):
                pv = volume_of.get((pod["metadata"]["namespace"], name))
                if pv in csi:
                    wanted.add((pv, node))
        return wanted

    def reconcile(self, snap: Snapshot) -> None:
        csi = {
            v["metadata"]["name"]: (v["spec"]["csi"]["volumeHandle"], v["spec"]["csi"]["driver"])
            for v in snap.volumes
            if ((v.get("spec") or {}).get("csi") or {}).get("driver")
        }
        wanted = self._wanted(snap, csi)
        have: dict[tuple[str, str], Obj] = {}
        clock = time.monotonic()
        for va in snap.attachments:
            spec = va.get("spec") or {}
            key = ((spec.get("source") or {}).get("persistentVolumeName") or "", spec.get("nodeName") or "")
            name = va["metadata"]["name"]
            have[key] = va
            if va["metadata"].get("deletionTimestamp"):
                self._detached(va)
            elif key in wanted:
                self._unused_since.pop(name, None)
            elif clock - self._unused_since.setdefault(name, clock) >= self.detach_seconds:
                self._unused_since.pop(name, None)
                self.kube.delete_ignoring_missing(f"{VOLUME_ATTACHMENTS}/{name}")
        for pv, node in sorted(wanted - have.keys()):
            handle, driver = csi[pv]
            self._attach(self.attachment_name(handle, driver, node), driver, pv, node)

    def _attach(self, name: str, driver: str, pv: str, node: str) -> None:
        body = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": name, "finalizers": [f"external-attacher/{driver.replace('.', '-')}"]},
            "spec": {"attacher": driver, "nodeName": node, "source": {"persistentVolumeName": pv}},
        }
        try:
            created = self.kube.create(VOLUME_ATTACHMENTS, body)
        except ApiException as exc:
            if exc.status == 409:
                return
            raise
        _patch_status(self.kube, f"{VOLUME_ATTACHMENTS}/{name}", created, {"attached": True})

    def _detached(self, va: Obj) -> None:
        """The external-attacher's detach: its finalizer goes, and with it the object."""
        kept = [f for f in va["metadata"].get("finalizers") or [] if not f.startswith("external-attacher/")]
        patch = {
            "metadata": {"resourceVersion": va["metadata"]["resourceVersion"], "finalizers": kept or None}
        }
        try:
            self.kube.patch(f"{VOLUME_ATTACHMENTS}/{va['metadata']['name']}", patch, MERGE_PATCH)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise


UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class NodeLifecycleController:
    """TaintNodesByCondition for cordons: a node with ``spec.unschedulable`` carries the
    ``node.kubernetes.io/unschedulable:NoSchedule`` taint, and loses it when uncordoned."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        for node in snap.nodes:
            spec = node.get("spec") or {}
            taints = list(spec.get("taints") or [])
            tainted = any(
                t.get("key") == UNSCHEDULABLE_TAINT["key"] and t.get("effect") == "NoSchedule" for t in taints
            )
            wanted = bool(spec.get("unschedulable"))
            if wanted == tainted:
                continue
            if wanted:
                taints.append(dict(UNSCHEDULABLE_TAINT))
            else:
                taints = [t for t in taints if t.get("key") != UNSCHEDULABLE_TAINT["key"]]
            meta = node["metadata"]
            patch = {
                "metadata": {"resourceVersion": meta["resourceVersion"]},
                "spec": {"taints": taints or None},
            }
            try:  # guarded by resourceVersion: another writer's taint is never lost
                self.kube.patch(core("nodes", name=meta["name"]), patch, MERGE_PATCH)
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise


class PodGarbageCollector:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def reconcile(self, snap: Snapshot) -> None:
        nodes = {n["metadata"]["name"] for n in snap.nodes}
        for pod in snap.pods:
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and node_name not in nodes:
                meta = pod["metadata"]
                self.kube.delete_ignoring_missing(
                    core("pods", meta["namespace"], meta["name"]), grace_period_seconds=0, uid=meta.get("uid")
                )


SYNC_TIMEOUT_SECONDS = 30.0  # what a loaded machine may take for a controller's first pass


class ServiceAccounts(ReconcileLoop):
    """The serviceaccounts controller on its own, for an API server that runs without the other
    simulators (the emulator's own tests): kube-controller-manager always runs beside kube-apiserver,
    and without it no pod is admitted in a namespace. ``with`` starts it and returns once every
    namespace has its ``default`` ServiceAccount."""

    name = "serviceaccounts"
    watch_paths = (core("namespaces"), core("serviceaccounts"))
    informed_paths = watch_paths

    def __init__(self, kube: Kube, resync: float = 1.0) -> None:
        super().__init__(kube, resync)
        self.controller = ServiceAccountsController(kube)
        self.synced = threading.Event()

    def reconcile(self) -> None:
        self.controller.ensure(self.view(core("namespaces")), self.view(core("serviceaccounts")))
        self.synced.set()

    def __enter__(self) -> ServiceAccounts:
        self.start()
        if not self.synced.wait(SYNC_TIMEOUT_SECONDS):
            self.stop()
            raise RuntimeError(f"no ServiceAccounts after {SYNC_TIMEOUT_SECONDS:.0f}s: {self.last_error}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(self, namespace: str, timeout: float = SYNC_TIMEOUT_SECONDS) -> Obj:
        """The namespace's ``default`` ServiceAccount once it exists (what a client creating pods
        right after their namespace waits for, as ``kubectl wait --for=create`` would)."""
        return wait_for_default_service_account(self.kube, namespace, timeout)


def wait_for_default_service_account(
    kube: Kube, namespace: str, timeout: float = SYNC_TIMEOUT_SECONDS
) -> Obj:
    """Poll until ``namespace`` has its ``default`` ServiceAccount; raise after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = kube.get_or_none(core("serviceaccounts", namespace, "default"))
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"namespace {namespace} has no default ServiceAccount after {timeout:.0f}s")
        time.sleep(0.05)


class ControllerManager(ReconcileLoop):
    """All controllers, one pass each per change of any pod (or every ``resync`` seconds).

    ``synced`` is set after the first pass: every namespace then has its ``default``
    ServiceAccount, so pods can be admitted (``Sandbox`` waits for it before it is up)."""

    name = "controller-manager"
    # What the Snapshot reads, from informers.
    informed_paths = (
        core("pods"),
        core("nodes"),
        core("namespaces"),
        core("serviceaccounts"),
        group("apps/v1", "deployments"),
        group("apps/v1", "replicasets"),
        group("apps/v1", "daemonsets"),
        group("policy/v1", "poddisruptionbudgets"),
        core("persistentvolumeclaims"),
        core("persistentvolumes"),
        VOLUME_ATTACHMENTS,
    )
    watch_paths = informed_paths

    def __init__(self, kube: Kube, resync: float = 1.0) -> None:
        super().__init__(kube, resync)
        self.synced = threading.Event()
        self.controllers: list[Controller] = [
            ServiceAccountsController(kube),
            PodGarbageCollector(kube),
            NodeLifecycleController(kube),
            EphemeralVolumeController(kube),
            VolumeProvisioner(kube),
            StorageProtectionController(kube),
            AttachDetachController(kube),
            DeploymentController(kube),
            ReplicaSetController(kube),
            DaemonSetController(kube),
            DisruptionController(kube),
            NamespaceController(kube),
        ]

    def reconcile(self) -> None:
        snap = Snapshot(self.view, self.kube)
        for controller in self.controllers:
            try:
                controller.reconcile(snap)
            except ApiException as exc:  # one controller's trouble must not stop the others
                self.errors += 1
                self.last_error = f"{type(controller).__name__}: {exc.status} {exc.reason}"
                log.warning("%s failed: %s", type(controller).__name__, self.last_error)
            else:
                if isinstance(controller, ServiceAccountsController):
                    self.synced.set()

    def wait_synced(self, timeout: float = SYNC_TIMEOUT_SECONDS) -> bool:
        """Whether every namespace got its ``default`` ServiceAccount within ``timeout``."""
        return self.synced.wait(timeout)
