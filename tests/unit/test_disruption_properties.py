"""Properties of consolidation over random small clusters, through the disruption flow and the real
scheduling core (the shared fakes for the API server and EC2):

* a command never leaves a pod that had a place without one: every pod of the removed nodes (and
  every pending pod) fits on the nodes left plus the replacement, whichever of its instance types
  the replacement launches as (checked by an independent plan that may launch nothing);
* it never increases $/h: a delete saves its nodes' price, a replace costs strictly less at the
  dearest launch price of its options;
* it never touches a node with ``karpenter.sh/do-not-disrupt`` (on the node or an active pod), nor
  one whose pods a PodDisruptionBudget protects, and never takes more nodes than the budget allows.

And over a sequence of passes, each command carried out before the next (the candidates gone, the
replacement up, the displaced pods where an independent plan puts them): $/h never rises, a bound
pod always keeps a node, no pass exceeds the budget or touches a protected node, and the sequence
reaches a pass that finds nothing to do within a bounded number of commands.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes import (
    FakeClock,
    FakeCloudProvider,
    FakeCluster,
    FakeLease,
    fake_context,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from nodewright import scheduling
from nodewright.context import Context
from nodewright.disruption import consolidation, drift, execute, flow, repack
from nodewright.state import nodepools
from nodewright.state.pods import as_pending, is_provisionable
from nodewright.state.snapshot import Simulation
from nodewright.state.world import observe
from test_disruption_consolidation import NODECLASS, NODEPOOL, ZONE, add_node, add_pod, pass_after_validation
from test_scheduling_support import catalog

TYPES = ("c5.large", "m5.large", "m5.xlarge", "m5.2xlarge")
CPU = {"c5.large": 1900, "m5.large": 1900, "m5.xlarge": 3900, "m5.2xlarge": 7800}  # below allocatable

pod_cpu = st.sampled_from([100, 250, 500, 1000])
node_shape = st.fixed_dictionaries(
    {
        "type": st.sampled_from(TYPES),
        "pods": st.lists(pod_cpu, max_size=4),
        "node_veto": st.booleans(),
        "pod_veto": st.booleans(),
        "pdb": st.booleans(),
    }
)
cluster_shape = st.fixed_dictionaries(
    {
        "nodes": st.lists(node_shape, min_size=1, max_size=5),
        "pending": st.lists(pod_cpu, max_size=2),
        "budget": st.sampled_from(["0", "1", "2", "100%", "100%"]),
        "vetoes": st.sampled_from([False, False, True]),  # with them most examples are vetoed away
    }
)


def build(shape: dict[str, Any]) -> tuple[Context, FakeCluster, FakeCloudProvider, dict[str, str]]:
    """The cluster ``shape`` describes; node name → why a consolidation must leave it alone."""
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cloud.types = catalog(spot=False, zones=(ZONE,))
    pool = copy.deepcopy(NODEPOOL)
    pool["spec"]["disruption"]["budgets"] = [{"nodes": shape["budget"]}]
    cluster.add("NodePool", pool)
    cluster.add("EC2NodeClass", NODECLASS)
    protected: dict[str, str] = {}
    for index, node in enumerate(shape["nodes"]):
        name = f"n{index}"
        veto = shape["vetoes"] and node["node_veto"] and index % 2 == 0
        add_node(
            cluster,
            name,
            node["type"],
            pool=pool,
            **({"karpenter.sh/do-not-disrupt": "true"} if veto else {}),
        )
        if veto:
            protected[name] = "node do-not-disrupt"
        used = 0
        for number, cpu in enumerate(node["pods"]):
            if used + cpu > CPU[node["type"]]:
                break
            used += cpu
            pod_veto = shape["vetoes"] and node["pod_veto"] and number == 0
            add_pod(
                cluster,
                f"p{index}-{number}",
                f"node-{name}",
                cpu=f"{cpu}m",
                **({"karpenter.sh/do-not-disrupt": "true"} if pod_veto else {}),
            )
            if pod_veto:
                protected[name] = "pod do-not-disrupt"
            if shape["vetoes"] and node["pdb"] and number == 0 and not pod_veto:
                cluster.add(
                    "PodDisruptionBudget",
                    {
                        "metadata": {"name": f"pdb-{index}", "namespace": "default"},
                        "spec": {"selector": {"matchLabels": {"app": f"p{index}-{number}"}}},
                        "status": {"disruptionsAllowed": 0},
                    },
                )
                protected[name] = "PDB"
    for number, cpu in enumerate(shape["pending"]):
        add_pod(cluster, f"pending-{number}", None, cpu=f"{cpu}m")
    ctx = fake_context(cluster, cloud, clock)
    return ctx, cluster, cloud, protected


def budget_room(budget: str, nodes: int) -> int:
    if budget.endswith("%"):
        return -(-nodes * int(budget[:-1]) // 100)  # percentages round up, as Karpenter's
    return int(budget)


def fits_without_launching(ctx: Context, command: consolidation.Command) -> bool:
    """Every displaced pod fits on the nodes left plus the replacement as its smallest option would
    be, with nothing new launched: a second plan of the scheduling core, independent of the
    command's own simulation (the replacement is a fixed node here, not a NodeClaim to size)."""
    world = observe(ctx)
    usable = nodepools.triage(world).usable
    sim = Simulation(world, usable)
    displaced = [as_pending(p) for c in command.candidates for p in c.pods]
    pending = [p for p in world.pods if is_provisionable(p)]
    snapshot, unreadable = sim.snapshot(
        displaced + pending, without=[c.node_name for c in command.candidates]
    )
    assert not unreadable
    nodes = list(snapshot.nodes)
    known = {t.name: t for t in catalog(spot=False, zones=(ZONE,))}
    for index, replacement in enumerate(command.replacements):
        options = [known[t.name] for t in replacement.instance_types]
        keys = set().union(*(t.allocatable for t in options))
        smallest = {k: min(t.allocatable.get(k, 0) for t in options) for k in keys}
        nodes.append(
            scheduling.model.Node(
                name=f"replacement-{index}",
                labels={**replacement.requirements.labels(), **replacement.labels},
                allocatable=smallest,
                in_flight=True,
            )
        )
    # A displaced pod without a place shows as unschedulable or as the pod of a new NodeClaim.
    plan = scheduling.plan(
        scheduling.model.Snapshot(pods=snapshot.pods, nodepools=snapshot.nodepools, nodes=nodes)
    )
    displaced_keys = {f"default/{p['metadata']['name']}" for p in displaced}
    launched = {pod for claim in plan.new_claims for pod in claim.pods}
    return not (displaced_keys & (set(plan.unschedulable) | launched))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=cluster_shape)
