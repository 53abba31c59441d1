"""Many nodes → several, in waves (``disruption.repack``), and ``consolidationPolicy: Balanced``
(``disruption.balanced``), through the disruption flow's own passes on a fake cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes import FakeCloudProvider, FakeCluster
from nodewright.cluster import objects
from nodewright.context import Context
from nodewright.disruption import balanced, consolidation
from test_disruption_consolidation import (
    NODEPOOL,
    add_node,
    add_pod,
    env,  # the fixture, shared
    one_pass,
    pass_after_validation,
    pass_after_validation_or_none,
)
from test_scheduling_support import catalog

__all__ = ["env"]

Env = tuple[Context, FakeCluster, FakeCloudProvider]


def pool_with(cluster: FakeCluster, **disruption: Any) -> dict[str, Any]:
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"].update(disruption)
    cluster.objects["NodePool"]["default"] = {**pool, "kind": "NodePool"}
    return pool


def fragmented(cluster: FakeCluster, pool: dict[str, Any], count: int, *, cpu: str = "3") -> None:
    """``count`` m5.2xlarge nodes ($0.384/h), each running one pod of ``cpu``: two such pods fit
    one m5.2xlarge, one an m5.xlarge ($0.192/h)."""
    for i in range(count):
        add_node(cluster, f"n{i}", "m5.2xlarge", pool=pool)
        add_pod(cluster, f"web-{i}", f"node-n{i}", cpu=cpu)


def initialize(cluster: FakeCluster, name: str) -> None:
    cluster.objects["NodeClaim"][name]["status"]["conditions"].append(
        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-02T12:00:30Z"}
    )


def test_a_fragmented_pool_is_replaced_by_several_cheaper_nodes_all_initialized_before_any_drain(
    env: Env,
) -> None:
    ctx, cluster, cloud = env
    pool = pool_with(cluster)
    fragmented(cluster, pool, 6)

    report = pass_after_validation(ctx)

    [decision] = report.decisions
    assert decision.method == "repack"
    assert sorted(decision.nodeclaims) == [f"n{i}" for i in range(6)]
    assert decision.price_before == pytest.approx(6 * 0.384)
    assert decision.price_after < decision.price_before
    launched = [r.nodeclaim_name for r in cloud.requests]
    assert len(launched) >= 2, "the pods need several new nodes: one command launches them all"
    assert decision.description.startswith(
        f"Underutilized, replacing 6 nodes (m5.2xlarge x6) with {len(launched)} nodes"
    )
    for name in decision.nodeclaims:
        assert objects.has_taint(cluster.objects["Node"][f"node-{name}"], "karpenter.sh/disrupted")
        assert not objects.is_deleting(cluster.objects["NodeClaim"][name])

    for replacement in launched[:-1]:  # all but one replacement initialized: no drain yet
        initialize(cluster, replacement)
    assert one_pass(ctx).commands[0].action == "waiting"
    assert not any(objects.is_deleting(cluster.objects["NodeClaim"][n]) for n in decision.nodeclaims)

    initialize(cluster, launched[-1])
    assert one_pass(ctx).commands[0].action == "draining"
    assert all(objects.is_deleting(cluster.objects["NodeClaim"][n]) for n in decision.nodeclaims)


@pytest.mark.parametrize(("budget", "allowed"), [("50%", 3), ("2", 2), ("10%", 1)])
def test_a_wave_never_takes_more_nodes_than_the_budget_allows(env: Env, budget: str, allowed: int) -> None:
    ctx, cluster, _cloud = env
    pool = pool_with(cluster, budgets=[{"nodes": budget}])
    fragmented(cluster, pool, 6)

    report = pass_after_validation_or_none(ctx)

    [decision] = report.decisions
    assert 1 <= len(decision.nodeclaims) <= allowed
    tainted = [n for n in cluster.objects["Node"].values() if objects.has_taint(n, "karpenter.sh/disrupted")]
    assert len(tainted) == len(decision.nodeclaims)


def test_the_wave_leaves_do_not_disrupt_and_pdb_held_nodes_and_uses_their_room(env: Env) -> None:
    ctx, cluster, cloud = env
    pool = pool_with(cluster)
    fragmented(cluster, pool, 4)
    cluster.objects["Pod"]["web-0"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    cluster.add(
        "PodDisruptionBudget",
        {
            "metadata": {"name": "web-1", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web-1"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1},
        },
    )

    report = pass_after_validation(ctx)

    [decision] = report.decisions
    assert set(decision.nodeclaims) == {"n2", "n3"}
    assert decision.action == "delete", "their pods fit the room the held nodes have"
    assert cloud.requests == []


@pytest.mark.parametrize("pending", [False, True])
def test_a_pending_pod_keeps_its_priority_over_a_wave(env: Env, pending: bool) -> None:
    """The pods a wave moves are planned after the pending ones: n0 stays (do-not-disrupt) with
    room for n1's and n2's pods, unless a pending pod needs that room; then they need a new node."""
    ctx, cluster, cloud = env
    pool = pool_with(cluster)
    fragmented(cluster, pool, 3, cpu="1")
    cluster.objects["Pod"]["web-0"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    cluster.objects["Pod"]["web-0"]["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = "true"
    if pending:
        add_pod(cluster, "pending", None, cpu="4")

    report = pass_after_validation_or_none(ctx)

    [decision] = report.decisions
    assert sorted(decision.nodeclaims) == ["n1", "n2"]
    assert decision.action == ("replace" if pending else "delete")
    assert bool(cloud.requests) == pending


# --- Balanced ---------------------------------------------------------------------------------------


def test_balanced_scores_a_move_as_karpenter_documents() -> None:
    """Karpenter's examples: a single-node pool's delete scores 1 (passes); an empty node's delete
    passes; a move saving nothing never does; k = 2 (score ≥ 0.5)."""
    totals = balanced.Totals(cost=1.0, disruption=11.0)  # one node, ten default pods
    node = consolidation.Candidate({}, {}, "p", [{} for _ in range(10)], 1.0, 10.0)
    assert balanced.score([node], 1.0, "p", totals).score == pytest.approx(1.0)
    assert balanced.score([node], 0.0, "p", totals).approved is False
    # 100 nodes of 10 pods at $1/h: moving one node's pods must save at least $0.50/h
    pool = balanced.Totals(cost=100.0, disruption=1100.0)
    assert balanced.score([node], 0.50, "p", pool).approved
    assert not balanced.score([node], 0.49, "p", pool).approved
    empty = consolidation.Candidate({}, {}, "p", [], 0.1, 0.0)
    assert balanced.score([empty], 0.1, "p", pool).approved, "an empty node's delete always passes"


@pytest.mark.parametrize("policy", ["Balanced", "WhenEmptyOrUnderutilized"])
def test_balanced_pool_refuses_a_marginal_move_and_says_why(env: Env, policy: str) -> None:
    """Ten m5.xlarge ($0.192/h) nodes; n0 runs twelve small pods. Removing n0 saves at most its
    price, 10 % of the pool's cost, for 13/49 of the pool's disruption (score 0.38 < 0.5): Balanced
    refuses what WhenEmptyOrUnderutilized does."""
    ctx, cluster, _cloud = env
    pool = pool_with(cluster, consolidationPolicy=policy)
    for i in range(10):
        add_node(cluster, f"n{i}", "m5.xlarge", pool=pool)
        pods = 12 if i == 0 else 3
        for j in range(pods):
            add_pod(cluster, f"web-{i}-{j}", f"node-n{i}", cpu="100m" if i == 0 else "1")
    ctx.clock.advance(consolidation.VALIDATION_SECONDS)
    report = pass_after_validation_or_none(ctx)

    taken = {n for d in report.decisions for n in d.nodeclaims}
    if policy == "WhenEmptyOrUnderutilized":
        assert "n0" in taken, report.decisions
        return
    assert "n0" not in taken, report.decisions
    assert any(e[1] == "n0" and "Balanced" in e[3] for e in cluster.events), cluster.events


def test_balanced_pool_takes_a_move_that_saves_enough(env: Env) -> None:
    ctx, cluster, _cloud = env
    pool = pool_with(cluster, consolidationPolicy="Balanced")
    fragmented(cluster, pool, 6)

    report = pass_after_validation(ctx)

    [decision] = report.decisions
    assert decision.savings > 0
    assert len(decision.nodeclaims) >= 2


def test_balanced_pool_empty_nodes_are_removed_by_emptiness(env: Env) -> None:
    ctx, cluster, _cloud = env
    pool = pool_with(cluster, consolidationPolicy="Balanced")
    add_node(cluster, "idle", "m5.xlarge", pool=pool)
    report = one_pass(ctx)
    assert [d.nodeclaim for d in report.disrupted] == ["idle"]


def test_a_wave_that_saves_a_hair_keeps_every_replacements_cheapest_type() -> None:
    """Two replacements, $2.176/h and $0.0042/h, for nodes costing one float step more: each
    replacement's share of the slack is below half a step of $2.176, and the big one must still keep
    its cheapest type (a replacement without types cannot launch)."""
    import math

    from nodewright.scheduling import CandidateType, NewClaim, Offering, Requirements

    def option(name: str, price: float) -> CandidateType:
        return CandidateType(name, price, (Offering("z", "on-demand", price),))

    claims = [
        NewClaim("p", Requirements([]), ["default/a"], [option("big", 2.176), option("bigger", 2.5)]),
        NewClaim("p", Requirements([]), ["default/b"], [option("tiny", 0.0042)]),
    ]
    price = math.nextafter(2.176 + 0.0042, 10.0)
    removed = [consolidation.Candidate({}, {}, "p", [{}], price / 2, 1.0) for _ in range(2)]
    verdict = consolidation._cheaper_set(
        removed, claims, reason="Underutilized", method="repack", thresholds={}, spot_to_spot_gate=False
    )
    assert verdict.command is not None, verdict.why_not
    assert [[o.name for o in r.instance_types] for r in verdict.command.replacements] == [["big"], ["tiny"]]
    assert verdict.command.price_after < verdict.command.price_before


def _spot_pool(cluster: FakeCluster) -> dict[str, Any]:
    """A second NodePool, ``batch``: spot m5.large only (the demo's batch-jobs)."""
    pool = copy.deepcopy(NODEPOOL)
    pool["metadata"] = {"name": "batch", "uid": "batch-uid"}
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
    ]
    cluster.add("NodePool", pool)
    return pool


