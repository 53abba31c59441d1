"""``nodewright doctor`` against moto (AWS) and the API emulator (Kubernetes).

A healthy install passes every check; each way an install is commonly broken fails its check
with the command that fixes it. moto implements everything the doctor reads except EKS access
entries and ``accessConfig``: for those, the EKS client answers through botocore's Stubber with
moto's own DescribeCluster answer plus the fields moto lacks.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aws_clients
import pytest
import yaml
from botocore.stub import Stubber
from kubernetes.client import ApiClient
from moto import mock_aws
from nodewright.api import webhooks
from nodewright.cli import doctor as doctor_module
from nodewright.cli.doctor import FAIL, OK, SKIP, WARN, Doctor
from nodewright.cloud import readiness
from nodewright.cluster import auth
from nodewright.cluster.client import Cluster
from nodewright.cluster.resources import (
    CRDS,
    EC2NODECLASSES,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    VALIDATING_WEBHOOKS,
)
from nodewright.spec import iam as spec_iam

from sandbox.apiserver import ApiServer
from sandbox.install import rbac_namespaces
from sandbox.shared_data import REPO_ROOT

pytestmark = pytest.mark.timeout(120)

REGION = "us-east-1"
CLUSTER = "demo"
ACCOUNT = "123456789012"
NODE_POLICIES = doctor_module.NODE_POLICIES


@dataclass
class World:
    clients: dict[str, Any]
    cluster_arn: str
    node_role_arn: str
    function_roles: list[str]
    outputs: dict[str, str]
    described: dict[str, Any]
    vpc: str
    subnets: list[str]
    cluster_sg: str

    def client(self, service: str) -> Any:
        return self.clients[service]


@functools.cache
def _node_managed_policies() -> str:
    """moto's copies of the AWS managed policies the node role is given, and no other: the doctor
    reads which are attached, never another managed policy, while moto parses all of its ~1,300
    every time it builds an IAM backend (each test's start and its reset), most of each test's
    time."""
    from moto.iam import aws_managed_policies

    every = json.loads(aws_managed_policies.aws_managed_policies_data)
    return json.dumps({name: every[name] for name in NODE_POLICIES})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
    monkeypatch.setattr("moto.iam.models.aws_managed_policies_data", _node_managed_policies())
    with mock_aws():
        aws_clients.share_with_moto(monkeypatch)
        clients = {
            s: aws_clients.client(s, REGION)
            for s in ("ec2", "iam", "sqs", "sns", "cloudformation", "sts", "elbv2", "acm")
        }
        ec2, iam = clients["ec2"], clients["iam"]
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        discovery = [{"Key": "karpenter.sh/discovery", "Value": CLUSTER}]
        subnets = [
            ec2.create_subnet(
                VpcId=vpc,
                CidrBlock=f"10.0.{i}.0/24",
                AvailabilityZone=f"{REGION}{zone}",
                TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
            )["Subnet"]["SubnetId"]
            for i, zone in enumerate("ab")
        ]
        cluster_sg = ec2.create_security_group(
            GroupName="eks-cluster-sg",
            Description="cluster",
            VpcId=vpc,
            TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}],
        )["GroupId"]
        ec2_trust = {
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ]
        }
        node_role = iam.create_role(
            RoleName="NodewrightNode-demo-us-east-1", AssumeRolePolicyDocument=json.dumps(ec2_trust)
        )
        for policy in NODE_POLICIES:
            iam.attach_role_policy(
                RoleName="NodewrightNode-demo-us-east-1", PolicyArn=f"arn:aws:iam::aws:policy/{policy}"
            )
        iam.create_role(
            RoleName=readiness.SPOT_SERVICE_LINKED_ROLE,
            Path="/aws-service-role/spot.amazonaws.com/",
            AssumeRolePolicyDocument="{}",
        )
        roles = {
            n: iam.create_role(RoleName=f"fn-{n}", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
            for n in spec_iam.FUNCTIONS
        }
        function_roles = [roles[n] for n in spec_iam.CLUSTER_CLIENTS]
        queue = clients["sqs"].create_queue(QueueName="interruptions")["QueueUrl"]
        topic = clients["sns"].create_topic(Name="alarms")["TopicArn"]
        clients["sns"].set_topic_attributes(
            TopicArn=topic,
            AttributeName="Policy",
            AttributeValue=json.dumps(
                {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "cloudwatch.amazonaws.com"},
                            "Action": "sns:Publish",
                            "Resource": topic,
                            "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}},
                        }
                    ]
                }
            ),
        )
        clients["sns"].subscribe(
            TopicArn=topic, Protocol="sqs", Endpoint=f"arn:aws:sqs:{REGION}:{ACCOUNT}:interruptions"
        )
        eks = aws_clients.client("eks", REGION)
        eks.create_cluster(
            name=CLUSTER,
            version="1.31",
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
            resourcesVpcConfig={
                "subnetIds": subnets,
                "endpointPublicAccess": True,
                "endpointPrivateAccess": True,
            },
        )
        described = eks.describe_cluster(name=CLUSTER)["cluster"]
        described["resourcesVpcConfig"] = {
            **described["resourcesVpcConfig"],
            "vpcId": vpc,
            "clusterSecurityGroupId": cluster_sg,
            "publicAccessCidrs": ["0.0.0.0/0"],
        }
        described["accessConfig"] = {"authenticationMode": "API_AND_CONFIG_MAP"}  # moto has no accessConfig
        outputs = {
            readiness.OUTPUT_NODE_ROLE_ARN: node_role["Role"]["Arn"],
            readiness.OUTPUT_NODE_ROLE_NAME: "NodewrightNode-demo-us-east-1",
            readiness.OUTPUT_CLUSTER_ACCESS_ROLES: ",".join(function_roles),
            readiness.OUTPUT_FUNCTION_SUBNETS: "none",
            readiness.OUTPUT_FUNCTION_SECURITY_GROUPS: "none",
            readiness.OUTPUT_INTERRUPTION_QUEUE: queue,
            readiness.OUTPUT_ALARM_TOPIC: topic,
            readiness.OUTPUT_WEBHOOK_URL: "https://abc.lambda-url.us-east-1.on.aws/",
            readiness.OUTPUT_WEBHOOK_SECRET: "arn:aws:secretsmanager:us-east-1:123456789012:secret:p-AbCdEf",
            readiness.OUTPUT_WAKEUP_MODE: "public",
            readiness.OUTPUT_WAKEUP_CERTIFICATE: "none",
            readiness.OUTPUT_WAKEUP_LOAD_BALANCER: "none",
            readiness.OUTPUT_WAKEUP_SECURITY_GROUP: "none",
            readiness.OUTPUT_FUNCTION_ROLES: ",".join(f"{n}={arn}" for n, arn in roles.items()),
            readiness.OUTPUT_STATE_TABLE: f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/Nodewright-demo-State",
            readiness.OUTPUT_FAILURE_QUEUE: f"arn:aws:sqs:{REGION}:{ACCOUNT}:Nodewright-demo-Failed",
            readiness.OUTPUT_WAKEUP_ALIAS: f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:Nodewright-p:wakeup",
        }
        simulate_principal_policy(clients["iam"], lambda role, action, resource, context: ALLOWED)
        yield World(
            clients,
            described["arn"],
            node_role["Role"]["Arn"],
            function_roles,
            outputs,
            described,
            vpc,
            subnets,
            cluster_sg,
        )


ALLOWED = ("allowed", {})


def simulate_principal_policy(iam: Any, decide: Any) -> None:
    """IAM's SimulatePrincipalPolicy, which moto 5.2 does not implement (its IAM backend has no
    such action), answered in AWS's documented response shape, validated against botocore's service
    model as its Stubber validates a stubbed response: ``decide(role, action, resource, context)`` →
    (``EvalDecision``, extra fields: ``PermissionsBoundaryDecisionDetail`` and ``MatchedStatements``
    of the resource's result, ``OrganizationsDecisionDetail`` of the action's). botocore validates
    the request before it is answered; every other IAM call reaches moto. ``iam.simulated`` records
    the requests."""
    from botocore.awsrequest import AWSResponse
    from botocore.validate import validate_parameters

    iam.decide = decide  # a later call only changes the answers
    if hasattr(iam, "simulated"):
        return
    output_shape = iam.meta.service_model.operation_model("SimulatePrincipalPolicy").output_shape
    asked: list[dict[str, Any]] = []
    iam.simulated = asked

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        context = {e["ContextKeyName"]: e["ContextKeyValues"][0] for e in params.get("ContextEntries", [])}
        role = params["PolicySourceArn"]
        results = []
        for action in params["ActionNames"]:
            per_resource, organizations = [], {"AllowedByOrganizations": True}
            for resource in params.get("ResourceArns") or ["*"]:
                decision, extra = iam.decide(role, action, resource, context)
                organizations = extra.get("OrganizationsDecisionDetail", organizations)
                per_resource.append(
                    {
                        "EvalResourceName": resource,
                        "EvalResourceDecision": decision,
                        "MatchedStatements": extra.get("MatchedStatements", []),
                        "MissingContextValues": [],
                        "PermissionsBoundaryDecisionDetail": extra.get(
                            "PermissionsBoundaryDecisionDetail", {"AllowedByPermissionsBoundary": True}
                        ),
                    }
                )
            first = next((r for r in per_resource if r["EvalResourceDecision"] != "allowed"), per_resource[0])
            results.append(
                {
                    "EvalActionName": action,
                    "EvalResourceName": first["EvalResourceName"],
                    "EvalDecision": first["EvalResourceDecision"],
                    "MatchedStatements": first["MatchedStatements"],
                    "MissingContextValues": [],
                    "OrganizationsDecisionDetail": organizations,
                    "ResourceSpecificResults": per_resource,
                }
            )
        response = {"EvaluationResults": results, "IsTruncated": False}
        validate_parameters(response, output_shape)
        return response

    def capture(params: dict[str, Any], **_: Any) -> None:
        asked.append(dict(params))

    def respond(**_: Any) -> tuple[Any, dict[str, Any]]:
        return AWSResponse("https://iam.amazonaws.com/", 200, {}, None), answer(asked[-1])

    iam.meta.events.register("before-parameter-build.iam.SimulatePrincipalPolicy", capture)
    iam.meta.events.register("before-call.iam.SimulatePrincipalPolicy", respond)


def deploy_stack(world: World) -> None:
    """The stack as moto can hold it: its outputs (the doctor reads nothing else of it)."""
    template = {
        "Resources": {"Marker": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {key: {"Value": value} for key, value in world.outputs.items()},
    }
    world.clients["cloudformation"].create_stack(
        StackName=f"Nodewright-{CLUSTER}", TemplateBody=json.dumps(template)
    )


def stubbed_eks(world: World, entries: dict[str, dict[str, Any]]) -> Any:
    """EKS with what moto lacks: accessConfig and access entries (botocore's Stubber)."""
    client = aws_clients.client("eks", REGION)
    stub = Stubber(client)
    stub.add_response("describe_cluster", {"cluster": world.described}, {"name": CLUSTER})
    stub.add_response("list_access_entries", {"accessEntries": list(entries)}, {"clusterName": CLUSTER})
    for arn, entry in entries.items():
        stub.add_response(
            "describe_access_entry",
            {"accessEntry": {"principalArn": arn, "clusterName": CLUSTER, **entry}},
            {"clusterName": CLUSTER, "principalArn": arn},
        )
    stub.activate()
    return client


def healthy_entries(world: World) -> dict[str, dict[str, Any]]:
    entries = {
        arn: {"type": "STANDARD", "kubernetesGroups": ["nodewright:autoscaler"]}
        for arn in world.function_roles
    }
    entries[world.node_role_arn] = {"type": "EC2_LINUX", "kubernetesGroups": ["system:nodes"]}
    return entries


@pytest.fixture
def apiserver() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server


def client_as(server: ApiServer, token: str, folder: Any) -> Cluster:
    """The layer's client with the kubeconfig of the identity ``token`` names."""
    kubeconfig = server.write_kubeconfig(folder / f"kubeconfig-{token[:8]}", token=token)
    return Cluster(ApiClient(auth.kubeconfig_configuration(str(kubeconfig))))


@pytest.fixture
def kube(apiserver: ApiServer, tmp_path: Any) -> Iterator[Cluster]:
    api = ApiClient(auth.kubeconfig_configuration(str(apiserver.write_kubeconfig(tmp_path / "kubeconfig"))))
    cluster = Cluster(api)
    for file in sorted((REPO_ROOT / "crds").glob("*.yaml")):
        for crd in yaml.safe_load_all(file.read_text()):
            if crd:
                cluster.request("POST", CRDS.path(), body=crd)
    for namespace in rbac_namespaces():
        cluster.request("POST", NAMESPACES.path(), body=namespace)
    cluster.list(EC2NODECLASSES)  # served
    yield cluster
    api.close()


@pytest.fixture
def installed(kube: Cluster) -> Cluster:
    """The emulator with deploy/rbac.yaml applied as an operator applies it (it serves RBAC)."""
    from sandbox.cluster import apply_rbac
    from sandbox.simulators import Kube

    apply_rbac(Kube(kube.api_client))
    return kube


def nodeclass(
    name: str = "default", role: str = "NodewrightNode-demo-us-east-1", subnet_tag: str = CLUSTER
) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": role,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": subnet_tag}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        },
    }


