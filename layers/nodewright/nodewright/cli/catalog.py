"""``nodewright catalog --region R [--requirements FILE] [--json]``: the instance types a NodePool allows.

What the provider sees, cheapest first: each type with its cheapest allowed offering (price,
capacity type, zone) and its capacity and allocatable as the scheduler computes them. This is
how to answer "why did Nodewright pick this type?".

Prices come from the state table when ``STATE_TABLE`` is set (what the functions read), else
from ``--prices FILE`` (a ``{"prices": {type: usd}}`` document), else live from the Pricing API
and spot price history. A type with no price is ranked by the documented estimate, marked ``~``.
NODE/H adds what every node pays for its EBS volumes (``--nodeclass FILE``'s blockDeviceMappings,
else the AL2023 default 20 GiB gp3 root), priced from the bundled EBS table
(``nodewright.cloud.ebs``): the price the planner minimises.

Reserved offerings: the capacity reservations the ``--nodeclass`` EC2NodeClass's
``capacityReservationSelectorTerms`` select, from ``--reservations FILE`` (a saved
``aws ec2 describe-capacity-reservations --output json`` answer) or else read from EC2; a reserved
row names its reservation. ``--overlays FILE``: NodeOverlays (``karpenter.sh/v1alpha1``) applied as
the functions apply them with the stack's nodeOverlay setting (``state.overlays``) in the
``--requirements`` NodePool: PRICE/H is the overlaid price, and WHY names the reservation or the
overlays behind it and the price before them ("why this type?").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "catalog",
        help="list the instance types a NodePool allows, with price and allocatable, cheapest first",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--region", required=True, help="AWS region, e.g. us-east-1")
    parser.add_argument(
        "--requirements",
        metavar="FILE",
        help="a NodePool manifest (YAML/JSON) or a list of {key, operator, values} requirements",
    )
    parser.add_argument("--prices", metavar="FILE", help='on-demand prices as {"prices": {type: usd}}')
    parser.add_argument(
        "--nodeclass", metavar="FILE", help="an EC2NodeClass manifest whose volumes each node pays for"
    )
    parser.add_argument(
        "--reservations",
        metavar="FILE",
        help="a saved `aws ec2 describe-capacity-reservations --output json` answer (with --nodeclass)",
    )
    parser.add_argument("--overlays", metavar="FILE", help="NodeOverlay manifests to apply to the prices")
    parser.add_argument("--limit", type=int, default=40, help="rows to print (0 = all; default 40)")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    parser.set_defaults(func=run)


class RequirementsFileError(ValueError):
    """An input file (--requirements, --nodeclass, --prices) cannot be used; the message says why."""


def load_requirements(path: str) -> list[dict[str, Any]]:
    """Requirement terms from a NodePool manifest (first NodePool in the file) or a bare list."""
    import yaml

    from nodewright.textfiles import NotUtf8Error, decode_utf8

    try:
        with open(path, "rb") as handle:
            documents = [d for d in yaml.safe_load_all(decode_utf8(handle.read())) if d is not None]
    except OSError as exc:
        raise RequirementsFileError(f"cannot read {path}: {exc.strerror}") from exc
    except NotUtf8Error as exc:
        raise RequirementsFileError(f"{path} is {exc}") from exc
    except yaml.YAMLError as exc:
        raise RequirementsFileError(f"{path} is not valid YAML/JSON: {exc}".replace("\n", " ")) from exc
    for document in documents:
        if isinstance(document, list):
            return _terms(path, document)
        if isinstance(document, dict) and document.get("kind") == "NodePool":
            found: Any = document
            for key in ("spec", "template", "spec", "requirements"):
                found = found.get(key) if isinstance(found, dict) else None
            return _terms(path, found or [])
        if isinstance(document, dict) and "requirements" in document:
            return _terms(path, document["requirements"] or [])
    raise RequirementsFileError(
        f"{path} holds no NodePool and no requirements list; give a NodePool manifest or "
        "a YAML list of {key, operator, values} terms"
    )


def _terms(path: str, terms: Any) -> list[dict[str, Any]]:
    """``terms`` checked to be requirements the scheduling code can read, or why not."""
    from nodewright.scheduling.requirements import Requirements

    if not isinstance(terms, list):
        raise RequirementsFileError(f"{path}: requirements must be a list of {{key, operator, values}} terms")
    for i, term in enumerate(terms):
        if not isinstance(term, dict):
            raise RequirementsFileError(
                f"{path}: requirement {i} must be a mapping {{key, operator, values}}"
            )
        if not isinstance(term.get("key"), str) or not isinstance(term.get("operator"), str):
            raise RequirementsFileError(f"{path}: requirement {i}: key must be a string, and operator too")
        values = term.get("values", [])
        if not isinstance(values, list) or not all(isinstance(v, str | int | float) for v in values):
            raise RequirementsFileError(f"{path}: requirement {i} ({term['key']}): values must be a list")
    try:
        Requirements.from_k8s(terms)
    except ValueError as exc:
        raise RequirementsFileError(f"{path}: {exc}") from exc
    return [dict(term) for term in terms]


def _price_store(args: argparse.Namespace, settings: Any) -> Any:
    from nodewright.cloud import aws
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.cloud.pricing import fetch_on_demand_prices, fetch_spot_prices
    from nodewright.cloud.state import DynamoDBStateStore, InMemoryStateStore

    if settings.state_table:
        return DynamoDBStateStore(settings)
    store = InMemoryStateStore()
    if args.prices:
        try:
            store.put_price_table(PriceTable.from_ondemand_file(args.prices))
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise RequirementsFileError(f"cannot use prices file {args.prices}: {why}") from exc
        return store
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        on_demand = fetch_on_demand_prices(
            aws.client("pricing", settings, aws.PRICING_API_REGION), args.region
        )
        spot = fetch_spot_prices(aws.client("ec2", settings))
        store.put_price_table(PriceTable(on_demand=on_demand, spot=spot, source="live"))
    except (BotoCoreError, ClientError) as exc:
        print(f"warning: live prices unavailable ({exc}); ranking by estimates", file=sys.stderr)
    return store


def load_nodeclass(path: str) -> dict[str, Any]:
    """The first EC2NodeClass in the file (converted to v1 if older)."""
    from nodewright.api.manifests import validate_files

    problems: list[str] = []
    for report in validate_files([path]).documents:
        for doc in report.v1:
            if doc.get("kind") == "EC2NodeClass":
                return doc
        problems.extend(str(f) for f in report.findings if f.is_error)
    why = f" ({problems[0]})" if problems else ""
    raise RequirementsFileError(f"{path} holds no EC2NodeClass{why}")


def load_overlays(path: str) -> list[Any]:
    """The NodeOverlays of a file (``api.overlays.NodeOverlay``); one that is invalid is an error."""
    from nodewright.api.manifests import validate_files
    from nodewright.api.overlays import KIND, from_manifest

    found: list[Any] = []
    for report in validate_files([path]).documents:
        problems = [str(f) for f in report.findings if f.is_error]
        if problems:
            raise RequirementsFileError(f"{report.source.label}: {'; '.join(problems)}")
        found.extend(from_manifest(doc) for doc in report.v1 if doc.get("kind") == KIND)
    if not found:
        raise RequirementsFileError(f"{path} holds no NodeOverlay")
    return found


def load_nodepool_identity(path: str | None) -> tuple[str, dict[str, str]]:
    """The name and template labels an overlay's requirements see (the NodePool of ``--requirements``;
    without one, ``catalog`` and none)."""
    import yaml

    from nodewright.textfiles import decode_utf8

    if path:
        with open(path, "rb") as handle:
            for document in yaml.safe_load_all(decode_utf8(handle.read())):
                if isinstance(document, dict) and document.get("kind") == "NodePool":
                    meta = document.get("metadata") or {}
                    template = ((document.get("spec") or {}).get("template") or {}).get("metadata") or {}
                    return str(meta.get("name") or "catalog"), dict(template.get("labels") or {})
    return "catalog", {}


def load_reservations(path: str, terms: list[Any]) -> list[Any]:
    """The reservations of a saved DescribeCapacityReservations answer that ``terms`` select."""
    from datetime import UTC, datetime

    from nodewright.api.manifests import load_files
    from nodewright.cloud.reservations import (
        SavedAnswerError,
        from_saved_answer,
        is_saved_answer,
        selected_by,
    )

    found = []
    for loaded in load_files([path]):
        if loaded.doc is None:
            raise RequirementsFileError(f"{path}: {loaded.findings[0].message}")
        if not is_saved_answer(loaded.doc):
            raise RequirementsFileError(
                f"{path} is not a DescribeCapacityReservations answer; save "
                "`aws ec2 describe-capacity-reservations --output json`"
            )
        try:
            found.extend(from_saved_answer(loaded.doc, path))
        except SavedAnswerError as exc:
            raise RequirementsFileError(str(exc)) from exc
    return selected_by(terms, found, datetime.now(UTC))


def rows(
    instance_types: list[Any],
    terms: list[dict[str, Any]],
    estimated: set[str],
    ebs_per_node: float = 0.0,
    why: Any = None,
) -> list[dict[str, Any]]:
    """One row per type the requirements allow that has an available offering, cheapest first;
    ``why(type name, offering)``: the overlays that priced that offering and its price before them."""
    from nodewright.scheduling.requirements import Requirements
    from nodewright.scheduling.resources import format_resource

    def formatted(resources: dict[str, int]) -> dict[str, str]:
        return {name: format_resource(name, value) for name, value in sorted(resources.items())}

    pool = Requirements.from_k8s(terms)
    found = []
    for instance_type in instance_types:
        own = instance_type.requirements
        if any(key in own and own[key].intersect(pool[key]).is_empty() for key in pool):
            continue
        offerings = instance_type.available_offerings(pool)
        if not offerings:
            continue
        best = offerings[0]
        overlays, base = why(instance_type.name, best) if why else ([], best.price)
        found.append(
            {
                "instanceType": instance_type.name,
                "price": best.price,
                "priceEstimated": instance_type.name in estimated,
                "ebsPrice": round(ebs_per_node, 6),
                "nodePrice": round(best.price + ebs_per_node, 6),
                "capacityType": best.capacity_type,
                "zone": best.zone,
                "zones": sorted({o.zone for o in offerings}),
                "arch": instance_type.labels.get("kubernetes.io/arch", ""),
                "capacity": formatted(instance_type.capacity),
                "allocatable": formatted(instance_type.allocatable),
                "basePrice": base,
                "nodeOverlays": overlays,
                **(
                    {
                        "capacityReservationId": best.reservation_id,
                        "capacityReservationType": best.reservation_type,
                        "interruptible": best.interruptible,
                    }
                    if best.reservation_id
                    else {}
                ),
            }
        )
    found.sort(key=lambda r: (r["price"], r["instanceType"]))
    return found


def _table(found: list[dict[str, Any]]) -> str:
    header = (
        "TYPE",
        "ARCH",
        "PRICE/H",
        "NODE/H",
        "CAPACITY",
        "ZONE",
        "ALLOC CPU",
        "ALLOC MEMORY",
        "PODS",
        "WHY",
    )
    lines = [header]
    for row in found:
        price = f"{'~' if row['priceEstimated'] else ''}{row['price']:.4f}"
        lines.append(
            (
                row["instanceType"],
                row["arch"],
                price,
                f"{row['nodePrice']:.4f}",
                row["capacityType"],
                row["zone"],
                row["allocatable"].get("cpu", "0"),
                row["allocatable"].get("memory", "0"),
                row["allocatable"].get("pods", "0"),
                _why(row),
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _overlaid(
    types: list[Any], overlays: list[Any], pool: str, labels: dict[str, str]
) -> tuple[list[Any], Any, dict[str, Any]]:
    """The types as the overlays change them in the NodePool (``state.overlays``, as the functions),
    a ``why(type, offering)`` answering (the overlays that priced the offering, its price before),
    and each overlay's verdict."""
    from nodewright.state.overlays import PoolFacts, offering_key, resolve

    resolution = resolve(overlays, {pool: PoolFacts(labels, types)})
    base = {t.name: {offering_key(o): o.price for o in t.offerings} for t in types}

    def why(name: str, offering: Any) -> tuple[list[str], float]:
        applied = resolution.applied(pool, name)
        priced = applied.prices.get(offering_key(offering))
        return sorted({*([priced] if priced else []), *applied.capacity}), base[name][offering_key(offering)]

    return resolution.apply(pool, types), why, resolution.verdicts


