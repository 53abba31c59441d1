"""``nodewright plan (--manifests DIR_OR_FILES | --kubeconfig PATH) [--region R] [--json]``: a what-if.

Pods/Deployments + NodePools + EC2NodeClasses in (any Karpenter version: old ones are converted
as ``nodewright convert`` converts them), with the cluster they land in: Nodes and bound Pods,
NodeClaims, DaemonSets, PersistentVolumeClaims/Volumes, StorageClasses, RuntimeClasses; NodeOverlays
(their prices and capacity, as the functions apply them with the stack's nodeOverlay setting); and
the account's capacity reservations as a saved DescribeCapacityReservations answer (a file holding
what ``aws ec2 describe-capacity-reservations --output json`` prints: each reservation an
EC2NodeClass's capacityReservationSelectorTerms select is a reserved offering; with ``--live`` and no
saved answer they are read from EC2). Any other kind is listed as ignored. Or ``--kubeconfig``: a
live cluster's current objects, read once and never written. Out: the NodeClaims the provisioner
would create (NodePool, candidate instance types cheapest first, zones, capacity types, the capacity
reservations and NodeOverlays behind them, labels, taints, $/h with the EBS volumes' share), the pods
that fit on existing capacity, and a reason for every pod that would stay pending.

Either source is read into the World the functions read (``state.world.observe`` over the API
server's cluster interface or a manifest bundle's, ``cluster.manifests.ManifestCluster``); any kind
nothing read is listed as ignored.

``--consolidate`` asks the other question of the same cluster: what a disruption pass would remove
now, decided by the flow's own code (emptiness, then consolidation: delete, or replace by one
strictly cheaper node), with the $/h before and after, each replacement's NodePool, types, capacity
types, zones and requirements, and why each other node stays; the clock rules it takes as passed
are stated in the output (``nodewright.disruption.whatif``).

The region is ``--region``, else AWS_REGION, else AWS_DEFAULT_REGION or the shared config's
(``AWS_PROFILE``) region, else us-west-2; the plan says which it used and why. The catalog is the
project's own catalog code (``nodewright.cloud.catalog``): over moto's bundled copy of EC2's
answers when moto is installed (``nodewright.cli._offline``; no AWS account needed), else, or with
``--live``, over EC2 itself (read-only DescribeInstanceTypes/DescribeInstanceTypeOfferings with
your credentials). On-demand prices come from ``--prices FILE``, else from an installed
``nodewright.offline_prices`` entry point (the development install registers the sandbox's: real
prices when ../shared/data has them, and its spot market), else the documented estimate. The
planning path is the provisioner's own.

Exit status 0 when every input was planned, 1 when some manifest was rejected (the rest is still
planned) or the cluster could not be read, 2 when an input cannot be used at all (a missing path,
a kubeconfig that is not one, a prices file that is not one).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="offline what-if: the NodeClaims Nodewright would launch for these manifests",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifests", nargs="+", metavar="DIR_OR_FILE", help="manifest files or directories")
    source.add_argument(
        "--kubeconfig", metavar="PATH", help="plan against this cluster's objects (read-only)"
    )
    parser.add_argument(
        "--region",
        help="region whose catalog and zones to use (default: AWS_REGION, AWS_DEFAULT_REGION, ...)",
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--live",
        action="store_true",
        help="ask EC2 for the catalog (read-only, your AWS credentials) even if moto's copy is installed",
    )
    parser.add_argument("--prices", metavar="FILE", help='on-demand prices as {"prices": {type: usd}}')
    parser.add_argument(
        "--consolidate",
        action="store_true",
        help="instead: the consolidation a disruption pass would do to these nodes now, and the $/h saved",
    )
    parser.add_argument(
        "--spot-to-spot",
        action="store_true",
        help="with --consolidate: as a stack deployed with spotToSpotConsolidation (Karpenter's "
        "SpotToSpotConsolidation feature gate; off by default, as in the stack)",
    )
    parser.set_defaults(func=run)


OFFLINE_PRICES_GROUP = "nodewright.offline_prices"


FALLBACK_REGION = "us-west-2"


class PricesFileError(ValueError):
    """``--prices`` names a file that is not a ``{"prices": {type: usd}}`` document; says why."""


def default_region() -> tuple[str, str]:
    """(region, where it came from), as the AWS CLI and SDKs resolve it: AWS_REGION, then botocore's
    AWS_DEFAULT_REGION and shared config (the AWS_PROFILE's ``region``), else a named fallback."""
    import os

    if os.environ.get("AWS_REGION"):
        return os.environ["AWS_REGION"], "AWS_REGION"
    if os.environ.get("AWS_DEFAULT_REGION"):
        return os.environ["AWS_DEFAULT_REGION"], "AWS_DEFAULT_REGION"
    import botocore.session

    configured = botocore.session.Session().get_config_variable("region")
    if configured:
        return str(configured), f"the shared config, profile {os.environ.get('AWS_PROFILE') or 'default'}"
    return FALLBACK_REGION, "no region configured: the fallback"


def offline_instance_types(
    region: str, prices_file: str | None = None, live: bool = False, reservations: Any = None
) -> Any:
    """``instance_types(nodeclass)`` through the production catalog code (see the module docstring);
    ``reservations``: the saved answer's reservations, which the EC2NodeClass's terms select from
    (None: with ``live``, EC2's own; else none)."""
    from nodewright.cli._offline import NoOfflineCatalog, catalog_data, offline_catalog
    from nodewright.cloud.catalog import Catalog, node_shape
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.cloud.state import InMemoryStateStore

    data = None
    if not live:
        try:
            data = catalog_data(region)
        except NoOfflineCatalog as exc:
            import sys

            print(f"nodewright plan: {exc}; asking EC2 for the catalog instead", file=sys.stderr)
    if prices_file:
        try:
            prices = PriceTable.from_ondemand_file(prices_file)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise PricesFileError(f"cannot use prices file {prices_file}: {why}") from exc
    else:
        prices = _installed_prices(region, data) or PriceTable(source="estimate")
    resolver = None
    if data is not None:
        catalog = offline_catalog(region, prices)
    else:
        from nodewright.cloud import aws
        from nodewright.cloud.reservations import ReservationResolver
        from nodewright.settings import Settings

        settings = Settings(cluster_name="plan", region=region)
        store = InMemoryStateStore()
        store.put_price_table(prices)
        ec2 = aws.client("ec2", settings)
        catalog = Catalog(ec2, store, (region, settings.aws_endpoint_url))
        resolver = ReservationResolver(ec2, (region, settings.aws_endpoint_url))

    def instance_types(nodeclass: Any) -> list[Any]:
        # A NodeClass whose status lists its subnets (Karpenter's controller writes them) launches only
        # in their zones; without a status every zone of the region is possible.
        subnets = (nodeclass.get("status") or {}).get("subnets") or []
        zones = {s["zone"] for s in subnets if s.get("zone")} or None
        zone_ids = {s["zone"]: s["zoneID"] for s in subnets if s.get("zone") and s.get("zoneID")}
        spec = nodeclass.get("spec") or {}
        types: list[Any] = catalog.instance_types(
            zones=zones,
            kubelet=spec.get("kubelet"),
            zone_ids=zone_ids,
            reservations=selected(spec.get("capacityReservationSelectorTerms") or []),
            shape=node_shape(nodeclass),
        )
        return types

    def selected(terms: list[Any]) -> list[Any]:
        from datetime import UTC, datetime

        from nodewright.cloud.reservations import selected_by

        if not terms:
            return []
        if reservations is not None:
            return selected_by(terms, reservations, datetime.now(UTC))
        if resolver is not None:  # the live catalog: EC2's own reservations (read-only)
            return resolver.select(terms)
        return []

    return instance_types


def _installed_prices(region: str, data: Any) -> Any:
    """The first installed ``nodewright.offline_prices`` entry point's PriceTable for the catalog, or None."""
    if data is None:
        return None
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=OFFLINE_PRICES_GROUP), key=lambda e: e.name):
        try:
            source = entry.load()
        except ModuleNotFoundError:
            continue  # its package is not installed here
        return source(data)
    return None


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from nodewright.api.manifests import manifest_paths
    from nodewright.observability import logger_level
    from nodewright.provisioning.whatif import saved_reservations, what_if, what_if_live

    region, region_source = (args.region, "--region") if args.region else default_region()
    if args.manifests:
        paths = manifest_paths(args.manifests)
        missing = [str(p) for p in paths if not p.exists()]
        if missing or not paths:
            print(
                f"nodewright plan: no such file or directory: {', '.join(missing) or args.manifests}",
                file=sys.stderr,
            )
            return 2
    with logger_level("ERROR"):  # the function's JSON logs would garble the plan on stdout
        try:
            saved, problems = saved_reservations(paths) if args.manifests else ([], [])
            instance_types = offline_instance_types(
                region, args.prices, args.live, saved if args.manifests and (saved or problems) else None
            )
        except PricesFileError as exc:
            print(f"nodewright plan: {exc}", file=sys.stderr)
            return 2
        if args.consolidate:
            return consolidate(args, paths if args.manifests else None, instance_types, region)
        if args.manifests:
            result = what_if(paths, instance_types, region)
            _report_reservations(result, saved, problems)
        else:
            from nodewright.cluster.errors import ApiError, ApiUnavailable

            cluster = live_cluster(args.kubeconfig)
            if cluster is None:
                return 2
            try:
                result = what_if_live(cluster, instance_types, region)
            except (ApiError, ApiUnavailable) as exc:
                print(
                    f"nodewright plan: reading the cluster failed: {_unreadable(exc, cluster)}",
                    file=sys.stderr,
                )
                return 1
    result.region_source = region_source
    print(json.dumps(result.to_json(), indent=2, sort_keys=True) if args.json else result.render())
    return 1 if result.rejected else 0  # the plan covers what was valid; the exit status says not all was