def run_doctor(
    world: World,
    kube: Any,
    entries: dict[str, dict[str, Any]],
    rbac: Any = REPO_ROOT / "deploy" / "rbac.yaml",
    eks: Any = None,
    *,
    answers: dict[str, int | str] | None = None,
) -> dict[str, tuple[str, str, str]]:
    """The doctor with moto, the EKS stub and the emulator; ``answers``: what a GET of each URL gets
    (default: the stack's function URL answers a path without the secret 404, as the webhook does)."""
    clients = {**world.clients, "eks": eks or stubbed_eks(world, entries)}
    url = world.outputs[readiness.OUTPUT_WEBHOOK_URL]
    answers = {url.rstrip("/") + "/nodewright-doctor": 404} if answers is None else answers
    found = Doctor(
        CLUSTER,
        REGION,
        f"Nodewright-{CLUSTER}",
        clients.__getitem__,
        kube,
        probe=lambda asked: answers.get(asked, "URLError: no route"),
    ).run(rbac)
    checks = [f.check for f in found]
    assert len(checks) == len(set(checks)), f"a check reported twice: {checks}"
    return {f.check: (f.status, f.detail, f.fix) for f in found}


def test_a_healthy_install_passes_every_check(aws: World, installed: Cluster) -> None:
    kube = installed
    deploy_stack(aws)
    kube.create(EC2NODECLASSES, nodeclass())
    url = webhooks.endpoint(aws.outputs[readiness.OUTPUT_WEBHOOK_URL], "s" * 48, webhooks.ADMIT_PATH)
    kube.create(VALIDATING_WEBHOOKS, webhooks.wakeup_configuration(url))
    install_conversion(
        kube, webhooks.endpoint(aws.outputs[readiness.OUTPUT_WEBHOOK_URL], "s" * 48, "convert")
    )
    results = run_doctor(aws, kube, healthy_entries(aws))
    statuses = {check: status for check, (status, _, _) in results.items()}
    not_ok = {c: results[c] for c, s in statuses.items() if s != OK}
    # Everything passes, the RBAC of deploy/rbac.yaml and the admission webhooks included.
    assert not_ok == {}, not_ok
    assert statuses["RBAC: Namespace nodewright"] == OK
    assert statuses["RBAC: ClusterRole nodewright-autoscaler"] == OK
    assert all(statuses[f"CRD {name}"] == OK for name in doctor_module.CRD_NAMES)
    assert statuses["EC2NodeClass default"] == OK
    assert statuses["endpoint reachable from the functions"] == OK
    assert statuses["admission webhooks"] == OK
    assert statuses["wake-up webhook"] == OK
    assert all(statuses[f"conversion {name}"] == OK for name in webhooks.CONVERTED_CRDS)
    # Every function's role was simulated against every statement of its requirements.
    assert all(statuses[f"role of {name}"] == OK for name in spec_iam.FUNCTIONS)
    asked = {
        (call["PolicySourceArn"].rsplit("/", 1)[-1], a)
        for call in aws.clients["iam"].simulated
        for a in call["ActionNames"]
    }
    assert ("fn-provisioner", "ec2:CreateFleet") in asked
    assert ("fn-webhook", "secretsmanager:GetSecretValue") in asked
    assert ("fn-cleanup", "iam:DeleteInstanceProfile") in asked
    assert ("fn-pricing", "ec2:CreateFleet") not in asked


