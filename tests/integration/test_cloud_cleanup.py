"""The removal at ``cdk destroy``, its AWS side on moto: this cluster's Nodewright instances are
terminated and its launch templates and instance profiles deleted, nothing of anyone else's is
touched, every call is one the cleanup's role is granted, the report is kept in SSM, and the handler
always answers CloudFormation without ever logging the event whole."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from nodewright.cloud import aws
from nodewright.cloud.cleanup import (
    MAX_REPORT_CHARS,
    fit_report,
    remove_cluster_resources,
    send_custom_resource_response,
)
from nodewright.cloud.launchtemplates import CLUSTER_TAG, LaunchTemplates
from nodewright.cloud.provider import CloudProvider
from nodewright.settings import Settings

from sandbox.runtime.lambdas import LambdaContext, load_function

REGION = "us-east-1"
CLUSTER = "demo"
OWN_PATH = f"/nodewright/{REGION}/{CLUSTER}/"
PARAMETER = f"/nodewright/{CLUSTER}/removal-report"
SIGNATURE = "X-Amz-Signature=00112233445566778899aabbccddeeff"


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        aws.reset_clients()
        yield boto3.client("ec2", region_name=REGION), boto3.client("iam", region_name=REGION)
        aws.reset_clients()


class Recorded:
    """Every AWS operation the layer's clients make (its one session builds them all)."""

    def __init__(self) -> None:
        self.actions: set[str] = set()

    def __call__(self, model: Any, **_: Any) -> None:
        self.actions.add(f"{model.service_model.signing_name}:{model.name}")


@pytest.fixture
def recorded(clients: Any, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    recording = Recorded()

    class Session(boto3.session.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            made = super().client(*args, **kwargs)
            made.meta.events.register("before-parameter-build", recording)
            return made

    monkeypatch.setattr(aws, "_session", Session())
    return recording


def _template(ec2: Any, name: str, cluster: str) -> None:
    tags = [
        {"Key": CLUSTER_TAG, "Value": cluster},
        {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"},
        {"Key": "karpenter.sh/nodepool", "Value": "default"},
    ]
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-12345678"},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
    )


def _profile(iam: Any, name: str, path: str) -> str:
    arn = iam.create_instance_profile(InstanceProfileName=name, Path=path)["InstanceProfile"]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName="NodeRole")
    return str(arn)


def _instance(ec2: Any, tags: dict[str, str], profile: str | None = None) -> str:
    extra = {"IamInstanceProfile": {"Arn": profile}} if profile else {}
    return str(
        ec2.run_instances(
            ImageId="ami-12345678",
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
            ],
            **extra,
        )["Instances"][0]["InstanceId"]
    )


def _nodewright_tags(cluster: str, nodeclaim: str) -> dict[str, str]:
    return {
        "eks:eks-cluster-name": cluster,
        f"kubernetes.io/cluster/{cluster}": "owned",
        "karpenter.sh/nodepool": "default",
        "karpenter.sh/nodeclaim": nodeclaim,
    }


def _state(ec2: Any, instance_id: str) -> str:
    return str(
        ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]
    )


def _granted_cleanup_actions() -> set[str]:
    from infra.capabilities.permissions import PolicyInputs, cleanup

    inputs = PolicyInputs(cluster_name=CLUSTER, cluster_arn="arn:aws:eks:r:1:cluster/c", node_role_arn="x")
    return {action for statement in cleanup(inputs) for action in statement.actions}


