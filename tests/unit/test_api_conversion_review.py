"""The CRD conversion webhook: v1beta1 ⇄ v1 without losing a field, in the ConversionReview shape."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.api import conversion_review as cr
from nodewright.api.validation import validate_document, validate_v1

SEEDS = Path(__file__).resolve().parents[2] / "events" / "manifests"
V1BETA1_SEEDS = sorted(SEEDS.glob("v1beta1-*.yaml"))


def _seed(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _desired(doc: dict[str, Any], version: str) -> str:
    return f"{doc['apiVersion'].split('/')[0]}/{version}"


@pytest.mark.parametrize("path", V1BETA1_SEEDS, ids=lambda p: p.stem)
def test_every_v1beta1_seed_round_trips_through_v1_unchanged(path: Path) -> None:
    seed = _seed(path)
    v1 = cr.convert(seed, _desired(seed, "v1"), node_role="KarpenterNodeRole-demo")
    assert v1["apiVersion"].endswith("/v1")
    back = cr.convert(v1, _desired(seed, "v1beta1"))
    assert back == seed


@pytest.mark.parametrize("path", V1BETA1_SEEDS, ids=lambda p: p.stem)
def test_the_webhook_finds_no_problem_in_a_seed_that_nodewright_convert_does_not(path: Path) -> None:
    seed = _seed(path)
    v1 = cr.convert(seed, _desired(seed, "v1"), node_role="KarpenterNodeRole-demo")
    webhook = {str(f) for f in validate_v1(v1) if f.is_error}
    offline = {str(f) for f in validate_document(seed) if f.is_error}
    assert webhook <= offline, "the seeds' own mistakes (a typo'd label, weights) are reported both ways"


def test_a_seed_nodeclass_without_a_role_gets_the_stacks_node_role_and_loses_it_on_the_way_back() -> None:
    seed = _seed(SEEDS / "v1beta1-ec2nodeclass-default.yaml")
    v1 = cr.convert(seed, "karpenter.k8s.aws/v1", node_role="KarpenterNodeRole-demo")
    assert v1["spec"]["role"] == "KarpenterNodeRole-demo"
    assert v1["metadata"]["annotations"][cr.ROLE_DEFAULTED_ANNOTATION] == "KarpenterNodeRole-demo"
    assert "role" not in cr.convert(v1, "karpenter.k8s.aws/v1beta1")["spec"]


def test_a_v1beta1_nodepool_kubelet_travels_in_the_annotation_and_comes_back() -> None:
    pool = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "apiVersion": "karpenter.k8s.aws/v1beta1",
                        "kind": "EC2NodeClass",
                        "name": "d",
                    },
                    "requirements": [],
                    "kubelet": {"maxPods": 20, "containerRuntime": "containerd"},
                }
            },
            "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "168h"},
        },
    }
    v1 = cr.convert(pool, "karpenter.sh/v1")
    assert "kubelet" not in v1["spec"]["template"]["spec"]
    assert cr.kubelet_overrides(v1) == {"maxPods": 20, "containerRuntime": "containerd"}
    assert v1["spec"]["template"]["spec"]["expireAfter"] == "168h"
    assert v1["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "d",
    }
    assert v1["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }
    assert cr.convert(v1, "karpenter.sh/v1beta1") == pool


def _v1_nodeclass(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "d"},
        "spec": {
            "role": "NodeRole",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            **spec,
        },
    }


@pytest.mark.parametrize(
    "nodeclass",
    [
        _v1_nodeclass(amiSelectorTerms=[{"alias": "al2023@latest"}]),
        _v1_nodeclass(amiSelectorTerms=[{"alias": "al2023@v20240807"}], kubelet={"maxPods": 30}),
        _v1_nodeclass(amiFamily="AL2", amiSelectorTerms=[{"alias": "al2@latest"}]),
        _v1_nodeclass(amiFamily="Custom", amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}]),
    ],
    ids=["alias-latest", "alias-pinned-with-kubelet", "family-and-alias", "custom-ami"],
)
def test_a_v1_nodeclass_read_as_v1beta1_and_written_back_is_unchanged(nodeclass: dict[str, Any]) -> None:
    v1beta1 = cr.convert(nodeclass, "karpenter.k8s.aws/v1beta1")
    assert v1beta1["apiVersion"] == "karpenter.k8s.aws/v1beta1"
    assert "kubelet" not in v1beta1["spec"]
    assert all("alias" not in t for t in v1beta1["spec"].get("amiSelectorTerms", []))
    assert cr.convert(v1beta1, "karpenter.k8s.aws/v1") == nodeclass


def test_a_v1_nodepool_with_its_defaults_read_as_v1beta1_and_back_is_unchanged() -> None:
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p", "uid": "u-1", "resourceVersion": "7"},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                    "expireAfter": "720h",
                    "terminationGracePeriod": "1h",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "30s",
                "budgets": [{"nodes": "10%"}],
            },
            "limits": {"cpu": "100"},
            "weight": 10,
        },
        "status": {"resources": {"cpu": "4"}},
    }
    v1beta1 = cr.convert(pool, "karpenter.sh/v1beta1")
    assert v1beta1["spec"]["disruption"]["expireAfter"] == "720h"
    assert v1beta1["spec"]["template"]["spec"]["nodeClassRef"]["apiVersion"] == "karpenter.k8s.aws/v1beta1"
    assert cr.convert(v1beta1, "karpenter.sh/v1") == pool


def test_a_nodeclaim_round_trips_both_ways() -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "p-abcde", "labels": {"karpenter.sh/nodepool": "p"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
            "requirements": [],
            "expireAfter": "720h",
        },
        "status": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0"},
    }
    v1beta1 = cr.convert(claim, "karpenter.sh/v1beta1")
    assert "expireAfter" not in v1beta1["spec"]
    assert cr.convert(v1beta1, "karpenter.sh/v1") == claim


def test_review_answers_in_the_conversionreview_shape_with_the_request_uid() -> None:
    seed = _seed(SEEDS / "v1beta1-nodepool-default.yaml")
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "desiredAPIVersion": "karpenter.sh/v1",
            "objects": [seed],
        },
    }
    answer = cr.review(copy.deepcopy(body))
    assert answer["apiVersion"] == "apiextensions.k8s.io/v1"
    assert answer["kind"] == "ConversionReview"
    assert answer["response"]["uid"] == body["request"]["uid"]
    assert answer["response"]["result"] == {"status": "Success"}
    assert [o["apiVersion"] for o in answer["response"]["convertedObjects"]] == ["karpenter.sh/v1"]


@pytest.mark.parametrize(
    "body",
    [
        None,
        {"request": {"uid": "u"}},
        {
            "request": {
                "uid": "u",
                "desiredAPIVersion": "karpenter.sh/v1",
                "objects": [{"apiVersion": "v1", "kind": "Pod"}],
            }
        },
        {
            "request": {
                "uid": "u",
                "desiredAPIVersion": "karpenter.k8s.aws/v1",
                "objects": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool"}],
            }
        },
        {
            "request": {
                "uid": "u",
                "desiredAPIVersion": "karpenter.sh/v2",
                "objects": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool"}],
            }
        },
    ],
    ids=["not-json-object", "no-desired-version", "foreign-kind", "cross-group", "unknown-version"],
)
def test_review_of_what_it_cannot_convert_is_a_failure_result_not_an_exception(body: Any) -> None:
    answer = cr.review(body)
    assert answer["response"]["result"]["status"] == "Failure"
    assert answer["response"]["result"]["message"]
    assert "convertedObjects" not in answer["response"]
