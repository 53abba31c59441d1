"""The sandbox's kubelet reports what a real node of the instance would: its OS from its AMI (a Windows
node and its build), its ephemeral storage from the volume its kubelet lives on or the instance-store
RAID0 array its user data builds, its pods from the bootstrap's ``--max-pods``, its labels and taints
from its user data (never from its NodeClaim), and it joins only the cluster its user data names; and
the sandbox's SSM publishes the Windows AMIs' public parameters as AWS does."""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterator
from typing import Any

import pytest
import waiting
import yaml
from kubernetes.utils.quantity import parse_quantity

from sandbox import Sandbox
from sandbox.aws.eks_amis import nodeadm_user_data
from sandbox.simulators.kube import Kube, core, group

CLUSTER = "kubelets"


# The suite's one wait (tests/waiting.py), with this module's default timeout and poll interval.
wait_for = functools.partial(waiting.wait_for, timeout=20, every=0.1)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(cluster_name=CLUSTER, boot_delay=0.2, init_delay=0.3) as sandbox:
        sandbox.apply_crds()
        yield sandbox


@pytest.fixture(scope="module")
def kube(sb: Sandbox) -> Kube:
    return Kube(sb.api_client())


@pytest.fixture(scope="module")
def ec2(sb: Sandbox) -> Iterator[Any]:
    client = sb.aws_client("ec2")
    yield client
    client.close()


def run(
    sb: Sandbox, ec2: Any, image: str, instance_type: str, tags: tuple[dict[str, str], ...] = (), **extra: Any
) -> str:
    """An instance tagged for the cluster (user data that joins it unless ``UserData`` says otherwise)."""
    extra.setdefault("UserData", nodeadm_user_data(CLUSTER))
    return ec2.run_instances(  # type: ignore[no-any-return]
        ImageId=sb.aws.images[image],
        MinCount=1,
        MaxCount=1,
        InstanceType=instance_type,
        SubnetId=sb.aws.subnets["us-east-1a"],
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [{"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}, *tags],
            }
        ],
        **extra,
    )["Instances"][0]["InstanceId"]


def registered(kube: Kube, instance_id: str) -> dict[str, Any] | None:
    nodes, _ = kube.list(core("nodes"))
    return next((n for n in nodes if n["spec"].get("providerID", "").endswith(f"/{instance_id}")), None)


def node_for(
    sb: Sandbox, ec2: Any, kube: Kube, image: str, instance_type: str, **extra: Any
) -> dict[str, Any]:
    instance_id = run(sb, ec2, image, instance_type, **extra)
    return wait_for(f"the node of {instance_id}", lambda: registered(kube, instance_id))  # type: ignore[no-any-return]


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
    script = (
        f"<powershell>\n& $EKSBootstrapScriptFile -EKSClusterName '{CLUSTER}' "
        "-KubeletExtraArgs '--max-pods=110'\n</powershell>"
    )
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
        "spec": {
            "cluster": {"name": CLUSTER},
            "instance": {"localStorage": {"strategy": "RAID0"}},
            "kubelet": {"config": {"maxPods": 58}},
        },
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
    settings = f'[settings.kubernetes]\ncluster-name = "{CLUSTER}"\n'
    node = node_for(
        sb, ec2, kube, "bottlerocket/x86_64", "m5.large", BlockDeviceMappings=volumes, UserData=settings
    )
    assert storage(node) == 120 * 1024**3


def test_a_node_registers_with_the_labels_and_taints_of_its_user_data_not_of_its_nodeclaim(
    sb: Sandbox, ec2: Any, kube: Kube
) -> None:
    """A real node knows nothing of NodeClaims: what the product leaves out of the user data is not on
    the Node when it registers (only the product's registration may add it)."""
    kube.create(
        group("karpenter.sh/v1", "nodeclaims"),
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": "from-user-data",
                "labels": {"team": "blue", "karpenter.sh/nodepool": "general"},
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "workload", "operator": "In", "values": ["batch"]}],
                "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
            },
        },
    )
    user_data = nodeadm_user_data(
        CLUSTER,
        labels={"team": "green", "karpenter.sh/capacity-type": "spot"},
        taints=("karpenter.sh/unregistered:NoExecute", "example.com/gpu=true:NoSchedule"),
    )
    claim_tag = ({"Key": "karpenter.sh/nodeclaim", "Value": "from-user-data"},)
    node = node_for(sb, ec2, kube, "al2023/arm64", "m6g.large", UserData=user_data, tags=claim_tag)
    labels = node["metadata"]["labels"]
    assert labels["team"] == "green"
    assert labels["karpenter.sh/capacity-type"] == "spot"  # what the user data says, on an on-demand instance
    assert "workload" not in labels
    assert "karpenter.sh/nodepool" not in labels
    assert "karpenter.k8s.aws/instance-family" not in labels  # a label only Karpenter's registration gives
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels["node.kubernetes.io/instance-type"] == "m6g.large"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert labels["topology.kubernetes.io/region"] == sb.region
    taints = {(t["key"], t.get("value", ""), t["effect"]) for t in node["spec"].get("taints") or []}
    assert ("karpenter.sh/unregistered", "", "NoExecute") in taints
    assert ("example.com/gpu", "true", "NoSchedule") in taints
    assert not any(key == "dedicated" for key, _, _ in taints)


@pytest.mark.parametrize(
    ("user_data", "why"),
    [
        ("", "its user data joins no cluster"),
        (nodeadm_user_data("another-cluster"), "its user data joins cluster 'another-cluster'"),
        (
            nodeadm_user_data(CLUSTER, labels={"node-role.kubernetes.io/worker": ""}),
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels",
        ),
        (nodeadm_user_data(CLUSTER, taints=("dedicated=gpu",)), "invalid taint spec: dedicated=gpu"),
    ],
    ids=["no-user-data", "another-cluster", "restricted-label", "taint-without-effect"],
)
def test_an_instance_whose_bootstrap_does_not_join_this_cluster_never_registers(
    sb: Sandbox, ec2: Any, kube: Kube, user_data: str, why: str, *, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="sandbox.simulators")
    silent = run(sb, ec2, "al2023/x86_64", "m5.large", UserData=user_data)
    wait_for("the kubelet to give up on it", lambda: silent in sb.kubelet.registry.never_register)
    # An instance launched after it, with user data that joins, registers: the first one had its turn.
    node_for(sb, ec2, kube, "al2023/x86_64", "m5.large")
    assert registered(kube, silent) is None
    assert any(silent in r.getMessage() and why in r.getMessage() for r in caplog.records)
