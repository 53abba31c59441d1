"""Least-privilege IAM for the functions' role, modelled on Karpenter's controller policy.

The tag contract the cloud layer must honour (IAM conditions key on it):

- every resource created by CreateFleet / RunInstances / CreateLaunchTemplate (fleet,
  instance, volume, network-interface, launch-template, spot-instances-request) carries
  in its TagSpecifications ``kubernetes.io/cluster/<cluster>=owned``,
  ``eks:eks-cluster-name=<cluster>`` and ``karpenter.sh/nodepool=<pool>``;
- only instances and launch templates carrying ``kubernetes.io/cluster/<cluster>=owned``
  and a ``karpenter.sh/nodepool`` tag can be terminated or deleted;
- after launch, an owned instance may only gain the tags in ``RETAGGABLE_KEYS``.

No statement grants a ``*`` action; the only ``Resource: *`` statements are EC2 reads
(Describe* calls support no resource-level permissions), scoped to the stack's region,
and pricing:GetProducts (which has no resources at all).
"""

from __future__ import annotations

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

CREATED_RESOURCE_TYPES = (
    "fleet",
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "spot-instances-request",
)
# Used, not created, by a launch: no tags to check (an AMI has no account in its ARN).
USED_RESOURCES = (
    "arn:{p}:ec2:{r}::image/*",
    "arn:{p}:ec2:{r}::snapshot/*",
    "arn:{p}:ec2:{r}:*:security-group/*",
    "arn:{p}:ec2:{r}:*:subnet/*",
    "arn:{p}:ec2:{r}:*:capacity-reservation/*",
)
EC2_RESOURCE = "arn:{p}:ec2:{r}:*:{kind}/*"
SSM_PUBLIC_PARAMETERS = "arn:{p}:ssm:{r}::parameter/aws/service/*"
READ_ACTIONS = (
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)
RETAGGABLE_KEYS = ("eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name")
NODEPOOL_TAG = "karpenter.sh/nodepool"


def cluster_owned_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


def _arn(pattern: str, **names: str) -> str:
    return pattern.format(p=Aws.PARTITION, r=Aws.REGION, **names)


def _ec2_arns(resource_types: tuple[str, ...]) -> list[str]:
    return [_arn(EC2_RESOURCE, kind=kind) for kind in resource_types]


def wildcard_resources_for_nag() -> dict[str, str]:
    """Each wildcard resource as cdk-nag names it (IAM5 finding) → why it is acceptable."""
    nag = {"p": "<AWS::Partition>", "r": "<AWS::Region>"}
    found = {
        pattern.format(**nag): "used by a launch, never created or changed (AMIs, snapshots, subnets, "
        "security groups, capacity reservations chosen by the EC2NodeClass)"
        for pattern in USED_RESOURCES
    }
    for kind in CREATED_RESOURCE_TYPES:
        found[EC2_RESOURCE.format(kind=kind, **nag)] = (
            f"{kind} ids are unknown before creation: every statement on them requires this cluster's "
            "tags (aws:RequestTag on create, aws:ResourceTag on terminate/delete/retag)"
        )
    found[SSM_PUBLIC_PARAMETERS.format(**nag)] = "public AMI aliases only (/aws/service/...), read-only"
    found["*"] = (
        "EC2 Describe* have no resource-level permissions (limited to this region by "
        "aws:RequestedRegion); pricing:GetProducts has no resources"
    )
    return found


def _request_tags(cluster_name: str) -> dict[str, dict[str, str]]:
    return {
        "StringEquals": {
            f"aws:RequestTag/{cluster_owned_tag(cluster_name)}": "owned",
            "aws:RequestTag/eks:eks-cluster-name": cluster_name,
        },
        "StringLike": {f"aws:RequestTag/{NODEPOOL_TAG}": "*"},
    }


def _resource_tags(cluster_name: str) -> dict[str, dict[str, str]]:
    return {
        "StringEquals": {f"aws:ResourceTag/{cluster_owned_tag(cluster_name)}": "owned"},
        "StringLike": {f"aws:ResourceTag/{NODEPOOL_TAG}": "*"},
    }


def autoscaler_statements(
    *, cluster_name: str, cluster_arn: str, node_role_arn: str
) -> list[iam.PolicyStatement]:
    """Every statement of the functions' role except SQS/DynamoDB (granted by the constructs)."""
    launch_actions = ["ec2:RunInstances", "ec2:CreateFleet"]
    request_tags = _request_tags(cluster_name)
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
            resources=_ec2_arns(CREATED_RESOURCE_TYPES),
            conditions=request_tags,
        ),
        iam.PolicyStatement(
            sid="TagOnlyOnCreate",
            actions=["ec2:CreateTags"],
            resources=_ec2_arns(CREATED_RESOURCE_TYPES),
            conditions={
                "StringEquals": {
                    **request_tags["StringEquals"],
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                },
                "StringLike": request_tags["StringLike"],
            },
        ),
        iam.PolicyStatement(
            sid="RetagOwnedInstances",
            actions=["ec2:CreateTags"],
            resources=_ec2_arns(("instance",)),
            conditions={
                **_resource_tags(cluster_name),
                "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": list(RETAGGABLE_KEYS)},
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
