"""The provisioner's planning path on manifests instead of a cluster (``nodewright plan``).

Manifests are validated and converted to v1 exactly as ``nodewright validate``/``convert`` do; a
document with errors is reported and left out while the rest is planned. Workloads (Pods,
Deployments, ReplicaSets, StatefulSets, Jobs) become the pending pods the kube-scheduler would
have marked Unschedulable on an empty cluster. NodePools go through the same triage and the same
scheduling bridge as a provisioning pass; only the instance catalog is handed in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodewright.cloud.pricetable import PriceTable
from nodewright.provisioning import nodeclaims, planning
from nodewright.state import nodepools
from nodewright.state.pods import key as pod_key
from nodewright.state.world import World

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


@dataclass
class WhatIf:
    claims: list[planning.ClaimPlan] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)
    skipped_nodepools: dict[str, str] = field(default_factory=dict)
    manifest_problems: list[str] = field(default_factory=list)
    pods: int = 0

    @property
    def cost_per_hour(self) -> float:
        return sum(c.price for c in self.claims)

    def to_json(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "nodeClaims": [
                {
                    "nodePool": c.nodepool,
                    "pods": [pod_key(p) for p in c.pods],
                    "instanceTypes": c.instance_types,
                    "zones": c.zones,
                    "capacityTypes": c.capacity_types,
                    "pricePerHour": round(c.price, 5),
                    "requirements": c.requirements,
                }
                for c in self.claims
            ],
            "costPerHour": round(self.cost_per_hour, 5),
            "pending": self.pending,
            "skippedNodePools": self.skipped_nodepools,
            "manifestProblems": self.manifest_problems,
        }

    def render(self) -> str:
        lines = [f"{self.pods} pod(s) → {len(self.claims)} NodeClaim(s), ${self.cost_per_hour:.4f}/h"]
        for claim in self.claims:
            shown = ", ".join(claim.instance_types[:5]) + (" …" if len(claim.instance_types) > 5 else "")
            lines.append(
                f"  NodeClaim on NodePool {claim.nodepool}: {len(claim.pods)} pod(s), ${claim.price:.4f}/h, "
                f"{'/'.join(claim.capacity_types)} in {', '.join(claim.zones)}"
            )
            lines.append(f"      candidates ({len(claim.instance_types)}, cheapest first): {shown}")
        if self.pending:
            lines.append(f"{len(self.pending)} pod(s) would stay pending:")
            lines.extend(f"  {pod}: {reason}" for pod, reason in sorted(self.pending.items()))
        if self.skipped_nodepools:
            lines.append("NodePools skipped:")
            lines.extend(f"  {reason}" for _, reason in sorted(self.skipped_nodepools.items()))
        if self.manifest_problems:
            lines.append("Manifest problems:")
            lines.extend(f"  {problem}" for problem in self.manifest_problems)
        return "\n".join(lines)


class _OfflineCloud:
    """What a plan observes of the cloud, offline: the instance types of an EC2NodeClass (the catalog
    handed in, already priced); no price table, since nothing is running to cost anything."""

    def __init__(self, instance_types: Callable[[Mapping[str, Any]], list[Any]]) -> None:
        self._instance_types = instance_types

    def instance_types(self, nodeclass: Mapping[str, Any]) -> list[Any]:
        return self._instance_types(nodeclass)

    def prices(self) -> PriceTable:
        return PriceTable()


def pods_of(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods a workload would create, as the scheduler would see them: unbound and Unschedulable."""
    kind = workload.get("kind")
    meta = workload.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    if kind == "Pod":
        return [_pending_pod(meta.get("name", "pod"), namespace, meta, workload.get("spec") or {}, None)]
    spec = workload.get("spec") or {}
    template = spec.get("template") or {}
    replicas = int(spec.get("parallelism", 1) if kind == "Job" else spec.get("replicas", 1))
    owner = {"kind": TEMPLATED_KINDS[str(kind)], "name": meta.get("name", "workload")}
    name = meta.get("name", "workload")
    pod_meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    return [_pending_pod(f"{name}-{i}", namespace, pod_meta, pod_spec, owner) for i in range(replicas)]


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


def what_if(paths: Iterable[str | Path], instance_types: Callable[[Mapping[str, Any]], list[Any]]) -> WhatIf:
    """Plan the manifests in ``paths``; ``instance_types(nodeclass)`` is the catalog for a v1 EC2NodeClass."""
    from nodewright.api.manifests import validate_files

    result = WhatIf()
    pools: dict[str, dict[str, Any]] = {}
    classes: dict[str, dict[str, Any]] = {}
    pending: list[dict[str, Any]] = []
    kubelet_pieces: list[dict[str, Any]] = []
    for report in validate_files(paths).documents:
        errors = [str(f) for f in report.findings if f.is_error]
        kinds = {doc.get("kind") for doc in report.v1}
        if errors and kinds != {"EC2NodeClass"}:
            result.manifest_problems.append(f"{report.source.label}: " + "; ".join(errors))
            continue
        if errors:  # what an EC2NodeClass lacks (role, selectors) matters to launching, not to a plan
            result.manifest_problems.append(
                f"{report.source.label}: planned anyway, but it cannot launch until fixed: "
                + "; ".join(errors)
            )
        for index, doc in enumerate(report.v1):
            kind = doc.get("kind")
            if kind == "EC2NodeClass" and index in report.partial:
                kubelet_pieces.append(doc)  # a v1alpha5 Provisioner's kubeletConfiguration
            elif kind == "NodePool":
                _keep_last(pools, doc, result)
            elif kind == "EC2NodeClass":
                _keep_last(classes, doc, result)
            elif kind in WORKLOAD_KINDS:
                pending.extend(pods_of(doc))
    for piece in kubelet_pieces:
        target = classes.setdefault(nodeclaims.name_of(piece), piece)
        target.setdefault("spec", {}).setdefault("kubelet", (piece.get("spec") or {}).get("kubelet"))
    result.pods = len(pending)
    world = World(
        taken_at=datetime.now(UTC),
        nodeclaims=[],
        nodes=[],
        pods=pending,
        nodepools=list(pools.values()),
        nodeclasses=list(classes.values()),
        cloud=_OfflineCloud(instance_types),
    )
    verdicts = nodepools.triage(world, _pool_errors_only)
    result.skipped_nodepools = verdicts.skipped
    view = planning.plan(world, pending, verdicts.usable)
    result.claims = view.new_claims
    result.pending = view.unschedulable
    return result


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
