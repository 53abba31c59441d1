"""What each function's IAM role allows, and how to ask a deployed role whether it still does.

One definition, two readers:

- ``infra/capabilities/permissions.py`` builds every function's policy from ``GRANTS`` and
  ``FUNCTION_GRANTS`` (rendered with CloudFormation's tokens for partition, region and account);
- ``nodewright doctor`` renders the same statements with the deployed stack's names and asks IAM
  (``iam:SimulatePrincipalPolicy``) whether each function's role, with its permissions boundary and
  the organization's SCPs, allows every action of its ``requirements`` on a representative resource
  with the request context the code sends (``probes``).

Statements are modelled on Karpenter v1's controller policy and reconciled with what
``nodewright.cloud`` calls (every AWS call lives there):

- ``reads``: the EC2 Describe* calls of the catalog, subnets, security groups, AMIs, launch
  templates, instances and capacity reservations (``READ_ACTIONS``: the reservations an
  EC2NodeClass selects are offerings, status and drift), public AMI parameters (ssm:GetParameter)
  and eks:DescribeCluster for this cluster; the parameters ``-c amiSsmParameters`` names;
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
- ``vpc``: the network-interface calls Lambda makes for a function placed in a VPC;
- ``certificate`` (``-c wakeup=private``: the custom resource that makes the wake-up's TLS
  certificate): import it into ACM tagged for this cluster, and delete it, only so tagged.

What the stack grants with CDK's grant helpers on resources it makes (the state table, the queues,
the webhook's secret and the wake-up alias) is not built from here, but the actions the code uses
on them are listed here too (``RESOURCE_GRANTS``), so the doctor asks about them and
tests/infra/test_infra_iam_spec.py holds the synthesized roles to every ``requirements``.

Patterns use ``str.format`` fields: ``{p}`` partition, ``{r}`` region, ``{a}`` account,
``{cluster}`` the cluster's name, and the named ARNs of :class:`Names`; ``{each}`` is one item of
the list a statement expands over (``Statement.each``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

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
CLUSTER_OWNED_TAG = "kubernetes.io/cluster/{cluster}"
# iam:PassedToService for EC2 in every partition (China's principal differs).
EC2_SERVICE_PRINCIPALS = ("ec2.amazonaws.com", "ec2.amazonaws.com.cn")

# The state table, per function: exactly the calls each one makes (nodewright/cloud/state.py and
# Powertools Idempotency's DynamoDB persistence layer). No Scan, BatchWrite or streams.
TABLE_ACTIONS: dict[str, tuple[str, ...]] = {
    # markers (GetItem/PutItem), unavailable offerings (Query, PutItem on ICE), prices (Query)
    "provisioner": ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"),
    # prices and unavailable offerings for the catalog; a replacement's launch marks the offerings
    # that had no capacity (PutItem), as the provisioner's does; the consolidated marker
    # (disruption/consolidated.py: GetItem/PutItem)
    "disruption": ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"),
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
# the interruption paths launch replacements; the provisioner's lifecycle deletes launch templates
# no live instance uses.
FUNCTION_GRANTS: dict[str, tuple[str, ...]] = {
    "provisioner": ("reads", "launch", "terminate", "prune"),
    "disruption": ("reads", "launch", "terminate"),
    "interruption": ("reads", "launch", "terminate"),
    "spot_events": ("reads", "launch", "terminate"),
    "pricing": ("prices",),
}
# Functions that talk to the cluster: they get the EKS access entry and the VPC placement.
CLUSTER_CLIENTS = ("provisioner", "disruption", "interruption", "spot_events")
CLEANUP = "cleanup"  # the removal at cdk destroy (functions/cleanup)
WEBHOOK = "webhook"  # the wake-up (functions/webhook)
CERTIFICATE = "wakeup_certificate"  # the private wake-up's certificate (functions/wakeup_certificate)
# Every function with a role of its own, as the stack's NodewrightFunctionRoles output names them
# (the webhook without -c wakeup=false, the certificate's with -c wakeup=private only).
FUNCTIONS = (*FUNCTION_GRANTS, CLEANUP, WEBHOOK, CERTIFICATE)
# The grants of the removal's role (with "vpc" too when it runs in the cluster's VPC).
CLEANUP_GRANTS = ("cleanup",)
CERTIFICATE_GRANTS = ("certificate",)
# Imported ACM certificates: their ids are unknown before the import.
CERTIFICATES = "arn:{p}:acm:{r}:{a}:certificate/*"

Condition = Mapping[str, Mapping[str, "str | tuple[str, ...]"]]


@dataclass(frozen=True)
class Statement:
    """One Allow statement as patterns (see the module docstring); ``each`` names a list of
    :class:`Names` the resources expand over, one resource per item; none: no statement."""

    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: Condition = field(default_factory=dict)
    each: str | None = None


@dataclass(frozen=True)
class Names:
    """What fills the patterns: CloudFormation tokens in the CDK app, the deployed stack's values in
    the doctor. The ARNs of resources the stack makes are "" where unknown (their requirements are
    then not asked)."""

    partition: str
    region: str
    account: str
    cluster: str
    cluster_arn: str
    node_role_arn: str
    kms_key_arns: tuple[str, ...] = ()
    ami_ssm_parameters: tuple[str, ...] = ()
    table_arn: str = ""
    interruption_queue_arn: str = ""
    failure_queue_arn: str = ""
    webhook_secret_arn: str = ""
    wakeup_alias_arn: str = ""

    def fields(self) -> dict[str, str]:
        return {
            "p": self.partition,
            "r": self.region,
            "a": self.account,
            "cluster": self.cluster,
            "cluster_arn": self.cluster_arn,
            "node_role_arn": self.node_role_arn,
            "table_arn": self.table_arn,
            "interruption_queue_arn": self.interruption_queue_arn,
            "failure_queue_arn": self.failure_queue_arn,
            "webhook_secret_arn": self.webhook_secret_arn,
            "wakeup_alias_arn": self.wakeup_alias_arn,
        }


@dataclass(frozen=True)
class Rendered:
    """A statement with its patterns filled: what a policy holds (or a probe asks about)."""

    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    conditions: dict[str, dict[str, str | list[str]]]


def _tags(prefix: str) -> dict[str, str]:
    return {f"{prefix}/{CLUSTER_OWNED_TAG}": "owned", f"{prefix}/{CLUSTER_NAME_TAG}": "{cluster}"}


REQUEST_TAGS: Condition = {
    "StringEquals": _tags("aws:RequestTag"),
    "StringLike": {f"aws:RequestTag/{NODEPOOL_TAG}": "*"},
}
RESOURCE_TAGS: Condition = {
    "StringEquals": {f"aws:ResourceTag/{CLUSTER_OWNED_TAG}": "owned"},
    "StringLike": {f"aws:ResourceTag/{NODEPOOL_TAG}": "*"},
}
THIS_REGION: Condition = {"StringEquals": {"aws:RequestedRegion": "{r}"}}
LAUNCH_ACTIONS = ("ec2:RunInstances", "ec2:CreateFleet")


def _ec2(*kinds: str) -> tuple[str, ...]:
    return tuple(EC2_RESOURCE.replace("{kind}", kind) for kind in kinds)


def _regional(sid: str, actions: tuple[str, ...]) -> Statement:
    # Describe* support no resource-level permissions: "*", in this region only.
    return Statement(sid, actions, ("*",), THIS_REGION)


THIS_CLUSTER_ENDPOINT = Statement("ThisClusterEndpoint", ("eks:DescribeCluster",), ("{cluster_arn}",))
TERMINATE_ONLY_OWNED = Statement(
    "TerminateOnlyOwned", ("ec2:TerminateInstances",), _ec2("instance"), RESOURCE_TAGS
)
DELETE_OWNED_LAUNCH_TEMPLATES = Statement(
    "DeleteOwnedLaunchTemplates", ("ec2:DeleteLaunchTemplate",), _ec2("launch-template"), RESOURCE_TAGS
)

GRANTS: dict[str, tuple[Statement, ...]] = {
    "reads": (
        _regional("RegionalReads", READ_ACTIONS),
        Statement("PublicAmiParameters", ("ssm:GetParameter",), (SSM_PUBLIC_PARAMETERS,)),
        THIS_CLUSTER_ENDPOINT,
        Statement(
            "AmiParameters",
            ("ssm:GetParameter",),
            (SSM_OWN_PARAMETER.replace("{name}", "{each}"),),
            each="ami_ssm_parameters",
        ),
    ),
    "launch": (
        Statement("LaunchWithUsedResources", LAUNCH_ACTIONS, USED_RESOURCES),
        Statement("LaunchFromOwnedLaunchTemplates", LAUNCH_ACTIONS, _ec2("launch-template"), RESOURCE_TAGS),
        # A spot launch's request: EC2 gives it no tags (so no aws:RequestTag to test); it is only
        # ever created with the instance of the same RunInstances, which is tag-gated.
        Statement("SpotRequestsOfTaggedLaunches", ("ec2:RunInstances",), _ec2(*UNTAGGED_AT_CREATION)),
        Statement(
            "CreateOnlyTaggedForThisCluster",
            (*LAUNCH_ACTIONS, "ec2:CreateLaunchTemplate"),
            _ec2(*TAGGED_AT_CREATION),
            REQUEST_TAGS,
        ),
        Statement(
            "TagOnlyOnCreate",
            ("ec2:CreateTags",),
            _ec2(*TAGGED_AT_CREATION),
            {
                "StringEquals": {**REQUEST_TAGS["StringEquals"], "ec2:CreateAction": CREATE_ACTIONS},
                "StringLike": REQUEST_TAGS["StringLike"],
            },
        ),
        Statement("ReadInstanceProfiles", ("iam:GetInstanceProfile",), (INSTANCE_PROFILES,)),
        Statement(
            "CreateOwnInstanceProfiles",
            ("iam:CreateInstanceProfile",),
            (OWN_INSTANCE_PROFILES,),
            {"StringEquals": _tags("aws:RequestTag")},
        ),
        # CreateInstanceProfile with Tags is also authorized as TagInstanceProfile.
        Statement(
            "TagOwnInstanceProfiles",
            ("iam:TagInstanceProfile",),
            (OWN_INSTANCE_PROFILES,),
            {
                "StringEquals": {
                    **_tags("aws:RequestTag"),
                    f"aws:ResourceTag/{CLUSTER_OWNED_TAG}": "owned",
                }
            },
        ),
        Statement(
            "SetTheRoleOfOwnInstanceProfiles",
            ("iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"),
            (OWN_INSTANCE_PROFILES,),
            {"StringEquals": _tags("aws:ResourceTag")},
        ),
        # Both the launch (the profile in the launch template) and AddRoleToInstanceProfile pass it.
        Statement(
            "PassOnlyTheNodeRole",
            ("iam:PassRole",),
            ("{node_role_arn}",),
            {"StringEquals": {"iam:PassedToService": EC2_SERVICE_PRINCIPALS}},
        ),
        Statement("EncryptNodeVolumes", KMS_LAUNCH_ACTIONS, ("{each}",), each="kms_key_arns"),
        Statement(
            "GrantNodeVolumesTheirKey",
            ("kms:CreateGrant",),
            ("{each}",),
            {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            each="kms_key_arns",
        ),
    ),
    "terminate": (TERMINATE_ONLY_OWNED,),
    "prune": (DELETE_OWNED_LAUNCH_TEMPLATES,),
    "prices": (
        _regional("SpotPriceHistory", PRICE_READ_ACTIONS),
        Statement("OnDemandPrices", ("pricing:GetProducts",), ("*",)),  # no resources
    ),
    "cleanup": (
        _regional("CleanupReads", CLEANUP_READ_ACTIONS),
        DELETE_OWNED_LAUNCH_TEMPLATES,
        THIS_CLUSTER_ENDPOINT,
        TERMINATE_ONLY_OWNED,
        # A list action with no resource-level permissions (IAM authorizes it on "*"; a statement
        # naming instance-profile/* never matches it). The call's PathPrefix narrows the listing to
        # this cluster's path.
        Statement("ListInstanceProfiles", ("iam:ListInstanceProfiles",), ("*",)),
        Statement(
            "DeleteOwnInstanceProfiles",
            ("iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"),
            (OWN_INSTANCE_PROFILES,),
            {"StringEquals": _tags("aws:ResourceTag")},
        ),
        Statement(
            "WriteTheRemovalReport",
            ("ssm:PutParameter",),
            (REMOVAL_REPORT_PARAMETER_ARN.replace("{name}", REMOVAL_REPORT_PARAMETER),),
        ),
    ),
    "vpc": (Statement("LambdaVpcNetworkInterfaces", VPC_NETWORK_INTERFACE_ACTIONS, ("*",)),),
    "certificate": (
        # ImportCertificate with Tags is also authorized as AddTagsToCertificate.
        Statement(
            "ImportTaggedCertificates",
            ("acm:ImportCertificate", "acm:AddTagsToCertificate"),
            (CERTIFICATES,),
            {"StringEquals": _tags("aws:RequestTag")},
        ),
        Statement(
            "DeleteOwnCertificates",
            ("acm:DeleteCertificate",),
            (CERTIFICATES,),
            {"StringEquals": _tags("aws:ResourceTag")},
        ),
    ),
}


def certificate_tags(cluster: str) -> dict[str, str]:
    """The tags the private wake-up's certificate is imported with (what ``certificate`` requires)."""
    return {
        key.removeprefix("aws:RequestTag/").format(cluster=cluster): value.format(cluster=cluster)
        for key, value in _tags("aws:RequestTag").items()
    }


