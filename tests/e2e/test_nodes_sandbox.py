"""Windows nodes, node storage and a static NodePool end to end, with the real provisioner and disruption
handlers against the sandbox (API emulator, simulated kube-scheduler and kubelet, moto):

* a Windows pod lands on a Windows node (the kubelet of a Windows Server AMI labels it
  ``kubernetes.io/os=windows`` with its build), and a Linux pod never does;
* a pod asking 100 GiB of ``ephemeral-storage`` lands on a node whose 200 GiB root volume holds it;
* a pod asking 300 GiB lands on an instance-store type of a RAID0 EC2NodeClass, its node reporting
  the instance store;
* ``kubectl scale nodepool`` on a static NodePool adds and removes nodes, and ``status.nodes``
  follows.

What each node reports comes from its instance (its AMI, its volumes, its user data), never from its
NodeClaim (``sandbox.simulators.kubelet``), so a wrong computation in the product leaves a pod pending.
Waits are on conditions; the handlers' loops are shortened, never their deadlines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from handler_calls import disrupt, next_pass, provision
from kubernetes.utils.quantity import parse_quantity
from nodewright.api import labels
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS, NODES, PODS
from waiting import wait_for

from sandbox.apiserver.testing import kubectl
from sandbox.scenarios.workloads import nodeclass, nodepool

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

GIB = 1024**3
ON_DEMAND = {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}
GENERAL = {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m"]}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-nodes", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def kube(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from nodewright.cluster import reset_connections

    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    monkeypatch.setenv("POLL_INTERVAL_SECONDS", "1")
    sandbox.warm_catalog()
    client = sandbox.admin_cluster()
    yield client
    reset_connections()


def named_nodeclass(sandbox: Any, name: str, **spec: Any) -> dict[str, Any]:
    document = nodeclass(sandbox)
    document["metadata"]["name"] = name
    document["spec"].update(spec)
    return document


def pool_on(
    name: str, nodeclass_name: str, requirements: list[dict[str, Any]], **spec: Any
) -> dict[str, Any]:
    document = nodepool(name, requirements, **spec)
    document["spec"]["template"]["spec"]["nodeClassRef"]["name"] = nodeclass_name
    document["spec"]["template"].setdefault("metadata", {})["labels"] = {"example.com/pool": name}
    return document


def pod(name: str, selector: dict[str, str], **requests: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": selector,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "250m", **requests}}}
            ],
        },
    }


def node_of_pod(kube: Any, name: str) -> dict[str, Any] | None:
    """The whole Node the Running pod ``default/name`` is bound to, as the kubelet reported it: one
    GET (a list through the layer's client drops what no flow reads, ``nodeInfo`` among it)."""
    found = next((p for p in kube.list(PODS, namespace="default") if p["metadata"]["name"] == name), None)
    if not found or (found.get("status") or {}).get("phase") != "Running":
        return None
    node: dict[str, Any] | None = kube.find(NODES, found["spec"]["nodeName"])
    return node


def storage(node: dict[str, Any], field: str = "capacity") -> int:
    return int(parse_quantity(node["status"][field]["ephemeral-storage"]))


def test_windows_pods_land_on_windows_nodes_and_storage_asks_land_on_nodes_that_hold_them(
    kube: Any, sandbox: Any
) -> None:
    root = [
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "200Gi", "volumeType": "gp3"}}
    ]
    kube.create(EC2NODECLASSES, named_nodeclass(sandbox, "linux"))
    kube.create(EC2NODECLASSES, named_nodeclass(sandbox, "big-root", blockDeviceMappings=root))
    kube.create(EC2NODECLASSES, named_nodeclass(sandbox, "raid", instanceStorePolicy="RAID0"))
    windows_class = named_nodeclass(sandbox, "windows", amiSelectorTerms=[{"alias": "windows2022@latest"}])
    del windows_class["spec"]["amiFamily"]
    kube.create(EC2NODECLASSES, windows_class)
    os_is = {"key": labels.OS, "operator": "In"}
    kube.create(NODEPOOLS, pool_on("linux", "linux", [ON_DEMAND, GENERAL, {**os_is, "values": ["linux"]}]))
    kube.create(
        NODEPOOLS, pool_on("windows", "windows", [ON_DEMAND, GENERAL, {**os_is, "values": ["windows"]}])
    )
    kube.create(NODEPOOLS, pool_on("big-root", "big-root", [ON_DEMAND, GENERAL]))
    raid_category = {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r", "i", "d"]}
    kube.create(NODEPOOLS, pool_on("raid", "raid", [ON_DEMAND, raid_category]))

    kube.create(PODS, pod("iis", {labels.OS: "windows"}), namespace="default")
    kube.create(PODS, pod("nginx", {labels.OS: "linux", "example.com/pool": "linux"}), namespace="default")
    scratch = {"ephemeral-storage": "100Gi"}
    kube.create(PODS, pod("scratch-100", {"example.com/pool": "big-root"}, **scratch), namespace="default")
    bulk = {"ephemeral-storage": "300Gi"}
    kube.create(PODS, pod("scratch-300", {"example.com/pool": "raid"}, **bulk), namespace="default")
    wait_for("4 unschedulable pods", lambda: len(kube.list_pending_pods()) == 4, 120)

    provision(20)

    iis = wait_for("iis Running on its node", lambda: node_of_pod(kube, "iis"), 120, step=next_pass)
    assert iis["metadata"]["labels"][labels.OS] == "windows"
    assert iis["metadata"]["labels"][labels.WINDOWS_BUILD] == "10.0.20348"  # Windows Server 2022
    assert iis["status"]["nodeInfo"]["operatingSystem"] == "windows"
    assert storage(iis) == 50 * GIB  # the Windows family's C: drive
    nginx = wait_for("nginx Running on its node", lambda: node_of_pod(kube, "nginx"), 120, step=next_pass)
    assert nginx["metadata"]["labels"][labels.OS] == "linux"
    windows_nodes = {
        n["metadata"]["name"] for n in kube.list(NODES) if n["metadata"]["labels"][labels.OS] == "windows"
    }
    linux_pods_on_windows = [
        p["metadata"]["name"]
        for p in kube.list(PODS, namespace="default")
        if p["spec"].get("nodeName") in windows_nodes and p["metadata"]["name"] != "iis"
    ]
    assert linux_pods_on_windows == []

    scratch_node = wait_for(
        "scratch-100 Running", lambda: node_of_pod(kube, "scratch-100"), 120, step=next_pass
    )
    assert storage(scratch_node) == 200 * GIB  # the root volume the kubelet reports
    assert storage(scratch_node, "allocatable") >= 100 * GIB

    raid_node = wait_for("scratch-300 Running", lambda: node_of_pod(kube, "scratch-300"), 120, step=next_pass)
    instance_type = raid_node["metadata"]["labels"][labels.INSTANCE_TYPE]
    ec2 = sandbox.aws_client("ec2")
    try:
        info = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    finally:
        ec2.close()
    store = int(info["InstanceStorageInfo"]["TotalSizeInGB"])
    assert storage(raid_node) == store * 1000**3  # the RAID0 array of the instance store
    assert storage(raid_node, "allocatable") >= 300 * GIB


def static_nodes(kube: Any, pool: str = "static") -> tuple[list[str], list[str]]:
    """(live NodeClaims, registered Nodes) of a NodePool."""
    claims = [
        c["metadata"]["name"]
        for c in kube.list(NODECLAIMS)
        if c["metadata"]["labels"].get(labels.NODEPOOL) == pool and not c["metadata"].get("deletionTimestamp")
    ]
    nodes = [
        n["metadata"]["name"]
        for n in kube.list(NODES)
        if n["metadata"]["labels"].get(labels.NODEPOOL) == pool
    ]
    return claims, nodes


def test_kubectl_scale_nodepool_adds_and_removes_nodes_of_a_static_nodepool(
    kube: Any, sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATIC_CAPACITY", "true")  # -c staticCapacity=true
    kube.create(EC2NODECLASSES, named_nodeclass(sandbox, "static"))
    static_pool = pool_on(
        "static",
        "static",
        [ON_DEMAND, {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["m"]}],
        replicas=2,
    )
    static_pool["spec"]["template"]["spec"]["taints"] = [
        {"key": "example.com/static", "value": "true", "effect": "NoSchedule"}
    ]
    kube.create(NODEPOOLS, static_pool)

    provision(10)
    wait_for(
        "2 static nodes", lambda: len(static_nodes(kube)[1]) == 2 and len(static_nodes(kube)[0]) == 2, 120
    )

    config = sandbox.kubeconfig_path
    scaled = kubectl(config, "scale", "nodepool", "static", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    assert "nodepool.karpenter.sh/static scaled" in scaled.stdout
    provision(10)
    wait_for(
        "3 static nodes", lambda: len(static_nodes(kube)[1]) == 3 and len(static_nodes(kube)[0]) == 3, 120
    )

    scaled = kubectl(config, "scale", "nodepool", "static", "--replicas=1")
    assert scaled.returncode == 0, scaled.stderr
    answer = provision(5)
    assert len(answer.get("staticDeleted") or []) == 2, answer

    def one_left() -> bool:
        disrupt(12)  # drains and terminates the deleted NodeClaims, writes the NodePool's status
        claims, nodes = static_nodes(kube)
        all_claims = [
            c for c in kube.list(NODECLAIMS) if c["metadata"]["labels"].get(labels.NODEPOOL) == "static"
        ]
        return len(claims) == 1 and len(nodes) == 1 and len(all_claims) == 1

    wait_for("the static NodePool down to 1 node", one_left, timeout=240)

    def status_nodes() -> bool:
        got = kubectl(config, "get", "nodepool", "static", "-o", "jsonpath={.status.nodes}")
        return got.returncode == 0 and got.stdout == "1"

    wait_for("status.nodes 1", lambda: status_nodes() or (disrupt(2) and False) or status_nodes(), 120)
    scale = kubectl(config, "get", "--raw", "/apis/karpenter.sh/v1/nodepools/static/scale")
    assert scale.returncode == 0, scale.stderr
    assert json.loads(scale.stdout)["status"]["replicas"] == 1
    assert json.loads(scale.stdout)["spec"]["replicas"] == 1
