"""OpenAPI v3 (/openapi/v3) and v2 (/openapi/v2, JSON) with the real schemas, for kubectl.

* kubectl explain reads the v3 document of a group-version and walks its component schemas (named
  as kube-apiserver names them: ``io.k8s.api.core.v1.PodSpec``; a CRD's kind
  ``sh.karpenter.v1.NodePool``), so ``kubectl explain pod.spec.containers`` and
  ``kubectl explain nodepool.spec`` answer with fields, types and descriptions.
* Built-in schemas come from the kubernetes client's generated models (the same OpenAPI the API
  server is built from: field types, required fields, descriptions); definition names from the
  generated.proto package of each type (``k8s_protobuf_schema.json``). A CRD's schema is its
  version's ``openAPIV3Schema`` with ``metadata`` referring to ObjectMeta.
* kubectl apply/create check, per kind, that the PATCH operation accepts ``fieldValidation``; it
  does, so kubectl lets the server reject unknown fields. Strategic merge is not advertised in the
  PATCH content types, so kubectl builds strategic merge patches for built-ins from its
  compiled-in types, whose patch strategies are exact.
* /openapi/v2 answers JSON (``Accept: application/json``); kubectl asks for its protobuf form,
  which is not served (404): its v2-only paths (``explain --output plaintext-openapiv2``) fail.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from typing import Any

from kubernetes.client import models as client_models

from .discovery import VERSION_INFO
from .protoschema import SCHEMA_FILE
from .resources import Registry, ResourceType
from .schema import model_for

_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")
_MODEL_NAME = re.compile(r"^(?:Core|Events)?V(\d+(?:alpha\d+|beta\d+)?)(\w+)$")
_LIST = re.compile(r"^List\[(.+)\]$")
_DICT = re.compile(r"^Dict\[str, (.+)\]$")
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_SCALARS: dict[str, dict[str, Any]] = {
    "str": {"type": "string"},
    "int": {"type": "integer", "format": "int64"},
    "bool": {"type": "boolean"},
    "float": {"type": "number", "format": "double"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "object": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}


@functools.cache
def _proto_names() -> dict[tuple[str, str], list[str]]:
    """(version, type name) → the OpenAPI definition names of the generated.proto types."""
    index: dict[tuple[str, str], list[str]] = {}
    for full in sorted(json.loads(SCHEMA_FILE.read_text())["messages"]):
        parts = full.split(".")
        if len(parts) < 4 or not parts[-2].startswith("v"):
            continue
        index.setdefault((parts[-2], parts[-1]), []).append("io.k8s." + ".".join(parts[2:]))
    return index


def definition_name(model: str) -> str:
    """``V1PodSpec`` → ``io.k8s.api.core.v1.PodSpec`` (core and meta first where names collide)."""
    if model == "CoreV1Event":
        return "io.k8s.api.core.v1.Event"
    if model == "EventsV1Event":
        return "io.k8s.api.events.v1.Event"
    match = _MODEL_NAME.match(model)
    if not match:
        return f"io.k8s.{model}"
    version, name = f"v{match.group(1)}", match.group(2)
    candidates = _proto_names().get((version, name), [])
    preferred = sorted(candidates, key=lambda c: (".api.core." not in c and ".meta." not in c, c))
    return preferred[0] if preferred else f"io.k8s.{model}"


def _model_class(model: str) -> Any:
    return getattr(client_models, model, None)


def _property(type_name: str, refs: set[str], ref_prefix: str) -> dict[str, Any]:
    if match := _LIST.match(type_name):
        return {"type": "array", "items": _property(match.group(1), refs, ref_prefix)}
    if match := _DICT.match(type_name):
        return {"type": "object", "additionalProperties": _property(match.group(1), refs, ref_prefix)}
    if type_name in _SCALARS:
        return dict(_SCALARS[type_name])
    if _model_class(type_name) is not None:
        refs.add(type_name)
        return {"$ref": f"{ref_prefix}{definition_name(type_name)}"}
    return {"type": "object"}


def model_schema(model: str, refs: set[str], ref_prefix: str) -> dict[str, Any]:
    """The schema of one client model; models it refers to are added to ``refs``."""
    cls = _model_class(model)
    doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    properties: dict[str, Any] = {}
    required: list[str] = []
    fields = getattr(cls, "model_fields", {})
    for attribute, type_name in (getattr(cls, "openapi_types", None) or {}).items():
        json_name = cls.attribute_map[attribute]
        prop = _property(type_name, refs, ref_prefix)
        field = fields.get(attribute)
        description = getattr(field, "description", None)
        if description:
            prop = (
                {"allOf": [prop], "description": description}
                if "$ref" in prop
                else {**prop, "description": description}
            )
        properties[json_name] = prop
        if field is not None and field.is_required():
            required.append(json_name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if doc and not doc.startswith("Attributes:"):
        schema["description"] = doc
    if required:
        schema["required"] = required
    return schema


def _closure(models: list[str], ref_prefix: str) -> dict[str, dict[str, Any]]:
    """Schemas of ``models`` and every model they reach, by definition name."""
    out: dict[str, dict[str, Any]] = {}
    queue = list(models)
    seen: set[str] = set()
    while queue:
        model = queue.pop()
        if model in seen:
            continue
        seen.add(model)
        refs: set[str] = set()
        out[definition_name(model)] = model_schema(model, refs, ref_prefix)
        queue.extend(refs - seen)
    return out


def _gvk(rt: ResourceType) -> list[dict[str, str]]:
    return [{"group": rt.group, "version": rt.version, "kind": rt.kind}]


def crd_definition_name(rt: ResourceType) -> str:
    """kube-apiserver's name for a CRD kind: the group reversed, the version, the kind."""
    return ".".join([*reversed(rt.group.split(".")), rt.version, rt.kind])