def test_this_clusters_instances_are_terminated_then_its_templates_and_profiles_deleted(
    clients: tuple[Any, Any], recorded: Recorded
) -> None:
    ec2, iam = clients
    iam.create_role(RoleName="NodeRole", AssumeRolePolicyDocument="{}")
    _template(ec2, "nodewright/demo/aaa", CLUSTER)
    _template(ec2, "nodewright/other/bbb", "other")
    own = _profile(iam, "demo_abc", OWN_PATH)
    _profile(iam, "other_abc", f"/nodewright/{REGION}/other/")
    _profile(iam, "operators", "/")
    node = _instance(ec2, _nodewright_tags(CLUSTER, "default-x"), own)
    elsewhere = _instance(ec2, _nodewright_tags("other", "default-y"))
    node_group = _instance(  # the cluster's own managed node group: not Nodewright's
        ec2, {f"kubernetes.io/cluster/{CLUSTER}": "owned", "eks:cluster-name": CLUSTER}
    )
    provider = CloudProvider(Settings(cluster_name=CLUSTER, region=REGION))

    removal = remove_cluster_resources(provider)

    assert removal.instances_terminated == [node]
    assert (removal.launch_templates_deleted, removal.instance_profiles_deleted) == (
        ["nodewright/demo/aaa"],
        ["demo_abc"],
    )
    assert (removal.instance_profiles_in_use, removal.instances_not_terminated) == ([], {})
    assert _state(ec2, node) in ("shutting-down", "terminated")
    assert _state(ec2, elsewhere) == _state(ec2, node_group) == "running"
    left = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert left == {"nodewright/other/bbb"}
    profiles = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    assert profiles == {"other_abc", "operators"}
    # the path the removal lists is the one profiles are created on (and the IAM policy is scoped to)
    assert LaunchTemplates(ec2, iam, CLUSTER, REGION).profile_path() == OWN_PATH
    # a retried Delete finds nothing
    again = remove_cluster_resources(provider)
    assert (again.instances_terminated, again.launch_templates_deleted, again.instance_profiles_deleted) == (
        [],
        [],
        [],
    )
    # every call the removal made is one its role holds
    assert recorded.actions, "nothing recorded"
    assert recorded.actions <= _granted_cleanup_actions(), recorded.actions - _granted_cleanup_actions()


