"""A real spot launch through moto, authorized request by request against the synthesized roles.

The public launch path of ``nodewright.cloud`` (``CloudProvider.create``: subnets, security groups,
AMI alias, instance profile, launch template, CreateFleet) runs against moto, so every request
goes through botocore's request shapes and moto's parsing. Each recorded call is then turned
into the IAM authorizations AWS makes for it by the sandbox's model
(``sandbox.iam.authorization``, the one the sandbox enforces with; how EC2 authorizes a fleet is
written there) and each is decided by the sandbox's evaluator against the provisioner's role. A
call the model does not know fails the test: a new AWS call in the launch path must come with its
permission.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from iam_eval import REGION, Request, Template, allowed, decide_many
from infra_synth import Synth
from moto import mock_aws

from infra.capabilities.permissions import FUNCTION_GRANTS, TAGGED_AT_CREATION, UNTAGGED_AT_CREATION
from sandbox.iam.authorization import Call, authorizations
from sandbox.iam.enforcement import MotoWorld
from sandbox.iam.evaluator import default_key_policy

CLUSTER = "demo"  # the fast synth's clusterName
ACCOUNT = "123456789012"  # moto's
K8S_VERSION = "1.31"
AMI = "ami-0aaaaaaaaaaaaaaa1"
KMS_KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
NODE_ROLE = f"NodewrightNode-{CLUSTER}-{REGION}"  # the role the stack creates (infra/config.py)
VARIANT_ACCOUNT = "123456789012"  # conftest.py variant_synth's account
KEY_POLICY = default_key_policy(VARIANT_ACCOUNT)  # a key's default policy: IAM policies decide
PRINCIPAL = f"arn:aws:sts::{ACCOUNT}:assumed-role/provisioner/nodewright-provisioner"


@dataclass
class Recorded:
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    fleet_tags: dict[str, str] = field(default_factory=dict)
    instance_tags: dict[str, str] = field(default_factory=dict)
    template_data: dict[str, Any] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)  # every authorization the calls need

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

    from sandbox.aws.server import inject_ssm_parameters

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
        world = MotoWorld(ACCOUNT)  # read after the launch: the template and the profile exist
        for service, operation, params in result.calls:
            call = Call(service, operation, params, REGION, ACCOUNT, PRINCIPAL)
            result.requests += authorizations(call, world)  # UnknownCall: a call with no model
        yield result
        aws.reset_clients()
        clear_caches()
        eks.clear_cache()


def provisioner_statements(synth: Synth) -> list[dict[str, Any]]:
    (role_id,) = [
        k for k in synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerFunctionsprovisionerRole")
    ]
    return Template(synth.template, account=ACCOUNT).role_statements(role_id)


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
    # Everything the policy gates on request tags is tagged by the launch; the spot request, which
    # EC2 offers no way to tag from a fleet, is the one resource created untagged.
    tagged = (
        {s["ResourceType"] for s in fleet["TagSpecifications"]} | set(template_kinds) | {"launch-template"}
    )
    assert set(TAGGED_AT_CREATION) <= tagged
    assert not set(UNTAGGED_AT_CREATION) & tagged


def test_every_authorization_of_a_spot_launch_is_allowed_for_the_provisioner(
    recorded: Recorded, default_synth: Synth
) -> None:
    requests = recorded.requests
    assert {r.action for r in requests} >= {
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:CreateTags",
        "iam:PassRole",
        "iam:CreateInstanceProfile",
        "iam:TagInstanceProfile",
    }
    (passed,) = {r.resource for r in requests if r.action == "iam:PassRole"}
    assert passed == f"arn:aws:iam::{ACCOUNT}:role/{NODE_ROLE}"
    # The KMS key is the stack's only with -c ebsKmsKeyArns (test_ebs_kms_keys_are_granted...).
    assert {r.action for r in requests if r.action.startswith("kms:")} >= {"kms:CreateGrant"}
    launch = [r for r in requests if not r.action.startswith("kms:")]
    statements = provisioner_statements(default_synth)
    decisions = decide_many(statements, launch, ACCOUNT)
    denied = [(r.action, r.resource, d) for r, d in zip(launch, decisions, strict=True) if d != "Allowed"]
    assert denied == []
    # The same launch with another cluster's tags is refused at every tagged creation.
    foreign = [
        Request(
            r.action,
            r.resource,
            {
                k.replace(f"/{CLUSTER}", "/other"): v.replace(CLUSTER, "other") if isinstance(v, str) else v
                for k, v in r.context.items()
            },
        )
        for r in launch
        if r.action in ("ec2:RunInstances", "ec2:CreateFleet")
        and "aws:RequestTag/eks:eks-cluster-name" in r.context
        and any(f":{kind}/" in r.resource for kind in TAGGED_AT_CREATION)
    ]
    assert foreign
    assert not [r for r in foreign if allowed(statements, r, ACCOUNT)]


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

    template = Template(variant_synth.template, account=VARIANT_ACCOUNT, region="eu-west-1")
    launch_key = {"kms:GrantIsForAWSResource": "true"}
    for logical_id in variant_synth.resources("AWS::IAM::Role"):
        if not logical_id.startswith(("AutoscalerFunctions", "AutoscalerRemoval")):
            continue
        statements = template.role_statements(logical_id)
        launcher = any(
            f"Functions{name.replace('_', '')}Role" in logical_id
            for name, grants in FUNCTION_GRANTS.items()
            if "launch" in grants
        )
        for action in (
            "kms:CreateGrant",
            "kms:GenerateDataKeyWithoutPlaintext",
            "kms:Decrypt",
            "kms:DescribeKey",
        ):
            request = Request(action, VARIANT_KMS_KEY_ARN, launch_key, resource_policy=KEY_POLICY)
            assert allowed(statements, request, VARIANT_ACCOUNT) == launcher, (logical_id, action)
        other_key = VARIANT_KMS_KEY_ARN.replace("1234abcd", "ffffffff")
        other = Request("kms:Decrypt", other_key, resource_policy=KEY_POLICY)
        assert not allowed(statements, other, VARIANT_ACCOUNT), logical_id
        if launcher:  # grants only for AWS resources (the volume), never to a principal of choice
            assert not allowed(
                statements,
                Request(
                    "kms:CreateGrant",
                    VARIANT_KMS_KEY_ARN,
                    {"kms:GrantIsForAWSResource": "false"},
                    resource_policy=KEY_POLICY,
                ),
                VARIANT_ACCOUNT,
            )
