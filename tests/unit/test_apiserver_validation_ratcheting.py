"""CRD validation ratcheting (KEP-4008, GA in kube-apiserver v1.33) in the emulator's schema checks.

On an update, an OpenAPI or CEL error at a value unchanged from the old object (at a correlatable
position) is not an error; a changed value, a create, a transition rule (``oldSelf``) and a CEL
evaluation error are never ratcheted.
"""

from __future__ import annotations

from typing import Any

from sandbox.apiserver.schema import validate_cel, validate_custom

NAME_RULE = {"rule": "self != 'forbidden'", "message": "name is restricted"}
GROWS_RULE = {"rule": "self.size() >= oldSelf.size()", "message": "may only grow"}
STRICTLY_GROWS_RULE = {"rule": "self.size() > oldSelf.size()", "message": "must grow"}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {
                    "type": "string",
                    "maxLength": 8,
                    "x-kubernetes-validations": [NAME_RULE],
                },
                "tags": {
                    "type": "array",
                    "x-kubernetes-list-type": "atomic",
                    "items": {"type": "string", "x-kubernetes-validations": [NAME_RULE]},
                },
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "port": {"type": "integer", "minimum": 1},
                        },
                    },
                },
                "history": {"type": "array", "items": {"type": "string"}},
                "weight": {"type": "integer", "x-kubernetes-validations": [{"rule": "100 / self > 0"}]},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def obj(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {
        "apiVersion": "x.dev/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": spec,
    }
    if status is not None:
        made["status"] = status
    return made


def fields(errors: list[Any]) -> list[str]:
    return [e.field for e in errors]


def test_an_unchanged_value_failing_a_cel_rule_is_accepted_on_update_with_a_warning() -> None:
    old = obj({"name": "forbidden"})
    new = obj({"name": "forbidden"}, status={"phase": "Ready"})
    warnings: list[str] = []
    assert validate_cel(new, SCHEMA, old, warnings) == []
    assert warnings == ['spec.name: Invalid value: "string": name is restricted']
    assert validate_cel(new, SCHEMA, old) == []  # without a warnings list: nothing to report


def test_the_same_invalid_value_is_rejected_on_create() -> None:
    assert fields(validate_cel(obj({"name": "forbidden"}), SCHEMA, None)) == ["spec.name"]
    assert fields(validate_custom(obj({"name": "much-too-long"}), SCHEMA)) == ["spec.name"]


def test_a_changed_value_failing_a_cel_rule_is_rejected_on_update() -> None:
    old = obj({"name": "old"})
    warnings: list[str] = []
    assert fields(validate_cel(obj({"name": "forbidden"}), SCHEMA, old, warnings)) == ["spec.name"]
    assert warnings == []


def test_a_transition_rule_on_an_unchanged_value_is_still_evaluated() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"items": {"type": "array", "items": {"type": "string"}}},
                "x-kubernetes-validations": [STRICTLY_GROWS_RULE, GROWS_RULE],
            }
        },
    }
    old = obj({"items": ["a"]})
    new = obj({"items": ["a"]}, status={"phase": "Ready"})
    (error,) = validate_cel(new, schema, old, [])
    assert (error.field, error.message) == ("spec", 'Invalid value: "object": must grow')


def test_a_cel_evaluation_error_on_an_unchanged_value_is_never_ratcheted() -> None:
    old = obj({"name": "ok", "weight": 0})
    (error,) = validate_cel(obj({"name": "ok", "weight": 0}, status={}), SCHEMA, old, [])
    assert error.field == "spec.weight"
    assert "division by zero evaluating rule" in error.message


def test_an_atomic_list_item_ratchets_only_while_its_list_is_unchanged() -> None:
    old = obj({"name": "ok", "tags": ["forbidden"]})
    assert validate_cel(obj({"name": "ok", "tags": ["forbidden"]}), SCHEMA, old, []) == []
    grown = obj({"name": "ok", "tags": ["forbidden", "new"]})
    assert fields(validate_cel(grown, SCHEMA, old, [])) == ["spec.tags[0]"]


def test_an_unchanged_value_failing_the_openapi_schema_is_accepted_on_update() -> None:
    old = obj({"name": "much-too-long", "ports": [{"name": "a", "port": 0}]})
    new = obj({"name": "much-too-long", "ports": [{"name": "b", "port": 5}, {"name": "a", "port": 0}]})
    assert validate_custom(new, SCHEMA, old) == []  # the map-list item "a" correlates by its key


def test_a_changed_value_failing_the_openapi_schema_is_rejected_on_update() -> None:
    old = obj({"name": "ok", "ports": [{"name": "a", "port": 0}]})
    new = obj({"name": "much-too-long", "ports": [{"name": "a", "port": -1}]})
    assert fields(validate_custom(new, SCHEMA, old)) == ["spec.name", "spec.ports[0].port"]


def test_a_missing_required_field_ratchets_only_while_its_object_is_unchanged() -> None:
    old = obj({"history": ["a"]})
    assert validate_custom(obj({"history": ["a"]}, status={"phase": "x"}), SCHEMA, old) == []
    assert fields(validate_custom(obj({"history": ["a", "b"]}), SCHEMA, old)) == ["spec.name"]


def test_true_is_not_the_unchanged_value_1() -> None:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    }
    assert fields(validate_custom(obj({"n": True}), schema, obj({"n": 1}))) == ["spec.n"]


def test_a_remembered_rule_result_is_never_given_for_another_json_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "string(self.n) == '1'"}]}
        },
    }
    assert validate_cel(obj({"n": 1}), schema, None) == []
    assert validate_cel(obj({"n": 1}), schema, None) == []  # the remembered result
    assert fields(validate_cel(obj({"n": 2}), schema, None)) == ["spec"]
    assert fields(validate_cel(obj({"n": True}), schema, None)) == ["spec"]
    assert fields(validate_cel(obj({"n": 1.0}), schema, None)) == ["spec"]


def test_a_value_holding_a_field_its_schema_does_not_declare_never_counts_as_unchanged() -> None:
    """CorrelatedObject.CachedDeepEqual compares child by child, and a preserved unknown field has no
    schema to correlate by: the value is changed, so its errors stand."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"name": {"type": "string"}},
                "x-kubernetes-validations": [NAME_RULE | {"rule": "self.name != 'forbidden'"}],
            }
        },
    }
    old = obj({"name": "forbidden", "extra": 1})
    assert fields(validate_cel(obj({"name": "forbidden", "extra": 1}), schema, old, [])) == ["spec"]
    declared = obj({"name": "forbidden"})
    assert validate_cel(obj({"name": "forbidden"}), schema, declared, []) == []