# Functions whose failed asynchronous invocations Lambda sends to the failed-invocations queue with
# the function's own role (interruption is polled from SQS; the removal and the webhook have none).
ASYNCHRONOUS = ("provisioner", "disruption", "spot_events", "pricing")
INTERRUPTION_QUEUE_ACTIONS = (  # what the event source mapping does with the interruption role
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
)


def resource_grants(function: str) -> tuple[Statement, ...]:
    """What ``function`` does with the resources the stack makes, which the stack grants with CDK's
    grant helpers (infra/autoscaler.py, infra/capabilities/wakeup.py): asked by the doctor, and held
    to the synthesized roles by the infra tests."""
    found: list[Statement] = []
    if function in TABLE_ACTIONS:
        found.append(Statement("StateTable", TABLE_ACTIONS[function], ("{table_arn}",)))
    if function == "interruption":
        queue = ("{interruption_queue_arn}",)
        found.append(Statement("InterruptionQueue", INTERRUPTION_QUEUE_ACTIONS, queue))
    if function in ASYNCHRONOUS:
        found.append(Statement("FailedInvocations", ("sqs:SendMessage",), ("{failure_queue_arn}",)))
    if function == WEBHOOK:
        found.append(Statement("WakeTheProvisioner", ("lambda:InvokeFunction",), ("{wakeup_alias_arn}",)))
        secret = ("{webhook_secret_arn}",)
        found.append(Statement("ReadThePathSecret", ("secretsmanager:GetSecretValue",), secret))
    return tuple(found)


