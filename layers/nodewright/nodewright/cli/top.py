"""``nodewright top [--kubeconfig PATH] [--region R] [--prices FILE] [--once] [--svg FILE]``: the cluster as
the autoscaler sees it, live (like eks-node-viewer beside Karpenter). Read-only.

One line per node (and per NodeClaim not yet a node): NodePool, instance type, capacity type, zone,
$/h, CPU and memory requested by its pods against its allocatable as bars, pods, and the NodeClaim's
state: launching (no instance yet), launched (instance up, not joined), registered, initialized,
drifted, disrupting (a disruption command holds it: the DisruptionReason condition or the
karpenter.sh/disrupted taint), deleting; nodes without a NodeClaim are "unmanaged". Above: the
cluster's $/h (and per month), pods bound and pending (waiting for capacity, as the provisioner
counts them); below: Nodewright's recent decisions, its Kubernetes Events (source nodewright).

Prices are the product's own rule (``World.price_of``) over the catalog ``nodewright plan`` uses
(moto's copy of EC2's catalog when installed, else EC2 with your credentials; on-demand prices from
--prices FILE, else an installed price table, else the documented estimate). The region is --region,
else the nodes' topology.kubernetes.io/region label, else AWS_REGION and the AWS config.

It lists, then watches, every resource it shows (``nodewright.cluster.informer``): each change is on
screen within a moment, a watch whose resourceVersion expired (410 Gone) is listed again, and an
unreachable API server is retried. Quit with q or Ctrl-C. ``--once`` prints one frame and exits (for
scripts; ``--svg FILE`` also saves it as an SVG image).

RBAC (only LIST and WATCH requests): list and watch on nodes, pods and events (core), nodeclaims,
nodepools and nodeoverlays (karpenter.sh), ec2nodeclasses (karpenter.k8s.aws); on EKS the access
policy AmazonEKSAdminViewPolicy grants them. A resource type the cluster does not serve (the CRDs
missing) shows as empty; one it refuses (403) is named at the top and the rest is still shown.

The kubeconfig is --kubeconfig, else KUBECONFIG, else ~/.kube/config (its current context).
Exit status 0; 1 when --once could not read the cluster, or some of it (the frame shows the rest);
2 when the kubeconfig or the terminal cannot be used.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.cluster.client import Cluster
    from nodewright.cluster.informer import Reflector
    from nodewright.scheduling import InstanceType
    from nodewright.state.world import World

# A month as AWS bills and eks-node-viewer shows it.
HOURS_PER_MONTH = 730
# How many of Nodewright's latest events the view shows.
DECISIONS_SHOWN = 8
# Redraw at most this often (a busy cluster changes pods many times a second); at least once a second
# so ages move.
MIN_REDRAW_SECONDS = 0.25
MAX_REDRAW_SECONDS = 1.0
# --once without a terminal: wide enough for every column.
DEFAULT_WIDTH = 150
# Cells of a requested-vs-allocatable bar.
BAR_WIDTH = 12

LAUNCHING = "launching"
LAUNCHED = "launched"
REGISTERED = "registered"
INITIALIZED = "initialized"
DRIFTED = "drifted"
DISRUPTING = "disrupting"
DELETING = "deleting"
UNMANAGED = "unmanaged"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "top",
        help="live view of the nodes as the autoscaler sees them: $/h, requests vs allocatable, states",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kubeconfig", metavar="PATH", help="default: KUBECONFIG, else ~/.kube/config")
    parser.add_argument("--region", help="the catalog's region (default: the nodes' region label)")
    parser.add_argument("--prices", metavar="FILE", help='on-demand prices as {"prices": {type: usd}}')
    parser.add_argument(
        "--live", action="store_true", help="ask EC2 for the catalog even if moto's copy is installed"
    )
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.add_argument("--svg", metavar="FILE", help="with --once: also save the frame as an SVG image")
    parser.add_argument(
        "--width", type=int, help=f"columns of a --once frame (default: the terminal's, else {DEFAULT_WIDTH})"
    )
    parser.set_defaults(func=run)


# -- the row model: objects in, rows out (no I/O) -------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One node, or one NodeClaim that has no node yet. CPU in millicores, memory in bytes."""

    name: str
    nodeclaim: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    price: float | None  # $/h; None when the catalog does not price it
    cpu_requested: int
    cpu_allocatable: int
    memory_requested: int
    memory_allocatable: int
    pods: int
    state: str
    ready: bool  # the Node's Ready condition (False for a NodeClaim without a node)
    has_node: bool = True  # False: a NodeClaim whose instance has not joined as a Node yet