def _why(row: dict[str, Any]) -> str:
    """What made this row's price: the reservation it is, the overlays that priced it (and from what)."""
    parts = []
    if row.get("capacityReservationId"):
        kind = row["capacityReservationType"] + (", interruptible" if row["interruptible"] else "")
        parts.append(f"{row['capacityReservationId']} ({kind})")
    if row["nodeOverlays"]:
        parts.append(f"{'+'.join(row['nodeOverlays'])} (was {row['basePrice']:.4f})")
    return "; ".join(parts)


def run(args: argparse.Namespace) -> int:
    from nodewright.cloud import aws
    from nodewright.cloud.catalog import Catalog, fetch_catalog
    from nodewright.observability import logger_level
    from nodewright.settings import Settings

    try:
        terms = load_requirements(args.requirements) if args.requirements else []
        nodeclass = load_nodeclass(args.nodeclass) if args.nodeclass else {"spec": {}}
        overlays = load_overlays(args.overlays) if args.overlays else []
        pool_name, pool_labels = load_nodepool_identity(args.requirements)
        selector = (nodeclass.get("spec") or {}).get("capacityReservationSelectorTerms") or []
        reserved = load_reservations(args.reservations, selector) if args.reservations else None
    except RequirementsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = Settings(
        cluster_name=os.environ.get("CLUSTER_NAME") or "catalog",
        region=args.region,
        state_table=os.environ.get("STATE_TABLE") or None,
        aws_endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
    )
    try:
        store = _price_store(args, settings)
    except RequirementsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # EC2's own pages (``fetch_catalog``), never the state table's snapshot: this command only reads.
    catalog = Catalog(
        aws.client("ec2", settings),
        store,
        (settings.region, settings.aws_endpoint_url),
        loader=fetch_catalog,
    )
    # The functions' JSON log lines (e.g. the estimated-price warning, shown here as "~") would
    # garble the table or the JSON on stdout.
    from botocore.exceptions import BotoCoreError, ClientError

    from nodewright.cli import _errors
    from nodewright.cloud import ebs

    with logger_level("ERROR"):
        try:
            prices = catalog.prices()
            estimated = {name for name in catalog.data().types if prices.on_demand_price(name) is None}
            storage = ebs.node_storage(nodeclass, settings.region)
            if reserved is None and selector:  # the EC2NodeClass's reservations, as EC2 has them now
                from nodewright.cloud.reservations import ReservationResolver

                resolver = ReservationResolver(
                    aws.client("ec2", settings), (settings.region, settings.aws_endpoint_url)
                )
                reserved = resolver.select(selector)
            types = catalog.instance_types(reservations=reserved or [])
            why: Any = None
            verdicts: dict[str, Any] = {}
            if overlays:
                types, why, verdicts = _overlaid(types, overlays, pool_name, pool_labels)
            found = rows(types, terms, estimated, storage.per_hour, why)
        except (BotoCoreError, ClientError) as exc:  # no credentials, endpoint unreachable, denied
            why = _errors.one_line(exc, settings.cluster_name)
            print(f"error: cannot read the EC2 catalog of {settings.region}: {why}", file=sys.stderr)
            return 1
    shown = found if args.limit <= 0 else found[: args.limit]
    for name, verdict in sorted(verdicts.items()):
        if not verdict.ok:
            print(
                f"warning: NodeOverlay {name} not applied: {verdict.reason}: {verdict.message}",
                file=sys.stderr,
            )
    if args.json:
        print(json.dumps(shown, indent=2))
    else:
        print(_table(shown))
        print(f"NODE/H = PRICE/H + {ebs.describe(storage)}")
        if len(found) > len(shown):
            print(f"... {len(found) - len(shown)} more (--limit 0 shows all)")
        if any(r["priceEstimated"] for r in shown):
            print("~ price estimated from vCPU/memory/GPUs: no price known for the type")
    return 0
