"""Pure scheduling simulation: requirements, instance types, pod → node placement and bin-packing.

No I/O, no boto3, no kubernetes client (only its quantity parser). Input a ``Snapshot``,
output a ``Plan``: ``plan(snapshot)``.
"""

from __future__ import annotations

from nodewright.api.tolerations import Toleration
from nodewright.scheduling.instancetypes import (
    InstanceType,
    KubeletSettings,
    NodeShape,
    Offering,
    instance_type_from_ec2,
)
from nodewright.scheduling.model import (
    DaemonSetInput,
    Node,
    NodePoolInput,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodSpec,
    Snapshot,
    StorageClass,
    Taint,
    daemonset_from_k8s,
    node_from_k8s,
    pod_from_k8s,
    pods_from_k8s,
    pv_from_k8s,
    pvc_from_k8s,
    storage_class_from_k8s,
)
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.results import MAX_CANDIDATE_TYPES, CandidateType, NewClaim, Plan
from nodewright.scheduling.scheduler import Scheduler, plan

__all__ = [
    "MAX_CANDIDATE_TYPES",
    "CandidateType",
    "DaemonSetInput",
    "InstanceType",
    "KubeletSettings",
    "NewClaim",
    "Node",
    "NodePoolInput",
    "NodeShape",
    "Offering",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Plan",
    "Pod",
    "PodSpec",
    "Requirement",
    "Requirements",
    "Scheduler",
    "Snapshot",
    "StorageClass",
    "Taint",
    "Toleration",
    "daemonset_from_k8s",
    "instance_type_from_ec2",
    "node_from_k8s",
    "plan",
    "pod_from_k8s",
    "pods_from_k8s",
    "pv_from_k8s",
    "pvc_from_k8s",
    "storage_class_from_k8s",
]