def _crd_schema(rt: ResourceType, ref_prefix: str) -> dict[str, Any]:
    schema = copy.deepcopy(rt.schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {
        "type": "string",
        "description": "APIVersion defines the versioned schema of this representation of an object.",
    }
    properties["kind"] = {
        "type": "string",
        "description": "Kind is a string value representing the REST resource.",
    }
    properties["metadata"] = {
        "allOf": [{"$ref": f"{ref_prefix}{OBJECT_META}"}],
        "description": "Standard object's metadata.",
    }
    schema["x-kubernetes-group-version-kind"] = _gvk(rt)
    return schema


def schemas(registry: Registry, group: str, version: str, ref_prefix: str) -> dict[str, dict[str, Any]]:
    """Every schema of a group-version's kinds, with what they refer to."""
    resources = registry.resources_of(group, version)
    out: dict[str, dict[str, Any]] = {}
    builtins = [rt for rt in resources if not rt.custom and _model_class(model_for(rt.group, rt.kind))]
    out.update(_closure([model_for(rt.group, rt.kind) for rt in builtins], ref_prefix))
    for rt in builtins:
        out[definition_name(model_for(rt.group, rt.kind))]["x-kubernetes-group-version-kind"] = _gvk(rt)
    custom = [rt for rt in resources if rt.custom]
    if custom:
        out.update(_closure(["V1ObjectMeta"], ref_prefix))
        for rt in custom:
            out[crd_definition_name(rt)] = _crd_schema(rt, ref_prefix)
    return out


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _paths(rt: ResourceType, ref: str) -> dict[str, Any]:
    gvk = _gvk(rt)[0]
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
    schema = {"$ref": ref}
    body = {"content": {t: {"schema": {"type": "object"}} for t in _PATCH_TYPES}, "required": True}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}}
    return {
        item: {
            "get": {
                "operationId": f"read{rt.kind}",
                "responses": ok,
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": gvk,
            },
            "patch": {
                "operationId": f"patch{rt.kind}",
                "parameters": params,
                "requestBody": body,
                "responses": ok,
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
            },
            "put": {
                "operationId": f"replace{rt.kind}",
                "parameters": params,
                "responses": ok,
                "x-kubernetes-action": "put",
                "x-kubernetes-group-version-kind": gvk,
            },
        },
        item.rsplit("/", 1)[0]: {
            "post": {
                "operationId": f"create{rt.kind}",
                "parameters": params,
                "responses": {
                    "201": {"description": "Created", "content": {"application/json": {"schema": schema}}}
                },
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk,
            }
        },
    }


def _kind_ref(rt: ResourceType, ref_prefix: str) -> str:
    name = crd_definition_name(rt) if rt.custom else definition_name(model_for(rt.group, rt.kind))
    return f"{ref_prefix}{name}"


def group_version_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    resources = registry.resources_of(group, version)
    if not resources:
        return None
    prefix = "#/components/schemas/"
    paths: dict[str, Any] = {}
    for rt in resources:
        # The reviews get a PATCH too, unlike kube-apiserver's: kubectl looks for fieldValidation on
        # a kind's PATCH, and without one falls back to /openapi/v2 as protobuf, not served here.
        paths.update(_paths(rt, _kind_ref(rt, prefix)))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas(registry, group, version, prefix)},
    }


def _group_versions(registry: Registry) -> list[tuple[str, str]]:
    return [("", "v1")] + [(g, v) for g, vs in registry.group_versions() for v in vs]


def index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, version in _group_versions(registry):
        doc = group_version_document(registry, group, version)
        if doc is None:
            continue
        digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest().upper()[:64]
        path = _gv_path(group, version)
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": paths}


def swagger(registry: Registry) -> dict[str, Any]:
    """/openapi/v2 as JSON: every group-version's definitions in one Swagger 2.0 document."""
    prefix = "#/definitions/"
    definitions: dict[str, Any] = {}
    for group, version in _group_versions(registry):
        definitions.update(schemas(registry, group, version, prefix))
    text = json.dumps(definitions).replace('"#/components/schemas/', f'"{prefix}')
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": VERSION_INFO["gitVersion"]},
        "paths": {},
        "definitions": json.loads(text),
    }
