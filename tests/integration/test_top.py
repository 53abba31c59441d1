"""``nodewright top`` against the API emulator, as an identity that may only list and watch: one frame
shows each node's placement, $/h, requests as bars and NodeClaim state, the cluster's $/h, the pods
waiting for capacity and Nodewright's events; the live view's watches bring a node added later into
the next frame; a watch whose resourceVersion the server no longer keeps (410) is listed again."""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config
from kubernetes.client import ApiClient
from nodewright.cli import main, top
from nodewright.cluster import auth
from nodewright.cluster.client import Cluster
from nodewright.cluster.resources import (
    CLUSTER_ROLES,
    CRDS,
    EC2NODECLASSES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
)
from waiting import wait_for

from sandbox.apiserver import ApiServer
from sandbox.shared_data import REPO_ROOT
from sandbox.simulators.controllers import ServiceAccounts
from sandbox.simulators.kube import Kube

pytestmark = pytest.mark.timeout(120)

REGION = "us-east-1"
OD, SPOT = "i-0000000000000000a", "i-0000000000000000b"
# What top needs, and nothing more: LIST and WATCH (a GET would be refused).
READER_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "pods", "events"], "verbs": ["list", "watch"]},
    {
        "apiGroups": ["karpenter.sh"],
        "resources": ["nodeclaims", "nodepools", "nodeoverlays"],
        "verbs": ["list", "watch"],
    },
    {"apiGroups": ["karpenter.k8s.aws"], "resources": ["ec2nodeclasses"], "verbs": ["list", "watch"]},
]


def on_change(changed: threading.Event) -> Callable[[], None]:
    """A step for the suite's one wait (tests/waiting.py): look again after each change the view
    reports (or a second)."""

    def step() -> None:
        changed.wait(1.0)
        changed.clear()

    return step


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(watch_history=20) as srv:
        yield srv


@pytest.fixture
def admin(server: ApiServer, tmp_path: Path) -> Iterator[Cluster]:
    api = ApiClient(auth.kubeconfig_configuration(str(server.write_kubeconfig(tmp_path / "admin"))))
    cluster = Cluster(api)
    for file in sorted((REPO_ROOT / "crds").glob("*.yaml")):
        for crd in yaml.safe_load_all(file.read_text()):
            if crd:
                cluster.request("POST", CRDS.path(), body=crd)
    cluster.list(EC2NODECLASSES)  # served
    kube = Kube(config.new_client_from_config(str(tmp_path / "admin")))
    with ServiceAccounts(kube):  # kube-controller-manager's: without them no pod is admitted
        yield cluster
    api.close()


@pytest.fixture
def reader(server: ApiServer, admin: Cluster, tmp_path: Path) -> Path:
    """A kubeconfig of an identity bound to a ClusterRole of list and watch only."""
    rbac = "rbac.authorization.k8s.io/v1"
    admin.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        body={"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "top"}, "rules": READER_RULES},
    )
    admin.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        body={
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "top"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "top"},
            "subjects": [{"kind": "User", "name": "viewer", "apiGroup": "rbac.authorization.k8s.io"}],
        },
    )
    return server.write_kubeconfig(tmp_path / "reader", token=server.add_identity("viewer"))


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"prices": {"m5.large": 0.5, "m5.xlarge": 1.0}}))
    return path


def labels(instance_type: str, zone: str, capacity_type: str) -> dict[str, str]:
    return {
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": REGION,
        "karpenter.sh/capacity-type": capacity_type,
        "karpenter.sh/nodepool": "default",
    }


def add_node(
    cluster: Cluster, name: str, instance: str, placed: dict[str, str], *, cpu: str, memory: str
) -> None:
    cluster.create(
        NODES,
        {
            "metadata": {"name": name, "labels": placed},
            "spec": {"providerID": f"aws:///{placed['topology.kubernetes.io/zone']}/{instance}"},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        },
    )


def add_claim(
    cluster: Cluster, name: str, instance: str | None, placed: dict[str, str], *conditions: str
) -> None:
    cluster.create(
        NODECLAIMS,
        {
            "metadata": {"name": name, "labels": placed},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            },
        },
    )
    now = "2026-05-01T12:00:00Z"
    status: dict[str, Any] = {
        "conditions": [
            {"type": c, "status": "True", "reason": c, "message": "", "lastTransitionTime": now}
            for c in conditions
        ]
    }
    if instance:
        status["providerID"] = f"aws:///{placed.get('topology.kubernetes.io/zone', '')}/{instance}"
    cluster.patch(NODECLAIMS, name, {"status": status}, subresource="status")


