"""The scale subresource of a custom resource, as kube-apiserver serves it (apiextensions-apiserver's
``customresource.ScaleREST``), checked with the project's NodePool CRD and the real kubectl.

Facts from kube-apiserver's ``registry/customresource/etcd.go``: the Scale reads ``spec.replicas``
from ``specReplicasPath``, ``status.replicas`` from ``statusReplicasPath`` (0 when absent) and
``status.selector`` from ``labelSelectorPath``; a GET of an object with no value at
``specReplicasPath`` is a 500 "the spec replicas field ... does not exist"; an update writes the
replicas into the custom resource and stores it through the custom resource's own strategy, so its
schema, CEL rules (transition rules with ``oldSelf`` too) and generation apply as to any update.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import kubectl
from sandbox.shared_data import REPO_ROOT

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
