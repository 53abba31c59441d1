"""Typed models of ``karpenter.sh/v1`` NodePool and NodeClaim and ``karpenter.k8s.aws/v1`` EC2NodeClass.

Every model is a dataclass with snake_case attributes:

- ``Model.from_dict(d)`` reads the object as stored in the cluster (camelCase) and applies Karpenter
  v1's defaults (expireAfter 720h, consolidationPolicy WhenEmptyOrUnderutilized, consolidateAfter 0s,
  budgets ``[{nodes: "10%"}]``, metadataOptions httpTokens required / hop limit 1, ...). Unknown
  fields are ignored: check a user's manifest with ``api.validation`` first.
- ``model.to_dict()`` writes it back in camelCase, omitting unset optional fields.

Typical use: ``NodePool.from_dict(obj).spec.template.spec.requirements`` is a list of
``Requirement(key, operator, values, min_values)``. Durations stay strings as in the API; use
``api.durations.parse_duration`` (or the ``*_seconds`` properties) for seconds, ``None`` meaning Never.
Quantities stay as written (``"1000"``, ``"1000Gi"``); parse them with
``kubernetes.utils.quantity.parse_quantity``. ``load_object(d)`` picks the model from apiVersion/kind.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Self, Union, cast

from nodewright.api import labels
from nodewright.api.durations import parse_duration
from nodewright.api.times import now_rfc3339

KARPENTER_V1 = "karpenter.sh/v1"
AWS_V1 = "karpenter.k8s.aws/v1"
# Karpenter v1's default lifetime of a node; the one place it is written (readers of raw NodeClaim
# dicts use this constant, the models their field default).
DEFAULT_EXPIRE_AFTER = "720h"


def _json(name: str, **kwargs: Any) -> Any:
    """A field whose JSON name is not the plain camelCase of its attribute (``providerID``)."""
    return field(metadata={"json": name}, **kwargs)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@cache
def _json_names(cls: type) -> tuple[tuple[str, str], ...]:
    """A model's (attribute, JSON name) pairs, worked out once per class: the drift hashes decode
    and encode every NodePool and EC2NodeClass for every NodeClaim, field by field."""
    return tuple((f.name, f.metadata.get("json", _camel(f.name))) for f in dataclasses.fields(cls))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(tp: Any, value: Any) -> Any:
    """Turn JSON ``value`` into type ``tp`` (nested models, lists of models, optionals)."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(args[0], value) if len(args) == 1 else value
    if origin is list:
        (item_type,) = typing.get_args(tp)
        return [_decode(item_type, v) for v in value]
    if origin is dict:
        return dict(value)
    if isinstance(tp, type) and issubclass(tp, Model):
        return tp.from_dict(value)
    return value


def _encode(value: Any) -> Any:
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


@dataclass
class Model:
    """Base of every model: generic camelCase (de)serialisation driven by the dataclass fields."""

    # Fields written even when empty (the API requires them, e.g. requirements: []).
    _always: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def json_names(cls) -> dict[str, str]:
        """attribute → JSON name (a new dict: a subclass may edit it)."""
        return dict(_json_names(cast(type, cls)))

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Self:
        data = data or {}
        hints = _hints(cast(type, cls))
        kwargs: dict[str, Any] = {}
        for attr, key in cls.json_names().items():
            if key in data and data[key] is not None:
                kwargs[attr] = _decode(hints[attr], data[key])
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr, key in self.json_names().items():
            value = getattr(self, attr)
            if value is None or (value in ([], {}) and attr not in self._always):
                continue
            encoded = _encode(value)
            if encoded == {} and isinstance(value, Model) and attr not in self._always:
                continue
            out[key] = encoded
        return out


# --- shared pieces ---------------------------------------------------------------------------


@dataclass
class ObjectMeta(Model):
    """The metadata fields the flows use; ``extra`` keeps the rest (managedFields, ...) for round trips."""

    name: str = ""
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    finalizers: list[str] = field(default_factory=list)
    owner_references: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def json_names(cls) -> dict[str, str]:
        names = super().json_names()
        del names["extra"]
        return names

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Self:
        meta = super().from_dict(data)
        known = set(cls.json_names().values())
        meta.extra = {k: v for k, v in (data or {}).items() if k not in known}
        return meta

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), **self.extra}


@dataclass
class Requirement(Model):
    """A node selector requirement; ``min_values`` asks for at least that many distinct values."""

    key: str = ""
    operator: str = "In"
    values: list[str] = field(default_factory=list)
    min_values: int | None = None


@dataclass
class Taint(Model):
    key: str = ""
    effect: str = "NoSchedule"
    value: str | None = None
    time_added: str | None = None


@dataclass
class NodeClassRef(Model):
    group: str = labels.AWS_GROUP
    kind: str = labels.EC2NODECLASS_KIND
    name: str = ""


@dataclass
class Condition(Model):
    """A status condition; a new one is stamped with the current time (the API requires one)."""

    type: str = ""
    status: str = "Unknown"
    reason: str = ""
    message: str = ""
    last_transition_time: str = field(default_factory=now_rfc3339)
    observed_generation: int | None = None


