"""Conformance with the AWS provider's instance type suite (aws/karpenter-provider-aws
pkg/providers/instancetype/suite_test.go), on the real us-east-1 catalog as production reads it.

The catalog is moto's copy of DescribeInstanceTypes/Offerings through ``cloud.catalog`` (the
provisioner's own code), ranked by the production price estimate so the case needs no price file.
Each case names the AWS provider test it follows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from nodewright.api import labels as wk
from nodewright.scheduling import (
    InstanceType,
    NodePoolInput,
    PersistentVolume,
    PersistentVolumeClaim,
    Plan,
    Snapshot,
    plan,
)
from test_scheduling_support import pods, requirements, spec

REGION = "us-east-1"
ZONE = "us-east-1a"
SUITE = "InstanceTypeProvider > "


@pytest.fixture(scope="module")
def instance_types() -> list[InstanceType]:
    from nodewright.cli._offline import offline_catalog
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.observability import logger_level

    with logger_level("ERROR"):  # every type is estimated here: the warning says so once
        return offline_catalog(REGION, PriceTable(source="estimate")).instance_types()


def pool(instance_types: list[InstanceType], **terms: tuple[str, list[str]]) -> NodePoolInput:
    base = {wk.CAPACITY_TYPE: ("In", ["on-demand"]), **terms}
    return NodePoolInput("default", requirements(**base), list(instance_types))


def candidates(result: Plan) -> list[str]:
    assert not result.unschedulable, result.unschedulable
    (claim,) = result.new_claims
    return [c.name for c in claim.instance_types]


def aliases(zone: str, region: str, arch: str, instance_type: str) -> dict[str, str]:
    """The deprecated and alias keys Karpenter normalizes (NormalizedLabels + the EBS CSI zone)."""
    return {
        "failure-domain.beta.kubernetes.io/region": region,
        "failure-domain.beta.kubernetes.io/zone": zone,
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/instance-type": instance_type,
        "topology.ebs.csi.aws.com/zone": zone,
    }


# Labels a node of a type carries that a pod may select; left out of the full-set case as in the
# AWS suite: accelerators (on g4dn), Windows build; and those Nodewright does not publish yet:
# capacity reservations (no ODCR support) and the zone ID (needs the subnets' zone IDs).
NOT_ON_G4DN = {
    wk.INSTANCE_ACCELERATOR_COUNT,
    wk.INSTANCE_ACCELERATOR_NAME,
    wk.INSTANCE_ACCELERATOR_MANUFACTURER,
    wk.WINDOWS_BUILD,
    wk.CAPACITY_RESERVATION_ID,
    wk.CAPACITY_RESERVATION_TYPE,
    wk.CAPACITY_RESERVATION_INTERRUPTIBLE,
    wk.TOPOLOGY_ZONE_ID,
}


def test_every_well_known_label_and_alias_selects_the_type(instance_types: list[InstanceType]) -> None:
    """should support instance type labels"""
    g4dn = next(t for t in instance_types if t.name == "g4dn.8xlarge")
    selector = {
        **g4dn.labels,
        wk.ZONE: ZONE,
        wk.CAPACITY_TYPE: "on-demand",
        wk.INSTANCE_TENANCY: "default",  # the launch's choice, as zone and capacity type are
        wk.NODEPOOL: "default",
        **aliases(ZONE, REGION, "amd64", "g4dn.8xlarge"),
    }
    # The EC2NodeClass label comes from the NodePool's nodeClassRef, not from the type.
    assert set(selector) >= wk.WELL_KNOWN_LABELS - NOT_ON_G4DN - {wk.EC2NODECLASS}
    assert g4dn.labels[wk.INSTANCE_NETWORK_BANDWIDTH] == "50000"  # the suite's own figure
    pod = spec(node_selector=tuple(sorted(selector.items())), extra={"nvidia.com/gpu": 1})
    assert candidates(plan(Snapshot(pods(1, pod), [pool(instance_types)]))) == ["g4dn.8xlarge"]


def test_accelerator_labels_select_inferentia(instance_types: list[InstanceType]) -> None:
    """should support instance type labels with accelerator"""
    selector = {
        wk.INSTANCE_ACCELERATOR_NAME: "inferentia",
        wk.INSTANCE_ACCELERATOR_MANUFACTURER: "aws",
        wk.INSTANCE_ACCELERATOR_COUNT: "1",
        wk.INSTANCE_TYPE: "inf1.2xlarge",
    }
    pod = spec(node_selector=tuple(sorted(selector.items())))
    assert candidates(plan(Snapshot(pods(1, pod), [pool(instance_types)]))) == ["inf1.2xlarge"]


@dataclass(frozen=True)
class Case:
    aws: str
    pod: Callable[[], object]
    terms: dict[str, tuple[str, list[str]]]
    check: Callable[[list[str], dict[str, InstanceType]], bool]


CASES: dict[str, Case] = {
    "metal is de-prioritized": Case(
        SUITE + "should de-prioritize metal",
        lambda: spec(cpu=1000),
        {},
        lambda names, by: bool(names) and not any("metal" in n for n in names),
    ),
    "GPU types are de-prioritized": Case(
        SUITE + "should de-prioritize gpu types",
        lambda: spec(cpu=1000),
        {},
        lambda names, by: not any(by[n].capacity.get("nvidia.com/gpu") for n in names),
    ),
    "metal when the NodePool asks for it": Case(
        SUITE + "should launch on metal",
        lambda: spec(cpu=1000),
        {wk.INSTANCE_SIZE: ("In", ["metal"])},
        lambda names, by: bool(names) and all(n.endswith(".metal") for n in names),
    ),
    "a beta arch selector is the arch label": Case(
        SUITE + "should support instance type labels (deprecated beta.kubernetes.io/arch)",
        lambda: spec(node_selector=(("beta.kubernetes.io/arch", "arm64"),)),
        {},
        lambda names, by: bool(names) and all(by[n].labels[wk.ARCH] == "arm64" for n in names),
    ),
    "capability-flex In false keeps flex types out": Case(
        SUITE + "should support instance type labels (karpenter.k8s.aws/instance-capability-flex)",
        lambda: spec(cpu=1000),
        {wk.INSTANCE_CAPABILITY_FLEX: ("In", ["false"]), wk.INSTANCE_FAMILY: ("In", ["c7i", "c7i-flex"])},
        lambda names, by: bool(names) and all(n.startswith("c7i.") for n in names),
    ),
    "sustained clock speed Gt": Case(
        SUITE + "should support instance type labels (instance-cpu-sustained-clock-speed-mhz Gt)",
        lambda: spec(cpu=1000),
        {wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: ("Gt", ["3500"])},
        lambda names, by: (
            bool(names)
            and all(int(by[n].labels[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ]) > 3500 for n in names)
        ),
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_aws_instance_type_conformance(case: str, instance_types: list[InstanceType]) -> None:
    conformance = CASES[case]
    result = plan(Snapshot(pods(1, conformance.pod()), [pool(instance_types, **conformance.terms)]))
    by_name = {t.name: t for t in instance_types}
    names = candidates(result)
    assert conformance.check(names, by_name), names


def test_mac_types_are_not_offered_and_i386_types_are_amd64(instance_types: list[InstanceType]) -> None:
    """UpdateInstanceTypes filters: hvm, processor-info.supported-architecture in (x86_64, arm64)."""
    names = {t.name for t in instance_types}
    assert not any(n.startswith("mac") for n in names)
    assert "m5.large" in names
    t2 = next(t for t in instance_types if t.name == "t2.micro")  # SupportedArchitectures: i386, x86_64
    assert t2.labels[wk.ARCH] == "amd64"


def test_an_ebs_csi_zone_on_a_volume_pins_the_zone(instance_types: list[InstanceType]) -> None:
    """Karpenter normalizes topology.ebs.csi.aws.com/zone (the AWS provider's NormalizedLabels)."""
    affinity = requirements(**{"topology.ebs.csi.aws.com/zone": ("In", ["us-east-1c"])})
    snapshot = Snapshot(
        pods(1, spec(claims=("data",))),
        [pool(instance_types)],
        claims=[PersistentVolumeClaim("default", "data", "pv-1")],
        volumes=[PersistentVolume("pv-1", (affinity,))],
    )
    result = plan(snapshot)
    assert candidates(result)
    assert {o.zone for c in result.new_claims[0].instance_types for o in c.offerings} == {"us-east-1c"}
