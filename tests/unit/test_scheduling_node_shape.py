"""The node an EC2NodeClass makes of an instance type (``NodeShape``): its OS and its ephemeral storage,
as Karpenter v1.14's AWS provider models them (``pkg/providers/instancetype/types.go``:
``ephemeralStorage``, ``getOS``, the Windows family's feature flags, ``privateIPv4Address``)."""

from __future__ import annotations

from nodewright.api import labels as wk
from nodewright.scheduling import KubeletSettings, NodeShape, Offering, instance_type_from_ec2
from nodewright.scheduling.instancetypes import GB, PRIVATE_IPV4_ADDRESS
from nodewright.scheduling.resources import EPHEMERAL_STORAGE, GIB, PODS

M5_LARGE = {
    "InstanceType": "m5.large",
    "VCpuInfo": {"DefaultVCpus": 2},
    "MemoryInfo": {"SizeInMiB": 8192},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "NetworkInfo": {"MaximumNetworkInterfaces": 3, "Ipv4AddressesPerInterface": 10},
}
# i3en.2xlarge: two 2,500 GB NVMe instance-store disks.
I3EN = {
    "InstanceType": "i3en.2xlarge",
    "VCpuInfo": {"DefaultVCpus": 8},
    "MemoryInfo": {"SizeInMiB": 65536},
    "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    "NetworkInfo": {"MaximumNetworkInterfaces": 4, "Ipv4AddressesPerInterface": 15},
    "InstanceStorageInfo": {"TotalSizeInGB": 5000, "NvmeSupport": "required"},
}
M6G = {**M5_LARGE, "InstanceType": "m6g.large", "ProcessorInfo": {"SupportedArchitectures": ["arm64"]}}
OFFERING = [Offering("us-east-1a", "on-demand", 0.1)]


def test_without_a_shape_the_node_has_the_families_default_20gi_root_volume() -> None:
    it = instance_type_from_ec2(M5_LARGE, OFFERING)
    assert it.capacity[EPHEMERAL_STORAGE] == 20 * GIB
    assert it.labels[wk.OS] == "linux"
    assert wk.WINDOWS_BUILD not in it.labels


def test_the_root_volume_sets_ephemeral_storage_and_its_allocatable() -> None:
    it = instance_type_from_ec2(M5_LARGE, OFFERING, shape=NodeShape(root_storage=200 * GIB))
    assert it.capacity[EPHEMERAL_STORAGE] == 200 * GIB
    # kube-reserved 1 GiB, eviction threshold nodefs.available 10 % of the capacity
    assert it.allocatable[EPHEMERAL_STORAGE] == 200 * GIB - GIB - 20 * GIB
    assert it.allocatable[EPHEMERAL_STORAGE] >= 100 * GIB


def test_raid0_counts_the_instance_store_not_the_root_volume() -> None:
    shape = NodeShape(root_storage=20 * GIB, instance_store_raid0=True)
    it = instance_type_from_ec2(I3EN, OFFERING, shape=shape)
    assert it.capacity[EPHEMERAL_STORAGE] == 5000 * GB
    assert it.allocatable[EPHEMERAL_STORAGE] == 5000 * GB - GIB - 500 * GB


def test_raid0_on_a_type_without_instance_store_keeps_the_root_volume() -> None:
    shape = NodeShape(root_storage=30 * GIB, instance_store_raid0=True)
    it = instance_type_from_ec2(M5_LARGE, OFFERING, shape=shape)
    assert it.capacity[EPHEMERAL_STORAGE] == 30 * GIB


def test_without_raid0_an_instance_store_type_has_only_its_root_volume() -> None:
    it = instance_type_from_ec2(I3EN, OFFERING, shape=NodeShape(root_storage=20 * GIB))
    assert it.capacity[EPHEMERAL_STORAGE] == 20 * GIB


def test_a_windows_node_is_labelled_windows_with_its_build_and_110_pods() -> None:
    shape = NodeShape(os="windows", windows_build="10.0.20348", root_storage=50 * GIB)
    it = instance_type_from_ec2(M5_LARGE, OFFERING, shape=shape)
    assert it.labels[wk.OS] == "windows"
    assert it.labels[wk.WINDOWS_BUILD] == "10.0.20348"
    assert it.capacity[PODS] == 110  # not the ENI limit (29 on m5.large)
    assert it.capacity[PRIVATE_IPV4_ADDRESS] == 9  # IPv4 addresses per interface - 1
    assert it.capacity[EPHEMERAL_STORAGE] == 50 * GIB
    assert it.requirements.get(wk.OS).has("windows")
    assert not it.requirements.get(wk.OS).has("linux")


def test_a_windows_node_still_takes_max_pods_from_the_kubelet_settings() -> None:
    shape = NodeShape(os="windows", windows_build="10.0.17763")
    it = instance_type_from_ec2(M5_LARGE, OFFERING, KubeletSettings(max_pods=40), shape)
    assert it.capacity[PODS] == 40


def test_windows_excludes_arm64_types_and_linux_excludes_none() -> None:
    windows = NodeShape(os="windows", windows_build="10.0.26100")
    assert windows.excludes(M6G) is not None
    assert windows.excludes(M5_LARGE) is None
    assert NodeShape().excludes(M6G) is None
