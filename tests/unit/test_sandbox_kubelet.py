"""What node a sandbox kubelet registers for an instance type (capacity, allocatable, labels)."""

from __future__ import annotations

from kubernetes.utils.quantity import parse_quantity

from sandbox.simulators.kubelet import (
    instance_type_labels,
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
    labels = instance_type_labels(G4DN_XLARGE)
    assert labels["karpenter.k8s.aws/instance-gpu-name"] == "t4"
    assert labels["karpenter.k8s.aws/instance-gpu-count"] == "1"


def test_well_known_labels_of_an_instance_type() -> None:
    labels = instance_type_labels(M6G_LARGE)
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels["node.kubernetes.io/instance-type"] == "m6g.large"
    assert labels["karpenter.k8s.aws/instance-family"] == "m6g"
    assert labels["karpenter.k8s.aws/instance-category"] == "m"
    assert labels["karpenter.k8s.aws/instance-generation"] == "6"
    assert labels["karpenter.k8s.aws/instance-size"] == "large"
    assert labels["karpenter.k8s.aws/instance-cpu-manufacturer"] == "aws"
    assert labels["karpenter.k8s.aws/instance-memory"] == "8192"
    assert instance_type_labels(M5_LARGE)["kubernetes.io/arch"] == "amd64"
