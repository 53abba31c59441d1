"""Policy evaluation of the synthesized roles: what each function can and cannot do.

Each question is asked of the statements CloudFormation would attach to the role, resolved for
one account and region, through ``iam_eval`` (an evaluator of the condition keys the stack uses;
its own known-answer tests are at the bottom). The properties the issue asks for:

- no role can terminate or tag an instance that does not carry this cluster's tags;
- no role can pass any role but the node role, and only to EC2;
- the pricing role cannot launch anything.
"""

from __future__ import annotations

from typing import Any

import pytest
from iam_eval import ACCOUNT, REGION, Request, Template, allowed, decide, ec2_arn, tag_context
from infra_synth import Synth

from infra.capabilities.functions import FUNCTION_SPECS
from infra.capabilities.permissions import FUNCTION_GRANTS, TAGGED_AT_CREATION

CLUSTER = "demo"
OWNED = {f"kubernetes.io/cluster/{CLUSTER}": "owned", "karpenter.sh/nodepool": "default"}
REQUEST_TAGS = {**OWNED, "eks:eks-cluster-name": CLUSTER}
FUNCTIONS = [spec.name for spec in FUNCTION_SPECS]
LAUNCHERS = [name for name, grants in FUNCTION_GRANTS.items() if "launch" in grants]
INSTANCE = ec2_arn("instance", "i-0123456789abcdef0")