def _move(cluster: FakeCluster, name: str, *, pool: str, zone: str) -> None:
    """Put the NodeClaim ``name`` (and its Node) in ``pool`` and ``zone``."""
    for kind, key in (("NodeClaim", name), ("Node", f"node-{name}")):
        found = cluster.objects[kind][key]["metadata"]["labels"]
        found.update({"karpenter.sh/nodepool": pool, "topology.kubernetes.io/zone": zone})


def _pin(cluster: FakeCluster, pod: str, pool: str) -> None:
    cluster.objects["Pod"][pod]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": pool}


def test_a_wave_never_replaces_a_node_it_does_not_save_on(env: Env) -> None:
    """The demo's part four: an underused on-demand m5.2xlarge (``big``) and a well-filled spot
    m5.large (``batch``, in the dearer of two zones). The whole-cluster repack prices batch's pod
    at the cheapest zone's spot price, so batch shows waste; but its replacement may launch in
    either zone, and at its worst launch price (what the command's saving counts) it is no
    cheaper than batch: replacing it is churn. Only big is replaced; batch stays."""
    import dataclasses

    from nodewright.scheduling import Offering

    ctx, cluster, cloud = env
    m5_large_spot = {"us-west-2a": 0.030, "us-west-2b": 0.040}

    def spot(t: Any, zone: str) -> Offering:
        price = m5_large_spot[zone] if t.name == "m5.large" else round(t.offerings[0].price * 0.4, 4)
        return Offering(zone, "spot", price)

    cloud.types = [
        dataclasses.replace(t, offerings=(*t.offerings, *(spot(t, zone) for zone in m5_large_spot)))
        for t in catalog(spot=False, zones=tuple(m5_large_spot))
    ]
    batch_pool = _spot_pool(cluster)
    add_node(cluster, "big", "m5.2xlarge")
    add_pod(cluster, "report-api", "node-big")
    _pin(cluster, "report-api", "default")
    add_node(cluster, "batch", "m5.large", pool=batch_pool, capacity_type="spot")
    _move(cluster, "batch", pool="batch", zone="us-west-2b")
    add_pod(cluster, "batch-pod", "node-batch", cpu="1500m")
    _pin(cluster, "batch-pod", "batch")

    report = pass_after_validation_or_none(ctx)

    [decision] = report.decisions
    assert decision.nodeclaims == ["big"], decision.description
    assert decision.description.startswith("Underutilized, replacing 1 node (m5.2xlarge) with ")
    assert not objects.has_taint(cluster.objects["Node"]["node-batch"], "karpenter.sh/disrupted")
    assert [r.nodepool_name for r in cloud.requests] == ["default"]