def test_each_role_denied_an_action_it_uses_fails_with_why_and_the_fix(
    aws: World, installed: Cluster
) -> None:
    """A permissions boundary, an explicit Deny, an SCP and a missing statement, each on one role:
    each is named (action, resource, why) with what lifts it; the other roles pass."""
    deploy_stack(aws)

    def decide(role: str, action: str, resource: str, context: dict[str, str]) -> tuple[str, dict[str, Any]]:
        name = role.rsplit("/", 1)[-1]
        assert context["aws:RequestedRegion"] == REGION
        if name == "fn-provisioner" and action == "ec2:CreateFleet":
            return "implicitDeny", {
                "PermissionsBoundaryDecisionDetail": {"AllowedByPermissionsBoundary": False}
            }
        if name == "fn-disruption" and action == "ec2:TerminateInstances":
            assert context[f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}"] == "owned"
            deny = {"SourcePolicyId": "NoTerminations", "SourcePolicyType": "IAM Policy"}
            return "explicitDeny", {"MatchedStatements": [deny]}
        if name == "fn-interruption" and action == "iam:PassRole":
            assert context["iam:PassedToService"] == "ec2.amazonaws.com"
            return "implicitDeny", {"OrganizationsDecisionDetail": {"AllowedByOrganizations": False}}
        if name == "fn-spot_events" and action == "ec2:CreateTags":
            return "implicitDeny", {}
        return ALLOWED

    simulate_principal_policy(aws.clients["iam"], decide)
    results = run_doctor(aws, installed, healthy_entries(aws))

    status, detail, fix = results["role of provisioner"]
    assert status == FAIL
    assert detail == (
        "arn:aws:iam::123456789012:role/fn-provisioner: ec2:CreateFleet on "
        "arn:aws:ec2:us-east-1::image/nodewright-doctor-probe and 9 more: not allowed by the role's "
        "permissions boundary"
    )
    assert "add ec2:CreateFleet to the permissions boundary of fn-provisioner" in fix
    status, detail, fix = results["role of disruption"]
    assert (status, "ec2:TerminateInstances" in detail, "explicit Deny" in detail) == (FAIL, True, True)
    assert (
        "remove or narrow the Deny of ec2:TerminateInstances in the policy NoTerminations of fn-disruption"
        in fix
    )
    status, detail, fix = results["role of interruption"]
    assert (status, "service control policy" in detail) == (FAIL, True)
    assert "ask your organization's administrators to let fn-interruption do iam:PassRole" in fix
    status, detail, fix = results["role of spot_events"]
    assert (status, "ec2:CreateTags" in detail, "no statement allows it" in detail) == (FAIL, True, True)
    redeploy = "npx cdk deploy -c clusterName=demo"
    assert fix == f"redeploy to restore statement TagOnlyOnCreate of fn-spot_events: {redeploy}"
    for fine in ("pricing", "cleanup", "webhook"):
        assert results[f"role of {fine}"][0] == OK, results[f"role of {fine}"]


