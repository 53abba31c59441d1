"""The private wake-up (``-c wakeup=private``) end to end in the sandbox: the emulator calls the
webhook through the load balancer's stand-in (``sandbox.runtime.wakeup.LoadBalancer``) on
``https://localhost``, trusting only the certificate the stack makes for that name, which sits in
moto's ACM and is rendered as every webhook's ``caBundle`` as ``nodewright install-webhooks`` renders
it; the listener forwards only POST on the admit and convert paths, in the load balancer's Lambda
event shape. The v1beta1 seeds convert through it and an unschedulable pod wakes the idle
provisioner through it. What the sandbox does not model: the security group and routing between
the control plane and the load balancer (all is 127.0.0.1), checked by ``nodewright doctor``."""

from __future__ import annotations

import base64
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from nodewright.api import webhooks
from nodewright.cluster.resources import CRDS, NODECLAIMS, VALIDATING_WEBHOOKS
from test_wakeup_sandbox import IDLE_AFTER_SECONDS, IMAGE, SEED_NODECLASS, SEED_NODEPOOL, TICK_SECONDS
from waiting import wait_for

from sandbox.apiserver.testing import KUBECTL, kubectl
from sandbox.harness import CLUSTER
from sandbox.runtime.stack import Runtime

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which(KUBECTL), reason="kubectl is not installed"),
]


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[Any, Runtime, Any]]:
    from sandbox import Sandbox
    from sandbox.runtime.wakeup import LoadBalancer

    with Sandbox(cluster_name=CLUSTER, boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        runtime = Runtime(
            sb,
            functions=("provisioner", "webhook"),
            schedules={"provisioner": TICK_SECONDS},
            env={"IDLE_AFTER_SECONDS": str(IDLE_AFTER_SECONDS)},
            wakeup_mode="private",
        ).start()
        try:
            (balancer,) = [t for t in runtime.triggers if isinstance(t, LoadBalancer)]
            wait_for(
                "the v1beta1 seeds applied through the private load balancer",
                lambda: (
                    kubectl(sb.kubeconfig_path, "apply", "-f", SEED_NODECLASS, "-f", SEED_NODEPOOL).returncode
                    == 0
                ),
                TICK_SECONDS,
            )
            wait_for(
                "the first tick to end idle",
                lambda: any(
                    i.function == "provisioner" and (i.result or {}).get("idle") for i in runtime.invocations
                ),
                TICK_SECONDS - 5,
            )
            yield sb, runtime, balancer
        finally:
            runtime.stop()


def _webhook_invocations(runtime: Runtime) -> int:
    return sum(1 for i in runtime.invocations if i.function == "webhook")


def test_the_installed_webhooks_call_the_load_balancer_trusting_the_stacks_certificate_from_acm(
    private: tuple[Any, Runtime, Any],
) -> None:
    sb, _runtime, balancer = private
    admin = sb.admin_cluster()
    acm = sb.aws_client("acm")
    try:
        pem = acm.get_certificate(CertificateArn=balancer.certificate_arn)["Certificate"]
        tags = {
            t["Key"]: t["Value"]
            for t in acm.list_tags_for_certificate(CertificateArn=balancer.certificate_arn)["Tags"]
        }
    finally:
        acm.close()
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    bundle = base64.b64encode(pem.encode()).decode()
    configuration = admin.get(VALIDATING_WEBHOOKS, webhooks.CONFIGURATION_NAME)
    client_configs = [h["clientConfig"] for h in configuration["webhooks"]]
    for name in webhooks.CONVERTED_CRDS:
        client_configs.append(admin.get(CRDS, name)["spec"]["conversion"]["webhook"]["clientConfig"])
    for client_config in client_configs:
        assert client_config["url"].startswith(
            f"https://localhost:{balancer.url.rsplit(':', 1)[1].rstrip('/')}/"
        )
        assert client_config["caBundle"] == bundle  # the stack's own certificate, nothing else


def test_the_listener_forwards_only_post_on_admit_and_convert_and_answers_the_rest_itself(
    private: tuple[Any, Runtime, Any],
) -> None:
    _sb, runtime, balancer = private
    context = ssl.create_default_context(cadata=balancer.certificate)
    before = _webhook_invocations(runtime)
    for method, path in (("GET", "anything"), ("POST", "x" * 48 + "/other"), ("GET", "x" * 48 + "/admit")):
        request = urllib.request.Request(
            balancer.url + path, data=b"{}" if method == "POST" else None, method=method
        )
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, context=context, timeout=30)
        assert answer.value.code == 404
    assert _webhook_invocations(runtime) == before  # the load balancer's own 404: nothing invoked
    # A POST on an admit path reaches the function, which refuses a path without the secret.
    request = urllib.request.Request(balancer.url + "guess/admit", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(request, context=context, timeout=30)
    assert answer.value.code == 404
    assert _webhook_invocations(runtime) == before + 1
    # A client that trusts another certificate for the name refuses the handshake.
    from nodewright.wakeup.certificate import self_signed

    stranger = ssl.create_default_context(cadata=self_signed("localhost", "other").certificate)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(balancer.url + "x/admit", context=stranger, timeout=30)


def test_an_unschedulable_pod_wakes_the_idle_provisioner_through_the_load_balancer(
    private: tuple[Any, Runtime, Any],
) -> None:
    sb, runtime, balancer = private
    admin = sb.admin_cluster()
    admits = balancer.requests["admit"]
    assert kubectl(sb.kubeconfig_path, "create", "deployment", "woken", f"--image={IMAGE}").returncode == 0
    assert (
        kubectl(sb.kubeconfig_path, "set", "resources", "deployment", "woken", "--requests=cpu=1").returncode
        == 0
    )
    wait_for("a NodeClaim", lambda: admin.list(NODECLAIMS), 2 * TICK_SECONDS)
    woken = wait_for(
        "the woken invocation",
        lambda: [
            i.result
            for i in runtime.invocations
            if i.function == "provisioner" and i.ok and (i.result or {}).get("woken")
        ],
        TICK_SECONDS,
    )
    assert woken
    assert balancer.requests["admit"] > admits  # the API server called through the load balancer
