"""The emulator calls validating admission webhooks as kube-apiserver does: rules, CEL matchConditions,
failurePolicy, timeouts, TLS with the caBundle, a denial refusing the write."""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from nodewright.api import webhooks as manifests
from waiting import wait_for

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import JsonWebhookServer
from sandbox.apiserver.tls import make_serving_cert
from sandbox.simulators import Kube, ServiceAccounts

pytestmark = pytest.mark.timeout(60)


class Recorder(JsonWebhookServer):
    """An HTTPS webhook that records each AdmissionReview (``reviews``) and answers as told."""

    def __init__(self) -> None:
        self.allowed = True
        self.delay = 0.0
        self.held = threading.Event()  # set: answers wait until ``release`` is set
        self.release = threading.Event()
        super().__init__(self._answer, "/secret/admit")
        self.reviews = self.requests

    def _answer(self, review: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.delay)
        if self.held.is_set():
            self.release.wait(30)
        response: dict[str, Any] = {"uid": review["request"]["uid"], "allowed": self.allowed}
        if not self.allowed:
            response["status"] = {"code": 403, "reason": "Forbidden", "message": "no pods today"}
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    """The administrator's client, kube-controller-manager's ServiceAccounts beside the server."""
    with ApiServer() as server:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        admin = config.new_client_from_config(str(path))
        with ServiceAccounts(Kube(admin)):
            yield admin
        admin.close()


NAME = "status-hook"
HOOK = "unschedulable.example.com"


def status_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    """A webhook on pods/status UPDATE whose matchConditions pass only a pod's transition to
    ``PodScheduled=False/Unschedulable`` (Nodewright's wake-up before it moved to the scheduler's
    Events, kept by the benchmark that measures it): what these tests exercise the emulator's
    admission with, under a name of its own."""
    from bench.scheduler_stall import pods_status_configuration

    configuration = pods_status_configuration(url, ca_bundle)
    configuration["metadata"] = {"name": NAME}
    configuration["webhooks"][0]["name"] = HOOK
    return configuration


@pytest.fixture
def hook(api: client.ApiClient) -> Iterator[Recorder]:
    recorder = Recorder()
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_validating_webhook_configuration(status_configuration(recorder.url, recorder.ca_bundle))
    yield recorder
    admission.delete_validating_webhook_configuration(NAME)
    recorder.close()


def _configure(api: client.ApiClient, **changes: Any) -> None:
    admission = client.AdmissionregistrationV1Api(api)
    current = api.sanitize_for_serialization(admission.read_validating_webhook_configuration(NAME))
    current["webhooks"][0].update(changes)
    admission.replace_validating_webhook_configuration(NAME, current)


def _pending_pod(api: client.ApiClient) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    name = f"p-{uuid.uuid4().hex[:6]}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
    }
    return api.sanitize_for_serialization(core.create_namespaced_pod("default", pod))


def _set_condition(api: client.ApiClient, pod: dict[str, Any], reason: str, message: str = "") -> None:
    status = copy.deepcopy(pod.get("status") or {})
    status["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": reason, "message": message or reason}
    ]
    client.CoreV1Api(api).patch_namespaced_pod_status(pod["metadata"]["name"], "default", {"status": status})


def test_a_pod_becoming_unschedulable_calls_the_webhook_once_with_an_admission_review(
    api: client.ApiClient, hook: Recorder
) -> None:
    pod = _pending_pod(api)
    _set_condition(api, pod, "Unschedulable", "0/0 nodes are available")
    _set_condition(api, pod, "Unschedulable", "0/3 nodes are available")  # still unschedulable

    assert len(hook.reviews) == 1
    request = hook.reviews[0]["request"]
    assert hook.reviews[0]["apiVersion"] == "admission.k8s.io/v1"
    assert (request["operation"], request["subResource"], request["name"]) == (
        "UPDATE",
        "status",
        pod["metadata"]["name"],
    )
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert request["object"]["status"]["conditions"][0]["reason"] == "Unschedulable"


def test_writes_the_match_conditions_leave_out_never_leave_the_api_server(
    api: client.ApiClient, hook: Recorder
) -> None:
    pod = _pending_pod(api)  # a create: the rules name UPDATE only
    _set_condition(api, pod, "SchedulerError")  # PodScheduled False, but not Unschedulable
    client.CoreV1Api(api).patch_namespaced_pod(
        pod["metadata"]["name"], "default", {"metadata": {"labels": {"a": "b"}}}
    )

    assert hook.reviews == []


def test_a_denial_refuses_the_write_with_the_webhooks_code_and_message(
    api: client.ApiClient, hook: Recorder
) -> None:
    _configure(api, failurePolicy="Fail")
    hook.allowed = False
    pod = _pending_pod(api)

    with pytest.raises(ApiException) as refused:
        _set_condition(api, pod, "Unschedulable")

    assert refused.value.status == 403
    body = json.loads(refused.value.body)
    assert body["message"] == f'admission webhook "{HOOK}" denied the request: no pods today'
    stored = client.CoreV1Api(api).read_namespaced_pod_status(pod["metadata"]["name"], "default")
    assert not stored.status.conditions


