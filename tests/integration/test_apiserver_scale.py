"""The scale subresource as kube-apiserver serves it: a custom resource's (apiextensions-apiserver's
``customresource.ScaleREST``), checked with the project's NodePool CRD and the real kubectl, and the
workloads' (``pkg/registry/apps/{deployment,replicaset,statefulset}/storage``, ``ScaleREST``).

Facts from kube-apiserver's ``registry/customresource/etcd.go``: the Scale reads ``spec.replicas``
from ``specReplicasPath``, ``status.replicas`` from ``statusReplicasPath`` (0 when absent) and
``status.selector`` from ``labelSelectorPath``; a GET of an object with no value at
``specReplicasPath`` is a 500 "the spec replicas field ... does not exist"; an update writes the
replicas into the custom resource and stores it through the custom resource's own strategy, so its
schema, CEL rules (transition rules with ``oldSelf`` too) and generation apply as to any update.

Facts from the workloads' ``ScaleREST.Update``: the Scale is turned into an update of the parent
through the parent's store (``scaleUpdatedObjectInfo.UpdatedObject``): ``ValidateScale`` first (a
negative ``spec.replicas`` is a 422 on ``Scale.autoscaling``), a UID that is not the parent's is a
409 on ``deployments/scale``, the Scale's ``metadata.resourceVersion`` becomes the parent's
precondition (a stale one, in a PUT or a PATCH, is a 409), then the parent's strategy and
validation. Admission sees the Scale (``toScaleUpdateValidation``): the webhooks are asked about
``autoscaling/v1 Scale`` on ``deployments`` with ``subResource: scale``. The field manager runs on
the Scale and ``managedfields.ScaleHandler`` moves ownership of the replicas to the parent: the
scaler gets an entry with ``subresource: scale`` (no ``time``: ``ToParent`` takes the parent's, which
a new entry has not) and whoever owned the replicas before loses them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import JsonWebhookServer, kubectl
from sandbox.shared_data import REPO_ROOT
from sandbox.simulators import Kube

NODEPOOLS = ("karpenter.sh", "v1", "nodepools")


def _nodepool(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [],
                }
            },
            **spec,
        },
    }


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with ApiServer() as server:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        result = kubectl(path, "apply", "-f", str(REPO_ROOT / "crds"))
        assert result.returncode == 0, result.stderr
        yield path


@pytest.fixture(scope="module")
def custom(kubeconfig: Path) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(config.new_client_from_config(str(kubeconfig)))


def _create(custom: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    group, version, plural = NODEPOOLS
    return custom.create_cluster_custom_object(group, version, plural, body)  # type: ignore[no-any-return]


def _get(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    group, version, plural = NODEPOOLS
    return custom.get_cluster_custom_object(group, version, plural, name)  # type: ignore[no-any-return]


def test_kubectl_scale_writes_spec_replicas_and_bumps_the_generation(
    kubeconfig: Path, custom: client.CustomObjectsApi
) -> None:
    created = _create(custom, _nodepool("static-a", replicas=2))
    result = kubectl(kubeconfig, "scale", "nodepool", "static-a", "--replicas=5")
    assert result.returncode == 0, result.stderr
    assert "nodepool.karpenter.sh/static-a scaled" in result.stdout
    stored = _get(custom, "static-a")
    assert stored["spec"]["replicas"] == 5
    assert stored["metadata"]["generation"] == created["metadata"]["generation"] + 1


def test_the_scale_reads_status_replicas_from_status_nodes(custom: client.CustomObjectsApi) -> None:
    _create(custom, _nodepool("static-b", replicas=3))
    group, version, plural = NODEPOOLS
    custom.patch_cluster_custom_object_status(group, version, plural, "static-b", {"status": {"nodes": 2}})
    scale = custom.get_cluster_custom_object_scale(group, version, plural, "static-b")
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["kind"] == "Scale"
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2}  # no labelSelectorPath: no selector
    assert scale["metadata"]["name"] == "static-b"
    assert "namespace" not in scale["metadata"]


def test_the_scale_of_a_nodepool_without_replicas_is_an_internal_error(
    custom: client.CustomObjectsApi,
) -> None:
    _create(custom, _nodepool("dynamic-a"))
    group, version, plural = NODEPOOLS
    with pytest.raises(ApiException) as raised:
        custom.get_cluster_custom_object_scale(group, version, plural, "dynamic-a")
    assert raised.value.status == 500
    body = json.loads(raised.value.body)
    assert body["reason"] == "InternalError"
    assert 'the spec replicas field ".spec.replicas" does not exist' in body["message"]


def test_scaling_a_dynamic_nodepool_is_refused_by_its_transition_rule(
    kubeconfig: Path, custom: client.CustomObjectsApi
) -> None:
    _create(custom, _nodepool("dynamic-b"))
    result = kubectl(kubeconfig, "scale", "nodepool", "dynamic-b", "--replicas=3")
    assert result.returncode != 0
    assert "Cannot transition NodePool between static (replicas set) and dynamic" in result.stderr
    assert "replicas" not in _get(custom, "dynamic-b")["spec"]


def test_a_negative_scale_is_refused_by_the_custom_resource_schema(
    kubeconfig: Path, custom: client.CustomObjectsApi
) -> None:
    _create(custom, _nodepool("static-c", replicas=1))
    group, version, plural = NODEPOOLS
    with pytest.raises(ApiException) as raised:
        custom.patch_cluster_custom_object_scale(
            group, version, plural, "static-c", {"spec": {"replicas": -1}}
        )
    assert raised.value.status == 422
    body = json.loads(raised.value.body)
    assert body["details"]["kind"] == "NodePool"
    assert "spec.replicas" in body["message"]
    assert "greater than or equal to 0" in body["message"]
    assert _get(custom, "static-c")["spec"]["replicas"] == 1


def test_a_stale_resource_version_on_the_scale_is_a_conflict(custom: client.CustomObjectsApi) -> None:
    created = _create(custom, _nodepool("static-d", replicas=1))
    group, version, plural = NODEPOOLS
    custom.patch_cluster_custom_object(
        group, version, plural, "static-d", {"metadata": {"labels": {"a": "b"}}}
    )
    stale = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "static-d", "resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"replicas": 4},
    }
    with pytest.raises(ApiException) as raised:
        custom.replace_cluster_custom_object_scale(group, version, plural, "static-d", stale)
    assert raised.value.status == 409
    assert _get(custom, "static-d")["spec"]["replicas"] == 1


def test_kubectl_get_nodepool_shows_the_scaled_pool(
    kubeconfig: Path, custom: client.CustomObjectsApi
) -> None:
    _create(custom, _nodepool("static-e", replicas=1))
    assert kubectl(kubeconfig, "scale", "nodepool/static-e", "--replicas=0").returncode == 0
    out = kubectl(kubeconfig, "get", "nodepool", "static-e", "-o", "jsonpath={.spec.replicas}")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "0"


# ---------------------------------------------------------------------- Deployments, ReplicaSets...

APPS = "/apis/apps/v1/namespaces/default"
POD = {"containers": [{"name": "c", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7"}]}


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[Kube]:
    api = config.new_client_from_config(str(kubeconfig))
    yield Kube(api)
    api.close()


def _workload(kube: Kube, plural: str, replicas: int = 1, manager: str = "creator") -> dict[str, Any]:
    name = f"w-{uuid.uuid4().hex[:6]}"
    labels = {"app": name}
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": POD},
        },
    }
    if plural == "statefulsets":
        body["spec"]["serviceName"] = name
    return kube._call("POST", f"{APPS}/{plural}", body=body, query={"fieldManager": manager})  # type: ignore[no-any-return]


def _error(raised: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    return json.loads(raised.value.body)  # type: ignore[no-any-return]


@pytest.mark.parametrize("plural", ["deployments", "replicasets", "statefulsets"])
def test_a_negative_workload_scale_is_invalid_on_the_scale(kube: Kube, plural: str) -> None:
    created = _workload(kube, plural)
    name = created["metadata"]["name"]
    with pytest.raises(ApiException) as raised:
        kube.patch(f"{APPS}/{plural}/{name}/scale", {"spec": {"replicas": -1}})
    assert raised.value.status == 422
    body = _error(raised)
    assert body["message"] == (
        f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    assert (body["details"]["kind"], body["details"]["group"]) == ("Scale", "autoscaling")
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.replicas"]
    assert kube.get(f"{APPS}/{plural}/{name}")["spec"]["replicas"] == 1


def test_a_stale_resource_version_in_a_scale_patch_is_a_conflict(kube: Kube) -> None:
    created = _workload(kube, "deployments")
    name = created["metadata"]["name"]
    path = f"{APPS}/deployments/{name}"
    kube.patch(path, {"metadata": {"labels": {"a": "b"}}})
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "spec": {"replicas": 4}}
    with pytest.raises(ApiException) as raised:
        kube.patch(f"{path}/scale", stale)
    assert raised.value.status == 409
    assert _error(raised)["message"] == (
        f'Operation cannot be fulfilled on deployments.apps "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert kube.get(path)["spec"]["replicas"] == 1
    # No resourceVersion at all is an unconditional update (deployments allow one).
    scale = kube.replace(f"{path}/scale", {"metadata": {"name": name}, "spec": {"replicas": 2}})
    assert scale["spec"]["replicas"] == 2


def test_a_scale_naming_another_uid_is_a_conflict_on_the_scale(kube: Kube) -> None:
    created = _workload(kube, "deployments")
    name, uid = created["metadata"]["name"], created["metadata"]["uid"]
    other = str(uuid.uuid4())
    with pytest.raises(ApiException) as raised:
        kube.replace(
            f"{APPS}/deployments/{name}/scale",
            {"metadata": {"name": name, "uid": other}, "spec": {"replicas": 3}},
        )
    assert raised.value.status == 409
    assert _error(raised)["message"] == (
        f'Operation cannot be fulfilled on deployments/scale.apps "{name}": '
        f"Precondition failed: UID in precondition: {other}, UID in object meta: {uid}"
    )


def test_a_dry_run_scale_answers_the_new_scale_and_stores_nothing(kube: Kube) -> None:
    created = _workload(kube, "deployments")
    path = f"{APPS}/deployments/{created['metadata']['name']}"
    answer = kube._call(
        "PATCH",
        f"{path}/scale",
        body={"spec": {"replicas": 7}},
        query={"dryRun": "All"},
        content_type="application/merge-patch+json",
    )
    assert answer["spec"]["replicas"] == 7
    stored = kube.get(path)
    assert stored["spec"]["replicas"] == 1
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


@pytest.mark.parametrize("plural", ["deployments", "replicasets", "statefulsets"])
def test_the_scaler_owns_the_replicas_through_the_scale_subresource(kube: Kube, plural: str) -> None:
    created = _workload(kube, plural)
    path = f"{APPS}/{plural}/{created['metadata']['name']}"
    creator = {e["manager"]: e for e in created["metadata"]["managedFields"]}["creator"]
    assert "f:replicas" in creator["fieldsV1"]["f:spec"]
    kube._call(
        "PATCH",
        f"{path}/scale",
        body={"spec": {"replicas": 3}},
        query={"fieldManager": "hpa"},
        content_type="application/merge-patch+json",
    )
    stored = kube.get(path)
    assert stored["spec"]["replicas"] == 3
    owners = {e["manager"]: e for e in stored["metadata"]["managedFields"]}
    assert owners["hpa"] == {
        "manager": "hpa",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
        "subresource": "scale",
    }
    assert "f:replicas" not in owners["creator"]["fieldsV1"]["f:spec"]
    assert "f:selector" in owners["creator"]["fieldsV1"]["f:spec"]


def test_a_generation_bump_and_the_parents_strategy_come_with_a_scale(kube: Kube) -> None:
    created = _workload(kube, "deployments")
    path = f"{APPS}/deployments/{created['metadata']['name']}"
    kube._call("PUT", f"{path}/status", body={**created, "status": {"observedGeneration": 1, "replicas": 1}})
    scale = kube.patch(f"{path}/scale", {"spec": {"replicas": 5}})
    assert (scale["spec"], scale["status"]["replicas"]) == ({"replicas": 5}, 1)
    stored = kube.get(path)
    assert stored["metadata"]["generation"] == created["metadata"]["generation"] + 1
    assert stored["status"]["replicas"] == 1  # the main resource's strategy keeps the status


class ScaleRecorder(JsonWebhookServer):
    """A webhook that records each AdmissionReview and allows it."""

    def __init__(self) -> None:
        super().__init__(
            lambda review: {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": True},
            }
        )


@pytest.fixture
def scale_hook(kube: Kube) -> Iterator[ScaleRecorder]:
    recorder = ScaleRecorder()
    name = f"scale-hook-{uuid.uuid4().hex[:6]}"
    configuration = {
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "scale.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {"url": recorder.url, "caBundle": recorder.ca_bundle},
                "rules": [
                    {
                        "apiGroups": ["apps", "karpenter.sh"],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["deployments/scale", "nodepools/scale"],
                    }
                ],
            }
        ],
    }
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    kube.create(path, configuration)
    yield recorder
    kube.delete(f"{path}/{name}")
    recorder.close()


def test_webhooks_are_asked_about_the_scale_not_the_deployment(kube: Kube, scale_hook: ScaleRecorder) -> None:
    created = _workload(kube, "deployments")
    name = created["metadata"]["name"]
    kube.patch(f"{APPS}/deployments/{name}/scale", {"spec": {"replicas": 2}})
    assert len(scale_hook.requests) == 1
    request = scale_hook.requests[0]["request"]
    assert request["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert request["requestKind"] == request["kind"]
    assert request["resource"] == {"group": "apps", "version": "v1", "resource": "deployments"}
    assert (request["subResource"], request["requestSubResource"]) == ("scale", "scale")
    assert (request["object"]["kind"], request["object"]["spec"]) == ("Scale", {"replicas": 2})
    assert (request["oldObject"]["kind"], request["oldObject"]["spec"]) == ("Scale", {"replicas": 1})


def test_webhooks_are_asked_about_a_custom_resources_scale(
    custom: client.CustomObjectsApi, kube: Kube, scale_hook: ScaleRecorder
) -> None:
    _create(custom, _nodepool("static-hook", replicas=1))
    group, version, plural = NODEPOOLS
    custom.patch_cluster_custom_object_scale(group, version, plural, "static-hook", {"spec": {"replicas": 2}})
    assert len(scale_hook.requests) == 1
    request = scale_hook.requests[0]["request"]
    assert request["kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert request["resource"] == {"group": "karpenter.sh", "version": "v1", "resource": "nodepools"}
    assert request["subResource"] == "scale"
    assert (request["object"]["kind"], request["object"]["spec"]) == ("Scale", {"replicas": 2})
