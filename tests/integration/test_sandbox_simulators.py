"""The cluster simulators against the API emulator and the moto server (one sandbox for the module)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
import waiting
from kubernetes.client.exceptions import ApiException

from sandbox import Sandbox
from sandbox.aws.eks_amis import nodeadm_user_data
from sandbox.simulators.controllers import AttachDetachController
from sandbox.simulators.kube import Kube, core, group

CLUSTER = "sims"
ZONE = "topology.kubernetes.io/zone"


# The suite's one wait (tests/waiting.py), with this module's default timeout and poll interval.
wait_for = functools.partial(waiting.wait_for, timeout=10, every=0.1)


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(cluster_name=CLUSTER, boot_delay=0.2, init_delay=0.3) as sandbox:
        sandbox.apply_crds()
        # The simulated unmount-and-detach delay: the test asserts the order (attached while
        # mounted, gone after the pod), not the delay's length.
        for controller in sandbox.controllers.controllers:
            if isinstance(controller, AttachDetachController):
                controller.detach_seconds = 1.0
        yield sandbox


@pytest.fixture(scope="module")
def kube(sb: Sandbox) -> Kube:
    return Kube(sb.api_client())


@pytest.fixture(scope="module")
def ec2(sb: Sandbox) -> Iterator[Any]:
    client = sb.aws_client("ec2")
    yield client
    client.close()


def launch(
    sb: Sandbox, ec2: Any, instance_type: str = "m5.large", zone: str = "us-east-1a", **extra: Any
) -> str:
    tags = [{"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}, *extra.pop("tags", [])]
    extra.setdefault("UserData", nodeadm_user_data(CLUSTER))  # a node's bootstrap that joins this cluster
    return ec2.run_instances(
        ImageId=sb.aws.images["al2023/x86_64"],
        MinCount=1,
        MaxCount=1,
        InstanceType=instance_type,
        SubnetId=sb.aws.subnets[zone],
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        **extra,
    )["Instances"][0]["InstanceId"]


def node_of(kube: Kube, instance_id: str) -> dict | None:
    nodes, _ = kube.list(core("nodes"))
    return next((n for n in nodes if n["spec"].get("providerID", "").endswith(f"/{instance_id}")), None)


def ready(node: dict | None) -> bool:
    return bool(node) and any(
        c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions") or []
    )


def deployment(name: str, replicas: int, cpu: str = "100m", namespace: str = "default", **spec: Any) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "pause:3.9", "resources": {"requests": {"cpu": cpu}}}
                    ],
                    **spec,
                },
            },
        },
    }


def pods_of(kube: Kube, app: str, namespace: str = "default") -> list[dict]:
    pods, _ = kube.list(core("pods", namespace), labelSelector=f"app={app}")
    return pods


def test_a_node_registers_from_its_user_data_and_its_startup_agent_lifts_its_startup_taint(
    sb, kube, ec2
) -> None:
    kube.create(
        group("karpenter.sh/v1", "nodeclaims"),
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "claim-1", "labels": {"team": "blue", "karpenter.sh/nodepool": "general"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "workload", "operator": "In", "values": ["batch"]}],
                "taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}],
                "startupTaints": [{"key": "cni.example/not-ready", "effect": "NoSchedule"}],
            },
        },
    )
    # What a bootstrap written from that NodeClaim gives the kubelet (as Nodewright's user data does).
    user_data = nodeadm_user_data(
        CLUSTER,
        labels={"team": "blue", "workload": "batch", "karpenter.sh/nodepool": "general"},
        taints=("dedicated=batch:NoSchedule", "cni.example/not-ready:NoSchedule"),
    )
    instance_id = launch(
        sb,
        ec2,
        "m6g.large",
        "us-east-1b",
        UserData=user_data,
        tags=[
            {"Key": "karpenter.sh/nodeclaim", "Value": "claim-1"},
            {"Key": "karpenter.sh/nodepool", "Value": "general"},
        ],
    )
    node = wait_for(
        "the node to register Ready", lambda: (n := node_of(kube, instance_id)) and ready(n) and n
    )
    labels = node["metadata"]["labels"]
    assert node["spec"]["providerID"] == f"aws:///us-east-1b/{instance_id}"
    assert node["metadata"]["name"].endswith(".ec2.internal")
    assert labels["team"] == "blue"
    assert labels["workload"] == "batch"
    assert labels["karpenter.sh/nodepool"] == "general"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1b"
    assert node["status"]["allocatable"]["cpu"] == "1930m"
    taint_keys = lambda: {t["key"] for t in (node_of(kube, instance_id)["spec"].get("taints") or [])}  # noqa: E731
    wait_for("the startup taint to go", lambda: taint_keys() == {"dedicated"})


def test_the_capacity_type_label_is_what_the_user_data_says(sb, kube, ec2) -> None:
    spot = nodeadm_user_data(CLUSTER, labels={"karpenter.sh/capacity-type": "spot"})
    instance_id = launch(
        sb, ec2, "c5.large", "us-east-1c", InstanceMarketOptions={"MarketType": "spot"}, UserData=spot
    )
    node = wait_for("the spot node", lambda: node_of(kube, instance_id))
    assert node["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    on_demand = launch(sb, ec2, "c5.large", "us-east-1c")
    bare = wait_for("the node without the label", lambda: node_of(kube, on_demand))
    assert "karpenter.sh/capacity-type" not in bare["metadata"]["labels"]  # the kubelet does not guess it


def test_stopped_instance_node_goes_not_ready_then_away(sb, kube, ec2) -> None:
    instance_id = launch(sb, ec2, "t3.medium", "us-east-1a")
    wait_for("the node", lambda: ready(node_of(kube, instance_id)))
    ec2.stop_instances(InstanceIds=[instance_id])
    wait_for("the node to be deleted", lambda: node_of(kube, instance_id) is None)


def test_pod_too_big_for_every_node_is_marked_unschedulable(sb, kube) -> None:
    kube.create(
        core("pods", "default"),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "huge"},
            "spec": {
                "containers": [
                    {"name": "app", "image": "pause:3.9", "resources": {"requests": {"cpu": "64"}}}
                ]
            },
        },
    )

    def condition() -> dict | None:
        pod = kube.get(core("pods", "default", "huge"))
        return next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), None)

    scheduled = wait_for("PodScheduled=False", condition)
    assert scheduled["status"] == "False"
    assert scheduled["reason"] == "Unschedulable"
    assert scheduled["message"].startswith("0/")
    assert "Insufficient cpu" in scheduled["message"]
    kube.delete(core("pods", "default", "huge"))


def test_daemonset_runs_one_pinned_pod_per_node(sb, kube, ec2) -> None:
    launch(sb, ec2, "m5.large", "us-east-1a")
    launch(sb, ec2, "m5.large", "us-east-1b")
    wait_for("two ready nodes", lambda: sum(ready(n) for n in kube.list(core("nodes"))[0]) >= 2)
    kube.create(
        group("apps/v1", "daemonsets", "kube-system"),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "agent", "image": "agent:1"}],
                    },
                },
            },
        },
    )

    def all_running() -> list[dict] | None:
        nodes = {n["metadata"]["name"] for n in kube.list(core("nodes"))[0] if ready(n)}
        pods = [p for p in pods_of(kube, "agent", "kube-system") if p["status"].get("phase") == "Running"]
        return pods if {p["spec"]["nodeName"] for p in pods} == nodes and len(pods) == len(nodes) else None

    pods = wait_for("one running agent per node", all_running)
    for pod in pods:
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert terms == [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pod["spec"]["nodeName"]]}]}
        ]

    # The module's sandbox shares its nodes with earlier tests, whose instances may still be joining:
    # the status is read against the agents running at the same moment, not the first count above.
    def status_matches_agents() -> dict | None:
        status = kube.get(group("apps/v1", "daemonsets", "kube-system", "agent")).get("status") or {}
        agents = all_running()
        if agents is None:
            return None
        counted = status.get("numberReady") == status.get("desiredNumberScheduled") == len(agents)
        return status if counted else None

    status = wait_for("the daemonset status to count every running agent", status_matches_agents)
    assert status["numberReady"] >= 2


def test_a_daemon_pod_stays_on_a_node_tainted_no_schedule_and_is_not_recreated_there(sb, kube, ec2) -> None:
    """kube-controller-manager's NodeShouldRunDaemonPod: an untolerated NoSchedule taint (Karpenter's
    karpenter.sh/disrupted) stops new daemon pods, not the running one; once evicted it stays gone."""
    launch(sb, ec2, "m5.large", "us-east-1b")
    wait_for("a ready node", lambda: any(ready(n) for n in kube.list(core("nodes"))[0]))
    kube.create(
        group("apps/v1", "daemonsets", "default"),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "logs", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "logs"}},
                "template": {
                    "metadata": {"labels": {"app": "logs"}},
                    "spec": {"containers": [{"name": "logs", "image": "logs:1"}]},
                },
            },
        },
    )
    running = wait_for(
        "a running logs pod",
        lambda: [p for p in pods_of(kube, "logs") if p["status"].get("phase") == "Running"],
    )
    node_name = running[0]["spec"]["nodeName"]
    node = kube.get(core("nodes", name=node_name))
    taints = [*(node["spec"].get("taints") or []), {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    kube.patch(core("nodes", name=node_name), {"spec": {"taints": taints}})

    def status() -> dict:
        return kube.get(group("apps/v1", "daemonsets", "default", "logs")).get("status") or {}

    wait_for("the tainted node counted as misscheduled", lambda: status().get("numberMisscheduled") == 1)
    assert [
        p["metadata"]["name"] for p in pods_of(kube, "logs") if p["spec"].get("nodeName") == node_name
    ] == [running[0]["metadata"]["name"]], "the running daemon pod stays"
    kube.delete(core("pods", "default", running[0]["metadata"]["name"]), grace_period_seconds=0)
    wait_for("the evicted pod gone", lambda: status().get("numberMisscheduled") == 0)
    assert not [p for p in pods_of(kube, "logs") if p["spec"].get("nodeName") == node_name], "not recreated"
    kube.delete(group("apps/v1", "daemonsets", "default", "logs"))


def test_a_pod_mounting_a_csi_volume_gets_a_volume_attachment_that_goes_after_the_pod(sb, kube, ec2) -> None:
    """The attach-detach controller and the CSI external-attacher: attached while a pod on the node
    mounts the volume, detached (deleted, finalizer removed) some seconds after it is gone."""
    import hashlib

    node = wait_for("a ready node", lambda: next((n for n in kube.list(core("nodes"))[0] if ready(n)), None))
    node_name = node["metadata"]["name"]
    kube.create(
        core("persistentvolumes"),
        {
            "metadata": {"name": "pv-data"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123"},
                "claimRef": {"namespace": "default", "name": "data"},
            },
        },
    )
    kube.create(
        core("persistentvolumeclaims", "default"),
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": "pv-data",
            },
        },
    )
    kube.create(
        core("pods", "default"),
        {
            "metadata": {"name": "db"},
            "spec": {
                "nodeName": node_name,
                "containers": [{"name": "db", "image": "db:1"}],
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
            },
        },
    )
    name = "csi-" + hashlib.sha256(f"vol-0123ebs.csi.aws.com{node_name}".encode()).hexdigest()
    path = group("storage.k8s.io/v1", "volumeattachments", name=name)
    attached = wait_for(
        "the attachment",
        lambda: (va := kube.get_or_none(path)) and (va.get("status") or {}).get("attached") and va,
    )
    assert attached["spec"] == {
        "attacher": "ebs.csi.aws.com",
        "nodeName": node_name,
        "source": {"persistentVolumeName": "pv-data"},
    }
    assert attached["metadata"]["finalizers"] == ["external-attacher/ebs-csi-aws-com"]
    kube.delete(core("pods", "default", "db"), grace_period_seconds=0)
    wait_for("the attachment gone", lambda: kube.get_or_none(path) is None, timeout=30)
    kube.delete(core("persistentvolumeclaims", "default", "data"))


def test_pdb_status_and_evicted_pods_come_back(sb, kube, ec2) -> None:
    # Room for the three pods of its own (it relied on nodes earlier tests of the module launched).
    instance_id = launch(sb, ec2, "m5.xlarge", "us-east-1a")
    wait_for("the node to register Ready", lambda: (n := node_of(kube, instance_id)) and ready(n))
    kube.create(group("apps/v1", "deployments", "default"), deployment("web", 3))
    kube.create(
        group("policy/v1", "poddisruptionbudgets", "default"),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    status = wait_for(
        "the PDB to see 3 healthy pods",
        lambda: (
            (
                s := kube.get(group("policy/v1", "poddisruptionbudgets", "default", "web")).get("status")
                or {}
            ).get("currentHealthy")
            == 3
            and s
        ),
    )
    assert (status["desiredHealthy"], status["expectedPods"], status["disruptionsAllowed"]) == (2, 3, 1)
    victim = pods_of(kube, "web")[0]
    name = victim["metadata"]["name"]
    kube.create(
        core("pods", "default", name, "eviction"),
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}},
    )

    def replaced() -> bool:
        pods = [p for p in pods_of(kube, "web") if not p["metadata"].get("deletionTimestamp")]
        names = {p["metadata"]["name"] for p in pods}
        return (
            len(pods) == 3 and name not in names and all(p["status"].get("phase") == "Running" for p in pods)
        )

    wait_for("the evicted pod to be replaced and the old one gone", replaced)
    new = pods_of(kube, "web")[0]
    [owner] = new["metadata"]["ownerReferences"]
    assert owner["kind"] == "ReplicaSet"
    assert owner["controller"] is True


def _pdb_status(kube: Kube, name: str) -> dict:
    return kube.get(group("policy/v1", "poddisruptionbudgets", "default", name)).get("status") or {}


def _create_pdb(kube: Kube, name: str, app: str, **spec: Any) -> None:
    kube.create(
        group("policy/v1", "poddisruptionbudgets", "default"),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {**spec, "selector": {"matchLabels": {"app": app}}},
        },
    )


def test_pdb_status_is_computed_as_kube_controller_managers_disruption_controller_computes_it(
    sb, kube, ec2
) -> None:
    """pkg/controller/disruption: the expected count is the controllers' scale (a Deployment's, not
    its ReplicaSet's); pods without a controller are not counted (an UnmanagedPods event); nothing is
    allowed while the expected count is 0; and a PDB over pods whose controller has no scale
    subresource (a DaemonSet) fails to sync: disruptionsAllowed 0 with DisruptionAllowed False /
    SyncFailed and no observedGeneration, so the Eviction API keeps answering "still being processed"."""
    instance_id = launch(sb, ec2, "m5.large", "us-east-1b")
    node = wait_for("a ready node", lambda: ready(n := node_of(kube, instance_id)) and n)
    node_name = node["metadata"]["name"]

    kube.create(group("apps/v1", "deployments", "default"), deployment("scaled", 3))
    _create_pdb(kube, "scaled", "scaled", maxUnavailable=1)
    status = wait_for(
        "3 healthy scaled pods", lambda: (s := _pdb_status(kube, "scaled")).get("currentHealthy") == 3 and s
    )
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (3, 2, 1)

    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "labels": {"app": "bare"}},
        "spec": {"nodeName": node_name, "containers": [{"name": "app", "image": "pause:3.9"}]},
    }
    kube.create(core("pods", "default"), bare)
    wait_for(
        "the bare pod Running",
        lambda: kube.get(core("pods", "default", "bare"))["status"].get("phase") == "Running",
    )
    _create_pdb(kube, "bare", "bare", maxUnavailable="50%")
    status = wait_for(
        "the bare PDB's status", lambda: (s := _pdb_status(kube, "bare")).get("currentHealthy") == 1 and s
    )
    assert (status["expectedPods"], status["disruptionsAllowed"]) == (0, 0), status
    events, _ = kube.list(core("events", "default"))
    assert any(e["reason"] == "UnmanagedPods" and e["involvedObject"]["name"] == "bare" for e in events)

    kube.create(
        group("apps/v1", "daemonsets", "default"),
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {
                    "metadata": {"labels": {"app": "agent"}},
                    "spec": {
                        "nodeSelector": {"kubernetes.io/hostname": node_name},
                        "containers": [{"name": "agent", "image": "agent:1"}],
                    },
                },
            },
        },
    )
    wait_for(
        "the agent Running",
        lambda: any(p["status"].get("phase") == "Running" for p in pods_of(kube, "agent")),
    )
    _create_pdb(kube, "agent", "agent", maxUnavailable=1)

    def failed_sync() -> dict | None:
        status = _pdb_status(kube, "agent")
        found = [c for c in status.get("conditions") or [] if c.get("type") == "DisruptionAllowed"]
        return status if found and found[0].get("reason") == "SyncFailed" else None

    status = wait_for("the agent PDB's failed sync", failed_sync)
    assert status["disruptionsAllowed"] == 0
    assert "observedGeneration" not in status
    [condition] = status["conditions"]
    assert condition["status"] == "False"
    assert "does not implement the scale subresource" in condition["message"]
    agent = next(p for p in pods_of(kube, "agent") if p["status"].get("phase") == "Running")
    with pytest.raises(ApiException) as refused:
        kube.create(
            core("pods", "default", agent["metadata"]["name"], "eviction"),
            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": agent["metadata"]["name"]}},
        )
    assert refused.value.status == 429
    assert "is still being processed by the server" in str(refused.value.body)
    for kind, name in (("daemonsets", "agent"), ("deployments", "scaled")):
        kube.delete(group("apps/v1", kind, "default", name))
    kube.delete(core("pods", "default", "bare"), grace_period_seconds=0)
    for name in ("scaled", "bare", "agent"):
        kube.delete(group("policy/v1", "poddisruptionbudgets", "default", name))
    ec2.terminate_instances(InstanceIds=[instance_id])


def test_scaling_a_deployment_down_removes_pods(sb, kube) -> None:
    kube.create(group("apps/v1", "deployments", "default"), deployment("scale", 4))
    wait_for("4 pods", lambda: len(pods_of(kube, "scale")) == 4)
    kube.patch(group("apps/v1", "deployments", "default", "scale"), {"spec": {"replicas": 1}})
    wait_for(
        "1 pod",
        lambda: len([p for p in pods_of(kube, "scale") if not p["metadata"].get("deletionTimestamp")]) == 1,
    )


def test_the_simulated_components_write_the_events_the_real_ones_do(sb, kube) -> None:
    """kube-scheduler (Scheduled, FailedScheduling: events.k8s.io/v1, read here through core/v1 as
    the same objects), the replicaset and deployment controllers (SuccessfulCreate,
    ScalingReplicaSet) and the kubelet (Pulled/Created/Started; Starting and NodeReady on the node)
    report Events, as kubectl describe shows them ("From": the source, else the reporting
    controller)."""
    kube.create(group("apps/v1", "deployments", "default"), deployment("evented", 1))
    wait_for(
        "evented running",
        lambda: any(p["status"].get("phase") == "Running" for p in pods_of(kube, "evented")),
    )

    def reasons() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for event in kube.list(core("events", "default"))[0]:
            source = event["source"].get("component") or event["reportingComponent"]
            found.setdefault(event["reason"], set()).add(source)
        return found

    wanted = {
        "Scheduled": "default-scheduler",
        "SuccessfulCreate": "replicaset-controller",
        "ScalingReplicaSet": "deployment-controller",
        "Pulled": "kubelet",
        "Created": "kubelet",
        "Started": "kubelet",
        "Starting": "kubelet",
        "NodeReady": "kubelet",
        "FailedScheduling": "default-scheduler",  # the huge pod of an earlier test
    }
    found = wait_for("the events", lambda: (r := reasons()) and all(k in r for k in wanted) and r)
    for reason, component in wanted.items():
        assert component in found[reason], (reason, found[reason])
    [pod] = pods_of(kube, "evented")
    scheduled = [
        e
        for e in kube.list(core("events", "default"))[0]
        if e["reason"] == "Scheduled" and e["involvedObject"]["name"] == pod["metadata"]["name"]
    ]
    assert (
        scheduled[0]["message"]
        == f"Successfully assigned default/{pod['metadata']['name']} to {pod['spec']['nodeName']}"
    )
    assert scheduled[0]["involvedObject"]["namespace"] == "default"
    # The kubelet's strategic merge patch orders the conditions as a real node shows them.
    conditions = [
        c["type"] for c in kube.get(core("pods", "default", pod["metadata"]["name"]))["status"]["conditions"]
    ]
    assert conditions == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]


def test_a_cordoned_node_gets_the_unschedulable_taint_and_loses_it_when_uncordoned(sb, kube) -> None:
    name = next(n["metadata"]["name"] for n in kube.list(core("nodes"))[0])
    taint = ("node.kubernetes.io/unschedulable", "NoSchedule")

    def taints() -> set[tuple[str, str]]:
        node = kube.get(core("nodes", name=name))
        return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}

    kube.patch(core("nodes", name=name), {"spec": {"unschedulable": True}})
    wait_for("the unschedulable taint", lambda: taint in taints())
    kube.patch(core("nodes", name=name), {"spec": {"unschedulable": None}})
    wait_for("the taint to go", lambda: taint not in taints())


def _replicasets(kube: Kube, app: str) -> list[dict]:
    return kube.list(group("apps/v1", "replicasets", "default"), labelSelector=f"app={app}")[0]


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
def test_deleting_a_deployment_cascades_as_its_propagation_policy_says(sb, kube, policy) -> None:
    """The API server leaves the GC finalizer (foregroundDeletion, orphan); the garbage collector
    deletes or orphans the ReplicaSet and its pods through their ownerReferences."""
    app = f"gc-{policy.lower()}"
    path = group("apps/v1", "deployments", "default", app)
    kube.create(group("apps/v1", "deployments", "default"), deployment(app, 2))
    wait_for("2 pods", lambda: len(pods_of(kube, app)) == 2)
    kube._call(
        "DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}
    )
    if policy == "Foreground":
        deleting = kube.get_or_none(path)
        assert deleting is not None
        assert deleting["metadata"]["deletionTimestamp"]
        assert "foregroundDeletion" in deleting["metadata"]["finalizers"]
    wait_for("the deployment to go", lambda: kube.get_or_none(path) is None, timeout=20)
    if policy == "Orphan":
        [replicaset] = _replicasets(kube, app)
        assert "ownerReferences" not in replicaset["metadata"]
        assert len(pods_of(kube, app)) == 2  # still owned by the orphaned ReplicaSet
        kube.delete(group("apps/v1", "replicasets", "default", replicaset["metadata"]["name"]))
    wait_for(
        "its ReplicaSets and pods to go",
        lambda: not _replicasets(kube, app) and not pods_of(kube, app),
        timeout=20,
    )


def test_deleting_a_nodepool_reaches_its_nodeclaims_through_their_owner_references(sb, kube) -> None:
    nodepool = kube.create(
        group("karpenter.sh/v1", "nodepools"),
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "gc-pool"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
                        "requirements": [],
                    }
                }
            },
        },
    )
    owner = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "name": "gc-pool",
        "uid": nodepool["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "gc-claim",
            "ownerReferences": [owner],
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"},
            "requirements": [],
        },
    }
    kube.create(group("karpenter.sh/v1", "nodeclaims"), claim)
    kube.delete(group("karpenter.sh/v1", "nodepools", name="gc-pool"))
    claim_path = group("karpenter.sh/v1", "nodeclaims", name="gc-claim")
    # The NodeClaim is deleted; its termination finalizer (Nodewright's drain) holds it meanwhile.
    wait_for(
        "the NodeClaim to be deleting",
        lambda: (kube.get_or_none(claim_path) or {}).get("metadata", {}).get("deletionTimestamp"),
    )
    kube.patch(claim_path, {"metadata": {"finalizers": None}})
    wait_for("the NodeClaim to go", lambda: kube.get_or_none(claim_path) is None)


def test_a_deleted_claim_waits_for_the_pod_that_uses_it(sb, kube) -> None:
    """The pvc-protection controller keeps the claim's finalizer while a pod uses it."""
    claim = {
        "metadata": {"name": "in-use"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    kube.create(core("persistentvolumeclaims", "default"), claim)
    pod = {
        "metadata": {"name": "uses-claim"},
        "spec": {
            "containers": [{"name": "app", "image": "pause:3.9"}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "in-use"}}],
        },
    }
    kube.create(core("pods", "default"), pod)
    path = core("persistentvolumeclaims", "default", "in-use")
    kube.delete(path)
    # Two whole passes of the controllers after the delete (the first may have begun before it):
    # counted, not slept, so a loaded machine cannot make the check pass before any pass ran.
    after = sb.controllers.passes
    wait_for("two controller passes", lambda: sb.controllers.passes >= after + 2)
    assert kube.get(path)["metadata"]["deletionTimestamp"]
    kube.delete(core("pods", "default", "uses-claim"), grace_period_seconds=0)
    wait_for("the claim to go once unused", lambda: kube.get_or_none(path) is None)


