"""The tags the cloud code really sends satisfy the IAM tag conditions of the synthesized policy.

The launch path of ``nodewright.cloud`` (instance profile, launch template, CreateFleet) runs
against recording fakes of the EC2 and IAM clients, so the TagSpecifications checked here are
the ones AWS would receive. Each tag-conditioned statement of the stack's policy is then
evaluated against them, as IAM would: a condition on ``aws:RequestTag/K`` needs tag K, with
that value, on the resource type being created.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import pytest
from botocore.exceptions import ClientError
from infra_synth import Synth

from infra.capabilities.permissions import TAGGED_AT_CREATION, UNTAGGED_LAUNCH_RESOURCES

CLUSTER = "demo"  # the fast synth's clusterName
REGION = "us-east-1"


def _not_found(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "not found"}}, operation)


@dataclass
class Recorded:
    """What the fakes received: per resource type, the tags set at its creation."""

    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    profile_path: str = ""

    def add(self, resource_type: str, tags: list[dict[str, str]]) -> None:
        self.tags.setdefault(resource_type, {}).update({t["Key"]: t["Value"] for t in tags})


class FakeEc2:
    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def describe_launch_templates(self, **_: Any) -> Any:
        raise _not_found("InvalidLaunchTemplateName.NotFoundException", "DescribeLaunchTemplates")

    def create_launch_template(self, **params: Any) -> Any:
        for spec in params["TagSpecifications"]:
            self.recorded.add(spec["ResourceType"], spec["Tags"])
        return {}

    def create_fleet(self, **params: Any) -> Any:
        for spec in params["TagSpecifications"]:
            self.recorded.add(spec["ResourceType"], spec["Tags"])
        config = params["LaunchTemplateConfigs"][0]
        return {
            "Instances": [
                {
                    "InstanceIds": ["i-0123456789abcdef0"],
                    "InstanceType": config["Overrides"][0]["InstanceType"],
                    "Lifecycle": "spot",
                    "LaunchTemplateAndOverrides": {
                        "LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                        "Overrides": {**config["Overrides"][0], "AvailabilityZone": f"{REGION}a"},
                    },
                }
            ]
        }


class FakeCatalog:
    def info(self, name: str) -> dict[str, Any]:
        return {"ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}


class FakeIam:
    def __init__(self, recorded: Recorded) -> None:
        self.recorded = recorded

    def get_instance_profile(self, **_: Any) -> Any:
        raise _not_found("NoSuchEntity", "GetInstanceProfile")

    def create_instance_profile(self, **params: Any) -> Any:
        self.recorded.add("instance-profile", params["Tags"])
        self.recorded.profile_path = params["Path"]
        return {"InstanceProfile": {"InstanceProfileName": params["InstanceProfileName"], "Roles": []}}

    def add_role_to_instance_profile(self, **_: Any) -> None:
        return None


@pytest.fixture(scope="module")
def recorded(monkeypatch_module: pytest.MonkeyPatch) -> Recorded:
    """One spot launch for a NodeClaim of NodePool "default" through the real cloud code."""
    from nodewright.cloud import provider as provider_module
    from nodewright.cloud.amis import Image
    from nodewright.cloud.catalog import RawOffering
    from nodewright.cloud.eks import ClusterInfo
    from nodewright.cloud.launchtemplates import LaunchTemplates
    from nodewright.cloud.network import Subnet
    from nodewright.cloud.nodeclass import NodeClass
    from nodewright.settings import Settings

    info = ClusterInfo(CLUSTER, "https://example.eks.amazonaws.com", "Y2E=", "1.31", "10.100.0.0/16")
    monkeypatch_module.setattr(provider_module, "cluster_info", lambda settings: info)
    result = Recorded()
    cloud = object.__new__(provider_module.CloudProvider)  # no clients, no state table
    cloud.settings = Settings(cluster_name=CLUSTER, region=REGION)
    cloud.cluster_name = CLUSTER
    cloud.ec2 = FakeEc2(result)
    cloud.catalog = FakeCatalog()
    cloud.templates = LaunchTemplates(cloud.ec2, FakeIam(result), CLUSTER, REGION)
    nodeclass = {
        "metadata": {"name": "default"},
        "spec": {"role": "NodeRole", "amiFamily": "AL2023", "tags": {"team": "platform"}},
    }
    nc = NodeClass(nodeclass)
    request = provider_module.LaunchRequest(
        nodeclaim_name="default-abcde",
        nodeclaim_uid="uid-1",
        nodepool_name="default",
        nodeclass=nodeclass,
        instance_types=["m5.large"],
        capacity_types=frozenset({"spot"}),
    )
    launch = provider_module._Launch(
        request=request,
        nodeclass=nc,
        subnets={f"{REGION}a": Subnet("subnet-a", f"{REGION}a", "use1-az1", 100, "vpc-1")},
        security_groups=("sg-1",),
        images=(Image("ami-1", "amd64"),),
        instance_profile=cloud.templates.instance_profile(nc),
    )
    offering = RawOffering(f"{REGION}a", "spot", 0.03, True)
    fleet = cloud._fleet_request(launch, "spot", [("m5.large", [offering])], 0)
    outcome = cloud._create_fleet(request.nodeclaim_name, fleet)
    assert outcome.launched is not None
    assert outcome.errors == ()
    return result


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _statement(synth: Synth, sid: str) -> dict[str, Any]:
    for policy in synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement.get("Sid") == sid:
                return statement
    raise AssertionError(f"no statement {sid}")


def _kinds(statement: dict[str, Any]) -> set[str]:
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return {json.dumps(r).rsplit(":", 1)[-1].split("/", 1)[0] for r in resources}


def _tag_conditions_hold(conditions: Mapping[str, Mapping[str, Any]], tags: Mapping[str, str]) -> list[str]:
    """The tag conditions (aws:RequestTag/ or aws:ResourceTag/) that ``tags`` fail, as IAM reads them."""
    failed = []
    for operator, entries in conditions.items():
        for key, wanted in entries.items():
            if not key.startswith(("aws:RequestTag/", "aws:ResourceTag/")):
                continue  # ec2:CreateAction and the like: not about tags
            tag = key.split("/", 1)[1]
            values = wanted if isinstance(wanted, list) else [wanted]
            actual = tags.get(tag)
            if operator == "StringEquals":
                ok = actual in values
            elif operator == "StringLike":
                ok = actual is not None and any(fnmatchcase(actual, v) for v in values)
            else:
                raise AssertionError(f"unexpected operator {operator}")
            if not ok:
                failed.append(f"{operator} {key}={wanted} (sent: {actual!r})")
    return failed


def test_every_resource_gated_on_request_tags_is_tagged_at_creation_with_them(
    recorded: Recorded, default_synth: Synth
) -> None:
    for sid in ("CreateOnlyTaggedForThisCluster", "TagOnlyOnCreate"):
        statement = _statement(default_synth, sid)
        for kind in _kinds(statement):
            assert kind in recorded.tags, (
                f"{sid} requires request tags on {kind}, which the code does not tag"
            )
            failed = _tag_conditions_hold(statement["Condition"], recorded.tags[kind])
            assert not failed, f"{sid}: {kind} created with tags that fail {failed}"


def test_what_the_code_does_not_tag_is_not_gated_on_request_tags(
    recorded: Recorded, default_synth: Synth
) -> None:
    assert set(TAGGED_AT_CREATION) <= recorded.tags.keys()
    untagged = set(UNTAGGED_LAUNCH_RESOURCES) - recorded.tags.keys()
    assert untagged == set(UNTAGGED_LAUNCH_RESOURCES), (
        f"the code now tags {set(UNTAGGED_LAUNCH_RESOURCES) - untagged}: move them to TAGGED_AT_CREATION"
    )
    assert _kinds(_statement(default_synth, "LaunchSideResources")) == untagged


def test_created_resources_can_later_be_terminated_and_deleted(
    recorded: Recorded, default_synth: Synth
) -> None:
    """ResourceTag conditions see the tags set at creation (the code never retags)."""
    delete = _statement(default_synth, "DeleteOnlyOwned")
    for kind in ("instance", "launch-template"):
        assert not _tag_conditions_hold(delete["Condition"], recorded.tags[kind]), kind
    launch_from = _statement(default_synth, "LaunchFromOwnedLaunchTemplates")
    assert not _tag_conditions_hold(launch_from["Condition"], recorded.tags["launch-template"])


def test_instance_profile_is_created_where_and_as_the_policy_allows(
    recorded: Recorded, default_synth: Synth
) -> None:
    tags = recorded.tags["instance-profile"]
    for sid in ("CreateOwnInstanceProfiles", "TagOwnInstanceProfiles", "SetTheRoleOfOwnInstanceProfiles"):
        statement = _statement(default_synth, sid)
        assert not _tag_conditions_hold(statement["Condition"], tags), sid
        # ".../instance-profile/nodewright/", {"Ref": "AWS::Region"}, "/demo/*" with the region filled in
        parts = statement["Resource"]["Fn::Join"][1]
        after_account = parts[parts.index(":instance-profile/nodewright/") :]
        arn_path = "".join(p if isinstance(p, str) else REGION for p in after_account)
        assert arn_path == f":instance-profile{recorded.profile_path}*", (sid, recorded.profile_path)
