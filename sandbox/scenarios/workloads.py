"""The manifests the end-to-end scenarios apply to a sandbox: one EC2NodeClass that resolves in it,
NodePools on that class, and the seeds' ``inflate`` deployment at any size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodewright.cluster.resources import Resource

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

# The workload kinds the scenarios drive (the autoscaler itself never writes them, so they are not
# among the layer's resources).
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)

NODECLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def nodeclass(sb: Sandbox) -> dict[str, Any]:
    """EC2NodeClass ``default``: AL2023, the sandbox's node role, its discovery-tagged subnets and SGs."""
    selector = [{"tags": {"karpenter.sh/discovery": sb.cluster_name}}]
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "role": sb.seeded.node_role_name,
            "subnetSelectorTerms": selector,
            "securityGroupSelectorTerms": selector,
        },
    }


def nodepool(name: str, requirements: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A v1 NodePool on ``nodeclass``; ``spec`` adds top-level fields (limits, weight, disruption)."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"nodeClassRef": dict(NODECLASS_REF), "requirements": requirements}},
            **spec,
        },
    }


def inflate(replicas: int, cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    """The seeds' ``inflate`` deployment (events/manifests/deployment-inflate.yaml) at ``replicas``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "inflate", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "inflate"}},
            "template": {
                "metadata": {"labels": {"app": "inflate"}},
                "spec": {
                    "containers": [
                        {
                            "name": "inflate",
                            "image": "public.ecr.aws/amazonlinux/amazonlinux:latest",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ]
                },
            },
        },
    }


def deployment(name: str, replicas: int, pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A Deployment ``name`` in ``default`` whose pods are labelled ``app: name`` and run ``pod_spec``."""
    match = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": match},
            "template": {"metadata": {"labels": match}, "spec": pod_spec},
        },
    }


def local_volume(claim: str, node: str, volume: str | None = None) -> list[dict[str, Any]]:
    """A local PersistentVolume on ``node`` (its node affinity pins its pods there) bound to the
    claim ``default/claim``, with the ``local`` StorageClass: StorageClass, PersistentVolume and
    PersistentVolumeClaim, each with the status a bound pair has (a manifest bundle carries it; on
    an API server the status is written through the status subresource)."""
    volume = volume or f"{claim}-volume"
    on_node = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "local": {"path": "/mnt/disks/one"},
                "claimRef": {"namespace": "default", "name": claim},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [on_node]}]}},
            },
            "status": {"phase": "Bound"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "volumeName": volume,
                "resources": {"requests": {"storage": "10Gi"}},
            },
            "status": {"phase": "Bound"},
        },
    ]