def test_an_unreachable_webhook_is_ignored_or_refuses_the_write_as_its_failure_policy_says(
    api: client.ApiClient, hook: Recorder
) -> None:
    hook.close()  # nothing listens there any more
    pod = _pending_pod(api)
    _set_condition(api, pod, "Unschedulable")  # failurePolicy Ignore: written anyway
    stored = client.CoreV1Api(api).read_namespaced_pod_status(pod["metadata"]["name"], "default")
    assert stored.status.conditions[0].reason == "Unschedulable"

    _configure(api, failurePolicy="Fail")
    other = _pending_pod(api)
    with pytest.raises(ApiException) as refused:
        _set_condition(api, other, "Unschedulable")
    assert refused.value.status == 500
    assert f'failed calling webhook "{HOOK}"' in json.loads(refused.value.body)["message"]


def test_a_webhook_slower_than_its_timeout_counts_as_failed(api: client.ApiClient, hook: Recorder) -> None:
    hook.delay = 8.0
    _configure(api, timeoutSeconds=1, failurePolicy="Ignore")
    pod = _pending_pod(api)

    began = time.monotonic()
    _set_condition(api, pod, "Unschedulable")

    assert len(hook.reviews) == 1  # called, and not waited for: the write went on after 1 s
    assert 1.0 <= time.monotonic() - began < hook.delay
    stored = client.CoreV1Api(api).read_namespaced_pod_status(pod["metadata"]["name"], "default")
    assert stored.status.conditions[0].reason == "Unschedulable"


def test_a_certificate_the_ca_bundle_does_not_sign_is_a_failed_call(
    api: client.ApiClient, hook: Recorder
) -> None:
    _configure(api, clientConfig={"url": hook.url, "caBundle": make_serving_cert("127.0.0.1").ca_data})
    pod = _pending_pod(api)
    _set_condition(api, pod, "Unschedulable")  # Ignore: written, and the webhook never saw it
    assert hook.reviews == []


def test_a_webhook_that_has_not_answered_holds_up_only_its_own_write(
    api: client.ApiClient, hook: Recorder
) -> None:
    """kube-apiserver waits for a webhook with nothing but the request: every other client's
    requests go on (the emulator called webhooks under its one store lock: a slow URL stalled
    everyone, which a real server never does)."""
    _configure(api, timeoutSeconds=20)
    pod = _pending_pod(api)
    hook.held.set()
    waiting = threading.Thread(target=_set_condition, args=(api, pod, "Unschedulable"), daemon=True)
    waiting.start()
    wait_for("the webhook to be called", lambda: len(hook.reviews) == 1, timeout=20, every=0.01)

    other = _pending_pod(api)  # a create, a read and a write of another object, meanwhile
    core = client.CoreV1Api(api)
    core.read_namespaced_pod(pod["metadata"]["name"], "default")
    core.patch_namespaced_pod(other["metadata"]["name"], "default", {"metadata": {"labels": {"a": "b"}}})

    assert waiting.is_alive(), "the other requests waited for the webhook of an unrelated write"
    assert not core.read_namespaced_pod_status(pod["metadata"]["name"], "default").status.conditions
    hook.release.set()
    waiting.join(30)
    stored = core.read_namespaced_pod_status(pod["metadata"]["name"], "default")
    assert stored.status.conditions[0].reason == "Unschedulable"


def test_a_write_that_lands_while_the_webhook_is_called_is_kept_and_the_webhook_asked_again(
    api: client.ApiClient, hook: Recorder
) -> None:
    """As GuaranteedUpdate retries on an etcd precondition failure: the held write is rebuilt on
    what is stored now, and its webhooks see the rebuilt object."""
    _configure(api, timeoutSeconds=20)
    pod = _pending_pod(api)
    name = pod["metadata"]["name"]
    hook.held.set()
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    patch = {"status": {"conditions": [condition]}}
    core = client.CoreV1Api(api)
    waiting = threading.Thread(
        target=core.patch_namespaced_pod_status, args=(name, "default", patch), daemon=True
    )
    waiting.start()
    wait_for("the webhook to be called", lambda: len(hook.reviews) == 1, timeout=20, every=0.01)
    core.patch_namespaced_pod(name, "default", {"metadata": {"labels": {"meanwhile": "yes"}}})
    hook.held.clear()
    hook.release.set()
    waiting.join(30)

    stored = core.read_namespaced_pod(name, "default")
    assert stored.metadata.labels == {"meanwhile": "yes"}
    assert stored.status.conditions[0].reason == "Unschedulable"
    assert len(hook.reviews) == 2
    assert hook.reviews[1]["request"]["object"]["metadata"]["labels"] == {"meanwhile": "yes"}


