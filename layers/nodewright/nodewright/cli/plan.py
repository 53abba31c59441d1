"""``nodewright plan --manifests DIR_OR_FILES [--region R] [--json]``: an offline what-if.

Pods/Deployments + NodePools + EC2NodeClasses in (any Karpenter version: old ones are converted
as ``nodewright convert`` converts them), the NodeClaims the provisioner would create out (NodePool,
candidate instance types cheapest first, zones, capacity types, $/h), and a reason for every pod
that would stay pending. No cluster is needed. The catalog is the project's own catalog code
(``nodewright.cloud.catalog``) over an offline copy of the EC2 catalog when one is installed (the
development install registers moto's bundled copy, priced as the sandbox is, through the
``nodewright.offline_catalog`` entry point), else over EC2 itself (read-only calls with your AWS
credentials; ``--live`` forces that); ``--prices FILE`` sets on-demand prices, the rest are the
documented estimate. The planning path is the provisioner's own.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
OFFLINE_CATALOG_GROUP = "nodewright.offline_catalog"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="offline what-if: the NodeClaims Nodewright would launch for these manifests",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--manifests", nargs="+", required=True, metavar="DIR_OR_FILE", help="manifest files or directories"
    )
    parser.add_argument("--region", default="us-west-2", help="region whose catalog and zones to use")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--live",
        action="store_true",
        help="ask EC2 for the catalog (read-only, your AWS credentials) even if an offline one is installed",
    )
    parser.add_argument("--prices", metavar="FILE", help='on-demand prices as {"prices": {type: usd}}')
    parser.set_defaults(func=run)


def manifest_paths(items: list[str]) -> list[Path]:
    """Files as given; directories expanded to their YAML/JSON files (sorted, not recursive)."""
    paths: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            paths.extend(sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES))
        else:
            paths.append(path)
    return paths


def instance_types_source(region: str, prices_file: str | None, live: bool) -> Any:
    """``instance_types(nodeclass)`` over the production catalog code (``nodewright.cloud.catalog``).

    The catalog comes from an installed offline source (an entry point of the group
    ``nodewright.offline_catalog``, as the development install registers for moto's bundled copy of
    the real EC2 catalog) unless ``live``; otherwise from EC2 itself (DescribeInstanceTypes and
    DescribeInstanceTypeOfferings: read-only calls with the caller's AWS credentials). Prices: the
    offline source's, then ``--prices FILE``, else the production estimate.
    """
    from nodewright.cloud.catalog import Catalog
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.cloud.state import InMemoryStateStore

    store = InMemoryStateStore()
    offline = None if live else _offline_source()
    if offline is not None:
        try:
            data, table = offline(region)
        except LookupError as exc:
            raise SystemExit(f"nodewright plan: {exc}") from exc
        store.put_price_table(table)
        catalog = Catalog(None, store, (region, "nodewright-plan"), loader=lambda _ec2: data)
    else:
        from nodewright.cloud import aws
        from nodewright.settings import Settings

        settings = Settings(cluster_name="plan", region=region)
        catalog = Catalog(aws.client("ec2", settings), store, (region, settings.aws_endpoint_url))
    if prices_file:
        store.put_price_table(PriceTable.from_ondemand_file(prices_file))

    def instance_types(nodeclass: Any) -> list[Any]:
        return catalog.instance_types(zones=None, kubelet=(nodeclass.get("spec") or {}).get("kubelet"))

    return instance_types


def _offline_source() -> Any:
    """The first installed ``nodewright.offline_catalog`` entry point, or None."""
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=OFFLINE_CATALOG_GROUP), key=lambda e: e.name):
        try:
            return entry.load()
        except ModuleNotFoundError:
            continue  # its package is not installed here
    return None


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from nodewright.observability import logger_level
    from nodewright.provisioning.whatif import what_if

    paths = manifest_paths(args.manifests)
    missing = [str(p) for p in paths if not p.exists()]
    if missing or not paths:
        print(
            f"nodewright plan: no such file or directory: {', '.join(missing) or args.manifests}",
            file=sys.stderr,
        )
        return 2
    with logger_level("ERROR"):  # the function's JSON logs would garble the plan on stdout
        result = what_if(paths, instance_types_source(args.region, args.prices, args.live))
    print(json.dumps(result.to_json(), indent=2, sort_keys=True) if args.json else result.render())
    return 0
