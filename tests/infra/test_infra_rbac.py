"""deploy/rbac.yaml grants each identity exactly the Kubernetes requests its Lambda code makes.

Two identities (``IDENTITIES``): the functions (group ``nodewright:autoscaler``) and the removal at
``cdk destroy`` (group ``nodewright:cleanup``, functions/cleanup, ``nodewright.removal`` and the
termination path it drives). How each used set is derived, so a new call cannot slip past:

1. ``flow_calls()`` scans the identity's sources (for the functions: every module of the layer
   outside ``cluster/`` and ``cli/`` and the removal; the CLI runs with the user's own kubeconfig,
   not the functions' role) for ``cluster.<method>(`` and, for the generic verbs, the Resource
   constant passed first; the removal's one call into ``cluster/`` (``uninstall_webhooks``) is
   named in ``CALLS_INTO_CLUSTER``.
2. ``EXERCISES`` holds one exercise per such call: it runs the real ``Cluster`` method against a
   recording transport, so the HTTP requests (method, path) are the ones the code really sends.
   A flow call without an exercise fails ``test_every_cluster_call_of_the_flows_is_exercised``.
3. Each request becomes an RBAC check (apiGroup, resource[/subresource], verb, namespace, name)
   that must be allowed by the roles rbac.yaml binds to the identity's group, and every grant of
   those roles must be used by some request of that identity.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.shared_data import REPO_ROOT

RBAC = REPO_ROOT / "deploy" / "rbac.yaml"
LAYER = REPO_ROOT / "layers" / "nodewright" / "nodewright"
# Not the functions' role: the cluster package itself, and the CLI (the user's kubeconfig).
NOT_FLOWS = ("cluster", "cli")
CALL = re.compile(r"\bcluster\.(\w+)\(\s*([A-Z][A-Z_]+\b)?")
# A read handed on rather than called (``{"nodes": cluster.list_nodes, ...}`` in state/world.py).
READER = re.compile(r"\bcluster\.(list_\w+),")
# Calls that send no request: nodewright.cluster.connect (the module builds a client), the
# per-invocation call deadline ContainerContext sets (context.py) and a manifest bundle's unread
# documents (cluster/manifests.py, which plan's what-ifs read instead of an API server).
NO_REQUEST = {"connect", "set_call_deadline", "unread"}
GENERIC_VERBS = {"list", "get", "find", "create", "replace", "patch", "delete", "update_with_retry",
                 "add_finalizer", "remove_finalizer"}  # fmt: skip
RBAC_GROUP = "rbac.authorization.k8s.io"
VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "WATCH": "watch"}
PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<resource>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$"
)


@dataclass(frozen=True)
class Check:
    """One RBAC authorization check, as the API server makes it for a request."""

    group: str
    resource: str  # "pods/eviction" for a subresource
    verb: str
    namespace: str | None
    name: str | None


@dataclass(frozen=True)
class Identity:
    """Who makes requests: the group its access entry maps to, and the code that runs as it."""

    group: str
    sources: tuple[Path, ...]


REMOVAL = LAYER / "removal.py"


def _functions_sources() -> tuple[Path, ...]:
    layer = [
        p for p in LAYER.rglob("*.py") if p.relative_to(LAYER).parts[0] not in NOT_FLOWS and p != REMOVAL
    ]
    functions = [p for p in (REPO_ROOT / "functions").rglob("*.py") if p.parent.name != "cleanup"]
    return tuple(layer + functions)


IDENTITIES = {
    "functions": Identity("nodewright:autoscaler", _functions_sources()),
    "cleanup": Identity(
        "nodewright:cleanup",
        (
            REMOVAL,
            *(LAYER / "termination").rglob("*.py"),
            *(REPO_ROOT / "functions" / "cleanup").rglob("*.py"),
        ),
    ),
}
# Calls an identity makes through a helper of ``cluster/`` (which the scan does not read), with the
# call site that must exist for the entry to stay.
CALLS_INTO_CLUSTER = {"cleanup": {("uninstall_webhooks", None): (REMOVAL, "uninstall_webhooks(api)")}}


def flow_calls(identity: str = "functions") -> set[tuple[str, str | None]]:
    """(Cluster method, Resource constant for the generic verbs) called by ``identity``'s code."""
    found: set[tuple[str, str | None]] = set()
    for call, (path, site) in CALLS_INTO_CLUSTER.get(identity, {}).items():
        assert site in path.read_text(), f"{site} is gone from {path}: drop {call} from CALLS_INTO_CLUSTER"
        found.add(call)
    for path in IDENTITIES[identity].sources:
        for method, resource in CALL.findall(path.read_text()):
            if method in NO_REQUEST:
                continue
            found.add((method, resource if method in GENERIC_VERBS and resource else None))
        found.update((method, None) for method in READER.findall(path.read_text()))
    return found


