"""Generic ephemeral volumes in the plan, read from Kubernetes JSON as the flows read them.

The ephemeral-volume controller names a pod's claim ``<pod>-<volume>`` and makes it from the
volume's template, controlled by the pod; until it exists the template's StorageClass says where
the volume may be provisioned (Karpenter's volume topology); once bound, its PersistentVolume's node
affinity does; a same-named claim the pod does not control is refused by kube-scheduler. A pod
being displaced (its node drained) is replaced by a pod with a new claim from the template.
"""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as wk
from nodewright.scheduling import Snapshot, plan
from nodewright.scheduling.model import pods_from_k8s, pv_from_k8s, pvc_from_k8s, storage_class_from_k8s
from nodewright.state.pods import as_pending
from test_scheduling_support import node, nodepool, zone_of


def zonal_class(name: str, *zones: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": wk.ZONE, "values": list(zones)}]}],
    }


def scratch_pod(
    name: str, storage_class: str | None = "zonal", node_name: str | None = None
) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"accessModes": ["ReadWriteOnce"]}}
    if storage_class is not None:
        template["spec"]["storageClassName"] = storage_class
    container = {
        "name": "app",
        "image": "app:1",
        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1"}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def claim(name: str, owner_uid: str | None, volume: str | None = None, storage_class: str = "zonal") -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner_uid:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "x", "uid": owner_uid, "controller": True}]
    return {"metadata": meta, "spec": {"storageClassName": storage_class, "volumeName": volume}}


def zonal_volume(name: str, zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [zone]}]}
    return {"metadata": {"name": name}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}}}


def snapshot(pods: list[dict], claims=(), volumes=(), classes=(), nodes=()) -> Snapshot:
    parsed, errors = pods_from_k8s(pods)
    assert not errors
    return Snapshot(
        parsed,
        [nodepool()],
        list(nodes),
        claims=[pvc_from_k8s(c) for c in claims],
        volumes=[pv_from_k8s(v) for v in volumes],
        storage_classes=[storage_class_from_k8s(s) for s in classes],
    )


def test_before_its_claim_exists_the_templates_class_decides_the_zone() -> None:
    result = plan(snapshot([scratch_pod("p")], classes=[zonal_class("zonal", "us-east-1b")]))
    assert not result.unschedulable
    assert [zone_of(c) for c in result.new_claims] == ["us-east-1b"]


def test_a_node_outside_the_templates_zones_is_not_where_the_pod_goes() -> None:
    room = node("a-node", zone="us-east-1a")
    result = plan(snapshot([scratch_pod("p")], classes=[zonal_class("zonal", "us-east-1b")], nodes=[room]))
    assert "default/p" not in result.placements
    assert [zone_of(c) for c in result.new_claims] == ["us-east-1b"]


def test_a_bound_ephemeral_claim_pins_the_pod_to_its_volumes_zone() -> None:
    pod = scratch_pod("p")
    result = plan(
        snapshot(
            [pod],
            claims=[claim("p-scratch", "uid-p", volume="pv-1")],
            volumes=[zonal_volume("pv-1", "us-east-1c")],
            classes=[zonal_class("zonal", "us-east-1a", "us-east-1b", "us-east-1c")],
        )
    )
    assert [zone_of(c) for c in result.new_claims] == ["us-east-1c"]


def test_a_same_named_claim_the_pod_does_not_control_keeps_it_unschedulable() -> None:
    result = plan(
        snapshot(
            [scratch_pod("p")],
            claims=[claim("p-scratch", "uid-an-earlier-p", volume="pv-1")],
            volumes=[zonal_volume("pv-1", "us-east-1c")],
            classes=[zonal_class("zonal", "us-east-1a")],
        )
    )
    assert not result.new_claims
    assert result.unschedulable["default/p"] == (
        "PVC default/p-scratch was not created for pod default/p (pod is not owner)"
    )


def test_a_displaced_pods_replacement_gets_a_new_claim_so_its_old_volumes_zone_does_not_bind_it() -> None:
    """Its claim goes with it (the garbage collector); the replacement's is made from the template,
    in a zone the template's class allows, not necessarily where the old volume was."""
    running = scratch_pod("p", node_name="old")
    result = plan(
        snapshot(
            [as_pending(running)],
            claims=[claim("p-scratch", "uid-p", volume="pv-old")],
            volumes=[zonal_volume("pv-old", "us-east-1a")],
            classes=[zonal_class("zonal", "us-east-1b")],
        )
    )
    assert not result.unschedulable
    assert [zone_of(c) for c in result.new_claims] == ["us-east-1b"]


def test_without_a_class_in_the_template_the_default_class_is_the_one_its_claim_will_get() -> None:
    default = {**zonal_class("standard", "us-east-1c")}
    default["metadata"] = {
        "name": "standard",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    result = plan(
        snapshot(
            [scratch_pod("p", storage_class=None)], classes=[zonal_class("zonal", "us-east-1a"), default]
        )
    )
    assert [zone_of(c) for c in result.new_claims] == ["us-east-1c"]
