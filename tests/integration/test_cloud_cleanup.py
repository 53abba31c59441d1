"""The removal at ``cdk destroy``: this cluster's launch templates and unused instance profiles go,
anything a live instance uses or another cluster owns stays, and CloudFormation always gets an answer."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from nodewright.cloud import aws
from nodewright.cloud.cleanup import remove_cluster_resources, send_custom_resource_response
from nodewright.cloud.launchtemplates import CLUSTER_TAG, LaunchTemplates
from nodewright.settings import Settings

from sandbox.lambdas import LambdaContext, load_function

REGION = "us-east-1"
CLUSTER = "demo"


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        aws.reset_clients()
        yield boto3.client("ec2", region_name=REGION), boto3.client("iam", region_name=REGION)
        aws.reset_clients()


def _template(ec2: Any, name: str, cluster: str) -> None:
    tags = [
        {"Key": CLUSTER_TAG, "Value": cluster},
        {"Key": f"kubernetes.io/cluster/{cluster}", "Value": "owned"},
    ]
    ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"ImageId": "ami-12345678"},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}],
    )


def _profile(iam: Any, name: str, path: str) -> str:
    arn = iam.create_instance_profile(InstanceProfileName=name, Path=path)["InstanceProfile"]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName="NodeRole")
    return arn


def test_removal_deletes_this_clusters_templates_and_unused_profiles_only(clients: tuple[Any, Any]) -> None:
    ec2, iam = clients
    iam.create_role(RoleName="NodeRole", AssumeRolePolicyDocument="{}")
    _template(ec2, "nodewright/demo/aaa", CLUSTER)
    _template(ec2, "nodewright/other/bbb", "other")
    own_path = f"/nodewright/{REGION}/{CLUSTER}/"
    _profile(iam, "demo_unused", own_path)
    in_use = _profile(iam, "demo_in_use", own_path)
    _profile(iam, "other_profile", f"/nodewright/{REGION}/other/")
    ec2.run_instances(
        ImageId="ami-12345678",
        MinCount=1,
        MaxCount=1,
        IamInstanceProfile={"Arn": in_use},
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "eks:eks-cluster-name", "Value": CLUSTER}]}
        ],
    )

    report = remove_cluster_resources(Settings(cluster_name=CLUSTER, region=REGION))

    assert report.launch_templates_deleted == ["nodewright/demo/aaa"]
    assert report.instance_profiles_deleted == ["demo_unused"]
    assert report.instance_profiles_in_use == ["demo_in_use"]
    left = {t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert left == {"nodewright/other/bbb"}
    profiles = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    assert profiles == {"demo_in_use", "other_profile"}
    assert "terminate those instances" in report.summary()
    # the path the removal lists is the one profiles are created on (and the IAM policy is scoped to)
    assert LaunchTemplates(ec2, iam, CLUSTER, REGION).profile_path() == own_path


class _ResponseCatcher(http.server.BaseHTTPRequestHandler):
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
    _ResponseCatcher.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ResponseCatcher)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/presigned?X-Amz-Signature=abc"
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
    ((headers, body),) = _ResponseCatcher.received
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


def test_the_handler_removes_on_delete_and_never_fails_the_stack(
    clients: tuple[Any, Any], response_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ec2, _ = clients
    monkeypatch.setenv("CLUSTER_NAME", CLUSTER)
    monkeypatch.setenv("AWS_REGION", REGION)
    _template(ec2, "nodewright/demo/aaa", CLUSTER)
    module = load_function("cleanup")
    context = LambdaContext(60, function_name="nodewright-cleanup")

    module.handler(_event("Create", response_url), context)
    assert ec2.describe_launch_templates()["LaunchTemplates"]  # nothing removed on create
    module.handler(_event("Delete", response_url), context)
    assert not ec2.describe_launch_templates()["LaunchTemplates"]

    def broken(settings: Any) -> Any:
        raise RuntimeError("AccessDenied")

    monkeypatch.setattr(module, "remove_cluster_resources", broken)
    module.handler(_event("Delete", response_url), context)
    statuses = [(body["Status"], body["Reason"]) for _, body in _ResponseCatcher.received]
    assert [s for s, _ in statuses] == ["SUCCESS", "SUCCESS", "SUCCESS"]
    assert "deleted 1 launch template(s)" in statuses[1][1]
    assert "removal incomplete (RuntimeError: AccessDenied)" in statuses[2][1]
    assert "docs/deploy.md" in statuses[2][1]
