"""Round trips of the conversion webhook over random v1beta1 manifests (the shapes the seeds use and
the fields they leave out): v1beta1 → v1 → v1beta1 gives back what went in, and so does reading the
stored v1 through v1beta1 and writing it back (v1 → v1beta1 → v1)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from nodewright.api import conversion_review as cr
from nodewright.api.schema import SCHEMAS_V1BETA1

from sandbox.apiserver.schema import apply_defaults

NODE_ROLE = "KarpenterNodeRole-prop"
names = st.sampled_from(["default", "gpu", "a", "team-b", "us-west-2a", "spot"])
durations = st.sampled_from(["30s", "5m", "1h", "168h", "720h", "Never"])
requirement = st.fixed_dictionaries(
    {
        "key": st.sampled_from(
            [
                "karpenter.sh/capacity-type",
                "node.kubernetes.io/instance-type",
                "topology.kubernetes.io/zone",
                "team",
            ]
        ),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
    },
    optional={"values": st.lists(names, max_size=3)},
)
taint = st.fixed_dictionaries(
    {"key": names, "effect": st.sampled_from(["NoSchedule", "NoExecute"])}, optional={"value": names}
)
kubelet = st.fixed_dictionaries(
    {},
    optional={
        "maxPods": st.integers(1, 250),
        "containerRuntime": st.just("containerd"),
        "systemReserved": st.dictionaries(
            st.sampled_from(["cpu", "memory"]), st.sampled_from(["100m", "1Gi"])
        ),
    },
)
nodeclass_ref = st.one_of(
    st.fixed_dictionaries({"name": names}),
    st.fixed_dictionaries(
        {"name": names},
        optional={"apiVersion": st.just("karpenter.k8s.aws/v1beta1"), "kind": st.just("EC2NodeClass")},
    ),
)
disruption = st.one_of(
    st.fixed_dictionaries(
        {"consolidationPolicy": st.just("WhenEmpty")},
        optional={"consolidateAfter": durations, "expireAfter": durations},
    ),
    st.fixed_dictionaries(
        {"consolidationPolicy": st.just("WhenUnderutilized")},
        optional={"expireAfter": durations, "budgets": st.just([{"nodes": "10%"}])},
    ),
)
template_spec = st.fixed_dictionaries(
    {"requirements": st.lists(requirement, max_size=3), "nodeClassRef": nodeclass_ref},
    optional={"taints": st.lists(taint, max_size=2), "kubelet": kubelet},
)
nodepool = st.builds(
    lambda name, spec, disrupt, labels, weight: {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"metadata": {"labels": labels}, "spec": spec} if labels else {"spec": spec},
            **({"disruption": disrupt} if disrupt else {}),
            **({"weight": weight} if weight else {}),
        },
    },
    names,
    template_spec,
    st.one_of(st.none(), disruption),
    st.dictionaries(names, names, max_size=2),
    st.one_of(st.none(), st.integers(1, 100)),
)
selector = st.lists(
    st.fixed_dictionaries({"tags": st.dictionaries(names, names, min_size=1, max_size=2)}), min_size=1
)
nodeclass = st.builds(
    lambda name, spec: {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": spec,
    },
    names,
    st.fixed_dictionaries(
        {
            "amiFamily": st.sampled_from(["AL2", "AL2023", "Bottlerocket", "Custom"]),
            "subnetSelectorTerms": selector,
            "securityGroupSelectorTerms": selector,
        },
        optional={
            "role": names,
            "instanceProfile": names,
            "amiSelectorTerms": st.lists(
                st.fixed_dictionaries({"id": st.just("ami-0123456789abcdef0")}), min_size=1
            ),
            "tags": st.dictionaries(names, names, max_size=2),
            "userData": st.sampled_from(["", "#!/bin/bash\necho hi"]),
        },
    ),
)


def _round_trip(manifest: dict[str, Any]) -> None:
    """v1beta1 → v1 → v1beta1 gives back the manifest as the API server takes it (defaulted as
    v1beta1: a v1beta1 write is, before the webhook sees it), and v1 → v1beta1 → v1 the v1 form."""
    group = manifest["apiVersion"].split("/")[0]
    obj = copy.deepcopy(manifest)
    apply_defaults(obj, SCHEMAS_V1BETA1[(group, obj["kind"])])
    v1 = cr.convert(obj, f"{group}/v1", node_role=NODE_ROLE)
    assert v1["apiVersion"] == f"{group}/v1"
    assert cr.convert(v1, f"{group}/v1beta1") == obj
    assert cr.convert(cr.convert(v1, f"{group}/v1beta1"), f"{group}/v1", node_role=NODE_ROLE) == v1


@settings(max_examples=60, deadline=None)
@given(nodepool)
def test_a_v1beta1_nodepool_round_trips_through_v1(pool: dict[str, Any]) -> None:
    _round_trip(pool)


@settings(max_examples=60, deadline=None)
@given(nodeclass)
def test_a_v1beta1_ec2nodeclass_round_trips_through_v1_and_always_has_a_role_or_profile(
    nodeclass_doc: dict[str, Any],
) -> None:
    _round_trip(nodeclass_doc)
    spec = cr.convert(nodeclass_doc, "karpenter.k8s.aws/v1", node_role=NODE_ROLE)["spec"]
    assert spec.get("role") or spec.get("instanceProfile")
