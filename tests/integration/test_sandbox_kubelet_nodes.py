"""The sandbox's kubelet reports what a real node of the instance would: its OS from its AMI (a Windows
node and its build), its ephemeral storage from the volume its kubelet lives on or the instance-store
RAID0 array its user data builds, its pods from the bootstrap's ``--max-pods``; and the sandbox's SSM
publishes the Windows AMIs' public parameters as AWS does."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes.utils.quantity import parse_quantity

from sandbox import Sandbox
from sandbox.simulators.kube import Kube, core

pytestmark = pytest.mark.xdist_group("sandbox")  # one sandbox per process: keep them on one worker
CLUSTER = "kubelets"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(cluster_name=CLUSTER, boot_delay=0.2, init_delay=0.3) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def kube(sb: Sandbox) -> Kube:
    return Kube(sb.api_client())


@pytest.fixture(scope="module")
def ec2(sb: Sandbox) -> Iterator[Any]:
    client = sb.aws_client("ec2")
    yield client
    client.close()


def node_for(
    sb: Sandbox, ec2: Any, kube: Kube, image: str, instance_type: str, **extra: Any
) -> dict[str, Any]:
    tags = [{"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}]
    instance_id = ec2.run_instances(
        ImageId=sb.aws.images[image],
        MinCount=1,
        MaxCount=1,
        InstanceType=instance_type,
        SubnetId=sb.aws.subnets["us-east-1a"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        **extra,
    )["Instances"][0]["InstanceId"]

    def registered() -> dict[str, Any] | None:
        nodes, _ = kube.list(core("nodes"))
        return next((n for n in nodes if n["spec"].get("providerID", "").endswith(f"/{instance_id}")), None)

    return wait_for(f"the node of {instance_id}", registered)  # type: ignore[no-any-return]


def user_data(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def storage(node: dict[str, Any]) -> int:
    return int(parse_quantity(node["status"]["capacity"]["ephemeral-storage"]))


def test_ssm_publishes_the_windows_server_core_eks_amis(sb: Sandbox) -> None:
    ssm = sb.aws_client("ssm")
    try:
        for year in ("2019", "2022", "2025"):
            name = f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-1.31"
            name += "/image_id"
            image_id = ssm.get_parameter(Name=name)["Parameter"]["Value"]
            assert image_id == sb.aws.images[f"windows{year}/x86_64"]
    finally:
        ssm.close()


def test_a_windows_instance_registers_a_windows_node_with_its_build(
    sb: Sandbox, ec2: Any, kube: Kube
) -> None:
    script = "<powershell>\n& $EKSBootstrapScriptFile -KubeletExtraArgs '--max-pods=110'\n</powershell>"
    c_drive = [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 60}}]
    node = node_for(
        sb, ec2, kube, "windows2022/x86_64", "m5.large", UserData=script, BlockDeviceMappings=c_drive
    )
    assert node["metadata"]["labels"]["kubernetes.io/os"] == "windows"
    assert node["metadata"]["labels"]["node.kubernetes.io/windows-build"] == "10.0.20348"
    assert node["status"]["nodeInfo"]["operatingSystem"] == "windows"
    assert node["status"]["capacity"]["pods"] == "110"
    assert storage(node) == 60 * 1024**3  # its C: drive


def test_a_linux_node_reports_its_root_volume_as_ephemeral_storage(sb: Sandbox, ec2: Any, kube: Kube) -> None:
    big = [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 200, "VolumeType": "gp3"}}]
    node = node_for(sb, ec2, kube, "al2023/x86_64", "m5.large", BlockDeviceMappings=big)
    assert node["metadata"]["labels"]["kubernetes.io/os"] == "linux"
    assert storage(node) == 200 * 1024**3
    allocatable = int(parse_quantity(node["status"]["allocatable"]["ephemeral-storage"]))
    assert allocatable == 200 * 1024**3 - 1024**3 - 20 * 1024**3


def test_a_node_whose_user_data_builds_raid0_reports_the_instance_store(
    sb: Sandbox, ec2: Any, kube: Kube
) -> None:
    config = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}, "kubelet": {"config": {"maxPods": 58}}},
    }
    mime = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
        f"Content-Type: application/node.eks.aws\n\n{yaml.safe_dump(config)}\n--//--\n"
    )
    node = node_for(sb, ec2, kube, "al2023/x86_64", "i3en.large", UserData=mime)
    store = ec2.describe_instance_types(InstanceTypes=["i3en.large"])["InstanceTypes"][0][
        "InstanceStorageInfo"
    ]
    assert storage(node) == int(store["TotalSizeInGB"]) * 1000**3
    assert node["status"]["capacity"]["pods"] == "58"


def test_bottlerocket_keeps_its_kubelet_on_the_data_volume(sb: Sandbox, ec2: Any, kube: Kube) -> None:
    volumes = [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 4}},
        {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeSize": 120}},
    ]
    node = node_for(sb, ec2, kube, "bottlerocket/x86_64", "m5.large", BlockDeviceMappings=volumes)
    assert storage(node) == 120 * 1024**3
