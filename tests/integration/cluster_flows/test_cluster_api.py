"""The Cluster interface against the API emulator: CRUD, selectors, taints, finalizers, eviction, lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodewright.cluster import ApiUnavailable, Cluster, Conflict, EvictionOutcome, NotFound
from nodewright.cluster.lease import (
    DEFAULT_LEASE_NAME,
    DEFAULT_LEASE_NAMESPACE,
    LeaseLost,
    LeaseUnavailable,
    WriterLease,
)
from nodewright.cluster.objects import set_condition
from nodewright.cluster.resources import LEASES, NODECLAIMS, NODES, PODS
from nodewright.state.pods import is_provisionable
from nodewright.state.world import observe


def test_lists_and_field_selector_on_node(world) -> None:
    world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    world.node("node-b", "i-0bbbbbbbbbbbbbbb2")
    world.pod("web-1", "node-a")
    world.pod("web-2", "node-b")

    assert {n["metadata"]["name"] for n in world.cluster.list_nodes()} == {"node-a", "node-b"}
    on_a = world.cluster.list_pods_on_node("node-a")
    assert [p["metadata"]["name"] for p in on_a] == ["web-1"]
    assert on_a[0]["kind"] == "Pod"  # items get their kind back, as the typed client would show


def test_pending_pods_are_listed_by_phase_and_the_provisionable_ones_are_the_unschedulable(world) -> None:
    cluster: Cluster = world.cluster
    _pending(cluster, "waiting", unschedulable=False)
    _pending(cluster, "unschedulable")
    world.pod("running", "node-a")  # phase Running: the API server leaves it out
    pending = cluster.list_pending_pods()
    assert sorted(p["metadata"]["name"] for p in pending) == ["unschedulable", "waiting"]
    assert [p["metadata"]["name"] for p in pending if is_provisionable(p)] == ["unschedulable"]


def _pending(cluster: Cluster, name: str, *, unschedulable: bool = True) -> None:
    """A pod in phase Pending; marked Unschedulable by the scheduler unless ``unschedulable`` is false."""
    cluster.create(
        PODS,
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
        },
    )
    if not unschedulable:
        return
    cluster.patch(
        PODS,
        name,
        {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
        namespace="default",
        subresource="status",
    )


def test_the_wait_for_pending_pods_ends_when_a_wanted_pod_arrives_and_not_for_others(world) -> None:
    """A watch from the last list: a pod the caller wants ends it; one it does not want (or a pod
    that was already listed) does not, and then the server's timeout ends it."""
    import threading
    import time

    cluster: Cluster = world.cluster
    _pending(cluster, "listed")
    cluster.list_pending_pods()
    wanted = lambda pod: is_provisionable(pod) and pod["metadata"]["name"] != "listed"  # noqa: E731

    arrival = threading.Timer(0.3, _pending, (cluster, "new"))
    arrival.start()
    started = time.monotonic()
    cluster.wait_for_pending_pods(30, wanted)
    arrival.join()
    assert time.monotonic() - started < 20, "the arrival ended the wait, not its 30 s"

    cluster.list_pending_pods()
    started = time.monotonic()
    cluster.patch(PODS, "listed", {"metadata": {"labels": {"touched": "yes"}}}, namespace="default")
    cluster.wait_for_pending_pods(1, wanted)  # only a pod it does not want changed
    assert time.monotonic() - started >= 0.9, "ended by the server's timeout"


def test_the_wait_for_pending_pods_returns_at_once_when_it_cannot_watch_from_its_list(tmp_path) -> None:
    """Never listed: nothing to watch from. Listed too long ago: the API server answers 410
    Expired (its watch history is shorter), and the caller lists again at once."""
    import time

    from kubernetes.client import ApiClient
    from nodewright.cluster import auth

    from sandbox.apiserver import ApiServer
    from sandbox.simulators import Kube, ServiceAccounts

    with ApiServer(watch_history=5) as server:
        api = ApiClient(auth.kubeconfig_configuration(str(server.write_kubeconfig(tmp_path / "kubeconfig"))))
        cluster = Cluster(api)
        with ServiceAccounts(Kube(api)):  # before the churn: its own writes are watch history too
            pass
        started = time.monotonic()
        cluster.wait_for_pending_pods(30, lambda pod: True)
        assert time.monotonic() - started < 20

        cluster.list_pending_pods()
        for i in range(10):  # more pod changes than the server's watch history keeps
            _pending(cluster, f"churn-{i}")
        started = time.monotonic()
        cluster.wait_for_pending_pods(30, lambda pod: False)  # nothing wanted: only the 410 ends it
        assert time.monotonic() - started < 20
        api.close()


def test_taint_and_cordon_is_idempotent_and_keeps_other_taints(world) -> None:
    cluster: Cluster = world.cluster
    world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    cluster.patch_node(
        "node-a", {"spec": {"taints": [{"key": "team", "value": "x", "effect": "NoSchedule"}]}}
    )
    taint = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}

    first = cluster.taint_node("node-a", [taint], cordon=True)
    second = cluster.taint_node("node-a", [taint], cordon=True)

    keys = [t["key"] for t in second["spec"]["taints"]]
    assert sorted(keys) == ["karpenter.sh/disrupted", "team"]
    assert second["spec"]["unschedulable"] is True
    assert first["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"], (
        "no write when unchanged"
    )


