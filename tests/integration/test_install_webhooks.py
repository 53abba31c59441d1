"""``nodewright install-webhooks``: the stack's outputs and secret (moto) in, the wake-up's
ValidatingWebhookConfiguration and the converting NodePool/EC2NodeClass CRDs out (printed, or
applied to the emulator and removed again: the CRDs back to v1 only)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import kubernetes
import pytest
import yaml
from kubernetes import config
from moto import mock_aws
from nodewright.api import webhooks
from nodewright.cli import main
from nodewright.wakeup.certificate import self_signed

from sandbox.apiserver import ApiServer

REGION = "us-east-1"
FUNCTION_URL = "https://abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws/"
SECRET = "Zx9" * 16
PRIVATE_NAME = "internal-Nodewr-Wakeu-1a2b3c4d5e6f-1234567890.us-east-1.elb.amazonaws.com"


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        arn = boto3.client("secretsmanager", REGION).create_secret(Name="path", SecretString=SECRET)["ARN"]
        outputs = {"NodewrightWebhookUrl": FUNCTION_URL, "NodewrightWebhookSecretArn": arn}
        template = {
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
            "Outputs": {key: {"Value": value} for key, value in outputs.items()},
        }
        cloudformation = boto3.client("cloudformation", REGION)
        cloudformation.create_stack(StackName="Nodewright-demo", TemplateBody=json.dumps(template))
        template["Outputs"] = {key: {"Value": "none"} for key in outputs}
        template["Outputs"]["NodewrightWakeupMode"] = {"Value": "off"}
        cloudformation.create_stack(StackName="Nodewright-off", TemplateBody=json.dumps(template))
        # -c wakeup=private: the internal load balancer's URL and the certificate the stack imported.
        made = self_signed(PRIVATE_NAME, "private")
        certificate = boto3.client("acm", REGION).import_certificate(
            Certificate=made.certificate.encode(), PrivateKey=made.private_key.encode()
        )["CertificateArn"]
        private = {
            "NodewrightWakeupMode": "private",
            "NodewrightWebhookUrl": f"https://{PRIVATE_NAME}/",
            "NodewrightWebhookSecretArn": arn,
            "NodewrightWakeupCertificateArn": certificate,
        }
        template["Outputs"] = {key: {"Value": value} for key, value in private.items()}
        cloudformation.create_stack(StackName="Nodewright-private", TemplateBody=json.dumps(template))
        yield


def test_it_prints_the_configuration_with_the_secret_path_for_kubectl_apply(
    stack: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["install-webhooks", "--cluster", "demo"]) == 0

    document, *crds = yaml.safe_load_all(capsys.readouterr().out)
    (hook,) = document["webhooks"]
    assert document["kind"] == "ValidatingWebhookConfiguration"
    assert hook["clientConfig"] == {"url": f"{FUNCTION_URL}{SECRET}/admit"}
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 1
    (rule,) = hook["rules"]
    assert (rule["apiGroups"], rule["resources"], rule["operations"]) == (
        ["events.k8s.io", ""],
        ["events"],
        ["CREATE"],
    )
    assert [c["name"] for c in hook["matchConditions"]] == [
        "failed-scheduling",
        "regarding-a-pod",
        "not-nodewrights-own",
    ]
    assert [c["metadata"]["name"] for c in crds] == [
        "nodepools.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
    ]
    for crd in crds:
        served = {v["name"]: (v["served"], v["storage"]) for v in crd["spec"]["versions"]}
        assert served == {"v1": (True, True), "v1beta1": (True, False)}
        assert crd["spec"]["conversion"] == {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": f"{FUNCTION_URL}{SECRET}/convert"},
                "conversionReviewVersions": ["v1"],
            },
        }


def test_a_stack_with_the_wakeup_off_has_nothing_to_install(
    stack: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["install-webhooks", "--cluster", "off"]) == 0
    out, err = capsys.readouterr()
    assert out == ""  # nothing for kubectl apply
    assert err.startswith("nodewright install-webhooks: nothing to install")
    assert "wakeup=false" in err
    assert "install-webhooks --cluster off --uninstall" in err


def test_a_private_stack_renders_its_certificate_as_the_ca_bundle_for_the_load_balancers_url(
    stack: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64

    from cryptography import x509

    assert main(["install-webhooks", "--cluster", "private"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    configs = [
        (d["webhooks"][0]["clientConfig"]) for d in documents if d["kind"] == "ValidatingWebhookConfiguration"
    ]
    configs += [
        d["spec"]["conversion"]["webhook"]["clientConfig"]
        for d in documents
        if d["kind"] == "CustomResourceDefinition"
    ]
    assert len(configs) == 3
    pem = boto3.client("acm", REGION).get_certificate(
        CertificateArn=boto3.client("acm", REGION).list_certificates()["CertificateSummaryList"][0][
            "CertificateArn"
        ]
    )["Certificate"]
    for client_config in configs:
        assert client_config["url"].startswith(f"https://{PRIVATE_NAME}/{SECRET}/")
        bundle = base64.b64decode(client_config["caBundle"]).decode()
        assert bundle == pem
        # the name the API server checks (the URL's host) is the one the certificate carries
        names = x509.load_pem_x509_certificate(bundle.encode()).extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        )
        assert names.value.get_values_for_type(x509.DNSName) == [PRIVATE_NAME]


def test_a_missing_stack_is_named(stack: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install-webhooks", "--cluster", "nope"]) == 1
    assert "no stack Nodewright-nope" in capsys.readouterr().err


def test_apply_creates_then_configures_and_uninstall_removes_it(
    stack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ApiServer() as server:
        kubeconfig = str(server.write_kubeconfig(tmp_path / "config"))
        args = ["install-webhooks", "--cluster", "demo", "--kubeconfig", kubeconfig]
        assert main([*args, "--apply"]) == 0
        assert main([*args, "--apply"]) == 0
        out = capsys.readouterr().out
        assert "nodewright-wakeup created" in out
        assert "nodewright-wakeup configured" in out
        assert "customresourcedefinition/nodepools.karpenter.sh configured" in out
        crd_key = ("apiextensions.k8s.io", "customresourcedefinitions")
        pools: Any = server.store.get(crd_key, "", "nodepools.karpenter.sh")
        assert pools["spec"]["conversion"]["webhook"]["clientConfig"]["url"].endswith(f"/{SECRET}/convert")
        stored: Any = server.store.get(
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
            "",
            webhooks.CONFIGURATION_NAME,
        )
        assert stored["webhooks"][0]["clientConfig"]["url"].endswith(f"/{SECRET}/admit")

        assert main([*args, "--uninstall"]) == 0
        assert main([*args, "--uninstall"]) == 0
        out = capsys.readouterr().out
        assert "nodewright-wakeup deleted" in out
        assert "nodewright-wakeup not found" in out
        for name in webhooks.CONVERTED_CRDS:
            crd: Any = server.store.get(crd_key, "", name)
            assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"]
            assert crd["spec"]["conversion"] == {"strategy": "None"}
        assert server.store.get(crd_key, "", "nodeclaims.karpenter.sh") is None  # never installed here


def test_uninstall_keeps_a_version_the_cluster_still_stores_but_stops_serving_it(
    stack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster Karpenter ran before v1 lists v1beta1 in the CRDs' ``status.storedVersions``; the API
    server refuses a CRD without that version, so --uninstall patches rather than replaces: v1beta1
    stays, not served, and the conversion webhook (which names the URL) goes."""
    from kubernetes import client, config

    with ApiServer() as server:
        kubeconfig = str(server.write_kubeconfig(tmp_path / "config"))
        args = ["install-webhooks", "--cluster", "demo", "--kubeconfig", kubeconfig]
        assert main([*args, "--apply"]) == 0
        extensions = client.ApiextensionsV1Api(config.new_client_from_config(kubeconfig))
        for name in webhooks.CONVERTED_CRDS:
            extensions.patch_custom_resource_definition_status(
                name, {"status": {"storedVersions": ["v1beta1", "v1"]}}
            )
        capsys.readouterr()

        assert main([*args, "--uninstall"]) == 0

        assert "Traceback" not in capsys.readouterr().err
        for name in webhooks.CONVERTED_CRDS:
            crd: Any = server.store.get(("apiextensions.k8s.io", "customresourcedefinitions"), "", name)
            served = {v["name"]: v["served"] for v in crd["spec"]["versions"]}
            assert served == {"v1": True, "v1beta1": False}
            assert crd["spec"]["conversion"] == {"strategy": "None"}


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command printed: nothing on stdout, one line on stderr, no traceback."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    (line,) = captured.err.splitlines()
    assert line.startswith("nodewright install-webhooks: "), line
    return line


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("action", ["--uninstall", "--apply"])
def test_a_directory_as_kubeconfig_is_one_line_naming_it(
    stack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    assert main(["install-webhooks", "--cluster", "demo", "--kubeconfig", str(tmp_path), action]) == 1
    line = one_line_error(capsys)
    assert f"cannot load kubeconfig '{tmp_path}': it is a directory" in line
    assert "--kubeconfig" in line


def test_an_unreachable_api_server_is_one_line_naming_it(
    stack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ApiServer() as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "config")
    config = yaml.safe_load(kubeconfig.read_text())
    server_url = f"https://127.0.0.1:{closed_port()}"
    config["clusters"][0]["cluster"]["server"] = server_url
    kubeconfig.write_text(yaml.safe_dump(config))

    assert (
        main(["install-webhooks", "--cluster", "demo", "--kubeconfig", str(kubeconfig), "--uninstall"]) == 1
    )
    line = one_line_error(capsys)
    assert f"cannot reach the API server {server_url}" in line


@pytest.mark.parametrize("action", ["--uninstall", "--apply"])
@pytest.mark.parametrize("identity", ["unknown token", "no rights"])
def test_credentials_refused_by_the_api_server_are_one_line_with_the_fix(
    stack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str], identity: str, action: str
) -> None:
    with ApiServer() as server:
        token = "not-a-known-token" if identity == "unknown token" else server.add_identity("alice")
        kubeconfig = str(server.write_kubeconfig(tmp_path / "config", token=token))

        assert main(["install-webhooks", "--cluster", "demo", "--kubeconfig", kubeconfig, action]) == 1

    line = one_line_error(capsys)
    if identity == "unknown token":
        assert "401" in line
        assert "aws eks update-kubeconfig --name demo" in line
    else:
        assert 'User "alice" cannot' in line
        assert "AmazonEKSClusterAdminPolicy" in line


