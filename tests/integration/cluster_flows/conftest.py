"""Fixtures for the cluster, termination and interruption tests: a fresh API emulator per test.

The emulator is a bare API server (no scheduler, kubelet or controllers), so the tests play those
parts explicitly: ``World`` creates bound Running pods, sets PodDisruptionBudget status as the PDB
controller would, and ``kubelet_confirm`` finishes graceful deletions as a kubelet does. The shared
``FakeClock`` (``tests/fakes.py``) runs those "controller" callbacks when the code under test
sleeps, so drains that wait for a PDB run in milliseconds without real sleeps. EC2 is the shared
``FakeCloudProvider``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from fakes import FakeClock, FakeCloudProvider
from nodewright import observability
from nodewright.cloud.pricetable import PriceTable
from nodewright.cluster import Cluster, auth
from nodewright.cluster.resources import NODECLAIMS, NODES, PDBS, PODS
from nodewright.context import ContainerContext, Context
from nodewright.interruption.processing import InterruptionProcessor
from nodewright.settings import Settings

from sandbox.runtime.lambdas import load_function
from sandbox.shared_data import REPO_ROOT

from .interruption_support import INSTANCE

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class World:
    """Builders for the objects a drain meets, created through the real client."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def node(
        self,
        name: str,
        instance_id: str,
        *,
        zone: str = "us-west-2a",
        instance_type: str = "m5.large",
        capacity_type: str = "spot",
    ) -> dict[str, Any]:
        self.cluster.create(
            NODES,
            {
                "metadata": {
                    "name": name,
                    "labels": {
                        "karpenter.sh/nodepool": "default",
                        "node.kubernetes.io/instance-type": instance_type,
                        "topology.kubernetes.io/zone": zone,
                        "karpenter.sh/capacity-type": capacity_type,
                    },
                    "finalizers": ["karpenter.sh/termination"],
                },
                "spec": {"providerID": f"aws:///{zone}/{instance_id}"},
            },
        )
        return self.cluster.get_node(name)

    def nodeclaim(
        self, name: str, instance_id: str, node_name: str | None, *, zone: str = "us-west-2a", **spec: Any
    ) -> dict[str, Any]:
        self.cluster.create_nodeclaim(
            {
                "metadata": {
                    "name": name,
                    "labels": {"karpenter.sh/nodepool": "default"},
                    "finalizers": ["karpenter.sh/termination"],
                },
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                    **spec,
                },
            }
        )
        status: dict[str, Any] = {"providerID": f"aws:///{zone}/{instance_id}"}
        if node_name:
            status["nodeName"] = node_name
        return self.cluster.patch_nodeclaim_status(name, status)

    def pod(
        self,
        name: str,
        node: str,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        owner_kind: str = "ReplicaSet",
        priority_class: str | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        grace: int = 30,
        namespace: str = "default",
        started: datetime | None = None,
        volumes: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A bound Running pod; ``started``: the kubelet's ``status.startTime``."""
        spec: dict[str, Any] = {
            "nodeName": node,
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "app", "image": "public.ecr.aws/docker/library/busybox:1.36"}],
        }
        if priority_class:
            spec["priorityClassName"] = priority_class
        if tolerations:
            spec["tolerations"] = tolerations
        if volumes:
            spec["volumes"] = volumes
        self.cluster.create(
            PODS,
            {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": labels or {"app": name},
                    "annotations": annotations or {},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": owner_kind,
                            "name": f"{name}-owner",
                            "uid": f"uid-{name}",
                        }
                    ],
                },
                "spec": spec,
            },
        )
        status: dict[str, Any] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        if started is not None:
            status["startTime"] = started.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self.cluster.patch(PODS, name, {"status": status}, namespace=namespace, subresource="status")

    def pdb(self, name: str, match_labels: dict[str, str], allowed: int, namespace: str = "default") -> None:
        created = self.cluster.create(
            PDBS,
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"selector": {"matchLabels": match_labels}, "maxUnavailable": 1},
            },
        )
        self.set_pdb_allowed(
            name, allowed, generation=created["metadata"].get("generation", 1), namespace=namespace
        )

    def set_pdb_allowed(
        self, name: str, allowed: int, *, generation: int = 1, namespace: str = "default"
    ) -> None:
        """What the PDB controller would write."""
        self.cluster.patch(
            PDBS,
            name,
            {
                "status": {
                    "observedGeneration": generation,
                    "disruptionsAllowed": allowed,
                    "currentHealthy": 1 + allowed,
                    "desiredHealthy": 1,
                    "expectedPods": 1 + allowed,
                }
            },
            namespace=namespace,
            subresource="status",
        )

    def kubelet_confirm(self) -> None:
        """Finish every graceful pod deletion, as the kubelet does once containers stopped."""
        for pod in self.cluster.list_pods():
            if pod["metadata"].get("deletionTimestamp"):
                self.cluster.delete_pod(
                    pod["metadata"]["namespace"], pod["metadata"]["name"], grace_period_seconds=0
                )

    def pod_names(self, node: str | None = None) -> list[str]:
        pods = self.cluster.list_pods_on_node(node) if node else self.cluster.list_pods()
        return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