def roles(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    """Function (or "cleanup", "node") → the resolved statements of its role."""
    template = Template(synth.template)
    found = {}
    for logical_id in synth.resources("AWS::IAM::Role"):
        for name in [*FUNCTIONS, "cleanup"]:
            prefix = f"AutoscalerFunctions{name.replace('_', '')}Role"
            if logical_id.startswith(prefix) or (
                name == "cleanup" and logical_id.startswith("AutoscalerRemovalcleanupRole")
            ):
                found[name] = template.role_statements(logical_id)
    assert sorted(found) == sorted([*FUNCTIONS, "cleanup"]), sorted(found)
    return found


@pytest.fixture(scope="module")
def default_roles(default_synth: Synth) -> dict[str, list[dict[str, Any]]]:
    return roles(default_synth)


@pytest.fixture(scope="module")
def variant_roles(variant_synth: Synth) -> dict[str, list[dict[str, Any]]]:
    return roles(variant_synth)


def node_role_arn(synth: Synth) -> str:
    """The created node role's ARN as the evaluator resolves GetAtt."""
    (logical_id,) = [k for k in synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")]
    return f"arn:aws:iam::{ACCOUNT}:role/{logical_id}"


# --- terminate -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tags",
    [
        {},
        {"karpenter.sh/nodepool": "default"},  # no cluster tag
        {f"kubernetes.io/cluster/{CLUSTER}": "owned"},  # not launched for a NodePool
        {"kubernetes.io/cluster/other": "owned", "karpenter.sh/nodepool": "default"},  # another cluster
        {f"kubernetes.io/cluster/{CLUSTER}": "shared", "karpenter.sh/nodepool": "default"},
    ],
)
def test_no_role_can_terminate_an_instance_without_this_clusters_tags(
    default_roles: dict[str, Any], tags: dict[str, str]
) -> None:
    request = Request("ec2:TerminateInstances", INSTANCE, tag_context("aws:ResourceTag", tags))
    for name, statements in default_roles.items():
        assert decide(statements, request) == "ImplicitDeny", name


def test_functions_that_remove_nodes_can_terminate_this_clusters_instances(
    default_roles: dict[str, Any],
) -> None:
    request = Request("ec2:TerminateInstances", INSTANCE, tag_context("aws:ResourceTag", OWNED))
    can = {name for name, statements in default_roles.items() if allowed(statements, request)}
    # ... and the removal at cdk destroy, which terminates what is left of the cluster's nodes
    assert can == {"provisioner", "disruption", "interruption", "spot_events", "cleanup"}


# --- tag -------------------------------------------------------------------------------------


@pytest.mark.parametrize("create_action", [None, "CreateFleet", "RunInstances"])
@pytest.mark.parametrize(
    "request_tags",
    [
        {},
        {"karpenter.sh/nodepool": "default"},
        {"kubernetes.io/cluster/other": "owned", "karpenter.sh/nodepool": "x"},
    ],
)
def test_no_role_can_tag_an_instance_without_this_clusters_tags(
    default_roles: dict[str, Any], create_action: str | None, request_tags: dict[str, str]
) -> None:
    context = tag_context("aws:RequestTag", request_tags)
    if create_action:
        context["ec2:CreateAction"] = create_action
    request = Request("ec2:CreateTags", INSTANCE, context)
    for name, statements in default_roles.items():
        assert not allowed(statements, request), (name, create_action, request_tags)


def test_no_role_can_retag_an_existing_instance_even_of_this_cluster(default_roles: dict[str, Any]) -> None:
    """CreateTags outside a creation (no ec2:CreateAction) is never allowed: tags are the ownership."""
    context = {**tag_context("aws:RequestTag", REQUEST_TAGS), **tag_context("aws:ResourceTag", OWNED)}
    request = Request("ec2:CreateTags", INSTANCE, context)
    for name, statements in default_roles.items():
        assert not allowed(statements, request), name


@pytest.mark.parametrize("kind", TAGGED_AT_CREATION)
def test_launchers_tag_only_as_part_of_a_creation_with_this_clusters_tags(
    default_roles: dict[str, Any], kind: str
) -> None:
    context = {**tag_context("aws:RequestTag", REQUEST_TAGS), "ec2:CreateAction": "CreateFleet"}
    request = Request("ec2:CreateTags", ec2_arn(kind, "x-1"), context)
    can = {name for name, statements in default_roles.items() if allowed(statements, request)}
    assert can == set(LAUNCHERS)


# --- launch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TAGGED_AT_CREATION)
@pytest.mark.parametrize("action", ["ec2:CreateFleet", "ec2:RunInstances"])
def test_launches_create_nothing_without_this_clusters_request_tags(
    default_roles: dict[str, Any], kind: str, action: str
) -> None:
    missing_cluster = {"karpenter.sh/nodepool": "default", "eks:eks-cluster-name": CLUSTER}
    for tags in ({}, missing_cluster, {**REQUEST_TAGS, "eks:eks-cluster-name": "other"}):
        request = Request(action, ec2_arn(kind, "x-1"), tag_context("aws:RequestTag", tags))
        for name, statements in default_roles.items():
            assert not allowed(statements, request), (name, kind, tags)
    tagged = Request(action, ec2_arn(kind, "x-1"), tag_context("aws:RequestTag", REQUEST_TAGS))
    can = {name for name, statements in default_roles.items() if allowed(statements, tagged)}
    assert can == set(LAUNCHERS)


def test_launching_from_another_clusters_launch_template_is_refused(default_roles: dict[str, Any]) -> None:
    theirs = {"kubernetes.io/cluster/other": "owned", "karpenter.sh/nodepool": "default"}
    for tags, expected in ((theirs, set()), (OWNED, set(LAUNCHERS))):
        request = Request(
            "ec2:CreateFleet", ec2_arn("launch-template", "lt-1"), tag_context("aws:ResourceTag", tags)
        )
        can = {name for name, statements in default_roles.items() if allowed(statements, request)}
        assert can == expected, tags


def test_the_pricing_role_cannot_launch_or_change_anything(default_roles: dict[str, Any]) -> None:
    pricing = default_roles["pricing"]
    everything = {**tag_context("aws:RequestTag", REQUEST_TAGS), **tag_context("aws:ResourceTag", OWNED)}
    for action in (
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:CreateLaunchTemplate",
        "ec2:TerminateInstances",
    ):
        for kind in (*TAGGED_AT_CREATION, "subnet", "security-group", "image"):
            request = Request(action, ec2_arn(kind, "x-1"), {**everything, "ec2:CreateAction": "CreateFleet"})
            assert not allowed(pricing, request), (action, kind)
    for action in ("iam:PassRole", "iam:CreateInstanceProfile", "eks:DescribeCluster", "ssm:GetParameter"):
        assert not allowed(pricing, Request(action, "arn:aws:iam::111122223333:role/x", everything)), action
    # ... and it can do its job
    regional = {"aws:RequestedRegion": REGION}
    assert allowed(pricing, Request("pricing:GetProducts", "*"))
    assert allowed(pricing, Request("ec2:DescribeSpotPriceHistory", "*", regional))
    assert not allowed(
        pricing, Request("ec2:DescribeSpotPriceHistory", "*", {"aws:RequestedRegion": "eu-west-1"})
    )


def test_the_disruption_role_removes_nodes_but_cannot_launch(default_roles: dict[str, Any]) -> None:
    disruption = default_roles["disruption"]
    request = Request(
        "ec2:CreateFleet", ec2_arn("instance", "x"), tag_context("aws:RequestTag", REQUEST_TAGS)
    )
    assert not allowed(disruption, request)


# --- pass role -------------------------------------------------------------------------------


def test_no_role_can_pass_any_role_but_the_node_role_and_only_to_ec2(
    default_roles: dict[str, Any], default_synth: Synth
) -> None:
    node_role = node_role_arn(default_synth)
    others = [
        f"arn:aws:iam::{ACCOUNT}:role/Admin",
        f"arn:aws:iam::{ACCOUNT}:role/{node_role.rsplit('/', 1)[1]}-copy",
        f"arn:aws:iam::{ACCOUNT}:role/nodewright/{node_role.rsplit('/', 1)[1]}",
        f"arn:aws:iam::999999999999:role/{node_role.rsplit('/', 1)[1]}",
    ]
    for name, statements in default_roles.items():
        for service in ("ec2.amazonaws.com", "ec2.amazonaws.com.cn", "lambda.amazonaws.com"):
            for role in others:
                request = Request("iam:PassRole", role, {"iam:PassedToService": service})
                assert not allowed(statements, request), (name, role, service)
        to_lambda = Request("iam:PassRole", node_role, {"iam:PassedToService": "lambda.amazonaws.com"})
        assert not allowed(statements, to_lambda), name
        no_service = Request("iam:PassRole", node_role)
        assert not allowed(statements, no_service), name
        for service in ("ec2.amazonaws.com", "ec2.amazonaws.com.cn"):  # China's EC2 principal too
            to_ec2 = Request("iam:PassRole", node_role, {"iam:PassedToService": service})
            assert allowed(statements, to_ec2) == (name in LAUNCHERS), (name, service)


def test_an_existing_node_role_with_a_path_is_the_one_passed(variant_roles: dict[str, Any]) -> None:
    """The variant synth names an existing role by ARN with an IAM path."""
    path_role = "arn:aws:iam::123456789012:role/platform/nodes/MyNodeRole"
    without_path = "arn:aws:iam::123456789012:role/MyNodeRole"
    for name in LAUNCHERS:
        statements = variant_roles[name]
        ok = Request("iam:PassRole", path_role, {"iam:PassedToService": "ec2.amazonaws.com"})
        assert allowed(statements, ok), name
        wrong = Request("iam:PassRole", without_path, {"iam:PassedToService": "ec2.amazonaws.com"})
        assert not allowed(statements, wrong), name


# --- instance profiles -----------------------------------------------------------------------


def test_instance_profiles_are_changed_and_deleted_only_on_this_clusters_path_with_its_tags(
    default_roles: dict[str, Any],
) -> None:
    own = f"arn:aws:iam::{ACCOUNT}:instance-profile/nodewright/{REGION}/{CLUSTER}/demo_abc"
    elsewhere = f"arn:aws:iam::{ACCOUNT}:instance-profile/demo_abc"
    tags = tag_context(
        "aws:ResourceTag", {f"kubernetes.io/cluster/{CLUSTER}": "owned", "eks:eks-cluster-name": CLUSTER}
    )
    for action, who in (
        ("iam:DeleteInstanceProfile", {"cleanup"}),
        ("iam:RemoveRoleFromInstanceProfile", {"cleanup", *LAUNCHERS}),
        ("iam:AddRoleToInstanceProfile", set(LAUNCHERS)),
    ):
        can = {n for n, s in default_roles.items() if allowed(s, Request(action, own, tags))}
        assert can == who, action
        for arn, context in ((elsewhere, tags), (own, {})):
            assert not any(allowed(s, Request(action, arn, context)) for s in default_roles.values()), (
                action,
                arn,
            )


# --- the rest of each role -------------------------------------------------------------------


def test_state_table_access_is_exactly_the_calls_each_function_makes(
    default_roles: dict[str, Any], default_synth: Synth
) -> None:
    from infra.capabilities.permissions import TABLE_ACTIONS

    (table_id,) = default_synth.resources("AWS::DynamoDB::Table")
    table = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table_id}"
    every = ["GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchWriteItem",
             "BatchGetItem", "DescribeStream", "GetRecords", "ConditionCheckItem"]  # fmt: skip
    for name in FUNCTIONS:
        can = {a for a in every if allowed(default_roles[name], Request(f"dynamodb:{a}", table))}
        assert {f"dynamodb:{a}" for a in can} == set(TABLE_ACTIONS[name]), name
    assert not any(allowed(default_roles["cleanup"], Request(f"dynamodb:{a}", table)) for a in every)


