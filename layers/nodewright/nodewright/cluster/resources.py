"""The resource types Nodewright reads and writes, and how their REST paths are built."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """One API resource type: enough to build its REST path and an object's apiVersion/kind."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        elif self.namespaced and name:
            raise ValueError(f"{self.kind} {name!r} is namespaced: pass its namespace")
        path = f"{base}/{self.plural}"
        if name:
            path += f"/{name}"
            if subresource:
                path += f"/{subresource}"
        return path


PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
PERSISTENT_VOLUME_CLAIMS = Resource(
    "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True
)
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False)
VOLUME_ATTACHMENTS = Resource(
    "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", namespaced=False
)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
NODEPOOLS = Resource("karpenter.sh", "v1", "nodepools", "NodePool", namespaced=False)
NODECLAIMS = Resource("karpenter.sh", "v1", "nodeclaims", "NodeClaim", namespaced=False)
EC2NODECLASSES = Resource("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", namespaced=False)
NODEOVERLAYS = Resource("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay", namespaced=False)
# Read by `nodewright doctor` only (the operator's credentials, never the functions').
SERVICES = Resource("", "v1", "services", "Service", namespaced=True)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
MUTATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)

BY_KIND: dict[str, Resource] = {
    r.kind: r
    for r in (
        PODS,
        NODES,
        EVENTS,
        NAMESPACES,
        PERSISTENT_VOLUMES,
        PERSISTENT_VOLUME_CLAIMS,
        DAEMONSETS,
        PDBS,
        STORAGE_CLASSES,
        LEASES,
        NODEPOOLS,
        NODECLAIMS,
        EC2NODECLASSES,
        NODEOVERLAYS,
    )
}