@pytest.fixture
def apiserver(tmp_path: Any) -> Iterator[Any]:
    """The API emulator, with kube-controller-manager's ServiceAccounts beside it (without them no
    pod is admitted, as on a real cluster)."""
    from sandbox.apiserver import ApiServer
    from sandbox.simulators import Kube, ServiceAccounts, api_client_from_kubeconfig

    server = ApiServer("127.0.0.1", port=0).start()
    admin = api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "admin-kubeconfig"))
    try:
        with ServiceAccounts(Kube(admin)):
            yield server
    finally:
        admin.close()
        server.stop()


@pytest.fixture
def kubeconfig(apiserver: Any, tmp_path: Any) -> str:
    return str(apiserver.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
def cluster(kubeconfig: str) -> Iterator[Cluster]:
    from kubernetes.client import ApiClient

    from sandbox.install import rbac_namespaces

    api = ApiClient(auth.kubeconfig_configuration(kubeconfig))
    cluster = Cluster(api)
    for namespace in rbac_namespaces():  # the writers' Lease namespace, as deploy/rbac.yaml creates it
        cluster.request("POST", "/api/v1/namespaces", body=namespace)
    yield cluster
    api.close()


@pytest.fixture
def crds(cluster: Cluster) -> None:
    """The project's CRDs (NodePool, NodeClaim, EC2NodeClass), served before the test starts."""
    for file in sorted((REPO_ROOT / "crds").glob("*.yaml")):
        for crd in yaml.safe_load_all(file.read_text()):
            if crd:
                cluster.request("POST", CRD_PATH, body=crd)
    cluster.list(NODECLAIMS)  # served (raises NotFound otherwise)


@pytest.fixture
def world(cluster: Cluster, crds: None) -> World:
    return World(cluster)


@pytest.fixture
def clock(world: World) -> FakeClock:
    fake = FakeClock(datetime.now(UTC))  # the emulator stamps objects with the real time
    fake.ticks.append(world.kubelet_confirm)
    return fake


@pytest.fixture
def cloud(clock: FakeClock) -> FakeCloudProvider:
    """The shared price table holds what the price-refresh function would have stored."""
    prices = PriceTable(on_demand={"m5.large": 0.096}, spot={("m5.large", "us-west-2a"): 0.0341})
    return FakeCloudProvider(clock, prices=prices)


@pytest.fixture
def settings(kubeconfig: str) -> Settings:
    return Settings(cluster_name="sandbox", region="us-west-2", kubeconfig=kubeconfig)


@pytest.fixture
def ctx(settings: Settings, cluster: Cluster, cloud: FakeCloudProvider, clock: FakeClock) -> Context:
    return Context(
        settings=settings,
        cluster=cluster,
        cloud=cloud,
        store=None,
        logger=observability.logger(),
        metrics=observability.metrics(),
        clock=clock,
    )


@pytest.fixture
def owned_node(world) -> None:
    world.node("node-a", INSTANCE)
    world.nodeclaim("default-a", INSTANCE, "node-a")
    world.pod("web-1", "node-a", labels={"app": "web"})


@pytest.fixture
def make_processor(ctx, settings):
    """A processor like the container's, on the test's cluster (``state``: idempotency on the table)."""

    def build(replacement, *, state: bool) -> InterruptionProcessor:
        configured = replace(settings, state_table="nodewright-state" if state else None)
        container = ContainerContext(logger=ctx.logger, metrics=ctx.metrics, settings=configured, context=ctx)
        return InterruptionProcessor(container, replace=replacement)

    return build


@pytest.fixture
def functions():
    """Both handler modules, fresh: each holds its own container and processor, as in Lambda."""
    return load_function("interruption"), load_function("spot_events")
