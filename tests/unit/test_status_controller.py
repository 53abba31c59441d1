"""EC2NodeClass and NodePool status as Karpenter v1.14 keeps it (``nodewright.status``), and the
NodePool triage's conditions: a field Nodewright does not act on is named, never disabling."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context
from nodewright import status
from nodewright.context import Context
from nodewright.state import nodepools
from nodewright.state.world import observe

NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default", "generation": 3},
    "spec": {
        "role": "NodeRole",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
    },
}
NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default", "generation": 1},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gte", "values": ["3"]}
                ],
            }
        }
    },
}


@pytest.fixture
def env() -> tuple[Context, FakeCluster, FakeCloudProvider]:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cluster.add("EC2NodeClass", NODECLASS)
    cluster.add("NodePool", NODEPOOL)
    return fake_context(cluster, cloud, clock), cluster, cloud


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def test_a_resolving_nodeclass_gets_its_status_and_ready(
    env: tuple[Context, FakeCluster, FakeCloudProvider],
) -> None:
    ctx, cluster, _ = env
    report = status.reconcile(ctx)
    nodeclass = cluster.objects["EC2NodeClass"]["default"]
    assert nodeclass["status"]["subnets"] == [{"id": "subnet-1", "zone": "us-west-2a", "zoneID": "usw2-az1"}]
    assert nodeclass["status"]["instanceProfile"] == "profile"
    assert conditions(nodeclass) == {
        "SubnetsReady": ("True", "SubnetsReady"),
        "SecurityGroupsReady": ("True", "SecurityGroupsReady"),
        "AMIsReady": ("True", "AMIsReady"),
        "InstanceProfileReady": ("True", "InstanceProfileReady"),
        "ValidationSucceeded": ("True", "ValidationSucceeded"),
        "FieldsNotActedOn": ("False", "AllFieldsActedOn"),
        "Ready": ("True", "Ready"),
    }
    assert all(c["observedGeneration"] == 3 for c in nodeclass["status"]["conditions"])
    assert report.nodeclasses == ["default"]
    assert report.not_ready == {}


def test_a_quiet_minute_writes_nothing(env: tuple[Context, FakeCluster, FakeCloudProvider]) -> None:
    ctx, cluster, _ = env
    status.reconcile(ctx)
    writes = [c for c in cluster.calls if c.startswith("patch")]
    status.reconcile(ctx)
    assert [c for c in cluster.calls if c.startswith("patch")] == writes


def test_a_selector_matching_nothing_makes_the_nodeclass_and_its_nodepools_not_ready(
    env: tuple[Context, FakeCluster, FakeCloudProvider],
) -> None:
    ctx, cluster, cloud = env
    cloud.nodeclass_problems["SubnetsReady"] = ("SubnetsNotFound", "SubnetSelector did not match any Subnets")

    report = status.reconcile(ctx)

    nodeclass = cluster.objects["EC2NodeClass"]["default"]
    assert conditions(nodeclass)["SubnetsReady"] == ("False", "SubnetsNotFound")
    assert conditions(nodeclass)["Ready"] == ("False", "UnhealthyDependents")
    assert "SubnetsReady=False" in report.not_ready["default"]
    pool = cluster.objects["NodePool"]["default"]
    assert conditions(pool)["NodeClassReady"] == ("False", "NodeClassNotReady")
    assert conditions(pool)["Ready"] == ("False", "UnhealthyDependents")
    assert any(e[2] == "NodeClassNotReady" for e in cluster.events)
    # The provisioner's triage sees the same: no node for a NodePool whose subnets are gone.
    assert not nodepools.triage(observe(ctx)).is_usable("default")


def test_a_field_not_acted_on_is_named_and_disables_nothing(
    env: tuple[Context, FakeCluster, FakeCloudProvider],
) -> None:
    ctx, cluster, _ = env
    pool = copy.deepcopy(NODEPOOL)
    pool["metadata"]["name"] = "static"
    pool["spec"]["replicas"] = 3
    cluster.add("NodePool", pool)
    nodeclass = copy.deepcopy(NODECLASS)
    nodeclass["metadata"]["name"] = "raid"
    nodeclass["spec"]["kubelet"] = {"shutdownGracePeriod": "30s"}  # passed through by Karpenter, not here
    cluster.add("EC2NodeClass", nodeclass)

    status.reconcile(ctx)  # the stack's staticCapacity is off (the default)

    static = cluster.objects["NodePool"]["static"]
    assert conditions(static)["FieldsNotActedOn"] == ("True", "NotActedOn")
    assert conditions(static)["Ready"] == ("True", "Ready")
    message = next(c["message"] for c in static["status"]["conditions"] if c["type"] == "FieldsNotActedOn")
    assert message.startswith("spec.replicas: not acted on (the stack's staticCapacity setting is off")
    raid = cluster.objects["EC2NodeClass"]["raid"]
    assert conditions(raid)["FieldsNotActedOn"] == ("True", "NotActedOn")
    assert conditions(raid)["Ready"] == ("True", "Ready")
    reasons = [(e[1], e[2]) for e in cluster.events]
    assert ("static", "FieldsNotActedOn") in reasons
    assert ("raid", "FieldsNotActedOn") in reasons
    assert nodepools.triage(observe(ctx)).is_usable("static")


def test_nodepool_status_counts_its_nodeclaims_and_the_nodeclass_generation(
    env: tuple[Context, FakeCluster, FakeCloudProvider],
) -> None:
    ctx, cluster, _ = env
    for name, cpu in (("default-a", "2"), ("default-b", "4")):
        cluster.add(
            "NodeClaim",
            {
                "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
                "spec": {"nodeClassRef": {"name": "default"}, "requirements": []},
                "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "29"}},
            },
        )

    status.reconcile(ctx)

    pool = cluster.objects["NodePool"]["default"]["status"]
    assert pool["nodes"] == 2
    assert pool["resources"] == {"cpu": "6", "memory": "16Gi", "nodes": "2", "pods": "58"}
    assert pool["nodeClassObservedGeneration"] == 3
    assert conditions(cluster.objects["NodePool"]["default"]) == {
        "ValidationSucceeded": ("True", "ValidationSucceeded"),
        "NodeClassReady": ("True", "NodeClassReady"),
        "FieldsNotActedOn": ("False", "AllFieldsActedOn"),
        "Ready": ("True", "Ready"),
    }


def _overlay(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name, "generation": 1},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
            ],
            **spec,
        },
    }


def test_nodeoverlays_get_karpenters_conditions_with_the_gate(
    env: tuple[Context, FakeCluster, FakeCloudProvider],
) -> None:
    from dataclasses import replace

    from nodewright.scheduling import Offering, instance_type_from_ec2
    from test_scheduling_support import ec2_info

    ctx, cluster, cloud = env
    cloud.types = [instance_type_from_ec2(ec2_info("m5.large"), [Offering("us-west-2a", "on-demand", 0.096)])]
    cluster.add("NodeOverlay", _overlay("zz-savings", priceAdjustment="-20%"))
    cluster.add("NodeOverlay", _overlay("aa-negotiated", price="0.05"))  # same weight, same offering
    cluster.add("NodeOverlay", _overlay("bogus", requirements=[], capacity={"nvidia.com/gpu": "1"}))
    cluster.objects["NodeOverlay"]["bogus"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["preemptible"]}
    ]
    status.reconcile(ctx)
    assert "status" not in cluster.objects["NodeOverlay"]["zz-savings"], "the gate is off by default"

    ctx.settings = replace(ctx.settings, node_overlay=True)
    report = status.reconcile(ctx)
    overlays = cluster.objects["NodeOverlay"]
    assert conditions(overlays["zz-savings"]) == {
        "ValidationSucceeded": ("True", "ValidationSucceeded"),
        "Ready": ("True", "Ready"),
    }
    assert conditions(overlays["aa-negotiated"]) == {
        "ValidationSucceeded": ("False", "Conflict"),
        "Ready": ("False", "UnhealthyDependents"),
    }
    (conflict,) = [
        c for c in overlays["aa-negotiated"]["status"]["conditions"] if c["type"] == "ValidationSucceeded"
    ]
    assert conflict["message"] == "conflict with another overlay"
    assert conditions(overlays["bogus"])["ValidationSucceeded"] == ("False", "RuntimeValidation")
    assert sorted(report.nodeoverlays) == ["aa-negotiated", "bogus", "zz-savings"]
    assert status.reconcile(ctx).nodeoverlays == [], "a quiet minute writes nothing"
