"""Termination against the API emulator: tiers, PDBs (429 then allowed), deadlines, do-not-disrupt, resume."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from nodewright import termination
from nodewright.cluster import objects
from nodewright.cluster.resources import (
    EVENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    VOLUME_ATTACHMENTS,
)
from nodewright.termination import terminate

CRITICAL = "system-cluster-critical"


@pytest.fixture
def evictions(ctx, monkeypatch) -> list[str]:
    """The order in which pods were evicted (the real call still goes to the API server)."""
    order: list[str] = []
    real = ctx.cluster.evict

    def recording(pod, **kwargs):
        result = real(pod, **kwargs)
        order.append(f"{pod['metadata']['name']}:{result.outcome.value}")
        return result

    monkeypatch.setattr(ctx.cluster, "evict", recording)
    return order


def _node_with_claim(world, name="node-a", instance="i-0aaaaaaaaaaaaaaa1", **claim_spec):
    node = world.node(name, instance)
    claim = world.nodeclaim(f"claim-{name}", instance, name, **claim_spec)
    return node, claim


def _pending(ctx):
    """What the next pass of any function finds to drive (the termination controller's look)."""
    observed = termination.observe(ctx)
    found, deletions = terminate.in_progress(ctx, observed.node_views, observed.claim_views)
    return found + deletions


def _begin(ctx, node, claim, *, deadline=None, involuntary=True, instance_going=False):
    return termination.request(
        ctx,
        nodeclaim=claim,
        node=node,
        instance_id=objects.nodeclaim_instance_id(claim),
        asked=termination.TerminationRequest(
            "test", involuntary=involuntary, instance_going=instance_going, deadline=deadline
        ),
    )


def test_drain_in_tiers_waits_for_the_pdb_then_removes_everything(
    world, ctx, clock, cloud, evictions
) -> None:
    node, claim = _node_with_claim(world)
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pod("batch-1", "node-a", labels={"app": "batch"})
    world.pod("dns-1", "node-a", priority_class=CRITICAL)
    world.pod("agent-1", "node-a", owner_kind="DaemonSet")
    world.pod("cni-1", "node-a", owner_kind="DaemonSet", priority_class="system-node-critical")
    world.pod(
        "stays-1",
        "node-a",
        tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}],
    )
    world.pdb("web", {"app": "web"}, allowed=0)
    passes = {"n": 0}

    def pdb_controller() -> None:  # the budget allows a disruption after a few seconds
        passes["n"] += 1
        if passes["n"] == 3:
            world.set_pdb_allowed("web", 1)

    clock.ticks.append(pdb_controller)

    term = _begin(ctx, node, claim)
    cordoned = world.cluster.get_node("node-a")
    assert cordoned["spec"]["unschedulable"] is True
    assert objects.has_taint(cordoned, "karpenter.sh/disrupted", "NoSchedule")
    assert world.cluster.get_nodeclaim("claim-node-a")["metadata"]["deletionTimestamp"]

    termination.reconcile(ctx, None, asked=[term], budget_seconds=120)

    assert term.done, term.summary()
    assert sorted(evictions[0:2]) == ["batch-1:evicted", "web-1:blocked"], "first pass: the whole first tier"
    assert "web-1:evicted" in evictions
    # Karpenter's tiers: non-critical, non-critical DaemonSet, critical, critical DaemonSet.
    order = [e.split(":")[0] for e in evictions if e.endswith(":evicted")]
    assert order.index("web-1") < order.index("agent-1") < order.index("dns-1") < order.index("cni-1"), order
    assert order.index("batch-1") < order.index("agent-1"), order
    assert not any(e.startswith("stays-1") for e in evictions), "a pod tolerating the disrupted taint stays"
    assert world.cluster.find_node("node-a") is None
    assert world.cluster.find_nodeclaim("claim-node-a") is None
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]
    assert max(clock.slept) <= terminate.MAX_WAIT_SECONDS


def test_deadline_deletes_blocked_pods_early_enough_for_their_grace_period(world, ctx, clock, cloud) -> None:
    node, claim = _node_with_claim(world)
    world.pod("web-1", "node-a", labels={"app": "web"}, grace=20)
    world.pdb("web", {"app": "web"}, allowed=0)  # never allows
    deadline = clock.now() + timedelta(seconds=120)
    deleted_at = []
    real_delete = ctx.cluster.delete_pod

    def recording_delete(namespace, name, **kwargs):
        deleted_at.append((clock.now(), kwargs.get("grace_period_seconds")))
        return real_delete(namespace, name, **kwargs)

    ctx.cluster.delete_pod = recording_delete
    term = _begin(ctx, node, claim, deadline=deadline, instance_going=True)
    termination.reconcile(ctx, None, asked=[term], budget_seconds=300)

    assert term.done
    moment, grace = deleted_at[0]
    assert deadline - timedelta(seconds=20) <= moment < deadline, "deleted once its grace no longer fits"
    assert grace == 20
    assert cloud.terminated == [], "EC2 is taking the instance itself"