def test_a_spot_nodes_replacement_in_a_mixed_wave_waits_for_the_spot_to_spot_gate() -> None:
    """The demo's part four: a wave of an on-demand node (its pods to a small on-demand node) and a
    spot node of a spot-only NodePool (its pod to a cheaper spot node). The second replacement is
    spot-to-spot (every pod it takes comes from a spot node), whatever else the wave holds: with
    Karpenter's SpotToSpotConsolidation gate off it is not made, as a single-node replacement of
    that node would not be; with the gate on it is."""
    from nodewright.scheduling import CandidateType, NewClaim, Offering, Requirement, Requirements

    def option(name: str, capacity: str, price: float) -> CandidateType:
        return CandidateType(name, price, (Offering("z", capacity, price),))

    def candidate(name: str, capacity: str, price: float, pod: str) -> consolidation.Candidate:
        claim = {"metadata": {"name": name, "labels": {"karpenter.sh/capacity-type": capacity}}}
        pods = [{"metadata": {"name": pod, "namespace": "default"}}]
        return consolidation.Candidate(claim, {}, name, pods, price, 1.0)

    spot_only = Requirements([Requirement.create("karpenter.sh/capacity-type", "In", ["spot"])])
    claims = [
        NewClaim("burst", Requirements([]), ["default/api"], [option("t4g.micro", "on-demand", 0.0084)]),
        NewClaim("batch", spot_only, ["default/job"], [option("c5.large", "spot", 0.020)]),
    ]
    removed = [candidate("burst", "on-demand", 0.102, "api"), candidate("batch", "spot", 0.040, "job")]

    gated = consolidation._cheaper_set(
        removed, claims, reason="Underutilized", method="repack", thresholds={}, spot_to_spot_gate=False
    )
    assert gated.command is None
    assert gated.why_not == consolidation.SPOT_TO_SPOT_DISABLED

    allowed = consolidation._cheaper_set(
        removed, claims, reason="Underutilized", method="repack", thresholds={}, spot_to_spot_gate=True
    )
    assert allowed.command is not None, allowed.why_not
    batch = allowed.command.replacements[1]
    assert batch.requirements["karpenter.sh/capacity-type"].values == {"spot"}, "pinned to spot"