@dataclass(frozen=True)
class Decision:
    """One of Nodewright's Events: when, what it decided, about which object."""

    at: datetime | None
    type: str
    reason: str
    regarding: str  # Kind/name
    message: str
    count: int


@dataclass
class Frame:
    rows: list[Row]
    decisions: list[Decision]
    pods_bound: int
    pods_pending: int
    taken_at: datetime
    problems: list[str] = field(default_factory=list)  # what could not be read, shown at the top

    @property
    def price_per_hour(self) -> float:
        return sum(r.price for r in self.rows if r.price is not None)

    @property
    def unpriced(self) -> int:
        return sum(1 for r in self.rows if r.price is None and r.instance_type)


def claim_state(claim: Mapping[str, Any] | None, node: Mapping[str, Any] | None) -> str:
    """The lifecycle state shown for a NodeClaim and its Node, the furthest along first: deleting,
    disrupting, drifted, initialized, registered, launched, launching; ``unmanaged`` without a claim."""
    from nodewright.api.labels import DISRUPTED_TAINT_KEY
    from nodewright.api.models import DISRUPTION_REASON
    from nodewright.api.models import DRIFTED as DRIFTED_CONDITION
    from nodewright.api.models import INITIALIZED as INITIALIZED_CONDITION
    from nodewright.api.models import LAUNCHED as LAUNCHED_CONDITION
    from nodewright.api.models import REGISTERED as REGISTERED_CONDITION
    from nodewright.cluster.objects import condition, has_taint, is_deleting

    if claim is None:
        return DELETING if node is not None and is_deleting(node) else UNMANAGED

    def true(kind: str) -> bool:
        found = condition(claim, kind)
        return found is not None and found.get("status") == "True"

    if is_deleting(claim) or (node is not None and is_deleting(node)):
        return DELETING
    if true(DISRUPTION_REASON) or (node is not None and has_taint(node, DISRUPTED_TAINT_KEY)):
        return DISRUPTING
    if true(DRIFTED_CONDITION):
        return DRIFTED
    for kind, state in (
        (INITIALIZED_CONDITION, INITIALIZED),
        (REGISTERED_CONDITION, REGISTERED),
        (LAUNCHED_CONDITION, LAUNCHED),
    ):
        if true(kind):
            return state
    return LAUNCHING


