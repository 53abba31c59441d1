"""The sandbox scheduler's placement rules and messages, on plain dicts (no API server)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sandbox.simulators.scheduler import (
    ClusterState,
    choose_node,
    filter_node,
    is_pending_for_us,
    pod_requests,
)
from sandbox.simulators.volumebinding import Volumes

ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str = "us-east-1a", cpu: str = "2", memory: str = "4Gi", **extra: Any) -> dict:
    labels = {"kubernetes.io/hostname": name, ZONE: zone, **extra.pop("labels", {})}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": extra.pop("spec", {}),
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": extra.pop("pods", "110")}},
    }


def pod(name: str, cpu: str = "1", memory: str = "1Gi", labels: dict | None = None, **spec: Any) -> dict:
    container = {"name": "app", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
        "spec": {"containers": [container], **spec},
        "status": {"phase": "Pending"},
    }


def bound(p: dict, node_name: str) -> dict:
    return {**p, "spec": {**p["spec"], "nodeName": node_name}, "status": {"phase": "Running"}}


def test_pod_that_fits_nowhere_gets_the_real_schedulers_message() -> None:
    state = ClusterState.build([node("a"), node("b"), node("c")], [])
    assert choose_node(pod("big", cpu="3"), state) == (None, "0/3 nodes are available: 3 Insufficient cpu.")


def test_reasons_are_counted_and_sorted_like_kube_scheduler() -> None:
    cordoned = node("a", spec={"unschedulable": True})
    tainted = node("b", spec={"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]})
    full = node("c", cpu="500m")
    _, message = choose_node(pod("p"), ClusterState.build([cordoned, tainted, full], []))
    assert message == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint "
        "{node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable."
    )


def test_no_nodes_at_all() -> None:
    assert choose_node(pod("p"), ClusterState.build([], [])) == (None, "no nodes available to schedule pods")


def test_bound_pods_consume_allocatable() -> None:
    state = ClusterState.build([node("a")], [bound(pod("x", cpu="1500m"), "a")])
    assert filter_node(pod("p"), node("a"), state) == ["Insufficient cpu"]


def test_terminal_pods_release_their_resources() -> None:
    done = {**bound(pod("x", cpu="2"), "a"), "status": {"phase": "Succeeded"}}
    assert filter_node(pod("p"), node("a"), ClusterState.build([node("a")], [done])) == []


def test_pod_count_limit() -> None:
    state = ClusterState.build([node("a", pods="1")], [bound(pod("x", cpu="0", memory="0"), "a")])
    assert filter_node(pod("p", cpu="0", memory="0"), node("a", pods="1"), state) == ["Too many pods"]


def test_requests_take_limits_init_containers_and_overhead_into_account() -> None:
    p = pod("p", cpu="100m")
    p["spec"]["containers"].append({"name": "side", "resources": {"limits": {"cpu": "200m"}}})
    p["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "1"}}}]
    p["spec"]["overhead"] = {"cpu": "50m"}
    assert pod_requests(p)["cpu"] == Decimal("1.05")


def test_node_selector_and_required_node_affinity() -> None:
    arm = node("arm", labels={"kubernetes.io/arch": "arm64"})
    amd = node("amd", labels={"kubernetes.io/arch": "amd64"})
    state = ClusterState.build([arm, amd], [])
    assert choose_node(pod("p", nodeSelector={"kubernetes.io/arch": "arm64"}), state)[0] == "arm"
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["arm64"]}
                        ]
                    }
                ]
            }
        }
    }
    assert choose_node(pod("q", affinity=affinity), state)[0] == "amd"


def test_match_fields_pin_a_pod_to_one_node_as_daemonsets_do() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    assert choose_node(pod("ds", affinity=affinity), ClusterState.build([node("a"), node("b")], []))[0] == "b"


def test_tolerations_allow_tainted_nodes() -> None:
    tainted = node(
        "gpu", spec={"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}
    )
    state = ClusterState.build([tainted], [])
    assert choose_node(pod("p"), state)[0] is None
    tolerant = pod(
        "q",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
    )
    assert choose_node(tolerant, state)[0] == "gpu"
    prefer = node("soft", spec={"taints": [{"key": "x", "effect": "PreferNoSchedule"}]})
    assert choose_node(pod("r"), ClusterState.build([prefer], []))[0] == "soft"


def test_cordoned_node_is_skipped_unless_tolerated() -> None:
    cordoned = node("a", spec={"unschedulable": True})
    state = ClusterState.build([cordoned], [])
    assert choose_node(pod("p"), state)[1] == "0/1 nodes are available: 1 node(s) were unschedulable."
    tolerant = pod("q", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert choose_node(tolerant, state)[0] == "a"


def test_zone_topology_spread_sends_the_next_pod_to_the_emptier_zone() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    a, b = node("a", zone="us-east-1a", cpu="8"), node("b", zone="us-east-1b", cpu="1")
    running = [bound(pod("w1", cpu="100m", labels={"app": "web"}), "a")]
    state = ClusterState.build([a, b], running)
    new = pod("w2", cpu="100m", labels={"app": "web"}, topologySpreadConstraints=spread)
    assert filter_node(new, a, state) == ["node(s) didn't match pod topology spread constraints"]
    assert choose_node(new, state)[0] == "b"


def test_hostname_anti_affinity_keeps_replicas_apart() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }
    state = ClusterState.build(
        [node("a", cpu="8"), node("b", cpu="1")], [bound(pod("db1", cpu="100m", labels={"app": "db"}), "a")]
    )
    new = pod("db2", cpu="100m", labels={"app": "db"}, affinity=anti)
    assert choose_node(new, state)[0] == "b"
    # and the existing pod's own anti-affinity repels a matching newcomer (symmetry)
    state = ClusterState.build(
        [node("a", cpu="8")], [bound(pod("db1", cpu="100m", labels={"app": "db"}, affinity=anti), "a")]
    )
    assert choose_node(pod("db3", cpu="100m", labels={"app": "db"}), state)[1] == (
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    )


def test_a_pod_placed_earlier_in_the_same_pass_repels_and_fills_like_a_bound_one() -> None:
    """The state keeps each node's used requests and the repelling pods as the pass assumes pods;
    they must count exactly as pods that were bound before the pass."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}
            ]
        }
    }
    state = ClusterState.build([node("a", cpu="2"), node("b", cpu="2")], [])
    state.assume(pod("db1", cpu="100m", labels={"app": "db"}, affinity=anti), "a")
    state.assume(pod("fill", cpu="1500m"), "b")
    assert state.used("a")["cpu"] == Decimal("0.1")
    assert state.used("b")["cpu"] == Decimal("1.5")
    assert choose_node(pod("db2", cpu="100m", labels={"app": "db"}), state)[0] == "b"  # repelled from a
    assert choose_node(pod("big", cpu="1"), state)[0] == "a"  # b is full


