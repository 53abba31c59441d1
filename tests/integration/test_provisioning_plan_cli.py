"""``nodewright plan`` over the seeds' manifests: offline, through the provisioner's planning path."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from nodewright.cli import main

from sandbox.shared_data import REPO_ROOT

SEEDS = REPO_ROOT / "events" / "manifests"


@pytest.fixture(scope="module")
def seed_plan() -> dict[str, Any]:
    """One run over every seed manifest, shared by the module (the catalog loads once)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # 1: the seeds' mixed-workload NodePool is invalid (requirement weights): left out, and said so
        assert main(["plan", "--manifests", str(SEEDS), "--region", "us-west-2", "--json"]) == 1
    return json.loads(printed.getvalue())


def claims_of(plan: dict[str, Any], nodepool: str) -> list[dict[str, Any]]:
    return [c for c in plan["nodeClaims"] if c["nodePool"] == nodepool]


def test_every_seed_pod_lands_on_the_nodepool_its_selectors_and_tolerations_choose(
    seed_plan: dict[str, Any],
) -> None:
    assert seed_plan["pending"] == {}
    assert seed_plan["pods"] == 13
    (web,) = claims_of(seed_plan, "web-app")
    assert web["pods"] == ["default/web-pod"]
    assert set(web["instanceTypes"]) <= {"t3.large", "t3a.large"}
    assert web["zones"] == ["us-west-2a"]
    (gpu,) = claims_of(seed_plan, "gpu-workload")
    assert gpu["pods"] == ["default/gpu-pod"]
    assert gpu["instanceTypes"] == ["g4dn.xlarge"]
    (batch,) = claims_of(seed_plan, "batch-jobs")
    assert batch["capacityTypes"] == ["spot"]
    assert set(batch["instanceTypes"]) <= {"m5.large", "m5a.large"}
    inflate = [p for c in claims_of(seed_plan, "default") for p in c["pods"]]
    assert sorted(inflate) == [f"default/inflate-{i}" for i in range(10)]


def test_candidates_are_listed_cheapest_first_and_priced(seed_plan: dict[str, Any]) -> None:
    for claim in seed_plan["nodeClaims"]:
        assert 1 <= len(claim["instanceTypes"]) <= 60
        assert claim["pricePerHour"] > 0
        type_requirement = [
            r for r in claim["requirements"] if r["key"] == "node.kubernetes.io/instance-type"
        ]
        assert type_requirement[0]["values"] == claim["instanceTypes"]
    assert seed_plan["costPerHour"] == pytest.approx(
        sum(c["pricePerHour"] for c in seed_plan["nodeClaims"]), abs=1e-4
    )


def test_invalid_manifests_are_reported_and_left_out_while_the_rest_is_planned(
    seed_plan: dict[str, Any],
) -> None:
    problems = "\n".join(seed_plan["manifestProblems"])
    assert "NodePool/mixed-workload" in problems
    assert "weight is a NodePool field" in problems
    assert "spec.role" in problems  # the seeds' EC2NodeClasses lack one: planned, but flagged


def test_a_pod_no_nodepool_can_host_gets_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pool.yaml").write_text((SEEDS / "v1beta1-nodepool-web-app.yaml").read_text())
    (tmp_path / "class.yaml").write_text((SEEDS / "v1beta1-ec2nodeclass-default.yaml").read_text())
    (tmp_path / "pod.yaml").write_text((SEEDS / "pod-gpu-pod.yaml").read_text())

    assert main(["plan", "--manifests", str(tmp_path), "--json"]) == 0

    plan = json.loads(capsys.readouterr().out)
    assert plan["nodeClaims"] == []
    assert list(plan["pending"]) == ["default/gpu-pod"]
    assert plan["pending"]["default/gpu-pod"]


def test_a_missing_path_is_an_error_that_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--manifests", "/nonexistent/manifests"]) == 2
    assert "/nonexistent/manifests" in capsys.readouterr().err


