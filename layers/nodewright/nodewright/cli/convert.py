"""``nodewright convert FILE...``: print the karpenter.sh/v1 and karpenter.k8s.aws/v1 form of manifests.

Multi-document in, multi-document YAML out on stdout (ready for ``kubectl apply -f -``); warnings and
errors go to stderr as ``file#doc: path: message``. Other documents (Pods, Deployments) pass through.
Kubelet settings of a Provisioner/NodePool join the EC2NodeClass they reference when that class is among
the inputs. The v1 form is validated too: its errors go to stderr and make the exit status 1 (every
document is still printed).
"""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert v1beta1/v1alpha5 Karpenter manifests to v1 YAML",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="YAML manifest files (multi-document allowed)"
    )
    parser.add_argument(
        "--role",
        default=os.environ.get("NODEWRIGHT_NODE_ROLE"),
        metavar="NAME",
        help="node IAM role for EC2NodeClasses that name neither role nor instanceProfile (the seeds "
        "name none); default $NODEWRIGHT_NODE_ROLE; without it such a class is an error",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from collections import Counter

    import yaml

    from nodewright.api.convert import Conversion, fill_node_role, merge_kubelet_pieces
    from nodewright.api.manifests import load_files, validate_loaded

    combined = Conversion()
    failed = False
    loaded = load_files(args.files)
    for document in loaded:
        if fill_node_role(document.doc, args.role):
            print(
                f"warning: {document.label}: spec.role: neither role nor instanceProfile was set; "
                f"using node role {args.role!r} (--role)",
                file=sys.stderr,
            )
    for report in (validate_loaded(d) for d in loaded):
        offset = len(combined.documents)
        combined.documents.extend(report.v1)
        combined.partial.extend(offset + i for i in report.partial)
        for finding in report.findings:
            failed = failed or finding.is_error
            print(
                f"{finding.severity}: {report.source.file}#{report.source.index}: {finding}", file=sys.stderr
            )
    merged = merge_kubelet_pieces(combined)
    for finding in merged.findings:
        print(f"{finding.severity}: {finding}", file=sys.stderr)
    for index in merged.partial:
        name = merged.documents[index]["metadata"]["name"]
        print(
            f"warning: EC2NodeClass {name!r} below holds only spec.kubelet (its full EC2NodeClass was not "
            "among the inputs): merge it into that EC2NodeClass before applying",
            file=sys.stderr,
        )
    names = Counter(
        (d.get("kind"), d["metadata"].get("name"))
        for d in merged.documents
        if isinstance(d, dict)
        and isinstance(d.get("kind"), str)
        and isinstance(d.get("metadata"), dict)
        and isinstance(d["metadata"].get("name"), str)
    )
    for (kind, name), count in sorted(names.items(), key=str):
        if count > 1:
            print(
                f"warning: {count} documents are {kind} {name!r}: applied together, the last one wins",
                file=sys.stderr,
            )
    sys.stdout.write(yaml.safe_dump_all(merged.documents, sort_keys=False, explicit_start=True))
    return 1 if failed else 0