def test_a_caller_who_may_not_simulate_gets_a_check_that_could_not_run(
    aws: World, installed: Cluster
) -> None:
    from botocore.exceptions import ClientError

    deploy_stack(aws)

    def refuse(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {
                    "Code": "AccessDenied",
                    "Message": "not authorized to perform: iam:SimulatePrincipalPolicy",
                }
            },
            "SimulatePrincipalPolicy",
        )

    aws.clients["iam"].meta.events.register_first("before-call.iam.SimulatePrincipalPolicy", refuse)
    results = run_doctor(aws, installed, healthy_entries(aws))

    status, detail, _ = results["role of provisioner"]
    assert (status, detail.startswith("could not run"), "iam:SimulatePrincipalPolicy" in detail) == (
        FAIL,
        True,
        True,
    )
    assert results["node role"][0] == OK  # the other checks still ran


def install_conversion(kube: Cluster, url: str) -> None:
    """What ``install-webhooks --apply`` does to the CRDs: v1beta1 served, converted at ``url``."""
    for crd in webhooks.conversion_crds(url):
        spec = crd["spec"]
        kube.patch(
            CRDS,
            crd["metadata"]["name"],
            {"spec": {"versions": spec["versions"], "conversion": spec["conversion"]}},
        )


def test_crds_converting_through_another_url_than_the_stacks_are_found(
    aws: World, installed: Cluster
) -> None:
    deploy_stack(aws)
    install_conversion(installed, "https://old-stack.lambda-url.us-east-1.on.aws/" + "s" * 48 + "/convert")
    nodepools, nodeclasses = webhooks.CONVERTED_CRDS
    # Objects applied in v1beta1 before the v1 storage version: reads in v1 need the webhook too.
    installed.patch(
        CRDS, nodeclasses, {"status": {"storedVersions": ["v1beta1", "v1"]}}, subresource="status"
    )

    results = run_doctor(aws, installed, healthy_entries(aws))

    status, detail, fix = results[f"conversion {nodepools}"]
    assert (status, "v1beta1 requests fail" in detail) == (WARN, True), detail
    assert fix == "nodewright install-webhooks --cluster demo --apply"
    status, detail, fix = results[f"conversion {nodeclasses}"]
    assert (status, "stored as v1beta1" in detail) == (FAIL, True), detail
    assert fix == "nodewright install-webhooks --cluster demo --apply"


