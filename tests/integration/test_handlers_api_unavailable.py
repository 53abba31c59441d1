"""With the API server down for a whole invocation, a scheduled function says so in one log line and
one metric (an alarm watches it) and ends; it neither tracebacks per object nor gets retried into
the same outage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
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
