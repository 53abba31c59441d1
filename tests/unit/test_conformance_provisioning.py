"""Conformance with Karpenter's provisioning suite (kubernetes-sigs/karpenter
pkg/controllers/provisioning/suite_test.go): limits, DaemonSet overhead, init and sidecar containers.

Each case names the Karpenter test it follows. Limits are counted inside one plan: every NodeClaim
the plan decides is charged (with its largest candidate, one node for ``nodes``) before the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from nodewright.api import labels as wk
from nodewright.scheduling import DaemonSetInput, Plan, Pod, Snapshot, Taint, plan, pod_from_k8s
from test_scheduling_support import catalog, nodepool, pods, spec, term, toleration

SUITE = "Provisioning > "


@dataclass(frozen=True)
class Case:
    karpenter: str
    snapshot: Callable[[], Snapshot]
    claims: int  # NodeClaims planned
    pending: int  # pods left pending
    reason: str = ""  # every pending pod's reason contains this
    types: Callable[[set[str]], bool] = lambda names: True  # over all candidate names


def apart(n: int, **fields: object) -> list[Pod]:
    """n pods that each need their own node (hostname anti-affinity)."""
    return pods(
        n, spec(cpu=100, labels={"app": "a"}, affinity=(term(wk.HOSTNAME, anti=True, app="a"),), **fields)
    )


def k8s_pod(name: str, containers: list[dict], init: list[dict] = ()) -> Pod:
    return pod_from_k8s(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": containers, "initContainers": list(init)},
        }
    )


def container(cpu: str, memory: str = "64Mi", **extra: object) -> dict:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}, **extra}


SMALL = {"c5.large", "m5.large", "r5.large", "m6g.large"}  # 2 vCPUs

CASES: dict[str, Case] = {
    "no launch once a limit is reached": Case(
        SUITE + "Limits > should not schedule when limits are exceeded",
        lambda: Snapshot(pods(1, spec()), [nodepool(limits={"cpu": 4000}, in_use={"cpu": 4000})]),
        0,
        1,
        "cpu limit 4 reached",
    ),
    "launch when the limit is met exactly": Case(
        SUITE + "Limits > should schedule if limits would be met",
        lambda: Snapshot(pods(1, spec()), [nodepool(limits={"cpu": 2000})]),
        1,
        0,
        types=lambda names: names <= SMALL,
    ),
    "limits.nodes: room for two nodes, the third pod stays pending": Case(
        SUITE + "Limits > should partially schedule if limits would be exceeded (limits.nodes)",
        lambda: Snapshot(apart(3), [nodepool(limits={"nodes": 2})]),
        2,
        1,
        "nodes limit 2 reached",
    ),
    "limits.nodes counts the nodes the NodePool already has": Case(
        SUITE + "Limits > should not schedule when limits are exceeded (limits.nodes, existing nodes)",
        lambda: Snapshot(apart(2), [nodepool(limits={"nodes": 3}, in_use={"nodes": 2})]),
        1,
        1,
        "nodes limit 3 reached",
    ),
    "a memory limit counts inside one plan": Case(
        SUITE + "Limits > should partially schedule if limits would be exceeded (memory)",
        lambda: Snapshot(apart(3), [nodepool(limits={"memory": 20 * 1024**3})]),
        2,
        1,
        "memory limit 20Gi reached",
    ),
    "a GPU limit counts inside one plan": Case(
        SUITE + "Limits > should partially schedule if limits would be exceeded (nvidia.com/gpu)",
        lambda: Snapshot(
            apart(3, extra={"nvidia.com/gpu": 1}),
            [nodepool(limits={"nvidia.com/gpu": 2}, instance_types=catalog())],
        ),
        2,
        1,
        "nvidia.com/gpu limit 2 reached",
    ),
    "DaemonSet requests shrink what a node holds": Case(
        SUITE + "Daemonsets > should account for daemonsets",
        lambda: Snapshot(
            pods(1, spec(cpu=500)), [nodepool()], daemonsets=[DaemonSetInput("ds", spec(cpu=1500))]
        ),
        1,
        0,
        types=lambda names: not names & SMALL,
    ),
    "a DaemonSet that does not tolerate the NodePool's taint costs nothing there": Case(
        SUITE + "Daemonsets > should ignore daemonsets without matching tolerations",
        lambda: Snapshot(
            pods(1, spec(cpu=500, tolerations=(toleration("dedicated"),))),
            [nodepool(taints=(Taint("dedicated", "x"),))],
            daemonsets=[DaemonSetInput("ds", spec(cpu=1500))],
        ),
        1,
        0,
        types=lambda names: bool(names & SMALL),
    ),
    "a DaemonSet tolerating a startup taint counts": Case(
        SUITE + "Daemonsets > should account for overhead (with startup taint)",
        lambda: Snapshot(
            pods(1, spec(cpu=500)),
            [nodepool(startup_taints=(Taint("init", "x"),))],
            daemonsets=[DaemonSetInput("ds", spec(cpu=1500, tolerations=(toleration("init"),)))],
        ),
        1,
        0,
        types=lambda names: not names & SMALL,
    ),
    "DaemonSet overhead bigger than every type": Case(
        SUITE + "Daemonsets > should not schedule if daemonset overhead is too large",
        lambda: Snapshot(
            pods(1, spec(cpu=100)), [nodepool()], daemonsets=[DaemonSetInput("ds", spec(cpu=64_000))]
        ),
        0,
        1,
        "no instance type in NodePool default has",
    ),
    "init containers: the largest one counts": Case(
        SUITE + "should schedule based on the max resource requests of containers and initContainers",
        lambda: Snapshot([k8s_pod("init", [container("1")], [container("3")])], [nodepool()]),
        1,
        0,
        types=lambda names: not names & SMALL,
    ),
    "sidecars add to the containers": Case(
        SUITE + "should schedule based on the sum of containers and sidecarContainers",
        lambda: Snapshot(
            [k8s_pod("sidecar", [container("1")], [container("1.5", restartPolicy="Always")])], [nodepool()]
        ),
        1,
        0,
        types=lambda names: not names & SMALL,
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_provisioning_conformance(case: str) -> None:
    conformance = CASES[case]
    result: Plan = plan(conformance.snapshot())
    assert len(result.new_claims) == conformance.claims, result
    assert len(result.unschedulable) == conformance.pending, result.unschedulable
    assert all(conformance.reason in r for r in result.unschedulable.values()), result.unschedulable
    names = {c.name for claim in result.new_claims for c in claim.instance_types}
    assert conformance.types(names), names
