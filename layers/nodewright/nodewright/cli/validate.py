"""``nodewright validate FILE...``: check NodePool/EC2NodeClass/NodeClaim manifests (any Karpenter version).

For each document it prints OK (or INVALID) with every error and warning as ``file#doc: path: message``,
and for valid Karpenter documents their v1 form with Karpenter's defaults filled in, as the cluster
would store it (``--quiet`` leaves it out). A directory stands for its *.yaml/*.yml files. Exit status 1
when any document is invalid or a file holds no document, 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="validate Karpenter manifests (v1, v1beta1, v1alpha5) and print their v1 form",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="YAML manifest files (multi-document allowed)"
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="do not print the v1 form of valid documents"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from nodewright.api.manifests import validate_files
    from nodewright.api.models import load_object
    from nodewright.api.validation import is_v1_kind

    report = validate_files(args.files)
    out = sys.stdout
    for document in report.documents:
        status = "OK" if document.ok else "INVALID"
        karpenter = any(is_v1_kind(d) for d in document.v1) or not document.ok
        note = "" if karpenter else "  (not a Karpenter object: passed through unchecked)"
        print(f"{status}  {document.source.label}{note}", file=out)
        for finding in document.findings:
            print(
                f"  {finding.severity}: {document.source.file}#{document.source.index}: {finding}", file=out
            )
        if not document.ok or args.quiet:
            continue  # an invalid document has no v1 form to show (and may not even have its shape)
        v1 = [
            d if i in document.partial else load_object(d).to_dict()
            for i, d in enumerate(document.v1)
            if is_v1_kind(d)
        ]
        if v1:
            text = yaml.safe_dump_all(v1, sort_keys=False, explicit_start=True)
            print("    " + text.rstrip("\n").replace("\n", "\n    "), file=out)
    invalid = sum(1 for d in report.documents if not d.ok)
    print(
        f"{len(report.documents)} document(s): {invalid} invalid, {report.errors} error(s), "
        f"{report.warnings} warning(s)",
        file=out,
    )
    return 0 if report.ok else 1
