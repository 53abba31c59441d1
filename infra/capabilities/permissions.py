"""Least-privilege IAM, one role per function, modelled on Karpenter v1's controller policy.

The statements themselves are CDK-free facts in ``nodewright.spec.iam`` (``GRANTS``,
``FUNCTION_GRANTS``, ``TABLE_ACTIONS``), which ``nodewright doctor`` also reads to ask IAM
(``iam:SimulatePrincipalPolicy``) whether each deployed role still allows them: this module only
renders them with CloudFormation's partition, region and account and makes ``iam.PolicyStatement``s
of them, and names the reason for each wildcard cdk-nag finds. The grants (see the spec for what
each holds): ``reads``, ``launch``, ``terminate``, ``prune``, ``prices``, ``cleanup``
(the removal at ``cdk destroy``), ``vpc``.

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
from nodewright.spec import iam as spec
from nodewright.spec.iam import (  # noqa: F401 - the names the CDK app and its tests use
    CERTIFICATE,
    CERTIFICATE_GRANTS,
    CERTIFICATES,
    CLEANUP,
    CLUSTER_CLIENTS,
    CLUSTER_NAME_TAG,
    CREATE_ACTIONS,
    EC2_RESOURCE,
    EC2_SERVICE_PRINCIPALS,
    FUNCTION_GRANTS,
    INSTANCE_PROFILES,
    KMS_LAUNCH_ACTIONS,
    NODEPOOL_TAG,
    OWN_INSTANCE_PROFILES,
    READ_ACTIONS,
    REMOVAL_REPORT_PARAMETER,
    SSM_OWN_PARAMETER,
    SSM_PUBLIC_PARAMETERS,
    TABLE_ACTIONS,
    TAGGED_AT_CREATION,
    UNTAGGED_AT_CREATION,
    USED_RESOURCES,
    VPC_NETWORK_INTERFACE_ACTIONS,
    WEBHOOK,
    grants_of,
)


def removal_report_parameter(cluster_name: str) -> str:
    return REMOVAL_REPORT_PARAMETER.format(cluster=cluster_name)


def cluster_owned_tag(cluster_name: str) -> str:
    return spec.CLUSTER_OWNED_TAG.format(cluster=cluster_name)


@dataclass(frozen=True)
class PolicyInputs:
    cluster_name: str
    cluster_arn: str
    node_role_arn: str
    kms_key_arns: tuple[str, ...] = ()
    ami_ssm_parameters: tuple[str, ...] = ()  # -c amiSsmParameters: names an ssmParameter term may read

    def names(self) -> spec.Names:
        """The spec's patterns filled with this stack's tokens (partition, region and account are
        CloudFormation's)."""
        return spec.Names(
            partition=Aws.PARTITION,
            region=Aws.REGION,
            account=Aws.ACCOUNT_ID,
            cluster=self.cluster_name,
            cluster_arn=self.cluster_arn,
            node_role_arn=self.node_role_arn,
            kms_key_arns=self.kms_key_arns,
            ami_ssm_parameters=self.ami_ssm_parameters,
        )


def policy_statement(rendered: spec.Rendered) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        sid=rendered.sid,
        actions=list(rendered.actions),
        resources=list(rendered.resources),
        conditions=rendered.conditions or None,
    )


def statements_for(grants: tuple[str, ...], inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    return [policy_statement(r) for r in spec.statements_for(grants, inputs.names())]


def cleanup(inputs: PolicyInputs) -> list[iam.PolicyStatement]:
    """What the removal custom resource does at ``cdk destroy`` (``spec.GRANTS["cleanup"]``)."""
    return statements_for(spec.CLEANUP_GRANTS, inputs)


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
    if "certificate" in grants:
        found[CERTIFICATES.format(**nag)] = (
            "ACM certificate ids are unknown before the import: importing requires this cluster's request "
            "tags, deleting its resource tags"
        )
    if {"reads", "prices", "cleanup", "vpc"} & set(grants):
        found["*"] = (
            "EC2 Describe* have no resource-level permissions (limited to this region by "
            "aws:RequestedRegion); pricing:GetProducts and iam:ListInstanceProfiles (read; the call "
            "narrows it to this cluster's path) have none either; Lambda checks its VPC "
            "network-interface calls on '*'"
        )
    return found
