"""What node a sandbox kubelet registers for an instance (capacity, allocatable, architecture), and
what its bootstrap reads in its user data (the cluster, the kubelet's labels and taints)."""

from __future__ import annotations

import base64

import pytest
from kubernetes.utils.quantity import parse_quantity

from sandbox.aws.eks_amis import read_user_data
from sandbox.simulators.kubelet import (
    architecture,
    kube_reserved_millicores,
    max_pods,
    node_resources,
)

M5_LARGE = {
    "InstanceType": "m5.large",
    "Hypervisor": "nitro",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "ProcessorInfo": {"Manufacturer": "Intel", "SupportedArchitectures": ["x86_64"]},
    "NetworkInfo": {
        "MaximumNetworkInterfaces": 3,
        "Ipv4AddressesPerInterface": 10,
        "EncryptionInTransitSupported": False,
    },
}
M6G_LARGE = {
    **M5_LARGE,
    "InstanceType": "m6g.large",
    "ProcessorInfo": {"Manufacturer": "AWS", "SupportedArchitectures": ["arm64"]},
}
G4DN_XLARGE = {
    **M5_LARGE,
    "InstanceType": "g4dn.xlarge",
    "VCpuInfo": {"DefaultVCpus": 4},
    "MemoryInfo": {"SizeInMiB": 16384},
    "GpuInfo": {
        "Gpus": [{"Count": 1, "Name": "T4", "Manufacturer": "NVIDIA", "MemoryInfo": {"SizeInMiB": 16384}}]
    },
}


def test_eni_limited_max_pods_matches_eks() -> None:
    assert max_pods(M5_LARGE) == 29  # the EKS AMI's eni-max-pods.txt value for m5.large


def test_kube_reserved_cpu_follows_the_eks_steps() -> None:
    assert kube_reserved_millicores(1) == 60
    assert kube_reserved_millicores(2) == 70
    assert kube_reserved_millicores(4) == 80
    assert kube_reserved_millicores(8) == 90


def test_capacity_and_allocatable_of_an_m5_large() -> None:
    capacity, allocatable = node_resources(M5_LARGE)
    assert capacity["cpu"] == "2"
    assert capacity["pods"] == "29"
    assert parse_quantity(capacity["memory"]) == (8192 - 615) * 1024**2  # 7.5 % VM overhead
    assert parse_quantity(allocatable["cpu"]) == parse_quantity("1930m")
    assert parse_quantity(allocatable["memory"]) == (7577 - (11 * 29 + 255) - 100) * 1024**2
    assert parse_quantity(allocatable["ephemeral-storage"]) < parse_quantity(capacity["ephemeral-storage"])


def test_gpu_instances_advertise_nvidia_gpus() -> None:
    capacity, allocatable = node_resources(G4DN_XLARGE)
    assert capacity["nvidia.com/gpu"] == allocatable["nvidia.com/gpu"] == "1"


def test_the_architecture_of_an_instance_type() -> None:
    assert architecture(M6G_LARGE) == "arm64"
    assert architecture(M5_LARGE) == "amd64"


def encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# User data as Karpenter's AWS provider writes it for each AMI family (labels, taints, max pods).
LABELS = {"karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "default", "team": "a"}
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
)
AL2 = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://demo.example' --b64-cluster-ca 'Q0E=' \\
--dns-cluster-ip '10.100.0.10' \\
--use-max-pods false \\
--kubelet-extra-args '--node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=a" \
--register-with-taints="dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute" --max-pods=110'
--//--
"""
AL2023 = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: demo
    apiServerEndpoint: https://demo.example
    certificateAuthority: Q0E=
    cidr: 10.100.0.0/16
  kubelet:
    config:
      maxPods: 58
      clusterDNS:
      - 10.100.0.10
    flags:
    - --node-labels=karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=a
    - --register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute

--//--
"""
BOTTLEROCKET = """[settings.kubernetes]
api-server = "https://demo.example"
cluster-certificate = "Q0E="
cluster-name = "demo"
max-pods = 29

[settings.kubernetes.node-labels]
"karpenter.sh/capacity-type" = "spot"
"karpenter.sh/nodepool" = "default"
team = "a"

[settings.kubernetes.node-taints]
dedicated = ["gpu:NoSchedule"]
"karpenter.sh/unregistered" = [":NoExecute"]
"""
WINDOWS = """<powershell>
[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"
& $EKSBootstrapScriptFile -EKSClusterName 'demo' -APIServerEndpoint 'https://demo.example' \
-Base64ClusterCA 'Q0E=' -KubeletExtraArgs '--node-labels="karpenter.sh/capacity-type=spot,\
karpenter.sh/nodepool=default,team=a" --register-with-taints="dedicated=gpu:NoSchedule,\
karpenter.sh/unregistered:NoExecute" --max-pods=110' -DNSClusterIP '10.100.0.10'
</powershell>"""


