"""What ``nodewright doctor`` reads from the Kubernetes API (with the operator's credentials).

Read only: objects come back as plain dicts, ``None`` when absent. An API group the server does
not serve (a 404 on the collection) is reported as ``NOT_SERVED`` rather than raised, so the
doctor can say so and go on with its other checks.
"""

from __future__ import annotations

from typing import Any, Final

from nodewright.cluster.client import Cluster
from nodewright.cluster.errors import NotFound
from nodewright.cluster.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CRDS,
    DEPLOYMENTS,
    EC2NODECLASSES,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    ROLE_BINDINGS,
    ROLES,
    SERVICES,
    VALIDATING_WEBHOOKS,
    Resource,
)

NOT_SERVED: Final = "not-served"


def server_version(cluster: Cluster) -> dict[str, Any]:
    """``GET /version``: proves the endpoint answers and the credentials are accepted."""
    return cluster.request("GET", "/version")


def crd(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return cluster.find(CRDS, name)


def namespace(cluster: Cluster, name: str) -> dict[str, Any] | None:
    return cluster.find(NAMESPACES, name)


def rbac_object(
    cluster: Cluster, kind: str, name: str, namespace: str | None = None
) -> dict[str, Any] | str | None:
    """A ClusterRole, ClusterRoleBinding, Role or RoleBinding; ``NOT_SERVED`` when the API server
    does not serve rbac.authorization.k8s.io/v1 at all."""
    resource = {
        "ClusterRole": CLUSTER_ROLES,
        "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS,
        "Role": ROLES,
        "RoleBinding": ROLE_BINDINGS,
    }[kind]
    try:
        return cluster.get(resource, name, namespace)
    except NotFound:
        return NOT_SERVED if not _served(cluster, resource, namespace) else None


def webhook_configurations(cluster: Cluster) -> list[dict[str, Any]] | str:
    """Every validating and mutating webhook configuration, or ``NOT_SERVED``."""
    found: list[dict[str, Any]] = []
    for resource in (VALIDATING_WEBHOOKS, MUTATING_WEBHOOKS):
        try:
            found.extend(cluster.list(resource))
        except NotFound:
            return NOT_SERVED
    return found


def validating_webhook_configuration(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The named configuration; None when it (or the API serving it) is absent."""
    return cluster.find(VALIDATING_WEBHOOKS, name)


def service(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    return cluster.find(SERVICES, name, namespace)


def deployments(cluster: Cluster) -> list[dict[str, Any]]:
    """Every Deployment, in every namespace (to find a controller that should not run)."""
    return cluster.list(DEPLOYMENTS)


def ec2nodeclasses(cluster: Cluster) -> list[dict[str, Any]] | str:
    try:
        return cluster.list(EC2NODECLASSES)
    except NotFound:
        return NOT_SERVED


def _served(cluster: Cluster, resource: Resource, namespace: str | None = None) -> bool:
    """Whether the collection exists (a GET of a missing object and of a missing API both 404)."""
    try:
        cluster.request("GET", resource.path(namespace), query={"limit": 1})
    except NotFound:
        return False
    return True