def test_the_webhook_is_told_its_deadline_in_the_query(api: client.ApiClient, hook: Recorder) -> None:
    _configure(api, timeoutSeconds=3)
    _set_condition(api, _pending_pod(api), "Unschedulable")
    assert hook.paths == ["/secret/admit?timeout=3s"]


@pytest.fixture
def wakeup(api: client.ApiClient) -> Iterator[Recorder]:
    """Nodewright's wake-up configuration, as install-webhooks renders it, pointing at a recorder."""
    recorder = Recorder()
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_validating_webhook_configuration(
        manifests.wakeup_configuration(recorder.url, recorder.ca_bundle)
    )
    yield recorder
    admission.delete_validating_webhook_configuration(manifests.CONFIGURATION_NAME)
    recorder.close()


def _event(api: client.ApiClient, group_version: str, body: dict[str, Any]) -> dict[str, Any]:
    path = f"/apis/{group_version}" if "/" in group_version else f"/api/{group_version}"
    body = {"metadata": {"name": f"e.{uuid.uuid4().hex[:8]}", "namespace": "default"}, **body}
    answer = api.call_api(
        *api.param_serialize(
            method="POST",
            resource_path=f"{path}/namespaces/default/events",
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
    )
    data = answer.read()
    assert answer.status == 201, data
    return json.loads(data)


SCHEDULER_EVENT = {
    "eventTime": "2026-03-01T12:00:00.000000Z",
    "reportingController": "default-scheduler",
    "reportingInstance": "default-scheduler-host",
    "action": "Scheduling",
    "reason": "FailedScheduling",
    "regarding": {"kind": "Pod", "namespace": "default", "name": "web", "apiVersion": "v1"},
    "note": "0/3 nodes are available: 3 Insufficient cpu.",
    "type": "Warning",
}


def test_the_wakeup_configuration_calls_out_for_a_schedulers_failed_scheduling_event(
    api: client.ApiClient, wakeup: Recorder
) -> None:
    _event(api, "events.k8s.io/v1", SCHEDULER_EVENT)  # kube-scheduler v1.30+
    _event(  # the events library's core/v1 fallback, or another scheduler
        api,
        "v1",
        {
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
            "reason": "FailedScheduling",
            "message": "0/3 nodes are available",
            "source": {"component": "my-scheduler"},
        },
    )

    assert len(wakeup.reviews) == 2
    first, second = (r["request"] for r in wakeup.reviews)
    assert (first["operation"], first["resource"]["group"]) == ("CREATE", "events.k8s.io")
    assert first["object"]["regarding"]["name"] == "web"
    assert (second["operation"], second["resource"]["group"]) == ("CREATE", "")


def test_the_wakeup_configuration_leaves_every_other_write_in_the_api_server(
    api: client.ApiClient, wakeup: Recorder
) -> None:
    _event(api, "events.k8s.io/v1", {**SCHEDULER_EVENT, "reason": "Scheduled", "action": "Binding"})
    _event(api, "events.k8s.io/v1", {**SCHEDULER_EVENT, "regarding": {"kind": "Node", "name": "n"}})
    _event(  # the provisioner's own
        api,
        "v1",
        {
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"},
            "reason": "FailedScheduling",
            "message": "Failed to schedule pod, incompatible with nodepool",
            "source": {"component": "nodewright"},
            "reportingComponent": "nodewright",
        },
    )
    assert wakeup.reviews == []
    name = _event(api, "events.k8s.io/v1", SCHEDULER_EVENT)["metadata"]["name"]
    assert len(wakeup.reviews) == 1
    wakeup.reviews.clear()
    series = {"series": {"count": 2, "lastObservedTime": "2026-03-01T12:00:05.000000Z"}}
    answer = api.call_api(  # the events library's repeat of an Event: a series PATCH
        *api.param_serialize(
            method="PATCH",
            resource_path=f"/apis/events.k8s.io/v1/namespaces/default/events/{name}",
            header_params={"Content-Type": "application/strategic-merge-patch+json"},
            body=series,
            auth_settings=["BearerToken"],
        )
    )
    assert answer.status == 200, answer.read()
    pod = _pending_pod(api)
    _set_condition(api, pod, "Unschedulable", "0/0 nodes are available")  # the old signal

    assert wakeup.reviews == []


def test_a_match_condition_that_does_not_compile_refuses_the_configuration(api: client.ApiClient) -> None:
    """kube-apiserver compiles matchConditions when the configuration is written (422 otherwise)."""
    broken = status_configuration("https://127.0.0.1:1/x", "")
    broken["metadata"]["name"] = "broken"
    broken["webhooks"][0]["matchConditions"] = [{"name": "bad", "expression": "object.reason == "}]
    with pytest.raises(ApiException) as refused:
        client.AdmissionregistrationV1Api(api).create_validating_webhook_configuration(broken)
    assert refused.value.status == 422
    assert "webhooks[0].matchConditions[0].expression" in refused.value.body
