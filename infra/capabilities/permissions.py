"""Least-privilege IAM, one role per function, modelled on Karpenter v1's controller policy.

Reconciled with what ``nodewright.cloud`` actually calls (every AWS call lives there). A
function's role is the union of the *grants* it needs (``FUNCTION_GRANTS``); each grant is a
list of statements built here:

- ``reads``: the EC2 Describe* calls of the catalog, subnets, security groups, AMIs, launch
  templates, instances and capacity reservations (``READ_ACTIONS``: the reservations an
  EC2NodeClass selects are offerings, status and drift), public AMI parameters (ssm:GetParameter)
  and eks:DescribeCluster for this cluster;
- ``launch``: CreateFleet (instant; EC2 also authorizes RunInstances for it) and
  CreateLaunchTemplate, each only with this cluster's tags on everything it creates; CreateTags
  only as part of those creations; the instance profiles under this cluster's path; PassRole for
  the node role only; KMS for the EBS keys given with ``-c ebsKmsKeyArns``;
- ``terminate``: TerminateInstances on instances carrying this cluster's tags;
- ``prune``: DeleteLaunchTemplate on this cluster's launch templates (the provisioner deletes the
  ones no live instance uses, ``provisioning/lifecycle.py``);
- ``prices``: pricing:GetProducts and ec2:DescribeSpotPriceHistory;
- ``cleanup`` (the custom resource that runs at ``cdk destroy``): read this cluster's endpoint,
  terminate its instances (as ``terminate``), delete its launch templates and instance profiles,
  write the removal's report to its SSM parameter;
- ``vpc``: the network-interface calls Lambda makes for a function placed in a VPC.

DynamoDB actions are granted per function on the state table (``TABLE_ACTIONS``), SQS by the
queue's ``grant_consume_messages`` (interruption only). The EKS token is a presigned
sts:GetCallerIdentity, which needs no permission.

Every AWS call a function makes in the sandbox is evaluated against its synthesized role
(``sandbox/iam``, the suite, the demo and the chaos run; ``docs/iam.md`` lists what each function
was allowed by which statement). The tag contract (tests/infra/test_infra_iam_tags.py launches
through moto and checks the tags the code really sends against these statements;
tests/infra/test_infra_iam_eval.py evaluates the synthesized statements):

- at creation, every ``TAGGED_AT_CREATION`` resource type of a launch is gated on the request
  carrying ``kubernetes.io/cluster/<cluster>=owned``, ``eks:eks-cluster-name=<cluster>`` and
  ``karpenter.sh/nodepool`` (as Karpenter v1's ``AllowScopedEC2InstanceActionsWithTags``).
  CreateFleet tags instance, volume and fleet; the launch template tags network interfaces and
  itself. EC2 evaluates ``aws:RequestTag`` per created resource with the tags that resource gets,
  and a fleet's spot request gets none (EC2 offers no way to tag it,
  aws/karpenter-provider-aws#4550): RunInstances on spot requests is allowed without tags, as in
  Karpenter's policy; the instance the same request launches is gated on the tags;
- only instances carrying ``kubernetes.io/cluster/<cluster>=owned`` and a ``karpenter.sh/nodepool``
  tag can be terminated; only such launch templates launched from or deleted;
- instance profiles live under the path ``/nodewright/<region>/<cluster>/`` and carry
  ``kubernetes.io/cluster/<cluster>=owned`` and ``eks:eks-cluster-name=<cluster>``.

No statement grants a ``*`` action; ``Resource: *`` is used only where the action has no
resource-level permission (EC2 Describe*, limited to this region by aws:RequestedRegion;
pricing:GetProducts) and for the network-interface calls Lambda itself checks on ``*``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_iam as iam

# Everything one launch creates; all of it is gated on this cluster's request tags.
TAGGED_AT_CREATION = (
    "instance",
    "volume",
    "fleet",
    "network-interface",
    "launch-template",
)
# Created by a spot launch with no tags (EC2 cannot tag a fleet's spot request): RunInstances only.
UNTAGGED_AT_CREATION = ("spot-instances-request",)
CREATE_ACTIONS = ("CreateFleet", "RunInstances", "CreateLaunchTemplate")
# Used, not created, by a launch: no tags to check (an AMI has no account in its ARN).
USED_RESOURCES = (
    "arn:{p}:ec2:{r}::image/*",
    "arn:{p}:ec2:{r}::snapshot/*",
    "arn:{p}:ec2:{r}:*:security-group/*",
    "arn:{p}:ec2:{r}:*:subnet/*",
    "arn:{p}:ec2:{r}:*:placement-group/*",  # an EC2NodeClass's placementGroupSelector
    "arn:{p}:ec2:{r}:*:capacity-reservation/*",  # a launch targeting a capacity reservation (block)
)
EC2_RESOURCE = "arn:{p}:ec2:{r}:*:{kind}/*"
SSM_PUBLIC_PARAMETERS = "arn:{p}:ssm:{r}::parameter/aws/service/*"
# A parameter of this account an amiSelectorTerms[].ssmParameter names (``-c amiSsmParameters``).
SSM_OWN_PARAMETER = "arn:{p}:ssm:{r}:{a}:parameter{name}"
# GetInstanceProfile by name: a profile that does not exist has no path in its ARN, and the code
# needs its NoSuchEntity answer (not AccessDenied) to create it, so reads cover every profile.
INSTANCE_PROFILES = "arn:{p}:iam::{a}:instance-profile/*"
# Where cloud/launchtemplates.py creates this cluster's profiles (Path=/nodewright/<region>/<cluster>/).
OWN_INSTANCE_PROFILES = "arn:{p}:iam::{a}:instance-profile/nodewright/{r}/{cluster}/*"
# EC2 reads of the launch path (catalog, subnets, security groups, AMIs, templates, instances).
READ_ACTIONS = (
    "ec2:DescribeCapacityReservations",  # cloud/reservations.py (capacityReservationSelectorTerms)
    "ec2:DescribeImages",  # cloud/amis.py
    "ec2:DescribeInstances",  # cloud/provider.py, cloud/launchtemplates.py
    "ec2:DescribeInstanceTypeOfferings",  # cloud/catalog.py
    "ec2:DescribeInstanceTypes",  # cloud/catalog.py
    "ec2:DescribeLaunchTemplates",  # cloud/launchtemplates.py
    "ec2:DescribePlacementGroups",  # cloud/network.py (placementGroupSelector)
    "ec2:DescribeSecurityGroups",  # cloud/network.py
    "ec2:DescribeSubnets",  # cloud/network.py
)
PRICE_READ_ACTIONS = ("ec2:DescribeSpotPriceHistory",)  # cloud/pricing.py
CLEANUP_READ_ACTIONS = ("ec2:DescribeLaunchTemplates", "ec2:DescribeInstances")  # cloud/cleanup.py
# Where the removal at cdk destroy keeps its report (an SSM parameter: it outlives the stack).
REMOVAL_REPORT_PARAMETER = "/nodewright/{cluster}/removal-report"
REMOVAL_REPORT_PARAMETER_ARN = "arn:{p}:ssm:{r}:{a}:parameter{name}"


def removal_report_parameter(cluster_name: str) -> str:
    return REMOVAL_REPORT_PARAMETER.format(cluster=cluster_name)


# What Lambda does for a function in a VPC (AWSLambdaVPCAccessExecutionRole's EC2 part). Lambda
# checks them on "*" before attaching the function (AWS Lambda Developer Guide, "Giving Lambda
# functions access to resources in an Amazon VPC"), so they cannot be narrowed by resource.
VPC_NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)
# EBS encryption with a customer-managed key: what EC2 does on the launching principal's behalf
# (it creates a grant for the volume; the Bool condition keeps grants to AWS resources only).
KMS_LAUNCH_ACTIONS = (
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
)
NODEPOOL_TAG = "karpenter.sh/nodepool"
CLUSTER_NAME_TAG = "eks:eks-cluster-name"
# iam:PassedToService for EC2 in every partition (China's principal differs).
EC2_SERVICE_PRINCIPALS = ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")

# The state table, per function: exactly the calls each one makes (nodewright/cloud/state.py and
# Powertools Idempotency's DynamoDB persistence layer). No Scan, BatchWrite or streams.
TABLE_ACTIONS: dict[str, tuple[str, ...]] = {
    # markers (GetItem/PutItem), unavailable offerings (Query, PutItem on ICE), prices (Query)
    "provisioner": ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
    # prices and unavailable offerings for the catalog; a replacement's launch marks the offerings
    # that had no capacity (PutItem), as the provisioner's does
    "disruption": ("dynamodb:Query", "dynamodb:PutItem"),
    # idempotency records (Get/Put/Update/DeleteItem), offerings marked unavailable, replacements
    "interruption": (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:Query",
    ),
    "spot_events": (
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "dynamodb:Query",
    ),
    # the price table: read the previous one, write the new one
    "pricing": ("dynamodb:Query", "dynamodb:PutItem"),
}
# Which grants each function's role holds. Disruption launches the replacements of a consolidation
# replace or a drift roll (disruption/execute.py launch_replacements, through provisioning's launch);
# the interruption paths launch replacements; the
# provisioner's lifecycle deletes launch templates no live instance uses.
FUNCTION_GRANTS: dict[str, tuple[str, ...]] = {
    "provisioner": ("reads", "launch", "terminate", "prune"),
    "disruption": ("reads", "launch", "terminate"),
    "interruption": ("reads", "launch", "terminate"),
    "spot_events": ("reads", "launch", "terminate"),
    "pricing": ("prices",),
}
# Functions that talk to the cluster: they get the EKS access entry and the VPC placement.
CLUSTER_CLIENTS = ("provisioner", "disruption", "interruption", "spot_events")


def cluster_owned_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


def _arn(pattern: str, **names: str) -> str:
    return pattern.format(p=Aws.PARTITION, r=Aws.REGION, a=Aws.ACCOUNT_ID, **names)


def _ec2_arns(resource_types: tuple[str, ...]) -> list[str]:
    return [_arn(EC2_RESOURCE, kind=kind) for kind in resource_types]


@dataclass(frozen=True)
class PolicyInputs:
    cluster_name: str
    cluster_arn: str
    node_role_arn: str
    kms_key_arns: tuple[str, ...] = ()
    ami_ssm_parameters: tuple[str, ...] = ()  # -c amiSsmParameters: names an ssmParameter term may read


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


def _regional(sid: str, actions: tuple[str, ...]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=sid,
        actions=list(actions),
        resources=["*"],  # Describe* support no resource-level permissions
        conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
    )


def reads(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    return [
        _regional("RegionalReads", READ_ACTIONS),
        iam.PolicyStatement(
            sid="PublicAmiParameters", actions=["ssm:GetParameter"], resources=[_arn(SSM_PUBLIC_PARAMETERS)]
        ),
        iam.PolicyStatement(
            sid="ThisClusterEndpoint", actions=["eks:DescribeCluster"], resources=[inputs.cluster_arn]
        ),
        *(
            [
                iam.PolicyStatement(
                    sid="AmiParameters",
                    actions=["ssm:GetParameter"],
                    resources=[_arn(SSM_OWN_PARAMETER, name=name) for name in inputs.ami_ssm_parameters],
                )
            ]
            if inputs.ami_ssm_parameters
            else []
        ),
    ]


def launch(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    cluster_name = inputs.cluster_name
    launch_actions = ["ec2:RunInstances", "ec2:CreateFleet"]
    request_tags = _request_tags(cluster_name)
    own_profiles = _arn(OWN_INSTANCE_PROFILES, cluster=cluster_name)
    statements = [
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
            # A spot launch's request: EC2 gives it no tags (so no aws:RequestTag to test); it is
            # only ever created with the instance of the same RunInstances, which is tag-gated.
            sid="SpotRequestsOfTaggedLaunches",
            actions=["ec2:RunInstances"],
            resources=_ec2_arns(UNTAGGED_AT_CREATION),
        ),
        iam.PolicyStatement(
            sid="CreateOnlyTaggedForThisCluster",
            actions=[*launch_actions, "ec2:CreateLaunchTemplate"],
            resources=_ec2_arns(TAGGED_AT_CREATION),
            conditions=request_tags,
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
            resources=[inputs.node_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": list(EC2_SERVICE_PRINCIPALS)}},
        ),
    ]
    if inputs.kms_key_arns:
        statements += [
            iam.PolicyStatement(
                sid="EncryptNodeVolumes",
                actions=list(KMS_LAUNCH_ACTIONS),
                resources=list(inputs.kms_key_arns),
            ),
            iam.PolicyStatement(
                sid="GrantNodeVolumesTheirKey",
                actions=["kms:CreateGrant"],
                resources=list(inputs.kms_key_arns),
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            ),
        ]
    return statements


def terminate(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    return [
        iam.PolicyStatement(
            sid="TerminateOnlyOwned",
            actions=["ec2:TerminateInstances"],
            resources=_ec2_arns(("instance",)),
            conditions=_resource_tags(inputs.cluster_name),
        )
    ]


def _delete_owned_launch_templates(cluster_name: str) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid="DeleteOwnedLaunchTemplates",
        actions=["ec2:DeleteLaunchTemplate"],
        resources=_ec2_arns(("launch-template",)),
        conditions=_resource_tags(cluster_name),
    )


def prune(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    """The provisioner's lifecycle deletes this cluster's launch templates no live instance uses."""
    return [_delete_owned_launch_templates(inputs.cluster_name)]


def prices(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    return [
        _regional("SpotPriceHistory", PRICE_READ_ACTIONS),
        iam.PolicyStatement(
            sid="OnDemandPrices",
            actions=["pricing:GetProducts"],
            resources=["*"],  # no resources
        ),
    ]


def cleanup(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    """What the removal custom resource does at ``cdk destroy`` (nodewright/removal.py,
    nodewright/cloud/cleanup.py): read this cluster's endpoint (the drain talks to the cluster),
    terminate this cluster's instances (the same tag-scoped statement as ``terminate``), delete its
    launch templates and instance profiles, and write the removal's report to its one parameter."""
    cluster_name = inputs.cluster_name
    own_profiles = _arn(OWN_INSTANCE_PROFILES, cluster=cluster_name)
    return [
        _regional("CleanupReads", CLEANUP_READ_ACTIONS),
        _delete_owned_launch_templates(cluster_name),
        iam.PolicyStatement(
            sid="ThisClusterEndpoint", actions=["eks:DescribeCluster"], resources=[inputs.cluster_arn]
        ),
        *terminate(inputs),
        iam.PolicyStatement(
            # A list action with no resource-level permissions (IAM authorizes it on "*"; a statement
            # naming instance-profile/* never matches it). The call's PathPrefix narrows the listing
            # to this cluster's path.
            sid="ListInstanceProfiles",
            actions=["iam:ListInstanceProfiles"],
            resources=["*"],
        ),
        iam.PolicyStatement(
            sid="DeleteOwnInstanceProfiles",
            actions=["iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            resources=[own_profiles],
            conditions={"StringEquals": _profile_tags("aws:ResourceTag", cluster_name)},
        ),
        iam.PolicyStatement(
            sid="WriteTheRemovalReport",
            actions=["ssm:PutParameter"],
            resources=[_arn(REMOVAL_REPORT_PARAMETER_ARN, name=removal_report_parameter(cluster_name))],
        ),
    ]


def vpc(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    return [
        iam.PolicyStatement(
            sid="LambdaVpcNetworkInterfaces", actions=list(VPC_NETWORK_INTERFACE_ACTIONS), resources=["*"]
        )
    ]


GRANTS = {
    "reads": reads,
    "launch": launch,
    "terminate": terminate,
    "prune": prune,
    "prices": prices,
    "cleanup": cleanup,
    "vpc": vpc,
}


def statements_for(grants: tuple[str, ...], inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    return [statement for grant in grants for statement in GRANTS[grant](inputs)]


def wildcard_resources_for_nag(
    grants: tuple[str, ...], cluster_name: str, ami_ssm_parameters: tuple[str, ...] = ()
) -> dict[str, str]:
    """Each wildcard resource of these grants as cdk-nag names it (IAM5 finding) → why it is acceptable."""
    nag = {"p": "<AWS::Partition>", "r": "<AWS::Region>", "a": "<AWS::AccountId>"}
    found: dict[str, str] = {}
    if "launch" in grants:
        for pattern in USED_RESOURCES:
            found[pattern.format(**nag)] = (
                "used by a launch, never created or changed (AMIs, snapshots, subnets, security groups "
                "chosen by the EC2NodeClass)"
            )
        for kind in TAGGED_AT_CREATION:
            found[EC2_RESOURCE.format(kind=kind, **nag)] = (
                f"{kind} ids are unknown before creation: every statement on them requires this cluster's "
                "request tags (aws:RequestTag) or, to launch from a template, its resource tags"
            )
        for kind in UNTAGGED_AT_CREATION:
            found[EC2_RESOURCE.format(kind=kind, **nag)] = (
                "RunInstances only: a spot launch's request, which EC2 cannot tag; it is only created "
                "with the instance of the same launch, which requires this cluster's request tags"
            )
        found[INSTANCE_PROFILES.format(**nag)] = (
            "GetInstanceProfile only (read): a missing profile's ARN has no path, and the code needs "
            "NoSuchEntity to know it must create it"
        )
    if "terminate" in grants:
        found[EC2_RESOURCE.format(kind="instance", **nag)] = (
            "instance ids are unknown before launch: TerminateInstances requires this cluster's tags"
        )
    if {"cleanup", "prune"} & set(grants):
        template = EC2_RESOURCE.format(kind="launch-template", **nag)
        deleting = "DeleteLaunchTemplate requires this cluster's resource tags"
        found[template] = f"{found[template]}; {deleting}" if template in found else deleting
    if "cleanup" in grants:
        found[EC2_RESOURCE.format(kind="instance", **nag)] = (
            "the removal at cdk destroy terminates this cluster's instances, whose ids it cannot know in "
            "advance: TerminateInstances requires this cluster's tags"
        )
    if {"launch", "cleanup"} & set(grants):
        found[OWN_INSTANCE_PROFILES.format(cluster=cluster_name, **nag)] = (
            "this cluster's own instance-profile path; every change also requires this cluster's tags"
        )
    if "reads" in grants:
        found[SSM_PUBLIC_PARAMETERS.format(**nag)] = "public AMI aliases only (/aws/service/...), read-only"
        for name in ami_ssm_parameters:
            if "*" in name:
                found[SSM_OWN_PARAMETER.format(name=name, **nag)] = (
                    "GetParameter only (read), on the parameter path the operator named with "
                    "-c amiSsmParameters for their EC2NodeClasses' ssmParameter AMI terms"
                )
    if {"reads", "prices", "cleanup", "vpc"} & set(grants):
        found["*"] = (
            "EC2 Describe* have no resource-level permissions (limited to this region by "
            "aws:RequestedRegion); pricing:GetProducts and iam:ListInstanceProfiles (read; the call "
            "narrows it to this cluster's path) have none either; Lambda checks its VPC "
            "network-interface calls on '*'"
        )
    return found
