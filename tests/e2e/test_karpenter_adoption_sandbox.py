"""A cluster Karpenter v1.14 has been running, adopted in place by the real functions in the sandbox.

The cluster is set up as Karpenter leaves it: an EC2NodeClass and a NodePool (Gte, a
node-role.kubernetes.io label, template annotations), an instance launched and tagged as Karpenter's
AWS provider tags it (in the EC2NodeClass's subnet, with its security groups and AMI), its NodeClaim
with Karpenter's labels, hash annotations of Karpenter's hash versions, finalizer, conditions and
status, and its Node (registered by the sandbox's kubelet, labelled and finalized as Karpenter
leaves it) running a pod. Then the provisioner and the disruption handler run as their schedules run
them. Nothing is replaced; the EC2NodeClass and NodePool show Ready (``kubectl get``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from handler_calls import disrupt, provision
from nodewright.api import hashing
from nodewright.api import labels as wk
from nodewright.cloud.userdata import kubelet_may_set
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS, NODES, PODS
from waiting import wait_for

from sandbox.apiserver.testing import kubectl
from sandbox.aws.eks_amis import nodeadm_user_data
from sandbox.scenarios.workloads import DEPLOYMENTS, REPLICASETS, nodeclass

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

CLAIM = "default-x7k2p"
KARPENTER_ANNOTATIONS = {
    hashing.NODEPOOL_HASH: "6821555240594823858",
    hashing.NODEPOOL_HASH_VERSION: "v3",
    hashing.NODECLASS_HASH: "2984564093720410837",
    hashing.NODECLASS_HASH_VERSION: "v6",
    "karpenter.k8s.aws/tagged": "true",
    "example.com/owner": "platform",
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-adoption", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def env(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    monkeypatch.setenv("POLL_INTERVAL_SECONDS", "1")
    sandbox.warm_catalog()
    return sandbox


def karpenter_nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "metadata": {
                    "labels": {"node-role.kubernetes.io/worker": ""},
                    "annotations": {"example.com/owner": "platform"},
                },
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
                        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                        {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
                        {"key": wk.INSTANCE_GENERATION, "operator": "Gte", "values": ["3"]},
                    ],
                },
            },
            # A Karpenter cluster's nodes run work; Never keeps this story about adoption, not cost.
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "Never"},
        },
    }


def launch_as_karpenter(sb: Any, kube: Any) -> tuple[str, str]:
    """An instance and its NodeClaim as Karpenter v1.14 launches them; (instance id, node name)."""
    from nodewright.cloud.amis import AmiResolver
    from nodewright.cloud.eks import cluster_info
    from nodewright.cloud.nodeclass import NodeClass
    from nodewright.settings import Settings

    ec2, ssm = sb.aws_client("ec2"), sb.aws_client("ssm")
    try:
        # Karpenter's own calls (this test plays it): the account owner's identity, not a function's.
        settings = Settings.from_env({**os.environ, **sb.owner_credentials()})
        images = AmiResolver(ec2, ssm, lambda: cluster_info(settings)).images(NodeClass(nodeclass(sb)))
        image = next(i for i in images if i.arch == "amd64" and not i.gpu)
        discovery = [{"Name": "tag:karpenter.sh/discovery", "Values": [sb.cluster_name]}]
        subnet = ec2.describe_subnets(Filters=discovery)["Subnets"][0]
        groups = [g["GroupId"] for g in ec2.describe_security_groups(Filters=discovery)["SecurityGroups"]]
        tags = {
            "karpenter.sh/nodepool": "default",
            "karpenter.sh/nodeclaim": CLAIM,
            "karpenter.k8s.aws/ec2nodeclass": "default",
            "eks:eks-cluster-name": sb.cluster_name,
            f"kubernetes.io/cluster/{sb.cluster_name}": "owned",
            "Name": f"default/{CLAIM}",
        }
        claim = karpenter_nodeclaim(subnet)
        kube.create(NODECLAIMS, claim)
        # Karpenter's user data: nodeadm joining the cluster, the NodeClaim's labels the kubelet may
        # set itself, and the unregistered taint its registration lifts.
        user_data = nodeadm_user_data(
            sb.cluster_name,
            labels={k: v for k, v in claim["metadata"]["labels"].items() if kubelet_may_set(k)},
            taints=(f"{wk.UNREGISTERED_TAINT_KEY}:NoExecute",),
        )
        instance = ec2.run_instances(
            ImageId=image.id,
            InstanceType="c5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet["SubnetId"],
            SecurityGroupIds=groups,
            UserData=user_data,
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
            ],
        )["Instances"][0]
    finally:
        ec2.close()
        ssm.close()
    return instance["InstanceId"], image.id


def karpenter_nodeclaim(subnet: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": CLAIM,
            "labels": {
                wk.EC2NODECLASS: "default",
                wk.NODEPOOL: "default",
                wk.CAPACITY_TYPE: "on-demand",
                wk.ARCH: "amd64",
                wk.OS: "linux",
                wk.INSTANCE_TYPE: "c5.large",
                wk.ZONE: subnet["AvailabilityZone"],
                wk.TOPOLOGY_ZONE_ID: subnet["AvailabilityZoneId"],
                wk.INSTANCE_CATEGORY: "c",
                wk.INSTANCE_GENERATION: "5",
                "node-role.kubernetes.io/worker": "",
            },
            "annotations": dict(KARPENTER_ANNOTATIONS),
            "finalizers": [wk.TERMINATION_FINALIZER],
        },
        "spec": {
            "expireAfter": "720h",
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
                {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
                {"key": wk.INSTANCE_GENERATION, "operator": "Gte", "values": ["3"]},
                {"key": wk.NODEPOOL, "operator": "In", "values": ["default"]},
                {"key": wk.EC2NODECLASS, "operator": "In", "values": ["default"]},
                {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.large", "m5.large"]},
            ],
            "resources": {"requests": {"cpu": "1500m", "pods": "1"}},
        },
    }


def finish_as_karpenter(kube: Any, instance_id: str, image_id: str) -> str:
    """Karpenter's registration and initialization, already done: the NodeClaim's labels synced onto
    the node, its finalizer, the unregistered taint lifted; the NodeClaim's status and conditions."""
    node = wait_for(
        "the kubelet to register the instance",
        lambda: next(
            (n for n in kube.list(NODES) if n["spec"].get("providerID", "").endswith(instance_id)), None
        ),
    )
    name = node["metadata"]["name"]
    claim_labels = kube.get(NODECLAIMS, CLAIM)["metadata"]["labels"]
    kube.patch(
        NODES,
        name,
        {
            "metadata": {
                "finalizers": [wk.TERMINATION_FINALIZER],
                "labels": {**claim_labels, wk.NODE_REGISTERED: "true", wk.NODE_INITIALIZED: "true"},
                "annotations": {"example.com/owner": "platform"},
            },
            "spec": {
                "taints": [
                    t for t in node["spec"].get("taints") or [] if t["key"] != wk.UNREGISTERED_TAINT_KEY
                ]
            },
        },
    )
    now = "2026-11-01T10:01:55Z"
    conditions = [
        {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": now}
        for kind in ("Launched", "Registered", "Initialized", "Ready")
    ]
    node_status = kube.get(NODES, name)["status"]
    kube.patch(
        NODECLAIMS,
        CLAIM,
        {
            "status": {
                "providerID": node["spec"]["providerID"],
                "imageID": image_id,
                "nodeName": name,
                "capacity": node_status["capacity"],
                "allocatable": node_status["allocatable"],
                "conditions": conditions,
            }
        },
        subresource="status",
    )
    return name


def test_a_cluster_karpenter_ran_is_adopted_without_replacing_a_node(env: Any) -> None:
    from nodewright.cluster import reset_connections

    kube = env.admin_cluster()
    kube.create(EC2NODECLASSES, nodeclass(env))
    kube.create(NODEPOOLS, karpenter_nodepool())
    instance_id, image_id = launch_as_karpenter(env, kube)
    node = finish_as_karpenter(kube, instance_id, image_id)
    kube.create(
        DEPLOYMENTS,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "nodeSelector": {"node-role.kubernetes.io/worker": ""},
                        "containers": [
                            {"name": "web", "image": "pause", "resources": {"requests": {"cpu": "1"}}}
                        ],
                    },
                },
            },
        },
        namespace="default",
    )
    wait_for(
        "the web pod to run on Karpenter's node",
        lambda: any(p["spec"].get("nodeName") == node for p in kube.list(PODS, namespace="default")),
    )

    for _ in range(3):  # three minutes of both schedules
        provision(seconds=2)
        disrupt(seconds=3)

    claim = kube.get(NODECLAIMS, CLAIM)
    assert claim["metadata"].get("deletionTimestamp") is None
    assert [n["metadata"]["name"] for n in kube.list(NODES)] == [node]
    assert [c["metadata"]["name"] for c in kube.list(NODECLAIMS)] == [CLAIM]
    ec2 = env.aws_client("ec2")
    try:
        live = [
            i["InstanceId"]
            for r in ec2.describe_instances()["Reservations"]
            for i in r["Instances"]
            if i["State"]["Name"] in ("pending", "running")
        ]
    finally:
        ec2.close()
    assert live == [instance_id]
    drifted = [c for c in claim["status"]["conditions"] if c["type"] == "Drifted"]
    assert all(c["status"] != "True" for c in drifted)
    annotations = claim["metadata"]["annotations"]
    assert annotations[hashing.NODEPOOL_HASH_VERSION] == hashing.HASH_VERSION  # adopted
    assert annotations[hashing.NODECLASS_HASH_VERSION] == hashing.HASH_VERSION
    assert annotations["example.com/owner"] == "platform"

    out = kubectl(env.kubeconfig_path, "get", "ec2nodeclass", "default")
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()
    assert header.split()[:2] == ["NAME", "READY"]
    assert row.split()[:2] == ["default", "True"]
    out = kubectl(env.kubeconfig_path, "get", "nodepool", "default")
    header, row = out.stdout.splitlines()
    assert dict(zip(header.split(), row.split(), strict=False))["READY"] == "True"
    assert dict(zip(header.split(), row.split(), strict=False))["NODES"] == "1"
    nodeclass_status = kube.get(EC2NODECLASSES, "default")["status"]
    assert nodeclass_status["subnets"]
    assert all(s.get("zoneID") for s in nodeclass_status["subnets"])
    assert [a["id"] for a in nodeclass_status["amis"] if a["id"] == image_id] == [image_id]

    for name in (d["metadata"]["name"] for d in kube.list(DEPLOYMENTS, namespace="default")):
        kube.delete(DEPLOYMENTS, name, namespace="default")
    for name in (r["metadata"]["name"] for r in kube.list(REPLICASETS, namespace="default")):
        kube.delete(REPLICASETS, name, namespace="default")
    reset_connections()
