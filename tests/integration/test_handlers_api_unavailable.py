"""With the API server or AWS unreachable for a whole invocation, every function says so in one log
line and one metric (an alarm watches each) and ends; it neither tracebacks per object nor gets
retried into the same outage. The interruption queue returns only the messages the outage stopped
(SQS redelivery is their retry) and still acknowledges the malformed ones."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, NoCredentialsError
from fakes import FakeClock, FakeCloudProvider, FakeCluster, FakeLambdaContext
from nodewright.cluster import ApiUnavailable, ClientThrottled
from nodewright.context import ContainerContext, Context
from nodewright.settings import Settings

from sandbox.runtime.lambdas import load_function


class DownCluster(FakeCluster):
    """Every call fails as a black-holed API server's would."""

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name.startswith(("list_", "find_", "patch_", "create_", "delete_", "writer_lease")):

            def unreachable(*_: Any, **__: Any) -> Any:
                raise ApiUnavailable(f"{name}: API server unreachable (injected)")

            return unreachable
        return attribute


SCHEDULED = {
    "version": "0",
    "id": "e-1",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "111122223333",
    "time": "2026-12-03T12:00:00Z",
    "region": "us-west-2",
    "resources": [],
    "detail": {},
}


def wired(function: str, cluster: FakeCluster, cloud: FakeCloudProvider, clock: FakeClock) -> Any:
    """The function's handler module with its container on fakes instead of a real cluster and AWS."""
    module = load_function(function)
    ctx = Context(
        Settings(cluster_name="c", region="us-west-2"),
        cluster,
        cloud,
        None,
        module.log,
        module.emf,
        clock=clock,
    )
    module.container = ContainerContext(logger=module.log, metrics=module.emf, context=ctx)
    # Powertools Metrics keeps one metric set per process: a test earlier in this worker may have
    # left metrics unflushed, which this invocation would publish with its own.
    module.emf.clear_metrics()
    return module