def grants_of(function: str, *, in_vpc: bool = False) -> tuple[str, ...]:
    """The grants ``function``'s policy is built from (``vpc`` for a function placed in a VPC)."""
    base = {CLEANUP: CLEANUP_GRANTS, CERTIFICATE: CERTIFICATE_GRANTS}.get(function) or FUNCTION_GRANTS.get(
        function, ()
    )
    placed = in_vpc and (function in CLUSTER_CLIENTS or function == CLEANUP)
    return (*base, *(("vpc",) if placed else ()))


def statements_for(grants: tuple[str, ...], names: Names) -> list[Rendered]:
    """The statements of ``grants``, in order, rendered with ``names``; a statement expanding over an
    empty list is left out."""
    return [rendered for grant in grants for s in GRANTS[grant] if (rendered := render(s, names))]


def requirements(function: str, names: Names, *, in_vpc: bool = False) -> list[Rendered]:
    """Everything ``function``'s role must allow: its grants' statements and its resource grants
    (those on a resource whose ARN ``names`` does not know are left out)."""
    return [
        *statements_for(grants_of(function, in_vpc=in_vpc), names),
        *(r for s in resource_grants(function) if (r := render(s, names))),
    ]


def render(statement: Statement, names: Names) -> Rendered | None:
    """``statement`` with its patterns filled; None when it has nothing to grant (an empty ``each``
    list, or a named ARN ``names`` leaves empty)."""
    fields = names.fields()
    items: tuple[str, ...] = ("",)
    if statement.each is not None:
        items = tuple(getattr(names, statement.each))
        if not items:
            return None
    resources = tuple(p.format_map({**fields, "each": item}) for p in statement.resources for item in items)
    if any(not r or r.startswith(":") for r in resources):
        return None
    conditions = {
        operator: {key.format_map(fields): _value(value, fields) for key, value in entries.items()}
        for operator, entries in statement.conditions.items()
    }
    return Rendered(statement.sid, statement.actions, resources, conditions)


