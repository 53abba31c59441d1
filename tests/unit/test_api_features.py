"""One table of Karpenter v1.14's fields (``api.features``): it covers every field of the schema the
CRDs carry, docs/features.md (and its summary in the README) shows it as it is, and what it says not
acted on is what ``validate`` warns."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nodewright.api.features import FEATURES, feature_table, not_acted_on
from nodewright.api.schema import SCHEMAS
from nodewright.api.validation import validate_document

from sandbox.shared_data import REPO_ROOT

KINDS = {"NodePool": ("karpenter.sh", "NodePool"), "NodeClaim": ("karpenter.sh", "NodeClaim")}
KINDS["EC2NodeClass"] = ("karpenter.k8s.aws", "EC2NodeClass")
KINDS["NodeOverlay"] = ("karpenter.sh", "NodeOverlay")


def leaves(schema: dict[str, Any], path: str) -> Iterator[str]:
    """Every field path of a schema, down to the fields that hold no named fields of their own."""
    if schema.get("type") == "array" and "properties" in (schema.get("items") or {}):
        yield from leaves(schema["items"], f"{path}[]")
        return
    properties = schema.get("properties")
    if not properties:
        yield path
        return
    for key, child in properties.items():
        yield from leaves(child, f"{path}.{key}" if path else key)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_field_of_the_schema_has_a_verdict(kind: str) -> None:
    schema = SCHEMAS[KINDS[kind]]
    paths = [p for top in ("spec", "status") for p in leaves(schema["properties"][top], top)]
    covered = [f.path for f in FEATURES if f.kind == kind]
    missing = [
        p for p in paths if not any(p == c or p.startswith(c + ".") or p.startswith(c + "[") for c in covered)
    ]
    assert missing == []


def _generated(path: Path, section: str) -> str:
    text = path.read_text()
    found = re.search(rf"<!-- bench:{section}:begin -->\n(.*?)<!-- bench:{section}:end -->", text, re.S)
    assert found, f"{path.name} has no {section} markers"
    return found.group(1)


def test_the_features_doc_shows_the_table_as_the_code_has_it() -> None:
    assert _generated(REPO_ROOT / "docs" / "features.md", "features") == feature_table(), (
        "regenerate docs/features.md with `nodewright bench report`"
    )


def test_the_readme_summarizes_the_table_as_the_code_has_it() -> None:
    from bench.report import feature_summary

    summary = _generated(REPO_ROOT / "README.md", "features-summary")
    assert summary == feature_summary(), "regenerate the README's summary with `nodewright bench report`"
    for feature in FEATURES:
        if not feature.acted_on:
            assert f"`{feature.label}`" in summary


def test_validate_warns_of_exactly_the_fields_not_acted_on() -> None:
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "replicas": 2,
            "disruption": {"consolidationPolicy": "Balanced"},
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "requirements": [],
                }
            },
        },
    }
    inert = [path for path, _ in not_acted_on(pool)]
    assert inert == []  # replicas: a static NodePool; Balanced: Karpenter's score (disruption.balanced)
    findings = validate_document(pool)
    assert not [f for f in findings if f.is_error]
    assert sorted(f.path for f in findings if f.message.startswith("not acted on")) == sorted(inert)
