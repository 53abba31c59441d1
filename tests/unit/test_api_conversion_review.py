"""The CRD conversion webhook: v1beta1 ⇄ v1 without losing a field, in the ConversionReview shape."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.api import conversion_review as cr
from nodewright.api.schema import SCHEMAS_V1BETA1
from nodewright.api.validation import validate_document, validate_v1

from sandbox.apiserver.schema import apply_defaults, prune_custom

SEEDS = Path(__file__).resolve().parents[2] / "events" / "manifests"
V1BETA1_SEEDS = sorted(SEEDS.glob("v1beta1-*.yaml"))


def _seed(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _as_applied(seed: dict[str, Any]) -> dict[str, Any]:
    """``seed`` as kube-apiserver hands a v1beta1 write of it to the webhook: pruned to the v1beta1
    schema (the seeds' own mistakes, a requirement's ``weight``, are dropped) and defaulted."""
    out = copy.deepcopy(seed)
    schema = SCHEMAS_V1BETA1[(seed["apiVersion"].split("/")[0], seed["kind"])]
    prune_custom(out, schema)
    apply_defaults(out, schema)
    return out


def _desired(doc: dict[str, Any], version: str) -> str:
    return f"{doc['apiVersion'].split('/')[0]}/{version}"


@pytest.mark.parametrize("path", V1BETA1_SEEDS, ids=lambda p: p.stem)
def test_every_v1beta1_seed_round_trips_through_v1_unchanged(path: Path) -> None:
    seed = _as_applied(_seed(path))
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


# --------------------------------------------------------------------------- hostile or broken input
# Issue 24, defect 8: every ConversionReview gets a well-formed answer; an unreadable compatibility
# annotation never fails the conversion of an object whose spec is fine; metadata never comes from
# an annotation; a hostile nesting depth is a Failure naming the object, not a RecursionError.


def _v1_pool(**annotations: str) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p", "uid": "u-1"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "requirements": [],
                }
            },
        },
    }
    if annotations:
        pool["metadata"]["annotations"] = dict(annotations)
    return pool


def _v1beta1_pool(**annotations: str) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "p", "uid": "u-1"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "apiVersion": "karpenter.k8s.aws/v1beta1",
                        "kind": "EC2NodeClass",
                        "name": "d",
                    },
                    "requirements": [],
                }
            },
            "weight": 10,
        },
    }
    if annotations:
        pool["metadata"]["annotations"] = dict(annotations)
    return pool


def _review(desired: str, *objects: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": desired, "objects": list(objects)},
    }


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"x": "1"}
    for _ in range(depth):
        value = {"x": value}
    return value


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (cr.KUBELET_ANNOTATION, "{not json"),
        (cr.KUBELET_ANNOTATION, "[1, 2]"),
        (cr.NODECLASS_REF_ANNOTATION, "nope"),
        (cr.KUBELET_ANNOTATION, json.dumps(_nested(900))),
    ],
    ids=["kubelet-not-json", "kubelet-not-an-object", "nodeclass-ref-not-json", "kubelet-900-deep"],
)
def test_a_v1_object_with_an_unreadable_annotation_still_reads_as_v1beta1_and_the_warning_names_it(
    annotation: str, value: str
) -> None:
    warnings: list[str] = []
    answer = cr.review(_review("karpenter.sh/v1beta1", _v1_pool(**{annotation: value})), warnings=warnings)

    assert answer["response"]["result"] == {"status": "Success"}
    (converted,) = answer["response"]["convertedObjects"]
    assert converted["apiVersion"] == "karpenter.sh/v1beta1"
    assert "kubelet" not in converted["spec"]["template"]["spec"]
    assert converted["metadata"]["annotations"][annotation] == value  # left as it was: it comes back on write
    (warned,) = warnings
    assert warned.startswith(f"NodePool p: annotation {annotation} is not readable")


@pytest.mark.parametrize(
    "value",
    ["{", "[", '"a string"', json.dumps({"spec.weight": 50}), json.dumps([1, 2]), json.dumps(_nested(900))],
    ids=["truncated-object", "truncated-list", "a-string", "another-format", "not-entries", "900-deep"],
)
def test_an_unreadable_v1_fields_annotation_on_a_v1beta1_write_is_ignored_with_a_warning(value: str) -> None:
    warnings: list[str] = []
    pool = _v1beta1_pool(**{cr.V1_FIELDS_ANNOTATION: value})
    answer = cr.review(_review("karpenter.sh/v1", pool), warnings=warnings)

    assert answer["response"]["result"] == {"status": "Success"}
    (converted,) = answer["response"]["convertedObjects"]
    assert converted["spec"]["weight"] == 10
    assert converted["metadata"] == {"name": "p", "uid": "u-1"}
    assert warnings
    assert all(w.startswith("NodePool p: annotation compatibility.nodewright.io/v1-fields") for w in warnings)


@pytest.mark.parametrize(
    "fields",
    [
        {"metadata.name": "evil", "metadata.uid": "u-2", "metadata.labels": {"a": "b"}},
        [
            {"path": ["metadata", "name"], "set": "evil"},
            {"path": ["metadata", "uid"], "set": "u-2"},
            {"path": ["metadata", "labels"], "set": {"a": "b"}},
            {"path": ["metadata"], "set": {"name": "evil"}},
            {"path": ["apiVersion"], "set": "karpenter.sh/v2"},
            {"path": ["kind"], "set": "Pod"},
        ],
    ],
    ids=["dotted-paths", "entries"],
)
def test_metadata_never_comes_from_the_v1_fields_annotation(fields: Any) -> None:
    pool = _v1beta1_pool(**{cr.V1_FIELDS_ANNOTATION: json.dumps(fields)})
    warnings: list[str] = []
    answer = cr.review(_review("karpenter.sh/v1", pool), warnings=warnings)

    (converted,) = answer["response"]["convertedObjects"]
    assert converted["metadata"] == {"name": "p", "uid": "u-1"}
    assert (converted["apiVersion"], converted["kind"]) == ("karpenter.sh/v1", "NodePool")
    assert warnings


@pytest.mark.parametrize(
    "fields",
    [
        {"spec.weight.x": 1},
        {"spec.template.spec.requirements.key": "a"},
        [{"path": ["spec", "weight", "x"], "set": 1}],
        [{"path": ["spec", "template", "spec", "requirements", 3, "key"], "set": "a", "items": [{"len": 4}]}],
        [{"path": ["spec", "template", "spec", "requirements", "key"], "set": "a"}],
        [{"path": ["spec", True], "set": 1}, {"path": [], "set": 1}, {"set": 1}, "spec.weight", None],
        [{"path": ["spec", "nonsense"], "set": _nested(900)}],
        [{"path": ["spec", "x" * 100] * 500, "set": 1}],
    ],
    ids=[
        "into-an-int",
        "into-a-list",
        "entry-into-an-int",
        "index-past-the-end",
        "key-into-a-list",
        "malformed",
        "deep-value",
        "long-path",
    ],
)
def test_an_annotation_entry_pointing_into_a_scalar_or_nowhere_is_ignored_not_a_type_error(
    fields: Any,
) -> None:
    pool = _v1beta1_pool(**{cr.V1_FIELDS_ANNOTATION: json.dumps(fields)})
    warnings: list[str] = []
    answer = cr.review(_review("karpenter.sh/v1", pool), warnings=warnings)

    assert answer["response"]["result"] == {"status": "Success"}
    (converted,) = answer["response"]["convertedObjects"]
    assert converted["spec"]["weight"] == 10
    assert converted["spec"]["template"]["spec"]["requirements"] == []
    assert warnings


def test_an_object_nested_deeper_than_any_of_its_kind_is_a_failure_naming_it_not_a_recursion_error() -> None:
    deep = _v1beta1_pool()
    deep["metadata"]["name"] = "deep"
    deep["spec"]["template"]["spec"]["kubelet"] = {"evictionHard": _nested(900)}
    answer = cr.review(_review("karpenter.sh/v1", _v1beta1_pool(), deep))

    result = answer["response"]["result"]
    assert result["status"] == "Failure"
    assert result["message"].startswith("NodePool deep: nested deeper than")
    assert "convertedObjects" not in answer["response"]


def test_an_object_that_cannot_be_converted_is_named_in_the_failure() -> None:
    answer = cr.review(
        _review("karpenter.sh/v1", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}})
    )
    assert answer["response"]["result"]["message"].startswith("Pod web: cannot convert v1 Pod")


# --------------------------------------------------------------------------- through the webhook function

SECRET = "c" * 40


class Recorder:
    """Logger and Metrics stand-ins for ``Webhook`` that keep what they were given."""

    namespace = "Nodewright"

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _log(self, message: str, *args: Any, extra: dict[str, Any] | None = None, **_: Any) -> None:
        self.lines.append(f"{message} {json.dumps(extra or {})}")

    info = warning = error = exception = _log

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        pass


def _serve(review: Any) -> tuple[dict[str, Any], Recorder]:
    """``review`` POSTed to ``/<secret>/convert``: the function URL event through the webhook
    function's Lambda handler (``functions/webhook/app.py``) to its container's ``Webhook``."""
    from nodewright.wakeup.webhook import PathSecrets, Webhook

    from sandbox.runtime.lambdas import LambdaContext, load_function

    app = load_function("webhook")
    recorder = Recorder()
    app._webhook = Webhook(
        secrets=lambda: PathSecrets(SECRET), wake=lambda event: None, logger=recorder, metrics=recorder
    )
    path = f"/{SECRET}/convert"
    event = {
        "version": "2.0",
        "rawPath": path,
        "headers": {"content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": path}, "requestId": "r"},
        "body": json.dumps(review),
        "isBase64Encoded": False,
    }
    answer = app.handler(event, LambdaContext(5, "nodewright-webhook"))
    assert answer["statusCode"] == 200, answer["body"]
    return json.loads(answer["body"]), recorder


def test_the_webhook_answers_a_hostile_object_with_200_and_a_failure_naming_it() -> None:
    deep = _v1beta1_pool()
    deep["metadata"]["name"] = "deep"
    deep["spec"]["template"]["spec"]["kubelet"] = {"evictionHard": _nested(900)}
    body, recorder = _serve(_review("karpenter.sh/v1", deep))

    assert body["kind"] == "ConversionReview"
    assert body["response"]["uid"] == "r-1"
    assert body["response"]["result"]["status"] == "Failure"
    assert body["response"]["result"]["message"].startswith("NodePool deep: nested deeper than")
    assert any(line.startswith("conversion refused") and "NodePool deep" in line for line in recorder.lines)


def test_the_webhook_converts_an_object_with_an_unreadable_annotation_and_logs_a_warning_naming_it() -> None:
    body, recorder = _serve(_review("karpenter.sh/v1beta1", _v1_pool(**{cr.KUBELET_ANNOTATION: "{not json"})))

    assert body["response"]["result"] == {"status": "Success"}
    assert body["response"]["convertedObjects"][0]["apiVersion"] == "karpenter.sh/v1beta1"
    (warned,) = [line for line in recorder.lines if line.startswith("conversion warning")]
    assert (
        "NodePool p: annotation compatibility.karpenter.sh/v1beta1-kubelet-conversion is not readable"
        in warned
    )
