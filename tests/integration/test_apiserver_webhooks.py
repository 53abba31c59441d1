"""The emulator calls validating admission webhooks as kube-apiserver does: rules, CEL matchConditions,
failurePolicy, timeouts, TLS with the caBundle, a denial refusing the write."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from nodewright.api import webhooks as manifests

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
        super().__init__(self._answer, "/secret/admit")
        self.reviews = self.requests

    def _answer(self, review: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.delay)
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


@pytest.fixture
def hook(api: client.ApiClient) -> Iterator[Recorder]:
    recorder = Recorder()
    admission = client.AdmissionregistrationV1Api(api)
    admission.create_validating_webhook_configuration(
        manifests.wakeup_configuration(recorder.url, recorder.ca_bundle)
    )
    yield recorder
    admission.delete_validating_webhook_configuration(manifests.CONFIGURATION_NAME)
    recorder.close()


def _configure(api: client.ApiClient, **changes: Any) -> None:
    admission = client.AdmissionregistrationV1Api(api)
    current = api.sanitize_for_serialization(
        admission.read_validating_webhook_configuration(manifests.CONFIGURATION_NAME)
    )
    current["webhooks"][0].update(changes)
    admission.replace_validating_webhook_configuration(manifests.CONFIGURATION_NAME, current)


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
    assert (
        body["message"] == f'admission webhook "{manifests.WEBHOOK_NAME}" denied the request: no pods today'
    )
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
    assert f'failed calling webhook "{manifests.WEBHOOK_NAME}"' in json.loads(refused.value.body)["message"]


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
