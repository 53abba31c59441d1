"""The ``/scale`` subresource: the autoscaling/v1 Scale view of a kind that serves one, as
kube-apiserver's ScaleREST of each workload (pkg/registry/apps/<kind>/storage) and
apiextensions-apiserver's of custom resources serve it. Each kind's strategy names its ScaleREST
(strategies/, ``scale``).
"""

from __future__ import annotations

import copy
from typing import Any

from . import admission, errors, managedfields, patching
from .errors import ApiError
from .handlers import Admitted, Context, ResourceHandlers, Response, Target, _Update, decode_body
from .resources import ResourceType

# The kind admission is asked about on a /scale write (toScaleUpdateValidation).
SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}


def workload_scale(handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
    """The ScaleREST of Deployments, ReplicaSets and StatefulSets: their autoscaling/v1 Scale
    (``kubectl scale`` patches it)."""
    if ctx.request.method == "GET":
        return Response(200, scale_of(handlers.get(t).body))
    return _update(handlers, t, ctx)


def custom_scale(handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
    """A custom resource's Scale, as apiextensions-apiserver's ``ScaleREST`` serves it: read from the
    CRD's replica paths; an update sets ``specReplicasPath``."""
    paths = t.rt.scale_paths
    assert paths is not None  # only a CRD with a scale subresource serves /scale
    if ctx.request.method == "GET":
        scale, found = custom_scale_of(handlers.get(t).body, paths)
        if not found:
            raise errors.internal(f'the spec replicas field "{paths[0]}" does not exist')
        return Response(200, scale)
    return _update(handlers, t, ctx)


def _update(handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
    """A PUT or PATCH of the Scale, as both ScaleRESTs do it: the Scale asked for becomes an update
    of the parent through the parent's own update (``scaleUpdatedObjectInfo``): its preconditions,
    strategy (generation, status kept), validation, dry run and GuaranteedUpdate; the field manager
    runs on the Scale and gives the parent's replicas to the scaler (``ScaleHandler``); admission is
    asked about the old and new Scales, on the ``scale`` subresource."""
    method = ctx.request.method
    if method not in ("PUT", "PATCH"):
        raise errors.method_not_allowed()
    rt = t.rt
    custom = rt.scale_paths is not None
    spec_path = rt.scale_paths[0] if rt.scale_paths else ".spec.replicas"
    replicas_path = managedfields.replicas_path(spec_path)
    body = decode_body(ctx.request)
    parent = Target(rt, t.namespace, t.name, None)  # the parent's strategy, as its store's Update runs it

    def attempt(stored: dict[str, Any] | None) -> _Update:
        """One GuaranteedUpdate attempt (the store lock held)."""
        if stored is None:
            raise errors.not_found(rt.plural, rt.group, t.name or "")
        presented = handlers._present(rt, stored)
        parent_entries = presented["metadata"].get("managedFields") or []
        old_scale, found = _scale(rt, presented)
        if not found:
            old_scale["spec"]["replicas"] = _NO_SPEC_REPLICAS  # ScaleREST's "was not set" sentinel
        scale_entries = managedfields.to_scale(parent_entries, replicas_path)
        if scale_entries:
            old_scale["metadata"]["managedFields"] = scale_entries
        wanted = _requested(ctx, old_scale, body)
        if not isinstance(wanted, dict):
            raise errors.bad_request("the body of a scale update must be a Scale object")
        meta = wanted.get("metadata") or {}
        if meta.get("name") not in (None, "", t.name):
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({t.name})"
            )
        replicas = (wanted.get("spec") or {}).get("replicas", 0)  # omitempty: absent is 0
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise errors.bad_request(
                "json: cannot unmarshal into Go struct field ScaleSpec.spec.replicas of type int32"
            )
        updated = copy.deepcopy(presented)
        if custom:
            if replicas == _NO_SPEC_REPLICAS:
                raise errors.bad_request(f'the spec replicas field "{spec_path}" cannot be empty')
            if meta.get("resourceVersion"):  # a precondition only when the client gave one
                updated["metadata"]["resourceVersion"] = meta["resourceVersion"]
        else:
            _validate_scale(t, replicas)
            uid = meta.get("uid")
            if uid and uid != presented["metadata"].get("uid"):
                raise errors.conflict(
                    f"{rt.plural}/scale",
                    rt.group,
                    t.name or "",
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {presented['metadata'].get('uid')}",
                )
            # The Scale's resourceVersion is the parent's precondition: none, an unconditional update.
            updated["metadata"].pop("resourceVersion", None)
            if meta.get("resourceVersion"):
                updated["metadata"]["resourceVersion"] = meta["resourceVersion"]
        target = updated
        for _, part in replicas_path[:-1]:
            target = target.setdefault(part, {})
        target[replicas_path[-1][1]] = replicas
        recorded = managedfields.record_update(
            old_scale,
            wanted,
            handlers._manager(ctx),
            managedfields.SCALE_API_VERSION,
            None,
            now=admission.now(),
            subresource="scale",
        )
        managed = managedfields.from_scale(parent_entries, recorded, replicas_path, rt.api_version)
        op = "update" if method == "PUT" else "patch"
        update = handlers._prepare_update(
            parent, ctx, updated, stored, op, managed=managed, presented_old=presented
        )
        update.admitted = Admitted(SCALE_KIND, _scale(rt, update.new)[0], _scale(rt, update.old)[0])
        return update

    response = handlers._guaranteed_update(t, ctx, attempt)
    return Response(200, _scale(rt, response.body)[0])


def _validate_scale(t: Target, replicas: int) -> None:
    """ValidateScale (the workloads' ScaleREST; a custom resource's schema has its own say)."""
    if replicas < 0:
        raise errors.invalid(
            "Scale",
            "autoscaling",
            t.name or "",
            [errors.FieldError.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
        )


def _scale(rt: ResourceType, obj: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The Scale of ``obj`` (as the client sees it), and whether its spec replicas are set."""
    if rt.scale_paths is not None:
        return custom_scale_of(obj, rt.scale_paths)
    return scale_of(obj), True


def _requested(ctx: Context, scale: dict[str, Any], body: Any) -> Any:
    """The Scale an update asks for: a PUT's body, or the PATCH (JSON patch, else merge patch)
    applied to the current ``scale``; a patch that cannot apply is a 422."""
    if ctx.request.method == "PUT":
        return body
    content_type = ctx.request.headers.get("content-type", "").split(";")[0].strip()
    try:
        if content_type == patching.JSON_PATCH:
            return patching.json_patch(scale, body)
        return patching.merge_patch(scale, body)
    except patching.PatchError as exc:
        raise ApiError(422, "Invalid", str(exc), {}) from exc


_NO_SPEC_REPLICAS = -2147483648  # the smallest int32: ScaleREST's mark of a Scale without spec replicas


def _split_path(path: str) -> list[str]:
    return path.removeprefix(".").split(".")


def _nested(obj: Any, path: str) -> Any:
    for part in _split_path(path):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def custom_scale_of(cr: dict[str, Any], paths: tuple[str, str, str]) -> tuple[dict[str, Any], bool]:
    """The autoscaling/v1 Scale of a custom resource (``scaleFromCustomResource``), and whether its
    ``specReplicasPath`` holds a value. A missing status replicas is 0, a missing selector omitted."""
    spec_path, status_path, selector_path = paths
    meta = cr.get("metadata") or {}
    spec_replicas = _nested(cr, spec_path)
    found = isinstance(spec_replicas, int) and not isinstance(spec_replicas, bool)
    status_replicas = _nested(cr, status_path)
    status: dict[str, Any] = {"replicas": status_replicas if isinstance(status_replicas, int) else 0}
    selector = _nested(cr, selector_path) if selector_path else None
    if isinstance(selector, str) and selector:
        status["selector"] = selector
    metadata = {
        key: meta[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if meta.get(key)
    }
    # ScaleSpec.replicas is omitempty: a Scale of 0 replicas has an empty spec.
    spec = {"replicas": spec_replicas} if found and spec_replicas else {}
    scale = {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata, "spec": spec}
    return {**scale, "status": status}, found


def scale_of(workload: dict[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale of a workload (``scaleFromDeployment`` and its siblings)."""
    meta = workload["metadata"]
    replicas = (workload.get("spec") or {}).get("replicas", 0)
    selector = (workload.get("spec") or {}).get("selector") or {}
    labels = ",".join(f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items()))
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": replicas} if replicas else {},  # ScaleSpec.replicas is omitempty
        "status": {"replicas": (workload.get("status") or {}).get("replicas", 0), "selector": labels},
    }
