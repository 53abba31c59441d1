"""What one pass sees: the cluster's objects, read in an order that undershoots.

Capacity first (NodeClaims, nodes — we hold the writers' lease, so no NodeClaim appears
behind our back), then pods: a pod that binds in between shows up bound or not pending,
never as a pending pod we would launch for twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodewright.provisioning import nodeclaims

if TYPE_CHECKING:
    from nodewright.context import Context


@dataclass
class World:
    """Plain Kubernetes dicts, exactly as the API server returned them."""

    taken_at: datetime
    nodeclaims: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    nodepools: list[dict[str, Any]]
    nodeclasses: list[dict[str, Any]]
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    persistent_volumes: list[dict[str, Any]] = field(default_factory=list)
    persistent_volume_claims: list[dict[str, Any]] = field(default_factory=list)
    storage_classes: list[dict[str, Any]] = field(default_factory=list)

    def nodes_by_provider_id(self) -> dict[str, dict[str, Any]]:
        return {
            str((node.get("spec") or {}).get("providerID")): node
            for node in self.nodes
            if (node.get("spec") or {}).get("providerID")
        }

    def nodepool(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.nodepools if nodeclaims.name_of(p) == name), None)

    def nodeclass(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.nodeclasses if nodeclaims.name_of(c) == name), None)


def observe(ctx: Context) -> World:
    """Read everything a pass needs: capacity (NodeClaims, nodes, ...) first, then pods."""
    return from_snapshot(ctx.cluster.snapshot(), ctx.clock.now())


def from_snapshot(snap: Any, taken_at: datetime) -> World:
    """The World of one ``Cluster.snapshot()``."""
    return World(
        taken_at=taken_at,
        nodeclaims=snap.nodeclaims,
        nodes=snap.nodes,
        pods=snap.pods,
        nodepools=snap.nodepools,
        nodeclasses=snap.ec2nodeclasses,
        daemonsets=snap.daemonsets,
        pdbs=snap.pdbs,
        persistent_volumes=snap.persistent_volumes,
        persistent_volume_claims=snap.persistent_volume_claims,
        storage_classes=snap.storage_classes,
    )


def pending_since(pod: dict[str, Any]) -> datetime | None:
    """When the scheduler gave up on the pod (the Unschedulable transition), else its creation."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            moment = nodeclaims.timestamp(cond.get("lastTransitionTime"))
            if moment:
                return moment
    return nodeclaims.created_at(pod)


def pod_key(pod: dict[str, Any]) -> str:
    """``namespace/name``, the key the scheduling core uses."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