def _value(value: str | tuple[str, ...], fields: Mapping[str, str]) -> str | list[str]:
    if isinstance(value, str):
        return value.format_map(fields)
    return [v.format_map(fields) for v in value]


# -- the doctor's questions ---------------------------------------------------------------------

PROBE_ID = "nodewright-doctor-probe"  # stands for an id the code cannot know in advance


@dataclass(frozen=True)
class Probe:
    """One question to IAM: may the role do ``actions`` on ``resources`` with ``context``?
    ``sid`` names the statement that should allow it (the fix when it does not)."""

    sid: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]  # ("*",): the actions take no resource
    context: dict[str, str]


# (action, EC2 resource type) pairs a statement names together but EC2 never authorizes together
# (the Service Authorization Reference lists no such resource type for the action: CreateFleet's
# security groups are authorized as RunInstances, a launch template creates no instance): not asked,
# since IAM's answer about a request no call makes proves nothing.
NOT_AUTHORIZED_TOGETHER: frozenset[tuple[str, str]] = frozenset(
    {
        ("ec2:CreateFleet", "security-group"),
        ("ec2:CreateFleet", "network-interface"),
        ("ec2:RunInstances", "fleet"),
        ("ec2:CreateLaunchTemplate", "instance"),
        ("ec2:CreateLaunchTemplate", "volume"),
        ("ec2:CreateLaunchTemplate", "fleet"),
        ("ec2:CreateLaunchTemplate", "network-interface"),
    }
)


