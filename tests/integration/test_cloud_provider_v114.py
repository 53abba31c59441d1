"""The EC2NodeClass fields of Karpenter v1.14 that reach EC2, launched against moto as EC2 expects
them: network interfaces and EFA, IPv4 prefixes, connection tracking, placement groups, CPU and
enclave options, EBS volume initialization rate, CreateFleet's Context, Dedicated Instances, AMIs
named by SSM parameters, zone IDs on every offering; and the bootstrap Karpenter's nodes register with."""

from __future__ import annotations

import base64
import email
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from nodewright.cloud.errors import PlacementGroupError
from nodewright.cloud.provider import CloudProvider
from test_cloud_provider import AMD64_AMI, Env, FleetSpy, env, nodeclass, request

from sandbox.aws import ec2_placement

__all__ = ["env"]  # the fixtures, shared with test_cloud_provider


@pytest.fixture
def ec2(env: Env) -> Iterator[Env]:
    ec2_placement.install()
    try:
        yield env
    finally:
        ec2_placement.uninstall()


def template_data(env: Env) -> dict[str, Any]:
    (template,) = env.ec2.describe_launch_templates()["LaunchTemplates"]
    return env.ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]


def instance(env: Env, instance_id: str) -> dict[str, Any]:
    return env.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def test_network_interfaces_with_efa_prefixes_and_connection_tracking_reach_the_launch_template(
    ec2: Env,
) -> None:
    spec = {
        "networkInterfaces": [
            {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
            {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        ],
        "ipPrefixCount": 2,
        "associatePublicIPAddress": False,
        "connectionTracking": {"tcpEstablishedTimeout": 300, "udpTimeout": 45},
    }
    CloudProvider(ec2.settings).create(request("nic-1", nodeclass=nodeclass(**spec)))

    data = template_data(ec2)
    assert "SecurityGroupIds" not in data  # EC2 refuses them beside NetworkInterfaces
    primary, efa = data["NetworkInterfaces"]
    assert primary == {
        "NetworkCardIndex": 0,
        "DeviceIndex": 0,
        "InterfaceType": "interface",
        "Groups": [ec2.security_group],
        "DeleteOnTermination": True,
        "AssociatePublicIpAddress": False,
        "Ipv4PrefixCount": 2,
        "ConnectionTrackingSpecification": {"TcpEstablishedTimeout": 300, "UdpTimeout": 45},
    }
    assert efa == {
        "NetworkCardIndex": 1,
        "DeviceIndex": 0,
        "InterfaceType": "efa-only",
        "Groups": [ec2.security_group],
        "DeleteOnTermination": True,
    }


def test_prefixes_alone_give_the_primary_interface(ec2: Env) -> None:
    CloudProvider(ec2.settings).create(request("pfx-1", nodeclass=nodeclass(ipPrefixCount=1)))
    (primary,) = template_data(ec2)["NetworkInterfaces"]
    assert (primary["DeviceIndex"], primary["Ipv4PrefixCount"], primary["Groups"]) == (
        0,
        1,
        [ec2.security_group],
    )


def test_cpu_enclave_volume_initialization_and_context_reach_ec2(ec2: Env) -> None:
    spy_client = CloudProvider(ec2.settings)
    spy = FleetSpy(spy_client.ec2)
    # A snapshot that exists: EC2 (and the sandbox's fleet, sandbox.aws.fleet_storage) refuses one that
    # does not.
    volume = ec2.ec2.create_volume(Size=40, AvailabilityZone="us-east-1a")["VolumeId"]
    snapshot = ec2.ec2.create_snapshot(VolumeId=volume)["SnapshotId"]
    spec = {
        "cpuOptions": {"nestedVirtualization": "disabled"},
        "enclaveOptions": {"enabled": True},
        "context": "arn:aws:outposts:us-east-1:111122223333:outpost/op-0123456789abcdef0",
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {
                    "snapshotID": snapshot,
                    "volumeSize": "40Gi",
                    "volumeInitializationRate": 200,
                },
            }
        ],
    }
    spy_client.create(request("cpu-1", nodeclass=nodeclass(**spec)))

    data = template_data(ec2)
    assert data["CpuOptions"] == {"NestedVirtualization": "disabled"}
    assert data["EnclaveOptions"] == {"Enabled": True}
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeInitializationRate"] == 200
    assert data["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] == snapshot
    assert spy.calls[-1]["Context"] == spec["context"]


def test_nested_virtualization_enabled_offers_only_the_types_ec2_says_support_it(ec2: Env) -> None:
    provider = CloudProvider(ec2.settings)
    every = {t.name for t in provider.instance_types(nodeclass())}
    supporting = {
        name
        for name in every
        if "nested-virtualization"
        in ((provider.catalog.info(name) or {}).get("ProcessorInfo") or {}).get("SupportedFeatures", [])
    }
    enabled = {
        t.name for t in provider.instance_types(nodeclass(cpuOptions={"nestedVirtualization": "enabled"}))
    }
    assert enabled == supporting
    assert enabled < every


def test_a_placement_group_selector_launches_into_the_group(ec2: Env) -> None:
    group = ec2.ec2.create_placement_group(GroupName="training", Strategy="partition", PartitionCount=3)
    group_id = group["PlacementGroup"]["GroupId"]
    provider = CloudProvider(ec2.settings)

    result = provider.create(
        request("pg-1", nodeclass=nodeclass(placementGroupSelector={"name": "training"}))
    )

    assert template_data(ec2)["Placement"] == {"GroupId": group_id}
    placement = instance(ec2, result.instance_id)["Placement"]
    assert (placement["GroupName"], placement["GroupId"]) == ("training", group_id)
    assert placement["PartitionNumber"] in (1, 2, 3)


def test_an_unknown_placement_group_fails_the_launch_naming_the_selector(ec2: Env) -> None:
    provider = CloudProvider(ec2.settings)
    with pytest.raises(PlacementGroupError, match=r"placementGroupSelector.*not found"):
        provider.create(
            request("pg-2", nodeclass=nodeclass(placementGroupSelector={"id": "pg-0123456789abcdef0"}))
        )
    assert ec2.ec2.describe_instances()["Reservations"] == []


def test_a_dedicated_nodeclaim_launches_a_dedicated_instance(ec2: Env) -> None:
    provider = CloudProvider(ec2.settings)
    labels = {"karpenter.k8s.aws/instance-tenancy": "dedicated"}

    result = provider.create(request("ded-1", labels=labels, capacity_types=frozenset({"on-demand"})))

    assert template_data(ec2)["Placement"] == {"Tenancy": "dedicated"}
    assert instance(ec2, result.instance_id)["Placement"]["Tenancy"] == "dedicated"


def test_an_ami_named_by_an_ssm_parameter_is_launched(ec2: Env) -> None:
    image = ec2.ec2.run_instances(ImageId=AMD64_AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    custom = ec2.ec2.create_image(InstanceId=image, Name="golden-al2023")["ImageId"]
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/platform/golden-ami", Value=custom, Type="String"
    )
    spec = {"amiFamily": "AL2023", "amiSelectorTerms": [{"ssmParameter": "/platform/golden-ami"}]}
    provider = CloudProvider(ec2.settings)

    result = provider.create(request("ssm-1", nodeclass=nodeclass(**spec), instance_types=["c5.large"]))

    assert result.image_id == custom
    assert [a["id"] for a in provider.nodeclass_status(nodeclass(**spec)).status["amis"]] == [custom]


def test_every_offering_carries_the_zone_id_of_its_subnet(ec2: Env) -> None:
    subnets = ec2.ec2.describe_subnets(SubnetIds=list(ec2.subnets.values()))["Subnets"]
    zone_ids = {s["AvailabilityZone"]: s["AvailabilityZoneId"] for s in subnets}
    types = CloudProvider(ec2.settings).instance_types(nodeclass())
    offerings = [o for t in types for o in t.offerings]
    assert offerings
    assert all(o.zone_id == zone_ids[o.zone] for o in offerings)
    m5 = next(t for t in types if t.name == "m5.large")
    assert m5.requirements["topology.k8s.aws/zone-id"].values == frozenset(zone_ids.values())


def test_nodes_register_with_the_unregistered_taint_and_keep_their_own_taints(ec2: Env) -> None:
    """As Karpenter's AWS provider bootstraps: karpenter.sh/unregistered:NoExecute among the taints the
    kubelet registers, and karpenter.sh/do-not-sync-taints=true among its labels."""
    CloudProvider(ec2.settings).create(request("boot-1"))
    user_data = email.message_from_string(base64.b64decode(template_data(ec2)["UserData"]).decode())
    (nodeconfig,) = [
        p.get_payload() for p in user_data.walk() if p.get_content_type() == "application/node.eks.aws"
    ]
    assert "karpenter.sh/unregistered:NoExecute" in nodeconfig
    assert "karpenter.sh/do-not-sync-taints=true" in nodeconfig