def test_a_waves_replacement_that_may_be_spot_is_priced_and_pinned_as_a_single_replacement_is() -> None:
    """One rule for a replacement's price (Karpenter's worstLaunchPrice): a replacement that may
    launch as spot is priced at its dearest spot offering and pinned to spot, in a wave as for one
    node. Here the two new nodes cost less than the removed on-demand nodes at their spot prices,
    more at their on-demand ones: the wave is made, its replacements pinned to spot (a spot
    shortage fails the launch instead of buying the dearer on-demand node)."""
    from nodewright.scheduling import CandidateType, NewClaim, Offering, Requirements

    def option(name: str, on_demand: float, spot: float) -> CandidateType:
        return CandidateType(name, spot, (Offering("z", "on-demand", on_demand), Offering("z", "spot", spot)))

    def candidate(name: str, pod: str) -> consolidation.Candidate:
        claim = {"metadata": {"name": name, "labels": {"karpenter.sh/capacity-type": "on-demand"}}}
        pods = [{"metadata": {"name": pod, "namespace": "default"}}]
        return consolidation.Candidate(claim, {}, "default", pods, 0.090, 1.0)

    claims = [
        NewClaim("default", Requirements([]), ["default/a"], [option("m5.large", 0.096, 0.040)]),
        NewClaim("default", Requirements([]), ["default/b"], [option("m5.xlarge", 0.192, 0.080)]),
    ]
    removed = [candidate("one", "a"), candidate("two", "b")]
    single = consolidation._cheaper(
        removed[:1],
        claims[0],
        reason="Underutilized",
        method="single",
        thresholds={},
        min_values=None,
        spot_to_spot_gate=False,
    )
    assert single.command is not None, single.why_not
    assert single.command.replacements[0].requirements["karpenter.sh/capacity-type"].values == {"spot"}

    verdict = consolidation._cheaper_set(
        [*removed, candidate("three", "c")],
        claims,
        reason="Underutilized",
        method="repack",
        thresholds={},
        spot_to_spot_gate=False,
    )
    # removed: 3 x $0.090 = $0.270/h; new: $0.120/h at spot prices, $0.288/h on demand
    assert verdict.command is not None, verdict.why_not
    for replacement in verdict.command.replacements:
        assert replacement.requirements["karpenter.sh/capacity-type"].values == {"spot"}, "pinned to spot"
    assert verdict.command.price_after == pytest.approx(0.120)