def test_do_not_disrupt_waits_for_the_deadline_unless_the_node_goes_regardless(world, ctx, clock) -> None:
    node, claim = _node_with_claim(world, terminationGracePeriod="60s")
    world.pod("careful", "node-a", annotations={"karpenter.sh/do-not-disrupt": "true"})
    term = _begin(ctx, node, claim, involuntary=False)
    assert term.deadline is not None
    terminate.step(ctx, term)
    assert term.last_pass.waiting_do_not_disrupt == ["default/careful"]
    assert world.pod_names("node-a") == ["careful"]

    node_b, claim_b = _node_with_claim(world, name="node-b", instance="i-0bbbbbbbbbbbbbbb2")
    world.pod("careful-b", "node-b", annotations={"karpenter.sh/do-not-disrupt": "true"})
    term_b = _begin(ctx, node_b, claim_b, involuntary=True)
    terminate.step(ctx, term_b)
    assert term_b.last_pass.evicted == ["default/careful-b"]


def test_a_do_not_disrupt_duration_holds_the_drain_only_until_it_elapses(world, ctx, clock) -> None:
    node, claim = _node_with_claim(world)
    world.pod(
        "careful",
        "node-a",
        annotations={"karpenter.sh/do-not-disrupt": "20s"},
        started=clock.now() - timedelta(seconds=5),
    )
    world.pod("web-1", "node-a")
    term = _begin(ctx, node, claim, involuntary=False)
    assert term.deadline is None, "no terminationGracePeriod: only the annotation's duration holds it"
    terminate.step(ctx, term)
    assert term.last_pass.waiting_do_not_disrupt == ["default/careful"]
    assert term.last_pass.evicted == ["default/web-1"]
    clock.advance(14)
    terminate.step(ctx, term)
    assert term.last_pass.waiting_do_not_disrupt == ["default/careful"], "15 s after it started"
    clock.advance(1)
    terminate.step(ctx, term)
    assert term.last_pass.evicted == ["default/careful"], "20 s after it started: evicted"


def test_a_termination_cut_short_is_resumed_from_the_cluster_and_nothing_is_done_twice(
    world, ctx, clock, cloud, evictions
) -> None:
    node, claim = _node_with_claim(world)
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)
    first = _begin(ctx, node, claim, deadline=clock.now() + timedelta(seconds=600))
    terminate.step(ctx, first)  # the invocation dies here: the PDB still blocks
    assert not first.done

    world.set_pdb_allowed("web", 1)
    found = _pending(ctx)  # a new invocation knows only the cluster
    assert [t.nodeclaim for t in found] == ["claim-node-a"]
    resumed = found[0]
    assert resumed.deadline == first.deadline.replace(microsecond=0)
    assert resumed.involuntary
    termination.reconcile(ctx, None, asked=found, budget_seconds=60)

    assert resumed.done
    assert evictions.count("web-1:evicted") == 1
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]
    assert _pending(ctx) == []
    assert termination.reconcile(ctx, termination.observe(ctx)).terminations == ()


def test_one_step_a_pass_finishes_a_deleted_nodeclaim_over_the_passes(world, ctx, clock, cloud) -> None:
    """What the provisioner's passes do (``termination.reconcile`` without a time budget): one
    non-blocking step each, until the node is drained and the NodeClaim, Node and instance are gone."""
    _node_with_claim(world)
    world.pod("web-1", "node-a")
    world.cluster.delete_nodeclaim("claim-node-a")  # kubectl delete nodeclaim: the default request

    first = termination.reconcile(ctx, termination.observe(ctx))
    assert [(t.nodeclaim, t.done, t.reason) for t in first.terminations] == [
        ("claim-node-a", False, "NodeClaim deleted")
    ], "eviction issued, the pod terminating"
    assert objects.condition(world.cluster.get_nodeclaim("claim-node-a"), "Drained")["status"] == "Unknown"
    world.kubelet_confirm()
    second = termination.reconcile(ctx, termination.observe(ctx))
    assert [t.done for t in second.terminations] == [True]
    assert world.cluster.find_node("node-a") is None
    assert world.cluster.find_nodeclaim("claim-node-a") is None
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]


