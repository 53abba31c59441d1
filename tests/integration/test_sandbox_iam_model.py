"""The sandbox's IAM authorization model (sandbox/iam/authorization.py) on known answers.

What AWS authorizes for one call is the sandbox's own model; these cases pin it to the EC2 user
guide and the Service Authorization Reference, and to Karpenter's controller policy
(aws/karpenter-provider-aws, ``KarpenterControllerPolicy``), which real accounts run with: a
Karpenter-shaped launch must be allowed by it, and the same launch tagged for another cluster
refused. Decisions are the real evaluator's (``sandbox.iam.evaluator``, Node.js).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sandbox.iam.authorization import (
    Call,
    FakeWorld,
    InstanceProfileView,
    LaunchTemplateView,
    UnknownCall,
    authorizations,
)
from sandbox.iam.evaluator import Evaluator, Request

ACCOUNT = "123456789012"
REGION = "us-east-1"
CLUSTER = "demo"
PRINCIPAL = f"arn:aws:sts::{ACCOUNT}:assumed-role/Controller/session"
OWNED = {f"kubernetes.io/cluster/{CLUSTER}": "owned", "karpenter.sh/nodepool": "default"}
NODE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/KarpenterNodeRole-{CLUSTER}"


def karpenter_controller_policy(cluster: str = CLUSTER) -> dict[str, Any]:
    """The EC2/IAM/SSM/EKS statements of Karpenter v1's KarpenterControllerPolicy (getting-started
    CloudFormation template), for one cluster in us-east-1."""
    p, r = "aws", REGION
    cluster_tag = f"aws:RequestTag/kubernetes.io/cluster/{cluster}"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowScopedEC2InstanceActions",
                "Effect": "Allow",
                "Resource": [
                    f"arn:{p}:ec2:{r}::image/*",
                    f"arn:{p}:ec2:{r}::snapshot/*",
                    f"arn:{p}:ec2:{r}:*:spot-instances-request/*",
                    f"arn:{p}:ec2:{r}:*:security-group/*",
                    f"arn:{p}:ec2:{r}:*:subnet/*",
                    f"arn:{p}:ec2:{r}:*:launch-template/*",
                ],
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Resource": [
                    f"arn:{p}:ec2:{r}:*:{kind}/*"
                    for kind in ("fleet", "instance", "volume", "network-interface", "launch-template")
                ],
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Condition": {
                    "StringEquals": {cluster_tag: "owned"},
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Resource": [
                    f"arn:{p}:ec2:{r}:*:{kind}/*"
                    for kind in ("fleet", "instance", "volume", "network-interface", "launch-template")
                ],
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": {
                        cluster_tag: "owned",
                        "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Resource": [f"arn:{p}:ec2:{r}:*:instance/*", f"arn:{p}:ec2:{r}:*:launch-template/*"],
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Condition": {
                    "StringEquals": {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"},
                    "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Resource": "*",
                "Action": ["ec2:DescribeInstances", "ec2:DescribeSubnets", "ec2:DescribeLaunchTemplates"],
                "Condition": {"StringEquals": {"aws:RequestedRegion": r}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Resource": f"arn:{p}:ssm:{r}::parameter/aws/service/*",
                "Action": "ssm:GetParameter",
            },
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Resource": NODE_ROLE,
                "Action": "iam:PassRole",
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            },
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Resource": f"arn:{p}:eks:{r}:{ACCOUNT}:cluster/{cluster}",
                "Action": "eks:DescribeCluster",
            },
        ],
    }


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator(ACCOUNT) as running:
        running.set_policies(
            PRINCIPAL, [{"name": "KarpenterControllerPolicy", "policy": karpenter_controller_policy()}]
        )
        yield running


def world(template_tags: dict[str, str] = OWNED) -> FakeWorld:
    found = FakeWorld()
    found.templates["lt-1"] = LaunchTemplateView(
        "lt-1",
        f"karpenter.k8s.aws/{CLUSTER}",
        {
            "ImageId": "ami-1",
            "SecurityGroupIds": ["sg-1"],
            "IamInstanceProfile": {"Name": "profile"},
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20}}],
            "TagSpecifications": [
                {
                    "ResourceType": "network-interface",
                    "Tags": [{"Key": k, "Value": v} for k, v in OWNED.items()],
                }
            ],
        },
        template_tags,
    )
    found.profiles["profile"] = InstanceProfileView("profile", "/", {}, (NODE_ROLE,))
    return found


def fleet(tags: dict[str, str] = OWNED, capacity: str = "spot") -> Call:
    specs = [
        {"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        for kind in ("fleet", "instance", "volume")
    ]
    params = {
        "Type": "instant",
        "TargetCapacitySpecification": {"DefaultTargetCapacityType": capacity, "TotalTargetCapacity": 1},
        "TagSpecifications": specs,
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1", "Version": "$Latest"},
                "Overrides": [{"InstanceType": "m5.large", "SubnetId": "subnet-1"}],
            }
        ],
    }
    return Call("ec2", "CreateFleet", params, REGION, ACCOUNT, PRINCIPAL)


def of(requests: list[Request], action: str) -> dict[str, Request]:
    """The authorizations of ``action``, by resource type (``instance``, ``image``...)."""
    return {r.resource.split(":", 5)[5].split("/")[0]: r for r in requests if r.action == action}


def test_an_instant_spot_fleet_is_authorized_as_ec2_does() -> None:
    requests = authorizations(fleet(), world())
    create, run = of(requests, "ec2:CreateFleet"), of(requests, "ec2:RunInstances")
    # CreateFleet: the fleet, its launch template, what the request names (override subnets), and the
    # instance and volumes; not what only the launch template names.
    assert set(create) == {"fleet", "launch-template", "subnet", "instance", "volume"}
    # RunInstances: everything the launch creates or uses, the launch template's resources included.
    assert set(run) == {
        "instance", "volume", "network-interface", "spot-instances-request",
        "image", "security-group", "subnet", "launch-template",
    }  # fmt: skip
    assert run["image"].resource == "arn:aws:ec2:us-east-1::image/ami-1"  # AMIs have no account
    assert run["instance"].context["aws:RequestTag/karpenter.sh/nodepool"] == "default"
    assert run["instance"].context["aws:TagKeys"] == sorted(OWNED)
    assert "aws:TagKeys" not in run["spot-instances-request"].context  # EC2 cannot tag it
    assert run["launch-template"].context["ec2:ResourceTag/karpenter.sh/nodepool"] == "default"
    # The ENI's tags come from the launch template's TagSpecifications.
    assert run["network-interface"].context["aws:RequestTag/kubernetes.io/cluster/demo"] == "owned"
    tagging = {
        r.resource.split(":", 5)[5].split("/")[0]: r.context for r in requests if r.action == "ec2:CreateTags"
    }
    assert set(tagging) == {"fleet", "instance", "volume", "network-interface"}
    assert tagging["fleet"]["ec2:CreateAction"] == "CreateFleet"
    assert tagging["instance"]["ec2:CreateAction"] == "RunInstances"
    (passed,) = [r for r in requests if r.action == "iam:PassRole"]
    assert passed.resource == NODE_ROLE
    assert passed.context["iam:PassedToService"] == "ec2.amazonaws.com"
    for request in requests:
        assert request.context["aws:RequestedRegion"] == REGION
        assert request.context["aws:PrincipalArn"] == f"arn:aws:iam::{ACCOUNT}:role/Controller"


def test_a_launch_into_a_capacity_reservation_is_authorized_on_the_reservation() -> None:
    """A launch template targeting a reservation (Karpenter: one template per reservation) makes
    RunInstances use the ``capacity-reservation`` resource, with the reservation's tags; CreateFleet's
    own resources never include what only the launch template names."""
    found = world()
    template = found.templates["lt-1"]
    data = {
        **template.data,
        "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": "cr-1"}},
        "InstanceMarketOptions": {"MarketType": "capacity-block"},
    }
    found.templates["lt-1"] = LaunchTemplateView(template.id, template.name, data, template.tags)
    found.tags["cr-1"] = {"team": "ml"}
    requests = authorizations(fleet(capacity="capacity-block"), found)
    run, create = of(requests, "ec2:RunInstances"), of(requests, "ec2:CreateFleet")
    assert run["capacity-reservation"].resource == f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/cr-1"
    assert run["capacity-reservation"].context["aws:ResourceTag/team"] == "ml"
    assert "capacity-reservation" not in create
    assert "spot-instances-request" not in run  # a capacity-block launch is no spot request


def test_karpenters_controller_policy_allows_the_launch_and_every_key_applies(evaluator: Evaluator) -> None:
    requests = authorizations(fleet(), world())
    decisions = evaluator.decide(PRINCIPAL, requests)
    refused = [
        (r.action, r.resource, d.result) for r, d in zip(requests, decisions, strict=True) if not d.allowed
    ]
    assert refused == []
    # Every context key the model sets applies to its action and resource type (the reference's view).
    assert [
        (r.action, r.resource, d.ignored) for r, d in zip(requests, decisions, strict=True) if d.ignored
    ] == []
    granting = {g.sid for d in decisions for g in d.grants}
    assert {"AllowScopedEC2InstanceActions", "AllowScopedEC2InstanceActionsWithTags",
            "AllowScopedResourceCreationTagging", "AllowPassingInstanceRole"} <= granting  # fmt: skip


def test_karpenters_controller_policy_refuses_a_launch_for_another_cluster(evaluator: Evaluator) -> None:
    theirs = {"kubernetes.io/cluster/other": "owned", "karpenter.sh/nodepool": "default"}
    requests = authorizations(fleet(theirs), world())
    decisions = evaluator.decide(PRINCIPAL, requests)
    refused = {
        (r.action, r.resource.rsplit(":", 1)[-1])
        for r, d in zip(requests, decisions, strict=True)
        if not d.allowed
    }
    assert ("ec2:RunInstances", "instance/(new)") in refused
    assert ("ec2:CreateFleet", "fleet/(new)") in refused


def test_deleting_and_terminating_carry_the_resources_tags(evaluator: Evaluator) -> None:
    found = world()
    found.tags["i-1"] = OWNED
    terminate = Call("ec2", "TerminateInstances", {"InstanceIds": ["i-1", "i-2"]}, REGION, ACCOUNT, PRINCIPAL)
    requests = authorizations(terminate, found)
    assert [r.resource.rsplit("/", 1)[-1] for r in requests] == ["i-1", "i-2"]
    assert requests[0].context["aws:ResourceTag/karpenter.sh/nodepool"] == "default"
    assert [d.allowed for d in evaluator.decide(PRINCIPAL, requests)] == [True, False]  # i-2 is untagged
    delete = Call(
        "ec2",
        "DeleteLaunchTemplate",
        {"LaunchTemplateName": f"karpenter.k8s.aws/{CLUSTER}"},
        REGION,
        ACCOUNT,
        PRINCIPAL,
    )
    (request,) = authorizations(delete, found)
    assert request.resource.endswith(":launch-template/lt-1")
    assert request.context["ec2:ResourceTag/kubernetes.io/cluster/demo"] == "owned"
    assert evaluator.decide(PRINCIPAL, [request])[0].allowed


def test_creating_a_tagged_launch_template_is_also_a_create_tags() -> None:
    tags = [{"Key": k, "Value": v} for k, v in OWNED.items()]
    call = Call(
        "ec2",
        "CreateLaunchTemplate",
        {
            "LaunchTemplateName": "x",
            "LaunchTemplateData": {},
            "TagSpecifications": [{"ResourceType": "launch-template", "Tags": tags}],
        },
        REGION,
        ACCOUNT,
        PRINCIPAL,
    )
    create, tag = authorizations(call, FakeWorld())
    assert (create.action, tag.action) == ("ec2:CreateLaunchTemplate", "ec2:CreateTags")
    assert tag.context["ec2:CreateAction"] == "CreateLaunchTemplate"
    assert create.context["aws:TagKeys"] == sorted(OWNED)


def test_instance_profiles_carry_their_path_and_passing_the_role_is_authorized() -> None:
    found = FakeWorld(roles={"NodeRole": NODE_ROLE})
    found.profiles["mine"] = InstanceProfileView("mine", "/nodewright/us-east-1/demo/", {"a": "b"}, ())
    get = Call("iam", "GetInstanceProfile", {"InstanceProfileName": "mine"}, REGION, ACCOUNT, PRINCIPAL)
    (request,) = authorizations(get, found)
    assert request.resource == f"arn:aws:iam::{ACCOUNT}:instance-profile/nodewright/us-east-1/demo/mine"
    assert request.context["aws:RequestedRegion"] == "us-east-1"  # IAM is global: its endpoint's region
    missing = Call(
        "iam", "GetInstanceProfile", {"InstanceProfileName": "gone"}, "eu-west-1", ACCOUNT, PRINCIPAL
    )
    assert authorizations(missing, found)[0].resource == f"arn:aws:iam::{ACCOUNT}:instance-profile/gone"
    add = Call(
        "iam",
        "AddRoleToInstanceProfile",
        {"InstanceProfileName": "mine", "RoleName": "NodeRole"},
        REGION,
        ACCOUNT,
        PRINCIPAL,
    )
    profile, passing = authorizations(add, found)
    assert profile.context["aws:ResourceTag/a"] == "b"
    assert (passing.action, passing.resource, passing.context["iam:PassedToService"]) == (
        "iam:PassRole", NODE_ROLE, "ec2.amazonaws.com",
    )  # fmt: skip
    tags = [{"Key": "k", "Value": "v"}]
    create = Call(
        "iam",
        "CreateInstanceProfile",
        {"InstanceProfileName": "n", "Path": "/p/", "Tags": tags},
        REGION,
        ACCOUNT,
        PRINCIPAL,
    )
    made, tagged = authorizations(create, found)
    assert made.resource.endswith(":instance-profile/p/n")
    assert tagged.action == "iam:TagInstanceProfile"
    assert tagged.context["aws:ResourceTag/k"] == tagged.context["aws:RequestTag/k"] == "v"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            ("ssm", "GetParameter", {"Name": "/aws/service/eks/x"}),
            ("ssm:GetParameter", "arn:aws:ssm:us-east-1::parameter/aws/service/eks/x"),
        ),
        (
            ("ssm", "GetParameter", {"Name": "/mine/x"}),
            ("ssm:GetParameter", f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/mine/x"),
        ),
        (
            ("ssm", "PutParameter", {"Name": "/nodewright/c/removal-report", "Overwrite": True}),
            ("ssm:PutParameter", f"arn:aws:ssm:us-east-1:{ACCOUNT}:parameter/nodewright/c/removal-report"),
        ),
        (
            ("dynamodb", "Query", {"TableName": "t", "IndexName": "i"}),
            ("dynamodb:Query", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t/index/i"),
        ),
        (
            ("dynamodb", "PutItem", {"TableName": "t"}),
            ("dynamodb:PutItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/t"),
        ),
        (
            ("sqs", "DeleteMessageBatch", {"QueueUrl": f"http://x/{ACCOUNT}/q"}),
            ("sqs:DeleteMessage", f"arn:aws:sqs:us-east-1:{ACCOUNT}:q"),
        ),
        (
            ("eks", "DescribeCluster", {"name": "demo"}),
            ("eks:DescribeCluster", f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/demo"),
        ),
        (
            ("lambda", "Invoke", {"FunctionName": "f", "Qualifier": "wakeup"}),
            ("lambda:InvokeFunction", f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:f:wakeup"),
        ),
        (("ec2", "DescribeInstances", {}), ("ec2:DescribeInstances", "*")),
        (("iam", "ListInstanceProfiles", {"PathPrefix": "/p/"}), ("iam:ListInstanceProfiles", "*")),
        (("pricing", "GetProducts", {}), ("pricing:GetProducts", "*")),
    ],
)
def test_resources_as_the_service_authorization_reference_names_them(
    call: Any, expected: tuple[str, str]
) -> None:
    service, operation, params = call
    (request,) = authorizations(Call(service, operation, params, REGION, ACCOUNT, PRINCIPAL), FakeWorld())
    assert (request.action, request.resource) == expected


def test_a_call_with_no_model_is_refused_and_says_where_to_add_one() -> None:
    call = Call("ec2", "ModifyInstanceAttribute", {"InstanceId": "i-1"}, REGION, ACCOUNT, PRINCIPAL)
    with pytest.raises(UnknownCall, match=r"no authorization model for ec2:ModifyInstanceAttribute.*MODEL"):
        authorizations(call, FakeWorld())
    assert authorizations(Call("sts", "GetCallerIdentity", {}, REGION, ACCOUNT, PRINCIPAL), FakeWorld()) == []
