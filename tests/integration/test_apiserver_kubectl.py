"""The Kubernetes API emulator driven by the real kubectl (client-side apply, cordon, drain, patch)."""

from __future__ import annotations

import json
import shutil
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import KUBECTL, DeletionConfirmer, kubectl
from sandbox.shared_data import REPO_ROOT
from sandbox.simulators import Kube, ServiceAccounts

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not shutil.which(KUBECTL),
        reason="kubectl is not installed (make installs Debian's kubernetes-client)",
    ),
]

GIZMO_CRD = textwrap.dedent(
    """
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: gizmos.kubectl.nodewright.dev
    spec:
      group: kubectl.nodewright.dev
      scope: Namespaced
      names: {plural: gizmos, singular: gizmo, kind: Gizmo, shortNames: [gz]}
      versions:
      - name: v1
        served: true
        storage: true
        subresources: {status: {}}
        additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties:
                  size: {type: integer}
                  color: {type: string}
    """
)


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def kubeconfig(server: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")


@pytest.fixture(scope="module")
def core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))


@pytest.fixture(scope="module", autouse=True)
def accounts(core: client.CoreV1Api) -> Iterator[ServiceAccounts]:
    """kube-controller-manager's ServiceAccounts beside the server: without them no pod is admitted."""
    with ServiceAccounts(Kube(core.api_client)) as controller:
        yield controller


@pytest.fixture
def ns(core: client.CoreV1Api, accounts: ServiceAccounts) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    accounts.wait_for(name)
    return name


def ok(result: object) -> str:
    assert result.returncode == 0, f"kubectl failed ({result.returncode}): {result.stderr}"  # type: ignore[attr-defined]
    return result.stdout  # type: ignore[attr-defined]


def test_kubectl_talks_to_the_server(kubeconfig: Path) -> None:
    version = json.loads(ok(kubectl(kubeconfig, "version", "-o", "json")))
    assert version["serverVersion"]["gitVersion"].startswith("v1.")
    resources = ok(kubectl(kubeconfig, "api-resources"))
    for expected in (
        "pods",
        "nodes",
        "leases",
        "poddisruptionbudgets",
        "customresourcedefinitions",
        "deployments",
    ):
        assert expected in resources


