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
from datetime import datetime
from typing import Any

from nodewright.state.pods import is_drainable

Obj = Mapping[str, Any]


def blocking_attachments(
    node_name: str,
    attachments: Iterable[Obj],
    pods: Iterable[Obj],
    claims: Iterable[Obj],
    now: datetime,
) -> list[Obj]:
    """The VolumeAttachments bound to ``node_name`` that the instance must wait for (see the module);
    ``pods``: the pods bound to the node; ``claims``: the PersistentVolumeClaims they may use."""
    on_node = [va for va in attachments if (va.get("spec") or {}).get("nodeName") == node_name]
    if not on_node:
        return []
    claims_by_key = {
        ((c.get("metadata") or {}).get("namespace") or "default", (c.get("metadata") or {}).get("name")): c
        for c in claims
    }
    staying = set()
    for pod in pods:
        if is_drainable(pod, now):
            continue
        for claim_key in _claim_keys(pod):
            volume = ((claims_by_key.get(claim_key) or {}).get("spec") or {}).get("volumeName")
            if volume:
                staying.add(volume)
    return [
        va
        for va in on_node
        if (pv := ((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName"))
        and pv not in staying
    ]


def _claim_keys(pod: Obj) -> list[tuple[str, str]]:
    """(namespace, claim name) of each PersistentVolumeClaim the pod mounts."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    keys = []
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        if (claim := volume.get("persistentVolumeClaim")) and claim.get("claimName"):
            keys.append((namespace, str(claim["claimName"])))
        elif volume.get("ephemeral") is not None:
            keys.append((namespace, f"{meta.get('name')}-{volume.get('name')}"))
    return keys
