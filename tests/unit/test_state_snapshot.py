"""The simulation's view of a node that is still starting: capacity for the pods nominated to it,
as Karpenter counts it, so no pass launches a second node for them while it becomes Ready."""

from __future__ import annotations

from typing import Any

import pytest
from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context
from nodewright import scheduling
from nodewright.context import Context
from nodewright.state import nodepools
from nodewright.state.snapshot import Simulation
from nodewright.state.world import observe
from test_disruption_consolidation import NODECLASS, NODEPOOL, ZONE, add_node, add_pod
from test_scheduling_support import catalog

STARTING_TAINTS = [
    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    {"key": "example.com/agent-not-ready", "effect": "NoSchedule"},  # the NodeClaim's startupTaint
]


@pytest.fixture
def ctx(monkeypatch: pytest.MonkeyPatch) -> Context:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cloud.types = catalog(spot=False, zones=(ZONE,))
    cluster.add("NodePool", NODEPOOL)
    cluster.add("EC2NodeClass", NODECLASS)
    monkeypatch.setattr(nodepools, "validation_errors", lambda doc: [])
    return fake_context(cluster, cloud, clock)


def starting_node(cluster: Any, *, initialized: bool, reported: bool = True) -> None:
    """An m5.large registered with the taints of a node that is starting (or, once initialized,
    that went NotReady); ``reported``: whether its kubelet has reported allocatable yet."""
    add_node(cluster, "a", "m5.large")
    claim, node = cluster.objects["NodeClaim"]["a"], cluster.objects["Node"]["node-a"]
    claim["spec"]["startupTaints"] = [STARTING_TAINTS[1]]
    claim["status"]["allocatable"] = dict(node["status"]["allocatable"])
    if not initialized:
        claim["status"]["conditions"] = [
            c for c in claim["status"]["conditions"] if c["type"] != "Initialized"
        ]
    node["spec"]["taints"] = list(STARTING_TAINTS)
    if not reported:
        del node["status"]["allocatable"]


def plan_for_pending(ctx: Context) -> Any:
    world = observe(ctx)
    sim = Simulation(world, nodepools.triage(world).usable)
    pending = [p for p in world.pods if not p["spec"].get("nodeName")]
    snapshot, unreadable = sim.snapshot(pending)
    assert not unreadable
    return scheduling.plan(snapshot)


@pytest.mark.parametrize("reported", [True, False], ids=["allocatable-reported", "not-yet-reported"])
def test_a_registered_node_not_yet_initialized_is_capacity_despite_its_starting_taints(
    ctx: Context, reported: bool
) -> None:
    starting_node(ctx.cluster, initialized=False, reported=reported)
    add_pod(ctx.cluster, "web", None, cpu="1")

    plan = plan_for_pending(ctx)

    assert plan.new_claims == []
    assert dict(plan.placements) == {"default/web": "node-a"}


def test_an_initialized_node_that_went_not_ready_is_not_capacity(ctx: Context) -> None:
    starting_node(ctx.cluster, initialized=True)
    add_pod(ctx.cluster, "web", None, cpu="1")

    plan = plan_for_pending(ctx)

    assert "default/web" not in dict(plan.placements)
    assert len(plan.new_claims) == 1