def _report_reservations(result: Any, saved: list[Any], problems: list[str]) -> None:
    """The saved reservations the plan read, and the answers it could not (each a rejected input)."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    result.capacity_reservations = [
        {**r.status(now), "availableInstanceCount": r.available, "totalInstanceCount": r.total} for r in saved
    ]
    result.manifest_problems.extend(problems)
    result.rejected += len(problems)


def consolidate(args: argparse.Namespace, paths: Any, instance_types: Any, region: str) -> int:
    """``--consolidate``: the disruption flow's consolidation choice over the same cluster, unwritten."""
    import json
    import sys

    from nodewright.disruption.whatif import consolidation_what_if
    from nodewright.provisioning.whatif import live_world, manifest_world, usable_nodepools

    if paths is not None:
        world, read = manifest_world(paths, instance_types, region)
    else:
        from nodewright.cluster.errors import ApiError, ApiUnavailable

        cluster = live_cluster(args.kubeconfig)
        if cluster is None:
            return 2
        try:
            world, read = live_world(cluster, instance_types, region)
        except (ApiError, ApiUnavailable) as exc:
            print(
                f"nodewright plan: reading the cluster failed: {_unreadable(exc, cluster)}", file=sys.stderr
            )
            return 1
    usable, skipped = usable_nodepools(world)
    result = consolidation_what_if(world, usable, read.source, spot_to_spot=args.spot_to_spot)
    result.ignored = read.ignored
    # The pods admission refuses (a missing RuntimeClass): not in the World, said here.
    refused = [f"pod {pod}: {why}" for pod, why in sorted(read.pending.items())]
    for problem in [
        *read.manifest_problems,
        *refused,
        *(f"NodePool {n}: {why}" for n, why in sorted(skipped.items())),
    ]:
        print(f"nodewright plan: {problem}", file=sys.stderr)
    print(json.dumps(result.to_json(), indent=2, sort_keys=True) if args.json else result.render())
    return 1 if read.rejected else 0


def _unreadable(exc: BaseException, cluster: Any) -> str:
    """Why the cluster could not be read and what to do, in one line (``cli._errors``)."""
    from nodewright.cli import _errors

    return _errors.one_line(exc, "<cluster>", host=cluster.host)


def live_cluster(kubeconfig: str) -> Any:
    """A read-only use of the cluster client for the kubeconfig; None (with a message) when unusable."""
    import sys

    from kubernetes.client import ApiClient

    from nodewright.cluster.auth import kubeconfig_configuration
    from nodewright.cluster.client import Cluster
    from nodewright.cluster.errors import ClusterConfigError
    from nodewright.ratelimit import TokenBucket
    from nodewright.settings import KUBE_CLIENT_BURST, KUBE_CLIENT_QPS

    try:
        return Cluster(
            ApiClient(kubeconfig_configuration(kubeconfig, setting="--kubeconfig")),
            limiter=TokenBucket(KUBE_CLIENT_QPS, KUBE_CLIENT_BURST),  # the functions' default rate
        )
    except ClusterConfigError as exc:
        print(f"nodewright plan: {exc}", file=sys.stderr)
        return None
