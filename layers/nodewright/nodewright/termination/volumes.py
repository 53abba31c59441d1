"""Which VolumeAttachments of a drained node still hold its instance (Karpenter's termination rule).

An EBS volume detached cleanly can be attached where its pod goes next; terminating the instance
under it leaves the new node waiting for EC2's forced detach (minutes of a StatefulSet pod in
ContainerCreating). So, as Karpenter's termination controller does, the instance is terminated only
once the node's VolumeAttachments are gone — except those a drain never frees:

* an attachment with no ``spec.source.persistentVolumeName`` (an inline volume: nothing reschedules
  against it);
* an attachment of a PersistentVolume that a pod the drain does not wait for
  (``state.pods.is_drainable`` false: it tolerates the disrupted taint, is stuck terminating, or is
  a mirror pod) uses through a PersistentVolumeClaim (generic ephemeral volumes included: their
  claim is ``<pod>-<volume>``); that pod stays to the end, and so does its volume.

The wait is bounded by the NodeClaim's ``terminationGracePeriod``, as the drain is
(``terminate.step``: condition ``VolumesDetached``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nodewright.scheduling.model import pvc_from_k8s
from nodewright.state.pods import claim_names, is_drainable, namespace_of

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A VolumeAttachment as the termination reads it."""

    raw: Obj
    node_name: str | None  # spec.nodeName
    persistent_volume: str | None  # spec.source.persistentVolumeName (None: an inline volume)

    @classmethod
    def of(cls, attachment: Obj) -> Attachment:
        spec = attachment.get("spec") or {}
        return cls(
            raw=attachment,
            node_name=spec.get("nodeName"),
            persistent_volume=(spec.get("source") or {}).get("persistentVolumeName") or None,
        )


def attached_to(node_name: str, attachments: Iterable[Obj]) -> list[Attachment]:
    """The VolumeAttachments bound to the node ``node_name``."""
    return [a for a in map(Attachment.of, attachments) if a.node_name == node_name]


def blocking_attachments(
    node_name: str,
    attachments: Iterable[Obj],
    pods: Iterable[Obj],
    claims: Iterable[Obj],
    now: datetime,
) -> list[Obj]:
    """The VolumeAttachments bound to ``node_name`` that the instance must wait for (see the module);
    ``pods``: the pods bound to the node; ``claims``: the PersistentVolumeClaims they may use."""
    on_node = attached_to(node_name, attachments)
    if not on_node:
        return []
    volumes = {(c.namespace, c.name): c.volume_name for c in map(pvc_from_k8s, claims)}
    staying = set()
    for pod in pods:
        if is_drainable(pod, now):
            continue
        namespace = namespace_of(pod)
        for claim in claim_names(pod):
            if volume := volumes.get((namespace, claim)):
                staying.add(volume)
    return [a.raw for a in on_node if a.persistent_volume and a.persistent_volume not in staying]
