"""A minimal OpenAPI v3 (/openapi/v3): enough for kubectl to know the server validates fields.

kubectl apply/create check, per kind, that the PATCH operation accepts the ``fieldValidation`` query
parameter; when it does, kubectl sends ``fieldValidation=Strict`` and lets the server reject unknown
fields instead of downloading /openapi/v2 (protobuf) to validate on the client. Strategic merge is not
advertised, so kubectl builds its apply patches from its compiled-in types (built-ins) or as JSON merge
patches (custom resources), as it does against any server whose v3 document lacks the schemas.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .resources import Registry, ResourceType

_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _paths(rt: ResourceType) -> dict[str, Any]:
    gvk = [{"group": rt.group, "version": rt.version, "kind": rt.kind}]
    base = "/" + _gv_path(rt.group, rt.version)
    item = (
        f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}"
        if rt.namespaced
        else f"{base}/{rt.plural}/{{name}}"
    )
    params = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        for name in ("dryRun", "fieldManager", "fieldValidation", "force")
    ]
    body = {"content": {t: {"schema": {"type": "object"}} for t in _PATCH_TYPES}, "required": True}
    return {
        item: {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "parameters": params,
                "requestBody": body,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk[0],
            },
            "put": {
                "operationId": f"replace{rt.kind}",
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "put",
                "x-kubernetes-group-version-kind": gvk[0],
            },
        },
        item.rsplit("/", 1)[0]: {
            "post": {
                "operationId": f"create{rt.kind}",
                "parameters": params,
                "responses": {"201": {"description": "Created"}},
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk[0],
            }
        },
    }


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    resources = registry.resources_of(group, version)
    if not resources:
        return None
    paths: dict[str, Any] = {}
    for rt in resources:
        paths.update(_paths(rt))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.4"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    gvs = [("", "v1")] + [(g, v) for g, vs in registry.group_versions() for v in vs]
    for group, version in gvs:
        doc = group_version_document(registry, group, version)
        if doc is None:
            continue
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()[:64]
        path = _gv_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}
