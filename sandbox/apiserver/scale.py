"""The ``/scale`` subresource: the autoscaling/v1 Scale view of a kind that serves one, as
kube-apiserver's ScaleREST of each workload (pkg/registry/apps/<kind>/storage) and
apiextensions-apiserver's of custom resources serve it. Each kind's strategy names its ScaleREST
(strategies/, ``scale``).
"""

from __future__ import annotations

import copy
from typing import Any

from . import errors, patching
from .errors import ApiError
from .handlers import Context, ResourceHandlers, Response, Target, decode_body


def workload_scale(handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
    """The ScaleREST of Deployments, ReplicaSets and StatefulSets: their autoscaling/v1 Scale
    (``kubectl scale`` patches it); a new spec.replicas bumps the generation."""
    store = handlers.store
    method = ctx.request.method
    if method == "GET":
        return Response(200, scale_of(handlers.get(t).body))
    if method not in ("PUT", "PATCH"):
        raise errors.method_not_allowed()
    with store.lock:
        current = store.get(t.rt.key, t.namespace or "", t.name or "")
        if current is None:
            raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
        scale = scale_of(current)
        wanted = _requested(ctx, scale, decode_body(ctx.request))
        replicas = ((wanted or {}).get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid(
                "Scale",
                "autoscaling",
                t.name or "",
                [errors.FieldError.invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
            )
        rv = ((wanted.get("metadata") or {}).get("resourceVersion")) if method == "PUT" else None
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise errors.stale(t.rt.plural, t.rt.group, t.name or "")
        if current["spec"].get("replicas") != replicas:
            current["spec"]["replicas"] = replicas
            current["metadata"]["generation"] = int(current["metadata"].get("generation") or 0) + 1
            current = store.write(t.rt.key, current)
    return Response(200, scale_of(current))


def custom_scale(handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
    """A custom resource's Scale, as apiextensions-apiserver's ``ScaleREST`` serves it: read from the
    CRD's replica paths; an update sets ``specReplicasPath`` and stores the custom resource through
    its own update path (schema, CEL rules with ``oldSelf``, generation, webhooks, conflicts)."""
    paths = t.rt.scale_paths
    assert paths is not None  # only a CRD with a scale subresource serves /scale
    method = ctx.request.method
    spec_path = paths[0]
    if method == "GET":
        scale, found = custom_scale_of(handlers.get(t).body, paths)
        if not found:
            raise errors.internal(f'the spec replicas field "{spec_path}" does not exist')
        return Response(200, scale)
    if method not in ("PUT", "PATCH"):
        raise errors.method_not_allowed()
    body = decode_body(ctx.request)

    def attempt(stored: dict[str, Any] | None) -> Any:
        """ScaleREST's update, one GuaranteedUpdate attempt (the store lock held)."""
        if stored is None:
            raise errors.not_found(t.rt.plural, t.rt.group, t.name or "")
        presented = handlers._present(t.rt, stored)
        scale, found = custom_scale_of(presented, paths)
        if not found:
            scale["spec"]["replicas"] = _NO_SPEC_REPLICAS  # ScaleREST's "was not set" sentinel
        wanted = _requested(ctx, scale, body)
        if not isinstance(wanted, dict):
            raise errors.bad_request("the body of a scale update must be a Scale object")
        replicas = (wanted.get("spec") or {}).get("replicas", 0)
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise errors.bad_request(
                "json: cannot unmarshal into Go struct field ScaleSpec.spec.replicas of type int32"
            )
        if replicas == _NO_SPEC_REPLICAS:
            raise errors.bad_request(f'the spec replicas field "{spec_path}" cannot be empty')
        updated = copy.deepcopy(presented)
        target = updated
        *parents, leaf = _split_path(spec_path)
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = replicas
        precondition = (wanted.get("metadata") or {}).get("resourceVersion")
        if precondition:
            updated["metadata"]["resourceVersion"] = precondition
        return handlers._prepare_update(
            t, ctx, updated, stored, "update" if method == "PUT" else "patch", presented_old=presented
        )

    response = handlers._guaranteed_update(t, ctx, attempt)
    scale, _ = custom_scale_of(response.body, paths)
    return Response(200, scale)


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
    meta = workload["metadata"]
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
        "spec": {"replicas": (workload.get("spec") or {}).get("replicas", 0)},
        "status": {"replicas": (workload.get("status") or {}).get("replicas", 0), "selector": labels},
    }
