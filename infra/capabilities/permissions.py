"""Least-privilege IAM for the functions' role, modelled on Karpenter's controller policy.

Reconciled with what ``nodewright.cloud`` actually calls (every AWS call lives there):

- ec2: CreateFleet (type instant; EC2 also authorizes RunInstances for it), CreateLaunchTemplate,
  DeleteLaunchTemplate, TerminateInstances, and the Describe* reads in ``READ_ACTIONS``;
  CreateTags only as part of those creations (the code never tags after creation);
- iam: GetInstanceProfile, CreateInstanceProfile (with tags, so TagInstanceProfile too),
  AddRoleToInstanceProfile, RemoveRoleFromInstanceProfile (``cloud/launchtemplates.py``), and
  PassRole for the node role (the profile and the launch carry it);
- ssm:GetParameter (public AMI aliases), eks:DescribeCluster, pricing:GetProducts;
- DynamoDB and SQS through the constructs' ``grant_*``. The EKS token is a presigned
  sts:GetCallerIdentity, which needs no permission.

The tag contract (IAM conditions key on it; tests/infra/test_infra_iam_tags.py runs the cloud
code and checks the tags it really sends against these statements):

- at creation, ``TAGGED_AT_CREATION`` resources carry ``kubernetes.io/cluster/<cluster>=owned``,
  ``eks:eks-cluster-name=<cluster>`` and ``karpenter.sh/nodepool=<pool>`` (CreateFleet's
  TagSpecifications tag instance and volume; CreateLaunchTemplate tags the launch-template);
- the other resources a launch creates (``UNTAGGED_LAUNCH_RESOURCES``: the instant fleet, the
  network interface, the spot request) get no tags from the code, so they cannot be gated on
  request tags; they are allowed only for CreateFleet/RunInstances, which cannot succeed
  without also creating an instance that must carry this cluster's tags;
- only instances and launch templates carrying ``kubernetes.io/cluster/<cluster>=owned`` and a
  ``karpenter.sh/nodepool`` tag can be terminated or deleted;
- instance profiles live under the path ``/nodewright/<region>/<cluster>/`` and carry
  ``kubernetes.io/cluster/<cluster>=owned`` and ``eks:eks-cluster-name=<cluster>``.

No statement grants a ``*`` action; the only ``Resource: *`` statements are EC2 reads
(Describe* calls support no resource-level permissions), scoped to the stack's region,
and pricing:GetProducts (which has no resources at all).
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

TAGGED_AT_CREATION = ("instance", "volume", "launch-template")
UNTAGGED_LAUNCH_RESOURCES = ("fleet", "network-interface", "spot-instances-request")
CREATE_ACTIONS = ("CreateFleet", "RunInstances", "CreateLaunchTemplate")
# Used, not created, by a launch: no tags to check (an AMI has no account in its ARN).
USED_RESOURCES = (
    "arn:{p}:ec2:{r}::image/*",
    "arn:{p}:ec2:{r}::snapshot/*",
    "arn:{p}:ec2:{r}:*:security-group/*",
    "arn:{p}:ec2:{r}:*:subnet/*",
)
EC2_RESOURCE = "arn:{p}:ec2:{r}:*:{kind}/*"
SSM_PUBLIC_PARAMETERS = "arn:{p}:ssm:{r}::parameter/aws/service/*"
# GetInstanceProfile by name: a profile that does not exist has no path in its ARN, and the code
# needs its NoSuchEntity answer (not AccessDenied) to create it, so reads cover every profile.
INSTANCE_PROFILES = "arn:{p}:iam::{a}:instance-profile/*"
# Where cloud/launchtemplates.py creates this cluster's profiles (Path=/nodewright/<region>/<cluster>/).
OWN_INSTANCE_PROFILES = "arn:{p}:iam::{a}:instance-profile/nodewright/{r}/{cluster}/*"
READ_ACTIONS = (
    "ec2:DescribeImages",  # cloud/amis.py
    "ec2:DescribeInstances",  # cloud/provider.py, cloud/launchtemplates.py
    "ec2:DescribeInstanceTypeOfferings",  # cloud/catalog.py
    "ec2:DescribeInstanceTypes",  # cloud/catalog.py
    "ec2:DescribeLaunchTemplates",  # cloud/launchtemplates.py
    "ec2:DescribeSecurityGroups",  # cloud/network.py
    "ec2:DescribeSpotPriceHistory",  # cloud/pricing.py
    "ec2:DescribeSubnets",  # cloud/network.py
)
NODEPOOL_TAG = "karpenter.sh/nodepool"
CLUSTER_NAME_TAG = "eks:eks-cluster-name"


def cluster_owned_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


def _arn(pattern: str, **names: str) -> str:
    return pattern.format(p=Aws.PARTITION, r=Aws.REGION, a=Aws.ACCOUNT_ID, **names)


def _ec2_arns(resource_types: tuple[str, ...]) -> list[str]:
    return [_arn(EC2_RESOURCE, kind=kind) for kind in resource_types]


def wildcard_resources_for_nag(cluster_name: str) -> dict[str, str]:
    """Each wildcard resource as cdk-nag names it (IAM5 finding) → why it is acceptable."""
    nag = {"p": "<AWS::Partition>", "r": "<AWS::Region>", "a": "<AWS::AccountId>"}
    found = {
        pattern.format(**nag): "used by a launch, never created or changed (AMIs, snapshots, subnets, "
        "security groups chosen by the EC2NodeClass)"
        for pattern in USED_RESOURCES
    }
    for kind in TAGGED_AT_CREATION:
        found[EC2_RESOURCE.format(kind=kind, **nag)] = (
            f"{kind} ids are unknown before creation: every statement on them requires this cluster's "
            "tags (aws:RequestTag on create, aws:ResourceTag on terminate/delete)"
        )
    for kind in UNTAGGED_LAUNCH_RESOURCES:
        found[EC2_RESOURCE.format(kind=kind, **nag)] = (
            f"a {kind} is created by CreateFleet alongside the instance, whose statement requires this "
            "cluster's request tags: no launch can succeed without them"
        )
    found[SSM_PUBLIC_PARAMETERS.format(**nag)] = "public AMI aliases only (/aws/service/...), read-only"
    found[INSTANCE_PROFILES.format(**nag)] = (
        "GetInstanceProfile only (read): a missing profile's ARN has no path, and the code needs "
        "NoSuchEntity to know it must create it"
    )
    found[OWN_INSTANCE_PROFILES.format(cluster=cluster_name, **nag)] = (
        "this cluster's own instance-profile path; creating, tagging and changing roles also require "
        "this cluster's tags"
    )
    found["*"] = (
        "EC2 Describe* have no resource-level permissions (limited to this region by "
        "aws:RequestedRegion); pricing:GetProducts has no resources"
    )
    return found


def _request_tags(cluster_name: str) -> dict[str, dict[str, str]]:
    return {
        "StringEquals": {
            f"aws:RequestTag/{cluster_owned_tag(cluster_name)}": "owned",
            f"aws:RequestTag/{CLUSTER_NAME_TAG}": cluster_name,
        },
        "StringLike": {f"aws:RequestTag/{NODEPOOL_TAG}": "*"},
    }


def _resource_tags(cluster_name: str) -> dict[str, dict[str, str]]:
    return {
        "StringEquals": {f"aws:ResourceTag/{cluster_owned_tag(cluster_name)}": "owned"},
        "StringLike": {f"aws:ResourceTag/{NODEPOOL_TAG}": "*"},
    }


def _profile_tags(prefix: str, cluster_name: str) -> dict[str, str]:
    return {
        f"{prefix}/{cluster_owned_tag(cluster_name)}": "owned",
        f"{prefix}/{CLUSTER_NAME_TAG}": cluster_name,
    }


def autoscaler_statements(
    *, cluster_name: str, cluster_arn: str, node_role_arn: str
) -> list[iam.PolicyStatement]:
    """Every statement of the functions' role except SQS/DynamoDB (granted by the constructs)."""
    launch_actions = ["ec2:RunInstances", "ec2:CreateFleet"]
    request_tags = _request_tags(cluster_name)
    own_profiles = _arn(OWN_INSTANCE_PROFILES, cluster=cluster_name)
    return [
        iam.PolicyStatement(
            sid="LaunchWithUsedResources",
            actions=launch_actions,
            resources=[_arn(pattern) for pattern in USED_RESOURCES],
        ),
        iam.PolicyStatement(
            sid="LaunchFromOwnedLaunchTemplates",
            actions=launch_actions,
            resources=_ec2_arns(("launch-template",)),
            conditions=_resource_tags(cluster_name),
        ),
        iam.PolicyStatement(
            sid="CreateOnlyTaggedForThisCluster",
            actions=[*launch_actions, "ec2:CreateLaunchTemplate"],
            resources=_ec2_arns(TAGGED_AT_CREATION),
            conditions=request_tags,
        ),
        iam.PolicyStatement(
            sid="LaunchSideResources",
            actions=launch_actions,
            resources=_ec2_arns(UNTAGGED_LAUNCH_RESOURCES),
        ),
        iam.PolicyStatement(
            sid="TagOnlyOnCreate",
            actions=["ec2:CreateTags"],
            resources=_ec2_arns(TAGGED_AT_CREATION),
            conditions={
                "StringEquals": {**request_tags["StringEquals"], "ec2:CreateAction": list(CREATE_ACTIONS)},
                "StringLike": request_tags["StringLike"],
            },
        ),
        iam.PolicyStatement(
            sid="DeleteOnlyOwned",
            actions=["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            resources=_ec2_arns(("instance", "launch-template")),
            conditions=_resource_tags(cluster_name),
        ),
        iam.PolicyStatement(
            sid="RegionalReads",
            actions=list(READ_ACTIONS),
            resources=["*"],  # Describe* support no resource-level permissions
            conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
        ),
        iam.PolicyStatement(
            sid="ReadInstanceProfiles",
            actions=["iam:GetInstanceProfile"],
            resources=[_arn(INSTANCE_PROFILES)],
        ),
        iam.PolicyStatement(
            sid="CreateOwnInstanceProfiles",
            actions=["iam:CreateInstanceProfile"],
            resources=[own_profiles],
            conditions={"StringEquals": _profile_tags("aws:RequestTag", cluster_name)},
        ),
        iam.PolicyStatement(
            # CreateInstanceProfile with Tags is also authorized as TagInstanceProfile.
            sid="TagOwnInstanceProfiles",
            actions=["iam:TagInstanceProfile"],
            resources=[own_profiles],
            conditions={
                "StringEquals": {
                    **_profile_tags("aws:RequestTag", cluster_name),
                    f"aws:ResourceTag/{cluster_owned_tag(cluster_name)}": "owned",
                }
            },
        ),
        iam.PolicyStatement(
            sid="SetTheRoleOfOwnInstanceProfiles",
            actions=["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"],
            resources=[own_profiles],
            conditions={"StringEquals": _profile_tags("aws:ResourceTag", cluster_name)},
        ),
        iam.PolicyStatement(
            # Both the launch (the profile in the launch template) and AddRoleToInstanceProfile pass it.
            sid="PassOnlyTheNodeRole",
            actions=["iam:PassRole"],
            resources=[node_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        ),
        iam.PolicyStatement(
            sid="PublicAmiParameters",
            actions=["ssm:GetParameter"],
            resources=[_arn(SSM_PUBLIC_PARAMETERS)],
        ),
        iam.PolicyStatement(
            sid="ThisClusterEndpoint",
            actions=["eks:DescribeCluster"],
            resources=[cluster_arn],
        ),
        iam.PolicyStatement(
            sid="OnDemandPrices",
            actions=["pricing:GetProducts"],
            resources=["*"],  # the Pricing API has no resources
        ),
    ]