@pytest.mark.parametrize("function", ["provisioner", "disruption"])
def test_a_scheduled_function_with_the_api_server_down_reports_once_and_ends(
    function: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()
    cluster = DownCluster(clock)
    module = wired(function, cluster, FakeCloudProvider(clock), clock)

    answer = module.handler(SCHEDULED, FakeLambdaContext(f"nodewright-{function}", remaining_ms=20_000))

    assert answer["error"] == "ApiServerUnavailable"
    out = capsys.readouterr().out
    assert out.count("Kubernetes API server unavailable") == 1
    assert "Traceback" not in out
    assert '"ApiServerUnavailable":[1.0]' in out
    assert cluster.call_deadline is not None, "the invocation bounded its calls"


class OutOfTimeCluster(FakeCluster):
    """Every call is refused by the client's own rate limiter: the invocation's deadline leaves no
    time for it (the API server itself would answer)."""

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name.startswith(("list_", "find_", "patch_", "create_", "delete_", "writer_lease")):

            def refused(*_: Any, **__: Any) -> Any:
                raise ClientThrottled(
                    f"{name}: not started, the client's request rate limit (50/s, burst 100) would hold "
                    "it 0.0s, past the invocation's deadline in 0.0s"
                )

            return refused
        return attribute


@pytest.mark.parametrize("function", ["provisioner", "disruption"])
def test_an_invocation_whose_time_ran_out_says_so_and_not_that_the_api_server_is_unreachable(
    function: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ApiServerUnreachable alarm sends an operator to endpoint access and access entries; an
    invocation that only ran out of time has its own line, metric and alarm."""
    clock = FakeClock()
    module = wired(function, OutOfTimeCluster(clock), FakeCloudProvider(clock), clock)

    answer = module.handler(SCHEDULED, FakeLambdaContext(f"nodewright-{function}", remaining_ms=20_000))

    assert answer["error"] == "OutOfTime"
    out = capsys.readouterr().out
    assert out.count("the invocation's time ran out before its work") == 1
    assert '"InvocationsOutOfTime":[1.0]' in out
    assert "ApiServerUnavailable" not in out
    assert "Kubernetes API server unavailable" not in out
    assert "Traceback" not in out


class UnreachableCloud(FakeCloudProvider):
    """Every AWS call fails as with the endpoint down or no credentials at all."""

    error: Exception = Exception("set per test")

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if callable(attribute) and not name.startswith("_"):

            def unreachable(*_: Any, **__: Any) -> Any:
                raise RuntimeError(f"{name} failed") from type(self).error

            return unreachable
        return attribute


@pytest.mark.parametrize(
    "error",
    [
        EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com/"),
        NoCredentialsError(),
    ],
    ids=["endpoint-down", "no-credentials"],
)
def test_the_provisioner_with_aws_unreachable_reports_once_and_ends(
    error: Exception, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodewright.state import nodepools

    monkeypatch.setattr(nodepools, "validation_errors", lambda doc: [])  # the pool reaches the cloud
    clock = FakeClock()
    cluster = FakeCluster(clock)
    cluster.add("NodePool", {"metadata": {"name": "default"}, "spec": POOL_SPEC})
    cluster.add("EC2NodeClass", {"metadata": {"name": "default"}, "spec": {"role": "r"}})
    cluster.add("Pod", PENDING_POD)
    UnreachableCloud.error = error
    module = wired("provisioner", cluster, UnreachableCloud(clock), clock)

    answer = module.handler(SCHEDULED, FakeLambdaContext("nodewright-provisioner", remaining_ms=20_000))

    assert answer["error"] == "AwsUnavailable"
    out = capsys.readouterr().out
    assert out.count("AWS unreachable; nothing more this invocation") == 1
    assert "Traceback" not in out
    assert '"AwsUnavailable":[1.0]' in out


def test_an_aws_answer_is_not_unreachable_and_still_raises() -> None:
    from botocore.exceptions import ClientError
    from nodewright.cloud.errors import aws_unreachable

    throttled = ClientError(
        {"Error": {"Code": "RequestLimitExceeded", "Message": "slow down"}}, "CreateFleet"
    )
    assert not aws_unreachable(throttled)
    assert not aws_unreachable(ValueError("a bug"))
    wrapped = RuntimeError("a launch failed")
    wrapped.__cause__ = NoCredentialsError()
    assert aws_unreachable(wrapped)


POOL_SPEC: dict[str, Any] = {
    "template": {
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        }
    }
}
PENDING_POD: dict[str, Any] = {
    "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}]},
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    },
}


INSTANCE = "i-0f1e2d3c4b5a69788"


def spot_warning() -> dict[str, Any]:
    """The documented spot interruption warning for an instance of this cluster, sent just now."""
    from datetime import UTC, datetime

    return {
        "version": "0",
        "id": "9b1f6c1e-2d4a-4f7e-8c3b-5a6d7e8f9a01",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "111122223333",
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": "us-west-2",
        "resources": [f"arn:aws:ec2:us-west-2:111122223333:instance/{INSTANCE}"],
        "detail": {"instance-id": INSTANCE, "instance-action": "terminate"},
    }


def sqs_record(message_id: str, body: str) -> dict[str, Any]:
    import time

    return {
        "messageId": message_id,
        "receiptHandle": f"handle-{message_id}",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000))},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-west-2:111122223333:nodewright-c-interruption",
        "awsRegion": "us-west-2",
    }


def interruption_function(name: str, cluster: FakeCluster, cloud: FakeCloudProvider, clock: FakeClock) -> Any:
    """The function's module wired to fakes: a node of this cluster whose instance gets the warning."""
    from nodewright.interruption.processing import InterruptionProcessor

    cluster.add(
        "NodeClaim",
        {
            "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
            "spec": {"nodeClassRef": {"name": "default"}},
            "status": {"providerID": f"aws:///us-west-2a/{INSTANCE}", "nodeName": "node-a"},
        },
    )
    cluster.add(
        "Node", {"metadata": {"name": "node-a"}, "spec": {"providerID": f"aws:///us-west-2a/{INSTANCE}"}}
    )
    module = wired(name, cluster, cloud, clock)
    module.processor = InterruptionProcessor(module.container)
    return module


@pytest.mark.parametrize("outage", ["api-server-down", "aws-endpoint-down"])
def test_the_interruption_queue_with_an_outage_returns_only_the_affected_messages_and_says_so_once(
    outage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = FakeClock()
    if outage == "api-server-down":
        cluster: FakeCluster = DownCluster(clock)
        cloud: FakeCloudProvider = FakeCloudProvider(clock)
    else:
        cluster, cloud = FakeCluster(clock), UnreachableCloud(clock)
        UnreachableCloud.error = EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com/")
    module = interruption_function("interruption", cluster, cloud, clock)
    batch = {"Records": [sqs_record("warning", json.dumps(spot_warning())), sqs_record("junk", "{not json")]}

    answer = module.handler(batch, FakeLambdaContext("nodewright-interruption", remaining_ms=20_000))

    if outage == "api-server-down":
        assert answer == {"batchItemFailures": [{"itemIdentifier": "warning"}]}, (
            "junk acknowledged, warning retried"
        )
    else:
        # The cordon is recorded before AWS is needed (the batch's replacement and the instance's
        # termination come after every message): a redelivery would only replay it, so the warning
        # is acknowledged; the provisioner plans the displaced pods and resumes the termination.
        assert answer == {"batchItemFailures": []}, "warning handled up to AWS, junk acknowledged"
        node = cluster.find_node("node-a")
        assert node is not None
        assert node["spec"].get("unschedulable") is True, "node cordoned"
    out = capsys.readouterr().out
    line, metric = (
        ("Kubernetes API server unavailable", "ApiServerUnavailable")
        if outage == "api-server-down"
        else ("AWS unreachable; nothing more this invocation", "AwsUnavailable")
    )
    assert out.count(line) == 1
    assert f'"{metric}":[1.0]' in out
    assert "Traceback" not in out


def test_the_direct_spot_path_with_aws_unreachable_reports_once_and_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    UnreachableCloud.error = NoCredentialsError()
    module = interruption_function("spot_events", FakeCluster(clock), UnreachableCloud(clock), clock)

    answer = module.handler(spot_warning(), FakeLambdaContext("nodewright-spot-events", remaining_ms=20_000))

    assert answer["error"] == "AwsUnavailable"
    out = capsys.readouterr().out
    assert out.count("AWS unreachable; nothing more this invocation") == 1
    assert "Traceback" not in out
