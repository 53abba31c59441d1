"""kube-apiserver behaviours the emulator reproduces, one test each (the source of each is named)."""

from __future__ import annotations

import functools
import json
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from waiting import wait_for

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import KUBECTL, kubectl
from sandbox.simulators import Kube, ServiceAccounts

pytestmark = pytest.mark.timeout(60)
needs_kubectl = pytest.mark.skipif(not shutil.which(KUBECTL), reason="kubectl is not installed")
POD = {"containers": [{"name": "c", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7"}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, Path]]:
    with ApiServer(watch_history=20) as srv:
        yield srv, srv.write_kubeconfig(tmp_path_factory.mktemp("fidelity") / "kubeconfig")


@pytest.fixture
def kube(server) -> Iterator[Kube]:
    api = config.new_client_from_config(config_file=str(server[1]))
    yield Kube(api)
    api.close()


@pytest.fixture(scope="module", autouse=True)
def accounts(server) -> Iterator[ServiceAccounts]:
    """kube-controller-manager's ServiceAccounts beside the server: without them no pod is admitted."""
    api = config.new_client_from_config(config_file=str(server[1]))
    with ServiceAccounts(Kube(api)) as controller:
        yield controller
    api.close()


@pytest.fixture
def ns(kube: Kube, accounts: ServiceAccounts) -> str:
    name = f"f-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    accounts.wait_for(name)
    return name


def status_of(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def test_a_binding_named_differently_from_its_pod_is_a_bad_request(kube: Kube, ns: str) -> None:
    kube.create(f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "p"}, "spec": POD})
    with pytest.raises(ApiException) as refused:
        kube.create(
            f"/api/v1/namespaces/{ns}/pods/p/binding",
            {"metadata": {"name": "other"}, "target": {"kind": "Node", "name": "n1"}},
        )
    assert refused.value.status == 400
    assert status_of(refused.value)["message"] == "name in URL does not match name in Binding object"


def test_an_event_in_another_namespace_than_its_object_is_invalid(kube: Kube, ns: str) -> None:
    event = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Test",
        "message": "m",
    }
    with pytest.raises(ApiException) as refused:
        kube.create(f"/api/v1/namespaces/{ns}/events", event)
    assert refused.value.status == 422
    cause = status_of(refused.value)["details"]["causes"][0]
    assert cause == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "default": does not match event.namespace',
        "field": "involvedObject.namespace",
    }
    created = kube.create(
        f"/api/v1/namespaces/{ns}/events",
        {**event, "involvedObject": {"kind": "Pod", "name": "p", "namespace": ns}},
    )
    # Fields core/v1 Event serialises without omitempty.
    assert (created["reportingComponent"], created["reportingInstance"], created["eventTime"]) == (
        "",
        "",
        None,
    )


def test_an_update_without_resource_version_names_the_resource_in_details(kube: Kube) -> None:
    lease = {"metadata": {"name": "l1"}, "spec": {"holderIdentity": "a"}}
    kube.create("/apis/coordination.k8s.io/v1/namespaces/default/leases", lease)
    with pytest.raises(ApiException) as refused:
        kube.replace("/apis/coordination.k8s.io/v1/namespaces/default/leases/l1", lease)
    body = status_of(refused.value)
    assert refused.value.status == 422
    assert body["message"] == (
        'leases.coordination.k8s.io "l1" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        "must be specified for an update"
    )
    assert body["details"]["kind"] == "leases"


def test_removing_the_last_finalizer_answers_with_the_object_of_the_request(kube: Kube, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    kube.create(path, {"metadata": {"name": "cm", "finalizers": ["example.com/hold"]}, "data": {"a": "b"}})
    terminating = kube._call("DELETE", f"{path}/cm")
    assert terminating["metadata"]["deletionTimestamp"]
    answer = kube.patch(f"{path}/cm", {"metadata": {"finalizers": None}})
    assert answer["kind"] == "ConfigMap"  # not a Status
    assert "finalizers" not in answer["metadata"]
    assert answer["data"] == {"a": "b"}
    assert kube.get_or_none(f"{path}/cm") is None


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": POD},
        },
    }


