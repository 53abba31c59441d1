"""A generic ephemeral volume's zone end to end: what the plan places, the simulated kube-scheduler binds.

In the sandbox (API emulator, simulated controllers/scheduler/kubelet, moto): the ephemeral-volume
controller makes the pod's claim from the volume's template, whose StorageClass may provision in one
zone only (WaitForFirstConsumer, ``allowedTopologies``). ``nodewright plan --kubeconfig`` must pin
the pod's NodeClaim to that zone, one provisioner invocation launches it, and the simulated
kube-scheduler binds the pod there (it refuses every other zone), where the volume is then made.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from nodewright.api import labels
from nodewright.cluster.resources import (
    NODEPOOLS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
)
from nodewright.state.pods import is_provisionable
from test_zone_topology_sandbox import (  # the zone tests' client fixture, NodePool and steps
    GENERAL,
    kube,
    node_zones,
    plan_read_only,
    pod,
    provision_and_bind,
)
from waiting import wait_for

from sandbox.scenarios.workloads import nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
__all__ = ["kube"]  # a fixture (its EC2NodeClass and NodePool on this module's sandbox)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-ephemeral", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


def test_a_pod_with_a_zonal_ephemeral_volume_gets_a_node_in_its_volumes_zone(
    kube: Any, sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    zone = sandbox.zones[-1]
    kube.create(
        STORAGE_CLASSES,
        {
            "metadata": {"name": "zonal"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": labels.ZONE, "values": [zone]}]}],
        },
    )
    pool = nodepool("scratch", GENERAL)
    pool["spec"]["template"]["metadata"] = {"labels": {"role": "scratch"}}
    kube.create(NODEPOOLS, pool)
    template = {
        "spec": {
            "storageClassName": "zonal",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }
    }
    volumes = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]
    scratchy = pod("scratchy", "scratchy", nodeSelector={"role": "scratch"}, volumes=volumes)
    kube.create(PODS, scratchy, namespace="default")
    claim = wait_for(
        "the pod's ephemeral claim",
        lambda: kube.find(PERSISTENT_VOLUME_CLAIMS, "scratchy-scratch", "default"),
    )
    assert [(r["kind"], r["name"], r["controller"]) for r in claim["metadata"]["ownerReferences"]] == [
        ("Pod", "scratchy", True)
    ]
    wait_for("the pod unschedulable", lambda: any(is_provisionable(p) for p in kube.list_pending_pods()))

    planned = plan_read_only(sandbox, monkeypatch)
    assert planned["pending"] == {}
    (new,) = [c for c in planned["nodeClaims"] if "default/scratchy" in c["pods"]]
    assert new["zones"] == [zone]

    provision_and_bind(kube, 1)
    node = kube.get(PODS, "scratchy", "default")["spec"]["nodeName"]
    assert node_zones(kube)[node] == zone
    bound = kube.get(PERSISTENT_VOLUME_CLAIMS, "scratchy-scratch", "default")
    volume = kube.get(PERSISTENT_VOLUMES, bound["spec"]["volumeName"])
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": labels.ZONE, "operator": "In", "values": [zone]}]
