"""Manifest loading and ``nodewright validate``/``convert`` on hostile or odd files: a clean message
naming the file, a non-zero exit, never a traceback, never unbounded memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodewright.api.manifests import MAX_EXPANDED_NODES, load_files, validate_files
from nodewright.cli import main

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: fine}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _billion_laughs(levels: int) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 10) + "]")
    return "\n".join(lines) + f"\nkind: NodePool\napiVersion: karpenter.sh/v1\nrequirements: *l{levels - 1}\n"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (_billion_laughs(9), "aliases expand to more than"),
        ("a: " + "[" * 6000 + "]" * 6000, "nested too deeply"),
        ("spec: {weight: " + "9" * 5000 + "}", "more than 4,300 digits"),
        ("", "holds no YAML document"),
        ("---\n---\n", "holds no YAML document"),
        ("kind: [unclosed", "not valid YAML at line 1"),
    ],
    ids=["billion-laughs", "deep-nesting", "huge-int", "empty", "only-separators", "syntax"],
)
def test_a_hostile_or_empty_file_is_one_clear_finding_and_the_next_file_still_loads(
    tmp_path: Path, text: str, complaint: str
) -> None:
    bad = _write(tmp_path, "bad.yaml", text)
    good = _write(tmp_path, "good.yaml", NODEPOOL)

    loaded = load_files([bad, good])

    assert loaded[0].doc is None
    assert complaint in str(loaded[0].findings[0])
    assert loaded[1].doc["metadata"]["name"] == "fine"


def test_aliases_within_the_budget_still_load() -> None:
    from nodewright.api.manifests import safe_load_documents

    text = "base: &b {cpu: '1'}\nuses: [*b, *b, *b]\n"
    assert safe_load_documents(text) == [{"base": {"cpu": "1"}, "uses": [{"cpu": "1"}] * 3}]
    assert MAX_EXPANDED_NODES >= 10_000


def test_wrong_types_are_findings_and_the_documents_after_them_are_checked(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "types.yaml",
        "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: [1]\nspec:\n  template: [1]\n---\n"
        + NODEPOOL,
    )
    report = validate_files([path])
    assert [d.ok for d in report.documents] == [False, True]
    assert any("metadata: Invalid value: [1]: must be object" in str(f) for f in report.documents[0].findings)


def test_a_finding_never_quotes_a_huge_value_whole(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "big.yaml", NODEPOOL.replace("requirements: []", "requirements: " + "x" * 100_000)
    )
    findings = [str(f) for d in validate_files([path]).documents for f in d.findings]
    assert findings
    assert all(len(f) < 1000 for f in findings)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("", 1),
        ("metadata: [1]\nkind: NodePool\napiVersion: karpenter.sh/v1beta1\nspec: {template: [1]}\n", 1),
    ],
    ids=["empty", "wrong-types"],
)
def test_validate_exits_non_zero_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: int
) -> None:
    path = _write(tmp_path, "x.yaml", text)
    assert main(["validate", str(path)]) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "INVALID" in out


def test_validate_reads_the_yaml_files_of_a_directory_and_names_an_empty_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "pool.yaml", NODEPOOL)
    _write(tmp_path, "notes.txt", "not yaml")
    assert main(["validate", "-q", str(tmp_path)]) == 0
    assert "OK  " in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["validate", str(empty)]) == 1
    assert "is a directory with no *.yaml" in capsys.readouterr().out


def test_convert_reports_hostile_files_on_stderr_and_converts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = _write(tmp_path, "bomb.yaml", _billion_laughs(9))
    good = _write(tmp_path, "good.yaml", NODEPOOL)
    assert main(["convert", str(bomb), str(good)]) == 1
    out, err = capsys.readouterr()
    assert "bomb.yaml#0" in err
    assert "name: fine" in out


def test_convert_fills_the_node_role_given_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = Path(__file__).resolve().parents[2] / "events" / "manifests" / "v1beta1-ec2nodeclass-default.yaml"
    assert main(["convert", str(seed)]) == 1  # v1 needs a role: an error without one
    capsys.readouterr()
    assert main(["convert", "--role", "KarpenterNodeRole-demo", str(seed)]) == 0
    out, err = capsys.readouterr()
    assert "role: KarpenterNodeRole-demo" in out
    assert "using node role 'KarpenterNodeRole-demo'" in err
