"""The REST verbs on resources: get, list, create, update, patch, delete, deletecollection.

Each write is a read-check-write under the store lock, then the object semantics kube-apiserver's
generic registry applies: preconditions and resourceVersion conflicts, defaults and validation,
status/spec separation between the main resource and ``/status``, generation bumps, finalizers and
graceful deletion. Where a kind differs (a pod's grace period, a namespace's delete, a CRD's status,
a custom resource's schema and versions...), the verb asks the kind's strategy (strategies/), as
kube-apiserver's generic store asks ``pkg/registry/<group>/<kind>/strategy.go``. Validating webhooks
are called with no lock held (an update is then stored only if the object has not changed meanwhile,
else rebuilt: GuaranteedUpdate), so a slow webhook costs its own request only, as on kube-apiserver.
"""

from __future__ import annotations

import base64
import builtins
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import yaml

from . import (
    admission,
    errors,
    managedfields,
    patching,
    protobuf,
    webhooks,
)
from .encoding import EncodedObjects, copy_json, kept_as
from .errors import ApiError, FieldError
from .resources import Registry, ResourceType
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .storage import Store
from .strategies import CRDS, strategy_for, validate_delete_options


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes
    identity: Any = None  # rbac.Identity of the caller, once authenticated


@dataclass
class Response:
    code: int
    body: Any = None  # dict -> JSON; str/bytes -> raw
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    stream: Iterator[bytes] | None = None
    warnings: list[str] = field(default_factory=list)
    # Called by the server once the answer is written: APF's seats (``Router.handle``) are held
    # until then, as kube-apiserver's filter holds them while the handler encodes and writes it.
    sent: Callable[[], None] | None = None
    # A list answer whose items may be sent from their kept encodings (encoding.py): the resource.
    items_of: str | None = None


@dataclass
class Target:
    """A resolved resource path."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass
class _Update:
    """An update validated under the store lock, waiting for its webhooks before it is stored."""

    t: Target
    ctx: Context
    new: dict[str, Any]
    old: dict[str, Any]  # in the request's version
    stored_old: dict[str, Any]  # as stored: the write lands only if this is still what is stored
    managed: list[dict[str, Any]] | None
    admitted: Admitted | None = None  # what admission is asked about, when not ``new`` and ``old``


@dataclass
class Admitted:
    """The objects admission sees when they are not the ones stored: a subresource of a kind of its
    own (the Scale of a /scale write), as kube-apiserver's admission attributes carry them."""

    kind: dict[str, str]  # group, version, kind
    new: dict[str, Any]
    old: dict[str, Any]


