"""The wake-up end to end in the sandbox: the emulator calls the webhook's function URL (its
ValidatingWebhookConfiguration, rendered as ``nodewright install-webhooks`` renders it) when the
simulated kube-scheduler records ``FailedScheduling`` for a pod (an events.k8s.io/v1 Event, written
by its recorder: the scheduling loop never waits for the call); the webhook invokes the
provisioner's wakeup alias asynchronously; an idle provisioner plans the pod without waiting for
its minute tick. The URL's secret rotates without an outage.

The cluster's NodePool and EC2NodeClass are the seeds' v1beta1 manifests, applied unconverted with
kubectl: the CRDs serve v1beta1 through the conversion webhook on the same function URL (as
``nodewright install-webhooks`` installs them) and store v1.

The schedule is the deployed one (every 60 s, first tick at start); nothing is accelerated. Timings
are not asserted (the machine is shared): what is, is who started the pass that created the
NodeClaim (the wake-up, not a tick), who was called, and that an unreachable URL changes nothing
for v1 while v1beta1 requests fail."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from nodewright.api.conversion_review import ROLE_DEFAULTED_ANNOTATION
from nodewright.api.labels import NODEPOOL as NODEPOOL_LABEL
from nodewright.cluster.resources import NODECLAIMS, NODEPOOLS, PODS
from nodewright.spec.deployment import WEBHOOK_CONCURRENCY
from waiting import wait_for

from sandbox.apiserver.testing import KUBECTL, kubectl
from sandbox.harness import CLUSTER, SEEDS
from sandbox.runtime.stack import Runtime
from sandbox.scenarios.workloads import DEPLOYMENTS, deployment, nodepool

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    # A guard against a hang, above the stories' own waits: the burst takes about 130 s on a quiet
    # 2-core machine and went past the default 300 s with two suites running at once.
    pytest.mark.timeout(900),
    pytest.mark.skipif(not shutil.which(KUBECTL), reason="kubectl is not installed"),
]
IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"
TICK_SECONDS = 60
# The provisioner goes idle this long after the last activity (IDLE_AFTER_SECONDS, a setting: 600 s
# deployed). A woken invocation's report, which the wake-up stories read, comes when it goes idle.
IDLE_AFTER_SECONDS = 10
# How often a warm webhook container rereads its secret (WEBHOOK_SECRET_MAX_AGE_SECONDS, a setting:
# -c webhookSecretMaxAge, a minute by default): the rotation story waits for it once.
SECRET_MAX_AGE_SECONDS = 3
BURST_LABEL = "nodewright.test/burst"
SEED_NODECLASS = str(SEEDS / "v1beta1-ec2nodeclass-default.yaml")
SEED_NODEPOOL = str(SEEDS / "v1beta1-nodepool-default.yaml")


@pytest.fixture(scope="module")
def idle() -> Iterator[tuple[Any, Runtime]]:
    from sandbox import Sandbox

    # The seeds' cluster name: their subnet and security group selectors name it.
    with Sandbox(cluster_name=CLUSTER, boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        # The deployed schedule; the provisioner goes idle 10 s after the last activity instead of
        # 600 s, so each story starts from an idle provisioner soon, and the webhook rereads its
        # secret every few seconds instead of every minute (both settings, above).
        runtime = Runtime(
            sb,
            functions=("provisioner", "webhook"),
            schedules={"provisioner": TICK_SECONDS},
            env={
                "IDLE_AFTER_SECONDS": str(IDLE_AFTER_SECONDS),
                "WEBHOOK_SECRET_MAX_AGE_SECONDS": str(SECRET_MAX_AGE_SECONDS),
            },
        ).start()
        try:
            # Unconverted: the CRDs serve v1beta1 through the webhook. Retried while the webhook's
            # first (cold) container starts, as an operator's apply would be.
            wait_for(
                "the v1beta1 seeds applied",
                lambda: (
                    kubectl(sb.kubeconfig_path, "apply", "-f", SEED_NODECLASS, "-f", SEED_NODEPOOL).returncode
                    == 0
                ),
                TICK_SECONDS,
            )
            # The tick at start finds nothing to do and returns: the provisioner is idle.
            wait_for(
                "the first tick to end idle",
                lambda: any(
                    i.function == "provisioner" and (i.result or {}).get("idle") for i in runtime.invocations
                ),
                TICK_SECONDS - 5,
            )
            yield sb, runtime
        finally:
            runtime.stop()


def _provisioner_runs(runtime: Runtime) -> list[dict[str, Any]]:
    return [i.result for i in runtime.invocations if i.function == "provisioner" and i.ok]


def _lambda_api(runtime: Runtime) -> Any:
    from sandbox.runtime.wakeup import LambdaApi

    (api,) = [t for t in runtime.triggers if isinstance(t, LambdaApi)]
    return api


def test_a_request_without_the_secret_path_is_404_and_wakes_nothing(idle: tuple[Any, Runtime]) -> None:
    from sandbox.runtime.wakeup import FunctionUrl

    _sb, runtime = idle
    (url,) = [t for t in runtime.triggers if isinstance(t, FunctionUrl)]
    import ssl

    context = ssl.create_default_context(cadata=url.cert.ca_pem.decode())
    accepted = _lambda_api(runtime).accepted
    review = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}}'
    for path in ("admit", "guess/admit", "x" * 48 + "/admit"):
        request = urllib.request.Request(url.url + path, data=review, method="POST")
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, context=context, timeout=30)
        assert answer.value.code == 404
    assert _lambda_api(runtime).accepted == accepted


def test_the_v1beta1_seeds_applied_unconverted_read_back_in_both_versions(
    idle: tuple[Any, Runtime],
) -> None:
    """The fixture applied them; the next test's NodeClaim and node come from them."""
    sb, _runtime = idle
    seed_pool, seed_class = _load(SEED_NODEPOOL), _load(SEED_NODECLASS)

    pool_v1beta1 = _get(sb, "nodepools.v1beta1.karpenter.sh")
    assert pool_v1beta1["apiVersion"] == "karpenter.sh/v1beta1"
    assert pool_v1beta1["spec"]["template"] == seed_pool["spec"]["template"]
    assert pool_v1beta1["spec"]["disruption"].items() >= seed_pool["spec"]["disruption"].items()
    class_v1beta1 = _get(sb, "ec2nodeclasses.v1beta1.karpenter.k8s.aws")
    assert class_v1beta1["spec"].items() >= seed_class["spec"].items()
    assert "role" not in class_v1beta1["spec"]  # the stack's role went back out on the way to v1beta1
    assert "amiSelectorTerms" not in class_v1beta1["spec"]

    pool_v1 = _get(sb, "nodepools.v1.karpenter.sh")
    assert pool_v1["apiVersion"] == "karpenter.sh/v1"
    assert pool_v1["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert pool_v1["spec"]["disruption"]["consolidateAfter"] == "30s"
    class_v1 = _get(sb, "ec2nodeclasses.v1.karpenter.k8s.aws")
    assert class_v1["spec"]["role"] == sb.aws.node_role_name  # the stack's, as the seed names none
    assert class_v1["metadata"]["annotations"][ROLE_DEFAULTED_ANNOTATION] == sb.aws.node_role_name
    assert class_v1["spec"]["amiSelectorTerms"] == [{"alias": "al2@latest"}]


def test_an_unschedulable_pod_wakes_the_idle_provisioner_and_a_pod_that_schedules_does_not(
    idle: tuple[Any, Runtime],
) -> None:
    sb, runtime = idle
    admin = sb.admin_cluster()
    api = _lambda_api(runtime)
    before = len(_provisioner_runs(runtime))
    admitted_before = len(_url(runtime).admitted)
    created = time.monotonic()
    assert kubectl(sb.kubeconfig_path, "create", "deployment", "woken", f"--image={IMAGE}").returncode == 0
    assert (
        kubectl(sb.kubeconfig_path, "set", "resources", "deployment", "woken", "--requests=cpu=1").returncode
        == 0
    )

    # The woken pass is this container's first plan: it loads the catalog (seconds on moto, more
    # on a loaded machine). A tick meanwhile is throttled (reserved concurrency 1).
    claims = wait_for("a NodeClaim", lambda: admin.list(NODECLAIMS), 2 * TICK_SECONDS)
    planned_after = time.monotonic() - created
    # Planned from the seeds' NodePool and EC2NodeClass as converted (the only ones there are).
    seed_ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert [c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims] == ["default"] * len(claims)
    assert all(c["spec"]["nodeClassRef"] == seed_ref for c in claims)

    assert api.accepted >= 1
    woken = wait_for(
        "the woken invocation to end",
        lambda: [
            r for r in _provisioner_runs(runtime)[before:] if r.get("woken") and r.get("nodeClaimsCreated")
        ],
        TICK_SECONDS,
    )
    assert woken[0]["nodeClaimsCreated"]
    # The API server called out for the scheduler's FailedScheduling Events and for nothing else:
    # a pod gets a new one each time the scheduler fails it at a new resourceVersion (its status
    # message changes as nodes come; set resources may replace the deployment's first pod).
    reviews = _url(runtime).admitted[admitted_before:]
    assert {(op, kind, reason, who) for op, kind, _, reason, who in reviews} == {
        ("CREATE", "Event", "FailedScheduling", "default-scheduler")
    }
    # Each about one of the scheduler's Events on a woken pod (an Event called out for twice is the
    # API server retrying a call whose connection reset, as kube-apiserver's webhook client does).
    assert {name for _, _, name, _, _ in reviews} <= {
        e["metadata"]["name"] for e in _failed_scheduling(admin, "woken")
    }
    print(f"pending to NodeClaim from idle with the wake-up: {planned_after:.1f}s")

    # A pod that fits on the new node is bound: no FailedScheduling, no call. The node was
    # launched from the converted seed EC2NodeClass (its subnets, AMI alias, the role filled in).
    wait_for("the woken deployment running", lambda: _ready(sb, "woken") == "1", TICK_SECONDS)
    webhook_calls = _webhook_calls(runtime)
    assert kubectl(sb.kubeconfig_path, "run", "small", f"--image={IMAGE}").returncode == 0
    wait_for(
        "the small pod running",
        lambda: (
            kubectl(sb.kubeconfig_path, "get", "pod", "small", "-o", "jsonpath={.status.phase}").stdout
            == "Running"
        ),
        TICK_SECONDS,
    )
    assert _webhook_calls(runtime) == webhook_calls


# The size: 500 pods (about a minute in the sandbox); NODEWRIGHT_E2E_BURST=N for another size.
BURST = int(os.environ.get("NODEWRIGHT_E2E_BURST", "500"))


def test_a_burst_of_pending_pods_wakes_a_bounded_number_of_times_and_every_pod_gets_a_place(
    idle: tuple[Any, Runtime],
) -> None:
    """A burst of pods becomes unschedulable: the API server calls out for (at most) two Events of
    each of them, the webhook wakes the provisioner at most once per coalescing window, and the
    provisioner (one writer: reserved concurrency 1, pinned by the infra tests, and the writers'
    lease) gives every pod a place."""
    from nodewright.wakeup.webhook import COALESCE_SECONDS

    sb, runtime = idle
    admin = sb.admin_cluster()
    api = _lambda_api(runtime)
    accepted, calls, admitted_before = api.accepted, _webhook_calls(runtime), len(_url(runtime).admitted)
    # Its own NodePool, tainted, so the burst's nodes take nothing of the later tests' pods.
    pool = nodepool("burst", [{"key": BURST_LABEL, "operator": "In", "values": ["true"]}])
    pool["spec"]["template"]["spec"]["taints"] = [
        {"key": BURST_LABEL, "value": "true", "effect": "NoSchedule"}
    ]
    admin.create(NODEPOOLS, pool)
    burst = deployment(
        "burst",
        BURST,
        {
            "nodeSelector": {BURST_LABEL: "true"},
            "tolerations": [{"key": BURST_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {"name": "pause", "image": IMAGE, "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}
            ],
        },
    )
    started = time.monotonic()
    admin.create(DEPLOYMENTS, burst, namespace="default")
    try:
        wait_for(
            "every burst pod bound to a node",
            lambda: not _waiting_for_a_node(admin, "burst") and _unbound(admin, "burst") == 0,
            max(4 * TICK_SECONDS, 3 * BURST),
            every=0.5 if BURST > 50 else 0.2,
        )
        seconds = time.monotonic() - started
        woken = api.accepted - accepted
        webhook_calls = _webhook_calls(runtime) - calls
        claims = [c for c in admin.list(NODECLAIMS) if c["metadata"]["labels"].get(NODEPOOL_LABEL) == "burst"]
        hosts = {p["spec"]["nodeName"] for p in _burst_pods(admin, "burst")}
        print(
            f"burst of {BURST}: {webhook_calls} webhook calls, {woken} wake-ups, "
            f"{len(claims)} NodeClaims, all bound in {seconds:.1f}s"
        )
        # The calls: the scheduler's FailedScheduling Events, no more (a status write or a
        # series repeat never leaves the API server; a call retried after a connection reset is
        # the same Event again).
        reviews = _url(runtime).admitted[admitted_before:]
        assert webhook_calls >= 1
        assert {(op, kind, reason, who) for op, kind, _, reason, who in reviews} == {
            ("CREATE", "Event", "FailedScheduling", "default-scheduler")
        }
        assert {name for _, _, name, _, _ in reviews} <= {
            e["metadata"]["name"] for e in _failed_scheduling(admin, "burst")
        }
        # At most one wake-up per container per coalescing window.
        windows = int(seconds / COALESCE_SECONDS) + 1
        assert 1 <= woken <= min(webhook_calls, WEBHOOK_CONCURRENCY * windows), (woken, seconds)
        assert claims, "the burst got NodeClaims of its own NodePool"
        assert not _overlapping(runtime, "provisioner"), "one writer: no two provisioner invocations at once"
        pools = {admin.get_node(name)["metadata"]["labels"].get(NODEPOOL_LABEL) for name in hosts}
        assert pools == {"burst"}, f"burst pods only on the burst pool's nodes: {pools}"
    finally:
        admin.delete(DEPLOYMENTS, "burst", namespace="default")


def _failed_scheduling(admin: Any, app: str) -> list[dict[str, Any]]:
    """The FailedScheduling Events kube-scheduler (simulated) created about ``app``'s pods."""
    from nodewright.cluster.resources import Resource

    events = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
    return [
        e
        for e in admin.list(events, namespace="default")
        if e.get("reason") == "FailedScheduling"
        and e.get("reportingController") == "default-scheduler"
        and (e.get("regarding") or {}).get("name", "").startswith(f"{app}-")
    ]


def _overlapping(runtime: Runtime, function: str) -> list[tuple[float, float]]:
    """Pairs of (start, previous end) where an invocation of ``function`` began before the one
    before it ended: the wake-ups and the schedule arrive through one throttled container."""
    runs = sorted((i.started, i.started + i.seconds) for i in runtime.invocations if i.function == function)
    return [(start, end) for (_, end), (start, _) in itertools.pairwise(runs) if start < end]


def _burst_pods(admin: Any, app: str) -> list[dict[str, Any]]:
    return admin.list(PODS, namespace="default", label_selector=f"app={app}")


def _waiting_for_a_node(admin: Any, app: str) -> list[dict[str, Any]]:
    """``app``'s pods with no node yet, listed with kube-scheduler's field selector: the wait's cheap
    look (listing all 500 pods twice a second was a tenth of the module's CPU), before the full count."""
    return admin.list(PODS, namespace="default", label_selector=f"app={app}", field_selector="spec.nodeName=")


def _unbound(admin: Any, app: str) -> int:
    pods = _burst_pods(admin, app)
    return BURST - sum(
        1 for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    )


def _load(path: str) -> dict[str, Any]:
    with open(path) as file:
        return yaml.safe_load(file)


def _get(sb: Any, resource: str) -> dict[str, Any]:
    answer = kubectl(sb.kubeconfig_path, "get", resource, "default", "-o", "json")
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout)


def test_the_secret_rotates_without_an_outage(idle: tuple[Any, Runtime]) -> None:
    """docs/deploy.md's rotation: put-secret-value, then install-webhooks --apply. Meanwhile the
    API server keeps calling the old path, which stays accepted (AWSPREVIOUS, the rotation window);
    the warm containers pick up the new secret without a redeploy; the configuration with the new
    path is answered (conversion, which has no failurePolicy, proves every call was); closing the
    window (the AWSPREVIOUS label removed) refuses the old path."""
    import ssl

    from nodewright.api import webhooks
    from nodewright.cluster import install
    from nodewright.cluster.resources import CRDS, VALIDATING_WEBHOOKS

    from sandbox.runtime.wakeup import FunctionUrl, make_secret

    sb, runtime = idle
    (url,) = [t for t in runtime.triggers if isinstance(t, FunctionUrl)]
    admin = sb.admin_cluster()
    installed = admin.get(VALIDATING_WEBHOOKS, webhooks.CONFIGURATION_NAME)
    old = installed["webhooks"][0]["clientConfig"]["url"].rstrip("/").split("/")[-2]
    context = ssl.create_default_context(cadata=url.cert.ca_pem.decode())
    # Allowed, and rings for nothing: only the path is being tried.
    review = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "rotation",
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            },
        }
    ).encode()

    def status(secret: str) -> int:
        request = urllib.request.Request(f"{url.url}{secret}/admit", data=review, method="POST")
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    secrets = sb.aws_client("secretsmanager")
    try:
        arn = runtime.function_envs["webhook"]["WEBHOOK_SECRET_ARN"]
        new = make_secret()
        secrets.put_secret_value(SecretId=arn, SecretString=new)

        assert status(old) == 200
        wait_for(
            "a warm container to accept the new secret",
            lambda: status(new) == 200,
            SECRET_MAX_AGE_SECONDS + 30,
        )
        resources = {r.kind: r for r in (CRDS, VALIDATING_WEBHOOKS)}
        for document in webhooks.install_documents(
            webhooks.endpoint(url.url, new, webhooks.ADMIT_PATH),
            webhooks.endpoint(url.url, new, webhooks.CONVERT_PATH),
            url.cert.ca_data,
        ):
            install.apply(admin, resources[document["kind"]], document)
        assert _get(sb, "nodepools.v1beta1.karpenter.sh")["apiVersion"] == "karpenter.sh/v1beta1"
        assert status(old) == 200  # still inside the window

        versions = secrets.describe_secret(SecretId=arn)["VersionIdsToStages"]
        (previous,) = [v for v, stages in versions.items() if "AWSPREVIOUS" in stages]
        secrets.update_secret_version_stage(
            SecretId=arn, VersionStage="AWSPREVIOUS", RemoveFromVersionId=previous
        )
        wait_for("the old path refused", lambda: status(old) == 404, SECRET_MAX_AGE_SECONDS + 30)
        assert status(new) == 200
        assert _get(sb, "nodepools.v1beta1.karpenter.sh")["apiVersion"] == "karpenter.sh/v1beta1"
    finally:
        secrets.close()