def test_a_consolidation_command_keeps_every_pod_placed_saves_money_and_respects_vetoes_and_budgets(
    shape: dict[str, Any],
) -> None:
    flow.forget_proposals()
    drift.forget_dynamic()
    ctx, _cluster, _cloud, protected = build(shape)
    commands: list[consolidation.Command] = []
    real_start = execute.start

    def spy(ctx_: Context, world: Any, command: consolidation.Command, *, guard: Any) -> Any:
        commands.append(command)
        assert fits_without_launching(ctx_, command), command.describe()  # before it acts
        return real_start(ctx_, world, command, guard=guard)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nodepools, "validation_errors", lambda doc: [])
        patch.setattr(flow, "_recent_why_not", {})
        patch.setattr(execute, "start", spy)
        first = flow.reconcile(ctx, observe(ctx), lease=FakeLease())
        if first.decisions:  # a command is only ever taken after validation
            pytest.fail(f"acted on first sight: {first.decisions}")
        ctx.clock.advance(consolidation.VALIDATION_SECONDS)  # type: ignore[attr-defined]
        flow.reconcile(ctx, observe(ctx), lease=FakeLease())

    event(f"{commands[0].method} {commands[0].action}" if commands else "no command")
    for command in commands:
        names = {c.name for c in command.candidates}
        assert not names & set(protected), (names, protected)
        assert len(names) <= budget_room(shape["budget"], len(shape["nodes"])), command.describe()
        if command.replacements:
            # Karpenter's methods replace by one node; a wave (repack) by as many as its repack needs
            # (a few big nodes may become more, smaller ones): what it saves is the rule, below.
            if command.method == repack.METHOD:
                assert len(command.replacements) <= repack.REPLACEMENTS_MAX, command.describe()
            else:
                assert len(command.replacements) == 1, command.describe()
            assert command.price_after < command.price_before, command.describe()
        else:
            assert command.savings == pytest.approx(command.price_before)
        assert command.savings > 0


def test_the_property_sees_commands_at_all() -> None:
    """A guard against a vacuous property: the generator's plainest shape does consolidate."""
    shape = {
        "nodes": [{"type": "m5.xlarge", "pods": [500], "node_veto": False, "pod_veto": False, "pdb": False}]
        * 2,
        "pending": [],
        "budget": "100%",
        "vetoes": False,
    }
    flow.forget_proposals()
    ctx, _cluster, _cloud, _protected = build(shape)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nodepools, "validation_errors", lambda doc: [])
        report = pass_after_validation(ctx)
    assert report.decisions


# --- sequences of passes ------------------------------------------------------------------------------

MAX_COMMANDS = 12  # each command saves money and a generated cluster has at most 5 nodes


def cluster_price(ctx: Context) -> float:
    """$/h of the live NodeClaims, each at the price of the type it runs as."""
    world = observe(ctx)
    live = [c for c in world.nodeclaims if not c["metadata"].get("deletionTimestamp")]
    return sum(world.price_of(c) or 0.0 for c in live)


def live_nodes(cluster: FakeCluster) -> set[str]:
    return {n for n, o in cluster.objects["Node"].items() if not o["metadata"].get("deletionTimestamp")}


def finish_terminations(cluster: FakeCluster) -> set[str]:
    """The nodes whose termination a pass began (emptiness) are gone, as their drain would end:
    the names of the NodeClaims removed."""
    gone = {n for n, c in cluster.objects["NodeClaim"].items() if c["metadata"].get("deletionTimestamp")}
    for name in gone:
        node = cluster.objects["NodeClaim"].pop(name)["status"].get("nodeName")
        assert not cluster.list_pods_on_node(node), f"{node} was removed with pods on it"
        cluster.objects["Node"].pop(node, None)
    return gone


