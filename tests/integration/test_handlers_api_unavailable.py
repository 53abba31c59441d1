"""With the API server down for a whole invocation, a scheduled function says so in one log line and
one metric (an alarm watches it) and ends; it neither tracebacks per object nor gets retried into
the same outage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError, NoCredentialsError
from fakes import FakeClock, FakeCloudProvider, FakeCluster
from nodewright.cluster import ApiUnavailable
from nodewright.context import ContainerContext, Context
from nodewright.settings import Settings

from sandbox.lambdas import load_function


@dataclass
class LambdaContext:
    function_name: str = "nodewright-provisioner"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:111122223333:function:nodewright-provisioner"
    aws_request_id: str = "request-1"

    def get_remaining_time_in_millis(self) -> int:
        return 20_000


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


@pytest.mark.parametrize("function", ["provisioner", "disruption"])
def test_a_scheduled_function_with_the_api_server_down_reports_once_and_ends(
    function: str, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_function(function)
    clock = FakeClock()
    cluster = DownCluster(clock)
    ctx = Context(
        Settings(cluster_name="c", region="us-west-2"),
        cluster,
        FakeCloudProvider(clock),
        None,
        module.log,
        module.emf,
        clock=clock,
    )
    module.container = ContainerContext(logger=module.log, metrics=module.emf, context=ctx)
    # Powertools Metrics keeps one metric set per process: a test earlier in this worker may have
    # left metrics unflushed, which this invocation would publish with its own.
    module.emf.clear_metrics()

    answer = module.handler(SCHEDULED, LambdaContext(function_name=f"nodewright-{function}"))

    assert answer["error"] == "ApiServerUnavailable"
    out = capsys.readouterr().out
    assert out.count("Kubernetes API server unavailable") == 1
    assert "Traceback" not in out
    assert '"ApiServerUnavailable":[1.0]' in out
    assert cluster.call_deadline is not None, "the invocation bounded its calls"


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
    module = load_function("provisioner")
    clock = FakeClock()
    cluster = FakeCluster(clock)
    cluster.add("NodePool", {"metadata": {"name": "default"}, "spec": POOL_SPEC})
    cluster.add("EC2NodeClass", {"metadata": {"name": "default"}, "spec": {"role": "r"}})
    cluster.add("Pod", PENDING_POD)
    cloud = UnreachableCloud(clock)
    UnreachableCloud.error = error
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
    module.emf.clear_metrics()

    answer = module.handler(SCHEDULED, LambdaContext())

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
