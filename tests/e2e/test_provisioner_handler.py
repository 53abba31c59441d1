"""The real provisioner handler, invoked with a real scheduled-event payload, against the sandbox.

One sandbox (Kubernetes API emulator + simulated scheduler/kubelet/controllers + moto server) serves
the module; every test starts from an empty cluster (no workloads, NodeClaims, nodes or instances).
The handler's loop length is steered the way Lambda steers it: through the context's remaining time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from handler_calls import live_instances
from nodewright.api import labels
from nodewright.cluster.errors import Invalid
from nodewright.cluster.resources import EC2NODECLASSES, EVENTS, NODECLAIMS, NODEPOOLS, NODES, PODS, Resource
from waiting import wait_for

from sandbox.runtime.events import scheduled_event
from sandbox.runtime.lambdas import load_function, provisioner_invocation
from sandbox.scenarios.workloads import DEPLOYMENTS, inflate, nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-provisioner", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def env(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    monkeypatch.setenv("POLL_INTERVAL_SECONDS", "1")  # the tests' invocations loop for seconds, not a minute
    sandbox.warm_catalog()  # the invocations under test are warm: they get seconds, not a cold catalog
    return sandbox


@pytest.fixture
def cluster(env: Any) -> Iterator[Any]:
    """The project's own Kubernetes client with the administrator's kubeconfig (the user's side: the
    handler acts with the functions' identity, held to deploy/rbac.yaml); emptied after the test."""
    from nodewright.cluster import reset_connections

    kube = env.admin_cluster()
    kube.create(EC2NODECLASSES, nodeclass(env))
    yield kube
    _empty(kube, env)
    reset_connections()


GENERAL = [
    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": labels.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
]


def invoke(seconds: float) -> dict[str, Any]:
    """One scheduled invocation of the real handler whose loop lasts ``seconds`` (a real one: 55 s)."""
    app = load_function("provisioner")
    with provisioner_invocation(seconds) as context:
        answer = app.handler(scheduled_event(), context)
    # A handler bounds the container's shared API client to its invocation (calls past its deadline
    # are refused); the test goes on using that client after the invocation has ended.
    from nodewright.cluster import connect
    from nodewright.settings import Settings

    connect(Settings.from_env()).set_call_deadline(None)
    return answer


def next_pass() -> None:
    """The provisioner's next scheduled pass: a node registers tainted ``karpenter.sh/unregistered``
    (its user data says so) and only the provisioner's lifecycle pass lifts it, as Karpenter's does."""
    invoke(seconds=1)


def pods(kube: Any) -> list[dict[str, Any]]:
    return kube.list(PODS, namespace="default")


def running(kube: Any) -> int:
    return sum(1 for p in pods(kube) if (p.get("status") or {}).get("phase") == "Running")


def unschedulable(kube: Any) -> int:
    return len(kube.list_pending_pods())


def _empty(kube: Any, sb: Any) -> None:
    """Back to an empty cluster: workloads, instances, NodeClaims (finalizers dropped), nodes, NodePools."""
    kube.delete(DEPLOYMENTS, "inflate", namespace="default")
    for replicaset in kube.list(REPLICASETS, namespace="default"):
        kube.delete(REPLICASETS, replicaset["metadata"]["name"], namespace="default")
    ids = [i["InstanceId"] for i in live_instances(sb)]
    if ids:
        ec2 = sb.aws_client("ec2")
        ec2.terminate_instances(InstanceIds=ids)
        ec2.close()
    for claim in kube.list(NODECLAIMS):
        kube.patch(NODECLAIMS, claim["metadata"]["name"], {"metadata": {"finalizers": None}})
        kube.delete(NODECLAIMS, claim["metadata"]["name"])
    for pool in kube.list(NODEPOOLS):
        kube.delete(NODEPOOLS, pool["metadata"]["name"])
    kube.delete(EC2NODECLASSES, "default")
    sb.faults.clear()

    def emptied() -> bool:
        for pod in pods(kube):
            kube.delete(PODS, pod["metadata"]["name"], namespace="default", grace_period_seconds=0)
        for node in kube.list(NODES):
            kube.patch(NODES, node["metadata"]["name"], {"metadata": {"finalizers": None}})
            kube.delete(NODES, node["metadata"]["name"])
        return not pods(kube) and not kube.list(NODES)

    wait_for("the cluster to empty", emptied, timeout=15)


def claims_by_instance(kube: Any) -> dict[str, str]:
    return {
        (c.get("status") or {}).get("instanceID", ""): c["metadata"]["name"] for c in kube.list(NODECLAIMS)
    }


# --- the scenarios -----------------------------------------------------------------------------


def test_inflate_gets_capacity_all_pods_run_and_a_second_invocation_launches_nothing(
    cluster: Any, env: Any
) -> None:
    cluster.create(NODEPOOLS, nodepool("general", GENERAL))
    cluster.create(DEPLOYMENTS, inflate(10), namespace="default")
    wait_for("10 unschedulable inflate pods", lambda: unschedulable(cluster) == 10, timeout=30)

    # The module's first pass pages moto's whole DescribeInstanceTypes (5-7 s, more on a busy
    # machine) before it may write, and a pass stops writing at its deadline: give it the time.
    first = invoke(seconds=15)

    assert first["leaseHeld"] is True
    assert first["launched"] >= 1
    wait_for("all 10 inflate pods Running", lambda: running(cluster) == 10, step=next_pass, timeout=30)
    launched = live_instances(env)
    assert len(launched) == first["launched"]
    claims = cluster.list(NODECLAIMS)
    assert all(c["status"]["providerID"].endswith(c["status"]["instanceID"]) for c in claims)
    assert sorted(claims_by_instance(cluster)) == sorted(i["InstanceId"] for i in launched)
    events = cluster.list(EVENTS, namespace="default")
    assert any(e["reason"] == "Nominated" and e["involvedObject"]["kind"] == "Pod" for e in events)

    second = invoke(seconds=3)

    assert second["launched"] == 0
    assert second["nodeClaimsCreated"] == []
    assert len(live_instances(env)) == len(launched)
    for claim in cluster.list(NODECLAIMS):
        true = {c["type"] for c in claim["status"]["conditions"] if c["status"] == "True"}
        assert true >= {"Launched", "Registered", "Initialized"}, claim["status"]["conditions"]
        node = cluster.get(NODES, claim["status"]["nodeName"])
        assert node["metadata"]["labels"][labels.NODE_INITIALIZED] == "true"
        assert labels.TERMINATION_FINALIZER in node["metadata"]["finalizers"]


def test_nodepool_limits_are_respected_and_the_rest_stay_pending_with_a_reason(
    cluster: Any, env: Any
) -> None:
    cluster.create(NODEPOOLS, nodepool("small", GENERAL, limits={"cpu": "4"}))
    cluster.create(DEPLOYMENTS, inflate(10), namespace="default")
    wait_for("10 unschedulable inflate pods", lambda: unschedulable(cluster) == 10, timeout=30)

    invoke(seconds=3)

    launched = live_instances(env)
    assert launched, "some capacity within the limit is launched"
    total_vcpus = sum(_vcpus(env, i["InstanceType"]) for i in launched)
    assert total_vcpus <= 4
    wait_for("the pods that fit to run", lambda: running(cluster) >= 1, step=next_pass, timeout=30)
    warnings = [e for e in cluster.list(EVENTS, namespace="default") if e["reason"] == "FailedScheduling"]
    assert any("limit" in e["message"] for e in warnings), [e["message"] for e in warnings]


class FunctionDied(BaseException):
    """The Lambda function stops (timeout, out of memory, kill): no ``except Exception`` sees it."""


@pytest.mark.parametrize("moment", ["before-launch", "after-launch"])
def test_a_crash_around_the_launch_converges_to_one_instance_per_nodeclaim(
    cluster: Any, env: Any, moment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nodewright.cloud.provider import CloudProvider

    cluster.create(NODEPOOLS, nodepool("general", GENERAL))
    cluster.create(DEPLOYMENTS, inflate(2), namespace="default")
    wait_for("2 unschedulable inflate pods", lambda: unschedulable(cluster) == 2, timeout=30)
    real_create = CloudProvider.create

    def dying(self: CloudProvider, request: Any) -> Any:
        monkeypatch.setattr(CloudProvider, "create", real_create)
        if moment == "after-launch":
            real_create(self, request)  # the instance exists; the status write never happens
        raise FunctionDied(f"injected crash {moment}")

    monkeypatch.setattr(CloudProvider, "create", dying)
    with pytest.raises(FunctionDied, match="injected crash"):
        invoke(seconds=2)
    assert len(cluster.list(NODECLAIMS)) >= 1
    assert len(live_instances(env)) == (1 if moment == "after-launch" else 0)

    invoke(seconds=3)

    claims = cluster.list(NODECLAIMS)
    launched = live_instances(env)
    assert len(launched) == len(claims)
    assert sorted(claims_by_instance(cluster)) == sorted(i["InstanceId"] for i in launched)
    wait_for("both inflate pods Running", lambda: running(cluster) == 2, step=next_pass, timeout=30)


def test_insufficient_capacity_on_the_cheapest_offering_falls_back_to_the_next(
    cluster: Any, env: Any
) -> None:
    only_m5 = [
        {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]},
    ]
    cluster.create(NODEPOOLS, nodepool("m5", only_m5))
    for zone in env.zones:
        env.faults.insufficient_capacity("m5.large", zone, "on-demand")
    cluster.create(DEPLOYMENTS, inflate(1), namespace="default")
    wait_for("1 unschedulable inflate pod", lambda: unschedulable(cluster) == 1, timeout=30)

    result = invoke(seconds=3)

    assert result["failures"] == 0
    assert [i["InstanceType"] for i in live_instances(env)] == ["m5.xlarge"]
    assert env.faults.ice_reported >= 1
    wait_for("the inflate pod Running", lambda: running(cluster) == 1, step=next_pass, timeout=30)


def test_an_invalid_nodepool_is_skipped_with_a_condition_and_an_event_while_the_others_work(
    cluster: Any, env: Any
) -> None:
    restricted = nodepool("team", [{"key": "karpenter.sh/team", "operator": "In", "values": ["a"]}])
    with pytest.raises(Invalid, match="restricted"):  # Karpenter v1.14's CRD refuses it at admission
        cluster.create(NODEPOOLS, restricted)
    # What the CRD's schema lets through and Nodewright's validation does not: an hour that no clock
    # has (the CRD only checks that the schedule has five fields).
    budgets = [{"nodes": "1", "schedule": "0 25 * * *", "duration": "1h"}]
    broken = nodepool("broken", GENERAL, weight=100, disruption={"budgets": budgets})
    cluster.create(NODEPOOLS, broken)
    cluster.create(NODEPOOLS, nodepool("general", GENERAL))
    cluster.create(DEPLOYMENTS, inflate(1), namespace="default")
    wait_for("1 unschedulable inflate pod", lambda: unschedulable(cluster) == 1, timeout=30)

    invoke(seconds=2)

    stored = cluster.get(NODEPOOLS, "broken")
    conditions = {c["type"]: c for c in stored["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["ValidationSucceeded"]["status"] == "False"
    assert "budgets[0].schedule" in conditions["ValidationSucceeded"]["message"]
    events = [e for e in cluster.list(EVENTS, namespace="default") if e["involvedObject"]["name"] == "broken"]
    assert [e["reason"] for e in events] == ["InvalidNodePool"]
    assert {c["metadata"]["labels"][labels.NODEPOOL] for c in cluster.list(NODECLAIMS)} == {"general"}
    wait_for("the inflate pod Running", lambda: running(cluster) == 1, step=next_pass, timeout=30)


def _vcpus(sb: Any, instance_type: str) -> int:
    ec2 = sb.aws_client("ec2")
    try:
        info = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    finally:
        ec2.close()
    return int(info["VCpuInfo"]["DefaultVCpus"])