def test_a_deployment_status_write_keeps_its_spec_and_labels_but_takes_annotations(
    kube: Kube, ns: str
) -> None:
    """pkg/registry/apps/deployment deploymentStatusStrategy: its reset fields are spec and
    metadata.labels; the deployment controller writes the revision annotation through /status
    so that the generation stays."""
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    kube.create(path, _deployment("web"))
    answer = kube.patch(
        f"{path}/web/status",
        {
            "metadata": {"labels": {"team": "b"}, "annotations": {"deployment.kubernetes.io/revision": "1"}},
            "spec": {"replicas": 5},
            "status": {"observedGeneration": 1},
        },
    )
    assert answer["metadata"]["labels"] == {"team": "a"}
    assert answer["metadata"]["annotations"] == {"deployment.kubernetes.io/revision": "1"}
    assert answer["spec"]["replicas"] == 1
    assert answer["status"]["observedGeneration"] == 1
    assert answer["metadata"]["generation"] == 1


def test_a_deployment_update_of_its_annotations_bumps_its_generation(kube: Kube, ns: str) -> None:
    """deploymentStrategy.PrepareForUpdate: annotations are copied to the ReplicaSets, so an
    annotation change is a new generation as a spec change is; a label change is not."""
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    kube.create(path, _deployment("api"))
    relabelled = kube.patch(f"{path}/api", {"metadata": {"labels": {"team": "b"}}})
    assert relabelled["metadata"]["generation"] == 1
    annotated = kube.patch(f"{path}/api", {"metadata": {"annotations": {"example.com/note": "x"}}})
    assert annotated["metadata"]["generation"] == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"orphanDependents": True, "propagationPolicy": "Foreground"},
            'propagationPolicy: Invalid value: "Foreground": '
            "orphanDependents and deletionPropagation cannot be both set",
        ),
        (
            {"propagationPolicy": "Sometimes"},
            'propagationPolicy: Unsupported value: "Sometimes": '
            'supported values: "Foreground", "Background", "Orphan", "nil"',
        ),
    ],
    ids=["both-set", "unknown-policy"],
)
def test_delete_options_are_validated_before_the_delete(
    kube: Kube, ns: str, options: dict[str, Any], message: str
) -> None:
    """apimachinery ValidateDeleteOptions, run by the DELETE handler for every kind."""
    path = f"/api/v1/namespaces/{ns}/configmaps"
    kube.create(path, {"metadata": {"name": "kept"}})
    with pytest.raises(ApiException) as caught:
        kube._call("DELETE", f"{path}/kept", body={"kind": "DeleteOptions", "apiVersion": "v1", **options})
    assert caught.value.status == 422
    assert status_of(caught.value)["message"] == f'DeleteOptions.meta.k8s.io "" is invalid: {message}'
    assert kube.get_or_none(f"{path}/kept") is not None


def test_a_node_and_a_host_path_get_the_fields_go_always_serialises(kube: Kube, ns: str) -> None:
    node = kube.create("/api/v1/nodes", {"metadata": {"name": f"n-{ns}"}})
    assert node["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert node["status"]["nodeInfo"]["kubeletVersion"] == ""
    assert set(node["status"]["nodeInfo"]) >= {
        "machineID",
        "osImage",
        "architecture",
        "containerRuntimeVersion",
    }
    spec = {**POD, "volumes": [{"name": "h", "hostPath": {"path": "/var/log"}}]}
    pod = kube.create(f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "h"}, "spec": spec})
    assert pod["spec"]["volumes"][0]["hostPath"] == {"path": "/var/log", "type": ""}


def test_a_watch_sees_deleted_with_the_previous_object_when_it_stops_matching(server, ns: str) -> None:
    api = config.new_client_from_config(config_file=str(server[1]))
    core = client.CoreV1Api(api)
    try:
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": "w", "labels": {"team": "a"}}, "data": {"v": "1"}}
        )
        rv = core.list_namespaced_config_map(ns).metadata.resource_version
        core.patch_namespaced_config_map("w", ns, {"metadata": {"labels": {"team": "b"}}, "data": {"v": "2"}})
        stream = watch.Watch().stream(
            core.list_namespaced_config_map,
            ns,
            resource_version=rv,
            label_selector="team=a",
            timeout_seconds=1,
        )
        events = [(e["type"], e["raw_object"]) for e in stream]
        now = core.read_namespaced_config_map("w", ns).metadata.resource_version
    finally:
        api.close()
    assert [kind for kind, _ in events] == ["DELETED"]
    gone = events[0][1]
    assert gone["metadata"]["labels"] == {"team": "a"}  # as it last matched
    assert gone["data"] == {"v": "1"}
    assert gone["metadata"]["resourceVersion"] == now  # with the event's resourceVersion