def _condition(conditions: list[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


# --- NodePool ----------------------------------------------------------------------------------


@dataclass
class TemplateMetadata(Model):
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class NodeClaimTemplateSpec(Model):
    _always: ClassVar[frozenset[str]] = frozenset({"requirements"})

    requirements: list[Requirement] = field(default_factory=list)
    node_class_ref: NodeClassRef = field(default_factory=NodeClassRef)
    taints: list[Taint] = field(default_factory=list)
    startup_taints: list[Taint] = field(default_factory=list)
    expire_after: str = DEFAULT_EXPIRE_AFTER
    termination_grace_period: str | None = None

    @property
    def expire_after_seconds(self) -> float | None:
        """Seconds until a node expires; ``None`` for Never."""
        return parse_duration(self.expire_after)

    @property
    def termination_grace_period_seconds(self) -> float | None:
        """Seconds a draining node may take; ``None`` when unset (wait for ever)."""
        return (
            None if self.termination_grace_period is None else parse_duration(self.termination_grace_period)
        )


@dataclass
class NodeClaimTemplate(Model):
    metadata: TemplateMetadata = field(default_factory=TemplateMetadata)
    spec: NodeClaimTemplateSpec = field(default_factory=NodeClaimTemplateSpec)


@dataclass
class Budget(Model):
    """A disruption budget: ``nodes`` is a count or a percentage, active in ``schedule`` for ``duration``."""

    nodes: str = "10%"
    schedule: str | None = None
    duration: str | None = None
    reasons: list[str] | None = None

    def allowed(self, total_nodes: int) -> int:
        """Nodes this budget lets be disrupted at once out of ``total_nodes`` (percent rounds up)."""
        if self.nodes.endswith("%"):
            percent = int(self.nodes[:-1])
            return -(-total_nodes * percent // 100)
        return int(self.nodes)

    def applies_to(self, reason: str) -> bool:
        """True when the budget limits disruptions for ``reason`` (Empty, Underutilized, Drifted)."""
        return self.reasons is None or reason in self.reasons


@dataclass
class Disruption(Model):
    _always: ClassVar[frozenset[str]] = frozenset({"budgets"})

    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "0s"
    budgets: list[Budget] = field(default_factory=lambda: [Budget()])

    @property
    def consolidate_after_seconds(self) -> float | None:
        """Seconds a node must stay consolidatable first; ``None`` for Never (no consolidation)."""
        return parse_duration(self.consolidate_after)


def static_replicas(value: object) -> int | None:
    """A NodePool's ``spec.replicas`` when it is a count (a static NodePool); None otherwise."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class NodePoolSpec(Model):
    template: NodeClaimTemplate = field(default_factory=NodeClaimTemplate)
    disruption: Disruption = field(default_factory=Disruption)
    limits: dict[str, str | int] = field(default_factory=dict)
    weight: int | None = None
    replicas: int | None = None

    @property
    def is_static(self) -> bool:
        """Karpenter's ``IsStaticNodePool``: ``replicas`` is set (``state.nodepools.is_static``)."""
        return static_replicas(self.replicas) is not None


@dataclass
class NodePoolStatus(Model):
    resources: dict[str, str | int] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    node_class_observed_generation: int | None = None


@dataclass
class NodePool(Model):
    api_version: str = KARPENTER_V1
    kind: str = "NodePool"
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: NodePoolSpec = field(default_factory=NodePoolSpec)
    status: NodePoolStatus = field(default_factory=NodePoolStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def is_deleting(self) -> bool:
        return bool(self.metadata.deletion_timestamp)


# --- NodeClaim ---------------------------------------------------------------------------------


@dataclass
class ResourceRequirements(Model):
    requests: dict[str, str | int] = field(default_factory=dict)


@dataclass
class NodeClaimSpec(NodeClaimTemplateSpec):
    """A NodePool's template spec plus the resources the claim was sized for."""

    resources: ResourceRequirements = field(default_factory=ResourceRequirements)


# NodeClaim condition types, as Karpenter v1 names them (pkg/apis/v1/nodeclaim_status.go): the one
# definition every flow writes and reads them by.
LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
DRIFTED = "Drifted"
CONSOLIDATABLE = "Consolidatable"
DISRUPTION_REASON = "DisruptionReason"
DRAINED = "Drained"
VOLUMES_DETACHED = "VolumesDetached"
INSTANCE_TERMINATING = "InstanceTerminating"


@dataclass
class NodeClaimStatus(Model):
    node_name: str | None = None
    provider_id: str | None = _json("providerID", default=None)
    instance_id: str | None = _json("instanceID", default=None)
    image_id: str | None = _json("imageID", default=None)
    capacity: dict[str, str | int] = field(default_factory=dict)
    allocatable: dict[str, str | int] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    last_pod_event_time: str | None = None

    def condition(self, kind: str) -> Condition | None:
        """The condition of type ``kind`` (Launched, Registered, Initialized, Drifted, Consolidatable)."""
        return _condition(self.conditions, kind)

    def is_true(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.status == "True"


@dataclass
class NodeClaim(Model):
    api_version: str = KARPENTER_V1
    kind: str = "NodeClaim"
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: NodeClaimSpec = field(default_factory=NodeClaimSpec)
    status: NodeClaimStatus = field(default_factory=NodeClaimStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


# --- EC2NodeClass ------------------------------------------------------------------------------


@dataclass
class AMISelectorTerm(Model):
    alias: str | None = None
    id: str | None = None
    name: str | None = None
    owner: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    ssm_parameter: str | None = None


@dataclass
class SubnetSelectorTerm(Model):
    id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class SecurityGroupSelectorTerm(Model):
    id: str | None = None
    name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class EBS(Model):
    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: int | None = None
    kms_key_id: str | None = _json("kmsKeyID", default=None)
    snapshot_id: str | None = _json("snapshotID", default=None)
    throughput: int | None = None
    volume_size: str | int | None = None
    volume_type: str | None = None


@dataclass
class BlockDeviceMapping(Model):
    device_name: str | None = None
    ebs: EBS | None = None
    root_volume: bool | None = None


@dataclass
class MetadataOptions(Model):
    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = _json("httpProtocolIPv6", default="disabled")
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"


@dataclass
class KubeletConfiguration(Model):
    cluster_dns: list[str] = field(default_factory=list, metadata={"json": "clusterDNS"})
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: dict[str, str] = field(default_factory=dict)
    kube_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    eviction_soft: dict[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: dict[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = _json("imageGCHighThresholdPercent", default=None)
    image_gc_low_threshold_percent: int | None = _json("imageGCLowThresholdPercent", default=None)
    cpu_cfs_quota: bool | None = _json("cpuCFSQuota", default=None)


@dataclass
class EC2NodeClassSpec(Model):
    _always: ClassVar[frozenset[str]] = frozenset({"metadata_options"})

    ami_family: str | None = None
    ami_selector_terms: list[AMISelectorTerm] = field(default_factory=list)
    subnet_selector_terms: list[SubnetSelectorTerm] = field(default_factory=list)
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = field(default_factory=list)
    associate_public_ip_address: bool | None = _json("associatePublicIPAddress", default=None)
    role: str | None = None
    instance_profile: str | None = None
    user_data: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    block_device_mappings: list[BlockDeviceMapping] = field(default_factory=list)
    instance_store_policy: str | None = None
    detailed_monitoring: bool | None = None
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    kubelet: KubeletConfiguration | None = None
    context: str | None = None

    @property
    def resolved_ami_family(self) -> str | None:
        """``amiFamily``, or the family of the alias term (``al2023@latest`` → AL2023) when it is unset."""
        if self.ami_family:
            return self.ami_family
        for term in self.ami_selector_terms:
            if term.alias and "@" in term.alias:
                alias = term.alias.split("@", 1)[0].lower()
                return labels.ALIAS_FAMILIES.get(alias) or labels.WINDOWS_ALIAS_FAMILIES.get(alias)
        return None


@dataclass
class SubnetStatus(Model):
    id: str = ""
    zone: str = ""
    zone_id: str | None = _json("zoneID", default=None)


@dataclass
class SecurityGroupStatus(Model):
    id: str = ""
    name: str | None = None


@dataclass
class AMIStatus(Model):
    id: str = ""
    name: str | None = None
    deprecated: bool | None = None
    requirements: list[Requirement] = field(default_factory=list)


@dataclass
class EC2NodeClassStatus(Model):
    subnets: list[SubnetStatus] = field(default_factory=list)
    security_groups: list[SecurityGroupStatus] = field(default_factory=list)
    amis: list[AMIStatus] = field(default_factory=list)
    instance_profile: str | None = None
    conditions: list[Condition] = field(default_factory=list)


@dataclass
class EC2NodeClass(Model):
    api_version: str = AWS_V1
    kind: str = "EC2NodeClass"
    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    spec: EC2NodeClassSpec = field(default_factory=EC2NodeClassSpec)
    status: EC2NodeClassStatus = field(default_factory=EC2NodeClassStatus)

    @property
    def name(self) -> str:
        return self.metadata.name


MODELS: dict[tuple[str, str], type[NodePool | NodeClaim | EC2NodeClass]] = {
    (KARPENTER_V1, "NodePool"): NodePool,
    (KARPENTER_V1, "NodeClaim"): NodeClaim,
    (AWS_V1, "EC2NodeClass"): EC2NodeClass,
}


def load_object(data: dict[str, Any]) -> NodePool | NodeClaim | EC2NodeClass:
    """The model for a v1 object; ``ValueError`` naming apiVersion/kind for anything else."""
    key = (data.get("apiVersion", ""), data.get("kind", ""))
    try:
        return MODELS[key].from_dict(data)
    except KeyError:
        raise ValueError(
            f"{key[0]}/{key[1]} is not a v1 Nodewright kind; convert it first (nodewright convert)"
        ) from None
