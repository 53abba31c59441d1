"""The private wake-up's TLS certificate: self-signed, for the internal load balancer's DNS name.

kube-apiserver calls a webhook over HTTPS only and checks the server's certificate against the
configuration's ``caBundle`` (or the system roots when there is none) and its name against the
URL's host, by the certificate's subjectAltName (Go ignores the common name). An internal
Application Load Balancer's name (``internal-….elb.amazonaws.com``) is AWS's, so no public CA will
sign it for us, and AWS Private CA costs $400 a month (general-purpose) or $50 (short-lived mode).
So the stack makes its own at deploy time (``functions/wakeup_certificate``): a P-256 key and a
self-signed certificate naming exactly that DNS name, imported into ACM for the load balancer's
listener; the private key exists only in the function's memory and in ACM. The certificate is its
own trust anchor: ``nodewright install-webhooks`` reads it back from ACM (``acm:GetCertificate``)
and renders it as the ``caBundle``, so the API server trusts this one certificate for this one name,
not a CA that could sign others.

``cryptography`` is imported here only (the certificate function's own layer has it; no other
function needs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# Long enough never to expire under a stack in practice; nothing renews it (ACM does not renew an
# imported certificate). A redeploy that replaces the load balancer makes a new one; `nodewright
# doctor` warns a year before it ends (docs/deploy.md).
VALIDITY = timedelta(days=3650)
# Clocks differ: valid from a little before now, as certificate authorities do.
BACKDATE = timedelta(minutes=5)
ORGANIZATION = "Nodewright"
MAX_COMMON_NAME = 64


@dataclass(frozen=True)
class SelfSigned:
    """PEM texts: ``certificate`` (what the API server trusts) and ``private_key`` (PKCS#8)."""

    certificate: str
    private_key: str
    not_after: datetime


def self_signed(dns_name: str, cluster_name: str, now: datetime | None = None) -> SelfSigned:
    """A P-256 key and a certificate for ``dns_name`` signed by itself: subjectAltName the name
    (what kube-apiserver verifies), a CA (it is the ``caBundle``), serverAuth only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not dns_name or len(dns_name) > 253 or any(c.isspace() for c in dns_name):
        raise ValueError(f"{dns_name!r} is not a DNS name")
    now = now or datetime.now(UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    # The subjectAltName is what clients check. The common name (what ACM shows as the certificate's
    # domain) is the same name when it fits RFC 5280's 64 characters, and left out otherwise (ACM then
    # shows the first subjectAltName): a load balancer's name in a long region name does not fit.
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"{ORGANIZATION} {cluster_name}"[:64])]
    if len(dns_name) <= MAX_COMMON_NAME:
        attributes.insert(0, x509.NameAttribute(NameOID.COMMON_NAME, dns_name))
    name = x509.Name(attributes)
    not_after = now + VALIDITY
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return SelfSigned(
        certificate=certificate.public_bytes(serialization.Encoding.PEM).decode(),
        private_key=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode(),
        not_after=not_after,
    )
