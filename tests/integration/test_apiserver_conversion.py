"""The emulator calls CRD conversion webhooks as kube-apiserver does: objects stored in the storage
version, requests in another served version converted through the webhook (the real webhook handler,
``wakeup.webhook.Webhook`` on its ``/<secret>/convert`` path, behind an HTTPS server; the CRDs
``install-webhooks`` applies), one object per review, and a failed conversion failing the request
with the API server's 500."""

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
from nodewright.wakeup.webhook import PathSecrets, Webhook

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import JsonWebhookServer

pytestmark = pytest.mark.timeout(60)
SEEDS = Path(__file__).resolve().parents[2] / "events" / "manifests"
NODE_ROLE = "KarpenterNodeRole-test"
SECRET = "s" * 40
KARPENTER, AWS = "karpenter.sh", "karpenter.k8s.aws"
# Karpenter's v1beta1 default (v1's hop limit is 1): a v1beta1 manifest without it keeps 2.
METADATA_OPTIONS_V1BETA1_DEFAULT = {
    "httpEndpoint": "enabled",
    "httpProtocolIPv6": "disabled",
    "httpPutResponseHopLimit": 2,
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


class Recorder:
    """The webhook's logger and metrics: what it logged is kept."""

    namespace = "Nodewright"

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _log(self, message: str, *args: Any, extra: dict[str, Any] | None = None, **_: Any) -> None:
        self.lines.append(f"{message} {json.dumps(extra or {})}")

    info = warning = error = exception = _log

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        pass


class ConversionWebhook:
    """HTTPS in front of the real webhook handler (``Webhook.serve`` on ``/<secret>/convert``, the
    stack's node role), unless ``answer`` is set; every review and every log line kept."""

    def __init__(self) -> None:
        self.answer: Any = None  # review -> answer, instead of the real handler's
        self.log = Recorder()
        self.webhook = Webhook(
            secrets=lambda: PathSecrets(SECRET),
            wake=lambda event: None,
            logger=self.log,
            metrics=self.log,
            node_role=NODE_ROLE,
        )
        self._server = JsonWebhookServer(self._answer, f"/{SECRET}/convert")
        self.url, self.ca_bundle, self.reviews = (
            self._server.url,
            self._server.ca_bundle,
            self._server.requests,
        )

    def _answer(self, review: dict[str, Any]) -> Any:
        if self.answer is not None:
            return self.answer(review)
        answer = self.webhook.serve("POST", f"/{SECRET}/convert", json.dumps(review))
        assert answer.status == 200, answer.body  # a ConversionReview is always answered with one
        return answer.body

    def close(self) -> None:
        self._server.close()


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
    # The seed as written (no role: the stack's went back out), plus v1beta1's metadataOptions default.
    assert class_v1beta1["spec"] == {**nodeclass["spec"], "metadataOptions": METADATA_OPTIONS_V1BETA1_DEFAULT}
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


def _refusing(name: str) -> Any:
    """The real webhook, except that a review holding the object ``name`` gets a Failure."""

    def answer(review: dict[str, Any]) -> dict[str, Any]:
        if any(o["metadata"]["name"] == name for o in review["request"]["objects"]):
            return _refusal(review)
        return _real(review)

    return answer


def test_a_v1beta1_list_converts_one_object_per_review_and_one_failure_fails_it_whatever_the_selector(
    cluster: Any, hook: ConversionWebhook
) -> None:
    """As kube-apiserver: each stored object is converted as it is decoded (one review each), before
    the selectors filter them (etcd3 GetList), and one that cannot be converted fails the list."""
    _server, objects = cluster
    good, bad = (f"{what}-{uuid.uuid4().hex[:6]}" for what in ("good", "bad"))
    for name, team in ((good, "a"), (bad, "b")):
        pool = _v1_pool(name)
        pool["metadata"]["labels"] = {"team": team}
        objects.create_cluster_custom_object(KARPENTER, "v1", "nodepools", pool)
    first = len(hook.reviews)
    listed = objects.list_cluster_custom_object(KARPENTER, "v1beta1", "nodepools")
    names = [item["metadata"]["name"] for item in listed["items"]]
    assert {good, bad} <= set(names)
    assert [len(r["request"]["objects"]) for r in hook.reviews[first:]] == [1] * len(names)

    hook.answer = _refusing(bad)
    try:
        assert (
            objects.get_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", good)["metadata"]["name"]
            == good
        )
        with pytest.raises(ApiException) as failed:
            objects.list_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", label_selector="team=a")
    finally:
        hook.answer = None
        objects.delete_cluster_custom_object(KARPENTER, "v1", "nodepools", bad)
    assert failed.value.status == 500
    assert "cannot convert" in _status(failed.value)["message"]


def test_a_v1_object_with_an_unreadable_compatibility_annotation_still_reads_and_lists_through_v1beta1(
    cluster: Any, hook: ConversionWebhook
) -> None:
    _server, objects = cluster
    name = f"unreadable-{uuid.uuid4().hex[:6]}"
    pool = _v1_pool(name)
    pool["metadata"]["annotations"] = {conversion_review.KUBELET_ANNOTATION: "{not json"}
    objects.create_cluster_custom_object(KARPENTER, "v1", "nodepools", pool)

    read = objects.get_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", name)
    listed = objects.list_cluster_custom_object(KARPENTER, "v1beta1", "nodepools")

    assert read["apiVersion"] == "karpenter.sh/v1beta1"
    assert read["metadata"]["annotations"][conversion_review.KUBELET_ANNOTATION] == "{not json"
    assert name in [item["metadata"]["name"] for item in listed["items"]]
    assert any(
        line.startswith("conversion warning") and f"NodePool {name}: annotation" in line
        for line in hook.log.lines
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"metadata.name": "evil", "metadata.uid": "u-2"},
        [{"path": ["metadata", "name"], "set": "evil"}, {"path": ["metadata", "uid"], "set": "u-2"}],
    ],
    ids=["dotted-paths", "entries"],
)
def test_a_v1beta1_write_cannot_set_metadata_through_the_v1_fields_annotation(
    cluster: Any, hook: ConversionWebhook, fields: Any
) -> None:
    server, objects = cluster
    name = f"meta-{uuid.uuid4().hex[:6]}"
    pool = _seed("v1beta1-nodepool-batch-jobs.yaml")
    pool["metadata"] = {
        "name": name,
        "annotations": {conversion_review.V1_FIELDS_ANNOTATION: json.dumps(fields)},
    }
    created = objects.create_cluster_custom_object(KARPENTER, "v1beta1", "nodepools", pool)

    stored = server.store.get((KARPENTER, "nodepools"), "", name)
    assert created["metadata"]["name"] == stored["metadata"]["name"] == name
    assert stored["metadata"]["uid"] == created["metadata"]["uid"] != "u-2"
    assert conversion_review.V1_FIELDS_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    assert server.store.get((KARPENTER, "nodepools"), "", "evil") is None


