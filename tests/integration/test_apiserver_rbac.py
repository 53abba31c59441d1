"""The emulator enforces RBAC as kube-apiserver does, and holds the functions' identity to deploy/rbac.yaml.

The identity is the one the EKS access entry maps the functions' role to (the group
``nodewright:autoscaler``); its permissions are exactly what deploy/rbac.yaml grants, applied as
it is in the tree.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config
from nodewright.cluster import ApiError, Cluster, auth

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import KUBECTL, kubectl
from sandbox.cluster import AUTOSCALER_GROUP, AUTOSCALER_USER, apply_rbac
from sandbox.shared_data import REPO_ROOT
from sandbox.simulators import Kube

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
needs_kubectl = pytest.mark.skipif(
    not shutil.which(KUBECTL), reason="kubectl is not installed (make installs Debian's kubernetes-client)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, Path, Path]]:
    """(server, administrator's kubeconfig, the functions' kubeconfig) with deploy/rbac.yaml applied."""
    folder = tmp_path_factory.mktemp("rbac")
    with ApiServer() as srv:
        admin = srv.write_kubeconfig(folder / "admin")
        token = srv.add_identity(AUTOSCALER_USER, (AUTOSCALER_GROUP,))
        functions = srv.write_kubeconfig(folder / "functions", token=token)
        api = config.new_client_from_config(config_file=str(admin))
        kube = Kube(api)
        apply_rbac(kube)
        for file in sorted((REPO_ROOT / "crds").glob("*.yaml")):
            kube.create(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(file.read_text())
            )
        api.close()
        yield srv, admin, functions


def functions_cluster(kubeconfig: Path) -> Cluster:
    return Cluster(client.ApiClient(auth.kubeconfig_configuration(str(kubeconfig))))


def test_the_functions_cannot_read_secrets_or_configmaps_and_get_the_real_403(server) -> None:
    _, _, functions = server
    cluster = functions_cluster(functions)
    try:
        for path, resource in (
            ("/api/v1/namespaces/kube-system/secrets", "secrets"),
            ("/api/v1/configmaps", "configmaps"),
        ):
            with pytest.raises(ApiError) as denied:
                cluster.request("GET", path)
            assert denied.value.status == 403
            scope = 'in the namespace "kube-system"' if "kube-system" in path else "at the cluster scope"
            assert denied.value.message == (
                f'{resource} is forbidden: User "{AUTOSCALER_USER}" cannot list resource "{resource}" '
                f'in API group "" {scope}'
            )
            assert denied.value.body["details"] == {"kind": resource}
    finally:
        cluster.api_client.close()


def test_a_verb_the_file_does_not_grant_is_refused_with_the_subresource_named(server) -> None:
    _, _, functions = server
    cluster = functions_cluster(functions)
    try:
        with pytest.raises(ApiError) as denied:  # nodes: get/list/patch/delete, never create
            cluster.request("POST", "/api/v1/nodes", body={"metadata": {"name": "n1"}})
        assert denied.value.status == 403
        assert 'cannot create resource "nodes" in API group "" at the cluster scope' in denied.value.message
        with pytest.raises(ApiError) as denied:  # nodeclaims/status: patch only
            cluster.request("PUT", "/apis/karpenter.sh/v1/nodeclaims/c1/status", body={})
        assert denied.value.message.startswith('nodeclaims.karpenter.sh "c1" is forbidden: ')
        assert (
            'cannot update resource "nodeclaims/status" in API group "karpenter.sh"' in denied.value.message
        )
        assert denied.value.body["details"] == {"name": "c1", "group": "karpenter.sh", "kind": "nodeclaims"}
        # Discovery stays open to every authenticated identity (system:discovery).
        assert cluster.request("GET", "/apis")["kind"] == "APIGroupList"
    finally:
        cluster.api_client.close()


@needs_kubectl
@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (["list", "secrets", "-A"], "no"),
        (["get", "configmaps", "-n", "kube-system"], "no"),
        (["create", "pods", "--subresource=eviction", "-n", "default"], "yes"),
        (["create", "pods", "-n", "default"], "no"),
        (["list", "pods", "-A"], "yes"),
        (["create", "nodes"], "no"),
        (["patch", "nodeclaims.karpenter.sh", "--subresource=status"], "yes"),
        (["update", "nodeclaims.karpenter.sh", "--subresource=status"], "no"),
        (["create", "events", "-n", "default"], "yes"),
    ],
)
def test_kubectl_auth_can_i_answers_for_the_functions_identity(server, question, answer) -> None:
    _, _, functions = server
    done = kubectl(functions, "auth", "can-i", *question)
    assert done.stdout.strip() == answer, done.stderr


@needs_kubectl
def test_the_writers_lease_rule_is_limited_to_its_name(server) -> None:
    _, admin, functions = server
    lease_rules = [
        d
        for d in json.loads(kubectl(admin, "get", "roles", "-A", "-o", "json").stdout)["items"]
        if any("leases" in r.get("resources", []) for r in d.get("rules") or [])
    ]
    assert lease_rules, "deploy/rbac.yaml has a Role for the writers' lease"
    namespace = lease_rules[0]["metadata"]["namespace"]
    named = next(n for r in lease_rules[0]["rules"] for n in r.get("resourceNames") or [])
    assert (
        kubectl(functions, "auth", "can-i", "update", f"leases/{named}", "-n", namespace).stdout.strip()
        == "yes"
    )
    other = kubectl(functions, "auth", "can-i", "update", "leases/kube-scheduler", "-n", namespace)
    assert other.stdout.strip() == "no"


@needs_kubectl
def test_whoami_impersonation_and_subject_access_review(server) -> None:
    _, admin, functions = server
    whoami = kubectl(functions, "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    user = json.loads(whoami.stdout)["status"]["userInfo"]
    assert user["username"] == AUTOSCALER_USER
    assert set(user["groups"]) == {AUTOSCALER_GROUP, "system:authenticated"}
    # The administrator asks on the functions' behalf (kubectl --as/--as-group: impersonation).
    impersonated = ["--as", "someone", "--as-group", AUTOSCALER_GROUP]
    assert kubectl(admin, "auth", "can-i", "list", "secrets", *impersonated).stdout.strip() == "no"
    assert kubectl(admin, "auth", "can-i", "list", "nodes", *impersonated).stdout.strip() == "yes"
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "someone",
            "groups": [AUTOSCALER_GROUP],
            "resourceAttributes": {"verb": "delete", "resource": "nodes"},
        },
    }
    created = kubectl(admin, "create", "-f", "-", "-o", "json", stdin=json.dumps(review))
    assert created.returncode == 0, created.stderr
    status = json.loads(created.stdout)["status"]
    assert status["allowed"] is True
    assert 'ClusterRoleBinding "nodewright-autoscaler"' in status["reason"]
    # The functions themselves may not impersonate, nor review others.
    assert "forbidden" in kubectl(functions, "get", "nodes", "--as", "admin").stderr.lower()


@needs_kubectl
def test_rolebinding_role_ref_is_immutable_and_rules_need_verbs(server) -> None:
    _, admin, _ = server
    bad_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "no-verbs", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["pods"]}],
    }
    done = kubectl(admin, "create", "-f", "-", stdin=json.dumps(bad_role))
    assert done.returncode != 0
    assert "rules[0].verbs: Required value" in done.stderr
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "b1", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "x", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    assert kubectl(admin, "create", "-f", "-", stdin=json.dumps(binding)).returncode == 0
    changed = kubectl(
        admin, "patch", "rolebinding", "b1", "--type", "merge", "-p", '{"roleRef": {"name": "edit"}}'
    )
    assert changed.returncode != 0
    assert "cannot change roleRef" in changed.stderr


def test_discovery_lists_the_rbac_and_review_resources_with_their_real_verbs(server) -> None:
    _, admin, _ = server
    api = config.new_client_from_config(config_file=str(admin))
    kube = Kube(api)
    try:
        core = {r["name"]: r["verbs"] for r in kube.get("/api/v1")["resources"]}
        assert "deletecollection" not in core["namespaces"]
        assert "deletecollection" in core["pods"]
        reviews = {r["name"]: r["verbs"] for r in kube.get("/apis/authorization.k8s.io/v1")["resources"]}
        assert reviews["selfsubjectaccessreviews"] == ["create"]
        rbac = {r["name"] for r in kube.get("/apis/rbac.authorization.k8s.io/v1")["resources"]}
        assert rbac == {"clusterrolebindings", "clusterroles", "rolebindings", "roles"}
    finally:
        api.close()


def impersonating_kubeconfig(source: Path, target: Path, user: str, groups: list[str]) -> Path:
    """``source`` with its user impersonating ``user`` in ``groups`` (kubeconfig ``as``/``as-groups``)."""
    document = yaml.safe_load(source.read_text())
    document["users"][0]["user"].update({"as": user, "as-groups": groups})
    target.write_text(yaml.safe_dump(document))
    return target


def test_a_kubeconfig_that_impersonates_the_functions_group_gets_exactly_deploy_rbac(
    server, tmp_path: Path
) -> None:
    """The administrator's credentials, impersonating the functions' identity: the server checks
    deploy/rbac.yaml's grants, so a verb it does not grant fails as it would for the functions."""
    _, admin, _ = server
    kubeconfig = impersonating_kubeconfig(
        admin, tmp_path / "as-functions", AUTOSCALER_USER, [AUTOSCALER_GROUP]
    )
    cluster = functions_cluster(kubeconfig)
    try:
        review = cluster.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        user = review["status"]["userInfo"]
        assert user["username"] == AUTOSCALER_USER
        assert set(user["groups"]) == {AUTOSCALER_GROUP, "system:authenticated"}
        assert cluster.request("GET", "/api/v1/nodes")["kind"] == "NodeList"  # granted
        with pytest.raises(ApiError) as denied:  # nodes: get/list/patch/delete, never create
            cluster.request("POST", "/api/v1/nodes", body={"metadata": {"name": "n1"}})
        assert denied.value.status == 403
        assert (
            f'User "{AUTOSCALER_USER}" cannot create resource "nodes" in API group "" at the cluster scope'
            in denied.value.message
        )
        with pytest.raises(ApiError) as denied:
            cluster.request("GET", "/api/v1/namespaces/kube-system/secrets")
        assert denied.value.status == 403
        # Watches carry the impersonation too: refused, so no event of kube-system's objects.
        query = {"watch": "true", "timeoutSeconds": 1}
        assert list(cluster._watch("/api/v1/namespaces/kube-system/secrets", query, read_timeout=5)) == []
    finally:
        cluster.api_client.close()


