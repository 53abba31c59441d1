"""Consolidation: a fragmented cluster, pass after pass; $/h per pass against a fresh plan of the same pods.

The cluster: ``--nodes`` nodes of common types (m5/c5/r5, xlarge to 4xlarge, real us-east-1 prices
when ``../shared/data`` has them) holding ``--pods`` pods of the scheduling bench's generic mix,
spread at random as a scale-down leaves them, in one NodePool with the default budget (10 % of its
nodes). Each pass does what a disruption pass does: emptiness first (empty nodes removed within
the budget), else the disruption flow's own consolidation choice (``consolidation.choose``: the
many→several repack, multi-node, single-node, over a ``state.snapshot.Simulation``) with the
budget's room as the flow computes it (``decide.budget_room``); the command is applied in memory
(candidates removed, their pods where the simulation places them, replacements added as nodes of
their cheapest type) for up to ``--passes`` passes. Printed: decision seconds of the first pass
(wall and CPU, with the load average: on a shared machine the wall time is mostly waiting for a
core), per pass the $/h, the nodes disrupted (and of them, how many an earlier pass launched:
budget spent twice) and the decision seconds, the cluster's $/h before
and after, a fresh plan of the same pods by the scheduling core, the assignment-LP lower bound of
the scheduling bench, ``after_vs_fresh`` and the passes needed to reach 1.10, 1.05 and 1.02 times
the fresh plan. ``--plot FILE.png`` draws the $/h per pass against the fresh plan and the bound.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._report import print_figures, save

NODE_TYPES = ("m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.xlarge", "c5.2xlarge", "r5.xlarge", "r5.2xlarge")
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
RATIOS = (1.10, 1.05, 1.02)  # the passes needed to reach these multiples of the fresh plan are reported


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--passes", type=int, default=30, help="consolidation passes applied in memory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw $/h per pass (matplotlib)")


class _Cloud:
    """The bench's catalog and price table, as a pass observes the cloud (``state.interfaces.CloudView``):
    every node also pays its EBS root volume, as in the scheduling bench (``node_storage_price``)."""

    def __init__(self, types: Any, prices: dict[str, float], storage: float = 0.0) -> None:
        from nodewright.cloud.pricetable import PriceTable

        self.types = list(types)
        self.table = PriceTable(on_demand=prices)
        self.storage = storage

    def instance_types(self, nodeclass: Any) -> list[Any]:
        return self.types

    def prices(self) -> Any:
        return self.table

    def node_price(self, nodeclass: Any) -> float:
        return self.storage


def _cluster(args: argparse.Namespace, by_name: dict[str, Any]) -> tuple[list[dict], list[dict], list[dict]]:
    """NodeClaims, Nodes and bound pods of a fragmented cluster (see the module)."""
    from bench.scheduling import CPU_CHOICES, MEMORY_CHOICES

    rng = random.Random(args.seed)
    claims, nodes, pods = [], [], []
    free: list[list[int]] = []
    for i in range(args.nodes):
        type_name = rng.choice(NODE_TYPES)
        instance_type = by_name[type_name]
        zone = instance_type.offerings[0].zone
        claims_, nodes_ = _node(f"n{i:05d}", type_name, zone, instance_type.allocatable)
        claims.append(claims_)
        nodes.append(nodes_)
        free.append([instance_type.allocatable["cpu"] - 200, instance_type.allocatable["memory"] - 2**29, 25])
    for j in range(args.pods):
        cpu, memory = rng.choice(CPU_CHOICES), rng.choice(MEMORY_CHOICES)
        for _ in range(50):
            k = rng.randrange(args.nodes)
            if free[k][0] >= cpu and free[k][1] >= memory and free[k][2] > 0:
                free[k][0] -= cpu
                free[k][1] -= memory
                free[k][2] -= 1
                pods.append(_pod(f"p{j:06d}", f"n{k:05d}", cpu, memory))
                break
    return claims, nodes, pods


def _node(name: str, type_name: str, zone: str, allocatable: dict[str, int]) -> tuple[dict, dict]:
    instance = f"i-{int(name[1:]):017x}"
    node_labels = {
        "karpenter.sh/nodepool": "default",
        "node.kubernetes.io/instance-type": type_name,
        "karpenter.sh/capacity-type": "on-demand",
        "topology.kubernetes.io/zone": zone,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    }
    created = (NOW - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    claim = {
        "metadata": {"name": name, "labels": node_labels, "creationTimestamp": created},
        "spec": {"nodeClassRef": {"name": "default"}},
        "status": {
            "instanceID": instance,
            "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": created}],
        },
    }
    node = {
        "metadata": {"name": name, "labels": {**node_labels, "kubernetes.io/hostname": name}},
        "spec": {"providerID": f"aws:///{zone}/{instance}"},
        "status": {
            "allocatable": {
                "cpu": f"{allocatable['cpu']}m",
                "memory": str(allocatable["memory"]),
                "pods": "110",
            },
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    return claim, node


def _pod(name: str, node: str, cpu: int, memory: int) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": name,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs"}],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": f"{cpu}m", "memory": str(memory)}}}
            ],
        },
        "status": {"phase": "Running"},
    }


def _pool() -> dict:
    from bench.scheduling import DEFAULT_NODEPOOL

    pool = json.loads(json.dumps(DEFAULT_NODEPOOL))
    pool["spec"]["template"]["spec"]["nodeClassRef"] = {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    pool["spec"]["disruption"] = {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],  # the NodePool's default budget
    }
    return pool


def _world(claims: list[dict], nodes: list[dict], pods: list[dict], cloud: _Cloud) -> Any:
    from nodewright.state.world import World

    return World(
        taken_at=NOW,
        nodeclaims=claims,
        nodes=nodes,
        pods=pods,
        nodepools=[_pool()],
        nodeclasses=[{"metadata": {"name": "default"}, "spec": {}}],
        cloud=cloud,
    )


def _decide(world: Any) -> tuple[Any, float, float, int]:
    """One disruption pass's decision: (command or None, seconds, CPU seconds, candidates evaluated).
    Emptiness first, as the flow (its command: the empty nodes' deletion); else consolidation with
    the budget's room. The CPU seconds are what a loaded, shared machine does not inflate (the
    decision is one thread)."""
    from nodewright.disruption import consolidation
    from nodewright.disruption.decide import budget_room, decide
    from nodewright.state.snapshot import Simulation

    started, cpu_started = time.perf_counter(), time.process_time()
    pools = world.nodepools
    empty = decide(
        nodeclaims=world.claim_views,
        nodes=world.node_views,
        pods=world.pods,
        nodepools=world.nodepool_models(pools),
        last_pod_event={},
        now=world.taken_at,
    ).disrupt
    if empty:
        found, _ = consolidation.candidates(world, pools, {}, ignore_waits=True)
        by_name = {c.name: c for c in found}
        removed = [by_name[c.name] for c in empty if c.name in by_name]
        command = consolidation.Command("Empty", "empty", removed) if removed else None
        return command, time.perf_counter() - started, time.process_time() - cpu_started, len(empty)
    sim = Simulation(world, pools)
    room = budget_room(
        nodeclaims=world.claim_views,
        nodes=world.node_views,
        nodepools=world.nodepool_models(pools),
        reason=consolidation.UNDERUTILIZED,
        now=world.taken_at,
    )
    wall, consolidation.search_clock = consolidation.search_clock, time.process_time  # a dedicated core's
    try:
        choice = consolidation.choose(sim, world, pools, {}, pending=[], room=room)
    finally:
        consolidation.search_clock = wall
    return (
        choice.command,
        time.perf_counter() - started,
        time.process_time() - cpu_started,
        choice.evaluated,
    )


def _apply(
    command: Any,
    claims: list[dict],
    nodes: list[dict],
    pods: list[dict],
    *,
    by_name: dict,
    cloud: _Cloud,
    serial: int,
) -> None:
    """The cluster after the command: its nodes gone, their pods where a fresh simulation puts them."""
    from nodewright import scheduling
    from nodewright.state.pods import as_pending
    from nodewright.state.snapshot import Simulation

    gone = {c.node_name for c in command.candidates}
    moved = [p for p in pods if p["spec"]["nodeName"] in gone]
    world = _world(claims, nodes, pods, cloud)
    snapshot, _ = Simulation(world, world.nodepools).snapshot([as_pending(p) for p in moved], without=gone)
    plan = scheduling.plan(snapshot)
    if plan.unschedulable or len(plan.new_claims) != len(command.replacements):
        raise AssertionError(f"the command's plan does not hold on applying it: {plan.unschedulable}")
    claims[:] = [c for c in claims if c["metadata"]["name"] not in gone]
    nodes[:] = [n for n in nodes if n["metadata"]["name"] not in gone]
    target: dict[str, str] = dict(plan.placements)
    # The same question as the command's: the same claims, in the same order.
    for k, (replacement, new) in enumerate(zip(command.replacements, plan.new_claims, strict=True)):
        type_name = replacement.instance_types[0].name
        claim, node = _node(
            f"n{1_000_000 + serial * 1000 + k}",
            type_name,
            by_name[type_name].offerings[0].zone,
            by_name[type_name].allocatable,
        )
        claims.append(claim)
        nodes.append(node)
        for key in new.pods:
            target[key] = node["metadata"]["name"]
    for pod in moved:
        pod["spec"]["nodeName"] = target[f"default/{pod['metadata']['name']}"]


def measure(args: argparse.Namespace) -> dict:
    from nodewright.state.snapshot import fresh_plan

    from bench.scheduling import catalog, node_storage_price

    types, source = catalog()
    price_table = {
        t.name: min(o.price for o in t.offerings if o.capacity_type == "on-demand")
        for t in types
        if any(o.capacity_type == "on-demand" for o in t.offerings)
    }
    storage = node_storage_price()
    by_name = {t.name: t for t in types}
    cloud = _Cloud(types, price_table, storage)
    claims, nodes, pods = _cluster(args, by_name)

    def cost() -> float:
        """The cluster's $/h as a fresh plan prices it: each instance and its EBS root volume."""
        return sum(
            price_table[c["metadata"]["labels"]["node.kubernetes.io/instance-type"]] + storage for c in claims
        )

    before = cost()
    # A fresh plan of the same pods by the scheduling core, and the assignment-LP bound.
    empty = _world([], [], [], cloud)
    fresh = fresh_plan(empty, pods, empty.nodepools).cost_per_hour
    bound = _lp_bound(empty, pods)
    command, first_seconds, first_cpu_seconds, evaluated = _decide(_world(claims, nodes, pods, cloud))
    figures: dict[str, Any] = {
        "nodes": len(nodes),
        "pods": len(pods),
        "candidates": evaluated,
        "first_pass_seconds": round(first_seconds, 3),
        "first_pass_cpu_seconds": round(first_cpu_seconds, 3),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "first_pass_command": command.describe() if command else None,
        "before_per_hour": round(before, 4),
        "prices": source,
    }
    passes, total_seconds, seconds, cpu_seconds = 0, first_seconds, first_seconds, first_cpu_seconds
    per_hour_by_pass = [round(before, 4)]  # how repeated consolidation converges (bench report draws it)
    by_pass: list[dict[str, Any]] = []
    launched: set[str] = set()  # nodes earlier commands launched: disrupting one again spends budget twice
    while command is not None and passes < args.passes:
        again = sum(1 for c in command.candidates if c.name in launched)
        names_before = {c["metadata"]["name"] for c in claims}
        _apply(command, claims, nodes, pods, by_name=by_name, cloud=cloud, serial=passes)
        launched |= {c["metadata"]["name"] for c in claims} - names_before
        passes += 1
        per_hour_by_pass.append(round(cost(), 4))
        by_pass.append(
            {
                "pass": passes,
                "per_hour": per_hour_by_pass[-1],
                "nodes": len(nodes),
                "disrupted": len(command.candidates),
                "disrupted_again": again,
                "launched": len(command.replacements),
                "method": command.method,
                "decision_seconds": round(seconds, 3),
                "decision_cpu_seconds": round(cpu_seconds, 3),
            }
        )
        command, seconds, cpu_seconds, _ = _decide(_world(claims, nodes, pods, cloud))
        total_seconds += seconds
    after = cost()
    figures.update(
        {
            "passes_applied": passes,
            "all_passes_seconds": round(total_seconds, 3),
            "max_pass_seconds": max(
                (p["decision_seconds"] for p in by_pass), default=round(first_seconds, 3)
            ),
            "max_pass_cpu_seconds": max(
                (p["decision_cpu_seconds"] for p in by_pass), default=round(first_cpu_seconds, 3)
            ),
            "disrupted_again_in_10_passes": sum(p["disrupted_again"] for p in by_pass[:10]),
            "after_per_hour": round(after, 4),
            "nodes_after": len(nodes),
            "fresh_plan_per_hour": round(fresh, 4),
            "after_vs_fresh": round(after / fresh, 4) if fresh else None,
            "lp_bound_per_hour": round(bound, 4),
            "per_hour_by_pass": per_hour_by_pass,
            "by_pass": by_pass,
            "passes_to": {
                f"{ratio:.2f}": next((i for i, c in enumerate(per_hour_by_pass) if c <= ratio * fresh), None)
                for ratio in RATIOS
            },
        }
    )
    if args.plot:
        _plot(figures, args.plot)
    return figures


