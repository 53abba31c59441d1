"""The EC2 provider against moto: catalog, selectors, AMIs, launch templates, CreateFleet, ICE, delete."""

from __future__ import annotations

import base64
import dataclasses
import email
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import aws_clients
import boto3
import pytest
from moto import mock_aws
from nodewright.api.hashing import nodeclass_hash
from nodewright.cloud import aws, eks
from nodewright.cloud.catalog import CatalogData, clear_caches, prime_catalog
from nodewright.cloud.errors import (
    INVALID_REQUEST,
    InsufficientCapacityError,
    InvalidNodeClassError,
    LaunchError,
    NoSubnetError,
    launch_failure_class,
)
from nodewright.cloud.launchtemplates import used_by
from nodewright.cloud.nodeclass import NodeClass
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.provider import CloudProvider, LaunchRequest, parse_provider_id
from nodewright.cloud.state import DynamoDBStateStore, create_state_table
from nodewright.settings import Settings

from sandbox.aws import fleet_network
from sandbox.aws.server import inject_ssm_parameters

REGION = "us-east-1"
CLUSTER = "c1"
TABLE = "nodewright-state"
K8S_VERSION = "1.31"
AMD64_AMI = "ami-0aaaaaaaaaaaaaaa1"
ARM64_AMI = "ami-0bbbbbbbbbbbbbbb2"


@dataclass
class Env:
    settings: Settings
    ec2: Any
    store: DynamoDBStateStore
    subnets: dict[str, str]  # zone → subnet id (the larger one where a zone has two)
    small_subnet: str
    security_group: str


@pytest.fixture
def env(moto_catalog: CatalogData, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    aws_clients.share_with_moto(monkeypatch)
    fleet_network.install()  # fleet instances get their launch template's security groups, as on EC2
    with mock_aws():
        aws.reset_clients()
        clear_caches()
        eks.clear_cache()
        prime_catalog((REGION, None), moto_catalog)
        settings = Settings(cluster_name=CLUSTER, region=REGION, state_table=TABLE)
        ec2 = aws_clients.client("ec2", REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        discovery = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
        subnets = {}
        for index, zone in enumerate(("us-east-1a", "us-east-1b", "us-east-1c")):
            subnet = ec2.create_subnet(
                VpcId=vpc,
                CidrBlock=f"10.0.{index * 16}.0/20",
                AvailabilityZone=zone,
                TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
            )
            subnets[zone] = subnet["Subnet"]["SubnetId"]
        small = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock="10.0.200.0/28",
            AvailabilityZone="us-east-1a",
            TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
        )["Subnet"]["SubnetId"]
        group = ec2.create_security_group(
            GroupName="nodes",
            Description="nodes",
            VpcId=vpc,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}],
        )["GroupId"]
        aws_clients.client("eks", REGION).create_cluster(
            name=CLUSTER,
            version=K8S_VERSION,
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": list(subnets.values())},
        )
        aws_clients.client("iam", REGION).create_role(RoleName="NodeRole", AssumeRolePolicyDocument="{}")
        create_state_table(aws_clients.client("dynamodb", REGION), TABLE)
        al2023 = f"/aws/service/eks/optimized-ami/{K8S_VERSION}/amazon-linux-2023"
        inject_ssm_parameters(
            REGION,
            {
                f"{al2023}/x86_64/standard/recommended/image_id": AMD64_AMI,
                f"{al2023}/arm64/standard/recommended/image_id": ARM64_AMI,
            },
        )
        store = DynamoDBStateStore(settings)
        spot = {
            (t, z): p
            for z in subnets
            for t, p in (("c5.large", 0.03), ("m5.large", 0.04), ("m6g.large", 0.05))
        }
        store.put_price_table(
            PriceTable(on_demand={"c5.large": 0.085, "m5.large": 0.096, "m6g.large": 0.077}, spot=spot)
        )
        try:
            yield Env(settings, ec2, store, subnets, small, group)
        finally:
            fleet_network.uninstall()
        aws.reset_clients()
        clear_caches()


def nodeclass(**spec: Any) -> dict[str, Any]:
    base = {
        "role": "NodeRole",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "tags": {"team": "platform"},
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default", "uid": "nc-uid"},
        "spec": base,
    }