def test_an_instance_ec2_refuses_to_terminate_is_reported_with_the_command_and_its_profile_kept(
    clients: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ec2, iam = clients
    iam.create_role(RoleName="NodeRole", AssumeRolePolicyDocument="{}")
    own = _profile(iam, "demo_abc", OWN_PATH)
    stuck = _instance(ec2, _nodewright_tags(CLUSTER, "default-x"), own)
    fine = _instance(ec2, _nodewright_tags(CLUSTER, "default-y"))
    provider = CloudProvider(Settings(cluster_name=CLUSTER, region=REGION))
    real = provider.ec2.terminate_instances

    def refusing(**kwargs: Any) -> Any:
        if stuck in kwargs["InstanceIds"]:
            error = {"Error": {"Code": "OperationNotPermitted", "Message": "termination protection is on"}}
            raise ClientError(error, "TerminateInstances")
        return real(**kwargs)

    monkeypatch.setattr(provider.ec2, "terminate_instances", refusing)
    removal = remove_cluster_resources(provider)

    assert removal.instances_terminated == [fine]
    assert removal.instances_not_terminated == {stuck: "OperationNotPermitted: termination protection is on"}
    assert removal.instance_profiles_in_use == ["demo_abc"]
    left = removal.left(Settings(cluster_name=CLUSTER, region=REGION))
    assert f"aws ec2 terminate-instances --instance-ids {stuck}" in left[0]
    assert f"--path-prefix {OWN_PATH}" in left[1]


def test_a_long_report_is_cut_to_fit_a_standard_parameter_saying_what_it_dropped() -> None:
    report = {
        "complete": False,
        "left": ["x" * 300],
        "instancesTerminated": [f"i-{n:017x}" for n in range(400)],
        "nodes": [f"ip-10-0-{n // 250}-{n % 250}.ec2.internal" for n in range(400)],
    }
    text = fit_report(report)
    assert len(text) <= MAX_REPORT_CHARS
    kept = json.loads(text)
    assert (kept["left"], kept["complete"]) == (report["left"], False)
    for key in ("instancesTerminated", "nodes"):
        *head, said = kept[key]
        assert head == report[key][: len(head)]
        assert said == f"… and {len(report[key]) - len(head)} more"
    assert json.loads(fit_report({"a": [1, 2]})) == {"a": [1, 2]}  # short ones untouched
    # nothing left to halve: cut, still within a standard parameter's 4 KB of bytes
    assert len(fit_report({"left": ["x" * 9000]}).encode()) == MAX_REPORT_CHARS


class _CloudFormation(http.server.BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], dict[str, Any]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((dict(self.headers), json.loads(body)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def response_url() -> Iterator[str]:
    _CloudFormation.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CloudFormation)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/presigned?{SIGNATURE}"
    server.shutdown()
    server.server_close()


def _event(request_type: str, url: str) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:111122223333:stack/Nodewright-demo/x",
        "RequestId": "req-1",
        "LogicalResourceId": "AutoscalerRemoval",
        "ResourceType": "AWS::CloudFormation::CustomResource",
    }


def test_cloudformation_gets_the_documented_response_shape(response_url: str) -> None:
    event = _event("Create", response_url)
    send_custom_resource_response(event, "SUCCESS", "ok", "removal-1", {"n": 1})
    ((headers, body),) = _CloudFormation.received
    assert body == {
        "Status": "SUCCESS",
        "Reason": "ok",
        "PhysicalResourceId": "removal-1",
        "StackId": event["StackId"],
        "RequestId": "req-1",
        "LogicalResourceId": "AutoscalerRemoval",
        "NoEcho": False,
        "Data": {"n": 1},
    }
    assert headers.get("Content-Type", "") == ""  # the presigned URL is signed without one


def test_the_handler_answers_every_request_and_with_the_cluster_gone_still_cleans_up_aws(
    clients: tuple[Any, Any],
    response_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
) -> None:
    ec2, _ = clients
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("REMOVAL_REPORT_PARAMETER", PARAMETER)
    monkeypatch.setenv("POWERTOOLS_LOGGER_LOG_EVENT", "true")  # an operator debugging: still never whole
    # The cluster was deleted before the stack: its kubeconfig (here) or endpoint leads nowhere.
    monkeypatch.setenv("NODEWRIGHT_KUBECONFIG", str(tmp_path / "gone"))
    _template(ec2, "nodewright/demo/aaa", CLUSTER)
    node = _instance(ec2, _nodewright_tags(CLUSTER, "default-x"))
    module = load_function("cleanup")
    context = LambdaContext(900, function_name="nodewright-cleanup")

    module.handler(_event("Create", response_url), context)
    assert ec2.describe_launch_templates()["LaunchTemplates"]  # nothing removed on create
    module.handler(_event("Delete", response_url), context)

    statuses = [(body["Status"], body["Reason"]) for _, body in _CloudFormation.received]
    assert [s for s, _ in statuses] == ["SUCCESS", "SUCCESS"]
    reason = statuses[1][1]
    assert "1 instance(s) terminated (1 without a node)" in reason, reason
    assert "the cluster could not be reached" in reason
    assert f"nodewright install-webhooks --cluster {CLUSTER} --uninstall" in reason
    assert f"Report: SSM parameter {PARAMETER} in {REGION}" in reason
    assert _state(ec2, node) in ("shutting-down", "terminated")
    assert not ec2.describe_launch_templates()["LaunchTemplates"]
    kept = json.loads(
        boto3.client("ssm", region_name=REGION).get_parameter(Name=PARAMETER)["Parameter"]["Value"]
    )
    assert kept["complete"] is False
    assert kept["instancesTerminated"] == [node]
    assert kept["stack"] == _event("Delete", "")["StackId"]
    logged = capsys.readouterr().out
    assert '"RequestType":"Delete"' in logged.replace(" ", "")
    for leak in ("presigned", SIGNATURE, "ResponseURL"):
        assert leak not in logged, leak


def test_a_removal_that_cannot_even_start_still_answers_success_with_the_way_out(
    response_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    module = load_function("cleanup")
    module.handler(_event("Delete", response_url), LambdaContext(900, function_name="nodewright-cleanup"))
    ((_, body),) = _CloudFormation.received
    assert body["Status"] == "SUCCESS"
    assert "removal not run (SettingsError: CLUSTER_NAME is not set" in body["Reason"]
    assert "docs/deploy.md" in body["Reason"]