def add_pod(cluster: Cluster, name: str, node: str | None, cpu: str, memory: str) -> None:
    cluster.create(
        PODS,
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                **({"nodeName": node} if node else {}),
                "containers": [
                    {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
                ],
            },
        },
        namespace="default",
    )
    if node is None:  # kube-scheduler's verdict on a pod nothing can hold
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes",
        }
        cluster.patch(
            PODS, name, {"status": {"conditions": [condition]}}, namespace="default", subresource="status"
        )


def the_cluster(admin: Cluster) -> None:
    admin.create(
        EC2NODECLASSES,
        {
            "metadata": {"name": "default"},
            "spec": {
                "role": "NodewrightNode-demo",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            },
        },
    )
    admin.create(
        NODEPOOLS,
        {
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [],
                    }
                }
            },
        },
    )
    od, spot = labels("m5.large", "us-east-1a", "on-demand"), labels("m5.xlarge", "us-east-1b", "spot")
    add_node(admin, "od-node", OD, od, cpu="2", memory="8Gi")
    add_node(admin, "spot-node", SPOT, spot, cpu="4", memory="16Gi")
    add_claim(admin, "od-claim", OD, od, "Launched", "Registered", "Initialized")
    add_claim(admin, "spot-claim", SPOT, spot, "Launched", "Registered", "Initialized", "Drifted")
    add_claim(admin, "new-claim", None, {"karpenter.sh/nodepool": "default"})
    add_pod(admin, "web-1", "od-node", cpu="1", memory="4Gi")
    add_pod(admin, "web-2", "od-node", cpu="500m", memory="2Gi")
    add_pod(admin, "batch", "spot-node", cpu="1", memory="2Gi")
    add_pod(admin, "huge", None, cpu="64", memory="1Ti")
    admin.record_event(admin.get(NODECLAIMS, "new-claim"), "Launching", "launching m5.large in us-east-1a")


def once(kubeconfig: Path, *extra: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["top", "--kubeconfig", str(kubeconfig), "--once", "--width", "200", *extra])
    return code, out.getvalue(), err.getvalue()


def row_of(text: str, name: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.strip().startswith(name + " ")]
    return line.split()


def test_one_frame_shows_each_node_its_claims_state_the_cost_pending_pods_and_decisions(
    admin: Cluster, reader: Path, prices: Path, tmp_path: Path
) -> None:
    the_cluster(admin)
    svg = tmp_path / "top.svg"
    code, text, errors = once(reader, "--prices", str(prices), "--svg", str(svg))
    assert (code, errors) == (0, "")

    od = row_of(text, "od-node")
    assert od[:6] == [
        "od-node",
        "default",
        "m5.large",
        "on-demand",
        "us-east-1a",
        "0.5000",
    ]  # --prices' price
    # requested vs allocatable: 1.5 of 2 cores (9 of 12 cells), 6 of 8 GiB (9 of 12)
    assert od[6:] == ["━━━━━━━━━", "1.5/2", "━━━━━━━━━", "6.0/8.0", "2", "initialized"]
    spot = row_of(text, "spot-node")
    assert spot[:5] == ["spot-node", "default", "m5.xlarge", "spot", "us-east-1b"]
    spot_price = float(spot[5])  # the catalog's spot offering in that zone
    assert 0 < spot_price < 1.0
    assert spot[6:] == ["━━━", "1/4", "━╸", "2.0/16.0", "1", "drifted"]
    assert row_of(text, "new-claim")[-1] == "launching"

    assert f"2 nodes + 1 launching  ${0.5 + spot_price:.4f}/h" in text
    assert "pods 3 bound, 1 pending" in text
    assert re.search(r"Launching\s+NodeClaim/new-claim\s+launching m5.large in us-east-1a", text)
    assert svg.read_text().startswith("<svg")


