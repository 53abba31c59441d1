"""What each kind does differently on a read or a write, in one class per kind, as kube-apiserver's
registry keeps it in ``pkg/registry/<group>/<kind>/strategy.go`` and the store options beside it.

:class:`Strategy` is the generic registry (``genericregistry.Store`` with a plain strategy); a kind
that differs overrides the hook that differs, named after kube-apiserver's: ``PrepareForCreate``,
``PrepareForUpdate`` (and the status strategy's), ``Validate``/``ValidateUpdate``,
``CheckGracefulDelete``, ``ReturnDeletedObject``, ``ShouldDeleteDuringUpdate``, the store's
``BeginCreate``/``AfterCreate``/``AfterUpdate``/``AfterDelete``, and a REST ``Delete`` for the kind
whose storage replaces the store's (namespaces); custom resources and events.k8s.io Events also
convert between the served and the stored version here (``present``, ``to_storage``).
:func:`strategy_for` resolves a resource to its strategy; ``handlers.py`` runs the verbs and asks it
at each point where kinds differ, so it has no per-kind case of its own. Strategies hold no state:
one instance serves every version of its kind.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from . import (
    admission,
    admissionregistration,
    conversion,
    errors,
    eventsv1,
    printers,
    rbac,
    schema,
    selectors,
    webhooks,
)
from .errors import FieldError
from .resources import CRD_KEY, STATUS_SUBRESOURCE, ResourceType

if TYPE_CHECKING:
    from .handlers import Context, ResourceHandlers, Response, Target

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
KUBERNETES_FINALIZER = "kubernetes"
ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"
PROPAGATION_POLICIES = ["Foreground", "Background", "Orphan"]
# The object fields a /status write leaves alone on a built-in kind, whatever the body says.
_NOT_SPEC = ("metadata", "status", "kind", "apiVersion")


def validate_delete_options(options: dict[str, Any]) -> None:
    """ValidateDeleteOptions, which the DELETE handler runs before any kind's REST sees them."""
    policy = options.get("propagationPolicy")
    if policy is not None and policy not in PROPAGATION_POLICIES:
        raise errors.invalid(
            "DeleteOptions",
            "meta.k8s.io",
            "",
            [FieldError.unsupported("propagationPolicy", policy, PROPAGATION_POLICIES)],
        )


