"""The Kubernetes API emulator driven by the real kubernetes Python client (37.x, pydantic-validated)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from sandbox.apiserver import ApiServer
from sandbox.simulators import Kube, ServiceAccounts

pytestmark = pytest.mark.timeout(60)

WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.nodewright.dev"},
    "spec": {
        "group": "test.nodewright.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1},
                                    "color": {"type": "string", "default": "blue"},
                                    "nested": {"type": "object", "properties": {"keep": {"type": "string"}}},
                                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                },
                            },
                            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
                        },
                    }
                },
            }
        ],
    },
}

GADGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.test.nodewright.dev"},
    "spec": {
        "group": "test.nodewright.dev",
        "scope": "Cluster",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def api(server: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> client.ApiClient:
    path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    return config.new_client_from_config(str(path))


@pytest.fixture(scope="module", autouse=True)
def accounts(api: client.ApiClient) -> Iterator[ServiceAccounts]:
    """kube-controller-manager's ServiceAccounts beside the server: without them no pod is admitted."""
    with ServiceAccounts(Kube(api)) as controller:
        yield controller


@pytest.fixture
def ns(api: client.ApiClient, accounts: ServiceAccounts) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    accounts.wait_for(name)
    return name


def pod_manifest(name: str, labels: dict[str, str] | None = None, **spec: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], **spec},
    }


def raw(
    server: ApiServer, method: str, path: str, body: object = None, content_type: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One plain-HTTP request with the token, for answers the typed client hides (headers, 415, plain 404)."""
    headers = {"Authorization": f"Bearer {server.token}"}
    if content_type:
        headers["Content-Type"] = content_type
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


# ------------------------------------------------------------------------------------ lifecycle


def _serves_another_server(thread: threading.Thread, mine: object) -> bool:
    """Whether ``thread`` answers a connection to another server of this process: the module's
    server, whose ServiceAccounts controller opens a new watch every 30 s, may get one while this
    test runs (a live thread keeps its target; a handler's is its server's method)."""
    owner = getattr(getattr(thread, "_target", None), "__self__", None)
    return isinstance(owner, socketserver.BaseServer) and owner is not mine


def test_stop_leaves_no_thread_or_port() -> None:
    """How fast it starts is the sandbox bench's figure (``nodewright bench sandbox``); here, that
    stopping ends every thread it started (each given a bounded join: a loaded machine schedules
    a connection's handler late) and frees its port."""
    before = {t.ident for t in threading.enumerate()}
    srv = ApiServer().start()
    port = srv.port
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    cfg = client.Configuration(
        host=srv.url, api_key={"authorization": srv.token}, api_key_prefix={"authorization": "Bearer"}
    )
    assert client.VersionApi(client.ApiClient(cfg)).get_code().major == "1"
    mine = srv._httpd
    srv.stop()
    new = [t for t in threading.enumerate() if t.ident not in before and not _serves_another_server(t, mine)]
    for thread in new:
        thread.join(timeout=30)
    leftover = [t for t in new if t.is_alive()]
    assert leftover == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5)


def test_stop_ends_open_watches(tmp_path: Path) -> None:
    srv = ApiServer().start()
    core = client.CoreV1Api(config.new_client_from_config(str(srv.write_kubeconfig(tmp_path / "kc"))))
    events: list[str] = []

    def consume() -> None:
        try:
            for event in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=60):
                events.append(event["type"])
        except Exception:  # the connection closing is the point of the test
            events.append("closed")

    reader = threading.Thread(target=consume)
    reader.start()
    time.sleep(0.2)
    started = time.perf_counter()
    srv.stop()
    reader.join(timeout=5)
    assert not reader.is_alive()
    assert time.perf_counter() - started < 3


def test_wrong_or_missing_token_is_401(server: ApiServer) -> None:
    for token in ("wrong", None):
        cfg = client.Configuration(host=server.url)
        if token:
            cfg.api_key = {"authorization": token}
            cfg.api_key_prefix = {"authorization": "Bearer"}
        with pytest.raises(ApiException) as caught:
            client.CoreV1Api(client.ApiClient(cfg)).list_namespace()
        assert caught.value.status == 401
        assert status_of(caught.value)["reason"] == "Unauthorized"


