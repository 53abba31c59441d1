"""Scheduling core: plan N pending pods against the real EC2 catalog; cost vs the assignment-LP bound.

Prints pods, classes, nodes, seconds, pods/s, plan $/h, the assignment-LP lower bound $/h, the
ratio plan/bound and a first-fit-decreasing baseline on one fixed type (the cheapest of a few
common node-group types). Single-shape mixes (inflate) also get the exact integral optimum.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from bench._report import print_figures, save

MIXES = (
    "generic",
    "diverse",
    "inflate",
    "zonal-spread",
    "hostname-spread",
    "zonal-affinity",
    "hostname-anti-affinity",
)
KARPENTER_KINDS = ("generic", "zonal-spread", "hostname-spread", "zonal-affinity", "hostname-anti-affinity")
REGION = "us-east-1"
CPU_CHOICES = (100, 250, 500, 1000, 1500)  # millicores, as Karpenter's benchmark draws them
MEMORY_CHOICES = tuple(m * 1024 * 1024 for m in (100, 256, 512, 1024, 2048, 4096))
FFD_TYPES = (
    "m5.large",
    "m5.xlarge",
    "m5.2xlarge",
    "m5.4xlarge",
    "c5.xlarge",
    "c5.2xlarge",
    "r5.xlarge",
    "m6i.xlarge",
)
CAPPED_KINDS = {"hostname-spread": 1, "hostname-anti-affinity": 1}
DEFAULT_NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [
                    {
                        "key": "karpenter.k8s.aws/instance-category",
                        "operator": "In",
                        "values": ["c", "m", "r"],
                    },
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ]
            }
        },
    },
}  # Karpenter's getting-started NodePool without `limits: {cpu: 1000}`: this measures packing, not limits


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pods", type=int, default=10_000, help="number of pending pods (default 10000)")
    parser.add_argument("--mix", choices=MIXES, default="diverse", help="workload (default diverse)")
    parser.add_argument(
        "--nodepool", type=Path, help="a karpenter.sh/v1 NodePool (YAML or JSON); default: getting-started"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed of the workload (default 1)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--dump-pods", type=Path, help="write the workload as JSON [{cpu, memory, count}, ...]"
    )
    parser.add_argument("--no-bound", action="store_true", help="skip the LP bound and the FFD baseline")
    parser.add_argument(
        "--no-ebs", action="store_true", help="price nodes by their instance only (no EBS root volume)"
    )


def workload(mix: str, pods: int, seed: int) -> list[tuple[str, int, int, int]]:
    """(kind, cpu millicores, memory bytes, count) rows, deterministic for a seed."""
    rng = random.Random(seed)
    if mix == "inflate":
        return [("inflate", 1000, 0, pods)]
    counts: dict[tuple[str, int, int], int] = {}
    for index in range(pods):
        kind = KARPENTER_KINDS[index % 5] if mix == "diverse" else mix
        key = (kind, rng.choice(CPU_CHOICES), rng.choice(MEMORY_CHOICES))
        counts[key] = counts.get(key, 0) + 1
    return [(kind, cpu, memory, n) for (kind, cpu, memory), n in sorted(counts.items())]


def _pod_spec(kind: str, cpu: int, memory: int):  # -> PodSpec
    from nodewright.api import labels as wk
    from nodewright.scheduling.model import (
        DO_NOT_SCHEDULE,
        LabelSelector,
        PodAffinityTerm,
        PodSpec,
        TopologySpread,
    )

    requests = {"cpu": cpu, "pods": 1}
    if memory:
        requests["memory"] = memory
    selector = LabelSelector((("kind", kind),))
    spreads: tuple = ()
    affinity: tuple = ()
    if kind == "zonal-spread":
        spreads = (TopologySpread(1, wk.ZONE, DO_NOT_SCHEDULE, selector),)
    elif kind == "hostname-spread":
        spreads = (TopologySpread(1, wk.HOSTNAME, DO_NOT_SCHEDULE, selector),)
    elif kind == "zonal-affinity":
        affinity = (PodAffinityTerm(selector, wk.ZONE),)
    elif kind == "hostname-anti-affinity":
        affinity = (PodAffinityTerm(selector, wk.HOSTNAME, anti=True),)
    return PodSpec(
        namespace="default",
        requests=tuple(sorted(requests.items())),
        labels=(("kind", kind),),
        spreads=spreads,
        affinity=affinity,
    )


def nodepool_input(manifest: dict, instance_types):  # -> NodePoolInput
    """A NodePool manifest → the scheduler's NodePoolInput (bench-side, no API models)."""
    from nodewright.scheduling import NodePoolInput, Requirements
    from nodewright.scheduling.model import taint_from_k8s
    from nodewright.scheduling.resources import parse_resources

    spec = manifest.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    return NodePoolInput(
        name=(manifest.get("metadata") or {}).get("name", "default"),
        requirements=Requirements.from_k8s(template.get("requirements")),
        instance_types=list(instance_types),
        weight=int(spec.get("weight") or 0),
        labels=dict(((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}),
        taints=tuple(taint_from_k8s(t) for t in template.get("taints") or ()),
        startup_taints=tuple(taint_from_k8s(t) for t in template.get("startupTaints") or ()),
        limits=parse_resources(spec.get("limits")),
    )


def catalog() -> tuple[list, str]:  # -> (list[InstanceType], where the prices came from)
    """The us-east-1 catalog exactly as a provisioning pass sees it: moto's copy of EC2's answers read by
    the production catalog code, on-demand prices from ../shared/data when present (types the file
    lacks, or every type without it, are ranked by the production estimate)."""
    from nodewright.cli._offline import offline_catalog
    from nodewright.cloud.pricetable import PriceTable

    from sandbox.shared_data import ondemand_prices_file

    path = ondemand_prices_file()
    prices = PriceTable.from_ondemand_file(path) if path else PriceTable(source="estimate")
    from nodewright.observability import logger_level

    with logger_level("ERROR"):  # the estimate warning would garble --json; prices() names the source
        instance_types = offline_catalog(REGION, prices).instance_types()
    return instance_types, str(path) if path else "estimate_on_demand_price()"


def node_storage_price() -> float:
    """$/h of a node's EBS volumes with the bench NodePool's NodeClass: the AL2023 default root
    volume (20 GiB gp3), priced by the production table (``nodewright.cloud.ebs``)."""
    from nodewright.cloud.ebs import node_storage

    return node_storage({"spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}}, REGION).per_hour


def measure(args: argparse.Namespace) -> dict:
    """Build the workload, plan it, and compute the yardsticks; returns the figures."""
    import time

    import yaml
    from nodewright.scheduling import Pod, Snapshot, plan

    from bench._bounds import Bin, Shape, assignment_lp_bound, ffd_cost, single_shape_optimum

    rows = workload(args.mix, args.pods, args.seed)
    if args.dump_pods:
        args.dump_pods.write_text(
            json.dumps(
                [{"cpu": cpu, "memory": memory, "count": n, "kind": kind} for kind, cpu, memory, n in rows]
            )
        )
    manifest = yaml.safe_load(args.nodepool.read_text()) if args.nodepool else DEFAULT_NODEPOOL
    instance_types, price_source = catalog()
    pool = nodepool_input(manifest, instance_types)
    pool.node_price = 0.0 if args.no_ebs else node_storage_price()
    pods: list[Pod] = []
    for kind, cpu, memory, n in rows:
        spec = _pod_spec(kind, cpu, memory)
        pods.extend(Pod("default", f"{kind}-{cpu}m-{memory >> 20}mi-{i}", spec) for i in range(n))
    snapshot = Snapshot(pods=pods, nodepools=[pool])
    started, cpu_started = time.perf_counter(), time.process_time()
    result = plan(snapshot)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started  # honest on a shared machine: wall time includes waiting
    figures: dict = {
        "mix": args.mix,
        "pods": len(pods),
        "classes": result.classes,
        "nodes": len(result.new_claims),
        "unschedulable": len(result.unschedulable),
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu_seconds, 3),
        "pods_per_second": round(len(pods) / seconds) if seconds else None,
        "plan_per_hour": round(result.cost_per_hour, 4),
        "prices": price_source,
        "ebs_per_node_per_hour": round(pool.node_price, 6),
        "ebs_per_hour": round(sum(c.volume_price for c in result.new_claims), 4),
    }
    if args.no_bound:
        return figures
    allowed = [
        t
        for t in pool.instance_types
        if pool.requirements.matches_labels({**t.labels, "karpenter.sh/capacity-type": "on-demand"})
        and t.cheapest_price(pool.requirements) is not None
    ]
    bins = [
        Bin(
            t.name,
            (t.cheapest_price(pool.requirements) or 0.0) + pool.node_price,  # a node pays its EBS too
            t.allocatable["cpu"],
            t.allocatable["memory"],
            t.allocatable["pods"],
        )
        for t in allowed
    ]
    shapes: dict[tuple[int, int], int] = {}
    for _, cpu, memory, n in rows:
        shapes[(cpu, memory)] = shapes.get((cpu, memory), 0) + n
    bound = assignment_lp_bound([Shape(c, m, n) for (c, m), n in sorted(shapes.items())], bins)
    figures["lp_bound_per_hour"] = round(bound, 4)
    figures["ratio"] = round(result.cost_per_hour / bound, 4) if bound else None
    ffd = []
    by_name = {b.name: b for b in bins}
    for name in FFD_TYPES:
        if name in by_name:
            cost = ffd_cost(
                [
                    (Shape(c, m, n), kind if kind in CAPPED_KINDS else None, CAPPED_KINDS.get(kind, 0))
                    for kind, c, m, n in rows
                ],
                by_name[name],
            )
            if cost is not None:
                ffd.append((cost, name))
    if ffd:
        cost, name = min(ffd)
        figures["ffd_per_hour"] = round(cost, 4)
        figures["ffd_type"] = name
    if len(shapes) == 1:
        (cpu, memory), n = next(iter(shapes.items()))
        optimum, _ = single_shape_optimum(Shape(cpu, memory, n), bins)
        figures["optimum_per_hour"] = round(optimum, 4)
    return figures


def run(args: argparse.Namespace) -> int:
    figures = measure(args)
    print_figures(figures, args.json)
    save(args, figures)
    return 0 if args.json or not figures["unschedulable"] else 1


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(description=__doc__)
    configure(parser)
    sys.exit(run(parser.parse_args()))