@pytest.mark.parametrize(
    ("family", "text", "pods"),
    [
        ("al2", AL2, 110),
        ("al2023", AL2023, 58),
        ("bottlerocket", BOTTLEROCKET, 29),
        ("windows", WINDOWS, 110),
    ],
)
def test_each_familys_bootstrap_gives_the_kubelet_its_cluster_labels_and_taints(
    family: str, text: str, pods: int
) -> None:
    boot = read_user_data(family, encoded(text))
    assert boot.refused == ""
    assert boot.cluster == "demo"
    assert dict(boot.labels) == LABELS
    assert boot.taints == TAINTS
    assert boot.max_pods == pods


def test_nodeadm_reads_taints_from_the_kubelet_configuration_and_lets_flags_win() -> None:
    config_only = AL2023.replace(
        "    - --register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute\n", ""
    )
    config_only = config_only.replace(
        "      maxPods: 58\n",
        "      maxPods: 58\n"
        "      registerWithTaints:\n      - {key: only, value: config, effect: NoExecute}\n",
    )
    assert read_user_data("al2023", encoded(config_only)).taints == (
        {"key": "only", "value": "config", "effect": "NoExecute"},
    )
    both = config_only.replace(
        "    flags:\n", "    flags:\n    - --register-with-taints=flag:NoSchedule\n    - --max-pods=7\n"
    )
    boot = read_user_data("al2023", encoded(both))
    assert boot.taints == ({"key": "flag", "effect": "NoSchedule"},)
    assert boot.max_pods == 7


@pytest.mark.parametrize(
    ("family", "text", "refusal"),
    [
        ("al2023", AL2023.replace("team=a", "node-role.kubernetes.io/worker="), "unknown 'kubernetes.io'"),
        ("al2", AL2.replace("dedicated=gpu:NoSchedule", "dedicated=gpu:NoRun"), "invalid taint spec"),
        (
            "bottlerocket",
            BOTTLEROCKET.replace('team = "a"', '"kubernetes.io/role" = "x"'),
            "unknown 'kubernetes.io'",
        ),
        ("windows", WINDOWS.replace("team=a", "team"), "malformed pair"),
        ("bottlerocket", "[settings.kubernetes\n", "not valid TOML"),
    ],
)
def test_a_kubelet_given_flags_it_refuses_does_not_start(family: str, text: str, refusal: str) -> None:
    assert refusal in read_user_data(family, encoded(text)).refused


def test_user_data_that_names_no_cluster_joins_none() -> None:
    assert read_user_data("al2023", "").cluster == ""
    assert read_user_data("al2", encoded("#!/bin/bash\necho hello\n")).cluster == ""
    assert (
        read_user_data("bottlerocket", encoded("[settings.host-containers.admin]\nenabled = true\n")).cluster
        == ""
    )


@pytest.mark.parametrize(
    ("family", "sandbox_family"),
    [("AL2", "al2"), ("AL2023", "al2023"), ("Bottlerocket", "bottlerocket"), ("Windows2022", "windows")],
)
def test_the_products_user_data_registers_the_node_with_its_labels_and_taints(
    family: str, sandbox_family: str
) -> None:
    """Nodewright's user data read back as each family's bootstrap reads it."""
    from nodewright.cloud.eks import ClusterInfo
    from nodewright.cloud.userdata import NodeBootstrap, render

    cluster = ClusterInfo("demo", "https://demo.example", "Q0E=", "1.31", "10.100.0.0/16")
    spec = NodeBootstrap(cluster=cluster, labels=LABELS, taints=TAINTS, kubelet={"maxPods": 42})
    boot = read_user_data(sandbox_family, encoded(render(family, spec)))
    assert (boot.refused, boot.cluster) == ("", "demo")
    assert dict(boot.labels) == LABELS
    assert boot.taints == TAINTS
    assert boot.max_pods == 42