def test_a_token_nobody_holds_is_401_even_where_anonymous_requests_are_answered() -> None:
    """kube-apiserver fails a request whose credentials are rejected before anonymous access is
    considered (union.NewFailOnError): with its default --anonymous-auth=true a bad token gets 401 on
    /version, anonymous 200; EKS (the emulator's default) answers anonymous /version 401 too."""
    cfg = client.Configuration()
    cfg.api_key = {"authorization": "wrong"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    with ApiServer(anonymous="kube-apiserver") as srv, ApiServer() as eks:
        cfg.host = srv.url
        with pytest.raises(ApiException) as caught:
            client.VersionApi(client.ApiClient(cfg)).get_code()
        assert caught.value.status == 401
        anonymous = client.VersionApi(client.ApiClient(client.Configuration(host=srv.url))).get_code()
        assert anonymous.git_version.startswith("v1.")
        with pytest.raises(ApiException) as caught:
            client.VersionApi(client.ApiClient(client.Configuration(host=eks.url))).get_code()
        assert caught.value.status == 401


def test_version_is_a_complete_version_info(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    assert info.git_version.startswith("v1.")
    assert info.build_date
    assert info.go_version
    assert info.platform


# ------------------------------------------------------------------------------------ CRUD


def test_pod_create_gets_server_defaults(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    manifest = pod_manifest("web")
    manifest["spec"]["containers"].append(
        {"name": "side", "image": "busybox", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
    )
    pod = core.create_namespaced_pod(ns, manifest)
    spec = pod.spec
    assert (spec.restart_policy, spec.dns_policy, spec.scheduler_name) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert spec.termination_grace_period_seconds == 30
    assert spec.enable_service_links is True
    assert spec.priority == 0
    assert spec.preemption_policy == "PreemptLowerPriority"
    assert {(t.key, t.effect, t.toleration_seconds) for t in spec.tolerations} == {
        ("node.kubernetes.io/not-ready", "NoExecute", 300),
        ("node.kubernetes.io/unreachable", "NoExecute", 300),
    }
    app, side = spec.containers
    assert app.image_pull_policy == "IfNotPresent"
    assert side.image_pull_policy == "Always"
    assert app.termination_message_path == "/dev/termination-log"
    assert app.termination_message_policy == "File"
    assert side.resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert pod.status.phase == "Pending"
    assert pod.status.qos_class == "Burstable"
    assert pod.metadata.uid
    assert pod.metadata.creation_timestamp
    assert pod.metadata.namespace == ns


def test_create_twice_is_409_already_exists(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("dup"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(ns, pod_manifest("dup"))
    body = status_of(caught.value)
    assert caught.value.status == 409
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "dup" already exists'


def test_stale_resource_version_is_409_conflict(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    pod = core.create_namespaced_pod(ns, pod_manifest("stale", {"v": "1"}))
    fresh = core.patch_namespaced_pod("stale", ns, {"metadata": {"labels": {"v": "2"}}})
    assert int(fresh.metadata.resource_version) > int(pod.metadata.resource_version)
    pod.metadata.labels = {"v": "3"}
    with pytest.raises(ApiException) as caught:
        core.replace_namespaced_pod("stale", ns, pod)
    body = status_of(caught.value)
    assert caught.value.status == 409
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "stale": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert body["details"] == {"name": "stale", "kind": "pods"}


def test_missing_object_and_unknown_resource_are_404(api: client.ApiClient, server: ApiServer) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("nope", "default")
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'pods "nope" not found'
    code, _, body = raw(server, "GET", "/api/v1/namespaces/default/gizmos")
    assert code == 404
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }


def test_create_in_missing_namespace_is_404(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api).create_namespaced_pod("ghost", pod_manifest("p"))
    assert caught.value.status == 404
    assert status_of(caught.value)["message"] == 'namespaces "ghost" not found'


def test_invalid_pod_is_422_with_causes(api: client.ApiClient, ns: str) -> None:
    manifest = pod_manifest("bad")
    manifest["spec"]["containers"] = [{"name": "", "image": "x"}]
    with pytest.raises(ApiException) as caught:
        client.CoreV1Api(api).create_namespaced_pod(ns, manifest)
    body = status_of(caught.value)
    assert caught.value.status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == 'Pod "bad" is invalid: spec.containers[0].name: Required value'
    assert body["details"]["causes"] == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].name"}
    ]


def test_namespace_and_node_admission(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    namespace = core.create_namespace({"metadata": {"name": f"adm-{uuid.uuid4().hex[:6]}"}})
    assert namespace.metadata.labels == {"kubernetes.io/metadata.name": namespace.metadata.name}
    assert namespace.status.phase == "Active"
    node = core.create_node({"metadata": {"name": f"n-{uuid.uuid4().hex[:6]}"}})
    assert [(t.key, t.effect) for t in node.spec.taints] == [("node.kubernetes.io/not-ready", "NoSchedule")]


def test_workload_defaults(api: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api)
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
    deploy = apps.create_namespaced_deployment(
        ns,
        {"metadata": {"name": "d"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template}},
    )
    assert deploy.spec.replicas == 1
    assert deploy.spec.revision_history_limit == 10
    assert deploy.spec.progress_deadline_seconds == 600
    assert deploy.spec.strategy.rolling_update.max_surge == "25%"
    assert deploy.spec.strategy.rolling_update.max_unavailable == "25%"
    ds = apps.create_namespaced_daemon_set(
        ns,
        {"metadata": {"name": "ds"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": template}},
    )
    assert ds.spec.update_strategy.type == "RollingUpdate"
    assert ds.spec.update_strategy.rolling_update.max_unavailable == 1
    with pytest.raises(ApiException) as caught:
        apps.create_namespaced_deployment(
            ns,
            {
                "metadata": {"name": "d2"},
                "spec": {"selector": {"matchLabels": {"x": "y"}}, "template": template},
            },
        )
    assert caught.value.status == 422
    assert "`selector` does not match template `labels`" in status_of(caught.value)["message"]


def test_generate_name(api: client.ApiClient, ns: str) -> None:
    manifest = pod_manifest("")
    manifest["metadata"] = {"generateName": "gen-"}
    pod = client.CoreV1Api(api).create_namespaced_pod(ns, manifest)
    assert pod.metadata.name.startswith("gen-")
    assert len(pod.metadata.name) == 9


# ------------------------------------------------------------------------------------ patches


def test_strategic_merge_patch_merges_containers_by_name_and_replaces_taints(
    api: client.ApiClient, ns: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("smp", {"keep": "yes"}))
    patched = core.patch_namespaced_pod(
        "smp",
        ns,
        {
            "metadata": {"labels": {"new": "1"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.28"}]},
        },
    )
    assert patched.metadata.labels == {"keep": "yes", "new": "1"}
    assert [(c.name, c.image) for c in patched.spec.containers] == [("app", "nginx:1.28")]
    node_name = f"taints-{uuid.uuid4().hex[:6]}"
    core.create_node(
        {"metadata": {"name": node_name}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    )
    node = core.patch_node(node_name, {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]}})
    assert [(t.key, t.effect) for t in node.spec.taints] == [("b", "NoExecute")]


def test_status_patch_merges_conditions_by_type_and_ignores_spec(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("st"))
    core.patch_namespaced_pod_status(
        "st", ns, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    )
    pod = core.patch_namespaced_pod_status(
        "st",
        ns,
        {
            "spec": {"nodeName": "sneaky"},
            "status": {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}]},
        },
    )
    assert {c.type for c in pod.status.conditions} == {"Ready", "Initialized"}
    assert pod.status.phase == "Running"
    assert pod.spec.node_name is None
    # a main-resource write ignores status
    pod = core.patch_namespaced_pod(
        "st", ns, {"status": {"phase": "Failed"}, "metadata": {"labels": {"x": "y"}}}
    )
    assert pod.status.phase == "Running"
    assert pod.metadata.labels == {"x": "y"}


def test_json_patch_failures_are_422_and_success_applies(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("jp", {"a": "1"}))
    for ops in (
        [{"op": "test", "path": "/metadata/labels/a", "value": "2"}],
        [{"op": "remove", "path": "/metadata/labels/missing"}],
        [{"op": "frobnicate", "path": "/metadata/labels/a"}],
    ):
        with pytest.raises(ApiException) as caught:
            core.patch_namespaced_pod("jp", ns, ops)
        assert caught.value.status == 422, ops
        assert status_of(caught.value)["reason"] == "Invalid"
    pod = core.patch_namespaced_pod(
        "jp",
        ns,
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "replace", "path": "/metadata/labels/b", "value": "2"},
        ],
    )
    assert pod.metadata.labels == {"a": "1", "b": "2"}


def test_patch_with_plain_json_content_type_is_415(api: client.ApiClient, ns: str, server: ApiServer) -> None:
    client.CoreV1Api(api).create_namespaced_pod(ns, pod_manifest("ct"))
    code, _, body = raw(
        server,
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/ct",
        {"metadata": {"labels": {"a": "b"}}},
        "application/json",
    )
    assert code == 415
    assert json.loads(body)["reason"] == "UnsupportedMediaType"


def test_unknown_fields_are_dropped_with_warning_or_rejected_when_strict(
    api: client.ApiClient, ns: str, server: ApiServer
) -> None:
    manifest = pod_manifest("unk")
    manifest["spec"]["bogus"] = 1
    path = f"/api/v1/namespaces/{ns}/pods"
    code, headers, body = raw(server, "POST", path, manifest)
    assert code == 201
    assert headers.get("Warning") == '299 - "unknown field \\"spec.bogus\\""'
    assert "bogus" not in json.loads(body)["spec"]
    manifest["metadata"]["name"] = "unk2"
    code, _, body = raw(server, "POST", path + "?fieldValidation=Strict", manifest)
    assert code == 400
    assert 'strict decoding error: unknown field "spec.bogus"' in json.loads(body)["message"]


def test_warnings_recorded_before_an_error_are_sent_with_it(server: ApiServer, ns: str) -> None:
    """kube-apiserver's warning recorder (filters.WithWarningRecorder) adds each Warning header to the
    response as the warning is recorded: the unknown-field warning of decoding comes back with the 422
    validation answers afterwards."""
    manifest = pod_manifest("Bad_Name")
    manifest["spec"]["bogus"] = 1
    code, headers, body = raw(server, "POST", f"/api/v1/namespaces/{ns}/pods", manifest)
    assert code == 422, body
    assert headers.get("Warning") == '299 - "unknown field \\"spec.bogus\\""'


# ------------------------------------------------------------------------------------ selectors


def test_label_and_field_selectors(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("a", {"app": "web", "tier": "front"}, nodeName="n1"))
    core.create_namespaced_pod(ns, pod_manifest("b", {"app": "web", "tier": "back"}))
    core.create_namespaced_pod(ns, pod_manifest("c", {"app": "db"}))

    def names(**kw: str) -> list[str]:
        return sorted(p.metadata.name for p in core.list_namespaced_pod(ns, **kw).items)

    assert names(label_selector="app=web") == ["a", "b"]
    assert names(label_selector="app=web,tier!=front") == ["b"]
    assert names(label_selector="tier in (front,back)") == ["a", "b"]
    assert names(label_selector="app notin (web)") == ["c"]
    assert names(label_selector="!tier") == ["c"]
    assert names(label_selector="tier") == ["a", "b"]
    assert names(field_selector="spec.nodeName=n1") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["b", "c"]
    assert names(field_selector="metadata.name!=a,status.phase=Pending") == ["b", "c"]
    for bad in (
        {"label_selector": "app in (x"},
        {"label_selector": "a=b=c"},
        {"field_selector": "spec.foo=bar"},
    ):
        with pytest.raises(ApiException) as caught:
            core.list_namespaced_pod(ns, **bad)
        assert caught.value.status == 400, bad
    with pytest.raises(ApiException) as caught:
        core.list_node(field_selector="status.phase=Running")
    assert caught.value.status == 400
    assert status_of(caught.value)["message"] == "field label not supported: status.phase"


def test_list_pagination_and_resource_version(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    for i in range(5):
        core.create_namespaced_pod(ns, pod_manifest(f"p{i}"))
    first = core.list_namespaced_pod(ns, limit=2)
    assert len(first.items) == 2
    assert first.metadata._continue
    assert first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_pod(ns, limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in first.items + rest.items] == [f"p{i}" for i in range(5)]
    assert int(first.metadata.resource_version) >= max(int(p.metadata.resource_version) for p in first.items)


def test_a_paginated_list_with_a_selector_pages_what_matches_and_leaves_the_remaining_count_unset(
    api: client.ApiClient, ns: str
) -> None:
    """ListMeta: with label or field selectors the number of remaining items is unknown and left
    unset (the emulator counted it); the pages hold only matching pods, whatever lies between them."""
    core = client.CoreV1Api(api)
    for i in range(6):
        pod = pod_manifest(f"p{i}")
        pod["metadata"]["labels"] = {"keep": "yes" if i % 2 else "no"}
        core.create_namespaced_pod(ns, pod)
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_pod(ns, limit=2, label_selector="keep=yes", _continue=token)
        pages += 1
        names += [p.metadata.name for p in page.items]
        assert page.metadata.remaining_item_count is None
        token = page.metadata._continue
        if not token:
            break
    assert names == ["p1", "p3", "p5"]
    assert pages == 2


def test_a_continued_list_starts_after_its_continue_key_in_its_namespace_only(
    api: client.ApiClient, ns: str
) -> None:
    core = client.CoreV1Api(api)
    other = f"{ns}-x"
    core.create_namespace({"metadata": {"name": other}})
    for namespace in (ns, other):
        for i in range(3):
            core.create_namespaced_pod(namespace, pod_manifest(f"p{i}"))
    first = core.list_namespaced_pod(ns, limit=1)
    assert first.metadata.remaining_item_count == 2
    rest = core.list_namespaced_pod(ns, limit=5, _continue=first.metadata._continue)
    assert [(p.metadata.namespace, p.metadata.name) for p in first.items + rest.items] == [
        (ns, "p0"),
        (ns, "p1"),
        (ns, "p2"),
    ]
    assert rest.metadata._continue is None


# ------------------------------------------------------------------------------------ deletion


def test_finalizers_hold_deletion_until_removed(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(ns, {"metadata": {"name": "held", "finalizers": ["test/hold"]}})
    held = core.delete_namespaced_config_map("held", ns)
    assert (
        held.metadata.deletion_timestamp is not None
        if hasattr(held, "metadata")
        else held["metadata"]["deletionTimestamp"]
    )
    current = core.read_namespaced_config_map("held", ns)
    assert current.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as caught:
        core.patch_namespaced_config_map("held", ns, {"metadata": {"finalizers": ["test/hold", "test/more"]}})
    assert caught.value.status == 422
    assert (
        "no new finalizers can be added if the object is being deleted" in status_of(caught.value)["message"]
    )
    core.patch_namespaced_config_map("held", ns, [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_config_map("held", ns)
    assert caught.value.status == 404


def test_bound_pod_deletion_is_graceful_until_confirmed(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("unbound"))
    gone = core.delete_namespaced_pod("unbound", ns)
    assert gone.metadata.name == "unbound"
    with pytest.raises(ApiException):
        core.read_namespaced_pod("unbound", ns)
    core.create_namespaced_pod(ns, pod_manifest("bound", nodeName="n1"))
    terminating = core.delete_namespaced_pod("bound", ns)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 30
    assert core.read_namespaced_pod("bound", ns).metadata.deletion_timestamp is not None
    core.delete_namespaced_pod("bound", ns, grace_period_seconds=0)
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("bound", ns)
    assert caught.value.status == 404


# ------------------------------------------------------------------------------------ binding / eviction


def test_binding_is_201_then_409(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("b"))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="b"), target=client.V1ObjectReference(kind="Node", name="n1")
    )
    # The API answers a Status, which the client cannot read as a V1Binding: take the raw response.
    response = core.create_namespaced_pod_binding("b", ns, body, _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = core.read_namespaced_pod("b", ns)
    assert pod.spec.node_name == "n1"
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding("b", ns, body, _preload_content=False)
    assert caught.value.status == 409
    assert status_of(caught.value)["details"]["kind"] == "pods/binding"


def _running_pod(core: client.CoreV1Api, ns: str, name: str, labels: dict[str, str]) -> None:
    core.create_namespaced_pod(ns, pod_manifest(name, labels, nodeName="n1"))
    core.patch_namespaced_pod_status(
        name, ns, {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    )


def test_eviction_blocked_by_pdb_is_429_then_allowed(api: client.ApiClient, ns: str) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    _running_pod(core, ns, "guarded", {"app": "g"})
    _running_pod(core, ns, "other", {"app": "g"})
    policy.create_namespaced_pod_disruption_budget(
        ns,
        {"metadata": {"name": "pdb"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "g"}}}},
    )
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="guarded", namespace=ns))
    with pytest.raises(ApiException) as caught:  # the PDB status has not been computed yet
        core.create_namespaced_pod_eviction("guarded", ns, eviction)
    body = status_of(caught.value)
    assert caught.value.status == 429
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["retryAfterSeconds"] == 10
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget pdb is still being processed by the server.",
        }
    ]
    # What the disruption controller would write: 2 healthy, 2 desired -> nothing allowed.
    pdb = policy.read_namespaced_pod_disruption_budget("pdb", ns)
    status = {
        "observedGeneration": pdb.metadata.generation,
        "currentHealthy": 2,
        "desiredHealthy": 2,
        "expectedPods": 2,
        "disruptionsAllowed": 0,
    }
    policy.patch_namespaced_pod_disruption_budget_status("pdb", ns, {"status": status})
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("guarded", ns, eviction)
    assert caught.value.status == 429
    assert (
        status_of(caught.value)["details"]["causes"][0]["message"]
        == "The disruption budget pdb needs 2 healthy pods and has 2 currently"
    )
    policy.patch_namespaced_pod_disruption_budget_status(
        "pdb", ns, {"status": {**status, "desiredHealthy": 1, "disruptionsAllowed": 1}}
    )
    response = core.create_namespaced_pod_eviction("guarded", ns, eviction, _preload_content=False)
    assert response.status == 201
    assert json.loads(response.data)["status"] == "Success"
    pod = core.read_namespaced_pod("guarded", ns)
    assert pod.metadata.deletion_timestamp is not None
    assert pod.metadata.deletion_grace_period_seconds == 30
    assert any(
        c.type == "DisruptionTarget" and c.reason == "EvictionByEvictionAPI" for c in pod.status.conditions
    )
    pdb = policy.read_namespaced_pod_disruption_budget("pdb", ns)
    assert pdb.status.disruptions_allowed == 0
    assert "guarded" in pdb.status.disrupted_pods


def test_eviction_of_pending_pod_ignores_pdb_and_missing_pod_is_404(api: client.ApiClient, ns: str) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("pending", {"app": "p"}))
    policy.create_namespaced_pod_disruption_budget(
        ns,
        {"metadata": {"name": "pdb"}, "spec": {"minAvailable": 5, "selector": {"matchLabels": {"app": "p"}}}},
    )
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name="pending", namespace=ns))
    assert core.create_namespaced_pod_eviction("pending", ns, eviction, _preload_content=False).status == 201
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("pending", ns)
    assert caught.value.status == 404
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("pending", ns, eviction)
    assert caught.value.status == 404