def rows(world: World) -> list[Row]:
    """One ``Row`` per Node, then per NodeClaim without a Node, oldest first: priced by
    ``World.price_of``, with the requests of the pods bound to each node that still hold resources
    (not Succeeded/Failed), summed as kube-scheduler sums them (``scheduling.model``)."""
    from nodewright.api import labels
    from nodewright.cluster.objects import condition, labels_of, name_of
    from nodewright.scheduling.model import pod_spec_from_k8s
    from nodewright.scheduling.resources import CPU, MEMORY, parse_resources
    from nodewright.state.pods import is_terminal

    claim_of_node: dict[str, dict[str, Any]] = {}
    unregistered: list[dict[str, Any]] = []
    for claim in world.nodeclaims:
        node = world.node_of(claim)
        if node is not None:
            claim_of_node[name_of(node)] = claim
        else:
            unregistered.append(claim)

    def requested(node_name: str) -> tuple[int, int, int]:
        cpu = memory = count = 0
        for pod in world.pods_on(node_name):
            if is_terminal(pod):
                continue
            try:
                requests = dict(pod_spec_from_k8s(pod.get("metadata") or {}, pod.get("spec") or {}).requests)
            except (KeyError, TypeError, ValueError):
                continue  # a pod whose spec cannot be read (the API server would not have taken it)
            cpu += requests.get(CPU, 0)
            memory += requests.get(MEMORY, 0)
            count += 1
        return cpu, memory, count

    def allocatable(obj: Mapping[str, Any]) -> tuple[int, int]:
        try:
            found = parse_resources((obj.get("status") or {}).get("allocatable"))
        except ValueError:
            return 0, 0
        return found.get(CPU, 0), found.get(MEMORY, 0)

    def row(node: Mapping[str, Any] | None, claim: Mapping[str, Any] | None) -> Row:
        source = node if node is not None else claim
        assert source is not None
        found = {**labels_of(claim or {}), **labels_of(node or {})}
        cpu, memory, count = requested(name_of(node)) if node is not None else (0, 0, 0)
        cpu_allocatable, memory_allocatable = allocatable(source)
        ready = node is not None and (condition(node, "Ready") or {}).get("status") == "True"
        return Row(
            name=name_of(source),
            nodeclaim=name_of(claim) if claim is not None else "",
            nodepool=found.get(labels.NODEPOOL, ""),
            instance_type=found.get(labels.INSTANCE_TYPE, ""),
            capacity_type=found.get(labels.CAPACITY_TYPE, ""),
            zone=found.get(labels.ZONE, ""),
            price=world.price_of(claim if claim is not None else source),
            cpu_requested=cpu,
            cpu_allocatable=cpu_allocatable,
            memory_requested=memory,
            memory_allocatable=memory_allocatable,
            pods=count,
            state=claim_state(claim, node),
            ready=ready,
            has_node=node is not None,
        )

    def created(obj: Mapping[str, Any]) -> tuple[str, str]:
        return ((obj.get("metadata") or {}).get("creationTimestamp") or "", name_of(dict(obj)))

    result = [row(n, claim_of_node.get(name_of(n))) for n in sorted(world.nodes, key=created)]
    result += [row(None, c) for c in sorted(unregistered, key=created)]
    return result


def decisions(events: Iterable[Mapping[str, Any]], limit: int = DECISIONS_SHOWN) -> list[Decision]:
    """The latest ``limit`` events, newest first (by lastTimestamp, eventTime or firstTimestamp)."""
    from nodewright.cluster.objects import parse_time

    found = []
    for event in events:
        involved = event.get("involvedObject") or {}
        meta = event.get("metadata") or {}
        stamp = (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or event.get("firstTimestamp")
            or meta.get("creationTimestamp")
        )
        found.append(
            Decision(
                at=parse_time(stamp),
                type=str(event.get("type") or "Normal"),
                reason=str(event.get("reason") or ""),
                regarding=f"{involved.get('kind', '?')}/{involved.get('name', '?')}",
                message=" ".join(str(event.get("message") or "").split()),
                count=int(event.get("count") or 1),
            )
        )
    found.sort(key=lambda d: (d.at is not None, d.at or datetime.min), reverse=True)
    return found[:limit]


def build_frame(world: World, events: Iterable[Mapping[str, Any]], problems: Iterable[str] = ()) -> Frame:
    """The whole view of one moment (pure: the World and the events as read)."""
    from nodewright.state.pods import is_bound, is_provisionable, is_terminal

    return Frame(
        rows=rows(world),
        decisions=decisions(events),
        pods_bound=sum(1 for p in world.pods if is_bound(p) and not is_terminal(p)),
        pods_pending=sum(1 for p in world.pods if is_provisionable(p)),
        taken_at=world.taken_at,
        problems=list(problems),
    )


# -- rendering (rich) -------------------------------------------------------------------------------------
STATE_STYLES = {
    LAUNCHING: "cyan",
    LAUNCHED: "cyan",
    REGISTERED: "blue",
    INITIALIZED: "green",
    DRIFTED: "yellow",
    DISRUPTING: "magenta",
    DELETING: "red",
    UNMANAGED: "dim",
}