def test_a_watch_from_before_the_kept_history_gets_410_and_an_informer_relists(server, ns: str) -> None:
    """The watch cache keeps a bounded history per resource (20 changes here): older resource
    versions get 410 Gone, and the kubernetes client's informer pattern (relist, watch again) recovers."""
    api = config.new_client_from_config(config_file=str(server[1]))
    core = client.CoreV1Api(api)
    try:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "first"}})
        old = core.list_namespaced_config_map(ns).metadata.resource_version
        for i in range(25):
            core.create_namespaced_config_map(ns, {"metadata": {"name": f"c{i}"}})
        with pytest.raises(ApiException) as expired:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map, ns, resource_version=old, timeout_seconds=2
            ):
                pass
        assert expired.value.status == 410
        # The informer's answer to 410: relist, then watch from the list's resourceVersion.
        listed = core.list_namespaced_config_map(ns)
        assert len(listed.items) == 26
        seen: list[str] = []

        def add_one() -> None:
            time.sleep(0.3)
            core.create_namespaced_config_map(ns, {"metadata": {"name": "after"}})

        threading.Thread(target=add_one).start()
        for event in watch.Watch().stream(
            core.list_namespaced_config_map,
            ns,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=2,
        ):
            seen.append(f"{event['type']} {event['object'].metadata.name}")
        assert seen == ["ADDED after"]
    finally:
        api.close()