def test_pod_under_two_pdbs_cannot_be_evicted(api: client.ApiClient, ns: str) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    _running_pod(core, ns, "twice", {"app": "t"})
    for name in ("one", "two"):
        policy.create_namespaced_pod_disruption_budget(
            ns,
            {
                "metadata": {"name": name},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "t"}}},
            },
        )
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction(
            "twice", ns, client.V1Eviction(metadata=client.V1ObjectMeta(name="twice"))
        )
    # kube-apiserver v1.36 (pkg/registry/core/pod/storage/eviction.go) returns a bare Status as the
    # eviction's result, not an error: code 500, no reason, no details.causes.
    assert caught.value.status == 500
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": (
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        ),
        "code": 500,
    }


def test_an_eviction_whose_uid_precondition_fails_is_a_conflict_on_pod_and_marks_nothing(
    api: client.ApiClient, ns: str
) -> None:
    core = client.CoreV1Api(api)
    _running_pod(core, ns, "namesake", {"app": "n"})
    uid = core.read_namespaced_pod("namesake", ns).metadata.uid
    stale = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "namesake", "namespace": ns},
        "deleteOptions": {"preconditions": {"uid": "0d1e2f3a-0000-4000-8000-000000000000"}},
    }
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_eviction("namesake", ns, stale)
    # pkg/registry/core/pod/storage/eviction.go, addConditionAndDeletePod: the precondition is checked
    # against the stored pod before the DisruptionTarget condition is written, as a Conflict on "Pod".
    body = status_of(caught.value)
    assert caught.value.status == 409
    assert body["reason"] == "Conflict"
    assert body["details"] == {"name": "namesake", "kind": "Pod"}
    assert body["message"] == (
        'Operation cannot be fulfilled on Pod "namesake": the UID in the precondition '
        f"(0d1e2f3a-0000-4000-8000-000000000000) does not match the UID in record ({uid}). "
        "The object might have been deleted and then recreated"
    )
    pod = core.read_namespaced_pod("namesake", ns)
    assert pod.metadata.deletion_timestamp is None
    assert [c.type for c in pod.status.conditions] == ["Ready"]


