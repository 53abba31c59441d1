"""Karpenter v1.14's manifests (``events/manifests/karpenter-v1.14/``) and the seeds' apply unchanged
with ``kubectl apply --validate=strict`` to the API emulator holding ``crds/``, and ``nodewright
validate`` finds no error in any: a field Nodewright does not act on is a warning, never an error."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.api.convert import convert_documents
from nodewright.api.manifests import validate_files
from nodewright.api.validation import is_v1_kind

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import KUBECTL, kubectl
from sandbox.shared_data import REPO_ROOT

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not shutil.which(KUBECTL),
        reason="kubectl is not installed (make installs Debian's kubernetes-client)",
    ),
]

V114 = REPO_ROOT / "events" / "manifests" / "karpenter-v1.14"
MANIFESTS = sorted(V114.glob("*.yaml"))
SEEDS = sorted((REPO_ROOT / "events" / "manifests").glob("*.yaml"))
# Seeds that are wrong on purpose (``nodewright validate`` says how): Karpenter v1.14 refuses them too.
REFUSED_SEEDS = {
    "v1beta1-nodepool-mixed-workload.yaml": 'unknown field "spec.template.spec.requirements[0].weight"',
}


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with ApiServer() as server:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        result = kubectl(path, "apply", "-f", str(REPO_ROOT / "crds"))
        assert result.returncode == 0, result.stderr
        yield path


def _v1_documents(path: Path) -> list[dict[str, Any]]:
    """The seed's Karpenter documents in their v1 form (``nodewright convert``), with the gaps v1
    does not allow filled as ``make demo`` and the conversion webhook fill them (the stack's node
    role; an alias for an EC2NodeClass that selected no AMI); kubelet-only fragments left out."""
    documents = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    conversion = convert_documents(documents)
    found = []
    for index, doc in enumerate(conversion.documents):
        if not is_v1_kind(doc) or index in conversion.partial:
            continue
        if doc["kind"] == "EC2NodeClass":
            spec = doc.setdefault("spec", {})
            if not spec.get("instanceProfile"):
                spec.setdefault("role", "KarpenterNodeRole-demo")
            spec.setdefault("amiSelectorTerms", [{"alias": "al2@latest"}])
        found.append(doc)
    return found


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_karpenter_v114_manifest_applies_with_strict_field_validation(
    kubeconfig: Path, path: Path, tmp_path: Path
) -> None:
    result = kubectl(kubeconfig, "apply", "--validate=strict", "-f", str(path))
    assert result.returncode == 0, result.stderr
    assert "unknown field" not in result.stderr


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_karpenter_v114_manifest_validates_with_no_error(path: Path) -> None:
    report = validate_files([path])
    problems = [f"{d.source.label}: {f}" for d in report.documents for f in d.findings if f.is_error]
    assert problems == []


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_the_seeds_v1_documents_apply_with_strict_field_validation(
    kubeconfig: Path, path: Path, tmp_path: Path
) -> None:
    documents = _v1_documents(path)
    if not documents:
        pytest.skip("no Karpenter document")
    copy = tmp_path / path.name
    copy.write_text(yaml.safe_dump_all(documents))
    result = kubectl(kubeconfig, "apply", "--validate=strict", "-f", str(copy))
    if path.name in REFUSED_SEEDS:
        assert result.returncode != 0
        assert REFUSED_SEEDS[path.name] in result.stderr
    else:
        assert result.returncode == 0, result.stderr


def test_a_manifest_karpenter_refuses_is_refused_here_too(kubeconfig: Path, tmp_path: Path) -> None:
    """The CRDs carry Karpenter's rules, not only its fields: its own docs' EC2NodeClass as printed
    (role and instanceProfile both set) is refused by the API server, as Karpenter v1.14's is."""
    bad = tmp_path / "both.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": "both"},
                "spec": {
                    "role": "r",
                    "instanceProfile": "p",
                    "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                    "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                    "networkInterfaces": [
                        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}
                    ],
                },
            }
        )
    )
    result = kubectl(kubeconfig, "apply", "--validate=strict", "-f", str(bad))
    assert result.returncode != 0
    assert "must specify exactly one of ['role', 'instanceProfile']" in result.stderr
    assert "networkInterfaces must include a primary interface" in result.stderr


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"karpenter.sh/team": "a"}, 'label domain "karpenter.sh" is restricted'),
        ({"karpenter.k8s.aws/anything": "a"}, 'label domain "karpenter.k8s.aws" is restricted'),
        ({"kubernetes.io/hostname": "n"}, 'label "kubernetes.io/hostname" is restricted'),
    ],
)
def test_a_restricted_label_is_refused_as_karpenter_v114_refuses_it(
    kubeconfig: Path, tmp_path: Path, labels: dict[str, str], message: str
) -> None:
    """Karpenter's label rules use Kubernetes' CEL regex library (``find``): the emulator evaluates
    them as kube-apiserver does, and a kubernetes.io label other than the hostname is a user's."""
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "labelled"},
        "spec": {
            "template": {
                "metadata": {"labels": {**labels, "node-role.kubernetes.io/worker": ""}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "requirements": [],
                },
            }
        },
    }
    manifest = tmp_path / "pool.yaml"
    manifest.write_text(yaml.safe_dump(pool))
    result = kubectl(kubeconfig, "apply", "--validate=strict", "-f", str(manifest))
    assert result.returncode != 0
    assert message in result.stderr