def test_deleting_a_namespace_removes_its_objects_then_the_namespace(sb, kube) -> None:
    kube.create(core("namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    kube.create(group("apps/v1", "deployments", "doomed"), deployment("inside", 2, namespace="doomed"))
    wait_for("its pods", lambda: len(pods_of(kube, "inside", "doomed")) == 2)
    kube.delete(core("namespaces", name="doomed"))

    def gone() -> bool:
        try:
            kube.get(core("namespaces", name="doomed"))
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the namespace to go", gone)


def test_every_active_namespace_gets_its_default_service_account_as_kube_controller_manager_gives_it(
    sb, kube
) -> None:
    def default_account(namespace: str) -> dict | None:
        return kube.get_or_none(core("serviceaccounts", namespace, "default"))

    for namespace in ("default", "kube-system", "kube-public", "kube-node-lease", "nodewright"):
        assert wait_for(f"{namespace}'s default ServiceAccount", lambda n=namespace: default_account(n))
    kube.create(core("namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}})
    made = wait_for("fresh's default ServiceAccount", lambda: default_account("fresh"))
    assert set(made) >= {"apiVersion", "kind", "metadata"}
    assert made["kind"] == "ServiceAccount"
    # Deleted, it comes back (the serviceaccounts controller watches them too).
    kube.delete(core("serviceaccounts", "fresh", "default"))
    recreated = wait_for(
        "the default ServiceAccount back",
        lambda: (sa := default_account("fresh")) and sa["metadata"]["uid"] != made["metadata"]["uid"] and sa,
    )
    assert recreated["metadata"]["name"] == "default"
    # A deployment in the new namespace gets its pods (the ServiceAccount admission lets them in).
    kube.create(group("apps/v1", "deployments", "fresh"), deployment("in-fresh", 1, namespace="fresh"))
    (pod,) = wait_for("its pod", lambda: pods_of(kube, "in-fresh", "fresh"))
    assert pod["spec"]["serviceAccountName"] == "default"


def _scratch_pod(name: str, storage_class: str) -> dict:
    template = {
        "spec": {
            "storageClassName": storage_class,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }
    }
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "app", "image": "pause:3.9", "resources": {"requests": {"cpu": "100m"}}}],
            "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}],
        },
    }


