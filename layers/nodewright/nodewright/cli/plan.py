"""``nodewright plan --manifests DIR_OR_FILES [--region R] [--json]``: an offline what-if.

Pods/Deployments + NodePools + EC2NodeClasses in (any Karpenter version: old ones are converted
as ``nodewright convert`` converts them), the NodeClaims the provisioner would create out (NodePool,
candidate instance types cheapest first, zones, capacity types, $/h), and a reason for every pod
that would stay pending. No cluster and no AWS account: the catalog is the project's own catalog
code (``nodewright.cloud.catalog``) over moto's bundled EC2 catalog (the DescribeInstanceTypes items
and per-zone offerings moto ships for every region), priced by the sandbox's price source (real
on-demand prices when ../shared/data has them, a documented estimate otherwise; spot as a
documented discount). The planning path is the provisioner's own.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


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


def offline_instance_types(region: str) -> Any:
    """``instance_types(nodeclass)`` from the project's catalog code over moto's bundled EC2 catalog.

    moto ships the DescribeInstanceTypes items and the per-zone offerings of every region as data
    files; reading them directly takes a fraction of a second, where asking moto's emulated EC2
    for the same items takes half a minute on a busy 2-core machine. Prices come from the
    sandbox's price source. moto and the sandbox are development-side packages (``.[dev]``).
    """
    from nodewright.cli._offline import NoOfflineCatalog, catalog_data, offline_catalog
    from nodewright.cloud.pricetable import PriceTable

    try:
        from sandbox.prices import sandbox_price_table

        zones = sorted({z for found in catalog_data(region).zones.values() for z in found})
    except ImportError:
        raise SystemExit("nodewright plan needs the sandbox's prices: pip install -e '.[dev]'") from None
    except NoOfflineCatalog as exc:
        raise SystemExit(f"nodewright plan: {exc}") from None
    on_demand, spot = sandbox_price_table(zones)
    catalog = offline_catalog(region, PriceTable(on_demand=on_demand, spot=spot, source="sandbox"))

    def instance_types(nodeclass: Any) -> list[Any]:
        return catalog.instance_types(zones=None, kubelet=(nodeclass.get("spec") or {}).get("kubelet"))

    return instance_types


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
        result = what_if(paths, offline_instance_types(args.region))
    print(json.dumps(result.to_json(), indent=2, sort_keys=True) if args.json else result.render())
    return 0
