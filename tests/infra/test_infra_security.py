"""Least privilege (IAM statements, access entries, node role); cdk-nag, cfn-lint, checkov."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import VARIANT_NODE_ROLE_ARN
from infra_synth import Synth, cfn_tool

from infra.capabilities.cluster_access import KUBERNETES_GROUP
from infra.capabilities.permissions import (
    CLUSTER_CLIENTS,
    TAGGED_AT_CREATION,
    UNTAGGED_AT_CREATION,
    VPC_NETWORK_INTERFACE_ACTIONS,
)
from sandbox.iam.authorization import wildcard_only
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


def statements_with_sid(synth: Synth, sid: str) -> list[dict[str, Any]]:
    found = [s for s in statements(synth) if s.get("Sid") == sid]
    assert found, f"no statement {sid}"
    return found


def statement_for(synth: Synth, sid: str) -> dict[str, Any]:
    """The statement ``sid``; several roles may hold it, and then they hold the same one."""
    found = statements_with_sid(synth, sid)
    assert all(s == found[0] for s in found), sid
    return found[0]


def test_no_statement_grants_a_wildcard_action(
    default_synth: Synth, variant_synth: Synth, private_synth: Synth
) -> None:
    for synth in (default_synth, variant_synth, private_synth):
        for statement in statements(synth):
            assert statement["Effect"] == "Allow"
            for action in as_list(statement["Action"]):
                assert "*" not in action, statement


def test_resource_star_is_only_for_calls_without_resource_level_permissions(
    default_synth: Synth, variant_synth: Synth
) -> None:
    """``*`` only for actions the Service Authorization Reference lists with no resource types
    (EC2 Describe*, pricing:GetProducts, iam:ListInstanceProfiles, X-Ray), and the VPC calls
    Lambda itself checks on ``*``."""
    vpc = set(VPC_NETWORK_INTERFACE_ACTIONS)  # Lambda checks them on "*" (the variant is in a VPC)
    for synth, extra in ((default_synth, set()), (variant_synth, vpc)):
        for statement in statements(synth):
            if "*" in as_list(statement["Resource"]):
                actions = set(as_list(statement["Action"]))
                assert {a for a in actions if not wildcard_only(a)} <= extra, statement
    network = [s for s in statements(default_synth) if "ec2:CreateNetworkInterface" in as_list(s["Action"])]
    assert network == []  # outside a VPC no role may touch network interfaces


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
    assert (
        _resource_kinds(create)
        == set(TAGGED_AT_CREATION)
        == {
            "instance",
            "volume",
            "fleet",
            "network-interface",
            "launch-template",
        }
    )
    assert create["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/kubernetes.io/cluster/demo": "owned",
            "aws:RequestTag/eks:eks-cluster-name": "demo",
        },
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
    }
    # No other statement that launches names anything a launch creates, except the owned launch
    # templates a launch uses (gated on their resource tags).
    for statement in statements(default_synth):
        if statement == create or not set(as_list(statement["Action"])) & TAG_GATED_EC2:
            continue
        kinds = _resource_kinds(statement)
        if statement["Sid"] == "LaunchFromOwnedLaunchTemplates":
            assert kinds == {"launch-template"}
            assert statement["Condition"]["StringEquals"] == {
                "aws:ResourceTag/kubernetes.io/cluster/demo": "owned"
            }
        elif statement["Sid"] == "SpotRequestsOfTaggedLaunches":  # EC2 cannot tag a fleet's spot request
            assert (kinds, statement["Action"]) == (set(UNTAGGED_AT_CREATION), "ec2:RunInstances")
        elif statement["Sid"] != "TagOnlyOnCreate":
            assert not kinds & set(TAGGED_AT_CREATION), statement


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
    assert all(s == statement for s in tagging)  # the code never tags after creation: no retag statement


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
    for sid, actions in (
        (
            "SetTheRoleOfOwnInstanceProfiles",
            {"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"},
        ),
        ("DeleteOwnInstanceProfiles", {"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"}),
    ):
        statement = statement_for(variant_synth, sid)
        assert set(statement["Action"]) == actions
        assert json.dumps(statement["Resource"]).endswith(own)
        assert statement["Condition"] == {
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
        "iam:ListInstanceProfiles",  # the removal at cdk destroy, narrowed by its PathPrefix
        "iam:DeleteInstanceProfile",  # the removal at cdk destroy only
    }


def test_terminate_and_delete_only_resources_tagged_for_this_cluster(default_synth: Synth) -> None:
    owned = {
        "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/demo": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    terminate = statement_for(default_synth, "TerminateOnlyOwned")
    assert terminate["Action"] == "ec2:TerminateInstances"
    assert terminate["Condition"] == owned
    delete = statement_for(default_synth, "DeleteOwnedLaunchTemplates")
    assert delete["Action"] == "ec2:DeleteLaunchTemplate"
    assert delete["Condition"] == owned
    deleting = [
        s
        for s in statements(default_synth)
        if {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"} & set(as_list(s["Action"]))
    ]
    assert all(s in (terminate, delete) for s in deleting)


def test_pass_role_ssm_eks_and_pricing_are_scoped(default_synth: Synth, variant_synth: Synth) -> None:
    pass_role = statement_for(variant_synth, "PassOnlyTheNodeRole")
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"] == VARIANT_NODE_ROLE_ARN  # an existing role with its IAM path
    assert pass_role["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }
    (node_role_id,) = [
        k for k in default_synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")
    ]
    assert statement_for(default_synth, "PassOnlyTheNodeRole")["Resource"] == {
        "Fn::GetAtt": [node_role_id, "Arn"]
    }
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
    assert "AutoscalerStateTable" in json.dumps(by_action["dynamodb:PutItem"])
    for never in (
        "dynamodb:Scan",
        "dynamodb:BatchWriteItem",
        "dynamodb:GetRecords",
        "dynamodb:DescribeStream",
    ):
        assert never not in by_action, never
    # the failure queue is only written to (on-failure destinations), never read by the functions
    failure_actions = {
        a for a, resources in by_action.items() if "FailedInvocations" in json.dumps(resources)
    }
    assert failure_actions <= {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    assert "sqs:SendMessage" in failure_actions


def rbac_documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def test_access_entries_map_the_cluster_functions_roles_to_the_rbac_group(default_synth: Synth) -> None:
    from infra.capabilities.cluster_access import CLEANUP_GROUP

    entries = [e["Properties"] for e in default_synth.resources("AWS::EKS::AccessEntry").values()]
    standard = [e for e in entries if e["Type"] == "STANDARD"]
    groups = {e["PrincipalArn"]["Fn::GetAtt"][0]: e["KubernetesGroups"] for e in standard}
    functions = {
        role
        for role in default_synth.resources("AWS::IAM::Role")
        if any(role.startswith(f"AutoscalerFunctions{n.replace('_', '')}Role") for n in CLUSTER_CLIENTS)
    }
    (cleanup,) = [
        r for r in default_synth.resources("AWS::IAM::Role") if r.startswith("AutoscalerRemovalcleanupRole")
    ]
    # not the pricing role: it never calls Kubernetes; the removal's has a group of its own
    assert groups == {**{role: [KUBERNETES_GROUP] for role in functions}, cleanup: [CLEANUP_GROUP]}
    assert len(functions) == 4
    for entry in standard:
        assert entry["ClusterName"] == "demo"
        assert "AccessPolicies" not in entry  # permissions come from deploy/rbac.yaml only
    bindings = [d for d in rbac_documents() if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert len(bindings) == 3
    assert sorted(b["subjects"][0]["name"] for b in bindings) == sorted(
        [KUBERNETES_GROUP, KUBERNETES_GROUP, CLEANUP_GROUP]
    )
    for binding in bindings:
        (subject,) = binding["subjects"]
        assert subject["kind"] == "Group"


def test_the_created_node_role_is_ec2s_with_the_node_policies_and_an_ec2_linux_access_entry(
    default_synth: Synth, variant_synth: Synth
) -> None:
    from infra.capabilities.node_role import NODE_MANAGED_POLICIES

    (role_id,) = [k for k in default_synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")]
    role = default_synth.template["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    attached = {json.dumps(arn).rsplit("/", 1)[1].rstrip('"]}') for arn in role["ManagedPolicyArns"]}
    assert attached == set(NODE_MANAGED_POLICIES)
    assert role["RoleName"] == {"Fn::Join": ["", ["NodewrightNode-demo-", {"Ref": "AWS::Region"}]]}
    (node_entry,) = [
        e["Properties"]
        for e in default_synth.resources("AWS::EKS::AccessEntry").values()
        if e["Properties"]["Type"] == "EC2_LINUX"
    ]
    assert node_entry["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert "KubernetesGroups" not in node_entry  # EKS maps EC2_LINUX to system:nodes itself
    outputs = default_synth.template["Outputs"]
    assert outputs["NodewrightNodeRoleName"]["Value"] == {"Ref": role_id}
    # An existing role (the variant names one by ARN) is referenced, never created nor given an entry.
    assert not [k for k in variant_synth.resources("AWS::IAM::Role") if k.startswith("AutoscalerNodeRole")]
    assert all(
        e["Properties"]["Type"] == "STANDARD"
        for e in variant_synth.resources("AWS::EKS::AccessEntry").values()
    )
    variant_env = next(iter(variant_synth.resources("AWS::Lambda::Function").values()))
    assert variant_env["Properties"]["Environment"]["Variables"]["NODE_ROLE"] == "MyNodeRole"


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [("demo", "NodewrightNode-demo-"), ("c" * 34, "NodewrightNode-" + "c" * 34 + "-"), ("c" * 35, None)],
)
def test_a_created_node_role_name_leaves_room_for_the_longest_region(
    cluster: str, expected: str | None
) -> None:
    from infra.config import LONGEST_REGION, created_node_role_name

    name = created_node_role_name(cluster)
    assert name == expected
    if name:
        assert len(name) + LONGEST_REGION <= 64


def test_construct_works_in_another_cdk_app_with_an_existing_topic_role_and_security_groups(
    stub_functions_dir: Path, empty_layer_dir: Path, tmp_path: Path
) -> None:
    from aws_cdk import App, Environment, Stack
    from aws_cdk.assertions import Template

    from infra.autoscaler import NodewrightAutoscaler
    from infra.config import NodeRoleRef
    from infra.stack import add_nag_checks

    app = App(outdir=str(tmp_path))
    stack = Stack(app, "Platform", env=Environment(account="111122223333", region="us-west-2"))
    topic_arn = "arn:aws:sns:us-west-2:111122223333:oncall"
    NodewrightAutoscaler(
        stack,
        "Autoscaler",
        cluster_name="prod",
        alarm_topic_arn=topic_arn,
        existing_node_role=NodeRoleRef("KarpenterNodeRole-prod"),
        subnet_ids=("subnet-0aaaaaaaaaaaaaaa1",),
        security_group_ids=("sg-0cccccccccccccccc",),
        layer_asset_dir=empty_layer_dir,
        functions_dir=stub_functions_dir,
    )
    add_nag_checks(app)
    app.synth()  # cdk-nag findings would raise here
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Topic", 0)
    template.resource_count_is("AWS::EC2::SecurityGroup", 0)  # the given groups are used
    for alarm in template.find_resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [topic_arn]
    template.has_resource_properties("AWS::EKS::AccessEntry", {"ClusterName": "prod"})
    for name, function in template.find_resources("AWS::Lambda::Function").items():
        vpc = function["Properties"].get("VpcConfig")
        calls_the_cluster = any(
            name.startswith(f"AutoscalerFunctions{n.replace('_', '')}") for n in CLUSTER_CLIENTS
        )
        if calls_the_cluster or name.startswith("AutoscalerRemoval"):  # the removal drains the nodes
            assert vpc == {
                "SubnetIds": ["subnet-0aaaaaaaaaaaaaaa1"],
                "SecurityGroupIds": ["sg-0cccccccccccccccc"],
            }
        else:
            assert vpc is None, name


def test_cfn_lint_reports_nothing(default_synth: Synth, variant_synth: Synth, private_synth: Synth) -> None:
    result = subprocess.run(
        [cfn_tool("cfn-lint"), str(default_synth.path), str(variant_synth.path), str(private_synth.path)],
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
    default_synth: Synth, variant_synth: Synth, private_synth: Synth, tmp_path: Path
) -> None:
    """Scan the three templates (outside and inside a VPC, the private wake-up) and copies without
    acknowledgments: each copy must fail exactly the acknowledged checks, so an acknowledgment never
    hides a check that would pass anyway. One checkov run for all six files."""
    acknowledged: dict[str, set[tuple[str, str]]] = {}
    for name, synth in (("default", default_synth), ("variant", variant_synth), ("private", private_synth)):
        template = synth.template
        stripped = copy.deepcopy(template)
        acknowledged[name] = set()
        for logical_id, resource in stripped["Resources"].items():
            for skip in resource.get("Metadata", {}).pop("checkov", {"skip": []})["skip"]:
                assert len(skip["comment"]) > 20, f"{skip['id']} on {logical_id} needs a real reason"
                acknowledged[name].add((skip["id"], logical_id))
        (tmp_path / f"{name}-acknowledged.template.json").write_text(json.dumps(template))
        (tmp_path / f"{name}-stripped.template.json").write_text(json.dumps(stripped))
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
    # checkov's LambdaServicePermission check prints "Not a service principal" on stdout for the
    # function URL's public permission (Principal "*"): the report is what follows.
    report = result.stdout[min(i for i in (result.stdout.find("["), result.stdout.find("{")) if i >= 0) :]
    findings = _checkov_findings(json.loads(report))
    for name, expected in acknowledged.items():
        assert findings[f"{name}-acknowledged.template.json"]["failed"] == set(), name
        assert findings[f"{name}-acknowledged.template.json"]["skipped"] == expected, name
        assert findings[f"{name}-stripped.template.json"]["failed"] == expected, name
    in_vpc = {logical_id for check, logical_id in acknowledged["variant"] if check == "CKV_AWS_117"}
    assert all("pricing" in i or "Wakeupwebhook" in i for i in in_vpc), (
        "only the non-cluster functions stay outside"
    )
    logs = {logical_id for check, logical_id in acknowledged["private"] if check == "CKV_AWS_91"}
    assert len(logs) == 1  # the private wake-up's load balancer: its access logs would hold the secret


ROLE_ARN_WITH_PATH = "arn:aws:iam::123456789012:role/a/b/Nodes"


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({}, "clusterName is not set"),
        ({"clusterName": "bad name!"}, "is not an EKS cluster name"),
        ({"clusterName": "demo", "interruptionMode": "sometimes"}, "interruptionMode"),
        ({"clusterName": "demo", "pollInterval": "fast"}, "pollInterval"),
        ({"clusterName": "demo", "minValuesPolicy": "Lenient"}, "minValuesPolicy 'Lenient': use one of"),
        ({"clusterName": "demo", "spotToSpotConsolidation": "maybe"}, "spotToSpotConsolidation 'maybe'"),
        ({"clusterName": "demo", "nodeOverlay": "yes please"}, "nodeOverlay 'yes please'"),
        ({"clusterName": "demo", "pollInterval": "120"}, "1-30 seconds"),
        ({"clusterName": "demo", "architecture": "riscv"}, "architecture"),
        ({"clusterName": "demo", "alarmEmail": "a@b.c", "alarmTopicArn": "arn:aws:sns:x"}, "not both"),
        ({"clusterName": "demo", "alarmTopicArn": "arn:aws:sns:x"}, "not an SNS topic ARN"),
        ({"clusterName": "demo", "alarmEmail": "oncall"}, "not an e-mail address"),
        ({"clusterName": "demo", "nodeRoleArn": "NodeRole"}, "not an IAM role ARN"),
        ({"clusterName": "demo", "nodeRoleName": "a", "nodeRoleArn": ROLE_ARN_WITH_PATH}, "not both"),
        ({"clusterName": "demo", "nodeRoleName": "a/b"}, "not an IAM role name"),
        ({"clusterName": "demo", "vpcId": "vpc-0123456789abcdef0"}, "subnetIds is not set"),
        ({"clusterName": "demo", "subnetIds": "subnet-0aaaaaaaaaaaaaaa1"}, "needs vpcId"),
        (
            {"clusterName": "demo", "subnetIds": "subnet-1", "vpcId": "vpc-0123456789abcdef0"},
            "not a subnetId",
        ),
        ({"clusterName": "demo", "ebsKmsKeyArns": "alias/nodes"}, "not a KMS key ARN"),
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