def test_an_ephemeral_volume_gets_a_pod_owned_claim_provisioned_in_the_pods_zone_and_goes_with_the_pod(
    sb, kube, ec2
) -> None:
    """The ephemeral-volume controller makes ``<pod>-<volume>`` controlled by the pod; the scheduler
    places the pod only where the class may provision (its allowedTopologies), the provisioner makes
    the volume in that node's zone; deleting the pod takes the claim (garbage collector) and the
    volume (reclaim policy Delete) with it."""
    zone = "us-east-1c"
    kube.create(
        group("storage.k8s.io/v1", "storageclasses"),
        {
            "metadata": {"name": "zonal-c"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": [zone]}]}],
        },
    )
    if not any(ready(n) and n["metadata"]["labels"].get(ZONE) == zone for n in kube.list(core("nodes"))[0]):
        instance_id = launch(sb, ec2, "m5.large", zone)
        wait_for("a ready node in the class's zone", lambda: ready(node_of(kube, instance_id)), timeout=30)
    pod = kube.create(core("pods", "default"), _scratch_pod("scratchy", "zonal-c"))
    claim_path = core("persistentvolumeclaims", "default", "scratchy-scratch")
    claim = wait_for("the ephemeral volume's claim", lambda: kube.get_or_none(claim_path))
    assert claim["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "scratchy",
            "uid": pod["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    bound = wait_for(
        "the pod bound",
        lambda: (p := kube.get(core("pods", "default", "scratchy")))["spec"].get("nodeName") and p,
    )
    node = kube.get(core("nodes", name=bound["spec"]["nodeName"]))
    assert node["metadata"]["labels"][ZONE] == zone
    # The claim's phase is the provisioner's write after its volumeName (two writes, as the PV
    # controller's): the pod may be bound between them.
    claim = wait_for(
        "the claim's phase Bound",
        lambda: (c := kube.get(claim_path)).get("status", {}).get("phase") == "Bound" and c,
        timeout=30,
    )
    volume = kube.get(core("persistentvolumes", name=claim["spec"]["volumeName"]))
    (term,) = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": ZONE, "operator": "In", "values": [zone]}]
    kube.delete(core("pods", "default", "scratchy"), grace_period_seconds=0)
    wait_for("the claim gone with its pod", lambda: kube.get_or_none(claim_path) is None, timeout=30)
    path = core("persistentvolumes", name=volume["metadata"]["name"])
    wait_for("its volume deleted", lambda: kube.get_or_none(path) is None, timeout=30)


def test_a_same_named_claim_the_pod_does_not_own_blocks_it_until_removed(sb, kube) -> None:
    """As kube-controller-manager and kube-scheduler: the claim is not used, the pod gets a
    FailedBinding Warning and stays unschedulable; once the claim is gone its own is made."""
    kube.create(
        core("persistentvolumeclaims", "default"),
        {
            "metadata": {"name": "blocked-scratch"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    pod = kube.create(core("pods", "default"), _scratch_pod("blocked", "zonal-c"))

    def condition() -> dict | None:
        status = kube.get(core("pods", "default", "blocked")).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), None)

    scheduled = wait_for("PodScheduled=False", condition)
    assert scheduled["message"].endswith(
        "PVC default/blocked-scratch was not created for pod default/blocked (pod is not owner)."
    )

    def failed_binding() -> bool:  # the controller's Warning, written apart from the scheduler's condition
        events, _ = kube.list(core("events", "default"), fieldSelector="involvedObject.name=blocked")
        return any(e["reason"] == "FailedBinding" and "(pod is not owner)" in e["message"] for e in events)

    wait_for("the ephemeral-volume controller's FailedBinding Warning", failed_binding, timeout=30)
    kube.delete(core("persistentvolumeclaims", "default", "blocked-scratch"))
    path = core("persistentvolumeclaims", "default", "blocked-scratch")
    owned = wait_for(
        "the pod's own claim",
        lambda: (c := kube.get_or_none(path)) and (c["metadata"].get("ownerReferences") or []) and c,
        timeout=30,
    )
    assert owned["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    kube.delete(core("pods", "default", "blocked"), grace_period_seconds=0)


def test_a_volume_whose_claim_the_cache_has_not_shown_yet_is_not_reclaimed(sb, kube) -> None:
    """The controller manager reads claims from its informer: a claim created a moment ago may be
    missing from it. Before a volume is released and deleted, its claim's absence is confirmed with
    the API server (as the PV controller does); a claim that is really gone still takes its volume."""
    from sandbox.simulators.controllers import VolumeProvisioner

    claim = kube.create(
        core("persistentvolumeclaims", "default"),
        {
            "metadata": {"name": "fresh"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )

    def volume(name: str, claim_name: str, uid: str) -> dict:
        return kube.create(
            core("persistentvolumes"),
            {
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",  # the controller manager leaves it be
                    "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"},
                    "claimRef": {
                        "kind": "PersistentVolumeClaim",
                        "namespace": "default",
                        "name": claim_name,
                        "uid": uid,
                    },
                },
            },
        )

    kept = volume("pv-of-a-fresh-claim", "fresh", claim["metadata"]["uid"])
    gone = volume("pv-of-a-gone-claim", "gone", "uid-of-a-deleted-claim")
    as_delete = [
        {**v, "spec": {**v["spec"], "persistentVolumeReclaimPolicy": "Delete"}} for v in (kept, gone)
    ]

    VolumeProvisioner(kube)._reclaim([], as_delete)  # an informer that has not shown "fresh" yet

    fresh = kube.get(core("persistentvolumes", name="pv-of-a-fresh-claim"))
    assert "deletionTimestamp" not in fresh["metadata"]
    assert (fresh.get("status") or {}).get("phase") != "Released"
    deleted = kube.get_or_none(core("persistentvolumes", name="pv-of-a-gone-claim"))
    assert deleted is None or deleted["metadata"].get("deletionTimestamp")  # pv-protection may hold it
    kube.delete(core("persistentvolumes", name="pv-of-a-fresh-claim"))
    kube.delete(core("persistentvolumeclaims", "default", "fresh"))