def test_impersonation_needs_the_impersonate_verb_on_the_user_and_on_each_group(
    server, tmp_path: Path
) -> None:
    srv, admin, _ = server
    api = config.new_client_from_config(config_file=str(admin))
    kube = Kube(api)
    try:
        kube.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {
                "metadata": {"name": "impersonate-functions-user"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["users"],
                        "verbs": ["impersonate"],
                        "resourceNames": ["fn"],
                    }
                ],
            },
        )
        kube.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": "carol-impersonates-fn"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "impersonate-functions-user",
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}],
            },
        )
    finally:
        api.close()
    carol = srv.write_kubeconfig(tmp_path / "carol", token=srv.add_identity("carol"))
    for user, groups, refused in (
        ("someone", [], 'users "someone" is forbidden: User "carol" cannot impersonate resource "users"'),
        (
            "fn",
            [AUTOSCALER_GROUP],
            f'groups "{AUTOSCALER_GROUP}" is forbidden: User "carol" cannot impersonate',
        ),
    ):
        cluster = functions_cluster(impersonating_kubeconfig(carol, tmp_path / f"as-{user}", user, groups))
        try:
            with pytest.raises(ApiError) as denied:
                cluster.request("GET", "/api/v1/nodes")
            assert denied.value.status == 403
            assert denied.value.message.startswith(refused), denied.value.message
        finally:
            cluster.api_client.close()
    allowed = functions_cluster(impersonating_kubeconfig(carol, tmp_path / "as-fn", "fn", []))
    try:
        with pytest.raises(ApiError) as denied:  # impersonation allowed; "fn" itself may not list nodes
            allowed.request("GET", "/api/v1/nodes")
        assert 'User "fn" cannot list resource "nodes"' in denied.value.message
    finally:
        allowed.api_client.close()


