"""A NodeOverlay changing which instance type is cheapest, end to end in the sandbox (API emulator with
the NodeOverlay CRD, simulated scheduler and kubelet, moto whose instant fleets choose as EC2 does), through
the real provisioner and disruption handlers with the stack's ``nodeOverlay`` gate on.

Without an overlay a 3-CPU pod lands on one of the cheapest 4-vCPU types (a c type). A Savings Plan
priced as ``priceAdjustment: -50%`` on r5.xlarge makes it the cheapest: the pod lands on r5.xlarge,
the NodeClaim says the overlay priced it, and the overlay is Ready.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from handler_calls import disrupt, handlers_against, node_of, pod, provision, until_a_report
from nodewright.api import labels
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEOVERLAYS, NODEPOOLS, PODS
from waiting import wait_for

from sandbox.scenarios.workloads import nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

POOL = [
    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": labels.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
    {"key": labels.ARCH, "operator": "In", "values": ["amd64"]},
]
SAVINGS_PLAN = {
    "apiVersion": "karpenter.sh/v1alpha1",
    "kind": "NodeOverlay",
    "metadata": {"name": "r5-savings-plan"},
    "spec": {
        "requirements": [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["r5.xlarge"]}],
        "priceAdjustment": "-50%",
    },
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-overlay", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture(scope="module")
def kube(sandbox: Any) -> Iterator[Any]:
    # NODE_OVERLAY: the stack's nodeOverlay setting (Karpenter's gate), on.
    with handlers_against(sandbox, NODE_OVERLAY="true"):
        client = sandbox.admin_cluster()
        client.create(EC2NODECLASSES, nodeclass(sandbox))
        client.create(NODEPOOLS, nodepool("general", POOL))
        yield client


def land(kube: Any, name: str) -> dict[str, Any]:
    """The node a new 3-CPU pod lands on through the provisioner."""
    kube.create(PODS, pod(name, "3"), namespace="default")
    wait_for(
        f"{name} unschedulable", lambda: any(p["metadata"]["name"] == name for p in kube.list_pending_pods())
    )
    # One launch for the pod, over however many passes it takes to run (on a loaded machine the
    # first pass may end, its time spent, before it launched).
    launched = [until_a_report(provision)["launched"]]
    wait_for(
        f"{name} Running",
        lambda: node_of(kube, name) is not None,
        step=lambda: launched.append(until_a_report(provision)["launched"]),
    )
    assert sum(launched) == 1, launched
    found = node_of(kube, name)
    assert found is not None
    return found


def test_a_nodeoverlay_changes_which_type_is_cheapest_and_pods_land_on_it(kube: Any) -> None:
    before = land(kube, "before")
    assert before["metadata"]["labels"][labels.INSTANCE_CATEGORY] == "c"  # a cheapest 4-vCPU type

    kube.create(NODEOVERLAYS, SAVINGS_PLAN)
    after = land(kube, "after")
    assert after["metadata"]["labels"][labels.INSTANCE_TYPE] == "r5.xlarge"
    claim = next(
        c
        for c in kube.list(NODECLAIMS)
        if (c.get("status") or {}).get("nodeName") == after["metadata"]["name"]
    )
    assert claim["metadata"]["annotations"]["karpenter.sh/price-overlay-applied"] == "true"

    disrupt()  # the status controller writes the overlay's conditions
    (overlay,) = kube.list(NODEOVERLAYS)
    found = {c["type"]: c["status"] for c in overlay["status"]["conditions"]}
    assert found == {"ValidationSucceeded": "True", "Ready": "True"}
