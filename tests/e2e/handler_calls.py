"""What the sandbox e2e scenarios do with the real handlers: set the environment they run in, invoke
the provisioner and the disruption function in-process (and again when one ended out of time), make a
pod and find the node it runs on (the wait on a condition is tests/waiting.py's)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nodewright.cluster.resources import NODES, PODS

from sandbox.runtime.events import scheduled_event
from sandbox.runtime.lambdas import LambdaContext, load_function, provisioner_invocation


@contextlib.contextmanager
def handlers_against(sandbox: Any, **variables: str) -> Iterator[None]:
    """The environment the handlers run in against ``sandbox`` (its endpoints, a one-second poll, the
    e2e metrics namespace, and ``variables``, e.g. a stack setting), put back afterwards with the
    cluster connections the handlers opened dropped."""
    from nodewright.cluster import reset_connections

    patch = pytest.MonkeyPatch()
    environment = {
        **sandbox.env(),
        "POWERTOOLS_METRICS_NAMESPACE": "NodewrightE2E",
        "POLL_INTERVAL_SECONDS": "1",
        **variables,
    }
    for key, value in environment.items():
        patch.setenv(key, value)
    try:
        yield
    finally:
        reset_connections()
        patch.undo()


def pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    """A busybox pod ``default/name`` asking ``cpu``, labelled ``app: name``, with more ``spec``."""
    container = {
        "name": "c",
        "image": "public.ecr.aws/docker/library/busybox",
        "resources": {"requests": {"cpu": cpu}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [container], **spec},
    }


def release() -> None:
    """Lift the per-invocation call deadline a handler left on the shared cluster client."""
    from nodewright.cluster import connect
    from nodewright.settings import Settings

    connect(Settings.from_env()).set_call_deadline(None)


def provision(seconds: float = 8.0) -> dict[str, Any]:
    """One provisioner invocation whose loop lasts ``seconds`` (the invocation keeps a real timeout)."""
    app = load_function("provisioner")
    with provisioner_invocation(seconds) as context:
        answer = app.handler(scheduled_event(), context)
    release()
    return answer


def until_a_report(invoke: Callable[[], dict[str, Any]], attempts: int = 5) -> dict[str, Any]:
    """The first answer of ``invoke()`` (one handler invocation) that is a pass's report. One that ended
    on an outage report (``{"error": ...}``: on a loaded machine, out of time, its rate limiter having
    refused a call its deadline left no time for) decided nothing; as the next scheduled invocation
    would, the handler is invoked again, at most ``attempts`` times, then the test fails naming them."""
    outages: list[dict[str, Any]] = []
    while len(outages) < attempts:
        answer = invoke()
        if "error" not in answer:
            return answer
        outages.append(answer)
    pytest.fail(f"{attempts} invocations in a row ended on an outage report: {outages}")


def next_pass() -> None:
    """A short provisioner pass between looks, as its schedule runs it: a node registers tainted
    ``karpenter.sh/unregistered`` and only the provisioner's lifecycle pass lifts the taint, so on a
    loaded machine the invocation that launched a node may end before its pods can run."""
    provision(seconds=1)


def disrupt(seconds: float = 8.0) -> dict[str, Any]:
    """One scheduled disruption invocation whose loop may last ``seconds``."""
    from nodewright.disruption import flow

    app = load_function("disruption")
    answer = app.handler(scheduled_event(), LambdaContext(flow.SAFETY_MARGIN_SECONDS + seconds))
    release()
    return answer


def node_of(kube: Any, name: str) -> dict[str, Any] | None:
    """The Node the Running pod ``default/name`` is bound to (None until it runs)."""
    found = next((p for p in kube.list(PODS, namespace="default") if p["metadata"]["name"] == name), None)
    if not found or found["status"].get("phase") != "Running":
        return None
    return next((n for n in kube.list(NODES) if n["metadata"]["name"] == found["spec"]["nodeName"]), None)


def live_instances(sandbox: Any) -> list[dict[str, Any]]:
    """The sandbox cluster's pending and running instances, straight from EC2 (moto)."""
    ec2 = sandbox.aws_client("ec2")
    try:
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag:eks:eks-cluster-name", "Values": [sandbox.cluster_name]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )
        return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]
    finally:
        ec2.close()
