"""Disruption leaves static NodePools' nodes to their replicas, as Karpenter v1.14 does: no emptiness,
no consolidation; expiration still applies; a drifted node is replaced one for one from the NodePool's
template (Karpenter's ``StaticDrift``), not while the NodePool scales down, and only within
``limits.nodes``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fakes import FakeCluster
from nodewright.api import labels
from nodewright.cluster.objects import format_time
from nodewright.disruption import consolidation
from nodewright.disruption import flow as disruption_flow
from nodewright.disruption.decide import EMPTY, EXPIRED
from nodewright.provisioning import flow
from nodewright.state import nodepools
from nodewright.state.world import World, observe
from test_disruption_decide import NOW, node, nodeclaim, nodepool, run
from test_provisioning_static import _valid, make, register, static_pool

__all__ = ["_valid"]  # the fixture, shared with test_provisioning_static


def static(pool: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    pool["spec"]["replicas"] = replicas
    return pool


def test_an_empty_node_of_a_static_nodepool_is_not_removed_for_emptiness() -> None:
    assert run([nodeclaim("s-1", pool="static")], pools=[static(nodepool("static"))]).disrupt == []
    dynamic = run([nodeclaim("d-1")], pools=[nodepool()])
    assert [c.reason for c in dynamic.disrupt] == [EMPTY]


def test_an_expired_node_of_a_static_nodepool_still_expires() -> None:
    claim = nodeclaim("s-1", pool="static", age=timedelta(hours=2), expireAfter="1h")
    decision = run([claim], pools=[static(nodepool("static", policy="WhenEmptyOrUnderutilized"))])
    assert [(c.name, c.reason) for c in decision.disrupt] == [("s-1", EXPIRED)]


def test_a_static_nodepool_s_nodes_are_no_consolidation_candidates() -> None:
    claims = []
    for name, pool in (("s-1", "static"), ("d-1", "default")):
        claim = nodeclaim(name, pool=pool)
        claim["metadata"]["labels"][labels.INSTANCE_TYPE] = "m5.large"
        claims.append(claim)
    pools = [
        static(nodepool("static", policy="WhenEmptyOrUnderutilized", after="0s")),
        nodepool(policy="WhenEmptyOrUnderutilized", after="0s"),
    ]
    world = World(
        taken_at=NOW,
        nodeclaims=claims,
        nodes=[node(c["metadata"]["name"]) for c in claims],
        pods=[],
        nodepools=pools,
        nodeclasses=[],
    )
    found, why_not = consolidation.candidates(world, pools, {})
    considered = {c.name for c in found} | set(why_not)
    assert "d-1" in considered
    assert "s-1" not in considered


def drifted_world(replicas: int, **spec: Any) -> tuple[Any, FakeCluster, str]:
    """A static NodePool with one launched, registered, initialized NodeClaim, then ``replicas`` set."""
    ctx, cluster, _ = make()
    cluster.add("NodePool", static_pool(replicas=1, **spec))
    flow.provision(ctx)
    (claim,) = cluster.objects["NodeClaim"].values()
    register(cluster, claim)
    claim["status"]["conditions"].append(
        {"type": "Initialized", "status": "True", "lastTransitionTime": format_time(ctx.clock.now())}
    )
    cluster.objects["NodePool"]["static"]["spec"]["replicas"] = replicas
    ctx.clock.advance(60)
    return ctx, cluster, claim["metadata"]["name"]


def drift_command(ctx: Any, name: str) -> tuple[consolidation.Command | None, disruption_flow.PassReport]:
    world = observe(ctx)
    usable = nodepools.triage(world).usable
    report = disruption_flow.PassReport(drifted={name: "NodePoolDrifted"})
    command = disruption_flow._drift_command(ctx, world, usable=usable, report=report)
    return command, report


def test_a_drifted_static_node_is_replaced_one_for_one_from_the_template() -> None:
    ctx, _, name = drifted_world(replicas=1)
    command, _ = drift_command(ctx, name)
    assert command is not None
    assert [c.name for c in command.candidates] == [name]
    (replacement,) = command.replacements
    assert replacement.nodepool == "static"
    assert replacement.pods == []
    assert [t.name for t in replacement.instance_types] == ["c5.large", "m5.large", "m5.xlarge"]


def test_a_drifted_static_node_waits_while_its_nodepool_scales_down() -> None:
    ctx, _, name = drifted_world(replicas=0)
    command, report = drift_command(ctx, name)
    assert command is None
    assert "scales down first" in report.held[name]


def test_a_drifted_static_node_waits_for_room_under_limits_nodes() -> None:
    ctx, _, name = drifted_world(replicas=1, limits={"nodes": "1"})
    command, report = drift_command(ctx, name)
    assert command is None
    assert "limits.nodes 1 leaves no room" in report.held[name]