def test_a_broken_install_fails_each_check_with_its_fix(aws: World, kube: Cluster) -> None:
    aws.described["accessConfig"] = {"authenticationMode": "CONFIG_MAP"}
    aws.described["resourcesVpcConfig"] = {
        **aws.described["resourcesVpcConfig"],
        "endpointPublicAccess": False,
    }
    aws.clients["iam"].detach_role_policy(
        RoleName="NodewrightNode-demo-us-east-1", PolicyArn="arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
    )
    aws.clients["iam"].delete_role(RoleName=readiness.SPOT_SERVICE_LINKED_ROLE)
    aws.clients["sns"].set_topic_attributes(
        TopicArn=aws.outputs[readiness.OUTPUT_ALARM_TOPIC],
        AttributeName="Policy",
        AttributeValue=json.dumps({"Statement": []}),
    )
    deploy_stack(aws)
    kube.create(EC2NODECLASSES, nodeclass("wrong-role", role="KarpenterNodeRole-demo"))
    kube.create(EC2NODECLASSES, nodeclass("untagged", subnet_tag="nobody"))
    kube.delete(CRDS, "nodeclaims.karpenter.sh")
    kube.delete(NAMESPACES, "nodewright")
    entries = healthy_entries(aws)
    del entries[aws.node_role_arn]  # the node role has no EC2_LINUX access entry
    entries[aws.function_roles[0]] = {"type": "STANDARD", "kubernetesGroups": ["system:masters"]}

    results = run_doctor(aws, kube, entries)

    def failed(check: str, *in_fix: str) -> None:
        status, _, fix = results[check]
        assert status == FAIL, (check, results[check])
        for text in in_fix:
            assert text in fix, (check, fix)

    failed("authentication mode", "authenticationMode=API_AND_CONFIG_MAP")
    failed(
        "endpoint reachable from the functions",
        f"-c vpcId={aws.vpc}",
        f"-c securityGroupIds={aws.cluster_sg}",
    )
    assert (
        ",".join(aws.subnets) in results["endpoint reachable from the functions"][2]
    )  # the cluster's own subnets
    failed("functions' access entries", "redeploy")
    failed(
        "node role", "attach-role-policy", "AmazonEKS_CNI_Policy", "create-access-entry", "--type EC2_LINUX"
    )
    failed("alarm notifications", "cloudwatch.amazonaws.com")
    failed("CRD nodeclaims.karpenter.sh", "kubectl apply -f crds/")
    failed("RBAC: Namespace nodewright", "kubectl apply -f")
    failed("EC2NodeClass wrong-role", "set spec.role: NodewrightNode-demo-us-east-1")
    failed("EC2NodeClass untagged", "create-tags")
    assert results["spot service-linked role"][0] == WARN
    assert (
        "create-service-linked-role --aws-service-name spot.amazonaws.com"
        in results["spot service-linked role"][2]
    )
    assert results["wake-up webhook"][0] == WARN  # not installed: pods wait for the tick
    assert "nodewright install-webhooks --cluster demo --apply" in results["wake-up webhook"][2]


def test_functions_in_the_vpc_need_the_cluster_security_group_and_a_way_to_the_aws_apis(
    aws: World, kube: Cluster
) -> None:
    function_sg = aws.clients["ec2"].create_security_group(GroupName="fn", Description="fn", VpcId=aws.vpc)[
        "GroupId"
    ]
    aws.outputs[readiness.OUTPUT_FUNCTION_SUBNETS] = ",".join(aws.subnets)
    aws.outputs[readiness.OUTPUT_FUNCTION_SECURITY_GROUPS] = function_sg
    deploy_stack(aws)
    results = run_doctor(aws, kube, healthy_entries(aws))
    status, detail, fix = results["endpoint reachable from the functions"]
    assert status == FAIL
    assert f"--group-id {aws.cluster_sg} --protocol tcp --port 443 --source-group {function_sg}" in fix
    status, detail, fix = results["AWS APIs from the functions' subnets"]
    assert status == FAIL  # no NAT route, no endpoints
    assert "ec2" in detail
    assert "dynamodb" in detail
    assert "create-vpc-endpoint" in fix

    aws.clients["ec2"].authorize_security_group_ingress(
        GroupId=aws.cluster_sg,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "UserIdGroupPairs": [{"GroupId": function_sg}],
            }
        ],
    )
    for service in ("ec2", "eks", "ssm"):
        aws.clients["ec2"].create_vpc_endpoint(
            VpcId=aws.vpc,
            ServiceName=f"com.amazonaws.{REGION}.{service}",
            VpcEndpointType="Interface",
            SubnetIds=aws.subnets,
        )
    aws.clients["ec2"].create_vpc_endpoint(VpcId=aws.vpc, ServiceName=f"com.amazonaws.{REGION}.dynamodb")
    results = run_doctor(aws, kube, healthy_entries(aws))
    assert results["endpoint reachable from the functions"][0] == OK
    status, detail, fix = results["AWS APIs from the functions' subnets"]
    assert status == WARN  # every endpoint the functions need, but none for IAM
    assert "spec.instanceProfile" in fix


