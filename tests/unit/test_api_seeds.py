"""The seeds' manifests (events/manifests/): validation outcomes, CLI output and exit codes, loading."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from nodewright.api.manifests import load_files, validate_files
from nodewright.cli import main

from sandbox.shared_data import REPO_ROOT

SEEDS = REPO_ROOT / "events" / "manifests"
INVALID = {
    "v1beta1-nodepool-mixed-workload.yaml",
    "v1beta1-ec2nodeclass-default.yaml",
    "v1beta1-ec2nodeclass-default-tagged.yaml",
    "v1beta1-ec2nodeclass-custom-ami.yaml",  # the issue's text gives it no role either
}


def seed_files() -> list[Path]:
    return sorted(SEEDS.glob("*.yaml"))


def test_every_seed_named_by_the_issue_is_present() -> None:
    kinds = {(d.doc["kind"], d.doc["metadata"]["name"]) for d in load_files(seed_files())}
    expected = {
        ("Provisioner", "default"),
        *(("NodePool", n) for n in ("default", "web-app", "gpu-workload", "batch-jobs", "mixed-workload")),
        *(("EC2NodeClass", n) for n in ("default", "bottlerocket", "custom-ami")),
        *(("Pod", n) for n in ("web-pod", "gpu-pod", "batch-pod")),
        ("Deployment", "inflate"),
    }
    assert kinds == expected


@pytest.mark.parametrize("path", seed_files(), ids=lambda p: p.name)
def test_seed_validity(path: Path) -> None:
    report = validate_files([path])
    assert report.ok is (path.name not in INVALID), [str(f) for d in report.documents for f in d.findings]


def test_mixed_workload_names_both_weight_fields_and_points_to_nodepool_weight() -> None:
    (document,) = validate_files([SEEDS / "v1beta1-nodepool-mixed-workload.yaml"]).documents
    errors = [f for f in document.findings if f.is_error]
    assert [f.path for f in errors] == [
        "spec.template.spec.requirements[0].weight",
        "spec.template.spec.requirements[1].weight",
    ]
    assert all("weight is a NodePool field (spec.weight)" in f.message for f in errors)


def test_default_ec2nodeclass_fails_saying_what_v1_needs() -> None:
    (document,) = validate_files([SEEDS / "v1beta1-ec2nodeclass-default.yaml"]).documents
    (error,) = [f for f in document.findings if f.is_error]
    assert any("v1beta1 required one too" in f.message for f in document.findings)
    assert error.path == "spec.role"
    assert "spec.role" in error.message
    assert "spec.instanceProfile" in error.message


def test_instance_type47_warns() -> None:
    (document,) = validate_files([SEEDS / "v1beta1-nodepool-default.yaml"]).documents
    (warning,) = document.findings
    assert warning.severity == "warning"
    assert (
        "node.kubernetes.io/instance-type47 is not a well-known label: no instance type will carry it"
        in str(warning)
    )
    assert "did you mean node.kubernetes.io/instance-type?" in warning.message


def test_provisioner_converts_with_the_consolidation_conflict_warning() -> None:
    (document,) = validate_files([SEEDS / "v1alpha5-provisioner-default.yaml"]).documents
    assert document.ok
    pool, kubelet_piece = document.v1
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert kubelet_piece["spec"]["kubelet"]["maxPods"] == 20
    assert any("Karpenter refuses consolidation.enabled" in f.message for f in document.findings)


def test_yaml_error_is_reported_and_the_rest_still_loads(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: "
        "{name: b}\n"
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: c\n")
    missing = tmp_path / "missing.yaml"
    loaded = load_files([bad, good, missing])
    assert [(Path(d.file).name, d.index, d.doc is None) for d in loaded] == [
        ("bad.yaml", 0, True),
        ("good.yaml", 0, False),
        ("good.yaml", 1, False),
        ("missing.yaml", 0, True),
    ]
    assert "not valid YAML at line" in loaded[0].findings[0].message
    assert "cannot read the file" in loaded[3].findings[0].message
    report = validate_files([bad, good])
    assert not report.ok
    assert [d.ok for d in report.documents] == [False, True, True]


def test_cli_validate_prints_every_finding_and_v1_form_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["validate", *map(str, seed_files())])
    out = capsys.readouterr().out
    assert code == 1
    assert out.count("INVALID  ") == len(INVALID)
    assert "requirements[0].weight: unknown field" in out
    assert "requirements[1].weight: unknown field" in out
    assert "OK  " + str(SEEDS / "v1beta1-nodepool-web-app.yaml") + "#0 NodePool/web-app" in out
    assert "apiVersion: karpenter.sh/v1" in out
    assert "consolidateAfter: 0s" in out
    assert "14 document(s): 4 invalid" in out


def test_cli_validate_exits_0_for_valid_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-q", str(SEEDS / "v1beta1-nodepool-web-app.yaml")]) == 0
    assert "apiVersion" not in capsys.readouterr().out


def test_cli_convert_prints_multi_document_v1_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    files = [SEEDS / "v1alpha5-provisioner-default.yaml", SEEDS / "v1beta1-ec2nodeclass-default.yaml"]
    code = main(["convert", *map(str, files), str(SEEDS / "pod-web-pod.yaml")])
    captured = capsys.readouterr()
    docs = list(yaml.safe_load_all(captured.out))
    assert code == 1  # the seed's default EC2NodeClass has no role: still printed, error on stderr
    assert "spec.role: Required value" in captured.err
    assert [(d["apiVersion"], d["kind"]) for d in docs] == [
        ("karpenter.sh/v1", "NodePool"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass"),
        ("v1", "Pod"),
    ]
    assert docs[1]["spec"]["kubelet"]["evictionMaxPodGracePeriod"] == 180  # merged into its EC2NodeClass
    assert "Karpenter refuses consolidation.enabled" in captured.err


def test_cli_convert_exits_0_and_warns_about_duplicate_names(capsys: pytest.CaptureFixture[str]) -> None:
    files = [SEEDS / "v1beta1-nodepool-web-app.yaml", SEEDS / "v1beta1-nodepool-web-app.yaml"]
    assert main(["convert", *map(str, files)]) == 0
    assert "2 documents are NodePool 'web-app'" in capsys.readouterr().err
