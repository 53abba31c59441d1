"""Least privilege (IAM, RBAC, access entry) and the template scanners: cdk-nag, cfn-lint, checkov."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from infra_synth import Synth, cfn_tool

from infra.capabilities.cluster_access import KUBERNETES_GROUP
from infra.capabilities.permissions import READ_ACTIONS, TAGGED_AT_CREATION, UNTAGGED_LAUNCH_RESOURCES
from sandbox.shared_data import REPO_ROOT

RBAC = REPO_ROOT / "deploy" / "rbac.yaml"
TAG_GATED_EC2 = {"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags"}


def statements(synth: Synth) -> list[dict[str, Any]]:
    found = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            found.append(statement)
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statement_for(synth: Synth, sid: str) -> dict[str, Any]:
    (found,) = [s for s in statements(synth) if s.get("Sid") == sid]
    return found


def test_no_statement_grants_a_wildcard_action(default_synth: Synth, variant_synth: Synth) -> None:
    for synth in (default_synth, variant_synth):
        for statement in statements(synth):
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                assert "*" not in action, statement


def test_resource_star_is_only_for_reads_without_resource_level_permissions(
    default_synth: Synth, variant_synth: Synth
) -> None:
    allowed = {*READ_ACTIONS, "pricing:GetProducts"}
    tracing = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
    for synth, extra in ((default_synth, set()), (variant_synth, tracing)):
        for statement in statements(synth):
            if "*" in as_list(statement["Resource"]):
                assert set(as_list(statement["Action"])) <= allowed | extra, statement


def _resource_kinds(statement: dict[str, Any]) -> set[str]:
    """EC2/IAM resource types of a statement's ARNs ("instance", "instance-profile", ...)."""
    kinds = set()
    for resource in as_list(statement["Resource"]):
        text = resource if isinstance(resource, str) else json.dumps(resource)
        kinds.add(text.rsplit(":", 1)[-1].split("/", 1)[0])
    return kinds


def test_ec2_creation_requires_this_clusters_request_tags(default_synth: Synth) -> None:
    create = statement_for(default_synth, "CreateOnlyTaggedForThisCluster")
    assert set(create["Action"]) == {"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"}
    assert _resource_kinds(create) == set(TAGGED_AT_CREATION) == {"instance", "volume", "launch-template"}
    assert create["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
            "aws:RequestTag/eks:eks-cluster-name": "demo",
        },
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
    }
    # Every other statement that launches or creates names no resource the code creates tagged,
    # except the owned launch templates a launch uses (gated on their resource tags).
    for statement in statements(default_synth):
        if statement is create or not set(as_list(statement["Action"])) & TAG_GATED_EC2:
            continue
        kinds = _resource_kinds(statement)
        if statement["Sid"] == "LaunchFromOwnedLaunchTemplates":
            assert kinds == {"launch-template"}
            assert statement["Condition"]["StringEquals"] == {
                "aws:ResourceTag/kubernetes.io/cluster/demo": "owned"
            }
        elif statement["Sid"] != "TagOnlyOnCreate":
            assert not kinds & {"instance", "volume", "launch-template"}, statement


def test_untagged_launch_side_resources_are_only_launchable(default_synth: Synth) -> None:
    side = statement_for(default_synth, "LaunchSideResources")
    assert set(side["Action"]) == {"ec2:RunInstances", "ec2:CreateFleet"}  # not CreateLaunchTemplate/Tags
    assert _resource_kinds(side) == set(UNTAGGED_LAUNCH_RESOURCES)
    assert "Condition" not in side


def test_create_tags_only_as_part_of_a_creation(default_synth: Synth) -> None:
    statement = statement_for(default_synth, "TagOnlyOnCreate")
    assert statement["Action"] == "ec2:CreateTags"
    assert statement["Condition"]["StringEquals"]["ec2:CreateAction"] == [
        "CreateFleet",
        "RunInstances",
        "CreateLaunchTemplate",
    ]
    assert statement["Condition"]["StringEquals"]["aws:RequestTag/kubernetes.io/cluster/demo"] == "owned"
    assert _resource_kinds(statement) == set(TAGGED_AT_CREATION)
    tagging = [s for s in statements(default_synth) if "ec2:CreateTags" in as_list(s["Action"])]
    assert tagging == [statement]  # the code never tags after creation: no retag statement


