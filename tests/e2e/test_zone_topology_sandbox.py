"""Zone topology end to end: what the plan places, the simulated kube-scheduler binds.

Pods with zone affinity to a pod pinned to one zone, zone anti-affinity to it, and a DoNotSchedule
zone spread with a preferred zone, all pending at once in the sandbox (API emulator, simulated
scheduler/kubelet, moto). ``nodewright plan --kubeconfig`` reads the cluster first and must change
nothing; then one provisioner invocation launches capacity, and every pod must bind, in the zones
the rules allow, on the nodes the plan meant for them.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from nodewright.api import labels
from nodewright.cluster.resources import EC2NODECLASSES, NODECLAIMS, NODEPOOLS, NODES, PODS, Resource
from nodewright.provisioning import loop

from sandbox.lambdas import SCHEDULED_EVENT, LambdaContext, load_function
from sandbox.workloads import nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("zone-topology-e2e")]

DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
GENERAL = [
    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": labels.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-zones", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        yield sb


@pytest.fixture
def kube(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from nodewright.cluster import connect, reset_connections
    from nodewright.settings import Settings

    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodewrightE2E")
    monkeypatch.setenv("POLL_INTERVAL_SECONDS", "1")
    client = connect(Settings.from_env())
    client.create(EC2NODECLASSES, nodeclass(sandbox))
    # As Karpenter's NodeClass controller resolves it: the subnets (and so the zones) it launches in.
    subnets = [{"id": subnet, "zone": zone} for zone, subnet in sorted(sandbox.aws.subnets.items())]
    client.patch(EC2NODECLASSES, "default", {"status": {"subnets": subnets}}, subresource="status")
    client.create(NODEPOOLS, nodepool("general", GENERAL))
    yield client
    reset_connections()


def wait_for(what: str, check: Callable[[], bool], timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def pod(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"containers": [_container()], **spec},
    }


def deployment(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [_container()], **spec},
            },
        },
    }


def _container() -> dict[str, Any]:
    return {
        "name": "c",
        "image": "public.ecr.aws/docker/library/busybox",
        "resources": {"requests": {"cpu": "500m"}},
    }


def zone_term(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": labels.ZONE}


def node_zones(kube: Any) -> dict[str, str]:
    return {n["metadata"]["name"]: n["metadata"]["labels"][labels.ZONE] for n in kube.list(NODES)}


def pods_by_app(kube: Any) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for item in kube.list(PODS, namespace="default"):
        found.setdefault(item["metadata"]["labels"]["app"], []).append(item)
    return found


def versions(kube: Any) -> dict[str, str]:
    objects = [*kube.list(PODS, namespace="default"), *kube.list(NODES), *kube.list(NODECLAIMS)]
    return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in objects}


def test_zone_rules_plan_and_bind_end_to_end(kube: Any, sandbox: Any) -> None:
    first_zone = sandbox.zones[0]
    pinned = {"nodeAffinity": _required_zone(first_zone)}
    kube.create(PODS, pod("db", "db", affinity=pinned), namespace="default")
    kube.create(
        DEPLOYMENTS,
        deployment(
            "web",
            3,
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [zone_term("db")]}},
        ),
        namespace="default",
    )
    kube.create(
        PODS,
        pod(
            "lonely",
            "lonely",
            affinity={
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [zone_term("db")]}
            },
        ),
        namespace="default",
    )
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": labels.ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
        ],
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": labels.ZONE, "operator": "In", "values": [first_zone]}
                            ]
                        },
                    }
                ]
            }
        },
    }
    kube.create(DEPLOYMENTS, deployment("spread", 6, **spread), namespace="default")
    wait_for("11 unschedulable pods", lambda: len(kube.list_pending_pods()) == 11)

    before = versions(kube)
    printed = io.StringIO()
    from nodewright.cli import main

    with contextlib.redirect_stdout(printed):
        assert main(["plan", "--kubeconfig", str(sandbox.kubeconfig_path), "--json"]) == 0
    planned = json.loads(printed.getvalue())
    assert planned["pods"] == 11
    assert planned["pending"] == {}
    assert planned["region"] == {"name": sandbox.region, "from": "AWS_REGION"}
    assert versions(kube) == before, "plan --kubeconfig wrote to the cluster"
    planned_zone = {pod: c["zones"] for c in planned["nodeClaims"] for pod in c["pods"]}
    spread_zones = Counter(z for pod, zs in planned_zone.items() if "/spread-" in pod for z in zs)
    assert spread_zones == dict.fromkeys(sandbox.zones, 2)  # 2/2/2: the preference narrows no domain
    assert all(planned_zone[p] == [first_zone] for p in planned_zone if "/web-" in p or p == "default/db")
    assert first_zone not in planned_zone["default/lonely"]

    app = load_function("provisioner")
    result = app.handler(
        {**SCHEDULED_EVENT, "id": str(uuid.uuid4())}, LambdaContext(loop.SAFETY_MARGIN_SECONDS + 8)
    )
    assert result["launched"] >= 1

    def all_running() -> bool:
        return (
            sum(1 for p in kube.list(PODS, namespace="default") if p["status"].get("phase") == "Running")
            == 11
        )

    wait_for("every planned pod bound and Running", all_running)
    zones = node_zones(kube)
    apps = pods_by_app(kube)
    zone_of = {app: [zones[p["spec"]["nodeName"]] for p in items] for app, items in apps.items()}
    assert zone_of["db"] == [first_zone]
    assert set(zone_of["web"]) == {first_zone}  # affinity followed the constrained target
    assert zone_of["lonely"][0] != first_zone  # anti-affinity kept it out of db's zone
    # Where the spread pods bind is kube-scheduler's choice among the nodes registered so far (its
    # domains are the nodes'): the plan's 2/2/2 above is the part this product decides.
    assert len(zone_of["spread"]) == 6


def _required_zone(zone: str) -> dict[str, Any]:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": labels.ZONE, "operator": "In", "values": [zone]}]}
            ]
        }
    }