def test_the_command_prints_every_finding_and_fails_when_one_fails(
    aws: World, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through ``nodewright doctor`` itself: default clients (moto), no cluster to read, no stack."""
    from nodewright.cli import main

    code = main(["doctor", "--cluster", CLUSTER, "--region", REGION, "--kubeconfig", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert code == 1
    assert f"nodewright doctor: cluster {CLUSTER} in {REGION}" in out
    assert "FAIL  Nodewright stack: no stack Nodewright-demo" in out
    assert "fix: npx cdk deploy -c clusterName=demo" in out
    assert "FAIL  Kubernetes API: no client" in out
    assert out.rstrip().endswith("warning(s)")


# The Kubernetes checks after "Kubernetes API", each reported whatever the others met.
KUBERNETES_CHECKS = ("CRDs", "RBAC", "admission webhooks", "wake-up webhook", "conversion", "EC2NodeClasses")


def test_an_identity_refused_after_version_goes_on_with_every_check_each_with_its_fix(
    aws: World, apiserver: ApiServer, installed: Cluster, tmp_path: Any
) -> None:
    """/version answers anyone; an identity without read access gets 403 on everything else."""
    deploy_stack(aws)
    nobody = client_as(apiserver, apiserver.add_identity("alice"), tmp_path)

    results = run_doctor(aws, nobody, healthy_entries(aws))

    assert results["Kubernetes API"][0] == OK
    caller = aws.clients["sts"].get_caller_identity()["Arn"]
    for check in KUBERNETES_CHECKS:
        status, detail, fix = results[check]
        assert status == FAIL, (check, results[check])
        assert detail.startswith("could not run: not allowed: "), detail
        assert 'User "alice" cannot' in detail
        assert f"aws eks associate-access-policy --cluster-name {CLUSTER} --principal-arn {caller}" in fix
        assert "AmazonEKSAdminViewPolicy" in fix
    # The AWS side was checked as usual.
    assert results["Nodewright stack"][0] == OK
    assert results["functions' access entries"][0] == OK


class RevokedAfterVersion(Cluster):
    """A client whose token the API server stops accepting right after ``/version`` (an access
    entry deleted, a token expired mid-run)."""

    def __init__(self, api_client: Any, server: ApiServer, token: str) -> None:
        super().__init__(api_client)
        self.server, self.token = server, token

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        answer = super().request(method, path, **kwargs)
        if path == "/version":
            self.server.identities.pop(self.token, None)
        return answer


def test_credentials_refused_after_version_are_a_problem_per_check_with_the_fix(
    aws: World, apiserver: ApiServer, installed: Cluster, tmp_path: Any
) -> None:
    deploy_stack(aws)
    token = apiserver.add_identity("bob", ("system:masters",))
    revoked = RevokedAfterVersion(client_as(apiserver, token, tmp_path).api_client, apiserver, token)

    results = run_doctor(aws, revoked, healthy_entries(aws))

    assert results["Kubernetes API"][0] == OK
    for check in KUBERNETES_CHECKS:
        status, detail, fix = results[check]
        assert status == FAIL, (check, results[check])
        assert "does not accept your credentials (401" in detail, detail
        assert f"aws eks update-kubeconfig --name {CLUSTER}" in fix


def test_aws_unreadable_still_runs_the_kubernetes_checks(aws: World, installed: Cluster) -> None:
    eks = aws_clients.client("eks", REGION)
    stub = Stubber(eks)
    stub.add_client_error("describe_cluster", "AccessDeniedException", "not authorized", 403)
    stub.activate()

    results = run_doctor(aws, installed, {}, eks=eks)

    status, detail, fix = results["EKS cluster"]
    assert status == FAIL
    assert "AccessDeniedException" in detail
    assert "region" in fix
    assert results["RBAC: ClusterRole nodewright-autoscaler"][0] == OK
    assert all(results[f"CRD {name}"][0] == OK for name in doctor_module.CRD_NAMES)
    # What needs the stack's outputs says it could not be judged, not that the stack has no wake-up.
    assert results["wake-up webhook"][0] == SKIP
    assert "stack" in results["wake-up webhook"][1]


def test_an_rbac_manifest_that_is_not_yaml_is_a_finding_and_the_rest_runs(
    aws: World, installed: Cluster, tmp_path: Any
) -> None:
    deploy_stack(aws)
    bad = tmp_path / "rbac.yaml"
    bad.write_text("kind: ClusterRole\nrules: [\n")

    results = run_doctor(aws, installed, healthy_entries(aws), rbac=bad)

    status, detail, fix = results["RBAC"]
    assert status == FAIL
    assert f"cannot read {bad}" in detail
    assert "--rbac" in fix
    assert all(results[f"CRD {name}"][0] == OK for name in doctor_module.CRD_NAMES)
    assert results["EC2NodeClasses"][0] == WARN  # none applied: the checks after RBAC ran


def test_a_mutating_webhook_of_a_removed_karpenter_is_found(aws: World, installed: Cluster) -> None:
    """Karpenter's chart installs a defaulting MutatingWebhookConfiguration on its kinds; removed
    without it, every NodePool write fails calling a service that is gone."""
    deploy_stack(aws)
    hook = {
        "name": "defaulting.webhook.karpenter.sh",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"service": {"name": "karpenter", "namespace": "kube-system"}},
        "rules": [
            {
                "apiGroups": ["karpenter.sh"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["nodepools"],
            }
        ],
    }
    installed.create(
        MUTATING_WEBHOOKS, {"metadata": {"name": "defaulting.webhook.karpenter.sh"}, "webhooks": [hook]}
    )

    status, detail, fix = run_doctor(aws, installed, healthy_entries(aws))["admission webhooks"]

    assert status == FAIL
    assert "MutatingWebhookConfiguration defaulting.webhook.karpenter.sh" in detail
    assert "kubectl delete" in fix


def karpenter_deployment(
    name: str = "karpenter",
    namespace: str = "karpenter",
    *,
    labels: dict[str, str] | None = None,
    image: str = "public.ecr.aws/karpenter/controller:1.0.8@sha256:" + "a" * 64,
    replicas: int = 2,
) -> dict[str, Any]:
    """A Deployment as Karpenter's Helm chart renders it (charts/karpenter/templates/deployment.yaml:
    the selector labels app.kubernetes.io/name and /instance on it and its pods, container
    ``controller``)."""
    chart_labels = (
        {"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
        if labels is None
        else labels
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {**chart_labels, "helm.sh/chart": "x"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": chart_labels or {"app": name}},
            "template": {
                "metadata": {"labels": chart_labels or {"app": name}},
                "spec": {"containers": [{"name": "controller", "image": image}]},
            },
        },
    }


def create_deployment(kube: Cluster, deployment: dict[str, Any], ready: int) -> None:
    """Created, with the status the deployment controller would write for ``ready`` pods."""
    from nodewright.cluster.resources import Resource

    deployments = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
    namespace = deployment["metadata"]["namespace"]
    if kube.find(NAMESPACES, namespace) is None:
        kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    kube.create(deployments, deployment, namespace=namespace)
    status = {"replicas": ready, "readyReplicas": ready, "availableReplicas": ready}
    kube.patch(
        deployments,
        deployment["metadata"]["name"],
        {"status": status},
        namespace=namespace,
        subresource="status",
    )


def test_a_karpenter_controller_still_running_is_a_warning_with_the_command_that_scales_it_to_zero(
    aws: World, installed: Cluster
) -> None:
    deploy_stack(aws)
    create_deployment(installed, karpenter_deployment(), ready=2)
    # Renamed by nameOverride and pulled through a mirror: recognised by its controller image.
    mirrored = karpenter_deployment(
        "autoscaler",
        "kube-system",
        labels={"app": "autoscaler"},
        image="123456789012.dkr.ecr.us-east-1.amazonaws.com/mirror/karpenter/controller:v0.37.0",
        replicas=1,
    )
    create_deployment(installed, mirrored, ready=1)
    # Another controller whose name merely contains karpenter is not Karpenter.
    create_deployment(
        installed,
        karpenter_deployment(
            "karpenter-dashboard", "default", labels={"app": "dash"}, image="grafana/grafana:11"
        ),
        1,
    )

    status, detail, fix = run_doctor(aws, installed, healthy_entries(aws))["Karpenter controller"]

    assert status == WARN
    assert "karpenter/karpenter (2 ready)" in detail
    assert "kube-system/autoscaler (1 ready)" in detail
    assert "karpenter-dashboard" not in detail
    assert "both reconcile the same NodeClaims" in detail
    assert "kubectl scale deployment karpenter -n karpenter --replicas=0" in fix
    assert "kubectl scale deployment autoscaler -n kube-system --replicas=0" in fix


def test_a_karpenter_scaled_to_zero_or_absent_passes(aws: World, installed: Cluster) -> None:
    deploy_stack(aws)
    assert run_doctor(aws, installed, healthy_entries(aws))["Karpenter controller"][0] == OK
    create_deployment(installed, karpenter_deployment(replicas=0), ready=0)

    status, detail, _ = run_doctor(aws, installed, healthy_entries(aws))["Karpenter controller"]

    assert status == OK
    assert "karpenter/karpenter is scaled to zero" in detail


def test_an_identity_that_may_not_list_deployments_gets_a_check_that_could_not_run(
    aws: World, apiserver: ApiServer, installed: Cluster, tmp_path: Any
) -> None:
    deploy_stack(aws)
    nobody = client_as(apiserver, apiserver.add_identity("alice"), tmp_path)

    status, detail, fix = run_doctor(aws, nobody, healthy_entries(aws))["Karpenter controller"]

    assert status == WARN  # a warning check that could not run stays a warning
    assert detail.startswith("could not run: not allowed: ")
    assert 'cannot list resource "deployments" in API group "apps"' in detail
    assert "associate-access-policy" in fix


# --- the wake-up's three modes ------------------------------------------------------------------


def private_stack(world: World, *, admits: bool = True, certificate_for: str | None = None) -> str:
    """-c wakeup=private as moto can hold it: an internal load balancer in the cluster's subnets whose
    security group admits (or not) the cluster security group on 443, its HTTPS listener serving a
    certificate the stack made for its name (or ``certificate_for`` another); the outputs. Returns
    the certificate's PEM."""
    from nodewright.wakeup.certificate import self_signed

    ec2, elbv2, acm = world.clients["ec2"], world.clients["elbv2"], world.clients["acm"]
    group = ec2.create_security_group(GroupName="wakeup", Description="wakeup", VpcId=world.vpc)["GroupId"]
    if admits:
        ec2.authorize_security_group_ingress(
            GroupId=group,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 443,
                    "ToPort": 443,
                    "UserIdGroupPairs": [{"GroupId": world.cluster_sg}],
                }
            ],
        )
    balancer = elbv2.create_load_balancer(
        Name="nodewright-wakeup",
        Subnets=world.subnets,
        SecurityGroups=[group],
        Scheme="internal",
        Type="application",
    )["LoadBalancers"][0]
    made = self_signed(certificate_for or balancer["DNSName"], CLUSTER)
    certificate = acm.import_certificate(
        Certificate=made.certificate.encode(), PrivateKey=made.private_key.encode()
    )["CertificateArn"]
    elbv2.create_listener(
        LoadBalancerArn=balancer["LoadBalancerArn"],
        Protocol="HTTPS",
        Port=443,
        Certificates=[{"CertificateArn": certificate}],
        DefaultActions=[
            {
                "Type": "fixed-response",
                "FixedResponseConfig": {"StatusCode": "404", "ContentType": "text/plain"},
            }
        ],
    )
    world.outputs.update(
        {
            readiness.OUTPUT_WAKEUP_MODE: "private",
            readiness.OUTPUT_WEBHOOK_URL: f"https://{balancer['DNSName']}/",
            readiness.OUTPUT_WAKEUP_CERTIFICATE: certificate,
            readiness.OUTPUT_WAKEUP_LOAD_BALANCER: balancer["LoadBalancerArn"],
            readiness.OUTPUT_WAKEUP_SECURITY_GROUP: group,
        }
    )
    return made.certificate