def test_instance_profiles_are_read_anywhere_but_changed_only_on_this_clusters_path(
    variant_synth: Synth,
) -> None:
    read = statement_for(variant_synth, "ReadInstanceProfiles")
    assert read["Action"] == "iam:GetInstanceProfile"
    account = '":iam::", {"Ref": "AWS::AccountId"}, '
    assert json.dumps(read["Resource"]).endswith(account + '":instance-profile/*"]]}')
    own = account + '":instance-profile/nodewright/", {"Ref": "AWS::Region"}, "/demo/*"]]}'
    create = statement_for(variant_synth, "CreateOwnInstanceProfiles")
    assert create["Action"] == "iam:CreateInstanceProfile"
    assert json.dumps(create["Resource"]).endswith(own)
    assert create["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
            "aws:RequestTag/eks:eks-cluster-name": "demo",
        }
    }
    tag = statement_for(variant_synth, "TagOwnInstanceProfiles")
    assert tag["Action"] == "iam:TagInstanceProfile"
    assert tag["Condition"]["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/demo"] == "owned"
    assert tag["Condition"]["StringEquals"]["aws:RequestTag/eks:eks-cluster-name"] == "demo"
    roles = statement_for(variant_synth, "SetTheRoleOfOwnInstanceProfiles")
    assert set(roles["Action"]) == {"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"}
    assert json.dumps(roles["Resource"]).endswith(own)
    assert roles["Condition"] == {
        "StringEquals": {
            "aws:ResourceTag/kubernetes.io/cluster/demo": "owned",
            "aws:ResourceTag/eks:eks-cluster-name": "demo",
        }
    }
    iam_actions = {
        action
        for s in statements(variant_synth)
        for action in as_list(s["Action"])
        if action.startswith("iam:")
    }
    assert iam_actions == {
        "iam:GetInstanceProfile",
        "iam:CreateInstanceProfile",
        "iam:TagInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:PassRole",
    }  # no DeleteInstanceProfile: the code never deletes one


