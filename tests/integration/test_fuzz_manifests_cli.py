"""Fuzzing ``nodewright validate``, ``convert`` and ``plan`` with random and hostile manifests.

Inputs: the seed manifests (``events/manifests``: NodePools, EC2NodeClasses, a Provisioner, pods,
a Deployment, in v1, v1beta1 and v1alpha5) with one field replaced, removed or retyped (huge and
negative quantities, wrong types, deep nesting, unicode, long strings), plus hostile texts (YAML
bombs, duplicate keys, 5,000-digit integers, nesting past the recursion limit, binary bytes,
truncation). Every input gets a clean outcome: exit 0, or a non-zero exit (1 findings, 2 unusable
input) with a message on stderr naming the file; never a traceback (``main`` raising), never a
hang (hypothesis deadline off, pytest-timeout on), and ``plan --json`` prints only JSON.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodewright.cli import main

from sandbox.shared_data import REPO_ROOT

SEEDS = [
    doc
    for path in sorted((REPO_ROOT / "events" / "manifests").glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if isinstance(doc, dict)
]
OUTCOMES: Counter[str] = Counter()
_names = itertools.count()
FUZZ: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"x": [value]}
    return value


odd_values = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from(["-1", "1e400", "100000000", "ten", "", "1Ei", "-5Gi", "0.000001m", "\u2014", "é" * 50]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.none(),
    st.booleans(),
    st.integers(min_value=1, max_value=60).map(_nested),
)
HOSTILE = [
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(f"a{i}: &a{i} [{', '.join(['*a' if i == 0 else f'*a{i - 1}'] * 10)}]\n" for i in range(8))
    + "kind: NodePool\napiVersion: karpenter.sh/v1\nspec: *a7\n",
    "kind: NodePool\nkind: EC2NodeClass\napiVersion: karpenter.sh/v1\n",
    "spec: {replicas: " + "9" * 5000 + "}\n",
    "a: " + "[" * 6000 + "]" * 6000 + "\n",
    "apiVersion: karpenter.sh/v1\nkind: NodePool\nspec: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
    "\x00\x01\x02 not yaml \xff",
    "kind: NodePool\n\tapiVersion: tabs\n",
    "--- !!python/object/apply:os.system ['echo pwned']\n",
]


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path into the document."""
    found = [prefix] if prefix else []
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


@st.composite
def mutated_manifests(draw: st.DrawFn) -> str:
    """YAML text: seed documents, one of them with a field replaced, removed or retyped."""
    documents = copy.deepcopy(draw(st.lists(st.sampled_from(SEEDS), min_size=1, max_size=3)))
    target = documents[draw(st.integers(0, len(documents) - 1))]
    paths = _paths(target)
    if paths:
        path = draw(st.sampled_from(paths))
        parent = target
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(odd_values)
    return yaml.safe_dump_all(documents, allow_unicode=True, sort_keys=False)


@st.composite
def damaged_texts(draw: st.DrawFn) -> str:
    """Hostile texts, a valid manifest cut short, or arbitrary text."""
    choice = draw(st.sampled_from(["hostile", "truncated", "text"]))
    if choice == "hostile":
        return draw(st.sampled_from(HOSTILE))
    if choice == "truncated":
        text = yaml.safe_dump_all(SEEDS, sort_keys=False)
        return text[: draw(st.integers(0, len(text)))]
    return draw(st.text(max_size=300))


manifests = st.one_of(mutated_manifests(), damaged_texts())


@pytest.fixture(scope="module", autouse=True)
def outcome_counts() -> Iterator[None]:
    yield
    print(f"\nmanifest fuzzing: {dict(sorted(OUTCOMES.items()))}", file=sys.stderr)


def _run(argv: list[str], path: Path, capsys: Any) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)  # a traceback would raise out of here and fail the test
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (argv, code, err)
    if code:
        assert str(path) in err or path.name in err or path.name in out, (argv, out, err)
    assert "Traceback" not in err
    return code, out, err


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / f"manifest-{next(_names)}.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    return path


@settings(max_examples=150, **FUZZ)
@given(text=manifests)
def test_validate_and_convert_give_every_manifest_a_clean_outcome(
    tmp_path: Path, capsys: Any, text: str
) -> None:
    path = _write(tmp_path, text)
    code, _, _ = _run(["validate", str(path)], path, capsys)
    OUTCOMES[f"validate exit {code}"] += 1
    code, _, _ = _run(["convert", str(path)], path, capsys)
    OUTCOMES[f"convert exit {code}"] += 1


@settings(max_examples=25, **FUZZ)
@given(text=manifests)
def test_plan_gives_every_manifest_a_clean_outcome_and_json_only(
    tmp_path: Path, capsys: Any, text: str
) -> None:
    path = _write(tmp_path, text)
    code, out, _ = _run(["plan", "--manifests", str(path), "--region", "us-west-2", "--json"], path, capsys)
    OUTCOMES[f"plan exit {code}"] += 1
    if out.strip():
        json.loads(out)