def test_a_delete_whose_uid_precondition_fails_is_a_storage_conflict_on_pods(
    api: client.ApiClient, ns: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("kept"))
    uid = core.read_namespaced_pod("kept", ns).metadata.uid
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod(
            "kept", ns, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other"))
        )
    body = status_of(caught.value)
    assert caught.value.status == 409
    assert body["details"] == {"name": "kept", "kind": "pods"}
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "kept": StorageError: invalid object, Code: 4, '
        f"Key: /registry/pods/{ns}/kept, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: UID in precondition: other, UID in object meta: {uid}"
    )
    assert core.read_namespaced_pod("kept", ns).metadata.deletion_timestamp is None


# ------------------------------------------------------------------------------------ leases


def test_lease_update_needs_resource_version(api: client.ApiClient, ns: str) -> None:
    coord = client.CoordinationV1Api(api)
    lease = coord.create_namespaced_lease(
        ns, {"metadata": {"name": "lock"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    )
    stale_rv = lease.metadata.resource_version
    lease.spec.holder_identity = "b"
    lease = coord.replace_namespaced_lease("lock", ns, lease)
    assert lease.spec.holder_identity == "b"
    lease.metadata.resource_version = None
    with pytest.raises(ApiException) as caught:
        coord.replace_namespaced_lease("lock", ns, lease)
    assert caught.value.status == 422
    assert "metadata.resourceVersion" in status_of(caught.value)["message"]
    lease.metadata.resource_version = stale_rv
    with pytest.raises(ApiException) as caught:
        coord.replace_namespaced_lease("lock", ns, lease)
    assert caught.value.status == 409


def test_event_round_trip(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "x", "namespace": ns},
            "reason": "Boom",
            "message": "m",
            "type": "Warning",
        },
    )
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=x,reason=Boom").items
    assert [e.metadata.name for e in events] == ["e1"]