def test_pod_affinity_requires_a_matching_pod_in_the_domain() -> None:
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "cache"}}}
            ]
        }
    }
    a, b = node("a", zone="us-east-1a", cpu="1"), node("b", zone="us-east-1b", cpu="8")
    state = ClusterState.build([a, b], [bound(pod("c1", cpu="100m", labels={"app": "cache"}), "a")])
    assert choose_node(pod("web", cpu="100m", affinity=affinity), state)[0] == "a"


def test_least_allocated_node_wins_and_pass_accounts_for_its_own_bindings() -> None:
    state = ClusterState.build([node("a", cpu="4"), node("b", cpu="4")], [bound(pod("x", cpu="2"), "a")])
    first = choose_node(pod("p1"), state)[0]
    assert first == "b"
    state.assume(pod("p1"), first)
    state.assume(pod("p2"), "b")
    assert choose_node(pod("p3"), state)[0] == "a"


def test_only_unbound_default_scheduler_pods_are_ours() -> None:
    assert is_pending_for_us(pod("p"))
    assert not is_pending_for_us(pod("p", schedulerName="other"))
    assert not is_pending_for_us(bound(pod("p"), "a"))
    terminating = pod("p")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not is_pending_for_us(terminating)


# --- VolumeBinding: claims and generic ephemeral volumes --------------------------------------