def test_an_unreachable_webhook_changes_nothing_and_the_schedule_still_provisions(
    idle: tuple[Any, Runtime],
) -> None:
    from sandbox.runtime.wakeup import FunctionUrl

    sb, runtime = idle
    admin = sb.admin_cluster()
    (url,) = [t for t in runtime.triggers if isinstance(t, FunctionUrl)]
    url.stop()  # the API server cannot reach the URL any more (failurePolicy Ignore)
    # An invocation an earlier wake-up started may still be looping (it would plan this test's pod
    # itself): this test starts once the wake-ups are over, so only ticks can plan.
    wait_for("the earlier wake-ups to end", lambda: _lambda_api(runtime).in_flight == 0, TICK_SECONDS + 15)
    # Conversion has no failurePolicy: a v1beta1 request fails as kube-apiserver fails it; v1 is
    # the storage version and never calls the webhook.
    refused = kubectl(sb.kubeconfig_path, "get", "nodepools.v1beta1.karpenter.sh", "default")
    assert refused.returncode == 1
    assert "Error from server: conversion webhook for karpenter.sh/v1, Kind=NodePool failed" in refused.stderr
    assert _get(sb, "nodepools.v1.karpenter.sh")["apiVersion"] == "karpenter.sh/v1"
    accepted = _lambda_api(runtime).accepted
    claims = len(admin.list(NODECLAIMS))
    assert kubectl(sb.kubeconfig_path, "create", "deployment", "ticked", f"--image={IMAGE}").returncode == 0
    assert (
        kubectl(sb.kubeconfig_path, "set", "resources", "deployment", "ticked", "--requests=cpu=3").returncode
        == 0
    )

    wait_for("a NodeClaim from a tick", lambda: len(admin.list(NODECLAIMS)) > claims, 2 * TICK_SECONDS + 15)

    # The provisioner is invoked by its schedule and by wake-ups only: none was accepted since the
    # earlier ones ended, so a tick planned it (waiting for that tick's own report would cost up to
    # a minute more).
    assert _lambda_api(runtime).accepted == accepted
    assert _lambda_api(runtime).in_flight == 0


def _url(runtime: Runtime) -> Any:
    from sandbox.runtime.wakeup import FunctionUrl

    (url,) = [t for t in runtime.triggers if isinstance(t, FunctionUrl)]
    return url


def _webhook_calls(runtime: Runtime) -> int:
    """The API server's calls to the wake-up (its conversion calls, also on the URL, not counted)."""
    return int(_url(runtime).requests["admit"])


def _ready(sb: Any, deployment: str) -> str:
    return kubectl(
        sb.kubeconfig_path, "get", "deployment", deployment, "-o", "jsonpath={.status.readyReplicas}"
    ).stdout
