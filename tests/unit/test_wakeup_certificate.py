"""The private wake-up's certificate: made for the load balancer's name, trusted as its own caBundle
by a TLS client that checks names as kube-apiserver does, and the custom resource that imports it
into ACM (moto) and deletes it with the stack, always answering CloudFormation."""

from __future__ import annotations

import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from nodewright.spec.iam import certificate_tags
from nodewright.wakeup.certificate import self_signed

from sandbox.runtime.lambdas import LambdaContext, load_function

NAME = "internal-nodewright-1234567890.eu-west-1.elb.amazonaws.com"


def _handshake(certificate: str, private_key: str, ca_bundle: str, server_name: str) -> None:
    """Serve TLS on 127.0.0.1 with ``certificate``; connect trusting ``ca_bundle`` only and checking
    the certificate names ``server_name`` (as Go's crypto/tls does for a webhook URL's host)."""
    with tempfile.TemporaryDirectory() as folder:
        cert_file, key_file = Path(folder) / "tls.crt", Path(folder) / "tls.key"
        cert_file.write_text(certificate)
        key_file.write_text(private_key)
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert_file, key_file)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        try:
            with server_context.wrap_socket(connection, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_context = ssl.create_default_context(cadata=ca_bundle)
    client_context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            client_context.wrap_socket(raw, server_hostname=server_name) as tls,
        ):
            tls.sendall(b"x")
    finally:
        listener.close()
        thread.join(timeout=10)


def test_the_certificate_is_trusted_for_the_load_balancers_name_and_no_other() -> None:
    made = self_signed("localhost", "demo")
    _handshake(made.certificate, made.private_key, made.certificate, "localhost")
    with pytest.raises(ssl.SSLCertVerificationError, match=r"mismatch|doesn.t match"):
        _handshake(made.certificate, made.private_key, made.certificate, "internal-other.elb.amazonaws.com")
    stranger = self_signed("localhost", "other")
    with pytest.raises(ssl.SSLCertVerificationError, match=r"self-signed|self signed"):
        _handshake(made.certificate, made.private_key, stranger.certificate, "localhost")


def test_the_certificate_names_exactly_the_dns_name_for_ten_years_with_an_elb_usable_key() -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    made = self_signed(NAME, "a-cluster-name-long-enough-to-need-its-common-name-cut-at-64-characters")
    certificate = x509.load_pem_x509_certificate(made.certificate.encode())
    assert [a.value for a in certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)] == [NAME]
    longest = f"internal-{'n' * 32}-1234567890.ap-southeast-5.elb.amazonaws.com"  # over 64: no common name
    long_made = x509.load_pem_x509_certificate(self_signed(longest, "demo").certificate.encode())
    assert long_made.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME) == []
    assert long_made.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value.get_values_for_type(x509.DNSName) == [longest]
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [NAME]
    assert certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    key = certificate.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    assert key.curve.name == "secp256r1"  # ACM imports it and ALB serves it (ECDSA P-256)
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert lifetime.days >= 3650
    assert made.private_key.startswith("-----BEGIN PRIVATE KEY-----")
    with pytest.raises(ValueError, match="not a DNS name"):
        self_signed("two words", "demo")