def test_stale_update_is_a_conflict(world) -> None:
    cluster: Cluster = world.cluster
    node = world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    cluster.patch_node("node-a", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(Conflict):
        cluster.patch(
            NODES,
            "node-a",
            {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"], "labels": {"x": "2"}}},
        )


def test_nodeclaim_status_conditions_and_finalizers(world) -> None:
    cluster: Cluster = world.cluster
    world.nodeclaim("default-abc", "i-0aaaaaaaaaaaaaaa1", None)

    now = datetime.now(UTC)
    conditions = set_condition([], "Launched", True, reason="Launched", now=now)
    conditions = set_condition(conditions, "Registered", False, reason="Waiting", message="no node", now=now)
    cluster.patch_nodeclaim_status("default-abc", {"conditions": conditions})
    claim = cluster.get_nodeclaim("default-abc")
    conditions = {c["type"]: c for c in claim["status"]["conditions"]}
    assert conditions["Launched"]["status"] == "True"
    assert conditions["Registered"]["message"] == "no node"
    assert claim["status"]["providerID"] == "aws:///us-west-2a/i-0aaaaaaaaaaaaaaa1", (
        "status patch kept fields"
    )

    cluster.add_finalizer(NODECLAIMS, "default-abc", "example.com/extra")
    cluster.delete_nodeclaim("default-abc")
    marked = cluster.get_nodeclaim("default-abc")
    assert marked["metadata"]["deletionTimestamp"]
    cluster.remove_finalizer(NODECLAIMS, "default-abc", "karpenter.sh/termination")
    assert cluster.find_nodeclaim("default-abc") is not None, "one finalizer left"
    cluster.remove_finalizer(NODECLAIMS, "default-abc", "example.com/extra")
    assert cluster.find_nodeclaim("default-abc") is None
    assert cluster.remove_finalizer(NODECLAIMS, "default-abc", "example.com/extra") is None, "gone is fine"


def test_eviction_outcomes_blocked_by_pdb_then_allowed_then_gone(world) -> None:
    cluster: Cluster = world.cluster
    world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    pod = world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)

    blocked = cluster.evict(pod)
    assert blocked.outcome is EvictionOutcome.BLOCKED
    assert blocked.status == 429
    assert "disruption budget" in blocked.message

    world.set_pdb_allowed("web", 1)
    assert cluster.evict(pod).outcome is EvictionOutcome.EVICTED
    world.kubelet_confirm()
    assert cluster.evict(pod).outcome is EvictionOutcome.GONE


def test_pod_matched_by_two_pdbs_is_a_failed_eviction_not_an_exception(world) -> None:
    world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    pod = world.pod("web-1", "node-a", labels={"app": "web", "tier": "front"})
    world.pdb("by-app", {"app": "web"}, allowed=1)
    world.pdb("by-tier", {"tier": "front"}, allowed=1)
    result = world.cluster.evict(pod)
    assert result.outcome is EvictionOutcome.FAILED
    assert result.status == 500


def test_record_event_on_a_cluster_scoped_object(world) -> None:
    node = world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    event = world.cluster.record_event(node, "Disrupting", "spot interruption", event_type="Warning")
    assert event is not None
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "node-a",
        "uid": node["metadata"]["uid"],
        "resourceVersion": node["metadata"]["resourceVersion"],
    }


def test_observe_reads_capacity_and_pods_into_one_world(world, ctx) -> None:
    world.node("node-a", "i-0aaaaaaaaaaaaaaa1")
    claim = world.nodeclaim("default-abc", "i-0aaaaaaaaaaaaaaa1", "node-a")
    world.pod("web-1", "node-a")
    seen = observe(ctx)
    assert [n["metadata"]["name"] for n in seen.nodes] == ["node-a"]
    assert [c["metadata"]["name"] for c in seen.nodeclaims] == ["default-abc"]
    assert [p["metadata"]["name"] for p in seen.pods_on(seen.node_of(claim) or "")] == ["web-1"]
    assert seen.nodepools == []
    assert seen.pdbs == []


def test_missing_object_is_not_found_and_delete_of_missing_is_none(world) -> None:
    with pytest.raises(NotFound):
        world.cluster.get_node("absent")
    assert world.cluster.delete_node("absent") is None


def test_unreachable_api_server_is_transient(cluster, apiserver) -> None:
    apiserver.stop()
    with pytest.raises(ApiUnavailable) as caught:
        cluster.list_nodes()
    assert caught.value.transient


class _Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def test_writer_lease_excludes_a_second_writer_until_release(cluster) -> None:
    first = WriterLease(cluster, "provisioner", duration_seconds=30)
    second = WriterLease(cluster, "interruption-1", duration_seconds=30)
    assert first.acquire()
    assert not second.acquire()
    with pytest.raises(LeaseUnavailable, match="provisioner"):
        second.__enter__()
    first.renew()
    first.release()
    with second:
        lease = cluster.get(LEASES, DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "interruption-1"
        assert lease["spec"]["leaseTransitions"] == 1
    assert not cluster.get(LEASES, DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE)["spec"].get("holderIdentity")


def test_expired_lease_is_taken_over_and_the_old_holder_learns_it(cluster) -> None:
    clock = _Clock()
    old = WriterLease(cluster, "old", duration_seconds=10, clock=clock)
    assert old.acquire()
    clock.now += timedelta(seconds=11)
    new = WriterLease(cluster, "new", duration_seconds=10, clock=clock)
    assert new.acquire(), "the holder let it expire"
    with pytest.raises(LeaseLost):
        old.renew()


def test_racing_acquirers_one_wins(cluster) -> None:
    """Both read the free lease; the second write carries a stale resourceVersion and gets 409."""
    a = WriterLease(cluster, "a", duration_seconds=30)
    b = WriterLease(cluster, "b", duration_seconds=30)
    assert a.acquire()
    a.release()
    stale = cluster.get(LEASES, DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE)
    assert b.acquire()
    with pytest.raises(Conflict):
        cluster.replace(LEASES, {**stale, "spec": {**stale["spec"], "holderIdentity": "a"}})