def request(name: str = "default-abcde", **overrides: Any) -> LaunchRequest:
    fields: dict[str, Any] = {
        "nodeclaim_name": name,
        "nodeclaim_uid": f"uid-{name}",
        "nodepool_name": "default",
        "nodeclass": nodeclass(),
        "instance_types": ["c5.large", "m5.large"],
        "capacity_types": frozenset({"spot", "on-demand"}),
        "labels": {"team": "a", "node-role.kubernetes.io/worker": ""},
        "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
    }
    fields.update(overrides)
    return LaunchRequest(**fields)


class FleetSpy:
    """Records CreateFleet parameters; can answer the first N calls with capacity errors."""

    def __init__(self, client: Any, fail_first: int = 0, code: str = "InsufficientInstanceCapacity") -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self.code = code
        client.meta.events.register("before-parameter-build.ec2.CreateFleet", self._record)
        client.meta.events.register("before-call.ec2.CreateFleet", self._answer)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(params)

    def _answer(self, **_: Any) -> Any:
        if len(self.calls) > self.fail_first:
            return None  # let moto launch
        first = self.calls[-1]["LaunchTemplateConfigs"][0]
        override = first["Overrides"][0]
        capacity_type = self.calls[-1]["TargetCapacitySpecification"]["DefaultTargetCapacityType"]
        parsed = {
            "FleetId": "fleet-ice",
            "Instances": [],
            "Errors": [
                {
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": first["LaunchTemplateSpecification"],
                        "Overrides": override,
                    },
                    "Lifecycle": capacity_type,
                    "ErrorCode": self.code,
                    "ErrorMessage": "We currently do not have sufficient capacity in the Availability Zone.",
                }
            ],
        }
        return SimpleNamespace(status_code=200, headers={}), parsed

    def overrides(self, call: int) -> list[tuple[str, str]]:
        return [
            (o["InstanceType"], o["SubnetId"])
            for config in self.calls[call]["LaunchTemplateConfigs"]
            for o in config["Overrides"]
        ]


