"""Reading a v1 object through v1beta1 and writing it back, as kube-apiserver does it around the
conversion webhook, gives back every v1 field (issue 24, defect 3).

Between the webhook's two conversions the API server prunes the v1beta1 answer to the v1beta1
schema, the client sends it back (``kubectl get … -o yaml | kubectl replace -f -``), and the request
is pruned and defaulted as v1beta1; the webhook's v1 answer is pruned to the v1 schema and read with
v1's defaults. The sandbox emulator's pruning and defaulting (``sandbox.apiserver.schema``) play the
API server here, so the webhook's own model of it is checked against an independent one.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodewright.api import conversion_review as cr
from nodewright.api.schema import SCHEMAS, SCHEMAS_V1BETA1

from sandbox.apiserver.schema import apply_defaults, prune_custom, validate_custom

NODE_ROLE = "KarpenterNodeRole-prop"
KINDS = {"NodePool": "karpenter.sh", "NodeClaim": "karpenter.sh", "EC2NodeClass": "karpenter.k8s.aws"}


def stored(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a v1 read gives it: v1's defaults applied (kube-apiserver defaults on reading etcd)."""
    out = copy.deepcopy(obj)
    apply_defaults(out, SCHEMAS[(KINDS[out["kind"]], out["kind"])])
    return out


def read_as_v1beta1(v1: dict[str, Any]) -> dict[str, Any]:
    """``kubectl get <kind>.v1beta1 … -o yaml``: the webhook's answer pruned to the v1beta1 schema."""
    group, kind = KINDS[v1["kind"]], v1["kind"]
    out = cr.convert(v1, f"{group}/v1beta1")
    prune_custom(out, SCHEMAS_V1BETA1[(group, kind)])
    return out


def write_as_v1beta1(v1beta1: dict[str, Any]) -> dict[str, Any]:
    """``kubectl replace -f -`` of a v1beta1 body: the request pruned and defaulted as v1beta1 (and
    valid there), converted by the webhook, pruned to v1 and read back with v1's defaults."""
    group, kind = KINDS[v1beta1["kind"]], v1beta1["kind"]
    sent = copy.deepcopy(v1beta1)
    prune_custom(sent, SCHEMAS_V1BETA1[(group, kind)])
    apply_defaults(sent, SCHEMAS_V1BETA1[(group, kind)])
    assert validate_custom(sent, SCHEMAS_V1BETA1[(group, kind)]) == []
    out = cr.convert(sent, f"{group}/v1", node_role=NODE_ROLE)
    prune_custom(out, SCHEMAS[(group, kind)])
    return stored(out)


def round_trip(v1: dict[str, Any]) -> dict[str, Any]:
    return write_as_v1beta1(read_as_v1beta1(stored(v1)))


def _pool(**spec: Any) -> dict[str, Any]:
    template_spec = spec.pop("template_spec", {})
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "batch"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                    **template_spec,
                }
            },
            **spec,
        },
    }


def _nodeclass(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "NodeRole",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            **spec,
        },
    }


REASON_SCOPED = {
    "consolidationPolicy": "WhenEmptyOrUnderutilized",
    "consolidateAfter": "1m",
    "budgets": [
        {"nodes": "0", "reasons": ["Empty", "Drifted"]},
        {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Underutilized"]},
        {"nodes": "20%"},
    ],
}


def test_a_nodepools_grace_period_and_reason_scoped_budgets_survive_a_v1beta1_read_and_replace() -> None:
    pool = _pool(template_spec={"terminationGracePeriod": "48h"}, disruption=REASON_SCOPED)
    back = round_trip(pool)
    assert back["spec"]["template"]["spec"]["terminationGracePeriod"] == "48h"
    assert back["spec"]["disruption"]["budgets"] == REASON_SCOPED["budgets"]
    assert back == stored(pool)


def test_an_ec2nodeclasses_ssm_parameter_and_pinned_alias_terms_survive_in_their_order() -> None:
    terms = [
        {"ssmParameter": "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended"},
        {"id": "ami-0123456789abcdef0"},
        {"tags": {"team": "a"}, "owner": "self"},
    ]
    nodeclass = _nodeclass(amiFamily="AL2023", amiSelectorTerms=terms, kubelet={"maxPods": 30})
    assert round_trip(nodeclass)["spec"]["amiSelectorTerms"] == terms
    assert round_trip(nodeclass) == stored(nodeclass)
    pinned = _nodeclass(amiSelectorTerms=[{"alias": "bottlerocket@v1.20.3"}])
    assert round_trip(pinned) == stored(pinned)


def test_a_nodeclaims_expiry_and_grace_period_survive() -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "batch-x2k4p", "labels": {"karpenter.sh/nodepool": "batch"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
            "expireAfter": "Never",
            "terminationGracePeriod": "2h",
        },
        "status": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0"},
    }
    assert round_trip(claim) == stored(claim)


def test_an_edit_through_v1beta1_keeps_v1_only_members_with_their_list_items() -> None:
    pool = stored(_pool(template_spec={"terminationGracePeriod": "48h"}, disruption=REASON_SCOPED))
    v1beta1 = read_as_v1beta1(pool)
    # A budget added in front and the weight changed, through v1beta1: each budget keeps its reasons.
    v1beta1["spec"]["disruption"]["budgets"].insert(0, {"nodes": "5"})
    v1beta1["spec"]["weight"] = 30
    back = write_as_v1beta1(v1beta1)
    assert back["spec"]["disruption"]["budgets"] == [{"nodes": "5"}, *REASON_SCOPED["budgets"]]
    assert back["spec"]["weight"] == 30
    assert back["spec"]["template"]["spec"]["terminationGracePeriod"] == "48h"


