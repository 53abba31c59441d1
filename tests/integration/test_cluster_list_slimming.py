"""Listed pods and nodes leave out what no flow reads, and keep everything a flow does read.

A 50,000-pod cluster must fit the provisioner's 512 MB (``nodewright bench pass``): the client drops
managedFields, container statuses, env, commands, probes and a node's image list as each page is
decoded; a ``get`` still answers the whole object.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import config
from nodewright.cluster import Cluster
from nodewright.cluster.resources import NODES, PODS, Resource

from sandbox.apiserver import ApiServer

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with ApiServer() as server:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        api = config.new_client_from_config(str(Path(path)))
        yield Cluster(api)
        api.close()


def test_a_listed_pod_keeps_what_the_flows_read_and_drops_the_rest(cluster: Cluster) -> None:
    cluster.create(SERVICE_ACCOUNTS, {"metadata": {"name": "default", "namespace": "default"}}, "default")
    cluster.create(
        PODS,
        {
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"app": "web"},
                "annotations": {
                    "karpenter.sh/do-not-disrupt": "true",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}" * 500,
                },
            },
            "spec": {
                "automountServiceAccountToken": False,
                "nodeName": "node-a",
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [
                    {
                        "name": "web",
                        "image": "public.ecr.aws/nginx/nginx:1.27",
                        "env": [{"name": "MODE", "value": "x" * 1000}],
                        "command": ["nginx"],
                        "ports": [{"containerPort": 80, "hostPort": 8080}],
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                    }
                ],
            },
        },
        "default",
    )

    (listed,) = cluster.list_pods("default")
    whole = cluster.get(PODS, "web", "default")

    assert "managedFields" in whole["metadata"], "a get answers the whole object"
    assert "managedFields" not in listed["metadata"]
    assert listed["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    container = listed["spec"]["containers"][0]
    assert "env" not in container
    assert "command" not in container
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}}
    assert container["ports"][0]["hostPort"] == 8080
    assert listed["spec"]["nodeName"] == "node-a"
    assert listed["spec"]["tolerations"][0]["key"] == "gpu"
    assert listed["metadata"]["labels"] == {"app": "web"}


def test_a_listed_node_keeps_its_labels_without_managed_fields(cluster: Cluster) -> None:
    cluster.create(NODES, {"metadata": {"name": "node-b", "labels": {"zone": "a"}}, "spec": {}})
    node = next(n for n in cluster.list_nodes() if n["metadata"]["name"] == "node-b")
    assert "managedFields" not in node["metadata"]
    assert node["metadata"]["labels"] == {"zone": "a"}
