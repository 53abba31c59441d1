"""NodeClaim objects as the provisioner writes and reads them (plain karpenter.sh/v1 dicts).

The provisioner creates a NodeClaim *before* it launches anything, so the object is the
durable record of intent: a crash after the create is finished by the next pass (the
claim is launched, or its instance adopted by tag), never launched twice.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nodewright.api import labels
from nodewright.api.conversion_review import KUBELET_ANNOTATION
from nodewright.api.hashing import nodeclaim_annotations
from nodewright.api.models import INITIALIZED, LAUNCHED, REGISTERED, NodePool
from nodewright.api.overlays import PRICE_OVERLAY_APPLIED
from nodewright.cluster.objects import condition, format_time, is_deleting, name_of, set_condition
from nodewright.cluster.objects import nodeclaim_instance_id as instance_id
from nodewright.cluster.objects import parse_time as timestamp
from nodewright.scheduling.requirements import Requirements

# The reading helpers are shared with the other flows (``nodewright.cluster.objects``) and
# re-exported here under the names this package reads best with, as are the lifecycle's condition
# names (defined once, in ``api.models``).
__all__ = [
    "INITIALIZED",
    "LAUNCHED",
    "REGISTERED",
    "build",
    "condition",
    "created_at",
    "format_time",
    "instance_id",
    "is_deleting",
    "is_true",
    "make_provider_id",
    "name_of",
    "new_name",
    "set_condition",
    "timestamp",
]

API_VERSION = "karpenter.sh/v1"
KIND = "NodeClaim"
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


def new_name(nodepool: str) -> str:
    """``<nodepool>-<5 random chars>``, as Karpenter's generateName produces."""
    return f"{nodepool}-{''.join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))}"


def build(
    *,
    name: str,
    nodepool: NodePool,
    requirements: list[dict[str, Any]],
    requests: Mapping[str, str],
    nodeclass: Mapping[str, Any] | None = None,
    min_values_relaxed: bool = False,
    price_overlay: bool = False,
) -> dict[str, Any]:
    """A NodeClaim for ``nodepool`` (the typed NodePool, ``World.nodepool_model``) with the plan's
    requirements and resource requests.

    Annotated with the static-drift hashes of the NodePool and its EC2NodeClass (``api.hashing``),
    and, as Karpenter annotates every NodeClaim it creates, ``karpenter.sh/nodeclaim-min-values-relaxed``:
    ``"true"`` when the BestEffort minValues policy lowered a requirement's minValues, else ``"false"``;
    and ``karpenter.sh/price-overlay-applied: "true"`` when a NodeOverlay priced one of its candidates.

    Labels: the template's labels plus ``karpenter.sh/nodepool``, ``karpenter.k8s.aws/ec2nodeclass`` and
    ``karpenter.k8s.aws/instance-tenancy`` (the tenancy it launches with), and what the requirements give
    (``Requirements.node_labels``, Karpenter's ``Requirements.Labels()``: a value pinned by a
    single-valued ``In``, and one allowed value of every custom key), so the node the kubelet
    registers carries them from the start and satisfies its NodePool (requirement drift).

    The spec is the template's as the model reads it, Karpenter v1's defaults applied (as the API
    server applies the CRD's to the stored NodePool and to the NodeClaim written).
    """

    template = nodepool.spec.template
    claim_requirements = Requirements.from_k8s(requirements)
    claim_labels: dict[str, str] = {**template.metadata.labels, **claim_requirements.node_labels()}
    claim_labels[labels.NODEPOOL] = nodepool.name
    node_class = template.spec.node_class_ref.name
    if node_class:
        claim_labels[labels.EC2NODECLASS] = node_class  # as Karpenter labels every NodeClaim and Node
    claim_labels[labels.INSTANCE_TENANCY] = _tenancy(claim_requirements)
    spec: dict[str, Any] = {
        **template.spec.to_dict(),
        "requirements": requirements,
        "resources": {"requests": dict(requests)},
    }
    annotations = {
        **template.metadata.annotations,
        **nodeclaim_annotations(nodepool, nodeclass),
        labels.NODECLAIM_MIN_VALUES_RELAXED: "true" if min_values_relaxed else "false",
    }
    if price_overlay:  # a NodeOverlay priced a candidate: the launch ranks by those prices
        annotations[PRICE_OVERLAY_APPLIED] = "true"
    kubelet = nodepool.metadata.annotations.get(KUBELET_ANNOTATION)
    if kubelet:
        annotations[KUBELET_ANNOTATION] = kubelet  # a v1beta1 NodePool's kubelet, applied at launch
    metadata: dict[str, Any] = {
        "name": name,
        "labels": claim_labels,
        "annotations": annotations,
        "finalizers": [labels.TERMINATION_FINALIZER],
    }
    if nodepool.metadata.uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": API_VERSION,
                "kind": "NodePool",
                "name": nodepool.name,
                "uid": nodepool.metadata.uid,
                "blockOwnerDeletion": True,
            }
        ]
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _tenancy(requirements: Requirements) -> str:
    """``dedicated`` when the requirements allow only Dedicated Instances, else ``default`` (Karpenter:
    a NodeClaim that does not name the tenancy, or allows both, launches with default tenancy)."""
    allowed = requirements.get(labels.INSTANCE_TENANCY)
    if (
        allowed is not None
        and not allowed.has(labels.TENANCY_DEFAULT)
        and allowed.has(labels.TENANCY_DEDICATED)
    ):
        return labels.TENANCY_DEDICATED
    return labels.TENANCY_DEFAULT


# --- reading -------------------------------------------------------------------------------------


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    cond = condition(obj, kind)
    return bool(cond and cond.get("status") == "True")


def make_provider_id(zone: str, instance_id: str) -> str:
    return f"aws:///{zone}/{instance_id}"


def created_at(obj: Mapping[str, Any]) -> datetime | None:
    return timestamp((obj.get("metadata") or {}).get("creationTimestamp"))