def test_a_wave_fills_a_partly_filled_node_of_a_type_the_repack_buys_rather_than_replacing_it(
    env: Env,
) -> None:
    """``keep`` is an m6g.large, the type the whole-cluster repack buys for these pods, running one
    pod with room for two more; two m5.large each run one pod. Repacked whole, the three pods fill
    one new m6g.large, and every node shows waste; but ``keep`` is that node already: the wave
    removes only the two m5.large, their pods moving into ``keep``'s room. Same saving, two nodes
    disrupted instead of three, nothing launched."""
    ctx, cluster, cloud = env
    pool = pool_with(cluster)
    add_node(cluster, "keep", "m6g.large", pool=pool)
    add_pod(cluster, "web-keep", "node-keep")
    for name in ("old-a", "old-b"):
        add_node(cluster, name, "m5.large", pool=pool)
        add_pod(cluster, f"web-{name}", f"node-{name}")

    report = pass_after_validation(ctx)

    [decision] = report.decisions
    assert decision.method == "repack"
    assert sorted(decision.nodeclaims) == ["old-a", "old-b"], decision.description
    assert decision.description.startswith("Underutilized, deleting 2 nodes (m5.large x2)")
    assert not cloud.requests
    assert not objects.has_taint(cluster.objects["Node"]["node-keep"], "karpenter.sh/disrupted")


def test_a_wave_refused_as_not_cheaper_is_refined_by_the_new_nodes_its_plan_would_launch() -> None:
    """The most wasteful candidate of the repack (``dear``) costs more on the wave's own new nodes
    than it does (its waste needs pods the wave does not hold): the whole wave is refused as not
    cheaper. It is refined all the same: ``dear`` gives its place, and the wave of the others,
    which saves, is the command (every prefix of the ranked order held ``dear``)."""
    from nodewright.disruption import repack
    from nodewright.scheduling import CandidateType, NewClaim, Offering, Requirements

    def candidate(name: str, price: float) -> consolidation.Candidate:
        claim = {"metadata": {"name": name, "labels": {"karpenter.sh/capacity-type": "on-demand"}}}
        pods = [{"metadata": {"name": f"{name}-pod", "namespace": "default"}}]
        return consolidation.Candidate(claim, {}, "default", pods, price, 1.0)

    def claim(price: float, *pods: str) -> NewClaim:
        option = CandidateType("m5.large", price, (Offering("z", "on-demand", price),))
        return NewClaim("default", Requirements([]), [f"default/{p}-pod" for p in pods], [option])

    dear, cheap_a, cheap_b = candidate("dear", 0.20), candidate("a", 0.10), candidate("b", 0.10)
    requests = {f"default/{n}-pod": {"cpu": 1000} for n in ("dear", "a", "b")}
    asked: list[list[str]] = []

    def ask(chosen: list[consolidation.Candidate]) -> consolidation.Verdict:
        asked.append([c.name for c in chosen])
        if dear in chosen:  # its pod alone on a $0.30/h node: the set costs more than it removes
            return consolidation.Verdict(None, "not cheaper", [claim(0.30, "dear"), claim(0.15, "a", "b")])
        return consolidation.Verdict(
            consolidation.Command("Underutilized", "repack", chosen, [claim(0.15, "a", "b")])
        )

    command = repack._best([dear, cheap_a, cheap_b], {"default": None}, requests, ask, stop=float("inf"))

    assert command is not None
    assert [c.name for c in command.candidates] == ["a", "b"]
    assert asked == [["dear", "a", "b"], ["a", "b"]]


