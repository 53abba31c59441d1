"""``nodewright install-webhooks --cluster NAME [--stack S] [--apply | --uninstall]``: the webhooks.

Reads the stack's outputs (``NodewrightWakeupMode``, ``NodewrightWebhookUrl``,
``NodewrightWebhookSecretArn``, and in private mode ``NodewrightWakeupCertificateArn``) and the
secret, with your AWS credentials, and prints what points the API server at the stack's wake-up URL
(``kubectl apply -f -`` ready): the ValidatingWebhookConfiguration that wakes the provisioner when a
pod becomes unschedulable, and the NodePool and EC2NodeClass CRDs serving ``v1beta1`` next to
``v1`` through the conversion webhook (v1 stays the storage version). With ``-c wakeup=public``
that URL is the function URL (a public CA signs its certificate); with ``-c wakeup=private`` it is
the internal load balancer's, and the stack's own certificate, read from ACM, is rendered as each
webhook's ``caBundle``. ``--apply`` applies them with your kubeconfig instead; ``--uninstall``
deletes the webhook configuration and puts the CRDs back to v1 only (pods then wait for the minute
schedule; v1beta1 manifests go through ``nodewright convert`` again; no NodePool or EC2NodeClass is
touched). The printed YAML holds the secret path: treat it as a credential (docs/deploy.md, threat
model).

With ``-c wakeup=false`` there is nothing to install: it says so and exits 0 (the CRDs stay v1
only, as ``kubectl apply -f crds/`` installs them; ``--uninstall`` still takes out what an earlier
install left). Exit status 1 with the reason when the stack cannot be read, and with one line saying
what to do when AWS or the API server cannot be reached or refuses (no credentials, an unusable
kubeconfig, 401/403).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodewright.settings import Settings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "install-webhooks",
        help="print or apply the API server's wake-up webhook and CRD conversion for a deployed stack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", required=True, help="the EKS cluster name (the stack's clusterName)")
    parser.add_argument("--region", default=None, help="AWS region (default: AWS_REGION)")
    parser.add_argument("--stack", default=None, help="stack name (default: Nodewright-<cluster>)")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig for --apply/--uninstall")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--apply", action="store_true", help="apply it to the cluster (else: print YAML)")
    action.add_argument("--uninstall", action="store_true", help="delete it from the cluster")
    parser.set_defaults(func=run)


KUBECONFIG_SETTING = "--kubeconfig (or KUBECONFIG)"


def run(args: argparse.Namespace) -> int:
    import yaml

    from nodewright.cli import _errors
    from nodewright.settings import Settings

    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
    if not region:
        print("nodewright install-webhooks: no region: pass --region or set AWS_REGION", file=sys.stderr)
        return 1
    settings = Settings(
        cluster_name=args.cluster,
        region=region,
        kubeconfig=args.kubeconfig or os.environ.get("KUBECONFIG"),
        aws_endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
    )
    client: Any = None
    try:
        if args.uninstall:
            client = _connect(settings)
            return _uninstall(client)
        documents = _documents(args, settings)
        if isinstance(documents, int):
            return documents
        if not args.apply:
            sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
            return 0
        client = _connect(settings)
        return _apply(client, documents)
    except _errors.stopping_errors() as exc:  # AWS or the API server: unreachable, refusing, no credentials
        line = _errors.one_line(exc, args.cluster, needs="admin", host=client.host if client else "")
        print(f"nodewright install-webhooks: {line}", file=sys.stderr)
        return 1


def _documents(args: argparse.Namespace, settings: Settings) -> list[dict[str, Any]] | int:
    """What points the API server at the stack's wake-up URL; else the exit status (the reason
    printed): 1 when there is no such stack, 0 when its wake-up is off."""
    import base64

    from nodewright.api import webhooks
    from nodewright.cloud import readiness
    from nodewright.cloud.wakeup import certificate_pem, read_secret

    stack = args.stack or f"Nodewright-{args.cluster}"
    outputs = readiness.stack_outputs(readiness.default_clients(settings), stack)
    if outputs is None:
        print(f"nodewright install-webhooks: no stack {stack} in {settings.region}", file=sys.stderr)
        return 1
    mode = readiness.wakeup_mode(outputs)
    url = outputs.get(readiness.OUTPUT_WEBHOOK_URL, readiness.NONE)
    secret_arn = outputs.get(readiness.OUTPUT_WEBHOOK_SECRET, readiness.NONE)
    if mode == readiness.OFF or readiness.NONE in (url, secret_arn):
        print(
            f"nodewright install-webhooks: nothing to install: stack {stack} has the wake-up off (-c "
            "wakeup=false), so pods get nodes on the minute schedule and the CRDs serve v1 only (convert "
            "v1beta1 manifests with `nodewright convert`). If an earlier install left the wake-up's "
            f"configuration or converting CRDs: nodewright install-webhooks --cluster {args.cluster} "
            "--uninstall",
            file=sys.stderr,
        )
        return 0
    ca_bundle = None
    if mode == readiness.PRIVATE:
        certificate = outputs.get(readiness.OUTPUT_WAKEUP_CERTIFICATE, readiness.NONE)
        if certificate == readiness.NONE:
            print(
                f"nodewright install-webhooks: stack {stack} is private but names no certificate",
                file=sys.stderr,
            )
            return 1
        # The stack's own certificate is the API server's trust anchor for this one name.
        ca_bundle = base64.b64encode(certificate_pem(settings, certificate).encode()).decode()
    secret = read_secret(settings, secret_arn)
    return webhooks.install_documents(
        webhooks.endpoint(url, secret, webhooks.ADMIT_PATH),
        webhooks.endpoint(url, secret, webhooks.CONVERT_PATH),
        ca_bundle,
    )


def _connect(settings: Settings) -> Any:
    """The operator's own client: the kubeconfig's identity, else an EKS token from AWS credentials."""
    from nodewright import cluster

    return cluster.connect(settings, kubeconfig_setting=KUBECONFIG_SETTING)


def _apply(client: Any, documents: list[dict[str, Any]]) -> int:
    from nodewright.cluster import install
    from nodewright.cluster.resources import CRDS, VALIDATING_WEBHOOKS

    resources = {r.kind: r for r in (CRDS, VALIDATING_WEBHOOKS)}
    for document in documents:
        done = install.apply(client, resources[document["kind"]], document)
        print(f"{document['kind'].lower()}/{document['metadata']['name']} {done}")
    return 0


def _uninstall(client: Any) -> int:
    """What the removal at ``cdk destroy`` does (``cluster.install.uninstall_webhooks``): one rule.
    The CRDs are patched back to serving ``v1`` only, never replaced: a CRD whose
    ``status.storedVersions`` still lists ``v1beta1`` (a cluster Karpenter ran before v1) refuses a
    replacement without that version."""
    from nodewright.cluster import install

    for line in install.uninstall_webhooks(client):
        print(line)
    return 0
