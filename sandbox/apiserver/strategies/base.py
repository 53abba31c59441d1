"""The generic registry every kind's strategy starts from (``genericregistry.Store`` with a plain
strategy), and the delete options and garbage-collector finalizers every delete reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import admission, errors, printers, rbac, schema, selectors
from ..encoding import copy_json
from ..errors import FieldError
from ..resources import STATUS_SUBRESOURCE, ResourceType

if TYPE_CHECKING:
    from ..handlers import Context, ResourceHandlers, Response, Target


CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"


KUBERNETES_FINALIZER = "kubernetes"


ORPHAN_FINALIZER = "orphan"


FOREGROUND_FINALIZER = "foregroundDeletion"


PROPAGATION_POLICIES = ["Foreground", "Background", "Orphan"]


# The object fields a /status write leaves alone on a built-in kind, whatever the body says.
_NOT_SPEC = ("metadata", "status", "kind", "apiVersion")


def validate_delete_options(options: dict[str, Any]) -> None:
    """ValidateDeleteOptions, which the DELETE handler runs before any kind's REST sees them: one
    of orphanDependents and propagationPolicy, a known policy, dryRun only ``All``."""
    policy = options.get("propagationPolicy")
    problems = []
    if options.get("orphanDependents") is not None and policy is not None:
        problems.append(
            FieldError.invalid(
                "propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be both set"
            )
        )
    if policy is not None and policy not in PROPAGATION_POLICIES:
        problems.append(FieldError.unsupported("propagationPolicy", policy, [*PROPAGATION_POLICIES, "nil"]))
    for value in options.get("dryRun") or []:
        if value != "All":
            problems.append(FieldError.unsupported("dryRun", options["dryRun"], ["All"]))
            break
    if problems:
        raise errors.invalid("DeleteOptions", "meta.k8s.io", "", problems)


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

    # ------------------------------------------------------------------ create-only reviews

    def review(
        self, authorizer: rbac.Authorizer, t: Target, body: dict[str, Any], identity: rbac.Identity
    ) -> dict[str, Any]:
        """The answer of a review kind's create-only REST (never stored); asked only of the
        virtual kinds (access.py)."""
        raise errors.method_not_allowed()

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
            obj["status"] = copy_json(self.status_on_create)

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
                new["status"] = copy_json(old["status"])
            else:
                new.pop("status", None)
        return new

    def prepare_for_status_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """The status strategy's PrepareForUpdate: a /status write changes status (built-ins also
        take metadata changes, as their status strategies do)."""
        result = copy_json(new)
        for key, value in old.items():
            if key not in _NOT_SPEC:
                result[key] = copy_json(value)
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
        return self.validate(rt, new) + self.validate_immutable(new, old, subresource)

    def validate_immutable(
        self, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> list[FieldError]:
        """The part of ValidateUpdate that compares: what the kind forbids an update to change."""
        return []

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


class ReturnsDeletedObject(Strategy):
    """A kind whose store sets ReturnDeletedObject and differs in nothing else."""

    return_deleted_object = True
