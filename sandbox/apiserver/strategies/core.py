"""The core/v1 kinds the cluster runs on (pods, nodes, namespaces, events, services) and the
events.k8s.io and coordination.k8s.io kinds beside them: ``pkg/registry/core/*``,
``pkg/registry/events``, ``pkg/registry/coordination/lease``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .. import admission, errors, eventsv1, printers, selectors
from ..errors import FieldError
from ..resources import ResourceType
from .base import KUBERNETES_FINALIZER, Strategy, gc_finalizers

if TYPE_CHECKING:
    from ..handlers import ResourceHandlers


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

    def validate_immutable(
        self, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> list[FieldError]:
        """The spec, but for images and the like (its /status write keeps the spec anyway)."""
        return admission.validate_pod_update(new, old) if subresource is None else []

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

    def validate_immutable(
        self, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> list[FieldError]:
        return admission.validate_provider_id_update(new, old)


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
        """REST.Delete: the first delete only marks the namespace (a GuaranteedUpdate: deletionTimestamp,
        phase Terminating, and the propagation policy's garbage-collector finalizer, ``orphan`` or
        ``foregroundDeletion``), even with no finalizers left: the namespace controller empties it and
        finalizes it, and it goes then. A later delete answers the namespace as it is while its spec's
        finalizers hold it, else is the store's. The immortal namespaces are refused first
        (NamespaceLifecycle)."""
        meta = obj["metadata"]
        if meta["name"] in IMMORTAL_NAMESPACES:
            raise errors.forbidden(rt.plural, rt.group, meta["name"], "this namespace may not be deleted")
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
        return handlers.store.write(rt.key, obj)


# NamespaceLifecycle's: kube-apiserver refuses to delete them.
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


class EventStrategy(Strategy):
    """pkg/registry/core/event: core/v1 Events (what events.k8s.io/v1 Events are stored as)."""

    columns = printers.EVENTS
    field_labels = selectors.EVENT_FIELDS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_event(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + eventsv1.validate(obj, through_events_v1=False)


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


class ServiceStrategy(Strategy):
    """pkg/registry/core/service: a new service's status is an empty load balancer."""

    status_on_create = {"loadBalancer": {}}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_service(obj)


class LeaseStrategy(Strategy):
    """pkg/registry/coordination/lease."""

    columns = printers.LEASES

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_lease(obj)
