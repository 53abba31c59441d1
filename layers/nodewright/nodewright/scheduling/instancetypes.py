"""The instance type model: labels, capacity and allocatable as EKS nodes really have them.

``instance_type_from_ec2`` turns one DescribeInstanceTypes item (the AWS JSON shape) plus its
offerings into an ``InstanceType``, deriving Karpenter's well-known labels and the kubelet's
reservations:

- memory capacity: the VM loses ``VM_MEMORY_OVERHEAD`` (7.5 %) to the hypervisor/firmware until
  a node of the type is observed;
- pods: ENIs x (IPv4 addresses per ENI - 1) + 2, or the kubelet's ``maxPods``, capped by
  ``podsPerCore`` x vCPUs;
- kube-reserved: memory 11 MiB x pods + 255 MiB; cpu 6 % of the first core, 1 % of the second,
  0.5 % of the next two, 0.25 % of the rest; ephemeral-storage 1 GiB;
- eviction threshold: memory.available 100 MiB, nodefs.available 10 %;
- the NodeClass kubelet settings override maxPods, podsPerCore, systemReserved, kubeReserved and
  evictionHard;
- the ``NodeShape`` the EC2NodeClass gives every node: its OS (Windows: ``kubernetes.io/os=windows``,
  ``node.kubernetes.io/windows-build``, 110 pods rather than the ENI limit, the VPC resource
  controller's ``vpc.amazonaws.com/PrivateIPv4Address``) and its ephemeral-storage: the volume the
  kubelet's filesystem is on, or with ``instanceStorePolicy: RAID0`` the type's instance store
  (``TotalSizeInGB`` decimal gigabytes), as Karpenter's AWS provider computes it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as wk
from nodewright.scheduling.requirements import Requirement, Requirements
from nodewright.scheduling.resources import (
    AMD_GPU,
    CPU,
    EFA,
    EPHEMERAL_STORAGE,
    GIB,
    HABANA_GAUDI,
    MEMORY,
    MIB,
    NEURON,
    NVIDIA_GPU,
    PODS,
    Resources,
    parse_resource,
)

VM_MEMORY_OVERHEAD = 0.075
OS_LINUX = "linux"
OS_WINDOWS = "windows"
# What the VPC resource controller gives a Windows node per secondary IPv4 address of its primary
# interface (Karpenter's privateIPv4Address: IPv4 addresses per interface - 1).
PRIVATE_IPV4_ADDRESS = "vpc.amazonaws.com/PrivateIPv4Address"
WINDOWS_MAX_PODS = 110  # a family without ENI-limited pod density (Karpenter's default max pods)
GB = 1000**3  # instance store sizes are decimal gigabytes (Karpenter: "%dG")
# The tenancies every type is offered in (``karpenter.k8s.aws/instance-tenancy``).
TENANCIES = frozenset({wk.TENANCY_DEFAULT, wk.TENANCY_DEDICATED})
DEFAULT_EPHEMERAL_STORAGE = 20 * GIB  # the AMI families' default root volume
_CPU_RESERVATION_LADDER = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 40, 0.0025))
_NAME = re.compile(r"^([a-z]+)(\d+)([a-z0-9-]*)\.([a-z0-9-]+)$")
# The architectures Karpenter's AWS provider asks DescribeInstanceTypes for: mac instances
# (x86_64_mac, arm64_mac) need dedicated hosts and are not offered.
_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


def unsupported_reason(info: Mapping[str, Any]) -> str | None:
    """Why Karpenter's AWS provider would not offer this DescribeInstanceTypes item, or None.

    Its DescribeInstanceTypes filters: ``supported-virtualization-type = hvm`` and
    ``processor-info.supported-architecture in (x86_64, arm64)``.
    """
    virtualization = info.get("SupportedVirtualizationTypes")
    if virtualization is not None and "hvm" not in virtualization:
        return f"virtualization {virtualization}: only HVM types are offered"
    architectures = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
    if not any(a in _ARCH for a in architectures):
        return f"architecture {architectures}: only x86_64 and arm64 (mac types need dedicated hosts)"
    return None


@dataclass(frozen=True, slots=True)
class Offering:
    """Where and how a type can be bought: one zone (and its zone ID, ``use1-az1``, when the
    EC2NodeClass's subnets name it), one capacity type, its price per hour.

    A ``reserved`` offering is one capacity reservation (Karpenter's reserved offerings): its id,
    type (``default`` or ``capacity-block``), whether it is interruptible, and how many instances it
    can still take (``reservation_capacity``, which ``scheduling.reservations`` shares among a
    plan's NodeClaims)."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    zone_id: str = ""
    reservation_id: str = ""
    reservation_type: str = ""
    interruptible: bool = False
    reservation_capacity: int = 0
    # A NodeOverlay set this price (Karpenter's ``IsPriceOverlaid``): the launch then ranks by it.
    price_overlaid: bool = False

    def label(self, key: str) -> str | None:
        """The value this offering gives a reservation label (``None``: the node has no such label)."""
        return reservation_labels(self).get(key)


def reservation_labels(offering: Offering) -> dict[str, str]:
    """The ``karpenter.k8s.aws/capacity-reservation-*`` labels a node launched from the offering
    carries (none for on-demand and spot offerings)."""
    if not offering.reservation_id:
        return {}
    return {
        wk.CAPACITY_RESERVATION_ID: offering.reservation_id,
        wk.CAPACITY_RESERVATION_TYPE: offering.reservation_type or "default",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: str(offering.interruptible).lower(),
    }


RESERVATION_KEYS = (
    wk.CAPACITY_RESERVATION_ID,
    wk.CAPACITY_RESERVATION_TYPE,
    wk.CAPACITY_RESERVATION_INTERRUPTIBLE,
)


def _offering_allowed(offering: Offering, requirements: Requirements) -> bool:
    """Whether the requirements allow the offering's reservation labels and, for a reserved offering,
    name ``reserved`` among their capacity types: as in Karpenter, a NodePool that says nothing about
    the capacity type launches no reserved capacity (its default is on-demand)."""
    if offering.capacity_type == wk.CAPACITY_TYPE_RESERVED and requirements.get(wk.CAPACITY_TYPE) is None:
        return False
    for key in RESERVATION_KEYS:
        requirement = requirements.get(key)
        if requirement is None:
            continue
        value = offering.label(key)
        if value is None:
            if not requirement.allows_absent:
                return False
        elif not requirement.has(value):
            return False
    return True


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What an EC2NodeClass makes of every node besides its instance type (``cloud.catalog.node_shape``
    reads it from the EC2NodeClass): the OS its AMI family runs, and the ephemeral storage its kubelet
    sees — ``root_storage`` bytes (the volume the kubelet's filesystem is on), or, with
    ``instance_store_raid0``, the type's instance store when it has one."""

    os: str = OS_LINUX
    windows_build: str = ""
    root_storage: int = DEFAULT_EPHEMERAL_STORAGE
    instance_store_raid0: bool = False

    @property
    def windows(self) -> bool:
        return self.os == OS_WINDOWS

    def excludes(self, info: Mapping[str, Any]) -> str | None:
        """Why no node of this shape can be of the type: the EKS-optimized Windows AMIs are x86_64 only
        (Karpenter publishes no OS for an arm64 type of a Windows family)."""
        if self.windows and _arch(info) != "amd64":
            return "Windows Server AMIs run on x86_64 types only"
        return None

    def ephemeral_storage(self, info: Mapping[str, Any]) -> int:
        """The node's ephemeral-storage capacity (Karpenter's ``ephemeralStorage``)."""
        store = (info.get("InstanceStorageInfo") or {}).get("TotalSizeInGB")
        if self.instance_store_raid0 and store:
            return int(store) * GB
        return self.root_storage


@dataclass(frozen=True, slots=True)
class KubeletSettings:
    """The NodeClass ``kubelet`` block, as far as it changes allocatable (quantities as strings)."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Overhead:
    kube_reserved: Resources
    system_reserved: Resources
    eviction_threshold: Resources

    def total(self) -> Resources:
        result: Resources = {}
        for part in (self.kube_reserved, self.system_reserved, self.eviction_threshold):
            for name, value in part.items():
                result[name] = result.get(name, 0) + value
        return result


@dataclass(eq=False, slots=True)
class InstanceType:
    """One EC2 instance type as the scheduler sees it."""

    name: str
    labels: dict[str, str]
    capacity: Resources
    overhead: Overhead
    offerings: tuple[Offering, ...]
    allocatable: Resources = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.allocatable:
            reserved = self.overhead.total()
            self.allocatable = {k: max(0, v - reserved.get(k, 0)) for k, v in self.capacity.items()}

    @property
    def requirements(self) -> Requirements:
        """Its labels plus the zones (and zone IDs), capacity types and tenancies it is offered in
        (available ones). Every type can run as a Dedicated Instance: the launch chooses the tenancy
        (``karpenter.k8s.aws/instance-tenancy``, default unless only dedicated is allowed)."""
        available = [o for o in self.offerings if o.available]
        found = [
            Requirement(wk.ZONE, False, frozenset(o.zone for o in available)),
            Requirement(wk.CAPACITY_TYPE, False, frozenset(o.capacity_type for o in available)),
            Requirement(wk.INSTANCE_TENANCY, False, TENANCIES),
        ]
        if available and all(o.reservation_id for o in available):  # only reserved: their labels
            for key in RESERVATION_KEYS:
                found.append(Requirement(key, False, frozenset(o.label(key) or "" for o in available)))
        zone_ids = frozenset(o.zone_id for o in available if o.zone_id)
        if zone_ids:
            found.append(Requirement(wk.TOPOLOGY_ZONE_ID, False, zone_ids))
        return Requirements.from_labels(self.labels).intersect(Requirements(found))

    def available_offerings(self, requirements: Requirements | None = None) -> list[Offering]:
        """Available offerings whose zone (or zone ID) and capacity type the requirements allow,
        cheapest first."""
        zone = requirements.get(wk.ZONE) if requirements else None
        zone_id = requirements.get(wk.TOPOLOGY_ZONE_ID) if requirements else None
        capacity_type = requirements.get(wk.CAPACITY_TYPE) if requirements else None
        found = [
            o
            for o in self.offerings
            if o.available
            and (zone is None or zone.has(o.zone))
            and (zone_id is None or (bool(o.zone_id) and zone_id.has(o.zone_id)))
            and (capacity_type is None or capacity_type.has(o.capacity_type))
            and (requirements is None or _offering_allowed(o, requirements))
        ]
        return sorted(found, key=lambda o: (o.price, o.zone, o.capacity_type, o.reservation_id))

    def cheapest_price(self, requirements: Requirements | None = None) -> float | None:
        offerings = self.available_offerings(requirements)
        return offerings[0].price if offerings else None


def _quantities(values: Mapping[str, str]) -> Resources:
    return {name: parse_resource(name, value) for name, value in values.items()}


def _eviction(values: Mapping[str, str], capacity: Resources) -> Resources:
    """evictionHard signals (``memory.available``, ``nodefs.available``) as reserved amounts."""
    signal_to_resource = {"memory.available": MEMORY, "nodefs.available": EPHEMERAL_STORAGE}
    result: Resources = {}
    for signal, value in values.items():
        resource = signal_to_resource.get(signal)
        if resource is None:
            continue
        if value.endswith("%"):
            result[resource] = math.ceil(capacity.get(resource, 0) * float(value[:-1]) / 100)
        else:
            result[resource] = parse_resource(resource, value)
    return result


EXOTIC_RESOURCES = (NVIDIA_GPU, AMD_GPU, NEURON, HABANA_GAUDI)


def is_exotic(instance_type: InstanceType) -> bool:
    """Metal sizes and accelerator types: launched only when nothing generic holds the pods
    (Karpenter's AWS provider, filterExoticInstanceTypes)."""
    if "metal" in instance_type.labels.get(wk.INSTANCE_SIZE, ""):
        return True
    return any(instance_type.capacity.get(r, 0) > 0 for r in EXOTIC_RESOURCES)


def kube_reserved_cpu(millicores: int) -> int:
    """The EKS AMI's CPU reservation ladder, in millicores (rounded up)."""
    reserved = 0.0
    for start, end, share in _CPU_RESERVATION_LADDER:
        if millicores > start:
            reserved += (min(millicores, end) - start) * share
    return math.ceil(reserved)


def eni_limited_pods(info: Mapping[str, Any]) -> int:
    network = info.get("NetworkInfo") or {}
    enis = int(network.get("MaximumNetworkInterfaces") or 0)
    ips = int(network.get("Ipv4AddressesPerInterface") or 0)
    return max(enis * (ips - 1) + 2, 1) if enis and ips else 110


def _lower(value: object) -> str:
    return str(value).lower().replace(" ", "-")


def _arch(info: Mapping[str, Any]) -> str:
    """The Kubernetes architecture of a type (its first supported one Karpenter offers)."""
    architectures = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or ["x86_64"]
    return next((_ARCH[a] for a in architectures if a in _ARCH), str(architectures[0]))


def _labels(
    info: Mapping[str, Any], vcpus: int, memory_mib: int, arch: str, shape: NodeShape
) -> dict[str, str]:
    name = str(info["InstanceType"])
    result = {
        wk.INSTANCE_TYPE: name,
        wk.ARCH: arch,
        wk.OS: shape.os,
        wk.INSTANCE_CPU: str(vcpus),
        wk.INSTANCE_MEMORY: str(memory_mib),
        wk.INSTANCE_FAMILY: name.split(".", maxsplit=1)[0],
        wk.INSTANCE_SIZE: name.rsplit(".", maxsplit=1)[-1],
    }
    if shape.windows_build:
        result[wk.WINDOWS_BUILD] = shape.windows_build
    match = _NAME.match(name)
    if match:
        result[wk.INSTANCE_CATEGORY] = match.group(1)
        result[wk.INSTANCE_GENERATION] = match.group(2)
    result[wk.INSTANCE_CAPABILITY_FLEX] = str("-flex" in name.split(".", maxsplit=1)[0]).lower()
    result[wk.INSTANCE_NITRO_ENCLAVES_SUPPORTED] = str(
        info.get("NitroEnclavesSupport") == "supported"
    ).lower()
    processor = info.get("ProcessorInfo") or {}
    if processor.get("Manufacturer"):
        result[wk.INSTANCE_CPU_MANUFACTURER] = _lower(processor["Manufacturer"])
    if processor.get("SustainedClockSpeedInGhz"):
        mhz = round(float(processor["SustainedClockSpeedInGhz"]) * 1000)
        result[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ] = str(mhz)
    if info.get("Hypervisor"):
        result[wk.INSTANCE_HYPERVISOR] = str(info["Hypervisor"])
    network = info.get("NetworkInfo") or {}
    result[wk.INSTANCE_ENCRYPTION_IN_TRANSIT] = str(bool(network.get("EncryptionInTransitSupported"))).lower()
    cards = network.get("NetworkCards") or []
    if cards and cards[0].get("BaselineBandwidthInGbps"):
        result[wk.INSTANCE_NETWORK_BANDWIDTH] = str(
            round(sum(c.get("BaselineBandwidthInGbps", 0) for c in cards) * 1000)
        )
    ebs_info = info.get("EbsInfo") or {}
    ebs = (ebs_info.get("EbsOptimizedInfo") or {}).get("MaximumBandwidthInMbps")
    if ebs and ebs_info.get("EbsOptimizedSupport", "default") == "default":
        result[wk.INSTANCE_EBS_BANDWIDTH] = str(ebs)
    storage = info.get("InstanceStorageInfo") or {}
    if storage.get("NvmeSupport") in ("required", "supported") and storage.get("TotalSizeInGB"):
        result[wk.INSTANCE_LOCAL_NVME] = str(storage["TotalSizeInGB"])
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        gpu = gpus[0]
        result[wk.INSTANCE_GPU_NAME] = _lower(gpu.get("Name", ""))
        result[wk.INSTANCE_GPU_MANUFACTURER] = _lower(gpu.get("Manufacturer", ""))
        result[wk.INSTANCE_GPU_COUNT] = str(sum(int(g.get("Count", 0)) for g in gpus))
        result[wk.INSTANCE_GPU_MEMORY] = str((gpu.get("MemoryInfo") or {}).get("SizeInMiB", 0))
    accelerators = (info.get("NeuronInfo") or {}).get("NeuronDevices") or (
        (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    )
    if accelerators:
        accelerator = accelerators[0]
        result[wk.INSTANCE_ACCELERATOR_NAME] = _lower(accelerator.get("Name", ""))
        result[wk.INSTANCE_ACCELERATOR_MANUFACTURER] = _lower(accelerator.get("Manufacturer", "aws"))
        result[wk.INSTANCE_ACCELERATOR_COUNT] = str(sum(int(a.get("Count", 0)) for a in accelerators))
    return result


def _extended_resources(info: Mapping[str, Any]) -> Resources:
    result: Resources = {}
    for gpu in (info.get("GpuInfo") or {}).get("Gpus") or []:
        manufacturer = str(gpu.get("Manufacturer", "")).lower()
        resource = NVIDIA_GPU if manufacturer == "nvidia" else AMD_GPU if manufacturer == "amd" else None
        if resource:
            result[resource] = result.get(resource, 0) + int(gpu.get("Count", 0))
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    inferentia = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    count = sum(int(d.get("Count", 0)) for d in neuron or inferentia)
    if count:
        result[NEURON] = count
    network = info.get("NetworkInfo") or {}
    efa = (network.get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    if network.get("EfaSupported") and efa:
        result[EFA] = int(efa)
    return result


def instance_type_from_ec2(
    info: Mapping[str, Any],
    offerings: Sequence[Offering],
    kubelet: KubeletSettings | None = None,
    shape: NodeShape | None = None,
) -> InstanceType:
    """One DescribeInstanceTypes item (AWS JSON shape) → ``InstanceType``; see the module doc."""
    kubelet = kubelet or KubeletSettings()
    shape = shape or NodeShape()
    vcpus = int(info["VCpuInfo"]["DefaultVCpus"])
    memory_mib = int(info["MemoryInfo"]["SizeInMiB"])
    arch = _arch(info)
    if kubelet.max_pods is not None:
        pods = kubelet.max_pods
    else:  # Windows AMIs do not limit pod density by ENIs (Karpenter: SupportsENILimitedPodDensity)
        pods = WINDOWS_MAX_PODS if shape.windows else eni_limited_pods(info)
    if kubelet.pods_per_core:
        pods = min(pods, kubelet.pods_per_core * vcpus)
    capacity: Resources = {
        CPU: vcpus * 1000,
        MEMORY: (memory_mib - math.ceil(memory_mib * VM_MEMORY_OVERHEAD)) * MIB,
        EPHEMERAL_STORAGE: shape.ephemeral_storage(info),
        PODS: pods,
        **_extended_resources(info),
    }
    ips = int((info.get("NetworkInfo") or {}).get("Ipv4AddressesPerInterface") or 0)
    if shape.windows and ips > 1:
        capacity[PRIVATE_IPV4_ADDRESS] = ips - 1
    kube_reserved: Resources = {
        CPU: kube_reserved_cpu(vcpus * 1000),
        MEMORY: (11 * pods + 255) * MIB,
        EPHEMERAL_STORAGE: GIB,
    }
    kube_reserved.update(_quantities(kubelet.kube_reserved))
    eviction = _eviction(
        {"memory.available": "100Mi", "nodefs.available": "10%", **kubelet.eviction_hard}, capacity
    )
    overhead = Overhead(kube_reserved, _quantities(kubelet.system_reserved), eviction)
    zones = sorted({o.zone for o in offerings})
    type_labels = _labels(info, vcpus, memory_mib, arch, shape)
    if zones:
        type_labels[wk.REGION] = zones[0][:-1] if zones[0][-1].isalpha() else zones[0]
    return InstanceType(str(info["InstanceType"]), type_labels, capacity, overhead, tuple(offerings))
