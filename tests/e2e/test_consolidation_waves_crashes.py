"""A consolidation wave killed at every step of its command converges (the fault matrix's rig,
``conftest.rig``, and its invariants): the same steps ``test_fault_matrix_crashes`` kills a drift
replace at, for a command that removes several nodes and launches several. Its own module: moto is
process-global, so the rig cannot share a process-wide sandbox with
``test_consolidation_waves_sandbox``'s."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from faultmatrix import APP, reports, running, scale, settle, start
from nodewright.api import labels
from nodewright.cluster.resources import NODECLAIMS, NODEPOOLS, NODES
from nodewright.disruption import execute

from sandbox.scenarios.reliability import Observation, running_pods
from sandbox.scenarios.workloads import DEPLOYMENTS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ON_DEMAND = {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


PODS = 6
WAVE_POINTS = [
    "disruption.candidates-tainted",
    "disruption.replacements-launched",
    "disruption.replacements-recorded",
]


def layout(rig: Any, seen: Observation | None = None) -> list[tuple[str, int]]:
    """Each node's instance type and how many inflate pods run on it (not counting deleting ones)."""
    seen = seen or rig.observe()
    on = Counter(p["spec"].get("nodeName") for p in running_pods(seen, APP))
    kinds = {n["metadata"]["name"]: n["metadata"]["labels"].get(labels.INSTANCE_TYPE) for n in seen.nodes}
    return sorted((kind or "?", on[name]) for name, kind in kinds.items())


def workload(seen: Observation) -> list[dict[str, Any]]:
    """The inflate pods in any state: pending, running, deleting."""
    return [p for p in seen.pods if APP.items() <= (p["metadata"].get("labels") or {}).items()]


def one_pod_on_each(rig: Any) -> bool:
    """Six m5.xlarge nodes, none going, each running one inflate pod; no inflate pod besides."""
    seen = rig.observe()
    going = any(n["metadata"].get("deletionTimestamp") for n in seen.nodes)
    return not going and len(workload(seen)) == PODS and layout(rig, seen) == [("m5.xlarge", 1)] * PODS


@pytest.mark.parametrize("point", WAVE_POINTS)
def test_a_wave_killed_at_any_step_of_its_command_converges(rig: Any, point: str) -> None:
    """Six m5.xlarge nodes with one 2.5-CPU pod each: no node can take a second pod (nothing to
    delete) and none has a cheaper type of its own (m5.large is too small), but three of the pods
    fit one m5.2xlarge, which costs less than their three nodes: only a repack of several nodes
    saves, and the wave makes it in one command (six nodes to two). The disruption function is
    killed at ``point``; the fault matrix's rounds then run on, and in the end the pods run on
    fewer, cheaper nodes with every invariant held (no leak, no NodeClaim without an instance,
    every pod placed). Uses the fault matrix's rig (``conftest.rig``). (Four m5.2xlarge with one
    1-CPU pod each, the first scenario, is no wave's: deleting three of them saves more.)"""
    types = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge"]}
    # The selector from the deployment's first version: patched in after, it raced the rollout (a
    # first pass could place the first version's pods on an m5.2xlarge, empty for good after the
    # rollout with consolidateAfter Never).
    start(
        rig,
        PODS,
        cpu="2500m",
        node_selector={labels.INSTANCE_TYPE: "m5.xlarge"},
        requirements=[ON_DEMAND, types],
        disruption={"consolidateAfter": "Never"},
    )
    assert rig.converge(lambda: one_pod_on_each(rig), rounds=12), layout(rig)
    # The pods free to move: they go and come back without the node selector (one per node still:
    # no m5.xlarge holds two).
    rig.admin.patch(
        DEPLOYMENTS,
        "inflate",
        {"spec": {"replicas": 0, "template": {"spec": {"nodeSelector": None}}}},
        namespace="default",
    )
    assert rig.converge(lambda: not workload(rig.observe()), rounds=6), layout(rig)
    scale(rig, PODS)
    assert rig.converge(lambda: one_pod_on_each(rig), rounds=6), layout(rig)
    switched_on = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}  # the budget holds any wave
    rig.admin.patch(NODEPOOLS, "default", {"spec": {"disruption": switched_on}})

    del rig.crashes.killed[point]  # counted from its arming (``faultmatrix.kill_each``)
    rig.crashes.arm(point)
    assert rig.converge(lambda: rig.crashes.killed[point] > 0, rounds=20), (
        f"no invocation reached {point}",
        layout(rig),
        reports(rig),
    )
    rig.crashes.disarm()
    commands = [
        (c["metadata"].get("annotations") or {}).get(execute.COMMAND_ANNOTATION)
        for c in rig.admin.list(NODECLAIMS)
    ]
    in_wave = [value for value in commands if value and value.split(" ")[2] == "repack"]
    assert len(in_wave) >= 2, ("the killed command is a wave of several nodes", commands)

    def consolidated() -> bool:
        nodes = rig.admin.list(NODES)
        kinds = sorted(n["metadata"]["labels"].get(labels.INSTANCE_TYPE) for n in nodes)
        going = any(n["metadata"].get("deletionTimestamp") for n in nodes)
        return running(rig, PODS) and not going and len(kinds) < PODS

    assert rig.converge(consolidated, rounds=30), [
        n["metadata"]["labels"].get(labels.INSTANCE_TYPE) for n in rig.admin.list(NODES)
    ]
    settle(rig, PODS)