def test_a_wave_that_launches_more_nodes_than_it_removes_counts_each_nodes_volumes() -> None:
    """Every node pays its EBS volumes on top of its instance (``NewClaim.volume_price``; the
    removed nodes pay the same per node of their NodePool). Two new nodes at $0.095/h replace one
    at $0.200/h: cheaper by their instances, but with $0.010/h of volumes a node, $0.210/h against
    $0.210/h: not cheaper, and the wave that would raise the bill is not made."""
    from nodewright.scheduling import CandidateType, NewClaim, Offering, Requirements

    def claim(pod: str) -> NewClaim:
        option = CandidateType("m5.large", 0.095, (Offering("z", "on-demand", 0.095),))
        return NewClaim("default", Requirements([]), [f"default/{pod}"], [option], volume_price=0.010)

    claim_obj = {"metadata": {"name": "big", "labels": {"karpenter.sh/capacity-type": "on-demand"}}}
    pods = [{"metadata": {"name": p, "namespace": "default"}} for p in ("a", "b")]
    removed = [consolidation.Candidate(claim_obj, {}, "default", pods, 0.200, 1.0)]

    verdict = consolidation._cheaper_set(
        removed,
        [claim("a"), claim("b")],
        reason="Underutilized",
        method="repack",
        thresholds={},
        spot_to_spot_gate=False,
        volumes={"default": 0.010},
    )

    assert verdict.command is None
    assert verdict.why_not.startswith("can't replace with cheaper nodes")


def _covering_lp(types: list[Any], cpu: int, memory: int) -> float:
    """The cheapest fractional set of nodes holding ``cpu`` millicores and ``memory`` bytes: the
    best single type or pair of types (a 2-resource covering LP has an optimal basis of at most two)."""
    options = [
        (t.allocatable["cpu"], t.allocatable["memory"], min(o.price for o in t.offerings)) for t in types
    ]
    best = min(max(cpu / c, memory / m) * price for c, m, price in options)
    for i, (c1, m1, p1) in enumerate(options):
        for c2, m2, p2 in options[i + 1 :]:
            det = c1 * m2 - c2 * m1
            if det == 0:
                continue
            x, y = (cpu * m2 - c2 * memory) / det, (c1 * memory - cpu * m1) / det
            if x >= 0 and y >= 0:
                best = min(best, x * p1 + y * p2)
    return best


def test_a_candidates_waste_is_what_its_pods_leave_unpaid_at_the_clusters_shadow_prices(env: Env) -> None:
    """A wave is drawn by waste: what removing a node saves at best. Each pod is worth its CPU and
    memory at the shadow prices of the cheapest cluster the NodePool's types allow (the covering
    LP's dual), so the wastes add up to the nodes' price less that LP's optimum, and a node filled
    in the proportions the LP buys shows (almost) none. Charging each pod its share of its node in
    one repack instead credited a node with what its pods save by sharing a node with other
    nodes' pods, which only a wave holding those too realizes: on the 1,000-node bench, ten passes
    spent 63 of their 753 disruptions on nodes earlier waves had launched, well filled."""
    from nodewright.disruption import repack
    from nodewright.state import nodepools
    from nodewright.state.snapshot import Simulation
    from nodewright.state.world import observe

    ctx, cluster, cloud = env
    pool = pool_with(cluster)
    add_node(cluster, "full", "m6g.large", pool=pool)  # two balanced pods fill it
    add_pod(cluster, "full-1", "node-full", cpu="900m", memory="3400Mi")
    add_pod(cluster, "full-2", "node-full", cpu="900m", memory="3400Mi")
    add_node(cluster, "cpu", "c5.large", pool=pool)  # CPU-heavy
    add_pod(cluster, "cpu-1", "node-cpu", cpu="1800m", memory="256Mi")
    add_node(cluster, "memory", "r5.large", pool=pool)  # memory-heavy
    add_pod(cluster, "memory-1", "node-memory", cpu="100m", memory="12Gi")
    add_node(cluster, "idle", "m5.xlarge", pool=pool)  # a quarter used
    add_pod(cluster, "idle-1", "node-idle", cpu="1", memory="2Gi")
    world = observe(ctx)
    usable = nodepools.triage(world).usable
    found, _ = consolidation.candidates(world, usable, {}, ignore_waits=True)

    waste, requests, _ = repack._waste(Simulation(world, usable), found, [])

    lp = _covering_lp(
        [t for t in cloud.types if t.name != "p3.2xlarge"],  # a GPU type: never the cheapest cover
        sum(r["cpu"] for r in requests.values()),
        sum(r["memory"] for r in requests.values()),
    )
    assert sum(waste.values()) == pytest.approx(sum(c.price or 0.0 for c in found) - lp)
    assert waste["full"] == pytest.approx(0.0, abs=0.01)
    assert waste["full"] < min(waste[name] for name in ("cpu", "memory", "idle"))