def test_launch_is_one_instant_fleet_of_the_cheapest_types_with_one_subnet_per_zone_spot_first(
    env: Env,
) -> None:
    provider = CloudProvider(env.settings)
    spy = FleetSpy(provider.ec2)
    result = provider.create(request())
    assert len(spy.calls) == 1
    call = spy.calls[0]
    assert call["Type"] == "instant"
    assert call["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "spot",
    }
    assert call["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert call["ClientToken"] == "uid-default-abcde-0"
    # c5.large (spot 0.03) before m5.large (0.04); one subnet per zone, the big one in us-east-1a.
    assert spy.overrides(0) == [("c5.large", env.subnets[z]) for z in sorted(env.subnets)] + [
        ("m5.large", env.subnets[z]) for z in sorted(env.subnets)
    ]
    assert (result.instance_type, result.capacity_type, result.zone) == ("c5.large", "spot", "us-east-1a")
    assert result.provider_id == f"aws:///us-east-1a/{result.instance_id}"
    assert parse_provider_id(result.provider_id) == ("us-east-1a", result.instance_id)
    assert result.image_id == AMD64_AMI
    tags = provider.get(result.instance_id).tags
    assert tags["karpenter.sh/nodepool"] == "default"
    assert tags["karpenter.sh/nodeclaim"] == "default-abcde"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert tags["eks:eks-cluster-name"] == CLUSTER
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tags["Name"] == "default/default-abcde"
    assert tags["team"] == "platform"


def test_on_demand_only_nodeclaim_uses_lowest_price_on_demand(env: Env) -> None:
    provider = CloudProvider(env.settings)
    spy = FleetSpy(provider.ec2)
    result = provider.create(
        request(capacity_types=frozenset({"on-demand"}), instance_types=["m5.large", "c5.large"])
    )
    assert spy.calls[0]["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert "SpotOptions" not in spy.calls[0]
    assert spy.overrides(0)[0][0] == "c5.large"  # re-ranked by price: 0.085 < 0.096
    assert result.capacity_type == "on-demand"


def test_ice_on_first_override_marks_it_and_the_next_offering_is_used(env: Env) -> None:
    provider = CloudProvider(env.settings)
    spy = FleetSpy(provider.ec2, fail_first=1)
    result = provider.create(request())
    assert len(spy.calls) == 2
    assert ("c5.large", env.subnets["us-east-1a"]) not in spy.overrides(1)
    assert spy.calls[1]["ClientToken"] != spy.calls[0]["ClientToken"]
    assert (result.instance_type, result.zone, result.capacity_type) == ("c5.large", "us-east-1b", "spot")
    assert env.store.is_unavailable("c5.large", "us-east-1a", "spot")
    assert ("c5.large", "us-east-1a", "spot") in env.store.unavailable_offerings()


def test_spot_exhausted_by_capacity_errors_falls_back_to_on_demand(env: Env) -> None:
    provider = CloudProvider(env.settings)
    for zone in env.subnets:
        for instance_type in ("c5.large", "m5.large"):
            provider.mark_unavailable(instance_type, zone, "spot", reason="SpotInterruptionWarning")
    spy = FleetSpy(provider.ec2)
    result = provider.create(request())
    assert spy.calls[0]["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    assert result.capacity_type == "on-demand"


def test_every_offering_failing_raises_insufficient_capacity_naming_the_codes(env: Env) -> None:
    provider = CloudProvider(env.settings)
    spy = FleetSpy(provider.ec2, fail_first=100, code="MaxSpotInstanceCountExceeded")
    with pytest.raises(InsufficientCapacityError, match="MaxSpotInstanceCountExceeded"):
        provider.create(request(capacity_types=frozenset({"spot"}), instance_types=["c5.large"]))
    assert len(spy.calls) == 3  # one per zone, each failure marks one offering
    assert {z for (_, z, _) in env.store.unavailable_offerings()} == set(env.subnets)


def test_a_non_capacity_fleet_error_fails_the_launch_with_its_code(env: Env) -> None:
    provider = CloudProvider(env.settings)
    spy = FleetSpy(provider.ec2, fail_first=1, code="InvalidLaunchTemplateId.NotFound")
    with pytest.raises(LaunchError, match=r"InvalidLaunchTemplateId\.NotFound"):
        provider.create(request())
    assert len(spy.calls) == 1
    assert env.store.unavailable_offerings() == set()


def test_a_launched_instance_runs_with_the_instance_profile_the_provider_made(env: Env) -> None:
    """The removal keeps a profile a live instance uses: EC2 reports the template's profile on it."""
    provider = CloudProvider(env.settings)
    launched = provider.create(request())
    profile = provider.templates.instance_profile(NodeClass(nodeclass()))
    arn = boto3.client("iam").get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Arn"]
    described = env.ec2.describe_instances(InstanceIds=[launched.instance_id])["Reservations"][0]
    assert described["Instances"][0]["IamInstanceProfile"]["Arn"] == arn


def test_a_nodeclass_naming_an_instance_profile_that_does_not_exist_fails_the_launch(env: Env) -> None:
    """EC2 refuses every override (InvalidParameterValue), as it does on AWS: nothing is launched and
    the error, an invalid request the operator fixes in the EC2NodeClass, names the profile."""
    provider = CloudProvider(env.settings)
    missing = request(nodeclass=nodeclass(role=None, instanceProfile="deleted-profile"))
    with pytest.raises(LaunchError) as failed:
        provider.create(missing)
    assert failed.value.code == "InvalidParameterValue"
    assert "Value (deleted-profile) for parameter iamInstanceProfile.name is invalid" in str(failed.value)
    assert launch_failure_class(failed.value.code) == INVALID_REQUEST
    assert env.store.unavailable_offerings() == set()  # not a capacity error: no offering ruled out
    assert provider.list() == []


def test_retried_launch_with_same_nodeclaim_returns_the_same_instance(env: Env) -> None:
    first = CloudProvider(env.settings).create(request())
    retry_provider = CloudProvider(env.settings)  # a new invocation, cold caches
    spy = FleetSpy(retry_provider.ec2)
    second = retry_provider.create(request())
    assert second.instance_id == first.instance_id
    assert second.provider_id == first.provider_id
    assert spy.calls == []  # found by its NodeClaim tag: no second CreateFleet, no second instance
    assert [i.id for i in retry_provider.list()] == [first.instance_id]


class ClientTokenIdempotency:
    """EC2's CreateFleet idempotency, which moto lacks: a seen ClientToken returns the first answer."""

    def __init__(self, client: Any) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.token = ""
        client.meta.events.register("before-parameter-build.ec2.CreateFleet", self._token)
        client.meta.events.register("before-call.ec2.CreateFleet", self._replay)
        client.meta.events.register("after-call.ec2.CreateFleet", self._remember)

    def _token(self, params: dict[str, Any], **_: Any) -> None:
        self.token = params["ClientToken"]

    def _replay(self, **_: Any) -> Any:
        answer = self.answers.get(self.token)
        return (SimpleNamespace(status_code=200, headers={}), answer) if answer else None

    def _remember(self, parsed: dict[str, Any], **_: Any) -> None:
        self.answers.setdefault(self.token, parsed)


def test_retried_launch_with_the_same_client_token_returns_the_same_instance(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = CloudProvider(env.settings)
    idempotency = ClientTokenIdempotency(provider.ec2)
    first = provider.create(request())
    # The retry cannot see the instance yet (DescribeInstances is eventually consistent) ...
    monkeypatch.setattr(CloudProvider, "find_by_nodeclaim", lambda self, name: None)
    second = CloudProvider(env.settings).create(request())
    # ... so it calls CreateFleet again with the same token, and EC2 answers with the same instance.
    assert list(idempotency.answers) == ["uid-default-abcde-0"]
    assert second.instance_id == first.instance_id
    assert len(provider.list()) == 1


def test_nodeclass_with_no_matching_subnet_fails_naming_the_selector(env: Env) -> None:
    provider = CloudProvider(env.settings)
    missing = nodeclass(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "other-cluster"}}])
    with pytest.raises(NoSubnetError, match="other-cluster") as caught:
        provider.create(request(nodeclass=missing))
    assert "subnetSelectorTerms" in str(caught.value)
    assert "default" in str(caught.value)


def test_subnet_selection_tracks_ips_taken_by_inflight_launches(env: Env) -> None:
    provider = CloudProvider(env.settings)
    terms = [{"id": env.small_subnet}, {"id": env.subnets["us-east-1b"]}]
    chosen = provider.network.zonal_subnets("default", terms)
    assert chosen["us-east-1a"].id == env.small_subnet
    free = chosen["us-east-1a"].available_ips
    provider.network.take_ips(env.small_subnet, free)
    after = provider.network.zonal_subnets("default", terms)
    assert "us-east-1a" not in after  # full once in-flight launches are counted
    assert after["us-east-1b"].id == env.subnets["us-east-1b"]
    with pytest.raises(NoSubnetError, match=f"out of free IPs: \\['{env.small_subnet}'\\]"):
        provider.network.zonal_subnets("default", terms, zones=["us-east-1a"])


def test_selectors_by_id_name_and_wildcard_tag(env: Env) -> None:
    provider = CloudProvider(env.settings)
    by_wildcard = provider.network.subnets("default", [{"tags": {"karpenter.sh/discovery": "*"}}])
    assert {s.id for s in by_wildcard} == {*env.subnets.values(), env.small_subnet}
    assert provider.network.security_groups("default", [{"name": "nodes"}]) == [env.security_group]
    assert provider.network.security_groups("default", [{"id": env.security_group}]) == [env.security_group]


def test_launch_template_is_reused_per_configuration_and_carries_the_nodeclass_settings(env: Env) -> None:
    provider = CloudProvider(env.settings)
    provider.create(request("a-1"))
    provider.create(request("a-2"))
    templates = env.ec2.describe_launch_templates()["LaunchTemplates"]
    assert len(templates) == 1
    template = templates[0]
    assert template["LaunchTemplateName"].startswith(f"nodewright/{CLUSTER}/")
    lt_tags = {t["Key"]: t["Value"] for t in template["Tags"]}
    assert lt_tags["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert lt_tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    data = env.ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["ImageId"] == AMD64_AMI
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 20
    assert data["SecurityGroupIds"] == [env.security_group]
    user_data = email.message_from_string(base64.b64decode(data["UserData"]).decode())
    nodeconfig = [
        p.get_payload() for p in user_data.walk() if p.get_content_type() == "application/node.eks.aws"
    ]
    assert "karpenter.sh/capacity-type=spot" in nodeconfig[0]
    assert "dedicated=a:NoSchedule" in nodeconfig[0]
    assert "node-role.kubernetes.io" not in nodeconfig[0]  # the kubelet would refuse to start
    profile = data["IamInstanceProfile"]["Name"]
    roles = boto3.client("iam").get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]["Roles"]
    assert [r["RoleName"] for r in roles] == ["NodeRole"]
    # A changed NodeClass gets its own template.
    provider.create(request("a-3", nodeclass=nodeclass(metadataOptions={"httpPutResponseHopLimit": 2})))
    assert len(env.ec2.describe_launch_templates()["LaunchTemplates"]) == 2


@pytest.mark.parametrize(
    "listed_by", ["the cleanup", "garbage collection"], ids=["listed-by-cleanup", "listed-by-gc"]
)
def test_cleanup_deletes_only_templates_no_live_instance_uses(env: Env, listed_by: str) -> None:
    provider = CloudProvider(env.settings)
    kept = provider.create(request("keep-1"))
    gone = provider.create(request("gone-1", nodeclass=nodeclass(metadataOptions={"httpTokens": "optional"})))
    provider.delete(gone.instance_id)
    later = datetime.now(UTC) + timedelta(hours=2)
    # Garbage collection hands the cleanup the instances it listed (CloudProvider.cleanup_launch_templates).
    in_use = used_by(i.tags for i in provider.list()) if listed_by == "garbage collection" else None
    deleted = provider.templates.cleanup(in_use=in_use, now=later)
    names = [t["LaunchTemplateName"] for t in env.ec2.describe_launch_templates()["LaunchTemplates"]]
    assert deleted
    assert set(deleted).isdisjoint(names)
    assert len(names) == 1
    assert provider.get(kept.instance_id).tags["karpenter.k8s.aws/launch-template"] == names[0]
    assert provider.templates.cleanup() == []  # too young: never races a launch in progress


def test_delete_is_idempotent_and_get_list_reflect_it(env: Env) -> None:
    provider = CloudProvider(env.settings)
    result = provider.create(request())
    assert [i.id for i in provider.list()] == [result.instance_id]
    assert provider.delete(result.instance_id) is True
    assert provider.delete(result.instance_id) is False
    assert provider.delete("i-0123456789abcdef0") is False
    assert provider.list() == []
    assert provider.delete_by_nodeclaim("default-abcde") == []


def test_arm64_type_gets_the_arm64_ami(env: Env) -> None:
    provider = CloudProvider(env.settings)
    result = provider.create(request(instance_types=["m6g.large"], capacity_types=frozenset({"on-demand"})))
    assert (result.instance_type, result.image_id) == ("m6g.large", ARM64_AMI)


def test_candidates_given_as_scheduler_models_use_their_offerings(env: Env) -> None:
    provider = CloudProvider(env.settings)
    offering = SimpleNamespace
    model = SimpleNamespace(
        name="m5.large",
        offerings=[
            offering(zone="us-east-1a", capacity_type="on-demand", price=0.096, available=False),
            offering(zone="us-east-1c", capacity_type="on-demand", price=0.096, available=True),
        ],
    )
    spy = FleetSpy(provider.ec2)
    result = provider.create(request(instance_types=[model], capacity_types=frozenset({"on-demand"})))
    assert spy.overrides(0) == [("m5.large", env.subnets["us-east-1c"])]
    assert result.zone == "us-east-1c"


def test_dynamic_drift_is_the_ami_subnet_or_security_groups_the_nodeclass_no_longer_selects(env: Env) -> None:
    provider = CloudProvider(env.settings)
    result = provider.create(request())
    instance = provider.get(result.instance_id)
    nc = nodeclass()
    inputs = provider.drift_inputs(nc)
    assert inputs.image_ids == {AMD64_AMI, ARM64_AMI}
    assert instance.subnet_id in inputs.subnet_ids
    assert instance.nodeclass_hash == nodeclass_hash(nc), "the static hash is tagged at launch"
    assert instance.security_groups == {env.security_group}, "the launch template's groups, as on EC2"
    assert provider.drift_reason(instance, nc) is None
    # A static field (tags) is static drift, judged on the NodeClaim's annotation, not here.
    assert provider.drift_reason(instance, nodeclass(tags={"team": "other"})) is None
    image = env.ec2.register_image(Name="pinned", Architecture="x86_64", RootDeviceName="/dev/xvda")[
        "ImageId"
    ]
    pinned = nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"id": image}])
    fresh = CloudProvider(env.settings)
    assert fresh.drift_inputs(pinned).image_ids == {image}
    assert fresh.drift_reason(instance, pinned) == "AMIDrift"
    other = env.ec2.create_security_group(
        GroupName="other",
        Description="other",
        VpcId=env.ec2.describe_subnets(SubnetIds=[instance.subnet_id])["Subnets"][0]["VpcId"],
    )["GroupId"]
    assert fresh.drift_reason(instance, nodeclass(securityGroupSelectorTerms=[{"id": other}])) == (
        "SecurityGroupDrift"
    )
    elsewhere = dataclasses.replace(instance, subnet_id="subnet-0000000000000dead")
    assert provider.drift_reason(elsewhere, nc) == "SubnetDrift"