def test_get_nodes_and_pods_prints_tables(kubeconfig: Path, core: client.CoreV1Api, ns: str) -> None:
    node = f"n-{uuid.uuid4().hex[:6]}"
    core.create_node(
        {"metadata": {"name": node}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    core.create_namespaced_pod(
        ns, {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    )
    out = ok(kubectl(kubeconfig, "get", "nodes,pods", "-n", ns))
    assert f"node/{node}" in out
    assert "Ready" in out
    assert "pod/web" in out
    assert "Pending" in out
    assert "NAME" in out
    assert "STATUS" in out


def test_apply_pod_then_reapply_a_change_uses_strategic_merge(
    kubeconfig: Path, core: client.CoreV1Api, ns: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "app", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
    }
    manifest.write_text(json.dumps(pod))
    assert "pod/app created" in ok(kubectl(kubeconfig, "apply", "-n", ns, "-f", str(manifest)))
    assert "pod/app unchanged" in ok(kubectl(kubeconfig, "apply", "-n", ns, "-f", str(manifest)))
    pod["metadata"]["labels"] = {"b": "2"}
    pod["spec"]["containers"][0]["image"] = "nginx:1.28"
    manifest.write_text(json.dumps(pod))
    assert "pod/app configured" in ok(kubectl(kubeconfig, "apply", "-n", ns, "-f", str(manifest)))
    live = core.read_namespaced_pod("app", ns)
    assert live.metadata.labels == {"b": "2"}
    assert live.spec.containers[0].image == "nginx:1.28"
    assert "kubectl.kubernetes.io/last-applied-configuration" in live.metadata.annotations


def test_apply_crd_then_custom_object(kubeconfig: Path, ns: str, tmp_path: Path) -> None:
    crd = tmp_path / "crd.yaml"
    crd.write_text(GIZMO_CRD)
    assert "created" in ok(kubectl(kubeconfig, "apply", "-f", str(crd)))
    gizmo = tmp_path / "gizmo.yaml"
    gizmo.write_text(
        "apiVersion: kubectl.nodewright.dev/v1\nkind: Gizmo\nmetadata: {name: g1}\n"
        "spec: {size: 3, color: red}\n"
    )
    assert "gizmo.kubectl.nodewright.dev/g1 created" in ok(
        kubectl(kubeconfig, "apply", "-n", ns, "-f", str(gizmo))
    )
    gizmo.write_text(
        "apiVersion: kubectl.nodewright.dev/v1\nkind: Gizmo\nmetadata: {name: g1}\nspec: {size: 4}\n"
    )
    assert "configured" in ok(kubectl(kubeconfig, "apply", "-n", ns, "-f", str(gizmo)))
    got = json.loads(ok(kubectl(kubeconfig, "get", "gz", "g1", "-n", ns, "-o", "json")))
    assert got["spec"] == {"size": 4}  # the merge patch removed color, dropped from the applied config
    table = ok(kubectl(kubeconfig, "get", "gizmos", "-n", ns))
    # A CRD with printer columns gets exactly those after Name; Age is only the default of a CRD without
    # any (apiextensions-apiserver serveDefaultColumnsIfEmpty).
    assert table.splitlines()[0].split() == ["NAME", "SIZE"]
    assert table.splitlines()[1].split()[:2] == ["g1", "4"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kubectl.nodewright.dev/v1\nkind: Gizmo\nmetadata: {name: g2}\n"
        "spec: {size: 1, shape: round}\n"
    )
    result = kubectl(kubeconfig, "apply", "-n", ns, "-f", str(bad))
    assert result.returncode != 0
    assert 'unknown field "spec.shape"' in result.stderr


def test_patch_kinds_and_invalid_json_patch(kubeconfig: Path, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "p", "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        },
    )
    ok(kubectl(kubeconfig, "patch", "pod", "p", "-n", ns, "-p", '{"metadata":{"labels":{"y":"2"}}}'))
    ok(
        kubectl(
            kubeconfig,
            "patch",
            "pod",
            "p",
            "-n",
            ns,
            "--type=merge",
            "-p",
            '{"metadata":{"labels":{"x":null}}}',
        )
    )
    assert core.read_namespaced_pod("p", ns).metadata.labels == {"y": "2"}
    result = kubectl(
        kubeconfig,
        "patch",
        "pod",
        "p",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"test","path":"/metadata/labels/y","value":"3"}]',
    )
    assert result.returncode != 0
    assert "test failed" in result.stderr
    result = kubectl(kubeconfig, "get", "pod", "missing", "-n", ns)
    assert result.returncode != 0
    assert 'pods "missing" not found' in result.stderr


def test_delete_and_label_selector(kubeconfig: Path, core: client.CoreV1Api, ns: str) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": name, "labels": {"tier": tier}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            },
        )
    assert ok(kubectl(kubeconfig, "get", "pods", "-n", ns, "-l", "tier=x", "-o", "name")).split() == [
        "pod/a",
        "pod/b",
    ]
    out = ok(kubectl(kubeconfig, "delete", "pods", "-n", ns, "-l", "tier=x", "--timeout=10s"))
    assert 'pod "a" deleted' in out
    assert 'pod "b" deleted' in out
    assert ok(kubectl(kubeconfig, "get", "pods", "-n", ns, "-o", "name")).split() == ["pod/c"]


