"""Node storage and Windows nodes through the EC2 provider against moto: the instance types an
EC2NodeClass offers carry the ephemeral storage its volumes give (Karpenter v1.14's
``ephemeralStorage``: the ``rootVolume`` mapping, the family's ephemeral device, the family's default,
or with ``instanceStorePolicy: RAID0`` the instance store); a Windows alias resolves the public
Windows Server Core parameter, offers x86_64 types as Windows nodes priced with their licence, and
launches with the PowerShell bootstrap and the 50 GiB C: drive."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from nodewright.cloud.pricetable import WINDOWS_LICENSE_PER_VCPU
from nodewright.cloud.provider import CloudProvider
from nodewright.scheduling.instancetypes import GB
from nodewright.scheduling.resources import EPHEMERAL_STORAGE, GIB
from test_cloud_provider import K8S_VERSION, REGION, Env, env, nodeclass, request

from sandbox.aws import eks_amis

__all__ = ["env"]  # the fixtures, shared with test_cloud_provider


def by_name(env: Env, **spec: Any) -> dict[str, Any]:
    return {t.name: t for t in CloudProvider(env.settings).instance_types(nodeclass(**spec))}


def root(size: str, device: str = "/dev/xvda", **extra: Any) -> dict[str, Any]:
    return {"deviceName": device, "ebs": {"volumeSize": size, "volumeType": "gp3"}, **extra}


def test_a_200gi_root_volume_gives_every_type_200gi_of_ephemeral_storage(env: Env) -> None:
    types = by_name(env, blockDeviceMappings=[root("200Gi", rootVolume=True)])
    assert types["m5.large"].capacity[EPHEMERAL_STORAGE] == 200 * GIB
    assert types["m5.large"].allocatable[EPHEMERAL_STORAGE] > 100 * GIB


def test_without_mappings_the_family_default_root_volume_counts(env: Env) -> None:
    assert by_name(env)["m5.large"].capacity[EPHEMERAL_STORAGE] == 20 * GIB


def test_the_family_ephemeral_device_counts_without_a_root_volume_mark(env: Env) -> None:
    # AL2023's kubelet lives on /dev/xvda; a second volume is not ephemeral storage.
    mappings = [root("80Gi"), root("500Gi", device="/dev/xvdb")]
    assert by_name(env, blockDeviceMappings=mappings)["m5.large"].capacity[EPHEMERAL_STORAGE] == 80 * GIB


def test_raid0_counts_the_instance_store_of_the_types_that_have_one(env: Env) -> None:
    types = by_name(env, instanceStorePolicy="RAID0")
    store = (CloudProvider(env.settings).catalog.info("i3en.large") or {})["InstanceStorageInfo"]
    assert types["i3en.large"].capacity[EPHEMERAL_STORAGE] == int(store["TotalSizeInGB"]) * GB
    assert types["m5.large"].capacity[EPHEMERAL_STORAGE] == 20 * GIB  # no instance store: the root volume


@pytest.fixture
def windows_images(env: Env) -> dict[str, str]:
    """The Windows Server Core EKS AMIs and their public SSM parameters, as the sandbox publishes them."""
    images: dict[str, str] = {}
    eks_amis.seed(env.ec2, REGION, images, (K8S_VERSION,))
    return images


def windows_nodeclass(year: str = "2022", **spec: Any) -> dict[str, Any]:
    return nodeclass(amiSelectorTerms=[{"alias": f"windows{year}@latest"}], **spec)


@pytest.mark.parametrize(
    ("year", "build"), [("2019", "10.0.17763"), ("2022", "10.0.20348"), ("2025", "10.0.26100")]
)
def test_a_windows_alias_resolves_the_public_parameter_of_its_year(
    env: Env, windows_images: dict[str, str], year: str, build: str
) -> None:
    status = CloudProvider(env.settings).nodeclass_status(windows_nodeclass(year))
    (ami,) = status.status["amis"]
    assert ami["id"] == windows_images[f"windows{year}/x86_64"]
    assert {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]} in ami["requirements"]
    assert {"key": "node.kubernetes.io/windows-build", "operator": "In", "values": [build]} in ami[
        "requirements"
    ]


def test_windows_types_are_x86_64_windows_nodes_priced_with_their_licence(
    env: Env, windows_images: dict[str, str]
) -> None:
    provider = CloudProvider(env.settings)
    types = {t.name: t for t in provider.instance_types(windows_nodeclass())}
    assert "m6g.large" not in types  # arm64: no Windows AMI runs on it
    m5 = types["m5.large"]
    assert m5.labels["kubernetes.io/os"] == "windows"
    assert m5.labels["node.kubernetes.io/windows-build"] == "10.0.20348"
    assert m5.capacity[EPHEMERAL_STORAGE] == 50 * GIB  # the family's 50 GiB C: drive
    assert m5.capacity["pods"] == 110
    on_demand = next(o for o in m5.offerings if o.capacity_type == "on-demand")
    assert on_demand.price == pytest.approx(0.096 + 2 * WINDOWS_LICENSE_PER_VCPU)
    linux = {t.name: t for t in provider.instance_types(nodeclass())}["m5.large"]
    assert linux.labels["kubernetes.io/os"] == "linux"
    assert next(o for o in linux.offerings if o.capacity_type == "on-demand").price == 0.096


def test_a_windows_launch_uses_the_windows_ami_powershell_bootstrap_and_c_drive(
    env: Env, windows_images: dict[str, str]
) -> None:
    provider = CloudProvider(env.settings)
    result = provider.create(request("win-1", nodeclass=windows_nodeclass(), instance_types=["m5.large"]))
    assert result.image_id == windows_images["windows2022/x86_64"]
    (template,) = env.ec2.describe_launch_templates()["LaunchTemplates"]
    data = env.ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    script = base64.b64decode(data["UserData"]).decode()
    assert script.startswith("<powershell>\n")
    assert "Start-EKSBootstrap.ps1" in script
    assert "-EKSClusterName 'c1'" in script
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/sda1",
            "Ebs": {"DeleteOnTermination": True, "VolumeSize": 50, "VolumeType": "gp3", "Encrypted": True},
        }
    ]
