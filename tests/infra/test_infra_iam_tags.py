"""A real spot launch through moto, authorized request by request against the synthesized roles.

The public launch path of ``nodewright.cloud`` (``CloudProvider.create``: subnets, security groups,
AMI alias, instance profile, launch template, CreateFleet) runs against moto, so every request
goes through botocore's request shapes and moto's parsing. Each recorded call is then turned
into the IAM authorizations AWS makes for it (``authorizations``), and each is decided by
``iam_eval`` against the statements of the provisioner's role. A call this model does not know
fails the test: a new AWS call in the launch path must come with its permission.

How EC2 authorizes, as modelled here (and as Karpenter v1's policy relies on): CreateFleet is
authorized as ``ec2:CreateFleet`` on the fleet, the launch templates, subnets, security groups
and image, and as ``ec2:RunInstances`` on everything the instance launch creates or uses;
``aws:RequestTag`` holds the tags of the request (CreateFleet's and the launch template's
TagSpecifications); every tagged resource type is also authorized as ``ec2:CreateTags`` with
``ec2:CreateAction``. CreateInstanceProfile with tags is also authorized as
``iam:TagInstanceProfile``, whose ``aws:ResourceTag`` are the tags being applied.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from iam_eval import ACCOUNT, REGION, Request, Template, allowed, ec2_arn, tag_context
from infra_synth import Synth
from moto import mock_aws

from infra.capabilities.permissions import TAGGED_AT_CREATION

CLUSTER = "demo"  # the fast synth's clusterName
K8S_VERSION = "1.31"
AMI = "ami-0aaaaaaaaaaaaaaa1"
KMS_KEY = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
NODE_ROLE = "NodeRole"


@dataclass
class Recorded:
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    fleet_tags: dict[str, str] = field(default_factory=dict)
    instance_tags: dict[str, str] = field(default_factory=dict)
    template_data: dict[str, Any] = field(default_factory=dict)

    def record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.service_model.endpoint_prefix, model.name, copy.deepcopy(params)))

    def params(self, operation: str) -> list[dict[str, Any]]:
        return [p for _, name, p in self.calls if name == operation]


def _tags(specs: list[dict[str, Any]], kind: str | None = None) -> dict[str, str]:
    return {
        t["Key"]: t["Value"] for spec in specs if kind in (None, spec["ResourceType"]) for t in spec["Tags"]
    }


def m5_large_catalog() -> Any:
    """The catalog with one type, m5.large as moto describes it (its bundled DescribeInstanceTypes data)."""
    import gzip
    import importlib.util
    import json
    import time
    from pathlib import Path

    from nodewright.cloud.catalog import CatalogData

    spec = importlib.util.find_spec("moto")
    assert spec is not None
    assert spec.origin is not None
    bundled = Path(spec.origin).parent / "ec2" / "resources" / "instance_types.json.gz"
    info = json.loads(gzip.decompress(bundled.read_bytes()))["m5.large"]
    return CatalogData({"m5.large": info}, {"m5.large": frozenset({f"{REGION}a"})}, time.time())


@pytest.fixture(scope="module")
def recorded() -> Iterator[Recorded]:
    """One spot launch for a NodeClaim of NodePool "default", with a KMS-encrypted root volume."""
    from nodewright.cloud import aws, eks
    from nodewright.cloud.catalog import clear_caches, prime_catalog
    from nodewright.cloud.provider import CloudProvider, LaunchRequest
    from nodewright.cloud.state import InMemoryStateStore
    from nodewright.settings import Settings

    from sandbox.aws import inject_ssm_parameters

    with pytest.MonkeyPatch.context() as patch, mock_aws():
        patch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        aws.reset_clients()
        clear_caches()
        eks.clear_cache()
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        discovery = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
        subnet = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock="10.0.0.0/20",
            AvailabilityZone=f"{REGION}a",
            TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
        )["Subnet"]["SubnetId"]
        ec2.create_security_group(
            GroupName="nodes",
            Description="nodes",
            VpcId=vpc,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}],
        )
        boto3.client("eks", region_name=REGION).create_cluster(
            name=CLUSTER,
            version=K8S_VERSION,
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
            resourcesVpcConfig={"subnetIds": [subnet]},
        )
        boto3.client("iam", region_name=REGION).create_role(RoleName=NODE_ROLE, AssumeRolePolicyDocument="{}")
        al2023 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023"
        inject_ssm_parameters(REGION, {f"{al2023}/x86_64/standard/recommended/image_id": AMI})
        settings = Settings(cluster_name=CLUSTER, region=REGION)
        prime_catalog((REGION, None), m5_large_catalog())  # moto's DescribeInstanceTypes takes 5-7 s
        cloud = CloudProvider(settings, store=InMemoryStateStore())
        result = Recorded()
        for service in ("ec2", "iam", "ssm", "eks"):
            aws.client(service, settings).meta.events.register("before-parameter-build", result.record)
        nodeclass = {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default", "uid": "nc-uid"},
            "spec": {
                "role": NODE_ROLE,
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                "tags": {"team": "platform"},
                "blockDeviceMappings": [
                    {
                        "deviceName": "/dev/xvda",
                        "ebs": {
                            "volumeSize": "20Gi",
                            "volumeType": "gp3",
                            "encrypted": True,
                            "kmsKeyID": KMS_KEY,
                        },
                    }
                ],
            },
        }
        request = LaunchRequest(
            nodeclaim_name="default-abcde",
            nodeclaim_uid="uid-1",
            nodepool_name="default",
            nodeclass=nodeclass,
            instance_types=["m5.large"],
            capacity_types=frozenset({"spot"}),
        )
        launched = cloud.create(request)
        assert launched.capacity_type == "spot"
        (fleet,) = ec2.describe_fleets()["Fleets"]
        result.fleet_tags = {t["Key"]: t["Value"] for t in fleet.get("Tags", [])}
        reservation = ec2.describe_instances(InstanceIds=[launched.instance_id])["Reservations"][0]
        result.instance_tags = {t["Key"]: t["Value"] for t in reservation["Instances"][0].get("Tags", [])}
        (created,) = result.params("CreateLaunchTemplate")
        result.template_data = created["LaunchTemplateData"]
        yield result
        aws.reset_clients()
        clear_caches()
        eks.clear_cache()


def provisioner_statements(synth: Synth) -> list[dict[str, Any]]:
    (role_id,) = [
        k for k in synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerFunctionsprovisionerRole")
    ]
    return Template(synth.template).role_statements(role_id)


def authorizations(recorded: Recorded, node_role_arn: str) -> list[Request]:
    """Every IAM authorization the recorded calls need, with its resource and condition context."""
    regional = {"aws:RequestedRegion": REGION}
    (template,) = recorded.params("CreateLaunchTemplate")
    template_tags = _tags(template["TagSpecifications"])
    template_arn = ec2_arn("launch-template", "lt-0123456789abcdef0")
    profiles: dict[str, tuple[str, dict[str, str]]] = {}  # name → (ARN with path, tags)
    requests: list[Request] = []
    for service, operation, params in recorded.calls:
        if service == "ec2" and operation.startswith("Describe"):
            requests.append(Request(f"ec2:{operation}", "*", regional))
        elif (service, operation) == ("ssm", "GetParameter"):
            arn = f"arn:aws:ssm:{REGION}::parameter{params['Name']}"
            requests.append(Request("ssm:GetParameter", arn))
        elif (service, operation) == ("eks", "DescribeCluster"):
            requests.append(
                Request("eks:DescribeCluster", f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{params['name']}")
            )
        elif (service, operation) == ("iam", "GetInstanceProfile"):
            requests.append(
                Request(
                    "iam:GetInstanceProfile",
                    f"arn:aws:iam::{ACCOUNT}:instance-profile/{params['InstanceProfileName']}",
                )
            )
        elif (service, operation) == ("iam", "CreateInstanceProfile"):
            arn = f"arn:aws:iam::{ACCOUNT}:instance-profile{params['Path']}{params['InstanceProfileName']}"
            tags = {t["Key"]: t["Value"] for t in params["Tags"]}
            profiles[params["InstanceProfileName"]] = (arn, tags)
            context = tag_context("aws:RequestTag", tags)
            requests.append(Request("iam:CreateInstanceProfile", arn, context))
            requests.append(
                Request("iam:TagInstanceProfile", arn, {**context, **tag_context("aws:ResourceTag", tags)})
            )
        elif (service, operation) == ("iam", "AddRoleToInstanceProfile"):
            arn, tags = profiles[params["InstanceProfileName"]]
            requests.append(
                Request("iam:AddRoleToInstanceProfile", arn, tag_context("aws:ResourceTag", tags))
            )
            requests.append(
                Request("iam:PassRole", node_role_arn, {"iam:PassedToService": "ec2.amazonaws.com"})
            )
        elif (service, operation) == ("ec2", "CreateLaunchTemplate"):
            context = tag_context("aws:RequestTag", template_tags)
            requests.append(Request("ec2:CreateLaunchTemplate", template_arn, context))
            requests.append(
                Request(
                    "ec2:CreateTags", template_arn, {**context, "ec2:CreateAction": "CreateLaunchTemplate"}
                )
            )
        elif (service, operation) == ("ec2", "CreateFleet"):
            request_tags = {
                **_tags(params["TagSpecifications"]),
                **_tags(template["LaunchTemplateData"]["TagSpecifications"]),
            }
            context = tag_context("aws:RequestTag", request_tags)
            from_template = tag_context("aws:ResourceTag", template_tags)
            used = [ec2_arn("image", AMI), ec2_arn("subnet", "subnet-1"), ec2_arn("security-group", "sg-1")]
            created = ["instance", "volume", "network-interface"]
            if params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot":
                created.append("spot-instances-request")
            requests += [Request("ec2:CreateFleet", ec2_arn("fleet", "fleet-1"), context)]
            requests += [Request("ec2:CreateFleet", arn, context) for arn in used]
            requests += [
                Request(a, template_arn, {**context, **from_template})
                for a in ("ec2:CreateFleet", "ec2:RunInstances")
            ]
            requests += [Request("ec2:RunInstances", arn, context) for arn in used]
            requests += [Request("ec2:RunInstances", ec2_arn(kind, "x-1"), context) for kind in created]
            tagged_kinds = {s["ResourceType"] for s in params["TagSpecifications"]}
            tagged_kinds |= {s["ResourceType"] for s in template["LaunchTemplateData"]["TagSpecifications"]}
            requests += [
                Request(
                    "ec2:CreateTags", ec2_arn(kind, "x-1"), {**context, "ec2:CreateAction": "CreateFleet"}
                )
                for kind in sorted(tagged_kinds)
            ]
            requests.append(
                Request("iam:PassRole", node_role_arn, {"iam:PassedToService": "ec2.amazonaws.com"})
            )
        else:
            raise AssertionError(
                f"no authorization model for {service}:{operation}; add it with its permission"
            )
    return requests


def test_the_launch_tags_fleet_instance_volume_and_network_interfaces_with_this_cluster(
    recorded: Recorded,
) -> None:
    ownership = {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        "eks:eks-cluster-name": CLUSTER,
        "karpenter.sh/nodepool": "default",
    }
    (fleet,) = recorded.params("CreateFleet")
    assert {s["ResourceType"] for s in fleet["TagSpecifications"]} == {"instance", "volume", "fleet"}
    assert ownership.items() <= recorded.fleet_tags.items()  # as moto stored them on the fleet
    assert ownership.items() <= recorded.instance_tags.items()
    template_kinds = {s["ResourceType"]: _tags([s]) for s in recorded.template_data["TagSpecifications"]}
    assert set(template_kinds) == {"instance", "volume", "network-interface"}
    assert ownership.items() <= template_kinds["network-interface"].items()
    # Everything the policy gates on request tags is tagged by the launch, except the spot request,
    # which EC2 offers no way to tag from a fleet (covered by the request's tags).
    tagged = (
        {s["ResourceType"] for s in fleet["TagSpecifications"]} | set(template_kinds) | {"launch-template"}
    )
    assert set(TAGGED_AT_CREATION) - tagged == {"spot-instances-request"}


def test_every_authorization_of_a_spot_launch_is_allowed_for_the_provisioner_only(
    recorded: Recorded, default_synth: Synth
) -> None:
    (node_role_id,) = [
        k for k in default_synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")
    ]
    node_role_arn = f"arn:aws:iam::{ACCOUNT}:role/{node_role_id}"  # how iam_eval resolves the created role
    requests = authorizations(recorded, node_role_arn)
    assert {r.action for r in requests} >= {
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:CreateTags",
        "iam:PassRole",
    }
    statements = provisioner_statements(default_synth)
    denied = [r for r in requests if not allowed(statements, r)]
    assert denied == []
    # The same launch with another cluster's tags is refused at every tagged creation.
    foreign = [
        Request(
            r.action,
            r.resource,
            {k.replace(f"/{CLUSTER}", "/other"): v.replace(CLUSTER, "other") for k, v in r.context.items()},
        )
        for r in requests
        if r.action in ("ec2:RunInstances", "ec2:CreateFleet")
        and "aws:RequestTag/eks:eks-cluster-name" in r.context
        and any(f":{kind}/" in r.resource for kind in TAGGED_AT_CREATION)
    ]
    assert foreign
    assert not [r for r in foreign if allowed(statements, r)]


def test_a_kms_encrypted_volume_reaches_the_launch_template_as_ec2_expects(recorded: Recorded) -> None:
    (root,) = recorded.template_data["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda"
    assert root["Ebs"] == {
        "DeleteOnTermination": True,
        "VolumeSize": 20,
        "VolumeType": "gp3",
        "KmsKeyId": KMS_KEY,
        "Encrypted": True,
    }


def test_ebs_kms_keys_are_granted_to_the_launching_functions_only(variant_synth: Synth) -> None:
    from conftest import VARIANT_KMS_KEY_ARN

    template = Template(variant_synth.template, account="123456789012", region="eu-west-1")
    launch_key = {"kms:GrantIsForAWSResource": "true"}
    for logical_id in variant_synth.resources("AWS::IAM::Role"):
        if not logical_id.startswith(("AutoscalerFunctions", "AutoscalerRemoval")):
            continue
        statements = template.role_statements(logical_id)
        launcher = any(n in logical_id for n in ("provisioner", "interruption", "spotevents"))
        for action in (
            "kms:CreateGrant",
            "kms:GenerateDataKeyWithoutPlaintext",
            "kms:Decrypt",
            "kms:DescribeKey",
        ):
            request = Request(action, VARIANT_KMS_KEY_ARN, launch_key)
            assert allowed(statements, request) == launcher, (logical_id, action)
        other_key = VARIANT_KMS_KEY_ARN.replace("1234abcd", "ffffffff")
        assert not allowed(statements, Request("kms:Decrypt", other_key)), logical_id
        if launcher:  # grants only for AWS resources (the volume), never to a principal of choice
            assert not allowed(
                statements,
                Request("kms:CreateGrant", VARIANT_KMS_KEY_ARN, {"kms:GrantIsForAWSResource": "false"}),
            )