# ------------------------------------------------------------------------------------ watch


def test_watch_streams_changes_from_a_resource_version(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod_manifest("w", {"app": "w"}))
    core.patch_namespaced_pod("w", ns, {"metadata": {"labels": {"app": "gone"}}})
    core.create_namespaced_pod(ns, pod_manifest("w2", {"app": "w"}, nodeName="n1"))
    core.delete_namespaced_pod("w2", ns, grace_period_seconds=0)
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_namespaced_pod, ns, label_selector="app=w", resource_version=start, timeout_seconds=1
        )
    ]
    assert seen == [("ADDED", "w"), ("DELETED", "w"), ("ADDED", "w2"), ("MODIFIED", "w2"), ("DELETED", "w2")]


def test_watch_without_resource_version_starts_with_current_objects(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("existing"))
    received: list[tuple[str, str]] = []
    stream = watch.Watch()

    def later() -> None:
        time.sleep(0.3)
        core.create_namespaced_pod(ns, pod_manifest("new"))

    threading.Thread(target=later).start()
    for event in stream.stream(core.list_namespaced_pod, ns, timeout_seconds=2):
        received.append((event["type"], event["object"].metadata.name))
        if len(received) == 2:
            stream.stop()
    assert received == [("ADDED", "existing"), ("ADDED", "new")]


