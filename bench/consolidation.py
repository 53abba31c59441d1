"""Consolidation: decide on a fragmented cluster; $/h before, after, and a fresh plan of the same pods.

The cluster: ``--nodes`` nodes of common types (m5/c5/r5, xlarge to 4xlarge, real us-east-1 prices
when ``../shared/data`` has them) holding ``--pods`` pods of the scheduling bench's generic mix,
spread at random as a scale-down leaves them. The disruption flow's own code decides
(``consolidation.choose``: candidates, multi-node then single-node over a ``state.snapshot.Simulation``):
the first pass is timed as one disruption pass would be; then commands are applied in memory
(candidates removed, their pods where the simulation placed them, replacements added) for up to
``--passes`` passes, to see where repeated consolidation takes the cluster. Printed: decision
seconds of the first pass (wall and CPU, with the load average: on a shared machine the wall time
is mostly waiting for a core), the cluster's $/h before and after, a fresh plan of the same pods by the
scheduling core, and the assignment-LP lower bound of the scheduling bench.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench._report import print_figures, save

NODE_TYPES = ("m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.xlarge", "c5.2xlarge", "r5.xlarge", "r5.2xlarge")
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--passes", type=int, default=30, help="consolidation passes applied in memory")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")


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
        "budgets": [{"nodes": "100%"}],
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
    The CPU seconds are what a loaded, shared machine does not inflate (the decision is one thread)."""
    from nodewright.disruption import consolidation
    from nodewright.state.snapshot import Simulation

    started, cpu_started = time.perf_counter(), time.process_time()
    pools = world.nodepools
    sim = Simulation(world, pools)
    choice = consolidation.choose(sim, world, pools, {}, pending=[], room={"default": None})
    return (
        choice.command,
        time.perf_counter() - started,
        time.process_time() - cpu_started,
        choice.evaluated,
    )


def _apply(
    command: Any, claims: list[dict], nodes: list[dict], pods: list[dict], *, by_name: dict, serial: int
) -> None:
    """The cluster after the command: its nodes gone, their pods where a fresh simulation puts them."""
    from nodewright import scheduling
    from nodewright.state.pods import as_pending
    from nodewright.state.snapshot import Simulation

    gone = {c.node_name for c in command.candidates}
    moved = [p for p in pods if p["spec"]["nodeName"] in gone]
    world = _world(claims, nodes, pods, _Cloud(by_name.values(), {}, 0.0))
    snapshot, _ = Simulation(world, world.nodepools).snapshot([as_pending(p) for p in moved], without=gone)
    plan = scheduling.plan(snapshot)
    claims[:] = [c for c in claims if c["metadata"]["name"] not in gone]
    nodes[:] = [n for n in nodes if n["metadata"]["name"] not in gone]
    target: dict[str, str] = dict(plan.placements)
    for k, replacement in enumerate(command.replacements):
        type_name = replacement.instance_types[0].name
        claim, node = _node(
            f"n9{serial:03d}{k}",
            type_name,
            by_name[type_name].offerings[0].zone,
            by_name[type_name].allocatable,
        )
        claims.append(claim)
        nodes.append(node)
        for new in plan.new_claims:
            for key in new.pods:
                target[key] = node["metadata"]["name"]
    for pod in moved:
        pod["spec"]["nodeName"] = target.get(f"default/{pod['metadata']['name']}", pod["spec"]["nodeName"])


def measure(args: argparse.Namespace) -> dict:
    from nodewright.state.snapshot import Simulation, fresh_plan

    from bench._bounds import Bin, Shape, assignment_lp_bound
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
    passes, total_seconds = 0, first_seconds
    per_hour_by_pass = [round(before, 4)]  # how repeated consolidation converges (bench report draws it)
    while command is not None and passes < args.passes:
        _apply(command, claims, nodes, pods, by_name=by_name, serial=passes)
        passes += 1
        per_hour_by_pass.append(round(cost(), 4))
        command, seconds, _, _ = _decide(_world(claims, nodes, pods, cloud))
        total_seconds += seconds
    after = cost()
    # A fresh plan of the same pods by the scheduling core, and the assignment-LP bound.
    empty = _world([], [], [], cloud)
    fresh = fresh_plan(empty, pods, empty.nodepools)
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
    bound = assignment_lp_bound([Shape(c, m, n) for (c, m), n in sorted(shapes.items())], bins)
    figures.update(
        {
            "passes_applied": passes,
            "all_passes_seconds": round(total_seconds, 3),
            "after_per_hour": round(after, 4),
            "nodes_after": len(nodes),
            "fresh_plan_per_hour": round(fresh.cost_per_hour, 4),
            "after_vs_fresh": round(after / fresh.cost_per_hour, 4) if fresh.cost_per_hour else None,
            "lp_bound_per_hour": round(bound, 4),
            "per_hour_by_pass": per_hour_by_pass,
        }
    )
    return figures


def run(args: argparse.Namespace) -> int:
    figures = measure(args)
    print_figures(figures, args.json)
    save(args, figures)
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(description=__doc__)
    configure(parser)
    sys.exit(run(parser.parse_args()))