def test_the_live_view_shows_a_node_added_after_it_started_in_its_next_frame(
    admin: Cluster, reader: Path, prices: Path
) -> None:
    the_cluster(admin)
    changed = threading.Event()
    cluster = Cluster(ApiClient(auth.kubeconfig_configuration(str(reader))))
    view = top.ClusterView(cluster, top.Prices(None, str(prices), False), on_change=changed.set)
    view.start()
    try:
        wait_for("the first lists", lambda: view.synced, 60, step=on_change(changed), every=0)
        assert [r.name for r in view.frame().rows] == ["od-node", "spot-node", "new-claim"]
        lists = {name: r.lists for name, r in view.reflectors.items()}

        add_node(
            admin,
            "late-node",
            "i-0000000000000000c",
            labels("m5.large", "us-east-1c", "on-demand"),
            cpu="2",
            memory="8Gi",
        )
        add_pod(admin, "late-pod", "late-node", cpu="1", memory="1Gi")
        late = wait_for(
            "late-node with its pod",
            lambda: next((r for r in view.frame().rows if r.name == "late-node" and r.pods == 1), None),
            60,
            step=on_change(changed),
            every=0,
        )
        assert (late.instance_type, late.zone, late.state, late.price) == (
            "m5.large",
            "us-east-1c",
            "unmanaged",
            0.5,
        )
        admin.delete(NODES, "od-node")
        wait_for(
            "od-node gone",
            lambda: "od-node" not in [r.name for r in view.frame().rows],
            60,
            step=on_change(changed),
            every=0,
        )
        # seen through the watches: nothing was listed again
        assert {name: r.lists for name, r in view.reflectors.items()} == lists
        assert view.problems() == []
    finally:
        view.stop()


def test_a_watch_from_a_version_the_server_no_longer_keeps_is_listed_again(
    admin: Cluster, reader: Path, prices: Path
) -> None:
    the_cluster(admin)
    changed = threading.Event()
    cluster = Cluster(ApiClient(auth.kubeconfig_configuration(str(reader))))
    view = top.ClusterView(cluster, top.Prices(None, str(prices), False), on_change=changed.set)
    view.list_once()
    nodes = view.reflectors["nodes"]
    stale = nodes.resource_version
    # More node changes than the server's watch history (20) keeps, while nobody watches.
    for i in range(25):
        add_node(
            admin,
            f"node-{i:02d}",
            f"i-{i + 100:017x}",
            labels("m5.large", "us-east-1a", "on-demand"),
            cpu="2",
            memory="8Gi",
        )
    view.start()  # each reflector watches on from its list's version; nodes' answers 410 Gone
    try:
        wait_for("the nodes listed again", lambda: nodes.lists == 2, 60, step=on_change(changed), every=0)
        wait_for(
            "every node", lambda: len(view.frame().rows) == 2 + 25 + 1, 60, step=on_change(changed), every=0
        )
        assert nodes.resource_version != stale
        assert view.reflectors["pods"].lists == 1  # its version was still kept: no list
    finally:
        view.stop()


def test_a_resource_the_identity_may_not_list_is_named_and_the_rest_still_shown(
    server: ApiServer, admin: Cluster, reader: Path, prices: Path
) -> None:
    the_cluster(admin)
    admin.patch(
        CLUSTER_ROLES,
        "top",
        {"rules": [r for r in READER_RULES if r["apiGroups"] != ["karpenter.k8s.aws"]]},
    )
    code, text, errors = once(reader, "--prices", str(prices))
    assert (code, errors) == (1, "")
    (problem,) = [line for line in text.splitlines() if line.startswith("nodeclasses: ")]
    assert "not allowed" in problem
    assert row_of(text, "od-node")[:5] == ["od-node", "default", "m5.large", "on-demand", "us-east-1a"]
    assert "pods 3 bound, 1 pending" in text


def test_an_unreachable_api_server_is_one_line_and_exit_1(server: ApiServer, reader: Path) -> None:
    server.stop()
    code, text, errors = once(reader)
    assert (code, text) == (1, "")
    assert errors.startswith("nodewright top: reading the cluster failed: cannot reach the API server")
    assert len(errors.strip().splitlines()) == 1


def test_the_live_view_without_a_terminal_says_to_use_once(reader: Path) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["top", "--kubeconfig", str(reader)]) == 2
    assert "use --once" in err.getvalue()