CLUSTER_OBJECTS = """
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    topology.kubernetes.io/zone: us-west-2a
    kubernetes.io/hostname: node-a
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    karpenter.sh/capacity-type: on-demand
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: default}
spec:
  nodeName: node-a
  containers: [{name: c, image: x, resources: {requests: {cpu: "3"}}}]
status: {phase: Running}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: agent, image: x, resources: {requests: {cpu: 1500m, memory: 64Mi}}}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-west-2c]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec: {storageClassName: gp3, volumeName: pv-data, accessModes: [ReadWriteOnce]}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
overhead: {podFixed: {cpu: 250m, memory: 160Mi}}
scheduling:
  nodeSelector: {kubernetes.io/arch: amd64}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80}]}
"""

WORKLOAD = """
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: stateful, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 3500m}}}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: sandboxed, namespace: default}
spec:
  runtimeClassName: kata
  containers: [{name: c, image: x, resources: {requests: {cpu: 3500m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: lost, namespace: default}
spec:
  runtimeClassName: missing
  containers: [{name: c, image: x}]
"""


@pytest.fixture
def cluster_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    (tmp_path / "pool.yaml").write_text((SEEDS / "v1beta1-nodepool-default.yaml").read_text())
    (tmp_path / "class.yaml").write_text((SEEDS / "v1beta1-ec2nodeclass-default.yaml").read_text())
    (tmp_path / "cluster.yaml").write_text(CLUSTER_OBJECTS)
    (tmp_path / "workload.yaml").write_text(WORKLOAD)
    assert main(["plan", "--manifests", str(tmp_path), "--region", "us-west-2", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def claim_with(plan: dict[str, Any], pod: str) -> dict[str, Any]:
    return next(c for c in plan["nodeClaims"] if pod in c["pods"])


def test_pods_fit_existing_nodes_and_the_json_says_which(cluster_plan: dict[str, Any]) -> None:
    # node-a has 4 CPUs, 3 of them taken by the bound pod: the 500m pod fits there.
    assert cluster_plan["existingCapacity"] == {"default/small": "node/node-a"}


def test_volumes_daemonsets_and_runtime_classes_shape_the_new_claims(cluster_plan: dict[str, Any]) -> None:
    stateful = claim_with(cluster_plan, "default/stateful")
    assert stateful["zones"] == ["us-west-2c"]  # the PV's EBS CSI zone, normalized
    sandboxed = claim_with(cluster_plan, "default/sandboxed")
    assert sandboxed["labels"]["kubernetes.io/arch"] == "amd64"  # RuntimeClass nodeSelector
    assert sandboxed["requests"]["cpu"] == "3750m"  # RuntimeClass overhead.podFixed counts
    # 3.5 CPUs (+ 250m overhead) + the 1.5-CPU DaemonSet: no type of 4 vCPUs or fewer holds them.
    from nodewright.cli._offline import catalog_data

    types = catalog_data("us-west-2").types
    for claim in (stateful, sandboxed):
        assert claim["instanceTypes"]
        assert min(types[t]["VCpuInfo"]["DefaultVCpus"] for t in claim["instanceTypes"]) > 4
    assert "RuntimeClass 'missing' not found" in cluster_plan["pending"]["default/lost"]


def test_every_claim_shows_labels_taints_and_its_ebs_share(cluster_plan: dict[str, Any]) -> None:
    for claim in cluster_plan["nodeClaims"]:
        assert claim["labels"]["karpenter.sh/nodepool"] == claim["nodePool"]
        assert claim["taints"] == []
        assert claim["ebsPricePerHour"] > 0
        assert claim["pricePerHour"] == pytest.approx(
            claim["instancePricePerHour"] + claim["ebsPricePerHour"]
        )


def test_unused_kinds_are_reported_as_ignored(cluster_plan: dict[str, Any]) -> None:
    assert len(cluster_plan["ignored"]) == 1
    assert "a plan does not use Service objects" in cluster_plan["ignored"][0]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-1"}, ("eu-west-1", "AWS_REGION")),
        ({"AWS_DEFAULT_REGION": "us-east-2"}, ("us-east-2", "AWS_DEFAULT_REGION")),
    ],
)
def test_the_default_region_follows_the_environment_and_is_said(
    env: dict[str, str],
    expected: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["plan", "--manifests", str(SEEDS / "pod-web-pod.yaml"), "--json"]) == 0
    region = json.loads(capsys.readouterr().out)["region"]
    assert (region["name"], region["from"]) == expected