# ------------------------------------------------------------------------------------ CRDs


@pytest.fixture(scope="module")
def widgets(api: client.ApiClient) -> client.CustomObjectsApi:
    ext = client.ApiextensionsV1Api(api)
    crd = ext.create_custom_resource_definition(WIDGET_CRD)
    assert {c.type: c.status for c in crd.status.conditions}["Established"] == "True"
    ext.create_custom_resource_definition(GADGET_CRD)
    return client.CustomObjectsApi(api)


def test_custom_objects_crud_pruning_and_defaults(widgets: client.CustomObjectsApi, ns: str) -> None:
    group, version = "test.nodewright.dev", "v1"
    created = widgets.create_namespaced_custom_object(
        group,
        version,
        ns,
        "widgets",
        {
            "apiVersion": f"{group}/{version}",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {
                "size": 2,
                "bogus": 1,
                "nested": {"keep": "k", "drop": "d"},
                "free": {"any": {"thing": 1}},
            },
            "status": {"ready": True},
        },
    )
    assert created["spec"] == {
        "size": 2,
        "color": "blue",
        "nested": {"keep": "k"},
        "free": {"any": {"thing": 1}},
    }
    assert "status" not in created
    assert created["metadata"]["generation"] == 1
    listed = widgets.list_namespaced_custom_object(group, version, ns, "widgets")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["w"]
    patched = widgets.patch_namespaced_custom_object(
        group, version, ns, "widgets", "w", {"spec": {"size": 3}, "status": {"ready": True}}
    )
    assert patched["spec"]["size"] == 3
    assert "status" not in patched
    assert patched["metadata"]["generation"] == 2
    with_status = widgets.patch_namespaced_custom_object_status(
        group, version, ns, "widgets", "w", {"spec": {"size": 9}, "status": {"ready": True}}
    )
    assert with_status["status"] == {"ready": True}
    assert with_status["spec"]["size"] == 3
    assert with_status["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as caught:
        widgets.patch_namespaced_custom_object(group, version, ns, "widgets", "w", {"spec": {"size": 0}})
    assert caught.value.status == 422
    assert "spec.size" in status_of(caught.value)["message"]
    widgets.delete_namespaced_custom_object(group, version, ns, "widgets", "w")
    with pytest.raises(ApiException) as caught:
        widgets.get_namespaced_custom_object(group, version, ns, "widgets", "w")
    assert caught.value.status == 404


def test_custom_object_update_needs_resource_version_and_rejects_strategic_merge(
    widgets: client.CustomObjectsApi, server: ApiServer, api: client.ApiClient
) -> None:
    group, version = "test.nodewright.dev", "v1"
    obj = widgets.create_cluster_custom_object(
        group,
        version,
        "gadgets",
        {"apiVersion": f"{group}/{version}", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"x": 1}},
    )
    obj["metadata"].pop("resourceVersion")
    with pytest.raises(ApiException) as caught:
        widgets.replace_cluster_custom_object(group, version, "gadgets", "g", obj)
    assert caught.value.status == 422
    code, _, _ = raw(
        server,
        "PATCH",
        f"/apis/{group}/{version}/gadgets/g",
        {"spec": {"x": 2}},
        "application/strategic-merge-patch+json",
    )
    assert code == 415


def test_deleted_crd_paths_answer_plain_404(api: client.ApiClient, server: ApiServer) -> None:
    ext = client.ApiextensionsV1Api(api)
    crd = json.loads(
        json.dumps(WIDGET_CRD)
        .replace("widgets", "sprockets")
        .replace("Widget", "Sprocket")
        .replace("widget", "sprocket")
        .replace("test.nodewright.dev", "gone.nodewright.dev")
    )
    crd["spec"]["names"]["shortNames"] = []
    ext.create_custom_resource_definition(crd)
    objs = client.CustomObjectsApi(api)
    objs.create_namespaced_custom_object(
        "gone.nodewright.dev",
        "v1",
        "default",
        "sprockets",
        {"apiVersion": "gone.nodewright.dev/v1", "kind": "Sprocket", "metadata": {"name": "s"}},
    )
    ext.delete_custom_resource_definition("sprockets.gone.nodewright.dev")
    # The CRD goes in the background, once its objects are deleted (as kubectl delete --wait waits).
    deadline = time.monotonic() + 5
    while (answer := raw(server, "GET", "/apis/gone.nodewright.dev/v1/namespaces/default/sprockets"))[
        0
    ] != 404:
        assert time.monotonic() < deadline, answer
        time.sleep(0.05)
    code, _, body = answer
    assert code == 404
    assert body == b"404 page not found\n"


