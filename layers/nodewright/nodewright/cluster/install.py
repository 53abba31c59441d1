"""Create-or-replace of what an operator installs once (``nodewright install-webhooks``), with the
operator's own credentials: the functions' RBAC cannot write these, on purpose."""

from __future__ import annotations

from typing import Any

from nodewright.cluster.client import Cluster
from nodewright.cluster.resources import Resource


def apply(cluster: Cluster, resource: Resource, document: dict[str, Any]) -> str:
    """Create ``document``, or replace the object of that name (its whole spec): "created" or
    "configured", as ``kubectl apply`` says."""
    meta = document["metadata"]
    current = cluster.find(resource, meta["name"], meta.get("namespace"))
    if current is None:
        cluster.create(resource, document)
        return "created"
    body = {
        **document,
        "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]},
    }
    cluster.replace(resource, {"apiVersion": resource.api_version, "kind": resource.kind, **body})
    return "configured"


def remove(cluster: Cluster, resource: Resource, name: str) -> bool:
    """Delete the named object; False when there was none."""
    return cluster.delete(resource, name) is not None