class Context:
    """Per-request options and the warnings to return as ``Warning`` headers."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.warnings: list[str] = []
        self.dry_run = request.query.get("dryRun") == "All"
        self.field_validation = request.query.get("fieldValidation", "Warn")


def success_status(code: int | None, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A success ``Status``; ``code`` None when the registry set none (it is then not serialised)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    if code is not None:
        body["code"] = code
    return body


def decode_body(request: Request, *, allow_yaml: bool = False) -> Any:
    """JSON by default (the Python client sends no Content-Type); YAML only where the API accepts it."""
    if not request.body:
        raise errors.bad_request("the request body is empty: send a JSON object")
    content_type = request.headers.get("content-type", "application/json").split(";")[0].strip()
    if content_type in ("application/vnd.kubernetes.protobuf", "application/cbor"):
        # kubectl sends protobuf for built-in kinds (create generators, run, auth can-i).
        try:
            return protobuf.decode(request.body)
        except protobuf.Unsupported as exc:
            error = errors.unsupported_media_type(content_type, ["application/json", "application/yaml"])
            error.message += f" (this API emulator cannot decode the protobuf {exc}: send JSON or YAML)"
            raise error from exc
    try:
        if allow_yaml and content_type.endswith("yaml"):
            return yaml.safe_load(request.body)
        return json.loads(request.body)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"json: cannot unmarshal the request body: {exc}") from exc


class ResourceHandlers:
    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.encoded = EncodedObjects()

    # ------------------------------------------------------------------ helpers

    def _present(self, rt: ResourceType, obj: dict[str, Any], *, in_list: bool = False) -> dict[str, Any]:
        """The object as the client sees it through ``rt``'s version (a copy when it must change)."""
        return strategy_for(rt).present(self, rt, obj, in_list=in_list)

    def namespace_active(self, namespace: str) -> bool:
        found = self.store.peek(("", "namespaces"), "", namespace)
        return found is not None and not (found.get("metadata") or {}).get("deletionTimestamp")

    def service_account(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.peek(("", "serviceaccounts"), namespace, name)

    def admit_to_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        """The NamespaceLifecycle admission plugin on a CREATE (subresources too: an eviction, a
        binding), before the REST or validation see it: a missing namespace is 404; a terminating
        one, 403 with the ``NamespaceTerminating`` cause clients look for. ``name``: the request's,
        else the object's (its generateName when it has no name yet)."""
        if not rt.namespaced:
            return
        ns = self.store.peek(("", "namespaces"), "", namespace)
        if ns is None:
            raise errors.not_found("namespaces", "", namespace)
        if (ns.get("status") or {}).get("phase") == "Terminating":
            raise errors.namespace_terminating(rt.plural, rt.group, name or "Unknown", namespace)

    def _unknown_fields(self, ctx: Context, rt: ResourceType, obj: dict[str, Any], op: str) -> None:
        unknown = strategy_for(rt).prune(rt, obj)
        if ctx.field_validation == "Ignore":
            return
        if not unknown:
            return
        if ctx.field_validation == "Strict":
            fields = ", ".join(f'unknown field "{u}"' for u in unknown)
            if op == "patch":
                raise errors.bad_request(f"strict decoding error: {fields}")
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {fields}"
            )
        ctx.warnings.extend(f'unknown field "{u}"' for u in unknown)

    def _type_meta(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f"the server could not find the requested resource: {kind} is not {rt.kind} "
                f"(the body's kind must match the resource posted to)"
            )
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version

    def _to_storage(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The object of a write as stored (custom objects: in the CRD's storage version)."""
        return strategy_for(rt).to_storage(self, rt, obj)

    # ------------------------------------------------------------------ read

    def get(self, t: Target) -> Response:
        obj = self.store.peek(t.rt.key, t.namespace or "", t.name or "")
        if obj is None:
            raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
        return Response(200, self._present(t.rt, obj))

    def list(self, t: Target, request: Request) -> Response:
        """One page (``limit``, ``continue``) of the objects the selectors match, as etcd3's GetList:
        the page starts at its continue key (a range read, not a scan from the first object) and
        selectors fill it as far as ``limit``; ``remainingItemCount`` only for a list without
        selectors, where it is known (ListMeta: "unknown and left unset" with selectors)."""
        try:
            limit = int(request.query.get("limit") or 0)
        except ValueError as exc:
            raise errors.bad_request(f"limit must be an integer: {exc}") from exc
        token = request.query.get("continue")
        after: tuple[str, str] | None = None
        if token:
            try:
                namespace, name = json.loads(base64.urlsafe_b64decode(token.encode()))["start"]
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.bad_request(f"continue key is not valid: {exc}") from exc
            after = (str(namespace), str(name))
        labels, fields = self.parse_selectors(t.rt, request.query)
        stored, rv = self.store.list(t.rt.key, t.namespace, after=after)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        unfiltered = labels.empty and fields.empty
        items: builtins.list[dict[str, Any]] = []
        scanned = 0
        more = False
        for obj in stored:
            if unfiltered or (labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)):
                if limit and len(items) == limit:
                    more = True
                    break
                items.append(obj)
            scanned += 1
        if more:
            last = self._sort_key(items[-1])
            meta["continue"] = base64.urlsafe_b64encode(
                json.dumps({"start": list(last), "rv": rv}).encode()
            ).decode()
            if unfiltered:
                meta["remainingItemCount"] = len(stored) - limit
        items = strategy_for(t.rt).decode_list(self, t.rt, stored[:scanned], items)
        body = {
            "kind": t.rt.list_kind,
            "apiVersion": t.rt.api_version,
            "metadata": meta,
            "items": [self._present(t.rt, o, in_list=True) for o in items],
        }
        return Response(200, body, items_of=kept_as(t.rt))

    @staticmethod
    def _sort_key(obj: dict[str, Any]) -> tuple[str, str]:
        meta = obj["metadata"]
        return (meta.get("namespace") or "", meta["name"])

    def select(self, t: Target, query: dict[str, str]) -> tuple[builtins.list[dict[str, Any]], int]:
        """Objects of ``t`` matching the query's label and field selectors (400 on a bad selector)."""
        labels, fields = self.parse_selectors(t.rt, query)
        items, rv = self.store.list(t.rt.key, t.namespace)
        matched = [o for o in items if labels.matches(o["metadata"].get("labels")) and fields.matches(o)]
        return matched, rv

    def parse_selectors(self, rt: ResourceType, query: dict[str, str]) -> tuple[Any, Any]:
        try:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"), strategy_for(rt).selectable_fields(rt))
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from exc
        return labels, fields

    # ------------------------------------------------------------------ create

    def create(
        self,
        t: Target,
        ctx: Context,
        obj: Any | None = None,
        managed: builtins.list[dict[str, Any]] | None = None,
    ) -> Response:
        """``managed``: the managedFields an apply computed (else the creator owns what it sent)."""
        rt = t.rt
        strategy = strategy_for(rt)
        if obj is None:
            obj = decode_body(ctx.request)
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of a create must be a {rt.kind} object")
        self._type_meta(rt, obj)
        strategy.check_create_allowed(self, rt)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and t.namespace and body_ns != t.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = t.namespace or body_ns or "default"
        else:
            meta.pop("namespace", None)
        self._unknown_fields(ctx, rt, obj, "create")
        self.admit_to_namespace(
            rt, meta.get("namespace", ""), meta.get("name") or meta.get("generateName") or ""
        )
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + admission.random_suffix()
        submitted = copy_json(obj)  # what the creator set, before defaults: the fields it owns
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        name = meta.get("name") or ""
        problems = strategy.validate_name(name)
        if problems:
            raise errors.invalid(rt.kind, rt.group, name, problems)
        meta["uid"] = str(uuid.uuid4())  # before the defaults: a Job's generated selector names it
        strategy.apply_defaults(rt, obj)
        strategy.admit_create(self, rt, obj)
        meta["creationTimestamp"] = admission.now()
        for transient in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(transient, None)
        if rt.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        strategy.prepare_for_create(rt, obj)
        problems = strategy.validate(rt, obj)
        if problems:
            raise errors.invalid(rt.kind, rt.group, name, problems)
        strategy.canonicalize(rt, obj)
        self._call_webhooks(t, ctx, "CREATE", obj, None)
        if managed is None:
            managed = managedfields.record_update(
                None, submitted, self._manager(ctx), rt.api_version, rt.schema, now=admission.now()
            )
        if managed:
            meta["managedFields"] = managed
        else:
            meta.pop("managedFields", None)
        obj = self._to_storage(rt, obj)
        meta = obj["metadata"]
        with self.store.lock:
            if self.store.peek(rt.key, meta.get("namespace", ""), name) is not None:
                raise errors.already_exists(rt.plural, rt.group, name)
            strategy.begin_create(self, obj)
            if ctx.dry_run:
                stored = copy_json(obj)
            else:
                stored = self.store.write(rt.key, obj)
                strategy.after_create(self, stored)
        return Response(201, self._present(rt, stored))

    # ------------------------------------------------------------------ update / patch

    def update(self, t: Target, ctx: Context) -> Response:
        obj = decode_body(ctx.request)
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the body of an update must be a {t.rt.kind} object")
        name = (obj.get("metadata") or {}).get("name")
        if name and name != t.name:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name on the URL ({t.name})"
            )

        def attempt(old: dict[str, Any] | None) -> Response | _Update:
            if old is None:
                raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
            return self._prepare_update(t, ctx, copy_json(obj), old, "update")

        return self._guaranteed_update(t, ctx, attempt)

    def patch(self, t: Target, ctx: Context) -> Response:
        rt = t.rt
        content_type = ctx.request.headers.get("content-type", "").split(";")[0].strip()
        accepted = [patching.JSON_PATCH, patching.MERGE_PATCH]
        if strategy_for(rt).strategic_merge_patch:
            accepted.append(patching.STRATEGIC_MERGE_PATCH)
        accepted.append(patching.APPLY_PATCH)
        if content_type not in accepted:
            raise errors.unsupported_media_type(content_type, accepted)
        body = decode_body(ctx.request, allow_yaml=content_type == patching.APPLY_PATCH)

        def attempt(old: dict[str, Any] | None) -> Response | _Update:
            if content_type == patching.APPLY_PATCH:
                return self._server_side_apply(t, ctx, body, old)
            if old is None:
                raise errors.not_found(rt.plural, rt.group, t.name or "")
            current = self._present(rt, old)
            try:
                if content_type == patching.JSON_PATCH:
                    patched = patching.json_patch(current, body)
                elif content_type == patching.MERGE_PATCH:
                    if not isinstance(body, dict):
                        raise patching.PatchError("merge patch must be a JSON object", bad_request=True)
                    patched = patching.merge_patch(current, body)
                else:
                    patched = patching.strategic_merge_patch(current, body)
            except patching.PatchError as exc:
                if exc.bad_request:
                    raise errors.bad_request(str(exc)) from exc
                raise ApiError(422, "Invalid", str(exc), {}) from exc
            if not isinstance(patched, dict):
                raise ApiError(422, "Invalid", "the patched document is not an object", {})
            return self._prepare_update(t, ctx, patched, old, "patch", presented_old=current)

        return self._guaranteed_update(t, ctx, attempt)

    def _server_side_apply(
        self, t: Target, ctx: Context, body: Any, old: dict[str, Any] | None
    ) -> Response | _Update:
        """Server-side apply: field ownership, conflicts (``force``), removal of fields no longer applied."""
        if not isinstance(body, dict):
            raise errors.bad_request("an apply patch must be an object")
        manager = ctx.request.query.get("fieldManager")
        if not manager:
            raise errors.invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                [FieldError.required("fieldManager", "is required for apply patch")],
            )
        rt = t.rt
        self._type_meta(rt, body)
        force = ctx.request.query.get("force") in ("true", "1")
        live = None if old is None else self._present(rt, old)
        try:
            merged, managed = managedfields.apply(
                live,
                body,
                manager,
                rt.api_version,
                rt.schema,
                now=admission.now(),
                force=force,
                subresource=t.subresource or "",
            )
        except managedfields.Conflict as conflict:
            details = {"name": t.name or "", "kind": rt.plural, "causes": conflict.causes()}
            if rt.group:
                details["group"] = rt.group
            raise ApiError(409, "Conflict", conflict.message(), details) from conflict
        if old is None:
            merged.setdefault("metadata", {})["name"] = t.name
            if rt.namespaced:
                merged["metadata"].setdefault("namespace", t.namespace)
            return self.create(t, ctx, merged, managed=managed)
        return self._prepare_update(t, ctx, merged, old, "patch", managed=managed, presented_old=live)

    @staticmethod
    def _manager(ctx: Context) -> str:
        return managedfields.manager_of(ctx.request.query, ctx.request.headers.get("user-agent", ""))

    def _guaranteed_update(
        self, t: Target, ctx: Context, attempt: Callable[[dict[str, Any] | None], Response | _Update]
    ) -> Response:
        """kube-apiserver's GuaranteedUpdate: ``attempt`` builds and validates the new object from
        what is stored (under the store lock); the validating webhooks are called with no lock held,
        as kube-apiserver calls them with nothing but the request waiting (a slow webhook costs its
        caller, never the other clients); the write then lands only if the object is still the one
        the attempt started from, else the attempt runs again on what is stored now (webhooks
        included), as an etcd precondition failure makes kube-apiserver retry."""
        while True:
            with self.store.lock:
                outcome = attempt(self.store.get(t.rt.key, t.namespace or "", t.name or ""))
                if isinstance(outcome, Response):
                    return outcome
                configurations, _ = self.store.list(webhooks.CONFIGURATIONS)
                if not configurations:
                    return self._finish_update(outcome)
            admitted = outcome.admitted
            if admitted is None:
                self._call_webhooks(t, ctx, "UPDATE", outcome.new, outcome.old)
            else:
                self._call_webhooks(t, ctx, "UPDATE", admitted.new, admitted.old, kind=admitted.kind)
            with self.store.lock:
                current = self.store.peek(t.rt.key, t.namespace or "", t.name or "")
                started_from = outcome.stored_old["metadata"]["resourceVersion"]
                if current is not None and current["metadata"]["resourceVersion"] == started_from:
                    return self._finish_update(outcome)

    def _prepare_update(
        self,
        t: Target,
        ctx: Context,
        new: dict[str, Any],
        old: dict[str, Any],
        op: str,
        *,
        managed: builtins.list[dict[str, Any]] | None = None,
        presented_old: dict[str, Any] | None = None,
    ) -> _Update:
        """Validate ``new`` over ``old`` (caller holds the store lock): what the webhooks are then
        asked about and :meth:`_finish_update` stores. ``old`` is as stored; ``new`` and everything
        compared with it are in the request's version (``presented_old``, when the caller converted
        ``old`` already)."""
        rt = t.rt
        strategy = strategy_for(rt)
        stored_old = old
        old = presented_old if presented_old is not None else self._present(rt, old)
        self._type_meta(rt, new)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        old_meta = old["metadata"]
        if meta.get("name") not in (None, old_meta["name"]):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                f"({old_meta['name']})"
            )
        if rt.namespaced and meta.get("namespace") not in (None, "", old_meta.get("namespace")):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        rv = meta.get("resourceVersion")
        if not rv:
            if not rt.allow_unconditional_update:
                # Store.Update names the resource, not the kind, in this one error.
                raise errors.invalid(
                    rt.plural,
                    rt.group,
                    old_meta["name"],
                    [
                        FieldError.invalid(
                            "metadata.resourceVersion",
                            errors.GoLiteral("0x0"),
                            "must be specified for an update",
                        )
                    ],
                )
        elif rv != old_meta["resourceVersion"]:
            raise errors.stale(rt.plural, rt.group, old_meta["name"])
        uid = meta.get("uid")
        if uid and uid != old_meta.get("uid"):
            raise self._precondition_failed(
                rt,
                old,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta.get('uid')}",
            )
        self._unknown_fields(ctx, rt, new, op)
        meta = new["metadata"]
        strategy.apply_defaults(rt, new)
        new = strategy.prepare_for_update(rt, new, old, t.subresource)
        meta = new["metadata"]
        # Fields only the server sets.
        meta["name"] = old_meta["name"]
        if rt.namespaced:
            meta["namespace"] = old_meta.get("namespace")
        for kept in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
            else:
                meta.pop(kept, None)
        if old_meta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
            if added:
                raise errors.invalid(
                    rt.kind,
                    rt.group,
                    old_meta["name"],
                    [
                        FieldError.forbidden(
                            "metadata.finalizers",
                            "no new finalizers can be added if the object is being deleted, "
                            "found new finalizers " + "[]string{" + ", ".join(f'"{f}"' for f in added) + "}",
                        )
                    ],
                )
        if not meta.get("finalizers"):
            meta.pop("finalizers", None)
        if rt.has_generation and strategy.spec_changed(rt, new, old, t.subresource):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        problems = strategy.validate_update(rt, new, old, t.subresource, ctx.warnings)
        if problems:
            raise errors.invalid(rt.kind, rt.group, old_meta["name"], problems)
        return _Update(t, ctx, new, old, stored_old, managed)

    def _finish_update(self, update: _Update) -> Response:
        """Store what :meth:`_prepare_update` validated and the webhooks allowed (store lock held)."""
        t, ctx, new, old, stored_old, managed = (
            update.t,
            update.ctx,
            update.new,
            update.old,
            update.stored_old,
            update.managed,
        )
        rt = t.rt
        strategy = strategy_for(rt)
        meta, old_meta = new["metadata"], old["metadata"]
        strategy.canonicalize(rt, new)
        if managed is None:
            managed = managedfields.record_update(
                old,
                new,
                self._manager(ctx),
                rt.api_version,
                rt.schema,
                now=admission.now(),
                subresource=t.subresource or "",
            )
        if managed:
            meta["managedFields"] = managed
        else:
            meta.pop("managedFields", None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        new = self._to_storage(rt, new)
        meta = new["metadata"]
        if new == stored_old or ctx.dry_run:
            return Response(200, self._present(rt, new))
        if strategy.should_delete_during_update(new):
            # Store.deleteWithoutFinalizers: "clients are expecting an updated object if a PUT
            # succeeded": the answer is the object of the request (finalizers gone), not a Status.
            gone = self.store.remove(rt.key, meta.get("namespace") or "", meta["name"])
            self._after_remove(rt, gone)
            return Response(200, self._present(rt, new))
        stored = self.store.write(rt.key, new)
        strategy.after_update(self, stored)
        return Response(200, self._present(rt, stored))

    def _call_webhooks(
        self,
        t: Target,
        ctx: Context,
        operation: str,
        new: dict[str, Any],
        old: dict[str, Any] | None,
        *,
        kind: dict[str, str] | None = None,
    ) -> None:
        """The validating admission webhooks (sandbox/apiserver/webhooks.py) of this write."""
        configurations, _ = self.store.list(webhooks.CONFIGURATIONS)
        if not configurations:
            return
        namespace = (new.get("metadata") or {}).get("namespace") or ""
        identity = getattr(ctx.request, "identity", None)
        webhooks.validate(
            configurations,
            t.rt,
            t.subresource,
            operation,
            new=new,
            old=old,
            namespace=self.store.peek(("", "namespaces"), "", namespace) if namespace else None,
            user=identity.user if identity is not None else "",
            dry_run=ctx.dry_run,
            kind=kind,
        )

    # ------------------------------------------------------------------ delete

    def delete_options(self, ctx: Context) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if ctx.request.body:
            try:
                parsed = json.loads(ctx.request.body)
            except ValueError as exc:
                raise errors.bad_request(f"invalid DeleteOptions: {exc}") from exc
            if isinstance(parsed, dict):
                options = parsed
        query = ctx.request.query
        if "gracePeriodSeconds" in query:
            try:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError as exc:
                raise errors.bad_request(f"gracePeriodSeconds must be an integer: {exc}") from exc
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if (options.get("dryRun") or []) == ["All"]:
            ctx.dry_run = True
        validate_delete_options(options)
        return options

    def delete(self, t: Target, ctx: Context, options: dict[str, Any] | None = None) -> Response:
        if options is None:
            options = self.delete_options(ctx)
        with self.store.lock:
            obj = self.store.get(t.rt.key, t.namespace or "", t.name or "")
            if obj is None:
                raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
            return self.delete_locked(t.rt, obj, options, ctx.dry_run)

    def delete_locked(
        self, rt: ResourceType, obj: dict[str, Any], options: dict[str, Any], dry_run: bool = False
    ) -> Response:
        """Delete ``obj`` (a private copy of the stored one): its preconditions, then the kind's
        delete (the generic :meth:`store_delete` unless its REST has its own)."""
        meta = obj["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise self._precondition_failed(
                rt,
                obj,
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {meta.get('uid')}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != meta.get("resourceVersion"):
            raise self._precondition_failed(
                rt,
                obj,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
            )
        return Response(200, strategy_for(rt).delete(self, rt, obj, options, dry_run))

    def store_delete(
        self, rt: ResourceType, obj: dict[str, Any], options: dict[str, Any], dry_run: bool
    ) -> dict[str, Any]:
        """The registry Store.Delete, honouring finalizers and graceful deletion: an object with
        finalizers left or a grace period is marked (deletionTimestamp) and stays; else it goes."""
        strategy = strategy_for(rt)
        meta = obj["metadata"]
        namespace = meta.get("namespace") or ""
        period = strategy.check_graceful_delete(obj, options)
        grace = period or 0
        finalizers = strategy.deletion_finalizers(obj, options)
        if finalizers:
            meta["finalizers"] = finalizers
        if grace > 0 or meta.get("finalizers"):
            current = meta.get("deletionGracePeriodSeconds")
            if meta.get("deletionTimestamp") and current is not None and current <= grace:
                return self._present(rt, obj)  # already terminating, no sooner
            stamp = admission.cluster_now() + timedelta(seconds=grace)
            if not meta.get("deletionTimestamp") or grace < (current or 0):
                meta["deletionTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["deletionGracePeriodSeconds"] = grace
            if meta.get("generation"):
                meta["generation"] = int(meta["generation"]) + 1
            if dry_run:
                return self._present(rt, obj)
            if grace == 0 and not meta.get("finalizers"):
                gone = self.store.remove(rt.key, namespace, meta["name"])
                self._after_remove(rt, gone)
                return self._deleted_body(rt, gone)
            return self._present(rt, self.store.write(rt.key, obj))
        if dry_run:
            return self._deleted_body(rt, obj)
        if period is not None and meta.get("deletionGracePeriodSeconds") != 0:
            # A graceful delete at grace 0: watchers see MODIFIED (deletionTimestamp, grace 0) and
            # then DELETED.
            meta.setdefault("deletionTimestamp", admission.now())
            meta["deletionGracePeriodSeconds"] = 0
            self.store.write(rt.key, obj)
        gone = self.store.remove(rt.key, namespace, meta["name"])
        self._after_remove(rt, gone)
        return self._deleted_body(rt, gone)

    @staticmethod
    def _precondition_failed(rt: ResourceType, obj: dict[str, Any], why: str) -> errors.ApiError:
        meta = obj["metadata"]
        key = errors.storage_key(
            rt.plural, rt.group, meta.get("namespace") or "", meta["name"], custom=rt.custom
        )
        return errors.precondition_failed(rt.plural, rt.group, meta["name"], key, why)

    def _deleted_body(self, rt: ResourceType, gone: dict[str, Any] | None) -> dict[str, Any]:
        """What a DELETE that removed the object answers: the object for the registries that set
        ``ReturnDeletedObject`` (pods, CRDs...), else a ``Status`` naming it (custom resources included:
        the apiextensions-apiserver's store does not set it)."""
        if gone is None:
            return success_status(200)
        if strategy_for(rt).return_deleted_object:
            return self._present(rt, gone)
        meta = gone["metadata"]
        group = {"group": rt.group} if rt.group else {}
        # The registry's finalizeDelete sets no code (an audit log's responseObject shows the same body).
        details = {"name": meta["name"], **group, "kind": rt.plural, "uid": meta.get("uid")}
        return success_status(None, details)

    def clean_up_deleted_crds(self) -> None:
        """The CRD finalizer controller's pass (the server's housekeeping calls it)."""
        with self.store.lock:
            CRDS.clean_up_deleted(self)

    def _after_remove(self, rt: ResourceType, gone: dict[str, Any] | None) -> None:
        """Store.AfterDelete, once the object is gone (a CRD takes its custom objects and paths)."""
        if gone is not None:
            strategy_for(rt).after_delete(self, gone)

    def delete_collection(self, t: Target, ctx: Context) -> Response:
        options = self.delete_options(ctx)
        with self.store.lock:
            items, rv = self.select(t, ctx.request.query)
            deleted = []
            for item in list(items):
                current = self.store.get(
                    t.rt.key, item["metadata"].get("namespace") or "", item["metadata"]["name"]
                )
                if current is not None:
                    body = self.delete_locked(t.rt, current, options, ctx.dry_run).body
                    if isinstance(body, dict) and body.get("kind") != "Status":
                        deleted.append(self._present(t.rt, body, in_list=True))
        return Response(
            200,
            {
                "kind": t.rt.list_kind,
                "apiVersion": t.rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": deleted,
            },
        )