def _running_pod_on(
    core: client.CoreV1Api, ns: str, name: str, node: str, labels: dict[str, str], **extra: object
) -> None:
    spec = {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}], **extra.pop("spec", {})}  # type: ignore[dict-item]
    core.create_namespaced_pod(ns, {"metadata": {"name": name, "labels": labels, **extra}, "spec": spec})
    core.patch_namespaced_pod_status(
        name, ns, {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    )


def test_cordon_and_drain_with_a_pdb_blocked_then_allowed(
    kubeconfig: Path, core: client.CoreV1Api, ns: str
) -> None:
    apps = client.AppsV1Api(core.api_client)
    policy = client.PolicyV1Api(core.api_client)
    node = f"drain-{uuid.uuid4().hex[:6]}"
    core.create_node(
        {"metadata": {"name": node}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    assert f"node/{node} cordoned" in ok(kubectl(kubeconfig, "cordon", node))
    assert core.read_node(node).spec.unschedulable is True
    assert "SchedulingDisabled" in ok(kubectl(kubeconfig, "get", "node", node))
    ok(kubectl(kubeconfig, "uncordon", node))
    assert not core.read_node(node).spec.unschedulable

    template = {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [{"name": "c", "image": "agent"}]},
    }
    ds = apps.create_namespaced_daemon_set(
        ns,
        {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template},
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": "agent",
        "uid": ds.metadata.uid,
        "controller": True,
    }
    _running_pod_on(core, ns, "agent-x", node, {"app": "agent"}, ownerReferences=[owner])
    _running_pod_on(core, ns, "web-1", node, {"app": "web"})
    _running_pod_on(core, ns, "web-2", "elsewhere", {"app": "web"})
    _running_pod_on(
        core, ns, "scratch", node, {"app": "scratch"}, spec={"volumes": [{"name": "tmp", "emptyDir": {}}]}
    )
    pdb = policy.create_namespaced_pod_disruption_budget(
        ns,
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    status = {
        "observedGeneration": pdb.metadata.generation,
        "currentHealthy": 2,
        "desiredHealthy": 2,
        "expectedPods": 2,
        "disruptionsAllowed": 0,
    }
    policy.patch_namespaced_pod_disruption_budget_status("web", ns, {"status": status})

    args = ("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=3s")
    with DeletionConfirmer(core):
        blocked = kubectl(kubeconfig, *args)
        assert blocked.returncode != 0
        assert "Cannot evict pod as it would violate the pod's disruption budget." in blocked.stderr
        assert core.read_namespaced_pod("web-1", ns).metadata.deletion_timestamp is None
        assert core.read_node(node).spec.unschedulable is True
        policy.patch_namespaced_pod_disruption_budget_status(
            "web", ns, {"status": {**status, "desiredHealthy": 1, "disruptionsAllowed": 1}}
        )
        allowed = kubectl(
            kubeconfig,
            "drain",
            node,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
            "--timeout=30s",
        )
    out = ok(allowed)
    assert f"node/{node} drained" in out
    remaining = sorted(
        p.metadata.name for p in core.list_namespaced_pod(ns, field_selector=f"spec.nodeName={node}").items
    )
    assert remaining == ["agent-x"]  # the DaemonSet pod stays, as with the real drain


def test_project_crds_apply_and_serve_their_kinds(kubeconfig: Path, tmp_path: Path) -> None:
    crds = REPO_ROOT / "crds"
    if not crds.is_dir() or not list(crds.glob("*.yaml")):
        pytest.skip("the project's CRDs (crds/*.yaml) are not there yet")
    out = ok(kubectl(kubeconfig, "apply", "-f", str(crds)))
    assert out.count("created") + out.count("unchanged") + out.count("configured") == len(
        list(crds.glob("*.yaml"))
    )
    result = kubectl(kubeconfig, "get", "nodepools,nodeclaims,ec2nodeclasses")
    assert result.returncode == 0, result.stderr
    claim = tmp_path / "claim.yaml"
    claim.write_text(
        textwrap.dedent(
            """
            apiVersion: karpenter.sh/v1
            kind: NodeClaim
            metadata:
              name: default-abc12
              labels: {node.kubernetes.io/instance-type: m5.large, karpenter.sh/capacity-type: spot}
            spec:
              nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
              requirements: []
            """
        )
    )
    ok(kubectl(kubeconfig, "apply", "-f", str(claim)))
    header, row = ok(kubectl(kubeconfig, "get", "nodeclaims")).splitlines()
    assert header.split()[:3] == ["NAME", "TYPE", "CAPACITY"]
    assert row.split()[:3] == ["default-abc12", "m5.large", "spot"]


def test_scale_a_deployment(kubeconfig: Path, core: client.CoreV1Api, ns: str) -> None:
    apps = client.AppsV1Api(core.api_client)
    template = {
        "metadata": {"labels": {"app": "inflate"}},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }
    spec = {"replicas": 0, "selector": {"matchLabels": {"app": "inflate"}}, "template": template}
    apps.create_namespaced_deployment(ns, {"metadata": {"name": "inflate"}, "spec": spec})
    assert "deployment.apps/inflate scaled" in ok(
        kubectl(kubeconfig, "scale", "deploy/inflate", "-n", ns, "--replicas=5")
    )
    deploy = apps.read_namespaced_deployment("inflate", ns)
    assert deploy.spec.replicas == 5
    assert deploy.metadata.generation == 2
    assert apps.read_namespaced_deployment_scale("inflate", ns).spec.replicas == 5


def test_imperative_create_of_namespace_and_configmap(kubeconfig: Path, core: client.CoreV1Api) -> None:
    """kubectl sends these as protobuf."""
    name = f"imp-{uuid.uuid4().hex[:6]}"
    assert f"namespace/{name} created" in ok(kubectl(kubeconfig, "create", "namespace", name))
    assert core.read_namespace(name).metadata.labels == {"kubernetes.io/metadata.name": name}
    ok(kubectl(kubeconfig, "create", "configmap", "cm", "-n", name, "--from-literal=a=b"))
    assert core.read_namespaced_config_map("cm", name).data == {"a": "b"}


def test_kubectl_create_generators_and_run_send_protobuf_that_is_decoded(
    kubeconfig: Path, core: client.CoreV1Api
) -> None:
    """Every built-in kind kubectl's generators send as protobuf arrives whole, as JSON would."""
    ns = f"gen-{uuid.uuid4().hex[:6]}"
    ok(kubectl(kubeconfig, "create", "namespace", ns))
    # As a kubectl user does before creating pods in a new namespace: its default ServiceAccount.
    ok(kubectl(kubeconfig, "wait", "--for=create", "serviceaccount/default", "-n", ns, "--timeout=30s"))
    image = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"
    ok(
        kubectl(
            kubeconfig,
            "create",
            "deployment",
            "web",
            "-n",
            ns,
            f"--image={image}",
            "--replicas=0",
            "--port=80",
        )
    )
    deployment = json.loads(ok(kubectl(kubeconfig, "get", "deployment", "web", "-n", ns, "-o", "json")))
    assert deployment["spec"]["replicas"] == 0  # an explicit zero survives the wire
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == image
    assert (container["ports"][0]["containerPort"], container["ports"][0]["protocol"]) == (80, "TCP")
    ok(kubectl(kubeconfig, "create", "job", "once", "-n", ns, f"--image={image}", "--", "sleep", "5"))
    job = json.loads(ok(kubectl(kubeconfig, "get", "--raw", f"/apis/batch/v1/namespaces/{ns}/jobs/once")))
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["sleep", "5"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    ok(kubectl(kubeconfig, "create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080"))
    port = core.read_namespaced_service("web", ns).spec.ports[0]
    assert (port.port, port.target_port, port.protocol) == (80, 8080, "TCP")
    ok(kubectl(kubeconfig, "create", "secret", "generic", "s", "-n", ns, "--from-literal=k=v"))
    assert core.read_namespaced_secret("s", ns).data == {"k": "dg=="}
    ok(
        kubectl(
            kubeconfig, "run", "one", "-n", ns, f"--image={image}", "--labels=a=b", "--env=X=1", "--", "x"
        )
    )
    pod = core.read_namespaced_pod("one", ns)
    assert pod.metadata.labels == {"a": "b"}
    assert (pod.spec.containers[0].env[0].name, pod.spec.containers[0].env[0].value) == ("X", "1")
    assert pod.spec.containers[0].args == ["x"]
    assert pod.spec.restart_policy == "Always"
