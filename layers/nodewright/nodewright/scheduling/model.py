"""The scheduling snapshot: plain, hashable dataclasses, and parsers from Kubernetes JSON.

Parsers take the camelCase dicts the API server returns (``pod_from_k8s(d)``...). Everything a
scheduling decision depends on lives in ``PodSpec`` (hashable), so identical pods share one
equivalence class.

The parsers are structural: which pods to plan for (provisionable, reschedulable, not a DaemonSet's)
is the caller's rule (``nodewright.state.pods``); the core places whatever pods it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels as wk
from nodewright.api.tolerations import Toleration
from nodewright.scheduling.instancetypes import InstanceType
from nodewright.scheduling.requirements import IN, Requirement, Requirements
from nodewright.scheduling.resources import PODS, Resources, add, parse_resources, pod_requests

if TYPE_CHECKING:
    from nodewright.api import models as api

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


def untolerated(
    taints: Iterable[Taint], tolerations: Iterable[Toleration], prefer: bool = False
) -> Taint | None:
    """The first taint that blocks (NoSchedule/NoExecute; PreferNoSchedule too when ``prefer``)."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE and not prefer:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector; ``None`` selectors are represented by ``matches_nothing``."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    matches_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, operator, values in self.match_expressions:
            present = key in labels
            if operator == "In" and (not present or labels[key] not in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(frozen=True, slots=True)
class TopologySpread:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: LabelSelector
    min_domains: int | None = None


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A (anti-)affinity term; ``weight`` 0 means required, else preferred with that weight."""

    selector: LabelSelector
    topology_key: str
    namespaces: tuple[str, ...] = ()
    anti: bool = False
    weight: int = 0

    def selects(self, own_namespace: str, namespace: str, labels: Mapping[str, str]) -> bool:
        namespaces = self.namespaces or (own_namespace,)
        return namespace in namespaces and self.selector.matches(labels)


def required_anti_terms(terms: Iterable[PodAffinityTerm], topology_key: str) -> list[PodAffinityTerm]:
    """The required anti-affinity terms over one topology key (hostname: keep off the node; zone:
    keep out of its zone)."""
    return [t for t in terms if t.anti and not t.weight and t.topology_key == topology_key]


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        return "0.0.0.0" in (self.host_ip, other.host_ip) or self.host_ip == other.host_ip


@dataclass(frozen=True, slots=True)
class EphemeralVolume:
    """A generic ephemeral volume: the ephemeral-volume controller makes its claim, named
    ``<pod>-<name>`` (``wk.ephemeral_claim_name``), from a template of ``storage_class`` (None: the
    template names none, and the claim gets the default class; "": no class)."""

    name: str
    storage_class: str | None = None


@dataclass(frozen=True, slots=True)
class PodSpec:
    """Everything that decides where a pod may go; equal specs form one equivalence class."""

    namespace: str
    requests: tuple[tuple[str, int], ...]
    labels: tuple[tuple[str, str], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    required_terms: tuple[Requirements, ...] = ()  # node affinity, ORed
    preferred_terms: tuple[tuple[int, Requirements], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    spreads: tuple[TopologySpread, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    claims: tuple[str, ...] = ()  # PVC names, for volume topology
    ephemeral: tuple[EphemeralVolume, ...] = ()  # generic ephemeral volumes (their claims are per pod)
    is_daemonset: bool = False

    @property
    def request_map(self) -> Resources:
        return dict(self.requests)

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    spec: PodSpec
    node_name: str | None = None
    uid: str | None = None  # what its ephemeral volumes' claims are controlled by
    # Planned for a pod about to be evicted (``wk.DISPLACED_FROM``): what is placed is its
    # replacement, whose ephemeral volumes get new claims.
    displaced: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class BoundPods:
    """What the pods bound to a node hold there, summed once per ``Node``: their requests, what
    they leave free of its allocatable (``free``: read-only, a plan copies it before placing), host
    ports, and the required anti-affinity terms (with their pods' namespaces) that keep pods off the
    node (hostname) or out of its zone."""

    requests: tuple[tuple[str, int], ...] = ()
    free: Mapping[str, int] = field(default_factory=dict)
    host_ports: tuple[HostPort, ...] = ()
    hostname_anti: tuple[tuple[str, PodAffinityTerm], ...] = ()
    zone_anti: tuple[tuple[str, PodAffinityTerm], ...] = ()


@dataclass(slots=True)
class Node:
    """A registered node, or an in-flight NodeClaim (``in_flight``) that counts as capacity.

    ``pods`` is not changed once the Node is made: every plan copies what its placements change
    (``scheduling.existing``), so one Node serves the many plans of a disruption pass, and what its
    pods hold is summed once (``bound``)."""

    name: str
    labels: dict[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...] = ()
    pods: list[Pod] = field(default_factory=list)
    in_flight: bool = False
    unschedulable: bool = False  # cordoned or being deleted
    _bound: BoundPods | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def nodepool(self) -> str | None:
        return self.labels.get(wk.NODEPOOL)

    @property
    def bound(self) -> BoundPods:
        """What its pods hold (``BoundPods``), summed on first use."""
        if self._bound is None:
            self._bound = _bound_pods(self.pods, self.allocatable)
        return self._bound


def _bound_pods(pods: Iterable[Pod], allocatable: Mapping[str, int]) -> BoundPods:
    requests: Resources = {}
    ports: list[HostPort] = []
    hostname_anti: list[tuple[str, PodAffinityTerm]] = []
    zone_anti: list[tuple[str, PodAffinityTerm]] = []
    for pod in pods:
        spec = pod.spec
        for name, value in spec.requests:
            requests[name] = requests.get(name, 0) + value
        ports.extend(spec.host_ports)
        hostname_anti.extend((spec.namespace, t) for t in required_anti_terms(spec.affinity, wk.HOSTNAME))
        zone_anti.extend((spec.namespace, t) for t in required_anti_terms(spec.affinity, wk.ZONE))
    free = {PODS: 110, **allocatable}  # the kubelet's default when allocatable omits pods
    for name, value in requests.items():
        free[name] = free.get(name, 0) - value
    return BoundPods(tuple(requests.items()), free, tuple(ports), tuple(hostname_anti), tuple(zone_anti))


@dataclass(slots=True)
class NodePoolInput:
    """A NodePool as the scheduler sees it (the provisioning flow adapts the API object)."""

    name: str
    requirements: Requirements = field(default_factory=Requirements)
    instance_types: list[InstanceType] = field(default_factory=list)
    weight: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    limits: Resources = field(default_factory=dict)
    in_use: Resources = field(default_factory=dict)  # registered + in-flight capacity already charged
    node_price: float = 0.0  # $/h every node costs beyond its instance (its EBS volumes)


@dataclass(frozen=True, slots=True)
class DaemonSetInput:
    name: str
    spec: PodSpec


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str | None = None
    storage_class: str | None = None
    controller_uid: str | None = None  # its controller ownerReference's (an ephemeral volume's pod)


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_affinity: tuple[Requirements, ...] = ()  # ORed terms
    storage_class: str | None = None


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    wait_for_first_consumer: bool = False
    allowed_topologies: tuple[Requirements, ...] = ()
    # ``storageclass.kubernetes.io/is-default-class``, and when it was made: the newest default is
    # the one the DefaultStorageClass admission plugin gives a claim that names no class.
    default: bool = False
    created: str = ""


@dataclass(slots=True)
class Snapshot:
    pods: Sequence[Pod]
    nodepools: Sequence[NodePoolInput]
    nodes: Sequence[Node] = ()
    daemonsets: Sequence[DaemonSetInput] = ()
    claims: Sequence[PersistentVolumeClaim] = ()
    volumes: Sequence[PersistentVolume] = ()
    storage_classes: Sequence[StorageClass] = ()
    # Karpenter's relaxMinValues (its --min-values-policy BestEffort): a NodeClaim whose candidate
    # types cannot meet a requirement's minValues is planned with what they offer, that requirement's
    # minValues lowered to it (NewClaim.min_values_relaxed), instead of refused (Strict).
    relax_min_values: bool = False


# --- parsers from Kubernetes JSON -------------------------------------------------------------


def _selector(d: Mapping[str, Any] | None) -> LabelSelector:
    if d is None:
        return LabelSelector(matches_nothing=True)
    return LabelSelector(
        tuple(sorted((d.get("matchLabels") or {}).items())),
        tuple(
            (e["key"], e["operator"], tuple(sorted(e.get("values") or ())))
            for e in d.get("matchExpressions") or ()
        ),
    )


def label_selector_from_k8s(d: Mapping[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (a PodDisruptionBudget's, say); None selects nothing."""
    return _selector(d)


def _node_selector_terms(terms: Iterable[Mapping[str, Any]] | None) -> tuple[Requirements, ...]:
    return tuple(Requirements.from_k8s(t.get("matchExpressions")) for t in terms or ())


def requirements_from_model(terms: Iterable[api.Requirement]) -> Requirements:
    """The ``Requirements`` of typed node selector requirements (a NodePool's template, a
    NodeClaim's: ``api.models.Requirement``), read as ``Requirements.from_k8s`` reads their JSON."""
    return Requirements(Requirement.create(t.key, t.operator, t.values, t.min_values) for t in terms)


def taint_from_k8s(d: Mapping[str, Any]) -> Taint:
    return Taint(d["key"], d.get("value") or "", d.get("effect") or NO_SCHEDULE)


def taint_from_model(t: api.Taint) -> Taint:
    """A typed taint (a NodePool's template: ``api.models.Taint``), read as ``taint_from_k8s`` reads
    its JSON."""
    return Taint(t.key, t.value or "", t.effect or NO_SCHEDULE)


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    # As the API server defaults them: limits stand in for missing requests.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return parse_resources(merged)


def _pod_affinity_terms(affinity: Mapping[str, Any], anti: bool) -> list[PodAffinityTerm]:
    section = affinity.get("podAntiAffinity" if anti else "podAffinity") or {}
    terms = [
        PodAffinityTerm(
            _selector(t.get("labelSelector")), t["topologyKey"], tuple(t.get("namespaces") or ()), anti
        )
        for t in section.get("requiredDuringSchedulingIgnoredDuringExecution") or ()
    ]
    for weighted in section.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        t = weighted["podAffinityTerm"]
        terms.append(
            PodAffinityTerm(
                _selector(t.get("labelSelector")),
                t["topologyKey"],
                tuple(t.get("namespaces") or ()),
                anti,
                int(weighted.get("weight", 1)),
            )
        )
    return terms


def pod_spec_from_k8s(
    metadata: Mapping[str, Any], spec: Mapping[str, Any], is_daemonset: bool = False
) -> PodSpec:
    """The scheduling-relevant part of a pod (or a DaemonSet's pod template)."""
    containers = spec.get("containers") or []
    init = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") != "Always"]
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    requests = pod_requests(
        [_container_requests(c) for c in containers],
        [_container_requests(c) for c in init],
        parse_resources(spec.get("overhead")),
        [_container_requests(c) for c in sidecars],
    )
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    preferred = tuple(
        (int(p.get("weight", 1)), Requirements.from_k8s((p.get("preference") or {}).get("matchExpressions")))
        for p in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
    )
    spreads = tuple(
        TopologySpread(
            int(c.get("maxSkew", 1)),
            c["topologyKey"],
            c.get("whenUnsatisfiable", DO_NOT_SCHEDULE),
            _selector(c.get("labelSelector")),
            c.get("minDomains"),
        )
        for c in spec.get("topologySpreadConstraints") or ()
    )
    ports = tuple(
        HostPort(int(p["hostPort"]), p.get("protocol", "TCP"), p.get("hostIP") or "0.0.0.0")
        for c in containers
        for p in c.get("ports") or ()
        if p.get("hostPort")
    )
    claims = tuple(
        v["persistentVolumeClaim"]["claimName"]
        for v in spec.get("volumes") or ()
        if v.get("persistentVolumeClaim")
    )
    ephemeral = tuple(
        EphemeralVolume(
            v["name"],
            (((v["ephemeral"].get("volumeClaimTemplate") or {}).get("spec")) or {}).get("storageClassName"),
        )
        for v in spec.get("volumes") or ()
        if v.get("ephemeral") is not None
    )
    return PodSpec(
        namespace=metadata.get("namespace") or "default",
        requests=tuple(sorted(requests.items())),
        labels=tuple(sorted((metadata.get("labels") or {}).items())),
        node_selector=tuple(sorted((spec.get("nodeSelector") or {}).items())),
        required_terms=_node_selector_terms(required.get("nodeSelectorTerms")),
        preferred_terms=preferred,
        tolerations=tuple(Toleration.from_k8s(t) for t in spec.get("tolerations") or ()),
        spreads=spreads,
        affinity=(*_pod_affinity_terms(affinity, False), *_pod_affinity_terms(affinity, True)),
        host_ports=ports,
        claims=claims,
        ephemeral=ephemeral,
        is_daemonset=is_daemonset,
    )


# A pod version (uid, resourceVersion) → its PodSpec: see ``pod_from_k8s``.
SpecsByVersion = dict[tuple[str, str], PodSpec]


def pod_version(metadata: Mapping[str, Any]) -> tuple[str, str] | None:
    """The API server's name for one version of an object: (uid, resourceVersion), which it
    changes on every write; None for an object it has not stored (a manifest, a test's dict)."""
    uid, version = metadata.get("uid"), metadata.get("resourceVersion")
    return (str(uid), str(version)) if uid and version else None


def pod_from_k8s(d: Mapping[str, Any], specs: SpecsByVersion | None = None) -> Pod:
    """A pod; with ``specs``, its PodSpec is read once per version and looked up after (a
    simulation plans the same pods, bound and then displaced, in every plan of a pass: the version
    is the same and so is everything a PodSpec holds; ``nodeName`` is the Pod's, read each time)."""
    metadata = d.get("metadata") or {}
    spec = d.get("spec") or {}
    version = pod_version(metadata) if specs is not None else None
    parsed = specs.get(version) if specs is not None and version is not None else None
    if parsed is None:
        parsed = pod_spec_from_k8s(metadata, spec)
        if specs is not None and version is not None:
            specs[version] = parsed
    return Pod(
        metadata.get("namespace") or "default",
        metadata["name"],
        parsed,
        spec.get("nodeName"),
        metadata.get("uid"),
        wk.DISPLACED_FROM in (metadata.get("annotations") or {}),
    )


def pods_from_k8s(
    items: Iterable[Mapping[str, Any]], specs: SpecsByVersion | None = None
) -> tuple[list[Pod], dict[str, str]]:
    """Parse many pods (``specs``: see ``pod_from_k8s``); a malformed one is reported
    (``namespace/name`` → error) and skipped."""
    parsed: list[Pod] = []
    errors: dict[str, str] = {}
    for item in items:
        metadata = item.get("metadata") or {}
        key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name', '?')}"
        try:
            parsed.append(pod_from_k8s(item, specs))
        except (KeyError, TypeError, ValueError) as err:
            errors[key] = f"cannot read pod spec: {err}; fix the manifest (the other pods are still planned)"
    return parsed, errors


def node_from_k8s(d: Mapping[str, Any], pods: Iterable[Pod] = ()) -> Node:
    """A registered node and the pods bound to it that still hold resources (not Succeeded/Failed)."""
    metadata = d.get("metadata") or {}
    spec = d.get("spec") or {}
    status = d.get("status") or {}
    return Node(
        metadata["name"],
        dict(metadata.get("labels") or {}),
        {PODS: 110, **parse_resources(status.get("allocatable"))},  # kubelet default when absent
        tuple(taint_from_k8s(t) for t in spec.get("taints") or ()),
        list(pods),
        unschedulable=bool(spec.get("unschedulable")) or bool(metadata.get("deletionTimestamp")),
    )


def daemonset_from_k8s(d: Mapping[str, Any]) -> DaemonSetInput:
    template = ((d.get("spec") or {}).get("template")) or {}
    metadata = {**(template.get("metadata") or {}), "namespace": (d.get("metadata") or {}).get("namespace")}
    return DaemonSetInput(
        d["metadata"]["name"], pod_spec_from_k8s(metadata, template.get("spec") or {}, True)
    )


def pvc_from_k8s(d: Mapping[str, Any]) -> PersistentVolumeClaim:
    spec = d.get("spec") or {}
    controller: Mapping[str, Any] = next(
        (r for r in d["metadata"].get("ownerReferences") or () if r.get("controller")), {}
    )
    return PersistentVolumeClaim(
        d["metadata"].get("namespace") or "default",
        d["metadata"]["name"],
        spec.get("volumeName"),
        spec.get("storageClassName"),
        controller.get("uid"),
    )


def pv_from_k8s(d: Mapping[str, Any]) -> PersistentVolume:
    spec = d.get("spec") or {}
    required = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    return PersistentVolume(
        d["metadata"]["name"], _node_selector_terms(required), spec.get("storageClassName")
    )


DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def storage_class_from_k8s(d: Mapping[str, Any]) -> StorageClass:
    topologies = tuple(
        Requirements(
            Requirement.create(e["key"], IN, e.get("values") or ())
            for e in t.get("matchLabelExpressions") or ()
        )
        for t in d.get("allowedTopologies") or ()
    )
    metadata = d["metadata"]
    return StorageClass(
        metadata["name"],
        d.get("volumeBindingMode") == "WaitForFirstConsumer",
        topologies,
        (metadata.get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true",
        str(metadata.get("creationTimestamp") or ""),
    )


def pod_usage(pods: Iterable[Pod]) -> Resources:
    total: Resources = {}
    for pod in pods:
        add(total, dict(pod.spec.requests))
    return total
