"""Unknown-field pruning, structural defaulting and validation against schemas.

Built-in kinds use the field lists of the kubernetes client's generated models (the same OpenAPI the
API server is built from); custom resources use their CRD's structural ``openAPIV3Schema``. Unknown
fields are dropped and reported (the handler turns them into ``Warning`` headers, or a 400 under
``fieldValidation=Strict``), as kube-apiserver does.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import re
import threading
from collections import OrderedDict
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
    if model is None or not isinstance(types, dict):
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


def validate_custom(
    obj: dict[str, Any], schema: dict[str, Any] | None, old: dict[str, Any] | None = None
) -> list[FieldError]:
    """The OpenAPI v3 checks kube-apiserver runs on custom objects (CEL rules: ``validate_cel``).

    On an update (``old`` given) they are ratcheted as kube-apiserver's RatchetingSchemaValidator
    does (see :class:`_Correlation`): an error at a value unchanged from the old object is dropped
    (its warnings are not returned to the client)."""
    if not schema:
        return []
    errors: list[FieldError] = []
    root = _Correlation(obj, ABSENT if old is None else old, schema, None)
    props = schema.get("properties") or {}
    for key, sub in props.items():
        if key in ("metadata", "apiVersion", "kind"):
            continue
        if key in obj:
            _validate(obj[key], sub, key, errors, root.child(obj[key], _old_at(old, key), sub))
    missing = [FieldError.required(key) for key in schema.get("required") or [] if key not in obj]
    if missing and not root.ratchets():
        errors.extend(missing)
    return errors


def _validate(
    value: Any, schema: dict[str, Any], path: str, errors: list[FieldError], here: _Correlation
) -> None:
    """The checks of the value at ``path`` and below, in kube-openapi's order; on an update, what they
    found is dropped when ``here`` ratchets (every node below an unchanged value ratchets too)."""
    start = len(errors)
    _validate_value(value, schema, path, errors, here)
    if len(errors) > start and here.ratchets():
        del errors[start:]


def _validate_value(
    value: Any, schema: dict[str, Any], path: str, errors: list[FieldError], here: _Correlation
) -> None:
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
                old_item = _old_item(item, here.old, schema)
                _validate(item, items, f"{path}[{i}]", errors, here.child(item, old_item, items))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or []:
            if key not in value:
                errors.append(FieldError.required(f"{path}.{key}"))
        additional = schema.get("additionalProperties")
        old = here.old
        for key, item in value.items():
            sub = _key_schema(props, additional, key)
            if sub is not None:
                _validate(item, sub, f"{path}.{key}", errors, here.child(item, _old_at(old, key), sub))
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
def _cel_program(rule: str) -> tuple[Any, str]:
    """The compiled rule (cel-python, with ``_kubernetes_functions``) and '', or None and why it does
    not compile (also a rule using what neither implements: some of Kubernetes' CEL libraries)."""
    import celpy

    try:
        environment = celpy.Environment()
        return environment.program(environment.compile(rule), functions=_kubernetes_functions()), ""
    except Exception as exc:  # celpy raises its own parse/compile errors
        log.warning("CEL rule not compiled by the emulator (%s): %s", exc, rule)
        return None, str(exc)


ABSENT = object()  # no old value: a create, or a field the old object did not have


def _cel_go_error(exc: Any) -> str:
    """cel-python's evaluation error in cel-go's words where they differ (``no such key: x``,
    ``division by zero``, ``integer overflow``, ``no such overload``); its own words otherwise."""
    text = str(exc.args[0]) if getattr(exc, "args", None) else str(exc)
    lacking = re.match(r"undeclared reference to '([^']*)'", text)
    if lacking:  # cel-python resolves functions at evaluation: a Kubernetes library it lacks
        return (
            f"the emulator's CEL (cel-python) lacks {lacking.group(1)!r}, which kube-apiserver may "
            "have (add it to sandbox.apiserver.schema._kubernetes_functions)"
        )
    missing = re.match(r"no such member in mapping: '(.*)'", text)
    if missing:
        return f"no such key: {missing.group(1)}"
    if "divide by zero" in text:
        return "division by zero"
    if "overflow" in text:
        return "integer overflow"
    if "no matching overload" in text:
        return "no such overload"
    return text


def _evaluate(text: str, program: Any, value: Any, old: Any) -> tuple[bool, str]:
    """``(holds, evaluation error)`` of one compiled rule on ``self`` (and ``oldSelf``), memoised.

    A rule is a pure function of its text and the JSON values it is given (Kubernetes' CEL has no
    clock and no I/O), so a result is looked up by the rule and the values' exact JSON (types and key
    order kept: ``true`` is not ``1``, ``1`` not ``1.0``), never by anything looser: a hit is what
    evaluating again would give. Most writes carry values the rules have seen (a status write keeps
    the spec; a controller's update changes one field), and cel-python, a tree-walking interpreter,
    costs milliseconds a rule, which kube-apiserver's compiled cel-go does not."""
    key = (text, _json_key(value), None if old is ABSENT else _json_key(old))
    with _RESULTS_LOCK:
        found = _RESULTS.get(key)
        if found is not None:
            _RESULTS.move_to_end(key)
            return found
    result = _evaluate_now(program, value, old)
    with _RESULTS_LOCK:
        _RESULTS[key] = result
        if len(_RESULTS) > _RESULTS_KEPT:
            _RESULTS.popitem(last=False)
    return result


_RESULTS: OrderedDict[tuple[str, str, str | None], tuple[bool, str]] = OrderedDict()
_RESULTS_LOCK = threading.Lock()
_RESULTS_KEPT = 8192


def _json_key(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _evaluate_now(program: Any, value: Any, old: Any) -> tuple[bool, str]:
    from celpy import celtypes
    from celpy.adapter import json_to_cel
    from celpy.evaluation import CELEvalError

    activation = {"self": json_to_cel(value)}
    if old is not ABSENT:
        activation["oldSelf"] = json_to_cel(old)
    try:
        result = program.evaluate(activation)
    except (CELEvalError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        result = exc if isinstance(exc, CELEvalError) else CELEvalError(str(exc))
    if isinstance(result, CELEvalError):
        return False, _cel_go_error(result)
    # Only true holds (a rule is type-checked to a bool by kube-apiserver).
    return isinstance(result, bool | celtypes.BoolType) and bool(result), ""


def _cel_error(
    rule: dict[str, Any], schema: dict[str, Any], value: Any, old: Any, path: str
) -> tuple[FieldError | None, bool]:
    """What kube-apiserver's ``validateExpressions`` makes of one rule at ``path``: the field error
    (None when the rule holds or, a transition rule, has no old value to hold against) and whether it
    may be ratcheted (a rule that evaluated to false and does not read ``oldSelf``).

    Not only a rule that evaluates to false fails: one that does not compile (``rule compile
    error``) or whose evaluation fails (a key read without ``has()``, a division by zero, arguments
    no overload takes) rejects the write too, its value shown as the schema's type; kube-apiserver
    never ratchets those."""
    text = rule["rule"]
    shown = str(schema.get("type") or _json_type(value))
    named = (rule.get("message") or "").strip() or text.strip()  # ruleErrorString
    program, why = _cel_program(text)
    if program is None:
        return FieldError.invalid(path, shown, f"rule compile error: {' '.join(why.split())}"), False
    uses_old = "oldSelf" in text
    if uses_old and old is ABSENT:
        return None, False  # transition rules are evaluated only against an existing value
    holds, error = _evaluate(text, program, value, old if uses_old else ABSENT)
    if error:
        if error.startswith("no such overload"):
            detail = (
                f"'{error}': call arguments did not match a supported operator, function or macro "
                f"signature for rule: {named}"
            )
        else:
            detail = f"{error} evaluating rule: {named}"
        return FieldError.invalid(path, shown, detail), False
    if holds:
        return None, False
    where = f"{path}{rule['fieldPath']}" if rule.get("fieldPath") else path
    message = (rule.get("message") or "").strip() or f"failed rule: {named}"
    reason = rule.get("reason")
    if reason == "FieldValueRequired":
        failed = FieldError.required(where, message)
    elif reason == "FieldValueForbidden":
        failed = FieldError.forbidden(where, message)
    elif reason == "FieldValueDuplicate":
        failed = FieldError.duplicate(where, shown)
    else:
        failed = FieldError.invalid(where, shown, message)
    return failed, not uses_old


# ------------------------------------------------------------------------ validation ratcheting


def _key_schema(props: dict[str, Any], additional: Any, key: str) -> dict[str, Any] | None:
    """The schema of a map's ``key``: its property's, else ``additionalProperties`` when that is a
    schema; None when the schema does not declare it (a preserved unknown field)."""
    if key in props:
        found: dict[str, Any] = props[key]
        return found
    return additional if isinstance(additional, dict) else None


def _old_at(old: Any, key: str) -> Any:
    """The old value that correlates with a map's ``key`` (``ABSENT``: none, a create or a new key)."""
    return old[key] if isinstance(old, dict) and key in old else ABSENT


def _same(a: Any, b: Any) -> bool:
    """reflect.DeepEqual on decoded JSON: ``true`` is not ``1`` (a whole number is one number:
    apimachinery decodes ``1.0`` and ``1`` alike)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return (
            isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _unchanged(value: Any, old: Any, schema: dict[str, Any]) -> bool:
    """``CorrelatedObject.CachedDeepEqual``: equal child by child where children correlate, so a key
    the schema does not declare (a preserved unknown field) or a ``listType: map`` item with no old
    item of its keys makes the value changed; an atomic or set list is compared whole."""
    if isinstance(value, dict) and isinstance(old, dict):
        if len(value) != len(old):
            return False
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = _key_schema(props, additional, key)
            if key not in old or sub is None or not _unchanged(item, old[key], sub):
                return False
        return True
    if isinstance(value, list) and isinstance(old, list):
        if len(value) != len(old):
            return False
        items = schema.get("items")
        keyed = schema.get("x-kubernetes-list-type") == "map" and schema.get("x-kubernetes-list-map-keys")
        if not keyed or not isinstance(items, dict):
            return _same(value, old)
        for item in value:
            old_item = _old_item(item, old, schema)
            if old_item is ABSENT or not _unchanged(item, old_item, items):
                return False
        return True
    return _same(value, old)


class _Correlation:
    """One node of an update's object and the old value correlated with it (apiserver's
    ``common.CorrelatedObject``): a property or an additional property by its key, a ``listType: map``
    item by its key values; an atomic or set list's items, a new key or a create's values correlate
    with nothing (``old`` is ``ABSENT``).

    KEP-4008 (CRDValidationRatcheting, GA in v1.33): on an update, an error at a node whose value is
    deep-equal to its correlated old value, or, a node that correlates with nothing, whose nearest
    correlated ancestor's is, is a warning instead. Not ratcheted: rules reading ``oldSelf``, CEL
    evaluation and compile errors."""

    __slots__ = ("_unchanged", "old", "parent", "schema", "value")

    def __init__(self, value: Any, old: Any, schema: dict[str, Any], parent: _Correlation | None) -> None:
        self.value = value
        self.old = old
        self.schema = schema
        self.parent = parent
        self._unchanged: bool | None = None

    def child(self, value: Any, old: Any, schema: dict[str, Any]) -> _Correlation:
        return _Correlation(value, old, schema, self)

    def ratchets(self) -> bool:
        node: _Correlation | None = self
        while node is not None and node.old is ABSENT:
            node = node.parent
        if node is None:
            return False
        if node._unchanged is None:
            node._unchanged = _unchanged(node.value, node.old, node.schema)
        return node._unchanged


# ------------------------------------------------------------------------ CEL validation rules (walk)


def validate_cel(
    obj: dict[str, Any],
    schema: dict[str, Any] | None,
    old: dict[str, Any] | None,
    warnings: list[str] | None = None,
) -> list[FieldError]:
    """``x-kubernetes-validations`` at every level of the schema, as kube-apiserver evaluates them:
    ``self`` is the value there, ``oldSelf`` the previous one (transition rules only on update,
    where the old value correlates: a map's key, a ``listType: map`` item with the same keys). On an
    update, a failed rule that does not read ``oldSelf`` at an unchanged value is ratcheted (see
    :class:`_Correlation`): a warning appended to ``warnings``, not an error."""
    if not schema:
        return []
    errors: list[FieldError] = []
    root_old = ABSENT if old is None else old
    _cel_walk(_Correlation(obj, root_old, schema, None), "", errors, warnings)
    return errors


def _old_item(item: Any, old: Any, schema: dict[str, Any]) -> Any:
    """The old item of a ``listType: map`` list with the same key values (only those correlate)."""
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if schema.get("x-kubernetes-list-type") != "map" or not keys or not isinstance(old, list):
        return ABSENT
    if not isinstance(item, dict):
        return ABSENT
    wanted = [item.get(k) for k in keys]
    return next((o for o in old if isinstance(o, dict) and [o.get(k) for k in keys] == wanted), ABSENT)


def _cel_walk(here: _Correlation, path: str, errors: list[FieldError], warnings: list[str] | None) -> None:
    value, old, schema = here.value, here.old, here.schema
    if value is None:
        return  # only non-null values are validated (a rule on the parent checks presence)
    for rule in schema.get("x-kubernetes-validations") or []:
        error, may_ratchet = _cel_error(rule, schema, value, old, path)
        if error is None:
            continue
        if may_ratchet and here.ratchets():
            if warnings is not None:  # kube-apiserver's warning.AddWarning(ctx, "", err.Error())
                warnings.append(error.text())
        else:
            errors.append(error)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) or (additional if isinstance(additional, dict) else None)
            if sub is None or (not path and key in ("apiVersion", "kind", "metadata")):
                continue
            child = f"{path}.{key}" if path else key
            _cel_walk(here.child(item, _old_at(old, key), sub), child, errors, warnings)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            old_item = _old_item(item, old, schema)
            _cel_walk(here.child(item, old_item, schema["items"]), f"{path}[{index}]", errors, warnings)