@needs_kubectl
def test_tables_have_the_real_wide_columns_and_honour_include_object(server, kube: Kube, ns: str) -> None:
    _, kubeconfig = server
    kube.create(f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "b"}, "spec": POD})
    kube.create(f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "a"}, "spec": POD})
    kube.create("/api/v1/nodes", {"metadata": {"name": f"wide-{ns}"}})
    wide = kubectl(kubeconfig, "get", "pods", "-n", ns, "-o", "wide").stdout.splitlines()[0]
    assert wide.split() == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
        "NODE",
        "READINESS",
        "GATES",
    ]
    nodes = kubectl(kubeconfig, "get", "nodes", "-o", "wide").stdout.splitlines()
    assert nodes[0].split()[5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    # --sort-by asks for includeObject=Object: sorting by a field outside the metadata works.
    by_image = kubectl(kubeconfig, "get", "pods", "-n", ns, "--sort-by=.spec.containers[0].image")
    assert by_image.returncode == 0, by_image.stderr
    table = kube._call(
        "GET", f"/api/v1/namespaces/{ns}/pods", query={"includeObject": "Object"}
    )  # plain JSON without the Table accept header
    assert table["kind"] == "PodList"


def crd(group: str, kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A cluster-scoped CRD serving (and storing) v1 with ``schema``."""
    plural = f"{kind.lower()}s"
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [version],
        },
    }


GIZMO_CRD = crd(
    "fidelity.nodewright.dev", "Gizmo", {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
)


# The suite's one wait (tests/waiting.py) on the emulator's background work: 5 s, every 0.05 s.
wait_until = functools.partial(wait_for, "the emulator's background work", timeout=5, every=0.05)


def test_a_crd_is_deleted_in_the_background_after_its_objects(kube: Kube) -> None:
    """apiextensions-apiserver: the customresourcecleanup finalizer and a Terminating condition hold
    the CRD while its objects are deleted (their own finalizers honoured); no new object meanwhile."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    gizmos = "/apis/fidelity.nodewright.dev/v1/gizmos"
    kube.create(crds, GIZMO_CRD)
    wait_until(lambda: kube.get_or_none(gizmos) is not None)
    kube.create(
        gizmos, {"apiVersion": "fidelity.nodewright.dev/v1", "kind": "Gizmo", "metadata": {"name": "free"}}
    )
    held = {"name": "held", "finalizers": ["fidelity.nodewright.dev/hold"]}
    kube.create(gizmos, {"apiVersion": "fidelity.nodewright.dev/v1", "kind": "Gizmo", "metadata": held})
    deleting = kube._call("DELETE", f"{crds}/{GIZMO_CRD['metadata']['name']}")
    assert "customresourcecleanup.apiextensions.k8s.io" in deleting["metadata"]["finalizers"]
    terminating = {c["type"]: c for c in deleting["status"]["conditions"]}["Terminating"]
    assert (terminating["status"], terminating["reason"]) == ("True", "InstanceDeletionInProgress")
    wait_until(lambda: kube.get_or_none(f"{gizmos}/free") is None)
    assert kube.get(f"{gizmos}/held")["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as refused:
        kube.create(
            gizmos,
            {"apiVersion": "fidelity.nodewright.dev/v1", "kind": "Gizmo", "metadata": {"name": "late"}},
        )
    assert refused.value.status == 405
    assert (
        status_of(refused.value)["message"]
        == "create not allowed while custom resource definition is terminating"
    )
    assert kube.get_or_none(f"{crds}/{GIZMO_CRD['metadata']['name']}") is not None
    kube.patch(
        f"{gizmos}/held", [{"op": "remove", "path": "/metadata/finalizers"}], "application/json-patch+json"
    )
    wait_until(lambda: kube.get_or_none(f"{crds}/{GIZMO_CRD['metadata']['name']}") is None)


def test_deleting_a_custom_object_answers_a_success_status_or_the_object_its_finalizers_hold(
    kube: Kube,
) -> None:
    """apiextensions-apiserver's store does not set ReturnDeletedObject: a custom object removed at once
    is answered with a ``Status`` (status Success, the object named in details); one that finalizers
    hold is answered with the object, now terminating."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    gizmos = "/apis/fidelity.nodewright.dev/v1/gizmos"
    if kube.get_or_none(f"{crds}/{GIZMO_CRD['metadata']['name']}") is None:
        kube.create(crds, GIZMO_CRD)
    wait_until(lambda: kube.get_or_none(gizmos) is not None)
    free = kube.create(
        gizmos, {"apiVersion": "fidelity.nodewright.dev/v1", "kind": "Gizmo", "metadata": {"name": "gone"}}
    )
    answer = kube._call("DELETE", f"{gizmos}/gone")
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": "gone",
            "group": "fidelity.nodewright.dev",
            "kind": "gizmos",
            "uid": free["metadata"]["uid"],
        },
    }
    held = {"name": "kept", "finalizers": ["fidelity.nodewright.dev/hold"]}
    kube.create(gizmos, {"apiVersion": "fidelity.nodewright.dev/v1", "kind": "Gizmo", "metadata": held})
    terminating = kube._call("DELETE", f"{gizmos}/kept")
    assert terminating["kind"] == "Gizmo"
    assert terminating["metadata"]["deletionTimestamp"]
    kube.patch(f"{gizmos}/kept", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    wait_until(lambda: kube.get_or_none(f"{gizmos}/kept") is None)


def test_pvs_and_pvcs_get_their_protection_finalizers_and_a_delete_returns_the_terminating_object(
    kube: Kube, ns: str
) -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    created = kube.create(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", claim)
    assert created["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    deleted = kube._call("DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
    assert deleted["kind"] == "PersistentVolumeClaim"
    assert deleted["metadata"]["deletionTimestamp"]
    volume = {
        "metadata": {"name": f"pv-{ns}"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/d"},
        },
    }
    assert kube.create("/api/v1/persistentvolumes", volume)["metadata"]["finalizers"] == [
        "kubernetes.io/pv-protection"
    ]


@needs_kubectl
def test_kubectl_explain_walks_the_openapi_v3_schemas_of_builtins_and_crds(server, kube: Kube) -> None:
    _, kubeconfig = server
    explained = kubectl(kubeconfig, "explain", "pod.spec.containers.resources")
    assert explained.returncode == 0, explained.stderr
    assert "FIELD: resources <ResourceRequirements>" in explained.stdout
    assert "limits\t<map[string]string>" in explained.stdout
    size = {"type": "integer", "description": "How big, in cubits."}
    spec = {"type": "object", "description": "What the widget should be.", "properties": {"size": size}}
    widget = crd("explain.nodewright.dev", "Widget", {"type": "object", "properties": {"spec": spec}})
    kube.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widget)
    wait_until(lambda: kube.get_or_none("/apis/explain.nodewright.dev/v1/widgets") is not None)
    explained = wait_until(lambda: (r := kubectl(kubeconfig, "explain", "widget.spec")).returncode == 0 and r)
    assert "What the widget should be." in explained.stdout
    assert "size\t<integer>" in explained.stdout
    assert "How big, in cubits." in explained.stdout


def test_openapi_v2_is_served_as_json(kube: Kube) -> None:
    document = kube.get("/openapi/v2")
    assert document["swagger"] == "2.0"
    pod = document["definitions"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
    spec = pod["properties"]["spec"]
    assert (
        spec.get("$ref", (spec.get("allOf") or [{}])[0].get("$ref"))
        == "#/definitions/io.k8s.api.core.v1.PodSpec"
    )
    assert "containers" in document["definitions"]["io.k8s.api.core.v1.PodSpec"]["required"]


MIN_VALUES_RULE = "!has(self.minValues) || self.minValues <= self.values.size()"
CEL_CRD = crd(
    "cel.nodewright.dev",
    "Pool",
    {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                # Rules in the style of Karpenter's NodePool CRD.
                "x-kubernetes-validations": [
                    {
                        "rule": MIN_VALUES_RULE,
                        "message": "minValues must be at most the number of values",
                    }
                ],
                "properties": {
                    "nodeClassRef": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {
                                "rule": "self == oldSelf",
                                "message": "nodeClassRef is immutable",
                            }
                        ],
                        "properties": {"name": {"type": "string"}},
                    },
                    "minValues": {"type": "integer"},
                    "values": {"type": "array", "items": {"type": "string"}},
                    "requirements": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "x-kubernetes-validations": [
                                {
                                    "rule": "self.key != 'karpenter.sh/nodepool'",
                                    "message": 'label "karpenter.sh/nodepool" is restricted',
                                }
                            ],
                            "properties": {"key": {"type": "string"}},
                        },
                    },
                },
            }
        },
    },
)


def test_crd_cel_rules_are_evaluated_with_self_and_old_self(kube: Kube) -> None:
    kube.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CEL_CRD)
    pools = "/apis/cel.nodewright.dev/v1/pools"
    wait_until(lambda: kube.get_or_none(pools) is not None)

    def pool(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "cel.nodewright.dev/v1",
            "kind": "Pool",
            "metadata": {"name": name},
            "spec": spec,
        }

    with pytest.raises(ApiException) as refused:
        kube.create(
            pools, pool("p1", requirements=[{"key": "karpenter.sh/nodepool"}], minValues=3, values=["a"])
        )
    body = status_of(refused.value)
    assert refused.value.status == 422
    fields = {cause["field"]: cause["message"] for cause in body["details"]["causes"]}
    assert fields == {
        "spec": 'Invalid value: "object": minValues must be at most the number of values',
        "spec.requirements[0]": 'Invalid value: "object": label "karpenter.sh/nodepool" is restricted',
    }
    created = kube.create(pools, pool("p1", nodeClassRef={"name": "a"}, minValues=1, values=["a"]))
    with pytest.raises(ApiException) as refused:  # a transition rule: only on update, against the old value
        kube.patch(f"{pools}/p1", {"spec": {"nodeClassRef": {"name": "b"}}})
    assert status_of(refused.value)["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "object": nodeClassRef is immutable',
        "field": "spec.nodeClassRef",
    }
    assert kube.patch(f"{pools}/p1", {"spec": {"values": ["a", "b"]}})["metadata"]["generation"] == 2
    assert created["spec"]["nodeClassRef"] == {"name": "a"}


CEL_ERRORS_CRD = crd(
    "celerrors.nodewright.dev",
    "Shape",
    {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    # Reads values without has(): an object with minValues and no values errors.
                    {"rule": "self.minValues <= self.values.size()", "message": "minValues too large"}
                ],
                "properties": {
                    "minValues": {"type": "integer"},
                    "values": {"type": "array", "items": {"type": "string"}},
                    "weight": {
                        "type": "integer",
                        "x-kubernetes-validations": [{"rule": "100 / self > 0"}],
                    },
                    "broken": {"type": "string", "x-kubernetes-validations": [{"rule": "self =="}]},
                    "taints": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["key"],
                        "items": {
                            "type": "object",
                            "x-kubernetes-validations": [
                                {
                                    "rule": "self.value == oldSelf.value",
                                    "message": "a taint's value is immutable",
                                }
                            ],
                            "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                        },
                    },
                },
            }
        },
    },
)


def test_a_cel_rule_that_fails_to_evaluate_rejects_the_write(kube: Kube) -> None:
    """kube-apiserver's validateExpressions: an evaluation error (a key read without has(), a division
    by zero) or a rule that does not compile is a 422 naming the rule, never a write let through; a
    transition rule on a listType=map item compares it with the old item of the same key."""
    kube.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CEL_ERRORS_CRD)
    shapes = "/apis/celerrors.nodewright.dev/v1/shapes"
    wait_until(lambda: kube.get_or_none(shapes) is not None)

    def refused(spec: dict[str, Any]) -> list[dict[str, Any]]:
        body = {"apiVersion": "celerrors.nodewright.dev/v1", "kind": "Shape", "metadata": {"name": "s"}}
        with pytest.raises(ApiException) as caught:
            kube.create(shapes, {**body, "spec": spec})
        assert caught.value.status == 422
        return status_of(caught.value)["details"]["causes"]  # type: ignore[no-any-return]

    assert refused({"minValues": 1}) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": no such key: values evaluating rule: minValues too large',
            "field": "spec",
        }
    ]
    assert refused({"minValues": 0, "values": [], "weight": 0}) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "integer": division by zero evaluating rule: 100 / self > 0',
            "field": "spec.weight",
        }
    ]
    (cause,) = refused({"minValues": 0, "values": [], "broken": "x"})
    assert cause["field"] == "spec.broken"
    assert cause["message"].startswith('Invalid value: "string": rule compile error: ')

    created = {
        "apiVersion": "celerrors.nodewright.dev/v1",
        "kind": "Shape",
        "metadata": {"name": "ok"},
        "spec": {"minValues": 0, "values": [], "taints": [{"key": "a", "value": "1"}]},
    }
    kube.create(shapes, created)
    with pytest.raises(ApiException) as caught:
        kube.patch(f"{shapes}/ok", {"spec": {"taints": [{"key": "a", "value": "2"}]}})
    assert status_of(caught.value)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": a taint\'s value is immutable',
            "field": "spec.taints[0]",
        }
    ]
    added = kube.patch(
        f"{shapes}/ok", {"spec": {"taints": [{"key": "a", "value": "1"}, {"key": "b", "value": "9"}]}}
    )
    assert [t["key"] for t in added["spec"]["taints"]] == ["a", "b"]  # a new item has no old value


def _deployment_yaml(name: str, replicas: int | None, image: str, env: bool = True) -> str:
    lines = [
        "apiVersion: apps/v1",
        "kind: Deployment",
        f"metadata: {{name: {name}, namespace: default}}",
        "spec:",
        f"  selector: {{matchLabels: {{app: {name}}}}}",
        "  template:",
        f"    metadata: {{labels: {{app: {name}}}}}",
        "    spec:",
        "      containers:",
        f"      - name: c\n        image: {image}",
    ]
    if env:
        lines.append("        env: [{name: MODE, value: fast}]")
    if replicas is not None:
        lines.insert(4, f"  replicas: {replicas}")
    return "\n".join(lines) + "\n"


@needs_kubectl
def test_server_side_apply_owns_fields_detects_conflicts_and_removes_what_is_no_longer_applied(
    server, kube: Kube
) -> None:
    _, kubeconfig = server
    image = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"
    path = "/apis/apps/v1/namespaces/default/deployments/ssa"
    applied = kubectl(
        kubeconfig, "apply", "--server-side", "-f", "-", stdin=_deployment_yaml("ssa", 2, image)
    )
    assert applied.returncode == 0, applied.stderr
    entries = kube.get(path)["metadata"]["managedFields"]
    [mine] = [e for e in entries if e["manager"] == "kubectl"]
    assert (mine["operation"], mine["apiVersion"], mine["fieldsType"]) == ("Apply", "apps/v1", "FieldsV1")
    spec = mine["fieldsV1"]["f:spec"]
    assert "f:replicas" in spec
    assert spec["f:selector"] == {}  # a label selector is atomic
    container = spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert {"f:image", "f:name", "f:env", "."} <= set(container)

    # Another manager changes replicas with a plain update: it owns the field now.
    kube.patch(f"{path}?fieldManager=autoscaler", {"spec": {"replicas": 5}})
    owners = {e["manager"]: e for e in kube.get(path)["metadata"]["managedFields"]}
    assert "f:replicas" in owners["autoscaler"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in owners["kubectl"]["fieldsV1"]["f:spec"]

    # Applying replicas again conflicts with that manager...
    conflicted = kubectl(
        kubeconfig, "apply", "--server-side", "-f", "-", stdin=_deployment_yaml("ssa", 3, image)
    )
    assert conflicted.returncode != 0
    assert 'conflict with "autoscaler" using apps/v1: .spec.replicas' in conflicted.stderr
    # ...unless forced, which takes the field over.
    forced = kubectl(
        kubeconfig,
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        "-",
        stdin=_deployment_yaml("ssa", 3, image),
    )
    assert forced.returncode == 0, forced.stderr
    live = kube.get(path)
    assert live["spec"]["replicas"] == 3
    assert "autoscaler" not in {e["manager"] for e in live["metadata"]["managedFields"]}

    # A field dropped from the applied configuration is removed (nobody else owns it).
    dropped = kubectl(
        kubeconfig, "apply", "--server-side", "-f", "-", stdin=_deployment_yaml("ssa", 3, image, env=False)
    )
    assert dropped.returncode == 0, dropped.stderr
    assert "env" not in kube.get(path)["spec"]["template"]["spec"]["containers"][0]


def test_an_apply_without_a_field_manager_is_invalid(kube: Kube) -> None:
    with pytest.raises(ApiException) as refused:
        kube.patch(
            "/api/v1/namespaces/default/configmaps/x", {"data": {"a": "b"}}, "application/apply-patch+yaml"
        )
    assert refused.value.status == 422
    assert "fieldManager: Required value: is required for apply patch" in status_of(refused.value)["message"]


@needs_kubectl
def test_kubectl_discovers_everything_from_the_aggregated_documents(server, tmp_path: Path) -> None:
    """kubectl (1.30+) asks /api and /apis for apidiscovery.k8s.io/v2 and needs no per-group request."""
    _, kubeconfig = server
    done = kubectl(kubeconfig, "get", "roles", "-A", "-v=6", "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    requested = [
        line.split("GET ", 1)[1].split("?")[0] for line in done.stderr.splitlines() if " GET " in line
    ]
    paths = [p.split("/", 3)[3] if p.startswith("https://") else p for p in requested]
    assert paths[:2] == ["api", "apis"]
    assert not [p for p in paths if p.startswith(("api/v1", "apis/")) and "roles" not in p]
    answer = Kube(config.new_client_from_config(config_file=str(kubeconfig)))
    raw = answer._call("GET", "/apis", query={})
    assert raw["kind"] == "APIGroupList"  # without the Accept header: the legacy form


def test_crd_stored_versions_are_written_through_status_and_checked_against_spec_versions(
    kube: Kube,
) -> None:
    """apiextensions ValidateCustomResourceDefinitionStoredVersions: a /status write sets
    storedVersions (a storage migration drops one that way); each must be a version of the CRD and
    the storage version must be among them; a spec write cannot drop a version still stored."""
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    widget = crd("fidelity.nodewright.dev", "Widget", {"type": "object"})
    v1beta1 = {**widget["spec"]["versions"][0], "name": "v1beta1", "storage": False}
    widget["spec"]["versions"].append(v1beta1)
    name = widget["metadata"]["name"]
    created = kube.create(crds, widget)
    assert created["status"]["storedVersions"] == ["v1"]

    written = kube.patch(f"{crds}/{name}/status", {"status": {"storedVersions": ["v1beta1", "v1"]}})
    assert written["status"]["storedVersions"] == ["v1beta1", "v1"]
    relabelled = kube.patch(f"{crds}/{name}", {"metadata": {"labels": {"a": "b"}}})
    assert relabelled["status"]["storedVersions"] == ["v1beta1", "v1"], "a spec write keeps them"

    for stored, message in (
        (["v2", "v1"], 'status.storedVersions[0]: Invalid value: "v2": must appear in spec.versions'),
        (["v1beta1"], "must have the storage version v1"),
        ([], "must have at least one stored version"),
    ):
        with pytest.raises(ApiException) as refused:
            kube.patch(f"{crds}/{name}/status", {"status": {"storedVersions": stored}})
        assert refused.value.status == 422
        assert message in status_of(refused.value)["message"], status_of(refused.value)["message"]
    with pytest.raises(ApiException) as refused:
        kube.patch(f"{crds}/{name}", {"spec": {"versions": [widget["spec"]["versions"][0]]}})
    assert refused.value.status == 422
    assert "must appear in spec.versions" in status_of(refused.value)["message"]
    kube.delete(f"{crds}/{name}")


def test_a_pod_is_refused_until_its_namespace_has_the_service_account_it_runs_as(tmp_path: Path) -> None:
    """The ServiceAccount admission plugin of a stock kube-apiserver: nobody here plays
    kube-controller-manager, so a new namespace has no ``default`` ServiceAccount and a pod without
    ``serviceAccountName`` is refused (after the plugin's short wait for the default one)."""
    with ApiServer() as alone:
        api = config.new_client_from_config(config_file=str(alone.write_kubeconfig(tmp_path / "kubeconfig")))
        try:
            refused_until_the_service_account_exists(Kube(api))
        finally:
            api.close()


def refused_until_the_service_account_exists(kube: Kube) -> None:
    namespace = f"sa-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "pause:3.9"}]}}
    with pytest.raises(ApiException) as refused:
        kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert refused.value.status == 403
    status = status_of(refused.value)
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        f'pods "p" is forbidden: error looking up service account {namespace}/default: '
        'serviceaccount "default" not found'
    )
    assert status["details"] == {"name": "p", "kind": "pods"}
    kube.create(f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "default"}})
    created = kube.create(f"/api/v1/namespaces/{namespace}/pods", pod)
    assert created["spec"]["serviceAccountName"] == "default"
    assert created["spec"]["serviceAccount"] == "default"
    # A missing namespace is still NamespaceLifecycle's 404, which runs first.
    with pytest.raises(ApiException) as missing:
        kube.create("/api/v1/namespaces/nowhere/pods", pod)
    assert missing.value.status == 404