@pytest.fixture
def function(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[dict[str, Any]], Any]]:
    """The custom resource's handler with moto's ACM; what it answers CloudFormation is recorded."""
    for key, value in {
        "CLUSTER_NAME": "demo",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        app = load_function("wakeup_certificate")
        answers: list[dict[str, Any]] = []

        def answer(
            event: dict[str, Any], status: str, reason: str, physical_id: str, data: Any = None
        ) -> None:
            answers.append({"status": status, "reason": reason, "physical": physical_id, "data": data or {}})

        monkeypatch.setattr(app, "send_custom_resource_response", answer)
        yield app, answers, boto3.client("acm", "eu-west-1")


def _event(kind: str, dns_name: str, physical: str | None = None, old: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": kind,
        "RequestId": "r-1",
        "StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/Nodewright-demo/1",
        "LogicalResourceId": "Certificate",
        "ResponseURL": "https://cloudformation-custom-resource-response.s3.amazonaws.com/presigned-secret",
        "ResourceProperties": {"ServiceToken": "arn", "DnsName": dns_name},
    }
    if physical:
        event["PhysicalResourceId"] = physical
    if old:
        event["OldResourceProperties"] = {"ServiceToken": "arn", "DnsName": old}
    return event


def test_create_imports_a_tagged_certificate_for_the_name_and_delete_removes_it(
    function: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    app, answers, acm = function
    app.handler(_event("Create", NAME), LambdaContext(300, "wakeup_certificate"))
    (created,) = answers
    assert created["status"] == "SUCCESS"
    arn = created["physical"]
    assert created["data"] == {"CertificateArn": arn}
    described = acm.describe_certificate(CertificateArn=arn)["Certificate"]
    assert described["DomainName"] == NAME
    assert described["SubjectAlternativeNames"] == [NAME]
    tags = {t["Key"]: t["Value"] for t in acm.list_tags_for_certificate(CertificateArn=arn)["Tags"]}
    assert tags == certificate_tags("demo")
    assert "BEGIN CERTIFICATE" in acm.get_certificate(CertificateArn=arn)["Certificate"]

    app.handler(_event("Update", NAME, arn, old=NAME), LambdaContext(300, "wakeup_certificate"))
    assert answers[-1] == {
        "status": "SUCCESS",
        "reason": "unchanged",
        "physical": arn,
        "data": {"CertificateArn": arn},
    }
    app.handler(_event("Update", "internal-new.elb.amazonaws.com", arn, old=NAME), LambdaContext(300))
    replaced = answers[-1]["physical"]
    assert replaced != arn  # CloudFormation then deletes the old one, once the listener moved

    app.handler(_event("Delete", NAME, arn), LambdaContext(300))
    assert answers[-1]["status"] == "SUCCESS"
    assert arn not in {c["CertificateArn"] for c in acm.list_certificates()["CertificateSummaryList"]}
    app.handler(_event("Delete", NAME, arn), LambdaContext(300))
    assert (answers[-1]["status"], answers[-1]["reason"]) == ("SUCCESS", "already gone")
    written = capsys.readouterr().out
    assert "presigned-secret" not in written  # the event is never logged whole
    assert "PRIVATE KEY" not in written


def test_a_failed_create_answers_failed_and_its_rollback_deletes_nothing(function: Any) -> None:
    app, answers, _ = function
    app.handler(_event("Create", "two words"), LambdaContext(300))
    (failed,) = answers
    assert failed["status"] == "FAILED"
    assert "not a DNS name" in failed["reason"]
    app.handler(_event("Delete", "two words", failed["physical"]), LambdaContext(300))
    assert (answers[-1]["status"], answers[-1]["reason"]) == ("SUCCESS", "no certificate was made")


def test_a_certificate_still_in_use_is_deleted_once_the_listener_lets_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.exceptions import ClientError
    from nodewright.cloud import aws, wakeup
    from nodewright.settings import Settings

    in_use = ClientError(
        {"Error": {"Code": "ResourceInUseException", "Message": "in use"}}, "DeleteCertificate"
    )
    answers: list[Any] = [in_use, in_use, {}]

    class Acm:
        def delete_certificate(self, CertificateArn: str) -> Any:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    monkeypatch.setattr(aws, "client", lambda service, settings, **_: Acm())
    clock = [0.0]
    settings = Settings(cluster_name="demo", region="eu-west-1")

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    assert wakeup.delete_certificate(settings, "arn:aws:acm:x", 60, sleep=sleep, monotonic=lambda: clock[0])
    assert clock[0] == 2 * wakeup.CERTIFICATE_IN_USE_RETRY_SECONDS
    answers[:] = [in_use] * 10
    clock[0] = 0.0
    with pytest.raises(ClientError, match="in use"):
        wakeup.delete_certificate(settings, "arn:aws:acm:x", 25, sleep=sleep, monotonic=lambda: clock[0])
