"""CRDs under crds/: generated from api.schema, structurally sound, and accepting the converted seeds."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from nodewright.api.convert import convert_documents
from nodewright.api.crds import build_crds, render
from nodewright.api.manifests import load_files
from nodewright.api.models import load_object
from nodewright.api.validation import is_v1_kind

from sandbox.shared_data import REPO_ROOT

CRDS = REPO_ROOT / "crds"


def crd_files() -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(CRDS.glob("*.yaml"))}


def test_crd_files_match_the_schema_module() -> None:
    built = build_crds()
    assert sorted(built) == sorted(crd_files())
    for name, crd in built.items():
        assert (CRDS / name).read_text() == render(crd), (
            f"regenerate: python -m nodewright.api.crds crds/ ({name})"
        )


@pytest.mark.parametrize("name", sorted(build_crds()))
def test_crd_serves_and_stores_one_version_with_status_and_columns(name: str) -> None:
    crd = crd_files()[name]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
    (version,) = crd["spec"]["versions"]
    # v1, but NodeOverlay: Karpenter v1.14 serves it as karpenter.sh/v1alpha1 only.
    expected = "v1alpha1" if crd["spec"]["names"]["kind"] == "NodeOverlay" else "v1"
    assert (version["name"], version["served"], version["storage"]) == (expected, True, True)
    assert version["subresources"]["status"] == {}
    assert {c["name"] for c in version["additionalPrinterColumns"]} >= {"Ready", "Age"}
    assert crd["spec"]["names"]["categories"] == ["karpenter"]
    assert crd["spec"]["scope"] == "Cluster"


def _structural_problems(schema: dict[str, Any], path: str) -> list[str]:
    """What makes a schema non-structural for the API server (every node typed, no bare properties)."""
    problems = []
    if not schema.get("x-kubernetes-int-or-string") and "type" not in schema:
        problems.append(f"{path}: no type")
    if schema.get("x-kubernetes-int-or-string") and schema.get("anyOf") != [
        {"type": "integer"},
        {"type": "string"},
    ]:
        problems.append(f"{path}: int-or-string needs anyOf integer/string")
    for key, child in (schema.get("properties") or {}).items():
        problems += _structural_problems(child, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += _structural_problems(schema["additionalProperties"], f"{path}[*]")
    if "items" in schema:
        problems += _structural_problems(schema["items"], f"{path}[]")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{path}: properties and additionalProperties together")
    return problems


@pytest.mark.parametrize("name", sorted(build_crds()))
def test_crd_schema_is_structural(name: str) -> None:
    schema = crd_files()[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _structural_problems(schema, "") == []
    assert schema["properties"]["metadata"] == {"type": "object"}  # the API server allows nothing more there


def _fields_missing_from(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return [] if isinstance(value, int | str) else [f"{path}: not int-or-string"]
    missing = []
    if isinstance(value, dict) and schema.get("type") == "object":
        if path == ".metadata":
            return []
        for key, item in value.items():
            if key in (schema.get("properties") or {}):
                missing += _fields_missing_from(schema["properties"][key], item, f"{path}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                missing += _fields_missing_from(schema["additionalProperties"], item, f"{path}[{key}]")
            else:
                missing.append(f"{path}.{key}")
    elif isinstance(value, list) and schema.get("type") == "array":
        for i, item in enumerate(value):
            missing += _fields_missing_from(schema["items"], item, f"{path}[{i}]")
    elif "enum" in schema and value not in schema["enum"]:
        missing.append(f"{path}: {value!r} not in enum")
    return missing


def test_crd_schemas_accept_every_field_of_the_converted_seeds() -> None:
    loaded = load_files(sorted((REPO_ROOT / "events" / "manifests").glob("*.yaml")))
    conversion = convert_documents([d.doc for d in loaded])
    schemas = {
        (crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]
        for crd in crd_files().values()
    }
    checked = 0
    for doc in conversion.documents:
        if not is_v1_kind(doc) or doc["metadata"]["name"] == "mixed-workload":  # mixed-workload is invalid
            continue
        schema = schemas[(doc["apiVersion"].split("/")[0], doc["kind"])]
        for form in (doc, load_object(doc).to_dict()):  # as converted and with defaults filled in
            assert _fields_missing_from(schema, form, "") == [], doc["metadata"]["name"]
        checked += 1
    assert checked == 9  # 5 NodePools (incl. the Provisioner's) and 4 EC2NodeClasses


def test_schema_check_catches_an_unknown_field() -> None:
    schema = crd_files()["karpenter.sh_nodepools.yaml"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    doc = {"spec": {"template": {"spec": {"requirements": [{"key": "a", "operator": "In", "weight": 1}]}}}}
    assert _fields_missing_from(schema, doc, "") == [".spec.template.spec.requirements[0].weight"]