def test_nodeclaim_without_instance_id_terminates_by_its_tag(world, ctx, cloud) -> None:
    """A launch that crashed before recording the instance: the instance is found by its NodeClaim tag."""
    world.cluster.create_nodeclaim(
        {
            "metadata": {"name": "unrecorded", "finalizers": ["karpenter.sh/termination"]},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            },
        }
    )
    world.cluster.delete_nodeclaim("unrecorded")
    termination.reconcile(ctx, termination.observe(ctx))
    assert cloud.deleted_by_nodeclaim == ["unrecorded"]
    assert cloud.terminated == []
    assert world.cluster.find_nodeclaim("unrecorded") is None


def test_a_termination_grace_period_beyond_what_kubernetes_accepts_sets_no_deadline(world, ctx) -> None:
    node, claim = _node_with_claim(world, terminationGracePeriod="80000000h")
    term = _begin(ctx, node, claim, involuntary=False)
    assert term.deadline is None
    terminate.step(ctx, term)


def test_issue16_defect3_an_instance_terminated_out_of_band_does_not_leave_its_node_deleting_forever(
    world, ctx, clock, cloud
) -> None:
    """Its kubelet is dead: nothing confirms a graceful deletion and a PDB would block for ever.
    Once EC2 says the instance is gone, the pods bound to the node are force-deleted (so a
    StatefulSet can recreate its pod) and the Node and NodeClaim go at once, without a deadline."""
    clock.ticks.clear()  # no kubelet: graceful deletions are never confirmed
    node, claim = _node_with_claim(world)
    world.pod("db-0", "node-a", labels={"app": "db"}, owner_kind="StatefulSet")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)
    term = _begin(ctx, node, claim, involuntary=False)
    terminate.step(ctx, term)
    assert not term.done, "while the instance runs, the PDB holds the drain"

    cloud.gone.add("i-0aaaaaaaaaaaaaaa1")  # terminated from the EC2 console
    clock.advance(terminate.INSTANCE_CHECK_SECONDS)
    terminate.step(ctx, term)

    assert term.done
    assert "instance-gone" in term.history
    assert world.cluster.list_pods() == [], "force-deleted, not left Terminating on a dead kubelet"
    assert world.cluster.find_node("node-a") is None
    assert world.cluster.find_nodeclaim("claim-node-a") is None
    assert cloud.terminated == [], "nothing left to terminate"


def test_issue16_defect4_kubectl_delete_node_drains_terminates_the_instance_and_removes_the_finalizer(
    world, ctx, clock, cloud
) -> None:
    _node_with_claim(world, terminationGracePeriod="1h")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.cluster.delete_node("node-a")  # kubectl delete node node-a: held by karpenter.sh/termination
    assert world.cluster.get_node("node-a")["metadata"]["deletionTimestamp"]

    [term] = _pending(ctx)  # what the next pass of any flow sees
    assert term.nodeclaim == "claim-node-a"
    assert term.reason == "Node node-a deleted"
    assert term.deadline is not None, "the NodeClaim's terminationGracePeriod bounds the drain"
    assert objects.is_deleting(world.cluster.get_nodeclaim("claim-node-a")), "deleting either deletes both"
    assert world.cluster.get_node("node-a")["spec"]["unschedulable"] is True

    termination.reconcile(ctx, None, asked=[term], budget_seconds=30)
    assert term.done
    assert world.cluster.find_node("node-a") is None
    assert world.cluster.find_nodeclaim("claim-node-a") is None
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"], "the instance is not billed on"
    assert _pending(ctx) == []


def test_a_deleted_node_without_a_nodeclaim_is_drained_and_its_instance_terminated(world, ctx, cloud) -> None:
    world.node("node-b", "i-0bbbbbbbbbbbbbbb2")
    world.pod("web-1", "node-b")
    world.cluster.delete_node("node-b")
    termination.reconcile(ctx, termination.observe(ctx), budget_seconds=30)
    assert world.cluster.find_node("node-b") is None
    assert cloud.terminated == ["i-0bbbbbbbbbbbbbbb2"]


# --- VolumeAttachments: the instance goes once they are gone (Karpenter's termination) ------------------


def _attached_volume(world, pod_name: str, node: str, *, tolerates: bool = False, **pod: Any) -> str:
    """A CSI PersistentVolume bound to a claim that ``pod_name`` (on ``node``) mounts, and the
    VolumeAttachment the attach-detach controller made for it; the attachment's name."""
    pv = f"pv-{pod_name}"
    world.cluster.create(
        PERSISTENT_VOLUMES,
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{pod_name}"},
                "claimRef": {"namespace": "default", "name": f"data-{pod_name}"},
            },
        },
    )
    world.cluster.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "metadata": {"name": f"data-{pod_name}", "namespace": "default"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "volumeName": pv,
            },
        },
        namespace="default",
    )
    tolerations = [{"key": "karpenter.sh/disrupted", "operator": "Exists"}] if tolerates else None
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{pod_name}"}}]
    world.pod(pod_name, node, volumes=volumes, tolerations=tolerations, **pod)
    attachment = f"csi-{pod_name}"
    world.cluster.create(
        VOLUME_ATTACHMENTS,
        {
            "metadata": {"name": attachment},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": {"persistentVolumeName": pv}},
        },
    )
    return attachment