def test_a_change_made_through_v1beta1_wins_over_what_the_annotation_would_restore() -> None:
    nodeclass = stored(_nodeclass(amiSelectorTerms=[{"alias": "al2023@v20240807"}]))
    v1beta1 = read_as_v1beta1(nodeclass)
    assert v1beta1["spec"]["amiFamily"] == "AL2023"
    v1beta1["spec"]["amiFamily"] = "Bottlerocket"  # a new family: its latest AMI, not the pinned AL2023 one
    back = write_as_v1beta1(v1beta1)
    assert back["spec"]["amiFamily"] == "Bottlerocket"
    assert back["spec"]["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]


def test_a_field_added_to_the_v1_schema_later_survives_with_no_change_to_the_conversion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rule is general: a v1-only field the conversion has never heard of (here a list of
    objects inside each budget, as Karpenter may add) travels in the annotation like the others."""
    key = ("karpenter.sh", "NodePool")
    future = copy.deepcopy(SCHEMAS[key])
    budget = future["properties"]["spec"]["properties"]["disruption"]["properties"]["budgets"]["items"]
    budget["properties"]["windows"] = {
        "type": "array",
        "items": {"type": "object", "properties": {"zone": {"type": "string"}, "max": {"type": "integer"}}},
    }
    future["properties"]["spec"]["properties"]["template"]["properties"]["spec"]["properties"][
        "drainPolicy"
    ] = {"type": "string"}
    monkeypatch.setitem(SCHEMAS, key, future)
    pool = _pool(
        template_spec={"drainPolicy": "Graceful"},
        disruption={
            "budgets": [{"nodes": "1", "windows": [{"zone": "a", "max": 2}, {"zone": "b"}]}, {"nodes": "3"}]
        },
    )
    assert round_trip(pool) == stored(pool)


# --------------------------------------------------------------------------- random v1 objects

DATE_TIMES = st.sampled_from(["2026-01-02T03:04:05Z", "2025-12-31T23:59:59Z"])
QUANTITIES = st.one_of(
    st.integers(0, 10**6), st.sampled_from(["1", "100m", "1.5", "2Gi", "512Mi", "3e3", "+1k", "0"])
)
PLAIN = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-./@ "), min_size=1, max_size=12)
KEYS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-./"), min_size=1, max_size=10)


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("format") == "date-time":
        return DATE_TIMES
    strings = st.from_regex(re.compile(schema["pattern"]), fullmatch=True) if "pattern" in schema else PLAIN
    low, high = schema.get("minLength", 0), schema.get("maxLength", 10**6)
    return strings.filter(lambda s: low <= len(s) <= high)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values valid against a structural schema (types, enums, patterns, bounds, required fields)."""
    if schema.get("x-kubernetes-int-or-string"):
        return QUANTITIES
    kind = schema.get("type")
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return st.integers(schema.get("minimum", 0), schema.get("maximum", 10**9))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        high = min(schema.get("maxItems", 3), 3)
        return st.lists(from_schema(schema["items"]), min_size=schema.get("minItems", 0), max_size=high)
    if "properties" in schema:
        required = set(schema.get("required", []))
        props = schema["properties"]
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in props.items() if k in required},
            optional={k: from_schema(v) for k, v in props.items() if k not in required},
        )
    if isinstance(schema.get("additionalProperties"), dict):
        high = min(schema.get("maxProperties", 3), 3)
        return st.dictionaries(KEYS, from_schema(schema["additionalProperties"]), max_size=high)
    return st.just({})


def v1_objects(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    group = KINDS[kind]
    schema = SCHEMAS[(group, kind)]["properties"]

    def build(name: str, spec: dict[str, Any], status: dict[str, Any] | None) -> dict[str, Any]:
        if kind == "EC2NodeClass" and not spec.get("role") and not spec.get("instanceProfile"):
            spec["role"] = "NodeRole"  # Karpenter v1 refuses an EC2NodeClass with neither
        obj = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}
        return obj if status is None else {**obj, "status": status}

    return st.builds(
        build,
        st.sampled_from(["default", "gpu", "team-b"]),
        from_schema(schema["spec"]),
        st.none() | from_schema(schema["status"]),
    )


PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_field_of_a_random_v1_object_survives_a_v1beta1_read_and_write_back(kind: str) -> None:
    @PROPERTY
    @given(v1_objects(kind))
    def check(obj: dict[str, Any]) -> None:
        assert round_trip(obj) == stored(obj)

    check()


def test_karpenters_v1_only_operators_read_as_the_bound_v1beta1_can_say_and_come_back() -> None:
    """Gte/Lte (Karpenter v1.9) have no v1beta1 word: a v1beta1 reader sees Gt N-1 / Lt N+1, the
    same integer bound, and the write-back restores the v1 operator."""
    pool = _pool(
        template_spec={
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]},
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lte", "values": ["16"]},
            ]
        }
    )
    read = read_as_v1beta1(stored(pool))
    assert read["spec"]["template"]["spec"]["requirements"] == [
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["17"]},
    ]
    assert round_trip(pool) == stored(pool)


def test_a_v1_value_v1beta1_has_no_word_for_is_left_out_of_the_v1beta1_form_and_comes_back() -> None:
    nodeclass = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "win"},
        "spec": {
            "role": "NodeRole",
            "amiFamily": "Windows2025",
            "amiSelectorTerms": [{"id": "ami-0123456789abcdef0"}],
            "subnetSelectorTerms": [{"tags": {"k": "v"}}],
            "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
        },
    }
    read = read_as_v1beta1(stored(nodeclass))
    assert "amiFamily" not in read["spec"]  # v1beta1's enum stops at Windows2022
    assert round_trip(nodeclass) == stored(nodeclass)