def _lp_bound(empty: Any, pods: list[dict]) -> float:
    """The assignment-LP lower bound of the scheduling bench for these pods and the NodePool's types."""
    from nodewright.state.snapshot import Simulation

    from bench._bounds import Bin, Shape, assignment_lp_bound

    pool = Simulation(empty, empty.nodepools).nodepools[0]
    bins = [
        Bin(
            t.name,
            price + pool.node_price,
            t.allocatable["cpu"],
            t.allocatable["memory"],
            t.allocatable["pods"],
        )
        for t in pool.instance_types
        if (price := t.cheapest_price(pool.requirements)) is not None
        and pool.requirements.matches_labels({**t.labels, "karpenter.sh/capacity-type": "on-demand"})
    ]
    shapes: dict[tuple[int, int], int] = {}
    for pod in pods:
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        key = (int(requests["cpu"][:-1]), int(requests["memory"]))
        shapes[key] = shapes.get(key, 0) + 1
    return assignment_lp_bound([Shape(c, m, n) for (c, m), n in sorted(shapes.items())], bins)


def _plot(figures: dict[str, Any], path: Path) -> None:
    """$/h per pass against the fresh plan and the LP bound (the picture ``bench report`` draws too)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 3.4))
    series = figures["per_hour_by_pass"]
    axes.plot(
        range(len(series)),
        series,
        marker=".",
        label=f"cluster, {figures['nodes']} nodes / {figures['pods']} pods",
    )
    axes.axhline(
        figures["fresh_plan_per_hour"], linestyle="--", linewidth=1, color="tab:green", label="fresh plan"
    )
    axes.axhline(figures["lp_bound_per_hour"], linestyle=":", linewidth=1, color="tab:red", label="LP bound")
    axes.set_xlabel("consolidation passes applied (budget: 10 % of the nodes)")
    axes.set_ylabel("$/h")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def run(args: argparse.Namespace) -> int:
    figures = measure(args)
    print_figures(figures, args.json)
    save(args, figures)
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(description=__doc__)
    configure(parser)
    sys.exit(run(parser.parse_args()))