def test_a_node_of_a_type_the_repack_buys_is_kept_to_be_filled_only_while_a_moving_pod_fits_it(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes of the types the whole-cluster repack buys are left out of the first wave drawn, to be
    filled by the others' pods (``roomy``, an m6g.large with one small pod). ``busy`` is one too,
    but its CPU is taken and no moving pod fits what is left of it: no wave fills it, what it
    wastes (its idle memory) only moving its pod saves, and it is drawn with the others. (Kept,
    the lopsided nodes the waves themselves launch, CPU-full and memory-idle, were left out of
    every wave while other nodes had waste: on the 1,000-node bench 1.0555x a fresh plan after ten
    passes instead of 1.0486x.)"""
    from nodewright.disruption import repack
    from nodewright.state import nodepools
    from nodewright.state.snapshot import Simulation
    from nodewright.state.world import observe

    ctx, cluster, _cloud = env
    pool = pool_with(cluster)
    add_node(cluster, "busy", "m6g.large", pool=pool)
    add_pod(cluster, "busy-1", "node-busy", cpu="1900m", memory="1Gi")
    add_node(cluster, "roomy", "m6g.large", pool=pool)
    add_pod(cluster, "roomy-1", "node-roomy", cpu="200m", memory="512Mi")
    for name in ("old-a", "old-b"):
        add_node(cluster, name, "m5.large", pool=pool)
        add_pod(cluster, f"{name}-1", f"node-{name}", cpu="200m", memory="512Mi")
    world = observe(ctx)
    usable = nodepools.triage(world).usable
    found, _ = consolidation.candidates(world, usable, {}, ignore_waits=True)
    drawn: list[list[str]] = []
    monkeypatch.setattr(repack, "_best", lambda ranked, *_: drawn.append(sorted(c.name for c in ranked)))

    repack.wave(Simulation(world, usable), found, [], {"default": None}, {}, balanced_totals={})

    assert drawn[0] == ["busy", "old-a", "old-b"]


def test_the_room_check_asks_only_the_requests_no_other_pod_undercuts() -> None:
    """Where none of the smallest requests fits a node, no pod's does: a request that asks at least
    as much CPU and memory as another (with the same other resources) is not asked."""
    from nodewright.disruption import repack

    requests = {
        "a": {"cpu": 1000, "memory": 4, "pods": 1},
        "b": {"cpu": 2000, "memory": 4, "pods": 1},  # more CPU than a, as much memory: undercut
        "c": {"cpu": 2000, "memory": 1, "pods": 1},
        "d": {"cpu": 500, "memory": 8, "pods": 1},
        "e": {"cpu": 3000, "memory": 9, "pods": 1},  # undercut by every other
        "gpu": {"cpu": 3000, "memory": 9, "pods": 1, "nvidia.com/gpu": 1},  # other resources: its own
    }

    smallest = repack._smallest_shapes(requests)

    assert sorted(smallest, key=lambda s: sorted(s.items())) == sorted(
        [requests["a"], requests["c"], requests["d"], requests["gpu"]], key=lambda s: sorted(s.items())
    )