def zonal_class(name: str, zone: str, mode: str = "WaitForFirstConsumer") -> dict:
    return {
        "metadata": {"name": name},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": mode,
        "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": [zone]}]}],
    }


def with_scratch(p: dict, storage_class: str = "zonal") -> dict:
    template = {"spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"]}}
    p["metadata"]["uid"] = f"uid-{p['metadata']['name']}"
    p["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}]
    return p


def claim(
    name: str, owner: dict | None = None, volume: str | None = None, storage_class: str = "zonal"
) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if owner is not None:
        refs = [
            {
                "kind": "Pod",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
        meta["ownerReferences"] = refs
    return {"metadata": meta, "spec": {"storageClassName": storage_class, "volumeName": volume}}


def zonal_volume(name: str, zone: str) -> dict:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
    return {"metadata": {"name": name}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [term]}}}}


def volume_state(claims: list, volumes: list | None = None, classes: list | None = None) -> ClusterState:
    state = ClusterState.build([node("a", zone="us-east-1a"), node("b", zone="us-east-1b")], [])
    state.volumes = Volumes.build(claims, volumes or [], classes or [zonal_class("zonal", "us-east-1b")])
    return state


def test_a_pod_waits_for_the_ephemeral_volume_controller_to_create_its_claim() -> None:
    assert choose_node(with_scratch(pod("p")), volume_state([])) == (
        None,
        "0/2 nodes are available: waiting for ephemeral volume controller to create the "
        'persistentvolumeclaim "p-scratch".',
    )


def test_a_same_named_claim_the_pod_does_not_control_is_refused() -> None:
    p = with_scratch(pod("p"))
    stale = claim("p-scratch", owner=with_scratch(pod("earlier-p")))
    assert choose_node(p, volume_state([stale])) == (
        None,
        "0/2 nodes are available: "
        "PVC default/p-scratch was not created for pod default/p (pod is not owner).",
    )
    assert choose_node(p, volume_state([claim("p-scratch")]))[0] is None  # no owner at all


def test_an_unbound_ephemeral_claim_goes_only_where_its_class_may_provision() -> None:
    p = with_scratch(pod("p"))
    state = volume_state([claim("p-scratch", owner=p)])
    assert filter_node(p, state.nodes[0], state) == [
        "node(s) didn't find available persistent volumes to bind"
    ]
    assert choose_node(p, state) == ("b", "")
    assert [c["metadata"]["name"] for c in state.volumes.unbound_delayed(p)] == ["p-scratch"]  # type: ignore[union-attr]


def test_a_bound_ephemeral_claim_pins_the_pod_to_its_volumes_zone() -> None:
    p = with_scratch(pod("p"), storage_class="anywhere")
    classes = [
        {
            "metadata": {"name": "anywhere"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    ]
    state = volume_state(
        [claim("p-scratch", owner=p, volume="pv-1", storage_class="anywhere")],
        [zonal_volume("pv-1", "us-east-1a")],
        classes,
    )
    assert filter_node(p, state.nodes[1], state) == ["node(s) had volume node affinity conflict"]
    assert choose_node(p, state) == ("a", "")


def test_an_unbound_claim_of_an_immediate_class_keeps_the_pod_pending() -> None:
    p = pod("p", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    state = volume_state(
        [claim("data", storage_class="now")], classes=[zonal_class("now", "us-east-1a", "Immediate")]
    )
    assert choose_node(p, state) == (
        None,
        "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    )