def carry_out(ctx: Context, cluster: FakeCluster, command: consolidation.Command, serial: int) -> None:
    """The cluster once ``command`` is done: the replacement up as its cheapest option, each displaced
    pod bound where an independent plan of the scheduling core puts it on the nodes there are (one
    that would need a new node or has no place fails the property), the candidates gone."""
    for index, replacement in enumerate(command.replacements):
        add_node(cluster, f"r{serial}-{index}", replacement.instance_types[0].name)
    world = observe(ctx)
    sim = Simulation(world, nodepools.triage(world).usable)
    displaced = [as_pending(p) for c in command.candidates for p in c.pods]
    snapshot, unreadable = sim.snapshot(displaced, without=[c.node_name for c in command.candidates])
    assert not unreadable
    plan = scheduling.plan(snapshot)
    placements = dict(plan.placements)
    for pod in displaced:
        key = f"default/{pod['metadata']['name']}"
        assert key in placements, f"{key} lost its place after {command.describe()}"
        cluster.objects["Pod"][pod["metadata"]["name"]]["spec"]["nodeName"] = placements[key]
    for candidate in command.candidates:
        del cluster.objects["NodeClaim"][candidate.name]
        del cluster.objects["Node"][candidate.node_name]


def run_passes(shape: dict[str, Any]) -> list[consolidation.Command]:
    """Pass after pass on the cluster ``shape`` describes, each command carried out before the next,
    checking the properties after each (see the test below); the commands, in order."""
    flow.forget_proposals()
    drift.forget_dynamic()
    ctx, cluster, _cloud, protected = build(shape)
    bound = {n for n, p in cluster.objects["Pod"].items() if p["spec"].get("nodeName")}
    commands: list[consolidation.Command] = []

    def record(ctx_: Context, world: Any, command: consolidation.Command, *, guard: Any) -> execute.Outcome:
        commands.append(command)
        return execute.Outcome(command.describe(), execute.Step.STARTED, [c.name for c in command.candidates])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(nodepools, "validation_errors", lambda doc: [])
        patch.setattr(flow, "_recent_why_not", {})
        patch.setattr(execute, "start", record)
        for serial in range(MAX_COMMANDS + 1):
            nodes_before, price_before = live_nodes(cluster), cluster_price(ctx)
            room = budget_room(shape["budget"], len(nodes_before))
            before = len(commands)
            # Two passes: a command found in the first acts in the second, once validated.
            flow.reconcile(ctx, observe(ctx), lease=FakeLease())
            ctx.clock.advance(consolidation.VALIDATION_SECONDS)  # type: ignore[attr-defined]
            flow.reconcile(ctx, observe(ctx), lease=FakeLease())
            emptied = finish_terminations(cluster)
            new = commands[before:]
            assert len(new) <= 1, "one command at a time"
            for command in new:
                carry_out(ctx, cluster, command, serial)
            removed = nodes_before - live_nodes(cluster)
            assert len(removed) <= room, (removed, shape["budget"])
            assert not {n.removeprefix("node-") for n in removed} & set(protected), (removed, protected)
            price_after = cluster_price(ctx)
            if new:
                assert price_after < price_before - 1e-9, new[0].describe()
                assert price_after <= price_before - new[0].price_before + new[0].price_after + 1e-9
            else:
                assert price_after <= price_before + 1e-9
            placed = {n: p["spec"].get("nodeName") for n, p in cluster.objects["Pod"].items()}
            assert all(placed[n] in live_nodes(cluster) for n in bound), (bound, placed)
            if not new and not emptied:
                return commands  # a fixed point: the next pass would find the same nothing
            ctx.clock.advance(consolidation.NOMINATION_SECONDS)  # type: ignore[attr-defined]
    pytest.fail(f"no fixed point after {MAX_COMMANDS} commands: {[c.describe() for c in commands]}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=cluster_shape)
def test_repeated_passes_never_raise_cost_keep_every_pod_placed_respect_budgets_and_converge(
    shape: dict[str, Any],
) -> None:
    """Pass after pass, each command carried out before the next: $/h only falls, every bound pod
    keeps a node, no pass takes more nodes than the budget allows or a protected node, and the
    sequence ends with a pass that finds nothing to do."""
    commands = run_passes(shape)
    event(f"{len(commands)} commands")


def test_the_sequence_property_sees_several_commands() -> None:
    """A guard against a vacuous sequence: four lightly used nodes under a budget of one node are
    consolidated over several commands, one node at a time, down to what the pods need."""
    shape = {
        "nodes": [{"type": "m5.xlarge", "pods": [500], "node_veto": False, "pod_veto": False, "pdb": False}]
        * 4,
        "pending": [],
        "budget": "1",
        "vetoes": False,
    }
    commands = run_passes(shape)
    assert len(commands) >= 2, [c.describe() for c in commands]
    assert all(len(c.candidates) == 1 for c in commands)
