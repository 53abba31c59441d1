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


# --- 10 MB files and bounded memory ----------------------------------------------------------------

TEN_MB = 10 * 2**20
COMMANDS = {
    "validate": ["validate"],
    "convert": ["convert"],
    "plan": ["plan", "--region", "us-west-2", "--json", "--manifests"],
}


def _flat_list(values: int) -> str:
    """A NodePool whose one requirement lists ``values`` values (3 bytes each)."""
    return (
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: "
        "{requirements: [{key: a, operator: In, values: [" + "v, " * values + "v]}]}}}\n"
    )


def _ten_mb_files(folder: Path) -> dict[str, Path]:
    """The shapes a 10 MB manifest takes: one huge string, one flat list of millions of values,
    thousands of valid documents, one line of garbage, and text that is not UTF-8."""
    one = yaml.safe_dump({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "x"}})
    texts = {  # written as text: PyYAML's emitter takes a minute over 10 MB
        "huge-string": one + "  annotations: {a: " + "a" * TEN_MB + "}\n",
        "flat-list": _flat_list(TEN_MB // 3),
        "many-documents": "---\n".join([one] * (TEN_MB // len(one) + 1)),
        "one-line": "x" * TEN_MB,
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(text)
    paths["not-utf8"] = folder / "not-utf8.yaml"
    paths["not-utf8"].write_bytes(b"\xff\xfe" * (TEN_MB // 2))
    paths["small"] = folder / "small.yaml"
    paths["small"].write_text(one)
    return paths


@pytest.fixture(scope="module")
def ten_mb_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Written once for the module: every command reads the same files."""
    return _ten_mb_files(tmp_path_factory.mktemp("ten-mb"))


def _peak_while(argv: list[str], capsys: Any, warm_up: Path) -> tuple[int, str, str, float]:
    """``main(argv)`` with Python's allocations traced: (exit, stdout, stderr, peak MiB). The same
    command runs first on ``warm_up``, so imports and the plan's catalog are loaded before tracing."""
    import tracemalloc

    main([*argv[:-1], str(warm_up)])
    capsys.readouterr()
    tracemalloc.start()
    try:
        code = main(argv)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    return code, out, err, peak / 2**20


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("shape", ["huge-string", "flat-list", "many-documents", "one-line", "not-utf8"])
def test_a_10_mb_manifest_is_refused_in_one_line_without_reading_it(
    ten_mb_files: dict[str, Path], shape: str, command: str, capsys: Any
) -> None:
    path = ten_mb_files[shape]
    code, out, err, peak = _peak_while([*COMMANDS[command], str(path)], capsys, ten_mb_files["small"])
    OUTCOMES[f"10 MB {command} exit {code}"] += 1
    assert code == 1, (out, err)
    said = [
        line for line in (out + err).splitlines() if str(path) in line and " MiB; manifest files over" in line
    ]
    assert said, (out, err)
    assert "split it into smaller files" in said[-1]  # one line: the file, its size, what to do
    assert "Traceback" not in err
    if command == "plan":
        json.loads(out)  # still only JSON on stdout
    assert peak < 16, f"{peak:.1f} MiB traced: the file was read"


def test_a_document_of_millions_of_values_under_the_size_limit_is_refused_before_it_is_built(
    tmp_path: Path, capsys: Any
) -> None:
    from nodewright.api.manifests import MAX_EXPANDED_NODES, MAX_MANIFEST_BYTES

    values = (MAX_MANIFEST_BYTES - 200) // 3  # about 1.4 million scalars in 4 MiB
    assert values > 5 * MAX_EXPANDED_NODES
    path = _write(tmp_path, _flat_list(values))
    small = _write(tmp_path, _flat_list(3))
    assert path.stat().st_size <= MAX_MANIFEST_BYTES
    code, _, err, peak = _peak_while(["convert", str(path)], capsys, small)
    assert code == 1
    assert f"{path}#0: document 1 holds more than 200,000 values" in err
    # Built as YAML nodes it took 1.6 GB (and minutes); counted as events it stays near the text.
    assert peak < 64, f"{peak:.1f} MiB traced"
