"""``cluster.manifests.ManifestCluster``: the cluster edge over a manifest bundle, read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.cluster.manifests import ManifestCluster, ReadOnlyCluster
from nodewright.state.world import observe

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}},
    "spec": {"providerID": "aws:///us-west-2a/i-0123456789abcdef0"},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}
BOUND = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "nginx"}]},
    "status": {"phase": "Running"},
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "api", "namespace": "shop"},
    "spec": {
        "replicas": 2,
        "template": {
            "metadata": {"labels": {"app": "api"}},
            "spec": {"containers": [{"name": "a", "image": "x"}]},
        },
    },
}
ATTACHMENT = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "VolumeAttachment",
    "metadata": {"name": "csi-1"},
    "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-1"}},
}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"}}


def bundle(tmp_path: Path, *docs: dict[str, Any]) -> ManifestCluster:
    (tmp_path / "bundle.yaml").write_text(yaml.safe_dump_all(docs))
    return ManifestCluster([tmp_path / "bundle.yaml"])


def test_a_bundle_answers_the_list_calls_as_the_api_server_would(tmp_path: Path) -> None:
    cluster = bundle(tmp_path, NODE, BOUND, DEPLOYMENT)

    assert [n["metadata"]["name"] for n in cluster.list_nodes()] == ["node-a"]
    assert cluster.find_node("node-a") is not None
    assert cluster.find_node("node-b") is None
    assert [p["metadata"]["name"] for p in cluster.list_pods_on_node("node-a")] == ["web"]
    pending = cluster.list_pending_pods()
    assert sorted(p["metadata"]["name"] for p in pending) == ["api-0", "api-1"]
    assert all(p["metadata"]["namespace"] == "shop" for p in pending)
    assert cluster.list_nodeclaims() == []
    assert cluster.list_pdbs() == []


def test_reads_hand_out_copies_so_a_caller_cannot_change_the_bundle(tmp_path: Path) -> None:
    cluster = bundle(tmp_path, NODE)

    cluster.list_nodes()[0]["metadata"]["name"] = "changed"

    assert cluster.list_nodes()[0]["metadata"]["name"] == "node-a"


def test_every_write_is_refused_with_a_message_that_says_why(tmp_path: Path) -> None:
    cluster = bundle(tmp_path, NODE, BOUND)

    with pytest.raises(ReadOnlyCluster, match="a manifest bundle is read, never written"):
        cluster.delete_node("node-a")
    with pytest.raises(ReadOnlyCluster, match="evict pod web"):
        cluster.evict(BOUND)
    with pytest.raises(ReadOnlyCluster, match="create a NodeClaim"):
        cluster.create_nodeclaim({})
    with pytest.raises(ReadOnlyCluster, match="writers' lease"):
        cluster.writer_lease("disruption")
    assert len(cluster.list_nodes()) == 1


def test_kinds_nothing_read_are_listed_after_a_pass_observes_the_bundle(tmp_path: Path) -> None:
    from types import SimpleNamespace

    cluster = bundle(tmp_path, NODE, BOUND, ATTACHMENT, SERVICE)
    assert len(cluster.unread()) == 4, "before any read, nothing was read"

    class Clock:
        def now(self) -> Any:
            from datetime import UTC, datetime

            return datetime(2026, 12, 1, tzinfo=UTC)

    ctx = SimpleNamespace(
        cluster=cluster,
        clock=Clock(),
        cloud=None,
        settings=SimpleNamespace(relax_min_values=False, node_overlay=True),
    )
    world = observe(ctx)  # type: ignore[arg-type]

    assert [n["metadata"]["name"] for n in world.nodes] == ["node-a"]
    unread = cluster.unread()
    assert len(unread) == 2
    assert any("a plan does not use VolumeAttachment objects" in u for u in unread)
    assert any("a plan does not use Service objects" in u for u in unread)


def test_a_pod_naming_a_missing_runtime_class_is_refused_as_admission_would(tmp_path: Path) -> None:
    pod = {**BOUND, "spec": {**BOUND["spec"], "runtimeClassName": "gvisor"}}

    cluster = bundle(tmp_path, NODE, pod)

    assert cluster.list_pods() == []
    assert "RuntimeClass 'gvisor' not found" in cluster.report.refused_pods["default/web"]
