"""Consolidation in waves against the sandbox: the real provisioner and disruption handlers take a
fragmented cluster down under the NodePool's 10 % budget, a PDB and a do-not-disrupt pod present.

The cluster: twelve m5.xlarge nodes, each left running one small ``web`` pod (250m) once the 3-CPU
pods that made them were scaled away; a PodDisruptionBudget lets one ``web`` pod be unavailable at a
time; one ``keep`` pod carries ``karpenter.sh/do-not-disrupt``. A watcher samples the cluster
throughout: no more nodes disrupting than the budget allows, the ``keep`` pod Running on its node,
never more than one ``web`` pod missing. The same story runs under ``Balanced``: deleting one of
twelve nodes moving one pod scores 1 (its share of the cost over its share of the disruption),
above Balanced's 0.5, so it consolidates as WhenEmptyOrUnderutilized does.

Helpers and the shortened waits (``NOMINATION_SECONDS`` 1 s, ``VALIDATION_SECONDS`` 2 s) are the
disruption e2e module's; this module has its own sandbox.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from nodewright.api import labels
from nodewright.cluster.resources import NODECLAIMS, NODEPOOLS, NODES, PODS
from test_disruption_sandbox import (
    ON_DEMAND,
    PDBS,
    cluster,
    deployment,
    disrupt_until,
    env,
    initialized,
    node_names,
    pdb,
    provision,
    running_on,
    scale,
    wait_for,
)

from sandbox.scenarios.workloads import DEPLOYMENTS, nodepool

__all__ = ["cluster", "env"]  # the disruption e2e module's fixtures, on this module's sandbox

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

NODES_AT_START = 12
BUDGET_PERCENT = 10
M5 = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-consolidation-waves", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


def fragmented(kube: Any) -> str:
    """Twelve m5.xlarge nodes each running one ``web`` pod, and the ``keep`` pod; its node's name."""
    filler = deployment("filler", NODES_AT_START, "3")
    filler["spec"]["template"]["spec"]["nodeSelector"] = {labels.INSTANCE_TYPE: "m5.xlarge"}
    kube.create(DEPLOYMENTS, filler, namespace="default")
    wait_for("filler pending", lambda: len(kube.list_pending_pods()) == NODES_AT_START)

    def filled() -> bool:
        provision(seconds=4)
        return len(set(running_on(kube, "filler"))) == NODES_AT_START

    wait_for("one filler pod Running on each of twelve nodes", filled, timeout=240)
    # The scheduler scores least-allocated first: one web pod lands on each node.
    kube.create(DEPLOYMENTS, deployment("web", NODES_AT_START, "250m"), namespace="default")
    wait_for("web spread over the nodes", lambda: len(set(running_on(kube, "web"))) == NODES_AT_START)
    keep = deployment("keep", 1, "250m", annotations={labels.DO_NOT_DISRUPT: "true"})
    kube.create(DEPLOYMENTS, keep, namespace="default")
    wait_for("keep Running", lambda: len(running_on(kube, "keep")) == 1)
    kube.create(PDBS, pdb("web", "web", maxUnavailable=1), namespace="default")
    scale(kube, "filler", 0)
    wait_for("filler gone", lambda: not running_on(kube, "filler"))
    for node in node_names(kube):
        initialized(kube, node)
    (kept_on,) = running_on(kube, "keep")
    return kept_on


class Watcher:
    """Samples the cluster in the background until stopped (see the module)."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.over_budget: list[tuple[int, int]] = []  # (nodes, disrupting) beyond the budget
        self.web_running_min = NODES_AT_START
        self.keep_nodes: set[str] = set()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            nodes = self.kube.list(NODES)
            disrupting = sum(
                1
                for n in nodes
                if n["metadata"].get("deletionTimestamp")
                or any(t.get("key") == labels.DISRUPTED_TAINT_KEY for t in n["spec"].get("taints") or [])
            )
            if disrupting > math.ceil(len(nodes) * BUDGET_PERCENT / 100):
                self.over_budget.append((len(nodes), disrupting))
            self.web_running_min = min(self.web_running_min, len(running_on(self.kube, "web")))
            self.keep_nodes.update(running_on(self.kube, "keep") or ["(not Running)"])
            self.samples += 1
            time.sleep(0.2)


@pytest.mark.parametrize("policy", ["WhenEmptyOrUnderutilized", "Balanced"])
def test_a_fragmented_cluster_consolidates_in_waves_within_the_budget_pdbs_and_do_not_disrupt(
    cluster: Any, env: Any, policy: str
) -> None:
    disruption = {
        "consolidationPolicy": policy,
        "consolidateAfter": "1s",
        "budgets": [{"nodes": f"{BUDGET_PERCENT}%"}],
    }
    cluster.create(NODEPOOLS, nodepool("waves", [ON_DEMAND, M5], disruption=disruption))
    kept_on = fragmented(cluster)
    claims_before = len(cluster.list(NODECLAIMS))

    with Watcher(cluster) as watcher:
        reports = disrupt_until(
            "the waves to take the cluster down to four nodes",
            lambda: len(node_names(cluster)) <= 4 and len(running_on(cluster, "web")) == NODES_AT_START,
            timeout=600,
        )

    decisions = [d for r in reports for d in r["decisions"]]
    assert decisions, reports
    assert all(d["reason"] == "Underutilized" and d["savingsPerHour"] > 0 for d in decisions), decisions
    assert max(len(d["nodeclaims"]) for d in decisions) >= 2, "a wave removes several nodes at once"
    assert watcher.samples > 10
    assert watcher.over_budget == [], "no more nodes disrupting at once than 10 % of the nodes"
    assert watcher.keep_nodes == {kept_on}, "the do-not-disrupt pod never moved"
    assert kept_on in node_names(cluster)
    assert watcher.web_running_min >= NODES_AT_START - 1, "the PDB lets one web pod be missing at a time"
    assert claims_before > len(cluster.list(NODECLAIMS))
    pods = [p for p in cluster.list(PODS, namespace="default") if not p["metadata"].get("deletionTimestamp")]
    assert all((p.get("status") or {}).get("phase") == "Running" for p in pods), "every pod Running"
