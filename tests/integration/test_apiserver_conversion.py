"""The emulator calls CRD conversion webhooks as kube-apiserver does: objects stored in the storage
version, requests in another served version converted through the webhook (the real
``api.conversion_review`` behind an HTTPS server, the CRDs ``install-webhooks`` applies), and a
failed conversion failing the request with the API server's 500."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from nodewright.api import conversion_review, webhooks

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import JsonWebhookServer

pytestmark = pytest.mark.timeout(60)
SEEDS = Path(__file__).resolve().parents[2] / "events" / "manifests"
NODE_ROLE = "KarpenterNodeRole-test"
KARPENTER, AWS = "karpenter.sh", "karpenter.k8s.aws"
METADATA_OPTIONS_DEFAULT = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 1,
    "httpTokens": "required",
}


def _real(review: dict[str, Any]) -> dict[str, Any]:
    return conversion_review.review(review, node_role=NODE_ROLE)


def _refusal(review: dict[str, Any]) -> dict[str, Any]:
    result = {"status": "Failure", "message": "cannot convert"}
    response = {"uid": review["request"]["uid"], "result": result}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def _wrong_uid(review: dict[str, Any]) -> dict[str, Any]:
    return {**_real(review), "response": {**_real(review)["response"], "uid": "x"}}


class ConversionWebhook(JsonWebhookServer):
    """HTTPS, answering with ``conversion_review.review`` unless ``answer`` is set; ``reviews`` kept."""

    def __init__(self) -> None:
        self.answer: Any = None  # review -> answer, instead of the real one
        super().__init__(self._answer, "/secret/convert")
        self.reviews = self.requests

    def _answer(self, review: dict[str, Any]) -> dict[str, Any]:
        return (self.answer or _real)(review)


@pytest.fixture(scope="module")
def hook() -> Iterator[ConversionWebhook]:
    webhook = ConversionWebhook()
    yield webhook
    webhook.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, hook: ConversionWebhook) -> Iterator[Any]:
    with ApiServer() as server:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        api = config.new_client_from_config(str(path))
        extensions = client.ApiextensionsV1Api(api)
        for crd in webhooks.conversion_crds(hook.url, hook.ca_bundle):
            extensions.create_custom_resource_definition(crd)
        yield server, client.CustomObjectsApi(api)


def _seed(name: str) -> dict[str, Any]:
    return yaml.safe_load((SEEDS / name).read_text())


def _status(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)


def test_v1beta1_seeds_are_stored_as_v1_and_read_back_in_both_versions(
    cluster: Any, hook: ConversionWebhook
) -> None:
    server, objects = cluster
    pool, nodeclass = _seed("v1beta1-nodepool-default.yaml"), _seed("v1beta1-ec2nodeclass-default.yaml")
    objects.create_cluster_custom_object(AWS, "v1beta1", "ec2nodeclasses", nodeclass)
    created = objects.create_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", pool)

    stored = server.store.get((KARPENTER, "nodepools"), "", "default")
    assert stored["apiVersion"] == "karpenter.sh/v1"
    assert stored["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": AWS,
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert stored["spec"]["disruption"]["consolidateAfter"] == "30s"
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"  # v1's default, applied in storage
    stored_class = server.store.get((AWS, "ec2nodeclasses"), "", "default")
    assert stored_class["spec"]["role"] == NODE_ROLE  # neither role nor instanceProfile: the stack's
    assert stored_class["spec"]["amiSelectorTerms"] == [{"alias": "al2@latest"}]
    assert stored_class["metadata"]["annotations"][conversion_review.ROLE_DEFAULTED_ANNOTATION] == NODE_ROLE

    as_v1beta1 = objects.get_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", "default")
    assert created["apiVersion"] == as_v1beta1["apiVersion"] == "karpenter.sh/v1beta1"
    assert created["spec"] == as_v1beta1["spec"]
    # The seed as written, plus what the server defaults (v1's expireAfter and budget, read back).
    assert as_v1beta1["spec"]["template"] == pool["spec"]["template"]
    assert as_v1beta1["spec"]["disruption"] == {
        **pool["spec"]["disruption"],
        "expireAfter": "720h",
        "budgets": [{"nodes": "10%"}],
    }
    class_v1beta1 = objects.get_cluster_custom_object(AWS, "v1beta1", "ec2nodeclasses", "default")
    # The seed as written (no role: the stack's went back out), plus the schema's metadataOptions default.
    assert class_v1beta1["spec"] == {**nodeclass["spec"], "metadataOptions": METADATA_OPTIONS_DEFAULT}
    listed = objects.list_cluster_custom_object(KARPENTER, "v1beta1", "nodepools")
    assert [i["apiVersion"] for i in listed["items"]] == ["karpenter.sh/v1beta1"]

    reviews = len(hook.reviews)
    as_v1 = objects.get_cluster_custom_object(KARPENTER, "v1", "nodepools", "default")
    objects.list_cluster_custom_object(AWS, "v1", "ec2nodeclasses")
    assert as_v1 == {**stored, "metadata": as_v1["metadata"]}
    assert len(hook.reviews) == reviews, "a request in the storage version never calls the webhook"


def test_a_patch_through_v1beta1_is_converted_both_ways(cluster: Any, hook: ConversionWebhook) -> None:
    server, objects = cluster
    pool = _seed("v1beta1-nodepool-web-app.yaml")
    objects.create_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", pool)
    patch = {"spec": {"disruption": {"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": None}}}
    patched = objects.patch_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", "web-app", patch)

    assert patched["spec"]["disruption"]["consolidationPolicy"] == "WhenUnderutilized"
    stored = server.store.get((KARPENTER, "nodepools"), "", "web-app")
    assert stored["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert stored["metadata"]["generation"] == 2
    assert [r["request"]["desiredAPIVersion"] for r in hook.reviews[-2:]] == [
        "karpenter.sh/v1",
        "karpenter.sh/v1beta1",
    ]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (None, 'failed: Post "https://127.0.0.1:1/secret/convert?timeout=30s": '),
        (_wrong_uid, 'failed: expected response.uid="'),
        (_refusal, "failed: cannot convert"),
    ],
    ids=["unreachable", "wrong-uid", "failure-result"],
)
def test_a_failed_conversion_fails_v1beta1_requests_with_a_500_and_v1_keeps_working(
    cluster: Any, hook: ConversionWebhook, answer: Any, message: str
) -> None:
    server, objects = cluster
    name = f"fail-{uuid.uuid4().hex[:6]}"
    objects.create_cluster_custom_object(KARPENTER, "v1", "nodepools", _v1_pool(name))
    crds = webhooks.conversion_crds(
        "https://127.0.0.1:1/secret/convert" if answer is None else hook.url, hook.ca_bundle
    )
    extensions = client.ApiextensionsV1Api(objects.api_client)
    current = extensions.read_custom_resource_definition(crds[0]["metadata"]["name"])
    crds[0]["metadata"]["resourceVersion"] = current.metadata.resource_version
    extensions.replace_custom_resource_definition(crds[0]["metadata"]["name"], crds[0])
    hook.answer = answer
    try:
        with pytest.raises(ApiException) as read:
            objects.get_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", name)
        with pytest.raises(ApiException) as write:
            objects.create_cluster_custom_object(
                KARPENTER, "v1beta1", "nodepools", _seed("v1beta1-nodepool-batch-jobs.yaml")
            )
        assert (
            objects.get_cluster_custom_object(KARPENTER, "v1", "nodepools", name)["metadata"]["name"] == name
        )
    finally:
        hook.answer = None
        restored = webhooks.conversion_crds(hook.url, hook.ca_bundle)[0]
        restored["metadata"]["resourceVersion"] = extensions.read_custom_resource_definition(
            restored["metadata"]["name"]
        ).metadata.resource_version
        extensions.replace_custom_resource_definition(restored["metadata"]["name"], restored)
    assert read.value.status == write.value.status == 500
    status = _status(read.value)
    assert "reason" not in status  # kubectl: "Error from server: conversion webhook for ..."
    assert status["message"].startswith(f"conversion webhook for karpenter.sh/v1, Kind=NodePool {message}")
    assert _status(write.value)["message"].startswith(
        f"conversion webhook for karpenter.sh/v1beta1, Kind=NodePool {message}"
    )
    assert server.store.get((KARPENTER, "nodepools"), "", "batch-jobs") is None


def _v1_pool(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": AWS, "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [],
                }
            }
        },
    }
