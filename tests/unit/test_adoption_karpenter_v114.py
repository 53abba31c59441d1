"""A cluster Karpenter v1.14 has been running, adopted in place: every NodeClaim it wrote is read,
judged and managed, and none is replaced because of who made it (its hash annotations are of
Karpenter's hash versions, re-annotated rather than taken for drift)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from fakes import FakeClock, FakeCloudProvider, FakeCluster, fake_context
from nodewright.api import hashing
from nodewright.api.models import NodePool
from nodewright.api.validation import nodeclaim_launch_problems, validate_document
from nodewright.disruption import drift
from nodewright.provisioning import lifecycle
from nodewright.state import nodepools
from nodewright.state.world import observe

from sandbox.shared_data import REPO_ROOT

FIXTURE = REPO_ROOT / "events" / "manifests" / "karpenter-v1.14" / "cluster-as-karpenter-left-it.yaml"


def karpenter_cluster() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(FIXTURE.read_text())}


def node_of(claim: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": claim["status"]["nodeName"],
            "labels": {
                **claim["metadata"]["labels"],
                "karpenter.sh/registered": "true",
                "karpenter.sh/initialized": "true",
            },
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {"providerID": claim["status"]["providerID"]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "capacity": claim["status"]["capacity"],
            "allocatable": claim["status"]["allocatable"],
        },
    }


def test_every_object_karpenter_wrote_is_valid_here() -> None:
    for kind, doc in karpenter_cluster().items():
        assert [str(f) for f in validate_document(doc) if f.is_error] == [], kind
    assert nodeclaim_launch_problems(karpenter_cluster()["NodeClaim"]) == []


def test_karpenter_hash_annotations_are_adopted_not_taken_for_drift() -> None:
    objects = karpenter_cluster()
    claim, pool, nodeclass = objects["NodeClaim"], objects["NodePool"], objects["EC2NodeClass"]
    assert claim["metadata"]["annotations"][hashing.NODEPOOL_HASH_VERSION] == "v3"
    assert claim["metadata"]["annotations"][hashing.NODECLASS_HASH_VERSION] == "v6"

    assert drift.static_reason(claim, pool, nodeclass) is None
    assert drift.requirements_reason(claim, NodePool.from_dict(pool)) is None  # Gte 3 holds generation 5
    stale = drift.stale_hashes(claim, pool, nodeclass)
    assert stale == hashing.nodeclaim_annotations(pool, nodeclass)


def test_the_adopted_nodeclaim_drifts_when_its_nodepool_changes_after_adoption() -> None:
    objects = karpenter_cluster()
    claim, pool, nodeclass = objects["NodeClaim"], objects["NodePool"], objects["EC2NodeClass"]
    claim["metadata"]["annotations"].update(drift.stale_hashes(claim, pool, nodeclass))
    edited = copy.deepcopy(pool)
    edited["spec"]["template"]["spec"]["taints"] = [{"key": "example.com/new", "effect": "NoSchedule"}]
    assert drift.static_reason(claim, edited, nodeclass) == drift.NODEPOOL_DRIFTED


@pytest.fixture
def adopted() -> tuple[Any, FakeCluster]:
    clock = FakeClock()
    cluster, cloud = FakeCluster(clock), FakeCloudProvider(clock)
    cloud.images = {"ami-0a1b2c3d4e5f60718"}
    objects = karpenter_cluster()
    for kind in ("EC2NodeClass", "NodePool", "NodeClaim"):
        cluster.add(kind, objects[kind])
    cluster.add("Node", node_of(objects["NodeClaim"]))
    return fake_context(cluster, cloud, clock), cluster


def test_the_karpenter_nodepool_is_usable_and_its_nodeclaim_is_read_and_left_running(
    adopted: tuple[Any, FakeCluster],
) -> None:
    ctx, cluster = adopted
    world = observe(ctx)
    verdicts = nodepools.triage(world)
    assert verdicts.is_usable("default")
    claim = world.nodeclaims[0]
    assert world.node_of(claim) is not None  # matched by the providerID Karpenter wrote
    assert world.nodeclass_of(claim) is not None

    report = lifecycle.reconcile(ctx, world)

    assert report.registered == report.initialized == report.timed_out == []
    assert "default-x7k2p" in cluster.objects["NodeClaim"]
    assert drift.mark(ctx, world, verdicts.usable) == {}  # nothing to replace
    annotations = cluster.objects["NodeClaim"]["default-x7k2p"]["metadata"]["annotations"]
    assert annotations[hashing.NODEPOOL_HASH_VERSION] == hashing.HASH_VERSION  # re-annotated