def _cores(millis: int) -> str:
    return f"{millis / 1000:.1f}" if millis % 1000 else str(millis // 1000)


def _gib(size: int) -> str:
    return f"{size / 1024**3:.1f}"


def _bar(used: int, total: int, width: int) -> Any:
    from rich.progress_bar import ProgressBar

    share = used / total if total else 0.0
    style = "green" if share < 0.7 else "yellow" if share < 0.9 else "red"
    return ProgressBar(
        total=max(total, 1),
        completed=min(used, total),
        width=width,
        complete_style=style,
        finished_style=style,
    )


def _age(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "?"
    seconds = max(0, int((now - at).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def render(
    frame: Frame, *, source: str, width: int | None = None, height: int | None = None, live: bool = False
) -> Any:
    """The frame as one rich renderable: summary, the node table, the decisions, and in live mode how
    to quit. With ``height`` (a screen's lines) the node table gets what the rest leaves, and says how
    many nodes it could not show; with ``width``, long node names are cut to fit it."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    summary = Text()
    summary.append("nodewright top", style="bold")
    summary.append(f"  {source}  {frame.taken_at:%H:%M:%S}\n", style="dim")
    nodes = sum(1 for r in frame.rows if r.has_node)
    launching = sum(1 for r in frame.rows if not r.has_node and r.state in (LAUNCHING, LAUNCHED))
    summary.append(f"{nodes} node{'' if nodes == 1 else 's'}")
    if launching:
        summary.append(f" + {launching} launching", style="cyan")
    summary.append("  ")
    summary.append(f"${frame.price_per_hour:.4f}/h", style="bold green")
    summary.append(f" (${frame.price_per_hour * HOURS_PER_MONTH:,.2f}/month)")
    if frame.unpriced:
        summary.append(f" + {frame.unpriced} unpriced", style="yellow")
    summary.append(f"  pods {frame.pods_bound} bound, ")
    summary.append(f"{frame.pods_pending} pending", style="bold red" if frame.pods_pending else "")
    for problem in frame.problems:
        summary.append(f"\n{problem}", style="red")

    shown = frame.rows
    if height is not None:
        # summary (2 + problems), the table's header and rule (2), decisions' title, its blank line and
        # header (3), one line per decision (at least 1), the quit line (1)
        room = height - (2 + len(frame.problems)) - 2 - 3 - max(len(frame.decisions), 1) - (1 if live else 0)
        if len(frame.rows) > room:
            shown = frame.rows[: max(room - 1, 1)]
    headers = ("NODEPOOL", "TYPE", "CAPACITY", "ZONE", "$/H", "CPU", "", "MEMORY", "GiB", "PODS", "STATE")
    cells: list[tuple[str, list[Any]]] = []
    for r in shown:
        state = Text(r.state, style=STATE_STYLES.get(r.state, ""))
        if r.state in (REGISTERED, INITIALIZED, DRIFTED, DISRUPTING, UNMANAGED) and not r.ready:
            state.append(" NotReady", style="bold red")
        figures = [
            r.nodepool or "-",
            r.instance_type or "-",
            r.capacity_type or "-",
            r.zone or "-",
            f"{r.price:.4f}" if r.price is not None else "-",
            _bar(r.cpu_requested, r.cpu_allocatable, BAR_WIDTH),
            f"{_cores(r.cpu_requested)}/{_cores(r.cpu_allocatable)}",
            _bar(r.memory_requested, r.memory_allocatable, BAR_WIDTH),
            f"{_gib(r.memory_requested)}/{_gib(r.memory_allocatable)}",
            str(r.pods),
            state,
        ]
        cells.append((r.name, figures))
    # One space between columns; on a narrow screen the node's name gives way (an ellipsis), not the
    # figures: it gets what the other columns leave of ``width``.
    others = sum(
        1
        + max(
            [len(header), *(BAR_WIDTH if header in ("CPU", "MEMORY") else len(str(f[i])) for _, f in cells)]
        )
        for i, header in enumerate(headers)
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=0, header_style="bold")
    name_width = max(12, width - others) if width is not None else None
    table.add_column("NODE", no_wrap=True, overflow="ellipsis", max_width=name_width)
    for header in headers:
        right = header in ("$/H", "", "GiB", "PODS")
        table.add_column(header, justify="right" if right else "left", no_wrap=True)
    for name, figures in cells:
        table.add_row(name, *figures)
    if len(shown) < len(frame.rows):
        table.add_row(Text(f"… and {len(frame.rows) - len(shown)} more", style="dim"))

    events = Table(box=None, pad_edge=False, show_header=True, header_style="bold", expand=True)
    events.add_column("AGE", justify="right", no_wrap=True)
    events.add_column("DECISION", no_wrap=True)
    events.add_column("OBJECT", no_wrap=True)
    events.add_column("MESSAGE", no_wrap=True, overflow="ellipsis", ratio=1)
    for d in frame.decisions:
        reason = Text(d.reason + (f" x{d.count}" if d.count > 1 else ""))
        reason.stylize("yellow" if d.type == "Warning" else "cyan")
        events.add_row(_age(d.at, frame.taken_at), reason, d.regarding, d.message)
    title = Text("\nrecent decisions (events of nodewright)", style="bold")
    parts: list[Any] = [summary, table, title]
    parts.append(events if frame.decisions else Text("  none yet", style="dim"))
    if live:
        parts.append(Text("q or Ctrl-C to quit", style="dim"))
    return Group(*parts)


# -- what is read: the cluster's objects, kept current ------------------------------------------------
class ClusterView:
    """Every resource top shows, each a ``Reflector`` (list, then watch); ``world()`` puts the current
    objects together as a pass would see them, priced by the plan's catalog."""

    def __init__(
        self, cluster: Cluster, prices: Prices, on_change: Callable[[], None] = lambda: None
    ) -> None:
        from nodewright.api.labels import EVENT_COMPONENT
        from nodewright.cluster.informer import Reflector
        from nodewright.cluster.resources import (
            EC2NODECLASSES,
            EVENTS,
            NODECLAIMS,
            NODEOVERLAYS,
            NODEPOOLS,
            NODES,
            PODS,
        )

        self.cluster = cluster
        self.prices = prices
        # --once lists capacity before pods, as a pass reads (a pod that binds in between is seen bound).
        self.reflectors: dict[str, Reflector] = {
            name: Reflector(cluster, resource, on_change=on_change)
            for name, resource in (
                ("nodeclaims", NODECLAIMS),
                ("nodes", NODES),
                ("nodepools", NODEPOOLS),
                ("nodeclasses", EC2NODECLASSES),
                ("nodeoverlays", NODEOVERLAYS),
                ("pods", PODS),
            )
        }
        self.reflectors["events"] = Reflector(
            cluster, EVENTS, field_selector=f"source={EVENT_COMPONENT}", on_change=on_change
        )

    def list_once(self) -> bool:
        """One list of each (``--once``); whether every list succeeded. A refused list (403, ...) is
        kept as that reflector's ``error`` and the others are still read; an API server that cannot be
        reached raises ``ApiUnavailable`` at the first list."""
        from nodewright.cluster.errors import ApiError

        for reflector in self.reflectors.values():
            try:
                reflector.list()
            except ApiError as exc:
                reflector.error = exc
        return all(r.error is None for r in self.reflectors.values())

    def start(self) -> None:
        for reflector in self.reflectors.values():
            reflector.start()

    def stop(self) -> None:
        for reflector in self.reflectors.values():
            reflector.stop()

    @property
    def synced(self) -> bool:
        return all(r.synced.is_set() for r in self.reflectors.values())

    def problems(self) -> list[str]:
        from nodewright.cli import _errors

        found = [
            f"{name}: {_errors.one_line(r.error, '<cluster>', host=self.cluster.host)}"
            for name, r in self.reflectors.items()
            if r.error is not None
        ]
        if self.prices.problem:
            found.append(f"prices: {self.prices.problem}")
        return found

    def world(self) -> World:
        from datetime import UTC

        from nodewright.state.world import World

        read = {name: r.objects() for name, r in self.reflectors.items()}
        self.prices.nodeclasses = read["nodeclasses"]
        self.prices.region_hint(read["nodes"])
        return World(
            taken_at=datetime.now(UTC),
            nodeclaims=read["nodeclaims"],
            nodes=read["nodes"],
            pods=read["pods"],
            nodepools=read["nodepools"],
            nodeclasses=read["nodeclasses"],
            nodeoverlays=read["nodeoverlays"],
            cloud=self.prices,
        )

    def frame(self) -> Frame:
        return build_frame(self.world(), self.reflectors["events"].objects(), self.problems())


class Prices:
    """The World's cloud for top: the catalog and price table ``nodewright plan`` uses
    (``plan.offline_instance_types`` behind ``whatif._OfflineCloud``), made once the region is known;
    each EC2NodeClass's instance types and the price table are kept across frames until an
    EC2NodeClass changes (one catalog costs a few tenths of a second). What cannot be priced (no catalog
    for the region, no AWS credentials for EC2's, a bad --prices file) is ``problem``: those rows show
    no price rather than a wrong one."""

    def __init__(self, region: str | None, prices_file: str | None, live: bool) -> None:
        self.region = region
        self.prices_file = prices_file
        self.live = live
        self.nodeclasses: list[dict[str, Any]] = []
        self.problem = ""
        self._cloud: Any = None
        self._catalog: Callable[[Mapping[str, Any]], list[Any]] | None = None
        self._types: dict[tuple[str, str], list[InstanceType]] = {}
        self._table: tuple[tuple[tuple[str, str], ...], PriceTable] | None = None

    def region_hint(self, nodes: Iterable[Mapping[str, Any]]) -> None:
        """Without --region: the region the nodes' labels name (the first seen), until the catalog is made."""
        if self.region is None:
            from nodewright.api.labels import REGION

            self.region = next(
                (r for n in nodes if (r := ((n.get("metadata") or {}).get("labels") or {}).get(REGION))), None
            )

    def _offline(self) -> Any:
        if self._cloud is None:
            from nodewright.cli.plan import default_region
            from nodewright.provisioning.whatif import _OfflineCloud

            self._cloud = _OfflineCloud(self.instance_types, self.region or default_region()[0])
        return self._cloud

    @staticmethod
    def _version(nodeclass: Mapping[str, Any]) -> tuple[str, str]:
        meta = nodeclass.get("metadata") or {}
        return (str(meta.get("name") or ""), str(meta.get("resourceVersion") or ""))

    def instance_types(self, nodeclass: Mapping[str, Any]) -> list[InstanceType]:
        from nodewright.cli import _errors
        from nodewright.cli.plan import PricesFileError, offline_instance_types
        from nodewright.observability import logger_level

        key = self._version(nodeclass)
        if key not in self._types:
            with logger_level("ERROR"):  # the catalog's warnings would garble the screen
                try:
                    if self._catalog is None:
                        self._catalog = offline_instance_types(
                            self._offline().region, self.prices_file, self.live
                        )
                    self._types[key] = list(self._catalog(nodeclass))
                except PricesFileError as exc:
                    self.problem = str(exc)
                    self._types[key] = []
                except _errors.stopping_errors() as exc:
                    self.problem = _errors.one_line(exc, "<cluster>")
                    self._types[key] = []
        return self._types[key]

    def prices(self) -> PriceTable:
        key = tuple(sorted(self._version(n) for n in self.nodeclasses))
        if self._table is None or self._table[0] != key:
            cloud = self._offline()
            cloud.nodeclasses = self.nodeclasses
            self._table = (key, cloud.prices())
        return self._table[1]

    def node_price(self, nodeclass: Mapping[str, Any]) -> float:
        return float(self._offline().node_price(nodeclass))


# -- the command ----------------------------------------------------------------------------------------
def _kubeconfig(given: str | None) -> str:
    import os

    return given or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def run(args: argparse.Namespace) -> int:
    import sys

    from nodewright.cli import _errors
    from nodewright.cli.plan import live_cluster

    try:
        import rich  # noqa: F401
    except ModuleNotFoundError:
        print("nodewright top: it draws with rich: pip install 'nodewright[cli]'", file=sys.stderr)
        return 2
    cluster = live_cluster(_kubeconfig(args.kubeconfig))
    if cluster is None:
        return 2
    prices = Prices(args.region, args.prices, args.live)
    source = f"{cluster.host} (read-only)"
    if args.once:
        view = ClusterView(cluster, prices)
        try:
            complete = view.list_once()
        except _errors.stopping_errors() as exc:
            why = _errors.one_line(exc, "<cluster>", host=cluster.host)
            print(f"nodewright top: reading the cluster failed: {why}", file=sys.stderr)
            return 1
        _print_once(view.frame(), source, args)
        return 0 if complete else 1
    if not sys.stdout.isatty():
        print(
            "nodewright top: the live view needs a terminal; use --once to print one frame", file=sys.stderr
        )
        return 2
    return _live(cluster, prices, source)


def _print_once(frame: Frame, source: str, args: argparse.Namespace) -> None:
    from rich.console import Console

    probe = Console()
    width = args.width or (probe.width if probe.is_terminal else DEFAULT_WIDTH)
    view = render(frame, source=source, width=width)
    Console(width=width).print(view)
    if args.svg:  # in colour, whatever stdout is
        import io

        image = Console(
            file=io.StringIO(), width=width, record=True, force_terminal=True, color_system="truecolor"
        )
        image.print(view)
        image.save_svg(args.svg, title="nodewright top")


def _live(cluster: Cluster, prices: Prices, source: str) -> int:
    import threading
    import time

    from rich.console import Console
    from rich.live import Live

    changed = threading.Event()
    view = ClusterView(cluster, prices, on_change=changed.set)
    console = Console()
    view.start()
    try:
        with _keypresses() as key, Live(console=console, screen=True, auto_refresh=False) as live:
            drawn = 0.0
            while key(MIN_REDRAW_SECONDS) not in ("q", "Q"):
                # A change is drawn within MIN_REDRAW_SECONDS; the ages move once a second regardless.
                if changed.is_set() or time.monotonic() - drawn >= MAX_REDRAW_SECONDS:
                    changed.clear()
                    frame = view.frame()
                    if not view.synced:
                        frame.problems.insert(0, "listing the cluster …")
                    live.update(
                        render(frame, source=source, width=console.width, height=console.height, live=True),
                        refresh=True,
                    )
                    drawn = time.monotonic()
            return 0
    except KeyboardInterrupt:
        return 0
    finally:
        view.stop()


@contextlib.contextmanager
def _keypresses() -> Iterator[Callable[[float], str]]:
    """``key(timeout)``: the key pressed within ``timeout`` seconds, or "". The terminal is in cbreak mode
    meanwhile (keys arrive unbuffered; Ctrl-C still interrupts) and restored after."""
    import select
    import sys

    stdin = sys.stdin
    try:
        import termios
        import tty
    except ImportError:  # not a POSIX terminal: only Ctrl-C quits
        termios = None  # type: ignore[assignment]
    if termios is None or not stdin.isatty():
        import time

        def wait(timeout: float) -> str:
            time.sleep(timeout)
            return ""

        yield wait
        return
    saved = termios.tcgetattr(stdin)
    tty.setcbreak(stdin)

    def read(timeout: float) -> str:
        ready, _, _ = select.select([stdin], [], [], timeout)
        return stdin.read(1) if ready else ""

    try:
        yield read
    finally:
        termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
