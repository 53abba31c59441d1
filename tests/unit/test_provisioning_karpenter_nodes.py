"""NodeClaims and Nodes as Karpenter v1.14 makes them: the labels a new NodeClaim carries, and what
registration syncs onto its Node (template annotations; taints unless the kubelet registered them)."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context
from nodewright.api import labels as wk
from nodewright.api.models import NodePool
from nodewright.provisioning import lifecycle, nodeclaims
from nodewright.state.views import ClaimView, NodeView

POOL: dict[str, Any] = {
    "metadata": {"name": "default", "uid": "pool-uid"},
    "spec": {
        "template": {
            "metadata": {
                "labels": {"node-role.kubernetes.io/worker": ""},
                "annotations": {"example.com/owner": "platform"},
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                "requirements": [],
                "taints": [{"key": "example.com/gpu", "effect": "NoSchedule"}],
            },
        }
    },
}


def build(requirements: list[dict[str, Any]]) -> dict[str, Any]:
    return nodeclaims.build(
        name="default-abcde",
        nodepool=NodePool.from_dict(POOL),
        requirements=requirements,
        requests={"cpu": "1"},
    )


def test_a_new_nodeclaim_is_labelled_with_its_ec2nodeclass_and_tenancy() -> None:
    claim_labels = build([])["metadata"]["labels"]
    assert claim_labels[wk.EC2NODECLASS] == "gpu"
    assert claim_labels[wk.NODEPOOL] == "default"
    assert claim_labels["node-role.kubernetes.io/worker"] == ""
    assert claim_labels[wk.INSTANCE_TENANCY] == "default"


def test_a_new_nodeclaim_carries_its_nodepools_template_spec_and_owner() -> None:
    """The spec, annotations and owner a NodeClaim is created with, from a NodePool as the API server
    stores it (the CRD's defaults written): the template's, then the plan's requirements and requests."""
    pool = {
        **POOL,
        "spec": {
            "template": {
                **POOL["spec"]["template"],
                "spec": {
                    **POOL["spec"]["template"]["spec"],
                    "startupTaints": [{"key": "init", "effect": "NoExecute", "value": "1"}],
                    "expireAfter": "720h",
                    "terminationGracePeriod": "2h",
                },
            }
        },
    }
    wanted = [{"key": "example.com/team", "operator": "In", "values": ["a"]}]
    born = nodeclaims.build(
        name="default-abcde", nodepool=NodePool.from_dict(pool), requirements=wanted, requests={"cpu": "1"}
    )
    assert born["spec"] == {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
        "requirements": wanted,
        "resources": {"requests": {"cpu": "1"}},
        "taints": [{"key": "example.com/gpu", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "init", "effect": "NoExecute", "value": "1"}],
        "expireAfter": "720h",
        "terminationGracePeriod": "2h",
    }
    assert born["metadata"]["annotations"]["example.com/owner"] == "platform"
    assert born["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "name": "default",
            "uid": "pool-uid",
            "blockOwnerDeletion": True,
        }
    ]
    assert born["metadata"]["finalizers"] == [wk.TERMINATION_FINALIZER]


@pytest.mark.parametrize(
    ("values", "tenancy"),
    [(["dedicated"], "dedicated"), (["default", "dedicated"], "default"), (["default"], "default")],
)
def test_dedicated_tenancy_only_when_it_is_the_only_one_allowed(values: list[str], tenancy: str) -> None:
    requirement = {"key": wk.INSTANCE_TENANCY, "operator": "In", "values": values}
    assert build([requirement])["metadata"]["labels"][wk.INSTANCE_TENANCY] == tenancy


def registered_node(taints: list[dict[str, Any]], node_labels: dict[str, str]) -> dict[str, Any]:
    clock = FakeClock()
    cluster = FakeCluster(clock)
    ctx = fake_context(cluster, FakeCloudProvider(clock), clock)
    claim = build([])
    claim["metadata"]["annotations"]["karpenter.sh/nodepool-hash-version"] = "v3"
    claim["status"] = {"providerID": "aws:///us-west-2a/i-1"}
    cluster.add("NodeClaim", claim)
    node = cluster.add(
        "Node",
        {
            "metadata": {"name": "node-1", "labels": node_labels},
            "spec": {"providerID": "aws:///us-west-2a/i-1", "taints": taints},
        },
    )
    lifecycle.register(
        ctx, ClaimView.of(cluster.objects["NodeClaim"]["default-abcde"]), NodeView.of(node), clock.now()
    )
    return cluster.objects["Node"]["node-1"]


UNREGISTERED = {"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}


def test_registration_copies_the_template_annotations_but_not_the_bookkeeping_ones() -> None:
    node = registered_node([UNREGISTERED], {})
    annotations = node["metadata"].get("annotations") or {}
    assert annotations["example.com/owner"] == "platform"
    assert not any(k.startswith(("karpenter.sh/", "karpenter.k8s.aws/")) for k in annotations)


def test_registration_lifts_the_unregistered_taint_and_syncs_the_nodeclaims_taints() -> None:
    node = registered_node([UNREGISTERED], {})
    assert [t["key"] for t in node["spec"]["taints"]] == ["example.com/gpu"]


def test_a_node_that_registered_its_own_taints_keeps_them_as_they_are() -> None:
    """karpenter.sh/do-not-sync-taints: a DaemonSet may already have lifted a taint the kubelet
    registered; registration must not put it back."""
    node = registered_node([UNREGISTERED], {wk.DO_NOT_SYNC_TAINTS: "true"})
    assert node["spec"]["taints"] == []