def test_a_v1_nodepool_and_ec2nodeclass_read_as_v1beta1_and_replaced_keep_every_v1_field(
    cluster: Any, hook: ConversionWebhook
) -> None:
    """``kubectl get <kind>.v1beta1 X -o yaml | kubectl replace -f -`` (issue 24, defect 3)."""
    server, objects = cluster
    name = f"replaced-{uuid.uuid4().hex[:6]}"
    pool = _v1_pool(name)
    pool["spec"]["template"]["spec"]["terminationGracePeriod"] = "48h"
    pool["spec"]["disruption"] = {
        "budgets": [{"nodes": "0", "reasons": ["Empty", "Drifted"]}, {"nodes": "100%"}],
    }
    nodeclass = {
        "apiVersion": f"{AWS}/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "NodeRole",
            "amiFamily": "AL2023",  # v1 needs it when no term is an alias
            "amiSelectorTerms": [{"ssmParameter": "/my/ami"}, {"id": "ami-0123456789abcdef0"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "kubelet": {"maxPods": 30},
        },
    }
    for group, plural, obj in ((KARPENTER, "nodepools", pool), (AWS, "ec2nodeclasses", nodeclass)):
        objects.create_cluster_custom_object(group, "v1", plural, obj)
        before = server.store.get((group, plural), "", name)
        read = objects.get_cluster_custom_object(group, "v1beta1", plural, name)
        objects.replace_cluster_custom_object(group, "v1beta1", plural, name, read)
        after = server.store.get((group, plural), "", name)
        assert after["spec"] == before["spec"], plural
        assert after["metadata"].get("annotations") == before["metadata"].get("annotations")
    assert after["spec"]["amiSelectorTerms"] == nodeclass["spec"]["amiSelectorTerms"]


def test_a_v1beta1_ec2nodeclass_without_metadata_options_gets_karpenters_v1beta1_hop_limit(
    cluster: Any, hook: ConversionWebhook
) -> None:
    """Karpenter's v1beta1 CRD defaulted httpPutResponseHopLimit to 2 (v1's is 1): a v1beta1 manifest
    without metadataOptions keeps 2 through the conversion, as it did under Karpenter."""
    server, objects = cluster
    nodeclass = _seed("v1beta1-ec2nodeclass-default.yaml")
    nodeclass["metadata"] = {"name": f"hops-{uuid.uuid4().hex[:6]}"}
    objects.create_cluster_custom_object(AWS, "v1beta1", "ec2nodeclasses", nodeclass)
    stored = server.store.get((AWS, "ec2nodeclasses"), "", nodeclass["metadata"]["name"])
    assert stored["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 2