def test_namespace_deletion_waits_for_finalize(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    name = f"fin-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    core.delete_namespace(name)
    terminating = core.read_namespace(name)
    assert terminating.status.phase == "Terminating"
    assert terminating.spec.finalizers == ["kubernetes"]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map(name, {"metadata": {"name": "late"}})
    assert caught.value.status == 403
    assert "because it is being terminated" in status_of(caught.value)["message"]
    terminating.spec.finalizers = []
    core.replace_namespace_finalize(name, terminating)
    with pytest.raises(ApiException) as caught:
        core.read_namespace(name)
    assert caught.value.status == 404


def test_namespace_deletion_honours_the_propagation_policy(api: client.ApiClient) -> None:
    """pkg/registry/core/namespace/storage REST.Delete: the first delete gives the namespace the
    garbage collector's finalizer of its policy (``orphan``, ``foregroundDeletion``); an unknown
    policy is refused before (ValidateDeleteOptions), and a namespace always gets ``kubernetes``."""
    core = client.CoreV1Api(api)
    name = f"orph-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}, "spec": {"finalizers": ["example.com/hold"]}})
    assert core.read_namespace(name).spec.finalizers == ["example.com/hold", "kubernetes"]
    with pytest.raises(ApiException) as caught:
        core.delete_namespace(name, propagation_policy="Sometimes")
    assert caught.value.status == 422
    core.delete_namespace(name, propagation_policy="Orphan")
    terminating = core.read_namespace(name)
    assert terminating.status.phase == "Terminating"
    assert terminating.metadata.finalizers == ["orphan"]
    assert terminating.metadata.deletion_grace_period_seconds is None
    terminating.spec.finalizers = []
    core.replace_namespace_finalize(name, terminating)
    assert core.read_namespace(name).metadata.finalizers == ["orphan"]  # the garbage collector's now
    core.patch_namespace(name, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as caught:
        core.read_namespace(name)
    assert caught.value.status == 404

    foreground = f"fg-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": foreground}})
    core.delete_namespace(foreground, propagation_policy="Foreground")
    held = core.read_namespace(foreground)
    assert held.metadata.finalizers == ["foregroundDeletion"]
    held.spec.finalizers = []
    core.replace_namespace_finalize(foreground, held)
    core.patch_namespace(foreground, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as caught:
        core.read_namespace(foreground)
    assert caught.value.status == 404


def test_a_namespace_is_only_marked_terminating_by_its_first_delete(api: client.ApiClient) -> None:
    """pkg/registry/core/namespace/storage REST.Delete: the first delete only stamps deletionTimestamp
    and phase Terminating (a GuaranteedUpdate), even with no finalizers left to wait for; only a
    later delete, once spec.finalizers is empty, is the store's and removes it."""
    core = client.CoreV1Api(api)
    name = f"bare-{uuid.uuid4().hex[:6]}"
    created = core.create_namespace({"metadata": {"name": name}})
    created.spec.finalizers = []
    core.replace_namespace_finalize(name, created)  # an active namespace may drop them: it stays
    assert core.read_namespace(name).status.phase == "Active"
    answer = Kube(api)._call("DELETE", f"/api/v1/namespaces/{name}")
    assert (answer["kind"], answer["status"]["phase"]) == ("Namespace", "Terminating")
    assert core.read_namespace(name).metadata.deletion_timestamp is not None
    core.delete_namespace(name)
    with pytest.raises(ApiException) as caught:
        core.read_namespace(name)
    assert caught.value.status == 404


def test_the_immortal_namespaces_may_not_be_deleted(api: client.ApiClient) -> None:
    """The NamespaceLifecycle admission plugin refuses a delete of default, kube-system, kube-public."""
    core = client.CoreV1Api(api)
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(ApiException) as caught:
            core.delete_namespace(name)
        assert caught.value.status == 403
        assert (
            status_of(caught.value)["message"]
            == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
        )
        assert core.read_namespace(name).status.phase == "Active"


def test_no_new_content_in_a_terminating_namespace_not_even_an_eviction_or_a_binding(
    api: client.ApiClient, ns: str
) -> None:
    """NamespaceLifecycle refuses every CREATE in a Terminating namespace, subresources (an Eviction,
    a Binding) too, before the REST or validation look at it: a 403 with the NamespaceTerminating
    cause (what kubectl drain and the workload controllers look for)."""
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(ns, pod_manifest("p"))
    core.delete_namespace(ns)  # no namespace controller here: it stays Terminating

    def refused(call: object, resource: str, name: str) -> None:
        with pytest.raises(ApiException) as caught:
            call()  # type: ignore[operator]
        assert caught.value.status == 403
        body = status_of(caught.value)
        assert body["message"] == (
            f'{resource} "{name}" is forbidden: unable to create new content in namespace {ns} '
            "because it is being terminated"
        )
        assert body["details"]["causes"] == [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {ns} is being terminated",
                "field": "metadata.namespace",
            }
        ]

    refused(
        lambda: core.create_namespaced_config_map(ns, {"metadata": {"name": "late"}}), "configmaps", "late"
    )
    # Admission comes before validation: an invalid object is refused as content, not as invalid.
    refused(
        lambda: core.create_namespaced_config_map(ns, {"metadata": {"name": "Bad_Name"}}),
        "configmaps",
        "Bad_Name",
    )
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": ns}}
    refused(lambda: core.create_namespaced_pod_eviction("p", ns, eviction), "pods", "p")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"},
    }
    refused(lambda: core.create_namespaced_pod_binding("p", ns, binding), "pods", "p")
    assert core.read_namespaced_pod("p", ns).spec.node_name is None