@needs_kubectl
def test_impersonating_a_service_account_or_a_uid_needs_its_own_grant(server, tmp_path: Path) -> None:
    """As kube-apiserver's impersonation filter: a service account user is impersonated as
    ``serviceaccounts`` in its namespace, a uid as ``uids`` in authentication.k8s.io."""
    srv, admin, _ = server
    dave = srv.write_kubeconfig(tmp_path / "dave", token=srv.add_identity("dave"))
    # A raw GET: kubectl reads the refusal's Status. (``kubectl get nodes`` read it only when an
    # earlier test on this server had filled kubectl's discovery cache: on its own, kubectl's
    # discovery reads the refused /api without decoding it, below, as against kube-apiserver.)
    refused = kubectl(dave, "get", "--raw", "/api/v1/nodes", "--as", "system:serviceaccount:default:robot")
    assert refused.returncode != 0
    assert (
        'serviceaccounts "robot" is forbidden: User "dave" cannot impersonate resource "serviceaccounts" '
        'in API group "" in the namespace "default"'
    ) in refused.stderr
    cache = str(tmp_path / "discovery")
    discovery = kubectl(
        dave, "get", "nodes", "--cache-dir", cache, "--as", "system:serviceaccount:default:robot"
    )
    assert discovery.returncode != 0
    assert "Error from server (Forbidden): unknown" in discovery.stderr, "discovery is refused too"
    # The administrator may impersonate anything: the account gets its groups, the uid is kept.
    whoami = kubectl(
        admin,
        "auth",
        "whoami",
        "-o",
        "json",
        "--as",
        "system:serviceaccount:default:robot",
        "--as-uid",
        "u-1",
    )
    assert whoami.returncode == 0, whoami.stderr
    info = json.loads(whoami.stdout)["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:default:robot"
    assert set(info["groups"]) == {
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    }
    assert info.get("uid") == "u-1"
    refused = kubectl(dave, "get", "--raw", "/api/v1/nodes", "--as", "someone", "--as-uid", "u-1")
    assert refused.returncode != 0
    assert "forbidden" in refused.stderr