def test_no_aws_credentials_is_one_line_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nodewright.cloud import aws

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(aws, "_session", None)  # a new session: credentials are looked up again
    aws.reset_clients()
    try:
        assert main(["install-webhooks", "--cluster", "demo", "--region", REGION]) == 1
    finally:
        aws.reset_clients()
    line = one_line_error(capsys)
    assert "no AWS credentials" in line
    assert "aws configure" in line


def test_an_unreachable_aws_endpoint_is_one_line_naming_it(
    stack: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from nodewright.cloud.aws import reset_clients

    endpoint = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    reset_clients()
    try:
        assert main(["install-webhooks", "--cluster", "demo"]) == 1
    finally:
        reset_clients()
    line = one_line_error(capsys)
    assert f"cannot reach AWS at {endpoint}" in line


def test_apply_replaces_an_installed_pods_status_configuration_whole(
    stack: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster upgraded from the pods/status wake-up (which makes kube-scheduler wait for the
    URL): ``--apply`` leaves nothing of it, not a rule, not a matchCondition."""
    from bench.scheduler_stall import pods_status_configuration

    key = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
    with ApiServer() as server:
        kubeconfig = str(server.write_kubeconfig(tmp_path / "config"))
        old = pods_status_configuration(f"{FUNCTION_URL}{SECRET}/admit", "")
        old["webhooks"][0]["clientConfig"] = {"url": f"{FUNCTION_URL}{SECRET}/admit"}
        client = config.new_client_from_config(kubeconfig)
        kubernetes.client.AdmissionregistrationV1Api(client).create_validating_webhook_configuration(old)

        assert main(["install-webhooks", "--cluster", "demo", "--kubeconfig", kubeconfig, "--apply"]) == 0

        assert "nodewright-wakeup configured" in capsys.readouterr().out
        stored: Any = server.store.get(key, "", webhooks.CONFIGURATION_NAME)
        rendered = webhooks.wakeup_configuration(f"{FUNCTION_URL}{SECRET}/admit")
        (hook,) = stored["webhooks"]
        assert hook["rules"] == rendered["webhooks"][0]["rules"]
        assert hook["matchConditions"] == rendered["webhooks"][0]["matchConditions"]
        assert hook["timeoutSeconds"] == webhooks.TIMEOUT_SECONDS
        assert "pods/status" not in json.dumps(stored)