def install_wakeup(kube: Cluster, world: World, ca_bundle: str | None = None) -> None:
    url = world.outputs[readiness.OUTPUT_WEBHOOK_URL]
    kube.create(
        VALIDATING_WEBHOOKS,
        webhooks.wakeup_configuration(webhooks.endpoint(url, "s" * 48, webhooks.ADMIT_PATH), ca_bundle),
    )
    for crd in webhooks.conversion_crds(webhooks.endpoint(url, "s" * 48, webhooks.CONVERT_PATH), ca_bundle):
        spec = crd["spec"]
        kube.patch(
            CRDS,
            crd["metadata"]["name"],
            {"spec": {"versions": spec["versions"], "conversion": spec["conversion"]}},
        )


def test_a_private_wakeup_the_control_plane_can_reach_with_its_certificate_installed_passes(
    aws: World, installed: Cluster
) -> None:
    import base64

    pem = private_stack(aws)
    deploy_stack(aws)
    install_wakeup(installed, aws, base64.b64encode(pem.encode()).decode())

    results = run_doctor(aws, installed, healthy_entries(aws), answers={})  # nothing to GET in private mode

    status, detail, _ = results["wake-up endpoint"]
    assert (status, detail.startswith("private: the internal load balancer")) == (OK, True), detail
    assert results["wake-up webhook"][:2] == (
        OK,
        "nodewright-wakeup calls this stack's private wake-up on kube-scheduler's Events",
    )
    for name in webhooks.CONVERTED_CRDS:
        assert results[f"conversion {name}"][0] == OK, results[f"conversion {name}"]