def _anonymous_get(url: str, path: str, token: str | None = None) -> tuple[int, Any]:
    """GET without credentials (or with a bearer ``token``): the status and the decoded body."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            status, body = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body.decode()


def test_version_is_what_kube_apiserver_v1_36_reports(server, kube: Kube) -> None:
    """kube-apiserver v1.36.1's /version, field for field and in its order (version.Info: the binary,
    emulation and minimum compatibility versions, then the build); the OpenAPI documents say it too."""
    info = kube.get("/version")
    assert list(info) == [
        "major",
        "minor",
        "emulationMajor",
        "emulationMinor",
        "minCompatibilityMajor",
        "minCompatibilityMinor",
        "gitVersion",
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    ]
    assert (info["major"], info["minor"], info["gitVersion"]) == ("1", "36", "v1.36.1")
    assert (info["emulationMajor"], info["emulationMinor"]) == ("1", "36")
    assert (info["minCompatibilityMajor"], info["minCompatibilityMinor"]) == ("1", "35")
    assert (info["buildDate"], info["goVersion"]) == ("2026-05-12T09:51:34Z", "go1.26.2")
    parsed = client.VersionApi(kube.api_client).get_code()  # the client's model takes every field
    assert (parsed.emulation_minor, parsed.min_compatibility_minor) == ("36", "35")
    assert kube.get("/openapi/v2")["info"]["version"] == "v1.36.1"
    assert kube.get("/openapi/v3/api/v1")["info"]["version"] == "v1.36.1"


def test_on_eks_a_request_without_credentials_is_answered_only_on_the_health_checks(server) -> None:
    """EKS (Kubernetes 1.32 and later) restricts anonymous authentication to /healthz, /livez and
    /readyz: anything else, /version included, is 401 Unauthorized; a token nobody holds is 401 on
    the health checks too (rejected credentials are never taken for anonymous)."""
    srv, _ = server
    for path in ("/healthz", "/livez", "/readyz"):
        assert _anonymous_get(srv.url, path) == (200, "ok")
        assert _anonymous_get(srv.url, path, token="nobody-holds-this")[0] == 401
    for path in ("/version", "/api", "/apis", "/api/v1/namespaces/default/pods", "/openapi/v2"):
        status, body = _anonymous_get(srv.url, path)
        assert (status, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized"), path


def test_with_kube_apiservers_anonymous_auth_rbac_judges_system_anonymous() -> None:
    """kube-apiserver's default --anonymous-auth=true: a request without credentials is
    system:anonymous in system:unauthenticated, which the bootstrap policy lets read /version and the
    health checks (system:public-info-viewer) and nothing else: 403 Forbidden, naming the user."""
    with ApiServer(anonymous="kube-apiserver") as srv:
        assert _anonymous_get(srv.url, "/healthz") == (200, "ok")
        assert _anonymous_get(srv.url, "/version")[1]["gitVersion"] == "v1.36.1"
        status, body = _anonymous_get(srv.url, "/api/v1/namespaces/default/pods")
        assert (status, body["reason"]) == (403, "Forbidden")
        assert body["message"] == (
            'pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" '
            'in the namespace "default"'
        )
        status, body = _anonymous_get(srv.url, "/apis")
        assert (status, body["message"]) == (
            403,
            'forbidden: User "system:anonymous" cannot get path "/apis"',
        )
        assert _anonymous_get(srv.url, "/version", token="nobody-holds-this")[0] == 401
    with pytest.raises(ValueError, match="anonymous='open'"):
        ApiServer(anonymous="open").start()
