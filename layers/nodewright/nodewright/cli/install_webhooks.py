"""``nodewright install-webhooks --cluster NAME [--stack S] [--apply | --uninstall]``: the webhooks.

Reads the stack's outputs (``NodewrightWebhookUrl``, ``NodewrightWebhookSecretArn``) and the
secret, with your AWS credentials, and prints what points the API server at the function URL
(``kubectl apply -f -`` ready): the ValidatingWebhookConfiguration that wakes the provisioner when a
pod becomes unschedulable, and the NodePool and EC2NodeClass CRDs serving ``v1beta1`` next to
``v1`` through the conversion webhook (v1 stays the storage version). ``--apply`` applies them with
your kubeconfig instead; ``--uninstall`` deletes the webhook configuration and puts the CRDs back
to v1 only (pods then wait for the minute schedule; v1beta1 manifests go through ``nodewright
convert`` again; no NodePool or EC2NodeClass is touched). The printed YAML holds the secret path:
treat it as a credential (docs/deploy.md, threat model).

Exit status 1 with the reason when the stack has no wake-up (deployed with ``-c wakeup=false``: the
CRDs then stay v1 only, as ``kubectl apply -f crds/`` installs them) or cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodewright.settings import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
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


def run(args: argparse.Namespace) -> int:
    import yaml

    from nodewright.api import webhooks
    from nodewright.cloud import readiness
    from nodewright.cloud.wakeup import read_secret
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
    if args.uninstall:
        return _uninstall(settings)
    stack = args.stack or f"Nodewright-{args.cluster}"
    outputs = readiness.stack_outputs(readiness.default_clients(settings), stack)
    if outputs is None:
        print(f"nodewright install-webhooks: no stack {stack} in {region}", file=sys.stderr)
        return 1
    url = outputs.get(readiness.OUTPUT_WEBHOOK_URL, readiness.NONE)
    secret_arn = outputs.get(readiness.OUTPUT_WEBHOOK_SECRET, readiness.NONE)
    if readiness.NONE in (url, secret_arn):
        print(
            f"nodewright install-webhooks: stack {stack} has no wake-up (deployed with -c wakeup=false, or "
            "an older release): redeploy without it to get one; pods meanwhile get nodes on the schedule, "
            "and the CRDs serve v1 only (convert v1beta1 manifests with `nodewright convert`)",
            file=sys.stderr,
        )
        return 1
    secret = read_secret(settings, secret_arn)
    documents = webhooks.install_documents(
        webhooks.endpoint(url, secret, webhooks.ADMIT_PATH),
        webhooks.endpoint(url, secret, webhooks.CONVERT_PATH),
    )
    if not args.apply:
        sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False))
        return 0
    from nodewright import cluster
    from nodewright.cluster import install
    from nodewright.cluster.resources import CRDS, VALIDATING_WEBHOOKS

    resources = {r.kind: r for r in (CRDS, VALIDATING_WEBHOOKS)}
    client = cluster.connect(settings)
    for document in documents:
        done = install.apply(client, resources[document["kind"]], document)
        print(f"{document['kind'].lower()}/{document['metadata']['name']} {done}")
    return 0


def _uninstall(settings: Settings) -> int:
    from nodewright import cluster
    from nodewright.api import webhooks
    from nodewright.cluster import install
    from nodewright.cluster.resources import CRDS, VALIDATING_WEBHOOKS

    client = cluster.connect(settings)
    gone = install.remove(client, VALIDATING_WEBHOOKS, webhooks.CONFIGURATION_NAME)
    print(
        f"validatingwebhookconfiguration/{webhooks.CONFIGURATION_NAME} {'deleted' if gone else 'not found'}"
    )
    for crd in webhooks.v1_only_crds():
        name = crd["metadata"]["name"]
        if client.find(CRDS, name) is None:
            print(f"customresourcedefinition/{name} not installed (kubectl apply -f crds/)")
            continue
        install.apply(client, CRDS, crd)
        print(f"customresourcedefinition/{name} v1 only, no conversion webhook")
    return 0