def test_crd_serving_two_versions_without_conversion_prunes_to_the_storage_schema(
    api: client.ApiClient,
) -> None:
    """As kube-apiserver with ``conversion: None``: only apiVersion changes; storage-less fields are lost."""
    group = "multi.nodewright.dev"

    def version(name: str, storage: bool, fields: list[str]) -> dict:
        props = {f: {"type": "string"} for f in fields}
        spec_schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}
        return {"name": name, "served": True, "storage": storage, "schema": {"openAPIV3Schema": spec_schema}}

    crd = {
        "metadata": {"name": f"pools.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": "pools", "kind": "Pool"},
            "conversion": {"strategy": "None"},
            "versions": [version("v1", True, ["kept"]), version("v1beta1", False, ["kept", "legacy"])],
        },
    }
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    objs = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{group}/v1beta1", "kind": "Pool", "metadata": {"name": "p"}}
    body["spec"] = {"kept": "a", "legacy": "b"}
    created = objs.create_cluster_custom_object(group, "v1beta1", "pools", body)
    assert created["apiVersion"] == f"{group}/v1beta1"
    assert created["spec"] == {"kept": "a"}
    as_v1 = objs.get_cluster_custom_object(group, "v1", "pools", "p")
    assert as_v1["apiVersion"] == f"{group}/v1"
    assert as_v1["spec"] == {"kept": "a"}


def test_a_ratcheted_cel_failure_is_accepted_with_a_warning_header(
    api: client.ApiClient, server: ApiServer
) -> None:
    """KEP-4008: a rule added after the object was written fails at a value the update leaves
    unchanged; kube-apiserver's CEL validator accepts the update and says so in a Warning
    (warning.AddWarning(ctx, "", err.Error()))."""
    group = "ratchet.nodewright.dev"
    ext = client.ApiextensionsV1Api(api)
    spec_schema = {"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string"}}}
    schema = {"type": "object", "properties": {"spec": spec_schema}}
    ext.create_custom_resource_definition(
        {
            "metadata": {"name": f"gadgets.{group}"},
            "spec": {
                "group": group,
                "scope": "Cluster",
                "names": {"plural": "gadgets", "kind": "Gadget"},
                "versions": [
                    {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
                ],
            },
        }
    )
    objs = client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{group}/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"name": "forbidden"},
    }
    objs.create_cluster_custom_object(group, "v1", "gadgets", body)
    crd = api.sanitize_for_serialization(ext.read_custom_resource_definition(f"gadgets.{group}"))
    name_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "name"
    ]
    name_schema["x-kubernetes-validations"] = [
        {"rule": "self != 'forbidden'", "message": "name is restricted"}
    ]
    ext.replace_custom_resource_definition(f"gadgets.{group}", crd)
    path = f"/apis/{group}/v1/gadgets/g"
    code, headers, _ = raw(server, "PATCH", path, {"spec": {"note": "n"}}, "application/merge-patch+json")
    assert code == 200
    assert headers.get("Warning") == '299 - "spec.name: Invalid value: \\"string\\": name is restricted"'
    code, _, answer = raw(
        server, "PATCH", path, {"spec": {"name": "forbidden2"}}, "application/merge-patch+json"
    )
    assert code == 200  # a changed value is checked: this one passes
    code, _, answer = raw(
        server, "PATCH", path, {"spec": {"name": "forbidden"}}, "application/merge-patch+json"
    )
    assert code == 422
    assert "name is restricted" in json.loads(answer)["message"]


def test_immutable_fields_are_422(api: client.ApiClient, ns: str) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    template = {
        "metadata": {"labels": {"a": "b", "c": "d"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    spec = {"selector": {"matchLabels": {"a": "b"}}, "template": template}
    apps.create_namespaced_deployment(ns, {"metadata": {"name": "imm"}, "spec": spec})
    with pytest.raises(ApiException) as caught:
        apps.patch_namespaced_deployment("imm", ns, {"spec": {"selector": {"matchLabels": {"c": "d"}}}})
    assert caught.value.status == 422
    assert "spec.selector" in status_of(caught.value)["message"]
    node = f"imm-{uuid.uuid4().hex[:6]}"
    core.create_node({"metadata": {"name": node}, "spec": {"providerID": "aws:///us-east-1a/i-1"}})
    with pytest.raises(ApiException) as caught:
        core.patch_node(node, {"spec": {"providerID": "aws:///us-east-1a/i-2"}})
    assert caught.value.status == 422
    core.create_namespaced_pod(ns, pod_manifest("imm-pod"))
    with pytest.raises(ApiException) as caught:  # binding, not an update, sets spec.nodeName
        core.patch_namespaced_pod("imm-pod", ns, {"spec": {"nodeName": "somewhere"}})
    assert caught.value.status == 422
    assert "pod updates may not change fields" in status_of(caught.value)["message"]


def test_workload_status_always_carries_zero_counts(api: client.ApiClient, ns: str) -> None:
    """The client's models require them (Go serialises these ints even when zero)."""
    apps = client.AppsV1Api(api)
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    spec = {"selector": {"matchLabels": {"a": "b"}}, "template": template}
    rs = apps.create_namespaced_replica_set(ns, {"metadata": {"name": "rs"}, "spec": spec})
    assert rs.status.replicas == 0
    rs.status = client.V1ReplicaSetStatus(replicas=2, ready_replicas=1)
    apps.replace_namespaced_replica_set_status("rs", ns, rs)
    apps.patch_namespaced_replica_set_status("rs", ns, [{"op": "remove", "path": "/status/replicas"}])
    assert apps.read_namespaced_replica_set("rs", ns).status.replicas == 0
    ds = apps.create_namespaced_daemon_set(ns, {"metadata": {"name": "ds"}, "spec": spec})
    assert ds.status.number_ready == 0
    assert client.AppsV1Api(api).list_namespaced_daemon_set(ns).items[0].status.desired_number_scheduled == 0


def test_watch_sends_bookmarks_when_asked_and_ends_at_timeout(
    server: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sandbox.apiserver.watch as watch_module

    monkeypatch.setattr(watch_module, "BOOKMARK_EVERY", 0.2)
    path = (
        "/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion=1"
    )
    request = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {server.token}"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Transfer-Encoding"] == "chunked"
        events = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert time.perf_counter() - started < 3
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) > 1
