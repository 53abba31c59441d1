"""Policy evaluation of the synthesized roles: what each function can and cannot do.

Each question is asked of the statements CloudFormation would attach to the role, resolved for
one account and region, through ``iam_eval``: the sandbox's evaluator (``@cloud-copilot/iam-simulate``,
the one that also holds every function's calls to its role in the e2e suite). The properties:

- no role can terminate or tag an instance that does not carry this cluster's tags;
- no role can pass any role but the node role, and only to EC2;
- the pricing role cannot launch anything; disruption launches replacements as the provisioner does;
- the sandbox's synth (placeholder cluster name, replaced) resolves to the same policies as a synth
  for the cluster's own name.
"""

from __future__ import annotations

from typing import Any

import pytest
from iam_eval import ACCOUNT, REGION, STACK, Request, Template, allowed, decide, ec2_arn, tag_context
from infra_synth import Synth

from infra.capabilities.functions import FUNCTION_SPECS
from infra.capabilities.permissions import FUNCTION_GRANTS, TAGGED_AT_CREATION, UNTAGGED_AT_CREATION
from sandbox.iam.authorization import resource_types

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
    """The created node role's ARN as CloudFormation resolves GetAtt (its RoleName, this region)."""
    (logical_id,) = [k for k in synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")]
    return Template(synth.template).get_att(logical_id, "Arn")


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
        assert decide(statements, request) == "ImplicitlyDenied", name


def test_functions_that_remove_nodes_can_terminate_this_clusters_instances(
    default_roles: dict[str, Any],
) -> None:
    request = Request("ec2:TerminateInstances", INSTANCE, tag_context("aws:ResourceTag", OWNED))
    can = {name for name, statements in default_roles.items() if allowed(statements, request)}
    # ... and the removal at cdk destroy, which terminates what is left of the cluster's nodes
    assert can == {"provisioner", "disruption", "interruption", "spot_events", "cleanup"}


def test_only_the_provisioner_and_the_removal_delete_launch_templates_and_only_this_clusters(
    default_roles: dict[str, Any],
) -> None:
    template = ec2_arn("launch-template", "lt-1")
    for tags, expected in (
        (OWNED, {"provisioner", "cleanup"}),
        ({"kubernetes.io/cluster/other": "owned"}, set()),
    ):
        request = Request("ec2:DeleteLaunchTemplate", template, tag_context("aws:ResourceTag", tags))
        can = {name for name, statements in default_roles.items() if allowed(statements, request)}
        assert can == expected, tags


def test_the_cluster_functions_read_capacity_reservations_in_their_region(
    default_roles: dict[str, Any],
) -> None:
    """The reservations an EC2NodeClass selects are offerings (every function that plans a launch:
    the provisioner, a replacement's launch in disruption and both interruption paths), its status
    and drift: one regional read statement, not one per purpose."""
    request = Request("ec2:DescribeCapacityReservations", "*", {"aws:RequestedRegion": REGION})
    assert {name for name, statements in default_roles.items() if allowed(statements, request)} == {
        "provisioner",
        "disruption",
        "interruption",
        "spot_events",
    }
    elsewhere = Request("ec2:DescribeCapacityReservations", "*", {"aws:RequestedRegion": "eu-west-1"})
    assert not allowed(default_roles["disruption"], elsewhere)


def test_the_removal_can_list_instance_profiles(default_roles: dict[str, Any]) -> None:
    """iam:ListInstanceProfiles has no resource-level permissions: IAM asks on "*" (a statement
    naming instance-profile/* never matched it, so the removal could not find the profiles)."""
    request = Request("iam:ListInstanceProfiles", "*")
    assert {name for name, statements in default_roles.items() if allowed(statements, request)} == {"cleanup"}


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
    if kind not in resource_types(action):
        pytest.skip(f"{action} is not authorized on {kind} resources (Service Authorization Reference)")
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


def test_the_disruption_role_launches_replacements_only_tagged_for_this_cluster(
    default_roles: dict[str, Any],
) -> None:
    """A consolidation replace or a drift roll launches its replacements (disruption/execute.py)."""
    disruption = default_roles["disruption"]
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        tagged = Request(action, ec2_arn("instance", "x"), tag_context("aws:RequestTag", REQUEST_TAGS))
        assert allowed(disruption, tagged), action
        untagged = Request(action, ec2_arn("instance", "x"), tag_context("aws:RequestTag", OWNED))
        assert not allowed(disruption, untagged), action


@pytest.mark.parametrize("kind", UNTAGGED_AT_CREATION)
def test_a_spot_launchs_request_needs_no_tags_but_only_launchers_run_it(
    default_roles: dict[str, Any], kind: str
) -> None:
    """EC2 gives a fleet's spot request no tags, so its RunInstances carries no aws:RequestTag."""
    request = Request("ec2:RunInstances", ec2_arn(kind, "sir-1"))
    assert {name for name, statements in default_roles.items() if allowed(statements, request)} == set(
        LAUNCHERS
    )
    assert not any(
        allowed(s, Request("ec2:CreateFleet", ec2_arn(kind, "sir-1"))) for s in default_roles.values()
    )


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
    table = Template(default_synth.template).get_att(table_id, "Arn")
    every = ["GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchWriteItem",
             "BatchGetItem", "DescribeStream", "GetRecords", "ConditionCheckItem"]  # fmt: skip
    for name in FUNCTIONS:
        can = {a for a in every if allowed(default_roles[name], Request(f"dynamodb:{a}", table))}
        assert {f"dynamodb:{a}" for a in can} == set(TABLE_ACTIONS[name]), name
    assert not any(allowed(default_roles["cleanup"], Request(f"dynamodb:{a}", table)) for a in every)


# --- the sandbox's policies are the stack's ---------------------------------------------------


def test_the_sandboxs_policies_are_a_synth_for_the_clusters_own_name(
    default_roles: dict[str, Any], default_synth: Synth
) -> None:
    """The sandbox synthesizes once for a placeholder cluster name and resolves the policies for
    each sandbox's name (sandbox/iam/policies.py): the same statements as a synth for that name."""
    from sandbox.iam.policies import StackPolicies, synthesized

    sandbox = StackPolicies(synthesized(), "demo", ACCOUNT, REGION)
    assert sandbox.stack_name == STACK
    for name, statements in default_roles.items():
        resolved = [s for policy in sandbox.policies(name) for s in policy["policy"]["Statement"]]
        assert resolved == statements, name
    assert sandbox.node_role_name == node_role_arn(default_synth).rsplit("/", 1)[1]