def test_terminate_and_delete_only_resources_tagged_for_this_cluster(default_synth: Synth) -> None:
    statement = statement_for(default_synth, "DeleteOnlyOwned")
    assert set(statement["Action"]) == {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"}
    assert statement["Condition"] == {
        "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    deleting = [
        s
        for s in statements(default_synth)
        if {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"} & set(as_list(s["Action"]))
    ]
    assert deleting == [statement]


def test_pass_role_ssm_eks_and_pricing_are_scoped(default_synth: Synth, variant_synth: Synth) -> None:
    pass_role = statement_for(variant_synth, "PassOnlyTheNodeRole")
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::123456789012:role/MyNodeRole"]]
    }
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
    ssm = statement_for(default_synth, "PublicAmiParameters")
    assert ssm["Action"] == "ssm:GetParameter"
    assert json.dumps(ssm["Resource"]).endswith('::parameter/aws/service/*"]]}')
    eks = statement_for(variant_synth, "ThisClusterEndpoint")
    assert eks["Action"] == "eks:DescribeCluster"
    assert json.dumps(eks["Resource"]).endswith(':eks:eu-west-1:123456789012:cluster/demo"]]}')
    assert statement_for(default_synth, "OnDemandPrices")["Action"] == "pricing:GetProducts"
    reads = statement_for(default_synth, "RegionalReads")
    assert all(a.startswith("ec2:Describe") for a in reads["Action"])
    assert reads["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}


def test_queue_and_table_access_come_from_grants_on_those_resources(default_synth: Synth) -> None:
    by_action: dict[str, list[Any]] = {}
    for statement in statements(default_synth):
        for action in as_list(statement["Action"]):
            by_action.setdefault(action, []).extend(as_list(statement["Resource"]))
    assert all(
        r["Fn::GetAtt"][0].startswith("AutoscalerInterruptionsQueue") for r in by_action["sqs:ReceiveMessage"]
    )
    table_resources = json.dumps(by_action["dynamodb:PutItem"])
    assert "AutoscalerStateTable" in table_resources
    # the failure queue is only written to (on-failure destinations), never read by the functions
    failure_actions = {
        a for a, resources in by_action.items() if "FailedInvocations" in json.dumps(resources)
    }
    assert failure_actions <= {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    assert "sqs:SendMessage" in failure_actions


def rbac_documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def test_access_entry_maps_the_functions_role_to_the_rbac_group(default_synth: Synth) -> None:
    role_id, _ = default_synth.one("AWS::IAM::Role")
    _, entry = default_synth.one("AWS::EKS::AccessEntry")
    props = entry["Properties"]
    assert props["ClusterName"] == "demo"
    assert props["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert props["KubernetesGroups"] == [KUBERNETES_GROUP]
    assert "AccessPolicies" not in props  # permissions come from deploy/rbac.yaml only
    bindings = [d for d in rbac_documents() if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert len(bindings) == 2
    for binding in bindings:
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": KUBERNETES_GROUP}
        ]


def test_construct_works_in_another_cdk_app_with_an_existing_topic(
    stub_functions_dir: Path, empty_layer_dir: Path, tmp_path: Path
) -> None:
    from aws_cdk import App, Environment, Stack
    from aws_cdk.assertions import Template

    from infra.autoscaler import NodewrightAutoscaler
    from infra.stack import add_nag_checks

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Platform", env=Environment(account="111122223333", region="us-west-2"))
    topic_arn = "arn:aws:sns:us-west-2:111122223333:oncall"
    NodewrightAutoscaler(
        stack,
        "Autoscaler",
        cluster_name="prod",
        alarm_topic_arn=topic_arn,
        layer_asset_dir=empty_layer_dir,
        functions_dir=stub_functions_dir,
    )
    add_nag_checks(app)
    app.synth()  # cdk-nag findings would raise here
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Topic", 0)
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [topic_arn]
    template.has_resource_properties("AWS::EKS::AccessEntry", {"ClusterName": "prod"})


def test_cfn_lint_reports_nothing(default_synth: Synth, variant_synth: Synth) -> None:
    result = subprocess.run(
        [cfn_tool("cfn-lint"), str(default_synth.path), str(variant_synth.path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def _checkov_findings(report: Any) -> dict[str, dict[str, set[tuple[str, str]]]]:
    """{template file name: {"failed"|"skipped": {(check id, logical id)}}}."""
    found: dict[str, dict[str, set[tuple[str, str]]]] = {}
    for block in report if isinstance(report, list) else [report]:
        for kind in ("failed", "skipped"):
            for check in block["results"].get(f"{kind}_checks", []):
                name = Path(check["file_abs_path"]).name
                logical_id = check["resource"].split(".", 1)[1]
                found.setdefault(name, {"failed": set(), "skipped": set()})[kind].add(
                    (check["check_id"], logical_id)
                )
    return found


def test_checkov_fails_nothing_and_every_acknowledgment_is_needed(
    default_synth: Synth, tmp_path: Path
) -> None:
    """Scan the template and a copy without acknowledgments: the copy must fail exactly the
    acknowledged checks, so an acknowledgment never hides a check that would pass anyway."""
    template = default_synth.template
    stripped = copy.deepcopy(template)
    acknowledged = set()
    for logical_id, resource in stripped["Resources"].items():
        for skip in resource.get("Metadata", {}).pop("checkov", {"skip": []})["skip"]:
            assert len(skip["comment"]) > 20, f"{skip['id']} on {logical_id} needs a real reason"
            acknowledged.add((skip["id"], logical_id))
    (tmp_path / "acknowledged.template.json").write_text(json.dumps(template))
    (tmp_path / "stripped.template.json").write_text(json.dumps(stripped))
    result = subprocess.run(
        [
            cfn_tool("checkov"),
            "-d",
            str(tmp_path),
            "--framework",
            "cloudformation",
            "--skip-download",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    findings = _checkov_findings(json.loads(result.stdout))
    assert findings["acknowledged.template.json"]["failed"] == set()
    assert findings["acknowledged.template.json"]["skipped"] == acknowledged
    assert findings["stripped.template.json"]["failed"] == acknowledged


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({}, "clusterName is not set"),
        ({"clusterName": "bad name!"}, "is not an EKS cluster name"),
        ({"clusterName": "demo", "interruptionMode": "sometimes"}, "interruptionMode"),
        ({"clusterName": "demo", "pollInterval": "fast"}, "pollInterval"),
        ({"clusterName": "demo", "pollInterval": "120"}, "1-30 seconds"),
        ({"clusterName": "demo", "architecture": "riscv"}, "architecture"),
        ({"clusterName": "demo", "alarmEmail": "a@b.c", "alarmTopicArn": "arn:aws:sns:x"}, "not both"),
    ],
)
def test_bad_context_is_refused_with_the_flag_to_fix(context: dict[str, str], message: str) -> None:
    from infra.config import ConfigError, NodewrightConfig

    with pytest.raises(ConfigError, match=message):
        NodewrightConfig.from_context(context.get)


def test_a_missing_function_folder_names_the_file_to_create(tmp_path: Path) -> None:
    from infra.capabilities.functions import function_asset_dir

    with pytest.raises(FileNotFoundError, match=r"pricing/app.py is missing.*handler\(event, context\)"):
        function_asset_dir(tmp_path, "pricing")
