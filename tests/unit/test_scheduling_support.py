"""Builders shared by the scheduling tests: a small synthetic catalog and pod/NodePool makers.

Synthetic DescribeInstanceTypes items keep the constraint tests fast and independent of moto.
"""

from __future__ import annotations

from nodewright.api import labels as wk
from nodewright.scheduling import (
    InstanceType,
    Node,
    NodePoolInput,
    Offering,
    Plan,
    Pod,
    PodSpec,
    Requirement,
    Requirements,
    instance_type_from_ec2,
)
from nodewright.scheduling.model import LabelSelector, PodAffinityTerm, Toleration, TopologySpread
from nodewright.scheduling.resources import MIB

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
# name: (vCPUs, MiB, arch, ENIs, IPv4 per ENI, on-demand $/h, GPUs)
TYPES = {
    "c5.large": (2, 4096, "x86_64", 3, 10, 0.085, 0),
    "m5.large": (2, 8192, "x86_64", 3, 10, 0.096, 0),
    "r5.large": (2, 16384, "x86_64", 3, 10, 0.126, 0),
    "m5.xlarge": (4, 16384, "x86_64", 4, 15, 0.192, 0),
    "m5.2xlarge": (8, 32768, "x86_64", 4, 15, 0.384, 0),
    "m6g.large": (2, 8192, "arm64", 3, 10, 0.077, 0),
    "p3.2xlarge": (8, 62464, "x86_64", 4, 15, 3.06, 1),
}
# Multi-GPU types, for the extended-resource packing cases (kept out of the default catalog).
GPU_TYPES = {
    "p3.8xlarge": (32, 249856, "x86_64", 8, 30, 12.24, 4),
    "p3.16xlarge": (64, 499712, "x86_64", 8, 30, 24.48, 8),
}


def ec2_info(name: str) -> dict:
    vcpus, mib, arch, enis, ips, _, gpus = {**TYPES, **GPU_TYPES}[name]
    info = {
        "InstanceType": name,
        "VCpuInfo": {"DefaultVCpus": vcpus},
        "MemoryInfo": {"SizeInMiB": mib},
        "ProcessorInfo": {
            "Manufacturer": "AWS" if arch == "arm64" else "Intel",
            "SupportedArchitectures": [arch],
        },
        "Hypervisor": "nitro",
        "NetworkInfo": {"MaximumNetworkInterfaces": enis, "Ipv4AddressesPerInterface": ips},
    }
    if gpus:
        info["GpuInfo"] = {
            "Gpus": [
                {"Name": "V100", "Manufacturer": "NVIDIA", "Count": gpus, "MemoryInfo": {"SizeInMiB": 16384}}
            ]
        }
    return info


def catalog(spot: bool = True, zones: tuple[str, ...] = ZONES, gpus: bool = False) -> list[InstanceType]:
    result = []
    for name, row in sorted({**TYPES, **(GPU_TYPES if gpus else {})}.items()):
        offerings = [Offering(z, "on-demand", row[5]) for z in zones]
        if spot:
            offerings += [Offering(z, "spot", round(row[5] * 0.4, 4)) for z in zones]
        result.append(instance_type_from_ec2(ec2_info(name), offerings))
    return result


def requirements(**terms: tuple[str, list[str]]) -> Requirements:
    """``requirements(**{"kubernetes.io/arch": ("In", ["arm64"])})``."""
    return Requirements(Requirement.create(k, op, values) for k, (op, values) in terms.items())


def nodepool(name: str = "default", **kwargs) -> NodePoolInput:
    kwargs.setdefault("instance_types", catalog())
    kwargs.setdefault("requirements", requirements(**{wk.CAPACITY_TYPE: ("In", ["on-demand"])}))
    return NodePoolInput(name=name, **kwargs)


def spec(cpu: int = 500, memory_mib: int = 512, labels: dict[str, str] | None = None, **fields) -> PodSpec:
    requests = {"cpu": cpu, "memory": memory_mib * MIB, "pods": 1, **fields.pop("extra", {})}
    return PodSpec(
        namespace="default",
        requests=tuple(sorted(requests.items())),
        labels=tuple(sorted((labels or {}).items())),
        **fields,
    )


def pods(count: int, pod_spec: PodSpec, prefix: str = "p") -> list[Pod]:
    return [Pod("default", f"{prefix}-{i:04d}", pod_spec) for i in range(count)]


def selector(**labels: str) -> LabelSelector:
    return LabelSelector(tuple(sorted(labels.items())))


def spread(
    key: str, max_skew: int = 1, when: str = "DoNotSchedule", min_domains: int | None = None, **labels
):
    return TopologySpread(max_skew, key, when, selector(**labels), min_domains)


def term(key: str, anti: bool = False, weight: int = 0, **labels) -> PodAffinityTerm:
    return PodAffinityTerm(selector(**labels), key, (), anti, weight)


def toleration(key: str, effect: str = "") -> Toleration:
    return Toleration(key, "Exists", "", effect)


def node(
    name: str, zone: str = "us-east-1a", cpu: int = 4000, memory_mib: int = 16000, bound=(), **kwargs
) -> Node:
    labels = {
        wk.ZONE: zone,
        wk.HOSTNAME: name,
        wk.CAPACITY_TYPE: "on-demand",
        wk.ARCH: "amd64",
        wk.OS: "linux",
    }
    labels.update(kwargs.pop("labels", {}))
    return Node(
        name, labels, {"cpu": cpu, "memory": memory_mib * MIB, "pods": 110}, pods=list(bound), **kwargs
    )


def claim_of(plan: Plan) -> dict[str, int]:
    """pod key → index of the new claim it is meant for."""
    return {pod: i for i, claim in enumerate(plan.new_claims) for pod in claim.pods}


def zone_of(claim) -> str | None:
    zone = claim.requirements.get(wk.ZONE)
    return (
        next(iter(zone.values))
        if zone is not None and not zone.complement and len(zone.values) == 1
        else None
    )


def test_synthetic_catalog_is_price_and_zone_complete() -> None:
    types = catalog()
    assert {t.name for t in types} == set(TYPES)
    assert all({o.zone for o in t.offerings} == set(ZONES) for t in types)