def test_a_private_wakeup_the_control_plane_cannot_reach_or_trust_is_named_with_the_fix(
    aws: World, installed: Cluster
) -> None:
    import base64

    private_stack(aws, admits=False, certificate_for="internal-other.us-east-1.elb.amazonaws.com")
    deploy_stack(aws)
    stranger = base64.b64encode(self_signed_pem("internal-x.elb.amazonaws.com").encode()).decode()
    install_wakeup(installed, aws, stranger)

    results = run_doctor(aws, installed, healthy_entries(aws), answers={})

    status, detail, fix = results["wake-up endpoint"]
    assert status == FAIL
    assert "admit no HTTPS from the control plane's" in detail
    assert aws.cluster_sg in detail
    assert f"--source-group {aws.cluster_sg}" in fix
    assert (
        "the certificate names ['internal-other.us-east-1.elb.amazonaws.com'], not the load balancer"
        in detail
    )
    status, detail, fix = results["wake-up webhook"]
    assert (status, "caBundle is not the stack's certificate" in detail) == (WARN, True), detail
    assert fix == "nodewright install-webhooks --cluster demo --apply"
    nodepools, _ = webhooks.CONVERTED_CRDS
    assert results[f"conversion {nodepools}"][0] == WARN


def self_signed_pem(name: str) -> str:
    from nodewright.wakeup.certificate import self_signed

    return self_signed(name, CLUSTER).certificate


def test_a_public_url_refused_by_a_policy_fails_with_the_private_flags_as_a_way_out(
    aws: World, installed: Cluster
) -> None:
    deploy_stack(aws)
    url = aws.outputs[readiness.OUTPUT_WEBHOOK_URL].rstrip("/") + "/nodewright-doctor"

    results = run_doctor(aws, installed, healthy_entries(aws), answers={url: 403})

    status, detail, fix = results["wake-up endpoint"]
    assert (status, "answers 403" in detail) == (FAIL, True)
    assert f"-c wakeup=private -c vpcId={aws.vpc} -c clusterSecurityGroupId={aws.cluster_sg}" in fix


def test_with_the_wakeup_off_a_configuration_left_installed_is_named_with_the_uninstall(
    aws: World, installed: Cluster
) -> None:
    old_url = aws.outputs[readiness.OUTPUT_WEBHOOK_URL]
    aws.outputs.update(
        {
            readiness.OUTPUT_WAKEUP_MODE: "off",
            readiness.OUTPUT_WEBHOOK_URL: "none",
            readiness.OUTPUT_WEBHOOK_SECRET: "none",
            readiness.OUTPUT_WAKEUP_ALIAS: "none",
        }
    )
    deploy_stack(aws)
    installed.create(
        VALIDATING_WEBHOOKS, webhooks.wakeup_configuration(webhooks.endpoint(old_url, "s" * 48, "admit"))
    )

    results = run_doctor(aws, installed, healthy_entries(aws), answers={})

    assert results["wake-up endpoint"][:2] == (
        OK,
        "off (-c wakeup=false): pods get nodes on the minute schedule; no URL to reach",
    )
    status, detail, fix = results["wake-up webhook"]
    assert (status, "wake-up is off but nodewright-wakeup is still installed" in detail) == (WARN, True)
    assert fix == "nodewright install-webhooks --cluster demo --uninstall"


def test_the_old_pods_status_configuration_is_stale_with_the_command_that_replaces_it(
    aws: World, installed: Cluster
) -> None:
    deploy_stack(aws)
    configuration = webhooks.wakeup_configuration(
        webhooks.endpoint(aws.outputs[readiness.OUTPUT_WEBHOOK_URL], "s" * 48, webhooks.ADMIT_PATH)
    )
    configuration["webhooks"][0]["rules"] = [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["UPDATE"],
            "resources": ["pods/status"],
            "scope": "Namespaced",
        }
    ]
    configuration["webhooks"][0].pop("matchConditions")
    installed.create(VALIDATING_WEBHOOKS, configuration)

    results = run_doctor(aws, installed, healthy_entries(aws))

    status, detail, fix = results["wake-up webhook"]
    assert (status, "the old pods/status configuration" in detail) == (WARN, True)
    assert fix == "nodewright install-webhooks --cluster demo --apply"
