"""Models: Karpenter v1 defaults, camelCase round trips, durations."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nodewright.api.durations import DURATION_UNITS_STRICT, DurationError, format_duration, parse_duration
from nodewright.api.models import (
    Budget,
    Condition,
    EC2NodeClass,
    NodeClaim,
    NodePool,
    Requirement,
    load_object,
)

NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "general"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            }
        }
    },
}


def test_nodepool_defaults_follow_karpenter_v1() -> None:
    pool = NodePool.from_dict(NODEPOOL)
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.spec.template.spec.expire_after_seconds == 720 * 3600
    assert pool.spec.template.spec.termination_grace_period is None
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.spec.disruption.consolidate_after == "0s"
    assert pool.spec.disruption.budgets == [Budget(nodes="10%")]
    assert pool.spec.weight is None
    assert pool.spec.limits == {}


def test_budget_without_nodes_defaults_to_ten_percent() -> None:
    doc = {**NODEPOOL, "spec": {**NODEPOOL["spec"], "disruption": {"budgets": [{"reasons": ["Drifted"]}]}}}
    (budget,) = NodePool.from_dict(doc).spec.disruption.budgets
    assert budget.nodes == "10%"
    assert budget.applies_to("Drifted")
    assert not budget.applies_to("Empty")
    assert budget.allowed(15) == 2  # a percentage rounds up, as Karpenter does


def test_requirements_are_typed_with_min_values() -> None:
    doc = {**NODEPOOL}
    doc["spec"] = {
        "template": {
            "spec": {
                "requirements": [{"key": "k", "operator": "In", "values": ["a", "b"], "minValues": 2}],
                "nodeClassRef": NODEPOOL["spec"]["template"]["spec"]["nodeClassRef"],
            }
        }
    }
    (req,) = NodePool.from_dict(doc).spec.template.spec.requirements
    assert req == Requirement(key="k", operator="In", values=["a", "b"], min_values=2)


def test_nodepool_to_dict_is_camel_case_with_defaults_written() -> None:
    out = NodePool.from_dict(NODEPOOL).to_dict()
    assert out["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert out["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert out["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }
    assert "status" not in out
    assert NodePool.from_dict(out).to_dict() == out


def test_ec2nodeclass_defaults_metadata_options_and_infers_family_from_alias() -> None:
    nodeclass = EC2NodeClass.from_dict(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "d"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r"},
        }
    )
    options = nodeclass.spec.metadata_options
    assert (options.http_tokens, options.http_put_response_hop_limit) == ("required", 1)
    assert (options.http_endpoint, options.http_protocol_ipv6) == ("enabled", "disabled")
    assert nodeclass.spec.resolved_ami_family == "AL2023"
    assert nodeclass.to_dict()["spec"]["metadataOptions"]["httpTokens"] == "required"


def test_ec2nodeclass_kubelet_keeps_kubernetes_field_names() -> None:
    kubelet = {
        "clusterDNS": ["10.0.0.10"],
        "cpuCFSQuota": True,
        "imageGCHighThresholdPercent": 85,
        "maxPods": 20,
    }
    nodeclass = EC2NodeClass.from_dict({"spec": {"kubelet": kubelet}})
    assert nodeclass.spec.kubelet is not None
    assert nodeclass.spec.kubelet.cluster_dns == ["10.0.0.10"]
    assert nodeclass.spec.kubelet.image_gc_high_threshold_percent == 85
    assert nodeclass.to_dict()["spec"]["kubelet"] == kubelet


def test_nodeclaim_status_and_conditions() -> None:
    claim = NodeClaim.from_dict(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "general-abc12", "labels": {"karpenter.sh/nodepool": "general"}},
            "spec": {"requirements": [], "resources": {"requests": {"cpu": "1500m"}}},
            "status": {
                "providerID": "aws:///us-east-1a/i-0123",
                "instanceID": "i-0123",
                "capacity": {"cpu": "2"},
                "conditions": [
                    {"type": "Launched", "status": "True"},
                    {"type": "Registered", "status": "False"},
                ],
            },
        }
    )
    assert claim.spec.expire_after == "720h"
    assert claim.status.provider_id == "aws:///us-east-1a/i-0123"
    assert claim.status.is_true("Launched")
    assert not claim.status.is_true("Registered")
    assert claim.status.condition("Drifted") is None
    out = claim.to_dict()
    assert out["status"]["providerID"] == "aws:///us-east-1a/i-0123"
    assert out["status"]["instanceID"] == "i-0123"


def test_metadata_round_trips_fields_the_model_does_not_name() -> None:
    doc = {
        **NODEPOOL,
        "metadata": {"name": "general", "resourceVersion": "7", "managedFields": [{"manager": "x"}]},
    }
    pool = NodePool.from_dict(doc)
    assert pool.metadata.resource_version == "7"
    assert pool.to_dict()["metadata"]["managedFields"] == [{"manager": "x"}]


def test_load_object_refuses_old_versions_with_a_hint() -> None:
    with pytest.raises(ValueError, match="nodewright convert"):
        load_object({"apiVersion": "karpenter.sh/v1beta1", "kind": "NodePool"})
    assert isinstance(load_object(NODEPOOL), NodePool)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("720h", 2592000),
        ("30s", 30),
        ("1m30s", 90),
        ("1h30m", 5400),
        ("0s", 0),
        ("Never", None),
        ("500ms", 0.5),
    ],
)
def test_parse_duration(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["30", "1d", "", "1 h", "h1", 30])
def test_parse_duration_refuses_non_durations(text: object) -> None:
    with pytest.raises(DurationError, match="duration"):
        parse_duration(text)  # type: ignore[arg-type]


def test_parse_duration_can_refuse_never() -> None:
    with pytest.raises(DurationError, match="Never is not allowed"):
        parse_duration("Never", allow_never=False)


@pytest.mark.parametrize(("seconds", "text"), [(2592000, "720h"), (90, "1m30s"), (0, "0s"), (None, "Never")])
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**8))
def test_format_then_parse_duration_round_trips(seconds: int) -> None:
    text = format_duration(seconds)
    assert DURATION_UNITS_STRICT.match(text)  # the form Karpenter's CRD pattern accepts
    assert parse_duration(text) == seconds


def test_new_condition_is_stamped_with_a_transition_time() -> None:
    condition = Condition(type="Launched", status="True", reason="Launched")
    assert condition.last_transition_time.endswith("Z")
    assert condition.to_dict()["lastTransitionTime"] == condition.last_transition_time


def test_budget_with_a_node_count() -> None:
    assert Budget(nodes="3").allowed(100) == 3
    assert Budget(nodes="0%").allowed(100) == 0
