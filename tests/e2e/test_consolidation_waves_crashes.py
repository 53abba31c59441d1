"""A consolidation wave killed at every step of its command converges (the fault matrix's rig,
``conftest.rig``, and its invariants): the same steps ``test_fault_matrix_crashes`` kills a drift
replace at, for a command that removes several nodes and launches several. Its own module: moto is
process-global, so the rig cannot share a process-wide sandbox with
``test_consolidation_waves_sandbox``'s."""

from __future__ import annotations

from typing import Any

import pytest
from faultmatrix import APP, running, settle, start
from nodewright.api import labels
from nodewright.cluster.resources import NODECLAIMS, NODEPOOLS, NODES
from nodewright.disruption import execute

from sandbox.workloads import DEPLOYMENTS

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("consolidation-waves-crashes")]

ON_DEMAND = {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}


WAVE_POINTS = [
    "disruption.candidates-tainted",
    "disruption.replacements-launched",
    "disruption.replacements-recorded",
]


@pytest.mark.parametrize("point", WAVE_POINTS)
def test_a_wave_killed_at_any_step_of_its_command_converges(rig: Any, point: str) -> None:
    """Four m5.2xlarge nodes with one 1-CPU pod each (made by a required hostname anti-affinity, then
    a rollout without it); the wave replaces them by cheaper nodes in one command. The disruption
    function is killed at ``point``; the fault matrix's rounds then run on, and in the end the pods
    run on fewer, cheaper nodes with every invariant held (no leak, no NodeClaim without an
    instance, every pod placed). Uses the fault matrix's rig (``conftest.rig``)."""
    types = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge", "m5.2xlarge"]}
    apart = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": APP}, "topologyKey": labels.HOSTNAME}
        ]
    }
    start(rig, 4, requirements=[ON_DEMAND, types], disruption={"consolidateAfter": "Never"})
    rig.admin.patch(
        DEPLOYMENTS,
        "inflate",
        {
            "spec": {
                "template": {
                    "spec": {
                        "affinity": {"podAntiAffinity": apart},
                        "nodeSelector": {labels.INSTANCE_TYPE: "m5.2xlarge"},
                    }
                }
            }
        },
        namespace="default",
    )
    assert rig.converge(lambda: running(rig, 4) and len(rig.admin.list(NODES)) == 4, rounds=12)
    # Fragmented: the same pods free to move, one per node; then consolidation is switched on.
    rig.admin.patch(
        DEPLOYMENTS,
        "inflate",
        {"spec": {"template": {"spec": {"affinity": None, "nodeSelector": None}}}},
        namespace="default",
    )
    assert rig.converge(lambda: running(rig, 4) and rig.pods(APP) == (4, 0), rounds=6)
    switched_on = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}  # the wave takes all four
    rig.admin.patch(NODEPOOLS, "default", {"spec": {"disruption": switched_on}})

    rig.crashes.arm(point)
    assert rig.converge(lambda: rig.crashes.killed[point] > 0, rounds=20), f"no invocation reached {point}"
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
        return running(rig, 4) and not going and kinds != ["m5.2xlarge"] * 4

    assert rig.converge(consolidated, rounds=30), [
        n["metadata"]["labels"].get(labels.INSTANCE_TYPE) for n in rig.admin.list(NODES)
    ]
    settle(rig, 4)
