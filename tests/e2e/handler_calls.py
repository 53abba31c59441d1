"""What the sandbox e2e scenarios of capacity reservations and NodeOverlays do with the real handlers:
set the environment they run in, invoke the provisioner and the disruption function in-process, wait
for a condition (never a sleep), make a pod and find the node it runs on."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nodewright.cluster.resources import NODES, PODS

from sandbox.events import scheduled_event
from sandbox.lambdas import LambdaContext, load_function, provisioner_invocation


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


def wait_for(
    what: str, check: Callable[[], bool], timeout: float = 90.0, step: Callable[[], Any] | None = None
) -> None:
    """Poll ``check`` (running ``step`` between looks, e.g. a handler's pass) until it holds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        if step is not None:
            step()
        time.sleep(0.2)


def release() -> None:
    """Lift the per-invocation call deadline a handler left on the shared cluster client."""
    from nodewright.cluster import connect
    from nodewright.settings import Settings

    connect(Settings.from_env()).set_call_deadline(None)


def provision() -> dict[str, Any]:
    app = load_function("provisioner")
    with provisioner_invocation(8) as context:
        answer = app.handler(scheduled_event(), context)
    release()
    return answer


def disrupt() -> dict[str, Any]:
    from nodewright.disruption import flow

    app = load_function("disruption")
    answer = app.handler(scheduled_event(), LambdaContext(flow.SAFETY_MARGIN_SECONDS + 8))
    release()
    return answer


def node_of(kube: Any, name: str) -> dict[str, Any] | None:
    """The Node the Running pod ``default/name`` is bound to (None until it runs)."""
    found = next((p for p in kube.list(PODS, namespace="default") if p["metadata"]["name"] == name), None)
    if not found or found["status"].get("phase") != "Running":
        return None
    return next((n for n in kube.list(NODES) if n["metadata"]["name"] == found["spec"]["nodeName"]), None)
