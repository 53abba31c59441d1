"""Pending pods grouped into equivalence classes: same scheduling spec, same volume topology.

Every later step decides per class, not per pod, which keeps a 50,000-pod plan proportional to
the number of distinct pod shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nodewright.api import labels as wk
from nodewright.scheduling.model import (
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodSpec,
    Snapshot,
    StorageClass,
)
from nodewright.scheduling.requirements import Requirements
from nodewright.scheduling.resources import CPU, MEMORY, Resources


@dataclass(slots=True)
class PodClass:
    """Identical pending pods; ``take`` hands them out in key order as they are placed."""

    index: int
    spec: PodSpec
    pods: list[Pod]
    requests: Resources
    labels: dict[str, str]
    volume: Requirements  # node requirements the pods' volumes impose (zone of a bound PV, ...)
    reason: str | None = None
    next_pod: int = 0

    def take(self, count: int) -> list[Pod]:
        taken = self.pods[self.next_pod : self.next_pod + count]
        self.next_pod += len(taken)
        return taken

    @property
    def left(self) -> list[Pod]:
        """Pods neither placed nor planned yet."""
        return self.pods[self.next_pod :]

    def leans_on_others(self) -> bool:
        """Required or preferred pod affinity to pods other than its own kind (placed after them)."""
        return any(
            not t.anti and not t.selects(self.spec.namespace, self.spec.namespace, self.labels)
            for t in self.spec.affinity
        )

    def wants_colocation(self) -> bool:
        """Some pod affinity on the hostname: its pods want to share a node."""
        return any(not t.anti and t.topology_key == wk.HOSTNAME for t in self.spec.affinity)


class _Volumes:
    """The snapshot's claims, volumes and storage classes by name, looked up once per pod."""

    def __init__(
        self,
        claims: Sequence[PersistentVolumeClaim],
        volumes: Sequence[PersistentVolume],
        storage_classes: Sequence[StorageClass],
    ) -> None:
        self.claims: Mapping[tuple[str, str], PersistentVolumeClaim] = {
            (c.namespace, c.name): c for c in claims
        }
        self.volumes: Mapping[str, PersistentVolume] = {v.name: v for v in volumes}
        self.storage_classes: Mapping[str, StorageClass] = {s.name: s for s in storage_classes}

    def requirements(self, pod: Pod) -> Requirements | str:
        """A pod's node requirements from its volumes, or the reason it cannot be scheduled.

        A claim bound to a PV contributes the PV's node affinity; an unbound claim of a
        WaitForFirstConsumer class contributes the class's allowed topologies. A generic ephemeral
        volume's claim (``<pod>-<volume>``) counts as such a claim once made; before it is made, and
        for a displaced pod (its replacement gets a new one), the claim to come is the template's:
        its class's (or the default class's) allowed topologies. A same-named claim the pod does
        not control is one kube-scheduler refuses the pod for until it is gone.
        """
        result = Requirements()
        for name in pod.spec.claims:
            claim = self.claims.get((pod.namespace, name))
            if claim is None:
                return f"PersistentVolumeClaim {pod.namespace}/{name} not found"
            result = result.intersect(self._claim_requirements(claim))
        for volume in pod.spec.ephemeral:
            name = wk.ephemeral_claim_name(pod.name, volume.name)
            claim = None if pod.displaced else self.claims.get((pod.namespace, name))
            if claim is None:
                class_name = self._default_class if volume.storage_class is None else volume.storage_class
                result = result.intersect(self._class_requirements(class_name))
                continue
            if pod.uid is not None and claim.controller_uid != pod.uid:
                return (
                    f"PVC {pod.namespace}/{name} was not created for pod {pod.namespace}/{pod.name} "
                    "(pod is not owner)"
                )
            result = result.intersect(self._claim_requirements(claim))
        return result

    def _claim_requirements(self, claim: PersistentVolumeClaim) -> Requirements:
        if claim.volume_name:
            volume = self.volumes.get(claim.volume_name)
            return volume.node_affinity[0] if volume and volume.node_affinity else Requirements()
        return self._class_requirements(claim.storage_class)

    def _class_requirements(self, name: str | None) -> Requirements:
        """Where a claim of class ``name`` may be provisioned (Karpenter: the first allowed term)."""
        storage_class = self.storage_classes.get(name) if name else None
        if storage_class and storage_class.wait_for_first_consumer and storage_class.allowed_topologies:
            return storage_class.allowed_topologies[0]
        return Requirements()

    @property
    def _default_class(self) -> str | None:
        """The class the DefaultStorageClass admission plugin gives a claim naming none: the newest
        of the classes marked default."""
        defaults = [s for s in self.storage_classes.values() if s.default]
        return max(defaults, key=lambda s: (s.created, s.name)).name if defaults else None


def pod_classes(snapshot: Snapshot, unschedulable: dict[str, str]) -> list[PodClass]:
    """The snapshot's pending pods as classes, in placement order; unreadable pods go to ``unschedulable``.

    Order: classes whose pod affinity leans on other pods come last (their targets are placed
    first), then the biggest by cpu and memory, then by first pod key (a total order).
    """
    volumes = _Volumes(snapshot.claims, snapshot.volumes, snapshot.storage_classes)
    by_key: dict[tuple[PodSpec, Requirements], list[Pod]] = {}
    for pod in snapshot.pods:
        if pod.spec.is_daemonset or pod.node_name:
            continue
        volume = volumes.requirements(pod) if pod.spec.claims or pod.spec.ephemeral else Requirements()
        if isinstance(volume, str):
            unschedulable[pod.key] = volume
            continue
        by_key.setdefault((pod.spec, volume), []).append(pod)
    classes = []
    for (spec, volume), pods in by_key.items():
        pods.sort(key=lambda p: p.key)
        classes.append(PodClass(0, spec, pods, spec.request_map, spec.label_map, volume))
    classes.sort(
        key=lambda c: (
            c.leans_on_others(),
            -c.requests.get(CPU, 0),
            -c.requests.get(MEMORY, 0),
            c.pods[0].key,
        )
    )
    for index, cls in enumerate(classes):
        cls.index = index
    return classes
