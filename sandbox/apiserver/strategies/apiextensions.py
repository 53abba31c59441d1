"""CustomResourceDefinitions and their custom resources: apiextensions-apiserver's CRD strategy and
REST (``pkg/registry/customresourcedefinition``) and custom resource strategy
(``pkg/registry/customresource``).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .. import admission, conversion, errors, printers, schema, selectors
from ..errors import FieldError
from ..resources import CRD_KEY, STATUS_SUBRESOURCE, ResourceType
from .base import CRD_CLEANUP_FINALIZER, Strategy

if TYPE_CHECKING:
    from ..handlers import Context, ResourceHandlers, Response, Target


def _object_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return (meta.get("namespace") or "", meta["name"])


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
        from .. import scale  # serves HTTP, so it imports handlers.py, which imports this module

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
