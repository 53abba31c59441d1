"""The removal at ``cdk destroy`` as synthesized: when CloudFormation runs it, what its role may do,
how long it may take, and where its report goes.

CloudFormation deletes a resource only after everything that depends on it: the removal custom
resource must therefore depend on what it needs while it runs (its own access entry, the nodes'
access entry, the node role) and be depended on by what could launch meanwhile (functions, rules).
"""

from __future__ import annotations

from typing import Any

from iam_eval import ACCOUNT, REGION, Request, Template, allowed, ec2_arn, tag_context
from infra_synth import Synth

from infra.capabilities.removal import CLEANUP_TIMEOUT, REPORT_PARAMETER_VARIABLE

CLUSTER = "demo"
OWNED = {f"kubernetes.io/cluster/{CLUSTER}": "owned", "karpenter.sh/nodepool": "default"}
PARAMETER = f"/nodewright/{CLUSTER}/removal-report"


def _one(synth: Synth, kind: str, prefix: str) -> str:
    (found,) = [k for k in synth.resources(kind) if k.startswith(prefix)]
    return found


def _depends_on(resource: dict[str, Any]) -> list[str]:
    depends = resource.get("DependsOn", [])
    return [depends] if isinstance(depends, str) else list(depends)


def test_the_removal_runs_before_the_access_entries_and_the_node_role_go(default_synth: Synth) -> None:
    resources = default_synth.template["Resources"]
    (removal_id, removal) = default_synth.one("AWS::CloudFormation::CustomResource")
    entries = {
        props["Properties"]["KubernetesGroups"][0]
        if "KubernetesGroups" in props["Properties"]
        else "nodes": k
        for k, props in default_synth.resources("AWS::EKS::AccessEntry").items()
        if props["Properties"]["Type"] == "EC2_LINUX" or k.startswith("AutoscalerClusterAccesscleanup")
    }
    assert sorted(entries) == ["nodes", "nodewright:cleanup"]
    node_role = _one(default_synth, "AWS::IAM::Role", "AutoscalerNodeRole")
    # deleted after the removal: it still drains (its entry), nodes stay Ready (theirs), role last
    for needed in (entries["nodewright:cleanup"], entries["nodes"], node_role):
        assert needed in _depends_on(removal), needed
    # the removal's own function, role and policies are deleted after it too (its ServiceToken)
    (function_id,) = [
        k for k in default_synth.resources("AWS::Lambda::Function") if k.startswith("AutoscalerRemoval")
    ]
    assert removal["Properties"]["ServiceToken"] == {"Fn::GetAtt": [function_id, "Arn"]}
    assert any(d.startswith("AutoscalerRemovalcleanupPolicy") for d in _depends_on(resources[function_id]))
    # deleted before it: every function that could launch, every rule that could start one
    for logical_id, resource in resources.items():
        if resource["Type"] == "AWS::Events::Rule" or (
            logical_id.startswith("AutoscalerFunctions") and (resource["Type"] == "AWS::Lambda::Function")
        ):
            assert removal_id in _depends_on(resource), logical_id


def test_with_an_existing_node_role_the_removal_still_outlives_nothing_it_needs(variant_synth: Synth) -> None:
    (_, removal) = variant_synth.one("AWS::CloudFormation::CustomResource")
    cleanup_entry = _one(variant_synth, "AWS::EKS::AccessEntry", "AutoscalerClusterAccesscleanup")
    assert cleanup_entry in _depends_on(removal)
    assert not [
        e
        for e in variant_synth.resources("AWS::EKS::AccessEntry").values()
        if e["Properties"]["Type"] == "EC2_LINUX"
    ]


def _cleanup_statements(synth: Synth) -> list[dict[str, Any]]:
    return Template(synth.template).role_statements(
        _one(synth, "AWS::IAM::Role", "AutoscalerRemovalcleanupRole")
    )


def test_the_cleanup_role_can_do_what_the_removal_does_on_this_cluster_only(default_synth: Synth) -> None:
    statements = _cleanup_statements(default_synth)
    regional = {"aws:RequestedRegion": REGION}
    for action in ("ec2:DescribeInstances", "ec2:DescribeLaunchTemplates"):
        assert allowed(statements, Request(action, "*", regional)), action
    cluster = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"
    assert allowed(statements, Request("eks:DescribeCluster", cluster))
    assert not allowed(statements, Request("eks:DescribeCluster", cluster.replace(CLUSTER, "other")))
    owned = tag_context("aws:ResourceTag", OWNED)
    assert allowed(statements, Request("ec2:TerminateInstances", ec2_arn("instance", "i-1"), owned))
    assert not allowed(
        statements,
        Request(
            "ec2:TerminateInstances", ec2_arn("instance", "i-1"), tag_context("aws:ResourceTag", {"a": "b"})
        ),
    )
    parameter = f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{PARAMETER}"
    assert allowed(statements, Request("ssm:PutParameter", parameter))
    for other in (
        f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/nodewright/other/removal-report",
        parameter + "x",
    ):
        assert not allowed(statements, Request("ssm:PutParameter", other)), other
    # and nothing that makes anything
    everything = {**tag_context("aws:RequestTag", {**OWNED, "eks:eks-cluster-name": CLUSTER}), **owned}
    for action in (
        "ec2:RunInstances",
        "ec2:CreateFleet",
        "ec2:CreateLaunchTemplate",
        "ec2:CreateTags",
        "iam:PassRole",
    ):
        for resource in (ec2_arn("instance", "i-1"), ec2_arn("launch-template", "lt-1"), "*"):
            assert not allowed(statements, Request(action, resource, everything)), (action, resource)


def test_the_removal_function_has_the_time_and_the_parameter_it_needs(default_synth: Synth) -> None:
    from nodewright import removal

    (_, function) = next(
        (k, f)
        for k, f in default_synth.resources("AWS::Lambda::Function").items()
        if k.startswith("AutoscalerRemoval")
    )
    props = function["Properties"]
    assert props["Timeout"] == CLEANUP_TIMEOUT.to_seconds() == 900  # Lambda's maximum
    assert props["Environment"]["Variables"][REPORT_PARAMETER_VARIABLE] == PARAMETER
    # The longest removal (the whole drain, its finish, AWS, the answer) fits in the timeout with
    # a minute to spare for a cold start.
    worst = removal.DRAIN_SECONDS + removal.FINISH_SECONDS + removal.AWS_SECONDS + removal.ANSWER_SECONDS
    assert worst + 60 <= props["Timeout"]
    # The report outlives the stack: a parameter written at run time, not a resource of the stack
    # (whose deletion would take it along), and no retained log group to block the next deploy.
    assert not default_synth.resources("AWS::SSM::Parameter")
    for logical_id, group in default_synth.resources("AWS::Logs::LogGroup").items():
        assert group.get("DeletionPolicy") == "Delete", logical_id