def gc_finalizers(existing: list[str], options: dict[str, Any]) -> list[str]:
    """The finalizers a delete leaves for the garbage collector (registry Store
    deletionFinalizersForGarbageCollection): ``orphan`` for Orphan, ``foregroundDeletion`` for
    Foreground, neither for Background (the default of every resource served here)."""
    policy = options.get("propagationPolicy")
    orphan_dependents = options.get("orphanDependents")
    validate_delete_options(options)
    if orphan_dependents is not None:
        orphan, foreground = bool(orphan_dependents), False
    elif policy is not None:
        orphan, foreground = policy == "Orphan", policy == "Foreground"
    else:
        orphan, foreground = ORPHAN_FINALIZER in existing, FOREGROUND_FINALIZER in existing
    kept = [f for f in existing if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
    return kept + [ORPHAN_FINALIZER] * orphan + [FOREGROUND_FINALIZER] * foreground


class Strategy:
    """The generic registry: what every kind does unless its own strategy says otherwise."""

    # Store.ReturnDeletedObject: a delete that removed the object answers with it, not a Status.
    return_deleted_object = False
    # Strategic merge patch needs the Go types' patch strategies, which only built-in kinds have.
    strategic_merge_patch = True
    # The status PrepareForCreate gives a new object (None: the kind keeps what the client sent).
    status_on_create: dict[str, Any] | None = None
    # Status integers Go serialises even when zero (no omitempty): clients' models require them.
    zero_status_fields: tuple[str, ...] = ()
    # What ``kubectl get`` prints of the kind (its store's TableConvertor): printers.py.
    columns: list[printers.Column] = printers.DEFAULT
    # The fields a field selector may name beyond metadata's (ToSelectableFields): selectors.py.
    field_labels: dict[str, selectors.FieldGetter] = {}

    # ------------------------------------------------------------------ versions (the codec)

    def present(
        self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any], *, in_list: bool = False
    ) -> dict[str, Any]:
        """The stored object as the client sees it through ``rt``'s version (a copy when it must
        change); a list's items carry no kind and apiVersion."""
        if in_list:
            return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        return obj

    def to_storage(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The object of a write, in ``rt``'s version, as it is stored."""
        return obj

    def decode_list(
        self,
        handlers: ResourceHandlers,
        rt: ResourceType,
        scanned: list[dict[str, Any]],
        selected: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """What a list page answers of the ``selected`` stored objects (of the ``scanned`` ones the
        page read), before :meth:`present`."""
        return selected

    # ------------------------------------------------------------------ selection (GetAttrs)

    def selectable_fields(self, rt: ResourceType) -> dict[str, selectors.FieldGetter]:
        """The fields of ``rt``'s objects a field selector may name."""
        return {**selectors.COMMON_FIELDS, **self.field_labels}

    # ------------------------------------------------------------------ printing (TableConvertor)

    def table_columns(self, rt: ResourceType) -> list[printers.Column]:
        """The columns of a Table of ``rt``."""
        return self.columns

    def printed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object the columns read, from one as the client sees it."""
        return obj

    # ------------------------------------------------------------------ subresources

    def scale(self, handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
        """The kind's ScaleREST (scale.py); asked only of the kinds serving ``/scale``."""
        raise errors.internal(f"{t.rt.plural} has no scale subresource")

    # ------------------------------------------------------------------ create

    def check_create_allowed(self, handlers: ResourceHandlers, rt: ResourceType) -> None:
        """Refuse a create before its body is looked at (a kind being torn down)."""

    def prune(self, rt: ResourceType, obj: dict[str, Any]) -> list[str]:
        """Drop the fields the kind does not know, answering their paths (for Warn or Strict)."""
        return schema.prune_builtin(obj, rt.group, rt.kind)

    def validate_name(self, name: str) -> list[FieldError]:
        """ValidateObjectMeta's check of the name (most kinds: a DNS-1123 subdomain)."""
        return admission.validate_name(name)

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """The scheme's defaulting (SetDefaults_<Kind>), run on every create and update body."""

    def admit_create(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> None:
        """The kind's mutating admission plugins on a create (after defaulting, before validation)."""

    def prepare_for_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """PrepareForCreate: the status a new object starts with (metadata and generation are the
        verb's, as every kind's)."""
        if self.status_on_create is not None:
            obj["status"] = copy.deepcopy(self.status_on_create)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        """Validate: the object's metadata, and whatever the kind checks of the rest."""
        return admission.validate_metadata(obj)

    def canonicalize(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """Canonicalize, after validation on a create and an update: here, the zero-valued status
        fields the real API server always serialises."""
        if self.zero_status_fields:
            status = obj.setdefault("status", {})
            for name in self.zero_status_fields:
                status.setdefault(name, 0)

    def begin_create(self, handlers: ResourceHandlers, obj: dict[str, Any]) -> None:
        """Store.BeginCreate: a check against what is stored, under the store lock."""

    def after_create(self, handlers: ResourceHandlers, stored: dict[str, Any]) -> None:
        """Store.AfterCreate: what the write sets going (not called on a dry run)."""

    # ------------------------------------------------------------------ update

    def prepare_for_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        """PrepareForUpdate: with a status subresource, the main resource cannot change status
        and ``/status`` changes nothing else (answers the object to store, maybe a new one)."""
        if subresource == STATUS_SUBRESOURCE:
            return self.prepare_for_status_update(rt, new, old)
        if STATUS_SUBRESOURCE in rt.subresources:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    def prepare_for_status_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """The status strategy's PrepareForUpdate: a /status write changes status (built-ins also
        take metadata changes, as their status strategies do)."""
        result = copy.deepcopy(new)
        for key, value in old.items():
            if key not in _NOT_SPEC:
                result[key] = copy.deepcopy(value)
        for key in list(result):
            if key not in old and key not in _NOT_SPEC:
                del result[key]
        return result

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        """Whether an update bumps ``metadata.generation`` (kinds that keep one)."""
        return new.get("spec") != old.get("spec")

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        """ValidateUpdate: the object as on a create, and what the kind forbids to change;
        ``warnings`` collects what the request answers in Warning headers."""
        return self.validate(rt, new)

    def after_update(self, handlers: ResourceHandlers, stored: dict[str, Any]) -> None:
        """Store.AfterUpdate (not called on a dry run, nor when the update deleted the object)."""

    # ------------------------------------------------------------------ delete

    def should_delete_during_update(self, obj: dict[str, Any]) -> bool:
        """Store.ShouldDeleteDuringUpdate: a terminating object whose last finalizer is gone goes."""
        meta = obj["metadata"]
        return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers")

    def check_graceful_delete(self, obj: dict[str, Any], options: dict[str, Any]) -> int | None:
        """CheckGracefulDelete: the grace period of a kind deleted gracefully, None for the others."""
        return None

    def deletion_finalizers(self, obj: dict[str, Any], options: dict[str, Any]) -> list[str]:
        """The finalizers the object is deleted with (may mark ``obj`` as it is torn down)."""
        return gc_finalizers(obj["metadata"].get("finalizers") or [], options)

    def delete(
        self,
        handlers: ResourceHandlers,
        rt: ResourceType,
        obj: dict[str, Any],
        options: dict[str, Any],
        dry_run: bool,
    ) -> dict[str, Any] | None:
        """REST Delete, preconditions checked: the generic Store.Delete unless the kind has its own."""
        return handlers.store_delete(rt, obj, options, dry_run)

    def after_delete(self, handlers: ResourceHandlers, gone: dict[str, Any]) -> None:
        """Store.AfterDelete: what removing the object takes with it."""


def _object_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


def _pod_bound_and_active(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


class PodStrategy(Strategy):
    """pkg/registry/core/pod: ServiceAccount admission, graceful deletion, the spec's immutability."""

    columns = printers.PODS
    field_labels = selectors.POD_FIELDS

    return_deleted_object = True

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_pod(obj)

    def admit_create(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> None:
        namespace = obj["metadata"]["namespace"]
        if handlers.namespace_active(namespace):
            # After NamespaceLifecycle: a missing namespace stays its 404.
            admission.admit_service_account(obj, namespace, handlers.service_account)

    def prepare_for_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        obj["status"] = {"phase": "Pending", "qosClass": admission.qos_class(obj.get("spec") or {})}

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_pod_spec(obj.get("spec") or {}, "spec")

    def prepare_for_status_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """podStatusStrategy also keeps the owner references (only the pod's own update sets them)."""
        result = super().prepare_for_status_update(rt, new, old)
        owners = old["metadata"].get("ownerReferences")
        if owners is None:
            result["metadata"].pop("ownerReferences", None)
        else:
            result["metadata"]["ownerReferences"] = copy.deepcopy(owners)
        return result

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        problems = self.validate(rt, new)
        if subresource is None:
            problems += admission.validate_pod_update(new, old)
        return problems

    def should_delete_during_update(self, obj: dict[str, Any]) -> bool:
        """A pod goes once its grace period is 0 too (the kubelet's final delete)."""
        return super().should_delete_during_update(obj) and not obj["metadata"].get(
            "deletionGracePeriodSeconds"
        )

    def check_graceful_delete(self, obj: dict[str, Any], options: dict[str, Any]) -> int:
        """The requested period, else the pod's terminationGracePeriodSeconds; 0 for a pod no kubelet
        runs (unbound, or finished). Pod deletion is always graceful: even at 0, watchers see the
        deletionTimestamp (MODIFIED) before DELETED."""
        if not _pod_bound_and_active(obj):
            return 0
        requested = options.get("gracePeriodSeconds")
        if requested is None:
            requested = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        return max(int(requested), 0)


class NodeStrategy(Strategy):
    """pkg/registry/core/node, with the TaintNodesByCondition admission plugin. A node keeps the
    status it is created with (the kubelet registers with one)."""

    columns = printers.NODES
    field_labels = selectors.NODE_FIELDS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_node_status(obj)

    def admit_create(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.admit_node_create(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        taints = (obj.get("spec") or {}).get("taints") or []
        return super().validate(rt, obj) + admission.validate_taints(taints, "spec.taints")

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        problems = super().validate_update(rt, new, old, subresource, warnings)
        return problems + admission.validate_provider_id_update(new, old)


class NamespaceStrategy(Strategy):
    """pkg/registry/core/namespace: spec.finalizers change through /finalize only, and the REST's own
    Delete marks the namespace Terminating for the namespace controller to empty and finalize."""

    columns = printers.NAMESPACES
    field_labels = selectors.PHASE_FIELDS
    return_deleted_object = True

    status_on_create = {"phase": "Active"}

    def validate_name(self, name: str) -> list[FieldError]:
        """ValidateNamespaceName: a DNS-1123 label."""
        return admission.validate_label_name(name)

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_namespace(obj)

    def prepare_for_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """Active, and the ``kubernetes`` finalizer whatever finalizers the client sent (the
        namespace controller removes it once it has emptied the namespace)."""
        super().prepare_for_create(rt, obj)
        finalizers = obj.setdefault("spec", {}).setdefault("finalizers", [])
        if KUBERNETES_FINALIZER not in finalizers:
            finalizers.append(KUBERNETES_FINALIZER)

    def prepare_for_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        finalizers = (new.get("spec") or {}).get("finalizers") if subresource == "finalize" else None
        new = super().prepare_for_update(rt, new, old, subresource)
        new["spec"] = copy.deepcopy(old.get("spec") or {})
        if subresource == "finalize":
            new["spec"]["finalizers"] = finalizers or []
            if not new["spec"]["finalizers"]:
                del new["spec"]["finalizers"]
        return new

    def should_delete_during_update(self, obj: dict[str, Any]) -> bool:
        """ShouldDeleteNamespaceDuringUpdate: the spec's finalizers must be gone too."""
        return super().should_delete_during_update(obj) and not (obj.get("spec") or {}).get("finalizers")

    def delete(
        self,
        handlers: ResourceHandlers,
        rt: ResourceType,
        obj: dict[str, Any],
        options: dict[str, Any],
        dry_run: bool,
    ) -> dict[str, Any] | None:
        """The first delete stamps deletionTimestamp and phase Terminating, and the propagation
        policy's garbage-collector finalizer (``orphan``, ``foregroundDeletion``) as the generic
        store would; a namespace with no finalizers at all goes at once. A later delete answers
        the namespace as it is while its spec's finalizers hold it, else is the store's."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            if (obj.get("spec") or {}).get("finalizers"):
                return obj
            return handlers.store_delete(rt, obj, options, dry_run)
        meta["deletionTimestamp"] = admission.now()
        finalizers = gc_finalizers(meta.get("finalizers") or [], options)
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
        obj.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return obj
        if self.should_delete_during_update(obj):
            return handlers.store.remove(rt.key, "", meta["name"])
        return handlers.store.write(rt.key, obj)


class EventsV1Strategy(Strategy):
    """events.k8s.io/v1 Events are core Events in storage, converted on the way (eventsv1.py)."""

    columns = printers.EVENTS
    field_labels = selectors.EVENTS_V1_FIELDS

    def present(
        self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any], *, in_list: bool = False
    ) -> dict[str, Any]:
        return super().present(handlers, rt, eventsv1.from_core(obj), in_list=in_list)

    def to_storage(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        return eventsv1.to_core(obj)

    def printed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Printed by core Events' columns, from the core/v1 shape."""
        return eventsv1.to_core(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + eventsv1.validate(obj, through_events_v1=True)


class EventStrategy(Strategy):
    """pkg/registry/core/event: core/v1 Events (what events.k8s.io/v1 Events are stored as)."""

    columns = printers.EVENTS
    field_labels = selectors.EVENT_FIELDS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_event(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + eventsv1.validate(obj, through_events_v1=False)


class StorageProtectedStrategy(Strategy):
    """PersistentVolumes and claims: they start Pending, and the StorageObjectInUseProtection
    admission plugin gives each its protection finalizer, which its controller lets go."""

    status_on_create = {"phase": "Pending"}
    protection_finalizer = ""

    def admit_create(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> None:
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if self.protection_finalizer not in finalizers:
            finalizers.append(self.protection_finalizer)


class PersistentVolumeStrategy(StorageProtectedStrategy):
    """pkg/registry/core/persistentvolume."""

    protection_finalizer = "kubernetes.io/pv-protection"

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_persistent_volume(obj)


class PersistentVolumeClaimStrategy(StorageProtectedStrategy):
    """pkg/registry/core/persistentvolumeclaim."""

    protection_finalizer = "kubernetes.io/pvc-protection"
    field_labels = selectors.PHASE_FIELDS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_persistent_volume_claim(obj)


class ServiceStrategy(Strategy):
    """pkg/registry/core/service: a new service's status is an empty load balancer."""

    status_on_create = {"loadBalancer": {}}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_service(obj)


class StorageClassStrategy(Strategy):
    """pkg/registry/storage/storageclass (its store returns the deleted object)."""

    return_deleted_object = True

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_storage_class(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_storage_class(obj)


class VolumeAttachmentStrategy(Strategy):
    """pkg/registry/storage/volumeattachment."""

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_volume_attachment(obj)


class LeaseStrategy(Strategy):
    """pkg/registry/coordination/lease."""

    columns = printers.LEASES

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_lease(obj)


class WorkloadStrategy(Strategy):
    """pkg/registry/apps/*: a pod template under an immutable selector; status starts empty."""

    status_on_create: dict[str, Any] | None = {}

    def scale(self, handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
        from . import scale  # serves HTTP, so it imports handlers.py, which imports this module

        return scale.workload_scale(handlers, t, ctx)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_workload(obj.get("spec") or {})

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        problems = super().validate_update(rt, new, old, subresource, warnings)
        return problems + admission.validate_selector_immutable(new, old)


class DeploymentStrategy(WorkloadStrategy):
    """pkg/registry/apps/deployment."""

    columns = printers.DEPLOYMENTS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_deployment(obj)

    def prepare_for_status_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """deploymentStatusStrategy keeps the labels too (its reset fields: spec and
        metadata.labels); other metadata, annotations included, a /status write may change."""
        result = super().prepare_for_status_update(rt, new, old)
        labels = old["metadata"].get("labels")
        if labels is None:
            result["metadata"].pop("labels", None)
        else:
            result["metadata"]["labels"] = copy.deepcopy(labels)
        return result

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        """An update of the deployment bumps the generation for its annotations too (they are
        copied to its ReplicaSets); a /status write never does."""
        if subresource is not None:
            return False
        annotations = (new["metadata"].get("annotations") or {}) != (old["metadata"].get("annotations") or {})
        return annotations or super().spec_changed(rt, new, old, subresource)


class ReplicaSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/replicaset."""

    columns = printers.REPLICASETS
    field_labels = selectors.REPLICASET_FIELDS

    zero_status_fields = ("replicas",)

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_replica_set(obj)


class StatefulSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/statefulset."""

    zero_status_fields = ("replicas", "availableReplicas")

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_stateful_set(obj)


class DaemonSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/daemonset."""

    columns = printers.DAEMONSETS

    zero_status_fields = (
        "currentNumberScheduled",
        "desiredNumberScheduled",
        "numberMisscheduled",
        "numberReady",
    )

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_daemon_set(obj)


class JobStrategy(Strategy):
    """pkg/registry/batch/job: defaults with the generated selector (which names the uid)."""

    status_on_create: dict[str, Any] | None = {}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_job(obj)


class CronJobStrategy(Strategy):
    """pkg/registry/batch/cronjob."""

    status_on_create: dict[str, Any] | None = {}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_cron_job(obj)


class PodDisruptionBudgetStrategy(Strategy):
    """pkg/registry/policy/poddisruptionbudget."""

    columns = printers.PODDISRUPTIONBUDGETS

    status_on_create: dict[str, Any] | None = {}
    zero_status_fields = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_pod_disruption_budget(obj)


class RoleStrategy(Strategy):
    """pkg/registry/rbac/role and clusterrole (a Role's rules cannot name non-resource URLs)."""

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + rbac.validate_role(obj, namespaced=rt.namespaced)


class RoleBindingStrategy(Strategy):
    """pkg/registry/rbac/rolebinding and clusterrolebinding (only a RoleBinding may name a Role);
    the roleRef cannot change."""

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + rbac.validate_binding(obj, namespaced=rt.namespaced)

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        return super().validate_update(rt, new, old, subresource, warnings) + rbac.validate_binding_update(
            new, old
        )


class ReturnsDeletedObject(Strategy):
    """A kind whose store sets ReturnDeletedObject and differs in nothing else."""

    return_deleted_object = True


class MutatingWebhookConfigurationStrategy(Strategy):
    """pkg/registry/admissionregistration/mutatingwebhookconfiguration: stored and served, not
    called; it has no spec, so the generation follows its webhooks."""

    columns = printers.WEBHOOK_CONFIGURATIONS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_webhook_configuration(obj, mutating=True)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        problems = super().validate(rt, obj)
        return problems + admissionregistration.validate_webhook_configuration(obj, mutating=True)

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        return new.get("webhooks") != old.get("webhooks")


class ValidatingWebhookConfigurationStrategy(Strategy):
    """pkg/registry/admissionregistration/validatingwebhookconfiguration: the configurations the
    emulator calls (webhooks.py), validated as the mutating ones are, their matchConditions also
    compiled when written (as the emulator will evaluate them)."""

    columns = printers.WEBHOOK_CONFIGURATIONS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_webhook_configuration(obj, mutating=False)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        problems = super().validate(rt, obj)
        problems += admissionregistration.validate_webhook_configuration(obj, mutating=False)
        reported = {problem.field for problem in problems}
        return problems + [p for p in webhooks.validate_configuration(obj) if p.field not in reported]

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        return new.get("webhooks") != old.get("webhooks")


class ValidatingAdmissionPolicyStrategy(Strategy):
    """pkg/registry/admissionregistration/validatingadmissionpolicy: stored and served, not
    applied; its status (the type checking) is the controller's, so it starts empty."""

    columns = printers.VALIDATING_ADMISSION_POLICIES

    status_on_create: dict[str, Any] | None = {}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_policy(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admissionregistration.validate_policy(obj)


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    """pkg/registry/admissionregistration/validatingadmissionpolicybinding."""

    columns = printers.VALIDATING_ADMISSION_POLICY_BINDINGS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_binding(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admissionregistration.validate_binding(obj)


class CustomResourceDefinitionStrategy(Strategy):
    """apiextensions-apiserver's CRD strategy and REST: the status it computes (accepted names,
    conditions, stored versions), its paths served from the first write, and the cleanup of its
    custom objects before it goes."""

    columns = printers.CUSTOM_RESOURCE_DEFINITIONS

    return_deleted_object = True

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_crd(obj)

    def prepare_for_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        obj["status"] = admission.crd_status(obj, None)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_crd(obj)

    def begin_create(self, handlers: ResourceHandlers, obj: dict[str, Any]) -> None:
        """Another CRD already serving the same group and plural cannot be accepted."""
        spec = obj["spec"]
        for version in spec.get("versions") or []:
            existing = handlers.registry.lookup(spec["group"], version["name"], spec["names"]["plural"])
            if existing is not None and not existing.custom:
                raise errors.invalid(
                    "CustomResourceDefinition",
                    "apiextensions.k8s.io",
                    obj["metadata"]["name"],
                    [
                        FieldError.invalid(
                            "spec.names.plural",
                            spec["names"]["plural"],
                            "is already served by a built-in resource",
                        )
                    ],
                )

    def after_create(self, handlers: ResourceHandlers, stored: dict[str, Any]) -> None:
        handlers.registry.install_crd(stored)

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        """Also the immutable group and plural, and the status: a /status write may set
        storedVersions (how a storage migration drops a version); any other write keeps the
        recorded ones. The status is computed here, once the spec it reads has been validated."""
        problems = super().validate_update(rt, new, old, subresource, warnings)
        problems += self._immutable(new, old)
        if subresource == STATUS_SUBRESOURCE:
            problems += admission.validate_stored_versions(new, new.get("status"))
            new["status"] = admission.crd_status(new, new.get("status"))
        else:
            new["status"] = admission.crd_status(new, old.get("status"))
            problems += admission.validate_stored_versions(new, new["status"])
        return problems

    @staticmethod
    def _immutable(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
        problems = []
        for field_name in ("group",):
            if new["spec"].get(field_name) != old["spec"].get(field_name):
                problems.append(
                    FieldError.invalid(
                        f"spec.{field_name}", new["spec"].get(field_name), "field is immutable"
                    )
                )
        if new["spec"].get("names", {}).get("plural") != old["spec"].get("names", {}).get("plural"):
            problems.append(
                FieldError.invalid(
                    "status.acceptedNames.plural", new["spec"]["names"].get("plural"), "field is immutable"
                )
            )
        return problems

    def after_update(self, handlers: ResourceHandlers, stored: dict[str, Any]) -> None:
        handlers.registry.install_crd(stored)

    def deletion_finalizers(self, obj: dict[str, Any], options: dict[str, Any]) -> list[str]:
        """apiextensions-apiserver deletes a CRD in the background: its custom objects first, under
        the cleanup finalizer and the Terminating condition."""
        finalizers = super().deletion_finalizers(obj, options)
        if CRD_CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CRD_CLEANUP_FINALIZER)
            admission.set_crd_terminating(obj)
        return finalizers

    def after_delete(self, handlers: ResourceHandlers, gone: dict[str, Any]) -> None:
        """Removing a CRD removes its custom objects and its API paths."""
        spec = gone["spec"]
        key = (spec["group"], spec["names"]["plural"])
        items, _ = handlers.store.list(key)
        for item in list(items):
            handlers.store.remove(key, item["metadata"].get("namespace") or "", item["metadata"]["name"])
        handlers.registry.remove_crd(gone["metadata"]["name"])

    def clean_up_deleted(self, handlers: ResourceHandlers) -> None:
        """The CRD finalizer controller (store lock held): delete a terminating CRD's custom objects
        (their finalizers honoured), then drop its cleanup finalizer, which removes the CRD and its
        paths."""
        store = handlers.store
        crds, _ = store.list(CRD_KEY)
        for crd in [c for c in crds if c["metadata"].get("deletionTimestamp")]:
            if CRD_CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or []):
                continue
            spec = crd["spec"]
            key = (spec["group"], spec["names"]["plural"])
            items, _ = store.list(key)
            rt = next((r for r in handlers.registry.resources_of_crd(crd["metadata"]["name"])), None)
            for item in list(items):
                meta = item["metadata"]
                if rt is not None and not meta.get("deletionTimestamp"):
                    current = store.get(key, meta.get("namespace") or "", meta["name"])
                    if current is not None:
                        handlers.delete_locked(rt, current, {})
            if store.list(key)[0]:
                continue  # objects held by their own finalizers: wait for them
            updated = copy.deepcopy(crd)
            updated["metadata"]["finalizers"] = [
                f for f in updated["metadata"]["finalizers"] if f != CRD_CLEANUP_FINALIZER
            ]
            if updated["metadata"]["finalizers"]:
                store.write(CRD_KEY, updated)
                continue
            gone = store.remove(CRD_KEY, "", crd["metadata"]["name"])
            if gone is not None:
                self.after_delete(handlers, gone)


class CustomResourceStrategy(Strategy):
    """apiextensions-apiserver's custom resource strategy: the CRD's structural schema prunes,
    defaults and validates (CEL rules included); the whole object but metadata and status is the
    spec; no create while the CRD is terminating."""

    strategic_merge_patch = False

    def present(
        self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any], *, in_list: bool = False
    ) -> dict[str, Any]:
        """In ``rt``'s version; a list's items keep their kind and apiVersion (unstructured lists)."""
        return self.convert(handlers, rt, [obj], rt.version)[0]

    def to_storage(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """In the CRD's storage version; a webhook's answer gets that version's defaults here
        (kube-apiserver applies them when it reads from etcd: the same to every reader)."""
        if not rt.storage_version:
            return obj
        out = self.convert(handlers, rt, [obj], rt.storage_version)[0]
        if out is not obj and rt.conversion_webhook is not None and rt.storage_schema:
            schema.apply_defaults(out, rt.storage_schema)
        return out

    def decode_list(
        self,
        handlers: ResourceHandlers,
        rt: ResourceType,
        scanned: list[dict[str, Any]],
        selected: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """``selected`` in ``rt``'s version, after converting every object the page read: kube-apiserver
        decodes (converts) each object it reads before its selectors filter them (etcd3 GetList), so
        one that cannot be converted fails the page that reads it, whichever objects the selectors keep."""
        converted = self.convert(handlers, rt, scanned, rt.version)
        by_key = {_object_key(o): c for o, c in zip(scanned, converted, strict=True)}
        return [by_key[_object_key(o)] for o in selected]

    @staticmethod
    def convert(
        handlers: ResourceHandlers, rt: ResourceType, objects: list[dict[str, Any]], version: str
    ) -> list[dict[str, Any]]:
        """Custom objects in ``version`` (conversion.py); what a webhook answers is pruned to that
        version's schema, as kube-apiserver prunes a conversion's output."""
        try:
            out = conversion.convert(rt, objects, version)
        except conversion.ConversionFailed as exc:
            raise errors.unclassified(str(exc)) from exc
        if rt.conversion_webhook is not None:
            target = handlers.registry.lookup(rt.group, version, rt.plural)
            target_schema = rt.storage_schema if version == rt.storage_version else (target and target.schema)
            for before, after in zip(objects, out, strict=True):
                if after is not before and target_schema:
                    schema.prune_custom(after, target_schema)
        return out

    def table_columns(self, rt: ResourceType) -> list[printers.Column]:
        """The CRD's additionalPrinterColumns (of ``rt``'s version)."""
        return printers.custom_columns(rt)

    def selectable_fields(self, rt: ResourceType) -> dict[str, selectors.FieldGetter]:
        """metadata's, and the CRD's selectableFields (of ``rt``'s version)."""
        fields = super().selectable_fields(rt)
        for name in rt.selectable_fields:
            fields.setdefault(name, selectors.field_path(*name.split(".")))
        return fields

    def scale(self, handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
        """The CRD's scale subresource, at its replica paths."""
        from . import scale  # serves HTTP, so it imports handlers.py, which imports this module

        return scale.custom_scale(handlers, t, ctx)

    def check_create_allowed(self, handlers: ResourceHandlers, rt: ResourceType) -> None:
        crd = handlers.store.peek(CRD_KEY, "", f"{rt.plural}.{rt.group}")
        if crd and crd["metadata"].get("deletionTimestamp"):
            error = errors.method_not_allowed()
            error.message = "create not allowed while custom resource definition is terminating"
            raise error

    def prune(self, rt: ResourceType, obj: dict[str, Any]) -> list[str]:
        unknown = schema.prune_custom(obj, rt.schema)
        if rt.storage_schema is not rt.schema and rt.conversion_webhook is None:
            # conversion strategy None: fields the storage version lacks are lost at write
            schema.prune_custom(obj, rt.storage_schema)
        return unknown

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        schema.apply_defaults(obj, rt.schema)

    def prepare_for_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        """With a status subresource, a create's status is dropped."""
        if STATUS_SUBRESOURCE in rt.subresources:
            obj.pop("status", None)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        problems = super().validate(rt, obj)
        problems += schema.validate_custom(obj, rt.schema)
        return problems + schema.validate_cel(obj, rt.schema, None)

    def prepare_for_status_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """Only status changes (metadata too is the stored one's, but for the resourceVersion)."""
        result = copy.deepcopy(old)
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        result["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion")
        return result

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        ignore = {"metadata", "status", "apiVersion", "kind"}
        return {k: v for k, v in new.items() if k not in ignore} != {
            k: v for k, v in old.items() if k not in ignore
        }

    def validate_update(
        self,
        rt: ResourceType,
        new: dict[str, Any],
        old: dict[str, Any],
        subresource: str | None,
        warnings: list[str],
    ) -> list[FieldError]:
        problems = admission.validate_metadata(new)
        # Both ratcheted as kube-apiserver's (KEP-4008): an error at a value the update left unchanged
        # is not the writer's. A ratcheted CEL failure is still a Warning (the CEL validator's
        # warning.AddWarning); a ratcheted schema error is dropped silently, as there.
        problems += schema.validate_custom(new, rt.schema, old)
        return problems + schema.validate_cel(new, rt.schema, old, warnings)


GENERIC = Strategy()
CRDS = CustomResourceDefinitionStrategy()
CUSTOM_RESOURCES = CustomResourceStrategy()
_ROLES = RoleStrategy()
_ROLE_BINDINGS = RoleBindingStrategy()
# By (group, plural); every kind not listed is the generic registry.
BY_KIND: dict[tuple[str, str], Strategy] = {
    ("", "pods"): PodStrategy(),
    ("", "nodes"): NodeStrategy(),
    ("", "namespaces"): NamespaceStrategy(),
    eventsv1.CORE_KEY: EventStrategy(),
    eventsv1.KEY: EventsV1Strategy(),
    ("", "persistentvolumes"): PersistentVolumeStrategy(),
    ("", "persistentvolumeclaims"): PersistentVolumeClaimStrategy(),
    ("", "services"): ServiceStrategy(),
    ("", "serviceaccounts"): ReturnsDeletedObject(),
    ("storage.k8s.io", "storageclasses"): StorageClassStrategy(),
    ("storage.k8s.io", "volumeattachments"): VolumeAttachmentStrategy(),
    ("apps", "deployments"): DeploymentStrategy(),
    ("apps", "replicasets"): ReplicaSetStrategy(),
    ("apps", "statefulsets"): StatefulSetStrategy(),
    ("apps", "daemonsets"): DaemonSetStrategy(),
    ("batch", "jobs"): JobStrategy(),
    ("batch", "cronjobs"): CronJobStrategy(),
    ("policy", "poddisruptionbudgets"): PodDisruptionBudgetStrategy(),
    ("coordination.k8s.io", "leases"): LeaseStrategy(),
    rbac.ROLES: _ROLES,
    rbac.CLUSTERROLES: _ROLES,
    rbac.ROLEBINDINGS: _ROLE_BINDINGS,
    rbac.CLUSTERROLEBINDINGS: _ROLE_BINDINGS,
    webhooks.CONFIGURATIONS: ValidatingWebhookConfigurationStrategy(),
    (
        admissionregistration.GROUP,
        admissionregistration.MUTATING_WEBHOOKS,
    ): MutatingWebhookConfigurationStrategy(),
    (admissionregistration.GROUP, admissionregistration.POLICIES): ValidatingAdmissionPolicyStrategy(),
    (admissionregistration.GROUP, admissionregistration.BINDINGS): ValidatingAdmissionPolicyBindingStrategy(),
    CRD_KEY: CRDS,
}


def strategy_for(rt: ResourceType) -> Strategy:
    """The strategy of ``rt``'s kind: the same for every version it is served in."""
    if rt.custom:
        return CUSTOM_RESOURCES
    return BY_KIND.get((rt.group, rt.plural), GENERIC)