def _status_writes(ctx, monkeypatch) -> list[tuple[str, str, str]]:
    """(type, status, reason) of every NodeClaim condition the code under test writes, in order."""
    seen: list[tuple[str, str, str]] = []
    real = ctx.cluster.patch_nodeclaim_status

    def recording(name, status):
        before = {
            c["type"]: c
            for c in (ctx.cluster.get_nodeclaim(name).get("status") or {}).get("conditions") or []
        }
        for cond in status.get("conditions") or ():
            old = before.get(cond["type"])
            if old is None or (old["status"], old.get("reason")) != (cond["status"], cond.get("reason")):
                seen.append((cond["type"], cond["status"], cond.get("reason")))
        return real(name, status)

    monkeypatch.setattr(ctx.cluster, "patch_nodeclaim_status", recording)
    return seen


def test_the_instance_is_terminated_only_once_the_drained_pods_volume_attachments_are_gone(
    world, ctx, clock, cloud, monkeypatch
) -> None:
    node, claim = _node_with_claim(world)
    attachment = _attached_volume(world, "db-0", "node-a")
    writes = _status_writes(ctx, monkeypatch)
    term = _begin(ctx, node, claim, involuntary=False)

    terminate.step(ctx, term)  # db-0 evicted: its kubelet has not confirmed yet
    assert ("Drained", "Unknown", "Draining") in writes
    world.kubelet_confirm()
    terminate.step(ctx, term)
    assert not term.done, "drained, but its volume is still attached"
    assert term.awaiting_volumes == 1
    assert cloud.terminated == []
    assert ("Drained", "True", "Drained") in writes
    assert writes[-1] == ("VolumesDetached", "Unknown", "AwaitingVolumeDetachment")
    events = [
        e
        for e in world.cluster.list(EVENTS, namespace="default")
        if e["reason"] == "AwaitingVolumeDetachment"
    ]
    assert [(e["type"], e["message"]) for e in events] == [
        ("Warning", "Awaiting deletion of 1 VolumeAttachments bound to node")
    ]
    terminate.step(ctx, term)
    again = [
        e
        for e in world.cluster.list(EVENTS, namespace="default")
        if e["reason"] == "AwaitingVolumeDetachment"
    ]
    assert len(again) == 1, "one event while it waits, not one per pass"

    world.cluster.delete(VOLUME_ATTACHMENTS, attachment)  # the attach-detach controller detaches it
    terminate.step(ctx, term)

    assert term.done
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]
    assert writes[-2:] == [
        ("VolumesDetached", "True", "VolumesDetached"),
        ("InstanceTerminating", "True", "InstanceTerminating"),
    ]


def test_the_volume_of_a_pod_the_drain_leaves_on_the_node_does_not_hold_the_instance(
    world, ctx, cloud
) -> None:
    node, claim = _node_with_claim(world)
    _attached_volume(world, "log-0", "node-a", tolerates=True)
    world.cluster.create(
        VOLUME_ATTACHMENTS,
        {
            "metadata": {"name": "csi-inline"},
            "spec": {
                "attacher": "ebs.csi.aws.com",
                "nodeName": "node-a",
                "source": {
                    "inlineVolumeSpec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-x"}}
                },
            },
        },
    )
    term = _begin(ctx, node, claim, involuntary=False)
    terminate.step(ctx, term)
    assert term.done, "a tolerating pod's volume and an inline volume are never waited for"
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]


def test_the_termination_grace_period_bounds_the_wait_for_volume_attachments(
    world, ctx, clock, cloud, monkeypatch
) -> None:
    node, claim = _node_with_claim(world, terminationGracePeriod="60s")
    _attached_volume(world, "db-0", "node-a", grace=5)
    writes = _status_writes(ctx, monkeypatch)
    term = _begin(ctx, node, claim, involuntary=False)
    terminate.step(ctx, term)
    world.kubelet_confirm()
    terminate.step(ctx, term)
    assert not term.done
    assert term.awaiting_volumes == 1
    clock.advance(61)
    terminate.step(ctx, term)
    assert term.done, "the grace period has elapsed: the attachment no longer holds the instance"
    assert ("VolumesDetached", "False", "TerminationGracePeriodElapsed") in writes
    assert cloud.terminated == ["i-0aaaaaaaaaaaaaaa1"]