class Recorder:
    """A transport for ``Cluster.request``: records each request, answers like an API server would."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.missing: set[str] = set()  # paths that answer 404
        self.objects: dict[str, dict[str, Any]] = {}  # what a GET of a path answers, when set

    def watch(self, path: str, query: dict[str, Any], **_: Any) -> Iterator[dict[str, Any]]:
        """``Cluster._watch``: recorded as a WATCH of ``path``; the server ends it at once."""
        assert query.get("watch") == "true", query
        self.requests.append(("WATCH", path))
        yield from ()

    def __call__(self, method: str, path: str, *, query: Any = None, body: Any = None, **_: Any) -> Any:
        from nodewright.cluster.errors import NotFound

        self.requests.append((method, path))
        if path in self.missing:
            self.missing.discard(path)  # created by the next request
            raise NotFound(404, f"{path} not found")
        parts = PATH.match(path)
        if method == "GET" and path in self.objects:
            return self.objects[path]
        if method == "GET" and not parts["name"]:
            return {"items": [], "metadata": {"resourceVersion": "7"}}
        if method == "GET":
            meta = {"name": parts["name"], "namespace": parts["namespace"], "resourceVersion": "7"}
            return {
                "metadata": {**meta, "finalizers": ["x"]},
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}], "unschedulable": True},
                "status": {},
            }
        return body if isinstance(body, dict) else {}


def _lease(cluster: Any, recorder: Recorder) -> None:
    from nodewright.cluster.lease import DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE
    from nodewright.cluster.resources import LEASES

    recorder.missing.add(LEASES.path(DEFAULT_LEASE_NAMESPACE, DEFAULT_LEASE_NAME))
    with cluster.writer_lease("provisioner/test") as lease:  # absent: created
        lease.renew()
    second = cluster.writer_lease("interruption-test")  # present and free: taken over
    assert second.acquire()
    second.release()


def _uninstall_webhooks(cluster: Any, recorder: Recorder) -> None:
    """The webhooks as install-webhooks leaves them: one configuration, both CRDs converting."""
    from nodewright.api import webhooks
    from nodewright.cluster.install import uninstall_webhooks
    from nodewright.cluster.resources import CRDS

    url = "https://example.lambda-url.us-east-1.on.aws/secret/convert"
    for crd in webhooks.conversion_crds(url):
        served = {**crd, "metadata": {**crd["metadata"], "resourceVersion": "7"}, "status": {}}
        recorder.objects[CRDS.path(name=crd["metadata"]["name"])] = served
    assert uninstall_webhooks(cluster)


POD = {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u1"}}
CLAIM = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "default-x"}}
TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
# One exercise per (Cluster method, Resource) the flows call; the call sites are in the comments.
EXERCISES: dict[tuple[str, str | None], Callable[[Any, Recorder], None]] = {
    # state/world.py (observe)
    ("list_pods", None): lambda c, r: c.list_pods(),
    ("list_nodepools", None): lambda c, r: c.list_nodepools(),
    ("list_ec2nodeclasses", None): lambda c, r: c.list_ec2nodeclasses(),
    ("list_nodeoverlays", None): lambda c, r: c.list_nodeoverlays(),
    ("list_daemonsets", None): lambda c, r: c.list_daemonsets(),
    ("list_pdbs", None): lambda c, r: c.list_pdbs(),
    ("list_persistent_volumes", None): lambda c, r: c.list_persistent_volumes(),
    ("list_persistent_volume_claims", None): lambda c, r: c.list_persistent_volume_claims(),
    ("list_storage_classes", None): lambda c, r: c.list_storage_classes(),
    ("list_volume_attachments", None): lambda c, r: c.list_volume_attachments(),
    # provisioning/loop.py
    ("list_pending_pods", None): lambda c, r: c.list_pending_pods(),
    ("wait_for_pending_pods", None): lambda c, r: (
        c.list_pending_pods(),
        c.wait_for_pending_pods(1.0, lambda pod: True),
    ),
    # state/world.py, provisioning/loop.py, termination/terminate.py, interruption/flow.py
    ("list_nodeclaims", None): lambda c, r: c.list_nodeclaims(),
    # state/world.py, termination/terminate.py, interruption/flow.py
    ("list_nodes", None): lambda c, r: c.list_nodes(),
    ("find_node", None): lambda c, r: c.find_node("ip-10-0-0-1"),
    ("record_event", None): lambda c, r: (
        c.record_event(POD, "Nominated", "m"),
        c.record_event(CLAIM, "X", "m"),
    ),
    # provisioning/loop.py, interruption/flow.py
    ("writer_lease", None): _lease,
    # provisioning/flow.py
    ("create_nodeclaim", None): lambda c, r: c.create_nodeclaim(CLAIM),
    # state/nodepools.py (status conditions)
    ("patch_nodepool_status", None): lambda c, r: c.patch_nodepool_status("default", {"conditions": []}),
    # status.py (EC2NodeClass status)
    ("patch_ec2nodeclass_status", None): lambda c, r: c.patch_ec2nodeclass_status(
        "default", {"conditions": []}
    ),
    # status.py (NodeOverlay status, with the nodeOverlay gate)
    ("patch_nodeoverlay_status", None): lambda c, r: c.patch_nodeoverlay_status(
        "savings-plan", {"conditions": []}
    ),
    # provisioning/launch.py, provisioning/lifecycle.py
    ("patch_nodeclaim_status", None): lambda c, r: c.patch_nodeclaim_status("default-x", {"nodeName": "n"}),
    ("delete_nodeclaim", None): lambda c, r: c.delete_nodeclaim("default-x"),
    ("remove_finalizer", "NODECLAIMS"): lambda c, r: c.remove_finalizer(_r("NODECLAIMS"), "default-x", "x"),
    # provisioning/lifecycle.py (registration: labels, taints, finalizer on the Node)
    ("update_node", None): lambda c, r: c.update_node("n", lambda o: {"spec": {}}),
    ("patch_node", None): lambda c, r: c.patch_node("n", {"metadata": {"labels": {}}}),
    # termination/terminate.py
    ("taint_node", None): lambda c, r: c.taint_node("n", [{**TAINT, "key": "new"}], cordon=True),
    ("add_finalizer", "NODECLAIMS"): lambda c, r: c.add_finalizer(_r("NODECLAIMS"), "default-x", "y"),
    # termination/terminate.py (annotations), provisioning/launch.py (labels), disruption/flow.py
    ("patch_nodeclaim", None): lambda c, r: c.patch_nodeclaim("default-x", {"metadata": {}}),
    ("delete_node", None): lambda c, r: c.delete_node("n"),
    ("remove_finalizer", "NODES"): lambda c, r: c.remove_finalizer(_r("NODES"), "n", "x"),
    # termination/drain.py
    ("list_pods_on_node", None): lambda c, r: c.list_pods_on_node("n"),
    ("evict", None): lambda c, r: c.evict(POD),
    ("delete_pod", None): lambda c, r: c.delete_pod("shop", "web-1", grace_period_seconds=0),
    # removal.py (the cleanup): cluster/install.py uninstall_webhooks
    ("uninstall_webhooks", None): _uninstall_webhooks,
}


def _r(name: str) -> Any:
    from nodewright.cluster import resources

    return getattr(resources, name)


def _check(method: str, path: str) -> Check:
    match = PATH.match(path.split("?", 1)[0])
    assert match, f"unexpected request path {path}"
    resource = match["resource"] + (f"/{match['sub']}" if match["sub"] else "")
    verb = ("get" if match["name"] else "list") if method == "GET" else VERB_BY_METHOD[method]
    return Check(match["group"] or "", resource, verb, match["namespace"], match["name"])


def checks_of(identity: str) -> dict[Check, set[tuple[str, str | None]]]:
    """Every RBAC check ``identity``'s calls need → which calls need it."""
    from nodewright.cluster.client import Cluster

    needed: dict[Check, set[tuple[str, str | None]]] = {}
    for call in flow_calls(identity):
        exercise = EXERCISES[call]
        recorder = Recorder()
        cluster = Cluster(api_client=None)
        cluster.request = recorder  # type: ignore[method-assign]
        cluster._watch = recorder.watch  # type: ignore[method-assign]
        exercise(cluster, recorder)
        assert recorder.requests, f"{call} sent no request"
        for method, path in recorder.requests:
            needed.setdefault(_check(method, path), set()).add(call)
    return needed


