"""The registry of served resources: built-ins, plus the ones each installed CRD adds.

A :class:`ResourceType` is what discovery lists and what the router resolves a path to. Custom resources
share their CRD's storage across every served version, stored in the storage version and converted
when read or written through another (``conversion.py``: strategy None changes only ``apiVersion``,
Webhook calls the CRD's conversion webhook).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

# The subresource a kind's status strategy serves (strategies/base.py: prepare_for_status_update).
STATUS_SUBRESOURCE = "status"


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    # kube-apiserver refuses a PUT without resourceVersion for these (leases, custom resources, CRDs).
    allow_unconditional_update: bool = True
    # Whether metadata.generation is kept and bumped on spec changes.
    has_generation: bool = False
    custom: bool = False
    # The CRD's openAPIV3Schema for this version (custom resources only).
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    storage_schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # The CRD's spec.conversion.webhook when its strategy is Webhook (sandbox/apiserver/conversion.py).
    conversion_webhook: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    storage_version: str = field(default="", compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)
    selectable_fields: tuple[str, ...] = ()
    # The verbs discovery lists when they differ from the full set (namespaces: no deletecollection).
    only_verbs: tuple[str, ...] = ()
    # A create-only review (SubjectAccessReview, ...): answered, never stored.
    virtual: bool = False
    # Another resource whose storage this one shares, converting on the way (events.k8s.io Events
    # are core Events: sandbox/apiserver/eventsv1.py).
    stored_as: tuple[str, str] | None = None
    # A custom resource's scale subresource: (specReplicasPath, statusReplicasPath, labelSelectorPath).
    scale_paths: tuple[str, str, str] | None = field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: the same object whatever version (or cohabiting group) it is read through."""
        return self.stored_as or (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def verbs(self) -> list[str]:
        if self.only_verbs:
            return list(self.only_verbs)
        return ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _rt(group: str, version: str, plural: str, kind: str, namespaced: bool, **kw: Any) -> ResourceType:
    kw.setdefault("singular", kind.lower())
    return ResourceType(group, version, plural, kind, namespaced, **kw)


def _review(group: str, plural: str, kind: str, namespaced: bool) -> ResourceType:
    """A create-only review resource of authorization.k8s.io or authentication.k8s.io."""
    return _rt(group, "v1", plural, kind, namespaced, only_verbs=("create",), virtual=True)


_STATUS = frozenset({STATUS_SUBRESOURCE})
_SCALABLE = frozenset({STATUS_SUBRESOURCE, "scale"})


def _workload(plural: str, kind: str, short: str, subresources: frozenset[str]) -> ResourceType:
    """An apps/v1 workload: in the ``all`` category, with generation."""
    return _rt(
        "apps",
        "v1",
        plural,
        kind,
        True,
        short_names=(short,),
        categories=("all",),
        subresources=subresources,
        has_generation=True,
    )


def _admission(plural: str, kind: str, subresources: frozenset[str] = frozenset()) -> ResourceType:
    """A cluster-scoped admissionregistration.k8s.io/v1 kind, in the ``api-extensions`` category."""
    return _rt(
        "admissionregistration.k8s.io",
        "v1",
        plural,
        kind,
        False,
        categories=("api-extensions",),
        subresources=subresources,
        has_generation=True,
    )


BUILTINS: tuple[ResourceType, ...] = (
    _rt(
        "",
        "v1",
        "namespaces",
        "Namespace",
        False,
        short_names=("ns",),
        subresources=frozenset({"status", "finalize"}),
        only_verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    ),
    _rt("", "v1", "nodes", "Node", False, short_names=("no",), subresources=_STATUS),
    _rt(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        short_names=("po",),
        categories=("all",),
        subresources=frozenset({"status", "binding", "eviction"}),
        has_generation=True,
    ),
    _rt("", "v1", "events", "Event", True, short_names=("ev",)),
    _rt("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=("pv",), subresources=_STATUS),
    _rt(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        True,
        short_names=("pvc",),
        subresources=_STATUS,
    ),
    _rt("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    _rt(
        "", "v1", "services", "Service", True, short_names=("svc",), categories=("all",), subresources=_STATUS
    ),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
    _rt("", "v1", "secrets", "Secret", True),
    _rt("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=("sc",)),
    # Written by kube-controller-manager's attach-detach controller and a CSI driver's external-attacher
    # (sandbox/simulators/controllers.py); Karpenter's termination waits for them to go.
    _rt("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, subresources=_STATUS),
    _workload("deployments", "Deployment", "deploy", _SCALABLE),
    _workload("replicasets", "ReplicaSet", "rs", _SCALABLE),
    _workload("daemonsets", "DaemonSet", "ds", _STATUS),
    _workload("statefulsets", "StatefulSet", "sts", _SCALABLE),
    _rt("batch", "v1", "jobs", "Job", True, categories=("all",), subresources=_STATUS, has_generation=True),
    _rt(
        "batch",
        "v1",
        "cronjobs",
        "CronJob",
        True,
        short_names=("cj",),
        categories=("all",),
        subresources=_STATUS,
        has_generation=True,
    ),
    _rt(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=_STATUS,
        has_generation=True,
    ),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", True, allow_unconditional_update=False),
    _rt("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",), stored_as=("", "events")),
    _rt("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    _review("authorization.k8s.io", "localsubjectaccessreviews", "LocalSubjectAccessReview", True),
    _review("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False),
    _review("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False),
    _review("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview", False),
    _review("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview", False),
    # Validating webhooks are called by the API server on writes (sandbox/apiserver/webhooks.py);
    # mutating webhooks and admission policies are stored and served, not applied
    # (sandbox/apiserver/admissionregistration.py).
    _admission("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
    _admission("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
    _admission("validatingadmissionpolicies", "ValidatingAdmissionPolicy", _STATUS),
    _admission("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"),
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=_STATUS,
        allow_unconditional_update=False,
        has_generation=True,
    ),
)

# Preferred order of groups in discovery (kube-apiserver lists them by priority, core first).
BUILTIN_GROUP_ORDER = (
    "",
    "apps",
    "events.k8s.io",
    "batch",
    "policy",
    "storage.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
)

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


class Registry:
    """Resolves (group, version, plural) to a ResourceType; CRDs add and remove entries at run time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._builtin = {(r.group, r.version, r.plural): r for r in BUILTINS}
        self._custom: dict[tuple[str, str, str], ResourceType] = {}
        # CRD name -> the (group, version, plural) entries it installed.
        self._by_crd: dict[str, list[tuple[str, str, str]]] = {}
        self._custom_groups: dict[str, list[str]] = {}  # group -> served versions, preferred first

    @property
    def crd_type(self) -> ResourceType:
        return self._builtin[("apiextensions.k8s.io", "v1", "customresourcedefinitions")]

    def resources_of_crd(self, name: str) -> list[ResourceType]:
        with self._lock:
            return [self._custom[key] for key in self._by_crd.get(name, []) if key in self._custom]

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        key = (group, version, plural)
        return self._builtin.get(key) or self._custom.get(key)

    def is_builtin_group(self, group: str, version: str) -> bool:
        return any(r.group == group and r.version == version for r in BUILTINS)

    def serves_group_version(self, group: str, version: str) -> bool:
        with self._lock:
            return self.is_builtin_group(group, version) or version in self._custom_groups.get(group, [])

    def group_versions(self) -> list[tuple[str, list[str]]]:
        """Every non-core group with its versions, preferred version first (for /apis)."""
        groups: list[tuple[str, list[str]]] = [(g, ["v1"]) for g in BUILTIN_GROUP_ORDER if g]
        with self._lock:
            groups.extend((g, list(v)) for g, v in sorted(self._custom_groups.items()))
        return groups

    def resources_of(self, group: str, version: str) -> list[ResourceType]:
        with self._lock:
            custom = [r for r in self._custom.values() if r.group == group and r.version == version]
        return [r for r in BUILTINS if r.group == group and r.version == version] + sorted(
            custom, key=lambda r: r.plural
        )

    def install_crd(self, crd: dict[str, Any]) -> None:
        """(Re)register the served versions of ``crd``; call after every CRD write."""
        spec = crd["spec"]
        names = spec["names"]
        group = spec["group"]
        versions = [v for v in spec.get("versions", []) if v.get("served", True)]
        storage = next((v for v in spec.get("versions", []) if v.get("storage")), None)
        storage_schema = (storage or {}).get("schema", {}).get("openAPIV3Schema")
        conversion = spec.get("conversion") or {}
        webhook = conversion.get("webhook") if conversion.get("strategy") == "Webhook" else None
        entries: dict[tuple[str, str, str], ResourceType] = {}
        for v in versions:
            subs = v.get("subresources") or {}
            sub_names = frozenset(k for k in ("status", "scale") if k in subs)
            selectable = tuple(f["jsonPath"].lstrip(".") for f in v.get("selectableFields") or [])
            entries[(group, v["name"], names["plural"])] = ResourceType(
                group=group,
                version=v["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=sub_names,
                allow_unconditional_update=False,
                has_generation=True,
                custom=True,
                schema=(v.get("schema") or {}).get("openAPIV3Schema"),
                storage_schema=storage_schema,
                conversion_webhook=webhook,
                storage_version=(storage or {}).get("name", v["name"]),
                printer_columns=tuple(v.get("additionalPrinterColumns") or ()),
                selectable_fields=selectable,
                scale_paths=_scale_paths(subs.get("scale")),
            )
        name = crd["metadata"]["name"]
        with self._lock:
            self._remove_locked(name)
            self._custom.update(entries)
            self._by_crd[name] = list(entries)
            if versions:
                ordered = _sort_versions([v["name"] for v in versions])
                existing = self._custom_groups.get(group, [])
                self._custom_groups[group] = _sort_versions(list(dict.fromkeys(existing + ordered)))

    def remove_crd(self, name: str) -> None:
        with self._lock:
            self._remove_locked(name)

    def _remove_locked(self, name: str) -> None:
        for key in self._by_crd.pop(name, []):
            self._custom.pop(key, None)
        served: dict[str, set[str]] = {}
        for g, v, _ in self._custom:
            served.setdefault(g, set()).add(v)
        self._custom_groups = {g: _sort_versions(list(vs)) for g, vs in served.items()}


def _scale_paths(scale: Any) -> tuple[str, str, str] | None:
    """A CRD version's ``subresources.scale`` as (specReplicasPath, statusReplicasPath,
    labelSelectorPath); None when it has none."""
    if not isinstance(scale, dict):
        return None
    return (
        str(scale.get("specReplicasPath") or ""),
        str(scale.get("statusReplicasPath") or ""),
        str(scale.get("labelSelectorPath") or ""),
    )


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version priority: GA > beta > alpha, higher numbers first (as in discovery)."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (3, 0, 0, version)
    major = int(match.group(1))
    stage = {"alpha": 2, "beta": 1, None: 0}[match.group(2)]
    minor = int(match.group(3) or 0)
    return (stage, -major, -minor, version)


def _sort_versions(versions: list[str]) -> list[str]:
    return sorted(set(versions), key=_version_priority)