# --- the evaluator itself --------------------------------------------------------------------


def test_the_evaluator_follows_iams_rules_on_known_answers() -> None:
    allow = {
        "Effect": "Allow",
        "Action": ["ec2:Terminate*"],
        "Resource": "arn:aws:ec2:*:*:instance/*",
        "Condition": {
            "StringEquals": {"aws:ResourceTag/team": ["a", "b"]},
            "StringLike": {"aws:ResourceTag/x": "y*"},
        },
    }
    deny = {
        "Effect": "Deny",
        "Action": "ec2:*",
        "Resource": "*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }
    ok = {"aws:ResourceTag/team": "b", "aws:ResourceTag/x": "yes", "aws:SecureTransport": "true"}
    arn = "arn:aws:ec2:us-east-1:1:instance/i-1"
    assert decide([allow, deny], Request("EC2:terminateinstances", arn, ok)) == "Allow"
    assert (
        decide([allow], Request("ec2:TerminateInstances", arn, {**ok, "aws:ResourceTag/team": "c"}))
        == "ImplicitDeny"
    )
    assert (
        decide([allow], Request("ec2:TerminateInstances", arn, {"aws:ResourceTag/team": "a"}))
        == "ImplicitDeny"
    )
    assert decide(
        [allow, deny], Request("ec2:TerminateInstances", arn, {**ok, "aws:SecureTransport": "false"})
    ) == ("ExplicitDeny")
    assert (
        decide([allow], Request("ec2:TerminateInstances", "arn:aws:ec2:us-east-1:1:volume/v-1", ok))
        == "ImplicitDeny"
    )
    assert decide([allow], Request("ec2:StopInstances", arn, ok)) == "ImplicitDeny"
    if_exists = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                 "Condition": {"StringEqualsIfExists": {"s3:prefix": "a"}}}  # fmt: skip
    assert allowed([if_exists], Request("s3:GetObject", "arn:aws:s3:::b/k"))
    assert not allowed([if_exists], Request("s3:GetObject", "arn:aws:s3:::b/k", {"s3:prefix": "z"}))
    with pytest.raises(NotImplementedError):
        decide(
            [{**allow, "Condition": {"ForAnyValue:StringEquals": {"aws:TagKeys": "a"}}}],
            Request("ec2:TerminateInstances", arn),
        )