def probes(rendered: list[Rendered], region: str, account: str) -> list[Probe]:
    """The questions that prove a role allows ``rendered``: per statement, a representative resource
    for each of its resource patterns and a request context that meets its conditions as the code's
    requests do (this cluster's tags, ``ec2:CreateAction``, ``iam:PassedToService``), in ``region``;
    actions the statement names with resource types EC2 never authorizes them on are asked apart,
    without those."""
    found = []
    for statement in rendered:
        context = {"aws:RequestedRegion": region}
        for entries in statement.conditions.values():
            for key, value in entries.items():
                first = value if isinstance(value, str) else value[0]
                context[key] = PROBE_ID if first == "*" else first
        by_resources: dict[tuple[str, ...], list[str]] = {}
        for action in statement.actions:
            resources = tuple(
                sample_arn(r, account)
                for r in statement.resources
                if (action, _ec2_type(r)) not in NOT_AUTHORIZED_TOGETHER
            )
            by_resources.setdefault(resources, []).append(action)
        for resources, actions in by_resources.items():
            found.append(Probe(statement.sid, tuple(actions), resources, context))
    return found


def _ec2_type(arn: str) -> str:
    """``instance`` of ``arn:aws:ec2:r:a:instance/i-1``; "" for any other service's ARN."""
    parts = arn.split(":", 5)
    return parts[5].split("/", 1)[0] if len(parts) == 6 and parts[2] == "ec2" else ""


def sample_arn(pattern: str, account: str) -> str:
    """A resource the pattern matches: ``*`` as the account is ``account``, any other ``*`` an id
    (``arn:aws:ec2:eu-west-1:*:instance/*`` → ``…:123456789012:instance/nodewright-doctor-probe``)."""
    if pattern == "*":
        return pattern
    parts = pattern.split(":", 5)
    if len(parts) == 6 and parts[4] == "*":
        parts[4] = account
    return re.sub(r"\*", PROBE_ID, ":".join(parts))


def context_type(value: str) -> str:
    """SimulatePrincipalPolicy's ContextKeyType for a probe's value."""
    return "boolean" if value in ("true", "false") else "string"
