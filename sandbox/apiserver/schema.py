"""Unknown-field pruning, structural defaulting and validation against schemas.

Built-in kinds use the field lists of the kubernetes client's generated models (the same OpenAPI the
API server is built from); custom resources use their CRD's structural ``openAPIV3Schema``. Unknown
fields are dropped and reported (the handler turns them into ``Warning`` headers, or a 400 under
``fieldValidation=Strict``), as kube-apiserver does.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
from typing import Any

from kubernetes.client import models as client_models

from .errors import FieldError

log = logging.getLogger(__name__)

_MODEL_OVERRIDES = {("", "Event"): "CoreV1Event", ("events.k8s.io", "Event"): "EventsV1Event"}
_LIST_RE = re.compile(r"^List\[(.+)\]$")
_DICT_RE = re.compile(r"^Dict\[str, (.+)\]$")


@functools.cache
def _fields(model_name: str) -> dict[str, str] | None:
    """json field name -> client type string, or None when ``model_name`` is not a model."""
    model = getattr(client_models, model_name, None)
    types = getattr(model, "openapi_types", None)
    if not isinstance(types, dict):
        return None
    attribute_map = model.attribute_map
    return {attribute_map[attr]: kind for attr, kind in types.items()}


def model_for(group: str, kind: str) -> str:
    return _MODEL_OVERRIDES.get((group, kind), f"V1{kind}")


def prune_builtin(obj: dict[str, Any], group: str, kind: str) -> list[str]:
    """Drop fields the built-in kind does not define; return their dotted paths."""
    unknown: list[str] = []
    _prune_model(obj, model_for(group, kind), "", unknown)
    return unknown


def _prune_model(value: Any, type_name: str, path: str, unknown: list[str]) -> None:
    if value is None:
        return
    if match := _LIST_RE.match(type_name):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _prune_model(item, match.group(1), f"{path}[{i}]", unknown)
        return
    if match := _DICT_RE.match(type_name):
        if isinstance(value, dict):
            for key, item in value.items():
                _prune_model(item, match.group(1), f"{path}.{key}" if path else key, unknown)
        return
    fields = _fields(type_name)
    if fields is None or not isinstance(value, dict):
        return
    for key in list(value):
        child = f"{path}.{key}" if path else key
        if key not in fields:
            unknown.append(child)
            del value[key]
        else:
            _prune_model(value[key], fields[key], child, unknown)


def prune_metadata(obj: dict[str, Any], unknown: list[str]) -> None:
    if isinstance(obj.get("metadata"), dict):
        _prune_model(obj["metadata"], "V1ObjectMeta", "metadata", unknown)


# ------------------------------------------------------------------------ structural schemas


def prune_custom(obj: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
    """Structural pruning of a custom object (apiVersion, kind, metadata always kept)."""
    unknown: list[str] = []
    prune_metadata(obj, unknown)
    if not schema:
        return unknown
    props = schema.get("properties") or {}
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        for key, sub in props.items():
            if key in obj and key not in ("apiVersion", "kind", "metadata"):
                _prune_schema(obj[key], sub, key, unknown)
        return unknown
    for key in list(obj):
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key not in props:
            unknown.append(key)
            del obj[key]
        else:
            _prune_schema(obj[key], props[key], key, unknown)
    return unknown


def _prune_schema(value: Any, schema: dict[str, Any], path: str, unknown: list[str]) -> None:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-embedded-resource"):
            prune_metadata(value, unknown)
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        embedded = schema.get("x-kubernetes-embedded-resource")
        for key in list(value):
            child = f"{path}.{key}"
            if props and key in props:
                _prune_schema(value[key], props[key], child, unknown)
            elif isinstance(additional, dict):
                _prune_schema(value[key], additional, child, unknown)
            elif preserve or additional is True or (embedded and key in ("apiVersion", "kind", "metadata")):
                continue
            else:
                unknown.append(child)
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _prune_schema(item, schema["items"], f"{path}[{i}]", unknown)


def apply_defaults(obj: Any, schema: dict[str, Any] | None) -> None:
    """Structural defaulting: set each absent property that has a ``default`` (recursively)."""
    if not schema or not isinstance(obj, dict):
        if schema and isinstance(obj, list) and isinstance(schema.get("items"), dict):
            for item in obj:
                apply_defaults(item, schema["items"])
        return
    for key, sub in (schema.get("properties") or {}).items():
        if key == "metadata" and "apiVersion" in obj:
            continue
        if key not in obj and "default" in sub:
            obj[key] = copy.deepcopy(sub["default"])
        if key in obj:
            apply_defaults(obj[key], sub)
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        for key, value in obj.items():
            if key not in (schema.get("properties") or {}):
                apply_defaults(value, additional)


_TYPE_CHECKS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def validate_custom(obj: dict[str, Any], schema: dict[str, Any] | None) -> list[FieldError]:
    """The OpenAPI v3 checks kube-apiserver runs on custom objects (CEL rules are not evaluated)."""
    if not schema:
        return []
    errors: list[FieldError] = []
    props = schema.get("properties") or {}
    for key, sub in props.items():
        if key in ("metadata", "apiVersion", "kind"):
            continue
        if key in obj:
            _validate(obj[key], sub, key, errors)
    for key in schema.get("required") or []:
        if key not in obj:
            errors.append(FieldError.required(key))
    return errors


def _validate(value: Any, schema: dict[str, Any], path: str, errors: list[FieldError]) -> None:
    if value is None:
        if not schema.get("nullable"):
            errors.append(
                FieldError.type_invalid(
                    path, None, f'{path} in body must be of type {schema.get("type", "object")}: "null"'
                )
            )
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            errors.append(
                FieldError.type_invalid(
                    path, value, f'{path} in body must be of type integer,string: "{_json_type(value)}"'
                )
            )
        return
    kind = schema.get("type")
    if kind and kind in _TYPE_CHECKS and not _TYPE_CHECKS[kind](value):
        errors.append(
            FieldError.type_invalid(
                path, _json_type(value), f'{path} in body must be of type {kind}: "{_json_type(value)}"'
            )
        )
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(FieldError.unsupported(path, value, [str(e) for e in schema["enum"]]))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and (
            value < schema["minimum"] or (schema.get("exclusiveMinimum") and value == schema["minimum"])
        ):
            errors.append(
                FieldError.invalid(
                    path, value, f"{path} in body should be greater than or equal to {schema['minimum']}"
                )
            )
        if "maximum" in schema and (
            value > schema["maximum"] or (schema.get("exclusiveMaximum") and value == schema["maximum"])
        ):
            errors.append(
                FieldError.invalid(
                    path, value, f"{path} in body should be less than or equal to {schema['maximum']}"
                )
            )
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                FieldError.invalid(
                    path, value, f"{path} in body should be at least {schema['minLength']} chars long"
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                FieldError.invalid(
                    path, value, f"{path} in body may not be longer than {schema['maxLength']}"
                )
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(
                FieldError.invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
            )
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(
                FieldError.invalid(
                    path, len(value), f"{path} in body should have at least {schema['minItems']} items"
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(
                FieldError(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                )
            )
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _validate(item, items, f"{path}[{i}]", errors)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                errors.append(FieldError.required(f"{path}.{key}"))
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                _validate(item, props[key], f"{path}.{key}", errors)
            elif isinstance(additional, dict):
                _validate(item, additional, f"{path}.{key}", errors)
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(
                FieldError(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                )
            )
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            errors.append(
                FieldError.invalid(
                    path,
                    len(value),
                    f"{path} in body should have at least {schema['minProperties']} properties",
                )
            )


# ------------------------------------------------------------------------ CEL validation rules

CEL_REASONS = {
    "FieldValueRequired": "required",
    "FieldValueForbidden": "forbidden",
    "FieldValueDuplicate": "duplicate",
}


def _kubernetes_functions() -> dict[str, Any]:
    """Kubernetes' CEL library functions cel-python lacks and CRDs use: the regex library's ``find``
    and ``findAll`` (Karpenter's label-domain rules: ``key.find("^([^/]+)").endsWith(...)``) and the
    strings extension's ``split`` (its alias rules: ``alias.split('@')[0]``). Without them such a rule
    was not evaluated, and the emulator accepted what kube-apiserver refuses."""
    import re

    from celpy import celtypes

    def find(value: Any, pattern: Any) -> Any:
        match = re.search(str(pattern), str(value))
        return celtypes.StringType(match.group(0) if match else "")

    def find_all(value: Any, pattern: Any, limit: Any = -1) -> Any:
        found = [m.group(0) for m in re.finditer(str(pattern), str(value))]
        found = found if int(limit) < 0 else found[: int(limit)]
        return celtypes.ListType([celtypes.StringType(f) for f in found])

    def split(value: Any, separator: Any, limit: Any = -1) -> Any:
        count = int(limit)
        if count == 0:
            return celtypes.ListType([])
        parts = str(value).split(str(separator), count - 1 if count > 0 else -1)
        return celtypes.ListType([celtypes.StringType(p) for p in parts])

    return {"find": find, "findAll": find_all, "split": split}


@functools.lru_cache(maxsize=4096)
def _cel_program(rule: str) -> Any:
    """The compiled rule (cel-python, with ``_kubernetes_functions``), or None when it uses what
    neither implements (some of Kubernetes' CEL libraries): such a rule is not evaluated
    (docs/architecture.md)."""
    import celpy

    try:
        environment = celpy.Environment()
        return environment.program(environment.compile(rule), functions=_kubernetes_functions())
    except Exception as exc:  # celpy raises its own parse/compile errors
        log.warning("CEL rule not evaluated by the emulator (%s): %s", exc, rule)
        return None


ABSENT = object()  # no old value: a create, or a field the old object did not have


def _cel_holds(rule: str, value: Any, old: Any) -> bool | None:
    """True/False, or None when the rule is not evaluated (not compiled, or a transition rule
    without an old value)."""
    from celpy import CELEvalError, json_to_cel

    program = _cel_program(rule)
    if program is None:
        return None
    uses_old = "oldSelf" in rule
    if uses_old and old is ABSENT:
        return None
    activation = {"self": json_to_cel(value)}
    if uses_old:
        activation["oldSelf"] = json_to_cel(old)
    try:
        result = program.evaluate(activation)
    except (CELEvalError, TypeError, ValueError) as exc:
        log.warning("CEL rule %r failed to evaluate: %s", rule, exc)
        return None
    if isinstance(result, CELEvalError):
        return False  # an evaluation error (a missing field without has()) fails the rule
    return bool(result)


def validate_cel(
    obj: dict[str, Any], schema: dict[str, Any] | None, old: dict[str, Any] | None
) -> list[FieldError]:
    """``x-kubernetes-validations`` at every level of the schema, as kube-apiserver evaluates them:
    ``self`` is the value there, ``oldSelf`` the previous one (transition rules only on update)."""
    if not schema:
        return []
    errors: list[FieldError] = []
    _cel_walk(obj, ABSENT if old is None else old, schema, "", errors)
    return errors


def _cel_walk(value: Any, old: Any, schema: dict[str, Any], path: str, errors: list[FieldError]) -> None:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        holds = _cel_holds(rule["rule"], value, old)
        if holds is False:
            where = f"{path}{rule.get('fieldPath', '')}" if rule.get("fieldPath") else path
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            kind = CEL_REASONS.get(rule.get("reason", ""))
            if kind == "required":
                errors.append(FieldError.required(where, message))
            elif kind == "forbidden":
                errors.append(FieldError.forbidden(where, message))
            else:
                errors.append(FieldError.invalid(where, value, message))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) or (additional if isinstance(additional, dict) else None)
            if sub is None or (not path and key in ("apiVersion", "kind", "metadata")):
                continue
            old_item = old[key] if isinstance(old, dict) and key in old else ABSENT
            _cel_walk(item, old_item, sub, f"{path}.{key}" if path else key, errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        # oldSelf of a list item is only defined for map lists (matched by key); not correlated here.
        for index, item in enumerate(value):
            _cel_walk(item, ABSENT, schema["items"], f"{path}[{index}]", errors)