def test_nodeclass_status_lists_what_the_selectors_resolve_to(env: Env) -> None:
    status = CloudProvider(env.settings).nodeclass_status(nodeclass()).status
    assert {(s["id"], s["zone"]) for s in status["subnets"]} == {
        *((subnet, zone) for zone, subnet in env.subnets.items()),
        (env.small_subnet, "us-east-1a"),
    }
    assert status["securityGroups"] == [{"id": env.security_group, "name": "nodes"}]
    assert [(a["id"], a["requirements"][0]["values"]) for a in status["amis"]] == [
        (AMD64_AMI, ["amd64"]),
        (ARM64_AMI, ["arm64"]),
    ]
    assert status["instanceProfile"].startswith(f"{CLUSTER}_")


def test_instance_types_leave_out_architectures_the_nodeclass_has_no_ami_for(env: Env) -> None:
    image = env.ec2.register_image(Name="x86", Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
    x86_only = nodeclass(amiFamily="AL2023", amiSelectorTerms=[{"id": image}])
    names = {t.name for t in CloudProvider(env.settings).instance_types(x86_only)}
    assert "m5.large" in names
    assert "m6g.large" not in names


def test_custom_family_without_ami_terms_is_rejected_with_a_message(env: Env) -> None:
    provider = CloudProvider(env.settings)
    custom = nodeclass(amiFamily="Custom", amiSelectorTerms=[])
    with pytest.raises(InvalidNodeClassError, match="amiSelectorTerms"):
        provider.create(request(nodeclass=custom))


def test_ami_selector_by_name_and_tags_takes_the_newest_per_architecture(env: Env) -> None:
    old = env.ec2.register_image(Name="team-node-1", Architecture="x86_64", RootDeviceName="/dev/xvda")[
        "ImageId"
    ]
    env.ec2.create_tags(Resources=[old], Tags=[{"Key": "team", "Value": "a"}])
    provider = CloudProvider(env.settings)
    images = provider.amis.images(
        provider_nodeclass({"amiFamily": "AL2023", "amiSelectorTerms": [{"tags": {"team": "a"}}]})
    )
    assert [(i.id, i.arch) for i in images] == [(old, "amd64")]
    by_name = provider.amis.images(
        provider_nodeclass(
            {"amiFamily": "AL2023", "amiSelectorTerms": [{"name": "team-node-*", "owner": "self"}]}
        )
    )
    assert [i.id for i in by_name] == [old]


def provider_nodeclass(spec: dict[str, Any]) -> Any:
    from nodewright.cloud.nodeclass import NodeClass

    return NodeClass({"metadata": {"name": "custom"}, "spec": spec})


def test_instance_types_come_priced_with_offerings_for_the_nodeclass_zones(env: Env) -> None:
    pytest.importorskip(
        "nodewright.scheduling.instancetypes", reason="scheduling helper's module not there yet"
    )
    provider = CloudProvider(env.settings)
    provider.mark_unavailable("m5.large", "us-east-1b", "spot")
    types = {t.name: t for t in provider.instance_types(nodeclass())}
    m5 = types["m5.large"]
    zones = {o.zone for o in m5.offerings}
    assert zones == set(env.subnets)
    spot_b = next(o for o in m5.offerings if o.zone == "us-east-1b" and o.capacity_type == "spot")
    assert spot_b.available is False
    od = next(o for o in m5.offerings if o.capacity_type == "on-demand")
    assert od.price == pytest.approx(0.096)


def test_a_nodeclass_script_with_non_ascii_text_launches_with_utf8_user_data(env: Env) -> None:
    script = "#!/bin/bash\n# Cache warm-up — naïve but safe ✓\necho ready\n"
    provider = CloudProvider(env.settings)

    provider.create(request("utf8-1", nodeclass=nodeclass(userData=script)))

    template = env.ec2.describe_launch_templates()["LaunchTemplates"][0]
    data = env.ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    user_data = email.message_from_bytes(base64.b64decode(data["UserData"]))
    first = next(p for p in user_data.walk() if not p.is_multipart())
    assert first.get_content_charset() == "utf-8"
    assert first.get_payload(decode=True).decode("utf-8") == script
