"""Consolidation pass after pass over random fragmented clusters (the consolidation bench's cluster
and its in-memory application of each command, the flow's own decision): whatever the cluster, no
pass disrupts more nodes than the default budget allows, none takes a node a do-not-disrupt pod
holds, every pod keeps a place that fits, and the cluster's $/h never rises."""

from __future__ import annotations

import argparse
import math
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodewright.scheduling.resources import parse_resource

from bench import consolidation as bench
from bench.scheduling import catalog


def _fits(nodes: list[dict], pods: list[dict]) -> list[str]:
    """The nodes whose pods' requests exceed what they can hold (none, when every pod has a place)."""
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        where = used[pod["spec"]["nodeName"]]
        where["cpu"] += parse_resource("cpu", requests["cpu"])
        where["memory"] += parse_resource("memory", requests["memory"])
        where["pods"] += 1
    over = []
    for node in nodes:
        allocatable = node["status"]["allocatable"]
        name = node["metadata"]["name"]
        if any(used[name][r] > parse_resource(r, allocatable[r]) for r in ("cpu", "memory", "pods")):
            over.append(name)
    return over


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    node_count=st.integers(6, 24),
    pods_per_node=st.integers(2, 10),
    protected=st.integers(0, 4),
)
def test_passes_keep_the_budget_every_pod_placed_and_cost_never_rising(
    seed: int, node_count: int, pods_per_node: int, protected: int
) -> None:
    args = argparse.Namespace(nodes=node_count, pods=node_count * pods_per_node, seed=seed)
    types, _ = catalog()
    by_name = {t.name: t for t in types}
    prices = {t.name: min(o.price for o in t.offerings if o.capacity_type == "on-demand") for t in types}
    cloud = bench._Cloud(types, prices)
    claims, nodes, pods = bench._cluster(args, by_name)
    for pod in pods[:protected]:  # a do-not-disrupt pod holds its node
        pod["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    held = {pod["spec"]["nodeName"] for pod in pods[:protected]}

    def cost() -> float:
        return sum(prices[c["metadata"]["labels"]["node.kubernetes.io/instance-type"]] for c in claims)

    before = cost()
    for serial in range(5):
        command, _, _, _ = bench._decide(bench._world(claims, nodes, pods, cloud))
        if command is None:
            break
        allowed = math.ceil(len(nodes) * 10 / 100)  # the default budget: 10 % of the nodes, rounded up
        assert 1 <= len(command.candidates) <= allowed, command.describe()
        assert held.isdisjoint(c.node_name for c in command.candidates), command.describe()
        bench._apply(command, claims, nodes, pods, by_name=by_name, cloud=cloud, serial=serial)
        names = {n["metadata"]["name"] for n in nodes}
        assert all(p["spec"]["nodeName"] in names for p in pods), "every pod has a node"
        assert _fits(nodes, pods) == [], "every node holds its pods"
        after = cost()
        assert after < before + 1e-9, f"pass {serial}: ${before:.4f}/h → ${after:.4f}/h"
        before = after