@pytest.fixture(scope="module")
def used_checks() -> dict[Check, set[tuple[str, str | None]]]:
    """The functions' checks (the lease, events, …)."""
    return checks_of("functions")


@dataclass(frozen=True)
class Rule:
    groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str]  # empty: any name
    namespace: str | None  # None: a ClusterRole (every namespace and cluster-scoped objects)

    def allows(self, check: Check) -> bool:
        return (
            check.group in self.groups
            and check.resource in self.resources
            and check.verb in self.verbs
            and (not self.names or check.name in self.names)
            and (self.namespace is None or check.namespace == self.namespace)
        )


def rbac_documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def granted_rules(group: str | None = None) -> list[Rule]:
    """The rules of the roles bound to ``group`` (every role's when None)."""
    bound = {
        (doc["roleRef"]["kind"], doc["roleRef"]["name"], doc["metadata"].get("namespace"))
        for doc in rbac_documents()
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding")
        and any(
            subject == {"apiGroup": RBAC_GROUP, "kind": "Group", "name": group} for subject in doc["subjects"]
        )
    }
    rules = []
    for doc in rbac_documents():
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        key = (doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace"))
        if (
            group is not None
            and key not in bound
            and (doc["kind"], doc["metadata"]["name"], None) not in bound
        ):
            continue
        namespace = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
        for rule in doc["rules"]:
            rules.append(
                Rule(
                    frozenset(rule["apiGroups"]),
                    frozenset(rule["resources"]),
                    frozenset(rule["verbs"]),
                    frozenset(rule.get("resourceNames") or ()),
                    namespace,
                )
            )
    return rules


def test_every_cluster_call_of_the_flows_is_exercised() -> None:
    calls = flow_calls("functions") | flow_calls("cleanup")
    assert flow_calls("functions"), "no cluster call found: did the layer move?"
    missing = calls - EXERCISES.keys()
    assert not missing, f"add an exercise (and the RBAC it needs) for {sorted(missing, key=str)}"
    stale = EXERCISES.keys() - calls
    assert not stale, f"no flow makes these calls any more; drop them (and their grants): {stale}"


@pytest.mark.parametrize("identity", sorted(IDENTITIES))
def test_rbac_allows_every_request_the_code_makes(identity: str) -> None:
    rules = granted_rules(IDENTITIES[identity].group)
    used = checks_of(identity)
    denied = {check: calls for check, calls in used.items() if not any(r.allows(check) for r in rules)}
    assert not denied, f"deploy/rbac.yaml refuses these requests of the {identity}: {denied}"


@pytest.mark.parametrize("identity", sorted(IDENTITIES))
def test_rbac_grants_nothing_the_code_does_not_use(identity: str) -> None:
    used_checks = checks_of(identity)
    for rule in granted_rules(IDENTITIES[identity].group):
        for group in rule.groups:
            for resource in rule.resources:
                for verb in rule.verbs:
                    used = [
                        c
                        for c in used_checks
                        if (c.group, c.resource, c.verb) == (group, resource, verb) and rule.allows(c)
                    ]
                    assert used, (
                        f"unused grant of the {identity}: {verb} {group or 'core'}/{resource} ({rule})"
                    )


def test_every_role_is_bound_to_one_of_the_identities() -> None:
    every = set(granted_rules())
    assert every == set(granted_rules(IDENTITIES["functions"].group)) | set(
        granted_rules(IDENTITIES["cleanup"].group)
    )


def test_the_cleanup_takes_the_webhooks_out_by_name_and_can_put_nothing_in() -> None:
    from nodewright.api.webhooks import CONVERTED_CRDS
    from nodewright.cluster.install import WEBHOOK_CONFIGURATIONS

    rules = granted_rules(IDENTITIES["cleanup"].group)
    webhook_rules = [r for r in rules if r.groups & {"admissionregistration.k8s.io", "apiextensions.k8s.io"}]
    assert {(r.resources, r.verbs, r.names) for r in webhook_rules} == {
        (
            frozenset({"validatingwebhookconfigurations"}),
            frozenset({"delete"}),
            frozenset(WEBHOOK_CONFIGURATIONS),
        ),
        (frozenset({"customresourcedefinitions"}), frozenset({"get", "patch"}), frozenset(CONVERTED_CRDS)),
    }
    for verb in ("create", "update", "patch", "delete"):
        other = Check("admissionregistration.k8s.io", "validatingwebhookconfigurations", verb, None, "other")
        assert not any(r.allows(other) for r in rules), verb
        crd = Check(
            "apiextensions.k8s.io", "customresourcedefinitions", verb, None, "nodeclaims.karpenter.sh"
        )
        assert not any(r.allows(crd) for r in rules), verb
    assert not any(
        r.allows(Check("apiextensions.k8s.io", "customresourcedefinitions", verb, None, None))
        for r in rules
        for verb in ("create", "list")
    )
    # and nothing of the functions' own work: no lease, no NodeClaim creation, no watch
    assert not any(r.verbs & {"create"} and r.resources & {"nodeclaims", "leases"} for r in rules)
    assert not any("watch" in r.verbs for r in rules)


def test_the_writer_lease_is_limited_to_its_namespace_and_name(used_checks: dict[Check, set[Any]]) -> None:
    from nodewright.cluster.lease import DEFAULT_LEASE_NAME, DEFAULT_LEASE_NAMESPACE

    lease_checks = {c for c in used_checks if c.resource == "leases"}
    assert {c.verb for c in lease_checks} == {"get", "create", "update"}
    assert {c.namespace for c in lease_checks} == {DEFAULT_LEASE_NAMESPACE}
    lease_rules = [r for r in granted_rules(IDENTITIES["functions"].group) if "leases" in r.resources]
    assert all(r.namespace == DEFAULT_LEASE_NAMESPACE for r in lease_rules)
    # Only create is unnamed (RBAC cannot name an object that does not exist yet).
    for rule in lease_rules:
        assert rule.names == {DEFAULT_LEASE_NAME} or rule.verbs == {"create"}, rule
    other = Check("coordination.k8s.io", "leases", "update", DEFAULT_LEASE_NAMESPACE, "kube-scheduler")
    assert not any(r.allows(other) for r in granted_rules())  # nobody's


def test_rbac_grants_no_secrets_wildcards_or_cluster_admin_and_watches_only_pods() -> None:
    for rule in granted_rules():
        for values in (rule.groups, rule.resources, rule.verbs):
            assert not any("*" in v for v in values), rule
        assert not rule.resources & {"secrets", "configmaps", "serviceaccounts", "serviceaccounts/token"}
        assert not rule.verbs & {"escalate", "bind", "impersonate"}, rule
        if "watch" in rule.verbs:  # the provisioner's wait for pending pods; list already reads them
            assert (rule.groups, rule.resources) == ({""}, {"pods"}), rule
    for doc in rbac_documents():
        if "roleRef" in doc:
            assert doc["roleRef"]["name"] not in ("cluster-admin", "admin", "edit")


def test_the_recorder_sees_the_paths_the_api_server_would(used_checks: dict[Check, set[Any]]) -> None:
    """Guards the derivation itself: a few requests the code must make, spelled out."""
    assert Check("", "pods/eviction", "create", "shop", "web-1") in used_checks
    assert Check("", "pods", "delete", "shop", "web-1") in used_checks
    assert Check("karpenter.sh", "nodeclaims/status", "patch", None, "default-x") in used_checks
    assert Check("karpenter.sh", "nodepools/status", "patch", None, "default") in used_checks
    assert Check("", "events", "create", "default", None) in used_checks  # cluster-scoped objects
    assert not any(c.verb == "update" and c.resource == "nodes" for c in used_checks)  # merge patches


def test_the_sandbox_identity_is_the_access_entry_group_that_deploy_rbac_binds() -> None:
    from infra.capabilities.cluster_access import CLEANUP_GROUP, KUBERNETES_GROUP
    from sandbox.cluster import AUTOSCALER_GROUP, RBAC_FILE

    assert AUTOSCALER_GROUP == KUBERNETES_GROUP
    bound = {
        subject["name"]
        for doc in yaml.safe_load_all(RBAC_FILE.read_text())
        if doc and doc["kind"].endswith("Binding")
        for subject in doc["subjects"]
    }
    assert bound == {KUBERNETES_GROUP, CLEANUP_GROUP}