def test_the_shared_config_region_is_used_when_no_variable_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile ops]\nregion = ap-southeast-2\n")
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "ops")
    assert main(["plan", "--manifests", str(SEEDS / "pod-web-pod.yaml")]) == 0
    assert "region ap-southeast-2 (the shared config, profile ops)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("workload", "complaint"),
    [
        (
            "spec: {replicas: ten, template: {spec: {containers: [{name: c}]}}}",
            "spec.replicas: must be a whole number",
        ),
        ("spec: {replicas: 2, template: [1]}", "spec.template: must be an object"),
        (
            "spec: {replicas: -1, template: {spec: {containers: [{name: c}]}}}",
            "spec.replicas: must be a whole number",
        ),
        (
            "spec: {replicas: 100000000, template: {spec: {containers: [{name: c}]}}}",
            "more than a plan simulates",
        ),
        ("spec: {replicas: 1, template: {spec: [1]}}", "spec.template.spec: must be an object"),
    ],
    ids=["replicas-text", "template-list", "replicas-negative", "replicas-huge", "pod-spec-list"],
)
def test_a_workload_a_plan_cannot_read_is_reported_and_the_rest_is_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workload: str, complaint: str
) -> None:
    (tmp_path / "bad.yaml").write_text(
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: bad}}\n{workload}\n"
    )
    (tmp_path / "pod.yaml").write_text((SEEDS / "pod-web-pod.yaml").read_text())

    assert main(["plan", "--manifests", str(tmp_path), "--json"]) == 1

    plan = json.loads(capsys.readouterr().out)
    (problem,) = [p for p in plan["manifestProblems"] if "bad.yaml" in p]
    assert "Deployment/bad" in problem
    assert complaint in problem
    assert plan["pods"] == 1, "the valid pod is still planned"


def test_a_directory_without_manifests_and_an_empty_file_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.yaml").write_text("")
    assert main(["plan", "--manifests", str(tmp_path / "empty"), str(tmp_path / "empty.yaml"), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["manifestProblems"]
    assert any("is a directory with no *.yaml" in p for p in problems)
    assert any("holds no YAML document" in p for p in problems)


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (b"apiVersion: v1\nclusters: [{name: a\n", "not valid YAML"),
        (b"- name: a\n- name: b\n", "a kubeconfig is a YAML mapping"),
        (b"apiVersion: v1\nkind: Config\nclusters: {name: a}\n", "clusters must be a list"),
        (b"\xff\xfe\x00binary", "not UTF-8 text"),
        (b"", "empty"),
    ],
    ids=["malformed-yaml", "list-shaped", "clusters-mapping", "binary", "empty"],
)
def test_an_unusable_kubeconfig_is_one_line_naming_it_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, complaint: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(content)

    for consolidate in ([], ["--consolidate"]):
        assert main(["plan", "--kubeconfig", str(kubeconfig), "--region", "us-west-2", *consolidate]) == 2

        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"nodewright plan: cannot load kubeconfig '{kubeconfig}': "), line
        assert complaint in line
        assert line.endswith("point --kubeconfig at a kubeconfig file"), line


def test_a_directory_given_as_kubeconfig_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--kubeconfig", str(tmp_path), "--region", "us-west-2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"cannot load kubeconfig '{tmp_path}': it is a directory" in line


def test_a_prices_file_it_cannot_use_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text('{"prices": {"m5.large": "cheap"}}')
    args = ["plan", "--manifests", str(SEEDS / "pod-web-pod.yaml"), "--region", "us-west-2"]
    assert main([*args, "--prices", str(prices)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    why = "m5.large: 'cheap' is not a price (USD per hour, a number)"
    assert line == f"nodewright plan: cannot use prices file {prices}: {why}"


def test_a_cluster_that_refuses_the_identity_is_one_line_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sandbox.apiserver import ApiServer

    with ApiServer() as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "config", token=server.add_identity("alice"))
        assert main(["plan", "--kubeconfig", str(kubeconfig), "--region", "us-west-2"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("nodewright plan: reading the cluster failed: not allowed: "), line
    assert 'User "alice" cannot list' in line
    assert "aws eks associate-access-policy" in line
