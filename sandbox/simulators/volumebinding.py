"""kube-scheduler's VolumeBinding plugin, for the simulated scheduler: where a pod's claims let it go.

A pod's claims are its ``persistentVolumeClaim`` volumes' and its generic ephemeral volumes', which
the ephemeral-volume controller names ``<pod>-<volume>`` (``ephemeral.VolumeClaimName``). As
kube-scheduler (``pkg/scheduler/framework/plugins/volumebinding``, v1.30-v1.36):

* PreFilter, for the whole pod (UnschedulableAndUnresolvable): a missing claim (for an ephemeral
  volume: ``waiting for ephemeral volume controller to create the persistentvolumeclaim``), a claim
  being deleted, an ephemeral volume's claim the pod does not control (``ephemeral.VolumeIsForPod``:
  ``PVC ns/name was not created for pod ns/pod (pod is not owner)``), and an unbound claim whose
  class binds at once (``pod has unbound immediate PersistentVolumeClaims``).
* Filter, per node: a bound claim's PersistentVolume must select the node (``node(s) had volume node
  affinity conflict``); an unbound claim of a WaitForFirstConsumer class is provisioned on the node
  only where the class's ``allowedTopologies`` match its labels (``node(s) didn't find available
  persistent volumes to bind``); a class without a provisioner (``kubernetes.io/no-provisioner``)
  needs a matching PersistentVolume, which this simulator never finds: stricter than kube-scheduler,
  never kinder.
* PreBind: the unbound WaitForFirstConsumer claims get ``volume.kubernetes.io/selected-node``, and
  the pod is bound only once they are (``Scheduler`` leaves it for a later pass, where the bound
  volume's node affinity pins it, where kube-scheduler waits in its binding goroutine).

A claim counts as bound when its ``volumeName`` names an existing PersistentVolume (the PV
controller's ``pv.kubernetes.io/bind-completed`` follows within moments in a real cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sandbox.simulators.scheduler import match_expression, match_node_selector_term

Obj = dict[str, Any]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


def claim_names(pod: Obj) -> Iterator[tuple[str, bool]]:
    """(claim name, whether it is a generic ephemeral volume's) for each claim the pod mounts."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if claim := (volume.get("persistentVolumeClaim") or {}).get("claimName"):
            yield claim, False
        elif volume.get("ephemeral") is not None:
            yield ephemeral_claim_name(pod, volume), True


def ephemeral_claim_name(pod: Obj, volume: Obj) -> str:
    """``ephemeral.VolumeClaimName``: ``<pod name>-<volume name>``."""
    return f"{pod['metadata']['name']}-{volume.get('name')}"


def controlled_by(obj: Obj, owner: Obj) -> bool:
    """``metav1.IsControlledBy``: its controller ownerReference is ``owner``'s uid."""
    uid = owner["metadata"].get("uid")
    return any(
        r.get("controller") and r.get("uid") == uid for r in obj["metadata"].get("ownerReferences") or []
    )


def allowed_topology(labels: dict[str, str], terms: list[Obj]) -> bool:
    """``MatchTopologySelectorTerms``: a class's allowedTopologies (ORed terms of ANDed ``key In
    values`` expressions) against node labels; none at all allows every node."""
    return not terms or any(
        all(
            match_expression(labels, {"operator": "In", **e}) for e in term.get("matchLabelExpressions") or []
        )
        for term in terms
    )


@dataclass
class Volumes:
    """The claims, PersistentVolumes and StorageClasses one scheduling pass sees."""

    claims: dict[tuple[str, str], Obj] = field(default_factory=dict)
    volumes: dict[str, Obj] = field(default_factory=dict)
    classes: dict[str, Obj] = field(default_factory=dict)

    @classmethod
    def build(cls, claims: Iterable[Obj], volumes: Iterable[Obj], classes: Iterable[Obj]) -> Volumes:
        return cls(
            {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims},
            {v["metadata"]["name"]: v for v in volumes},
            {s["metadata"]["name"]: s for s in classes},
        )

    def _class_of(self, claim: Obj) -> Obj | None:
        return self.classes.get((claim.get("spec") or {}).get("storageClassName") or "")

    def bound_volume(self, claim: Obj) -> Obj | None:
        return self.volumes.get((claim.get("spec") or {}).get("volumeName") or "")

    def _delayed(self, claim: Obj) -> bool:
        return ((self._class_of(claim) or {}).get("volumeBindingMode")) == "WaitForFirstConsumer"

    def prefilter(self, pod: Obj) -> str | None:
        """Why no node can take the pod now, whatever the node (None when its claims allow some)."""
        namespace = pod["metadata"].get("namespace", "default")
        immediate = False
        for name, ephemeral in claim_names(pod):
            claim = self.claims.get((namespace, name))
            if claim is None:
                if ephemeral:  # the usual state just after the pod is created
                    return f"waiting for ephemeral volume controller to create the {_claim(name)}"
                return f"{_claim(name)} not found"
            if claim["metadata"].get("deletionTimestamp"):
                return f"{_claim(name)} is being deleted"
            if ephemeral and not controlled_by(claim, pod):
                return (
                    f"PVC {namespace}/{name} was not created for pod "
                    f"{namespace}/{pod['metadata']['name']} (pod is not owner)"
                )
            if self.bound_volume(claim) is None and not self._delayed(claim):
                immediate = True
        return "pod has unbound immediate PersistentVolumeClaims" if immediate else None

    def unbound_delayed(self, pod: Obj) -> list[Obj]:
        """The pod's unbound WaitForFirstConsumer claims (PreBind gives them the selected node)."""
        namespace = pod["metadata"].get("namespace", "default")
        found = []
        for name, _ in claim_names(pod):
            claim = self.claims.get((namespace, name))
            if claim is not None and self.bound_volume(claim) is None and self._delayed(claim):
                found.append(claim)
        return found

    def node_reasons(self, pod: Obj, node: Obj) -> list[str]:
        """Why the pod's claims keep it off ``node`` (after ``prefilter`` let it through)."""
        labels = node.get("metadata", {}).get("labels") or {}
        namespace = pod["metadata"].get("namespace", "default")
        reasons: list[str] = []
        for name, _ in claim_names(pod):
            claim = self.claims.get((namespace, name))
            if claim is None:
                continue
            volume = self.bound_volume(claim)
            if volume is not None:
                affinity = ((volume.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
                terms = affinity.get("nodeSelectorTerms") if affinity else None
                if terms is not None and not any(match_node_selector_term(node, t) for t in terms):
                    reasons.append(NODE_CONFLICT)
                continue
            storage_class = self._class_of(claim) or {}
            if storage_class.get("provisioner") in (None, "", NO_PROVISIONER) or not allowed_topology(
                labels, storage_class.get("allowedTopologies") or []
            ):
                reasons.append(BIND_CONFLICT)
        return sorted(set(reasons))


def _claim(name: str) -> str:
    return f'persistentvolumeclaim "{name}"'
