"""``nodewright bench report``: the docs' figures from the benches' saved runs (``--save``).

Each benchmark run with ``--save`` keeps its figures, command line, date, commit and load average
in ``bench/results/<bench>.json`` (``bench/_report.py``). This command renders them into the
generated sections of ``docs/performance.md``, ``docs/reliability.md`` and the README's headline
table (between ``<!-- bench:NAME:begin -->`` and ``<!-- bench:NAME:end -->``; the prose around
them is written by hand), draws the pictures a reader would rather look at than read
(``docs/img/*.svg``: latency distributions, plan cost against the LP bound per mix, consolidation's
convergence), and refreshes the feature table of ``docs/features.md`` and its summary in the README
from ``nodewright.api.features``. A figure nobody has saved yet is shown as not measured, with the
command that measures it: nothing is carried over by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench._report import RESULTS, load

ROOT = RESULTS.parents[1]
TIMES = "\N{MULTIPLICATION SIGN}"
IMAGES = "docs/img"
# The figures each results file must have for the report: every bench's --save is held to these
# (tests/e2e/test_json_output_hygiene.py, tests/e2e/test_chaos_run.py).
READS: dict[str, frozenset[str]] = {
    "scheduling": frozenset(
        {"mix", "pods", "nodes", "cpu_seconds", "seconds", "plan_per_hour", "ebs_per_hour", "unschedulable"}
    ),
    "consolidation": frozenset(
        {
            "nodes",
            "pods",
            "first_pass_seconds",
            "first_pass_cpu_seconds",
            "first_pass_command",
            "passes_applied",
            "before_per_hour",
            "after_per_hour",
            "fresh_plan_per_hour",
            "lp_bound_per_hour",
            "per_hour_by_pass",
        }
    ),
    "latency": frozenset({"p50Seconds", "p99Seconds", "maxSeconds", "samples", "samplesSeconds"}),
    "scheduler-stall": frozenset(
        {"noWebhookPerSecond", "healthyPerSecond", "unreachablePerSecond", "design"}
    ),
    "interruption": frozenset(
        {
            "nodes",
            "podsPerNode",
            "warningsSpreadSeconds",
            "cordoned",
            "cordonedP50Seconds",
            "cordonedP99Seconds",
            "cordonedMaxSeconds",
            "replacementRequestedP99Seconds",
            "replacementRequestedMaxSeconds",
            "drained",
            "lastDrainedSeconds",
            "handledTwice",
            "apiRequestsPerSecondPeak",
            "dynamodbWrites",
            "cordonedSeconds",
        }
    ),
    "pass": frozenset(
        {
            "nodes",
            "pods",
            "provisioningPassSeconds",
            "provisioningPassCpuSeconds",
            "provisioningFirstPassSeconds",
            "provisioningPeakRssMiB",
            "provisioningApiRequests",
            "disruptionPassSeconds",
            "disruptionPassCpuSeconds",
            "disruptionFirstPassSeconds",
            "disruptionFirstPassApiRequests",
            "disruptionPeakRssMiB",
            "disruptionApiRequests",
            "peakRssMiB",
            "apiRequests",
        }
    ),
    "sandbox": frozenset({"runs", "start_median_seconds", "start_max_seconds", "stop_median_seconds"}),
    "chaos": frozenset(
        {
            "steps",
            "seed",
            "violations",
            "podsScheduled",
            "podPendingToBoundSeconds",
            "pendingWithCapacity",
            "costVersusFreshPlan",
            "leakedInstances",
            "duplicateNodeClaims",
            "invocations",
            "invocationErrors",
            "tracebacks",
            "converged",
            "realSeconds",
            "disturbances",
        }
    ),
}
# The latency bench saves warm runs' figures flat and --from-idle runs' as {"paths": [...]}.
FROM_IDLE_READS = frozenset({"wakeup", "p50Seconds", "p99Seconds", "samplesSeconds"})


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="regenerate docs/performance.md, docs/reliability.md and the README's figures "
        "from bench/results",
        description=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="where the saved runs are (default bench/results)"
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository whose README and docs/ are rewritten"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        written = render(args.results, args.root)
    except ReportError as exc:
        print(f"bench report: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


class ReportError(Exception):
    """A results file or a doc the report cannot use; the message says which and what to do."""


# --- the saved runs -------------------------------------------------------------------------------


class Results:
    """The saved runs of every bench in a directory."""

    def __init__(self, directory: Path) -> None:
        self.runs: dict[str, list[dict[str, Any]]] = {}
        for path in sorted(directory.glob("*.json")):
            try:
                runs = load(path)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise ReportError(f"{path}: not a saved run ({exc}); save it again with --save") from exc
            bench = path.stem
            needed = READS.get(bench, frozenset())
            for run in runs:
                figures = run.get("figures") or {}
                missing: set[str] = set(needed - set(figures))
                if "paths" in figures:  # bench latency --from-idle: one entry per path
                    missing = {k for p in figures["paths"] for k in FROM_IDLE_READS - set(p)}
                if missing:
                    raise ReportError(
                        f"{path}: the run of `{run.get('command')}` lacks {', '.join(sorted(missing))}; "
                        "run that command again with --save"
                    )
            self.runs[bench] = runs

    def of(
        self, bench: str, where: Callable[[dict[str, Any]], bool] = lambda f: True
    ) -> list[dict[str, Any]]:
        return [r for r in self.runs.get(bench, []) if where(r["figures"])]

    def one(self, bench: str, command: str) -> dict[str, Any] | None:
        return next((r for r in self.runs.get(bench, []) if r["command"] == command), None)


def canonical(command: str) -> str:
    """``command`` as ``--save`` records it (options at their default left out), so that a
    command written out in full finds its saved run."""
    from nodewright.cli import build_parser

    from bench._report import command_line

    args = build_parser().parse_args(shlex.split(command)[1:])
    return command_line(args.save_parser, args)


def _load(run: dict[str, Any]) -> str:
    return " / ".join(f"{x:g}" for x in run["loadAverage"])


def _measured(run: dict[str, Any]) -> str:
    commit = f", commit {run['commit']}" if run.get("commit") else ""
    return f"{run['date'][:10]}{commit}, load {_load(run)}"


def _cmd(run_or_command: dict[str, Any] | str) -> str:
    command = run_or_command if isinstance(run_or_command, str) else run_or_command["command"]
    return f"`{command}`"


def _money(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _not_measured(command: str) -> str:
    return f"Not measured yet: run {_cmd(command + ' --save')}, then `nodewright bench report`.\n"


# --- sections -------------------------------------------------------------------------------------

SCHEDULING_MIXES = (
    "generic",
    "diverse",
    "inflate",
    "zonal-spread",
    "hostname-spread",
    "zonal-affinity",
    "hostname-anti-affinity",
)


def _scheduling_runs(results: Results) -> list[dict[str, Any]]:
    def order(run: dict[str, Any]) -> tuple[int, int]:
        f = run["figures"]
        mix = SCHEDULING_MIXES.index(f["mix"]) if f["mix"] in SCHEDULING_MIXES else len(SCHEDULING_MIXES)
        return f["pods"], mix

    return sorted(results.of("scheduling"), key=order)


def scheduling_section(results: Results) -> str:
    runs = _scheduling_runs(results)
    if not runs:
        return _not_measured("nodewright bench scheduling --pods 10000 --mix generic")
    rows = []
    for run in runs:
        f = run["figures"]
        ratio = f.get("ratio")
        optimum = f.get("optimum_per_hour")
        rows.append(
            (
                f["mix"],
                f"{f['pods']:,}",
                f"{f['nodes']:,}" + (f" ({f['unschedulable']} unschedulable)" if f["unschedulable"] else ""),
                f"{f['cpu_seconds']:.2f} ({f['seconds']:.2f})",
                f"{round(f['pods'] / f['cpu_seconds']):,}" if f["cpu_seconds"] else "—",
                f"{_money(f['plan_per_hour'])} ({f['ebs_per_hour']:.2f})"
                + (" optimal" if optimum is not None and abs(optimum - f["plan_per_hour"]) < 1e-6 else ""),
                _money(f.get("lp_bound_per_hour")),
                f"{ratio:.3f}" if ratio is not None else "—",
                _money(f.get("ffd_per_hour")),
                _load(run),
                _cmd(run),
            )
        )
    return (
        _table(
            (
                "mix",
                "pods",
                "nodes",
                "CPU s (wall s)",
                "pods per CPU s",
                "plan $/h (EBS of it)",
                "LP bound $/h",
                "plan/bound",
                "FFD $/h",
                "load 1/5/15 min",
                "command",
            ),
            rows,
        )
        + f"\nMeasured {_span(runs)}; prices: `{Path(str(runs[0]['figures'].get('prices'))).name}`.\n"
    )


def consolidation_section(results: Results) -> str:
    runs = sorted(results.of("consolidation"), key=lambda r: -r["figures"]["nodes"])
    if not runs:
        return _not_measured("nodewright bench consolidation --nodes 1000 --pods 10000 --passes 30")
    rows = []
    for run in runs:
        f = run["figures"]
        passes = f["passes_applied"]
        after = f"{_money(f['before_per_hour'])} → {_money(f['after_per_hour'])}" if passes else "—"
        ratio = f.get("after_vs_fresh") if passes else None
        rows.append(
            (
                f"{f['nodes']:,} / {f['pods']:,}",
                f"{f['first_pass_seconds']:.2f} ({f['first_pass_cpu_seconds']:.2f})",
                f["first_pass_command"] or "none",
                passes,
                _money(f["before_per_hour"]) if not passes else after,
                _money(f["fresh_plan_per_hour"]),
                _money(f["lp_bound_per_hour"]),
                f"{ratio:.3f}" if ratio is not None else "—",
                " / ".join(
                    "—" if (n := (f.get("passes_to") or {}).get(k)) is None else str(n)
                    for k in ("1.10", "1.05", "1.02")
                ),
                f"{f['max_pass_cpu_seconds']:.1f}" if "max_pass_cpu_seconds" in f else "—",
                _load(run),
                _cmd(run),
            )
        )
    return (
        _table(
            (
                "nodes / pods",
                "first pass: decision s (CPU s)",
                "first command",
                "passes applied",
                "$/h (before → after)",
                "fresh plan $/h",
                "LP bound $/h",
                "after / fresh",
                f"passes to 1.10 / 1.05 / 1.02{TIMES} fresh",
                "slowest pass CPU s",
                "load 1/5/15 min",
                "command",
            ),
            rows,
        )
        + f"\nMeasured {_span(runs)}.\n"
    )


BURST_COMMAND = "nodewright bench latency --bursts 3 --pods 100"


def _warm_runs(results: Results) -> list[dict[str, Any]]:
    return results.of("latency", lambda f: "paths" not in f)


def _idle_paths(results: Results) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (run, path)
        for run in results.of("latency", lambda f: "paths" in f)
        for path in run["figures"]["paths"]
    ]


def latency_section(results: Results) -> str:
    rows = []
    for run in _warm_runs(results):
        f = run["figures"]
        rows.append(
            (
                f"warm provisioner, pending pod → CreateFleet ({f['bursts']} bursts of {f['podsPerBurst']})",
                f["samples"],
                f"{f['p50Seconds']:.2f}",
                f"{f['p99Seconds']:.2f}",
                f"{f['maxSeconds']:.2f}",
                _load(run),
                _cmd(run),
            )
        )
    for run, path in _idle_paths(results):
        what = "with the wake-up" if path["wakeup"] else "schedule only"
        rows.append(
            (
                f"from idle, {what}, pod created → NodeClaim "
                f"({path['bursts']} bursts of {path['podsPerBurst']})",
                path["samples"],
                f"{path['p50Seconds']:.2f}",
                f"{path['p99Seconds']:.2f}",
                f"{path['maxSeconds']:.2f}",
                _load(run),
                _cmd(run),
            )
        )
    if not rows:
        return _not_measured("nodewright bench latency")
    table = _table(("path", "pods", "p50 s", "p99 s", "max s", "load 1/5/15 min", "command"), rows)
    bursts = [run for run in _warm_runs(results) if "nodesPerBurst" in run["figures"]]
    if not bursts:
        return table
    burst_rows = [
        (
            f"{run['figures']['bursts']} {TIMES} {run['figures']['podsPerBurst']}",
            ", ".join(str(n) for n in run["figures"]["nodesPerBurst"]),
            ", ".join(str(n) for n in run["figures"]["nodesPerBatch"]),
            ", ".join(f"{s:.2f}" for s in run["figures"]["batchClosedToLastFleetSeconds"]),
            ", ".join(f"{s:.2f}" for s in run["figures"]["batchClosedToLastLaunchedSeconds"]),
            ", ".join(f"{s:.2f}" for s in run["figures"]["firstBatchClosedToBurstsLastFleetSeconds"]),
            ", ".join(f"{s:.2f}" for s in run["figures"].get("batchClosedToLastFleetProcessCpuSeconds", []))
            or "not measured then",
            _load(run),
            _cmd(run),
        )
        for run in bursts
    ]
    note = (
        "\nBursts that need many nodes, per batch in order: its NodeClaims and the seconds from the "
        "batch closing to its last CreateFleet sent and answered; per burst, from its first batch "
        "closing to its last CreateFleet; the bench process's CPU seconds from each batch closing to "
        "its last CreateFleet sent (sandbox and handler together).\n\n"
    )
    header = (
        "bursts",
        "NodeClaims a burst",
        "NodeClaims a batch",
        "batch closed → last CreateFleet sent s",
        "→ answered s",
        "burst: first batch closed → last sent s",
        "batch closed → last sent, process CPU s",
        "load 1/5/15 min",
        "command",
    )
    return table + note + _table(header, burst_rows)


def stall_section(results: Results) -> str:
    runs = results.of("scheduler-stall")
    if not runs:
        return _not_measured("nodewright bench scheduler-stall")
    rows = []
    for run in runs:
        f = run["figures"]
        none = f["noWebhookPerSecond"]
        rows.append(
            (
                "the wake-up on `FailedScheduling` Events"
                if f["design"] == "product"
                else "the pods/status design",
                f["pods"],
                f"{none:g}",
                f"{f['healthyPerSecond']:g} ({f['healthyPerSecond'] / none:.0%})" if none else "—",
                f"{f['unreachablePerSecond']:g} ({f['unreachablePerSecond'] / none:.0%})" if none else "—",
                _load(run),
                _cmd(run),
            )
        )
    return _table(
        (
            "configuration",
            "pods",
            "no webhook /s",
            "healthy /s",
            "unreachable /s",
            "load 1/5/15 min",
            "command",
        ),
        rows,
    )


def _storm_row(run: dict[str, Any]) -> tuple[str, str, str, str]:
    """A headline row for one saved storm; one whose nodes were not all acted on says how many were."""
    f = run["figures"]
    nodes = f["nodes"]

    def of(count: int) -> str:
        return "" if count == nodes else f"{count} of {nodes}, "

    return (
        f"AZ-wide spot reclaim of {nodes} nodes: warning → cordoned, → replacement, last drained",
        f"{of(f['cordoned'])}p99 {_or_none(f['cordonedP99Seconds'], unit=' s')}; "
        f"{of(f['replacementRequested'])}p99 {_or_none(f['replacementRequestedP99Seconds'], unit=' s')}; "
        f"{of(f['drained'])}last {_or_none(f['lastDrainedSeconds'], '.0f', ' s')}; "
        f"peak {f['apiRequestsPerSecondPeak']} API requests/s",
        "≤ 30 s, ≤ 30 s, ≤ 120 s (500 nodes)",
        _cmd(run),
    )


def _or_none(value: float | None, spec: str = ".1f", unit: str = "") -> str:
    """A storm figure, or "none" when nothing was measured (no node replaced within the run)."""
    return "none" if value is None else format(value, spec) + unit


def interruption_section(results: Results) -> str:
    runs = results.of("interruption")
    if not runs:
        return _not_measured("nodewright bench interruption --nodes 500")
    storm = [
        (
            f"{f['nodes']} {TIMES} {f['podsPerNode']}",
            f"{f['warningsSpreadSeconds']:.1f}",
            f"{f['cordoned']}",
            f"{_or_none(f['cordonedP50Seconds'])} / {_or_none(f['cordonedP99Seconds'])} / "
            f"{_or_none(f['cordonedMaxSeconds'])}",
            (
                f"{_or_none(f['nodeClaimMarkedP99Seconds'])} / {_or_none(f['nodeClaimMarkedMaxSeconds'])}"
                if "nodeClaimMarkedP99Seconds" in f
                else "not measured then"
            ),
            f"{_or_none(f['replacementRequestedP99Seconds'])} / "
            f"{_or_none(f['replacementRequestedMaxSeconds'])}",
            f"{f['drained']}, last {_or_none(f['lastDrainedSeconds'], '.0f')}",
            f["handledTwice"],
            f["apiRequestsPerSecondPeak"],
            f["dynamodbWrites"],
            _load(run),
            _cmd(run),
        )
        for run in runs
        if (f := run["figures"])
    ]
    out = _table(
        (
            f"nodes {TIMES} pods",
            "warnings spread s",
            "cordoned",
            "→ cordoned p50 / p99 / max s",
            "→ NodeClaim marked p99 / max s",
            "→ replacement p99 / max s",
            "drained, last s",
            "acted twice",
            "API requests/s peak",
            "DynamoDB writes",
            "load 1/5/15 min",
            "command",
        ),
        storm,
    )
    throughput = [
        (f"{f['messagesPerSecond']:g}", f["failedMessages"], _load(run), _cmd(run))
        for run in runs
        if "messagesPerSecond" in (f := run["figures"])
    ]
    if throughput:
        out += "\n" + _table(
            ("messages/s (batches of 10)", "failed messages", "load 1/5/15 min", "command"), throughput
        )
    return out


def pass_section(results: Results) -> str:
    runs = results.of("pass")
    if not runs:
        return _not_measured("nodewright bench pass --nodes 5000 --pods 50000")
    rows = []
    for run in runs:
        f = run["figures"]
        for which, memory in (("provisioning", "512"), ("disruption", "1024")):
            first_cpu = f.get(which + "FirstPassCpuSeconds")
            changed = f.get(which + "ChangedPassSeconds")
            rows.append(
                (
                    f"{f['nodes']:,} {TIMES} {f['pods']:,}",
                    which,
                    f"{f[which + 'PassSeconds']:.1f} ({f[which + 'PassCpuSeconds']:.1f} CPU)",
                    f"{f[which + 'FirstPassSeconds']:.1f}"
                    + (f" ({first_cpu:.1f} CPU)" if first_cpu is not None else ""),
                    f"{changed:.1f} ({f[which + 'ChangedPassCpuSeconds']:.1f} CPU)"
                    if changed is not None
                    else "—",
                    f"{f[which + 'PeakRssMiB']} of {memory}",
                    f"{f[which + 'ApiRequests']:,}"
                    + (
                        f" / {first:,}"
                        if (first := f.get(which + "FirstPassApiRequests")) is not None
                        else ""
                    ),
                    _load(run),
                    _cmd(run),
                )
            )
    return _table(
        (
            f"nodes {TIMES} pods",
            "pass",
            "steady pass s",
            "first pass s",
            "changed-cluster pass s",
            "peak RSS MiB",
            "API requests (steady / first)",
            "load 1/5/15 min",
            "command",
        ),
        rows,
    )


def sandbox_section(results: Results) -> str:
    runs = results.of("sandbox")
    if not runs:
        return _not_measured("nodewright bench sandbox --runs 5")
    rows = [
        (
            r["figures"]["runs"],
            f"{r['figures']['start_median_seconds']:.2f}",
            f"{r['figures']['start_max_seconds']:.2f}",
            f"{r['figures']['stop_median_seconds']:.2f}",
            _load(r),
            _cmd(r),
        )
        for r in runs
    ]
    return _table(
        ("runs", "start median s", "start max s", "stop median s", "load 1/5/15 min", "command"), rows
    )


def cost_section(results: Results) -> str:
    runs = [r for r in _warm_runs(results) if "monthlyCostUSD" in r["figures"]]
    if not runs:
        return _not_measured("nodewright bench latency")
    run = runs[-1]
    f = run["figures"]
    idle, cost = f["idleInvocationSeconds"], f["monthlyCostUSD"]
    disruption = f["disruptionIdleInvocationSeconds"]
    rows = [
        (
            "provisioner, idle (one pass a minute)",
            f"{idle['warmMedian']:.3f} s warm, {idle['cold']:.2f} s cold",
            f"${cost['idle']['arm64']:.2f}",
        ),
        ("provisioner, busy all month (a 55 s loop every minute)", "55 s", f"${cost['busy']['arm64']:.2f}"),
        (
            "disruption, idle (one pass a minute, 1 GB)",
            f"{disruption['warmMedian']:.3f} s warm, {disruption['cold']:.2f} s cold",
            f"${f['disruptionIdleMonthlyCostUSD']['arm64']:.2f}",
        ),
    ]
    return (
        _table(("function", "invocation", "Lambda arm64 $/month"), rows)
        + f"\nProvisioner handler import {f['handlerImportSeconds']:.2f} s. "
        f"{_cmd(run)}, measured {_measured(run)}.\n"
    )


def chaos_section(results: Results) -> str:
    runs = results.of("chaos")
    if not runs:
        return _not_measured("nodewright chaos --steps 300 --seed 3 --json")
    out = []
    for run in runs:
        f = run["figures"]
        timing, pending, cost = (
            f["podPendingToBoundSeconds"],
            f["pendingWithCapacity"],
            f["costVersusFreshPlan"],
        )
        violations = sum(f["violations"].values())
        disturbances = ", ".join(
            f"{k} {v}" for k, v in sorted(f["disturbances"].items(), key=lambda kv: -kv[1])
        )
        rows = [
            ("steps (seed)", f"{f['steps']:,} (seed {f['seed']}) in {f['realSeconds']:,.0f} s real"),
            ("disturbances", disturbances),
            (
                "invariant violations",
                f"**{violations}**" + (f" ({_kinds(f['violations'])})" if violations else ""),
            ),
            ("pods scheduled", f"{f['podsScheduled']:,}"),
            (
                "pending → bound (simulated s)",
                f"p50 {timing['p50']:g}, p99 {timing['p99']:g}, max {timing['max']:g}",
            ),
            (
                f"pending while capacity existed (limit {pending['limitSeconds']:g} s)",
                f"longest {pending['maxSeconds']:g} s, {pending['violations']} violations",
            ),
            (
                f"$/h versus a fresh plan (bound {cost['bound']:g}{TIMES}, "
                f"window {cost['windowSeconds']:g} s)",
                f"highest {cost['maxRatio']:g}{TIMES}, "
                f"longest above the bound {cost['longestAboveBoundSeconds']:g} s, "
                f"{cost['violations']} violations",
            ),
            (
                "leaked instances / NodeClaims with two instances",
                f"{f['leakedInstances']} / {f['duplicateNodeClaims']}",
            ),
            (
                "invocations",
                f"{f['invocations']:,}, {f['invocationErrors']} errors, {f['tracebacks']} tracebacks",
            ),
            ("converged at the end", "yes" if f["converged"] else "**no**"),
        ]
        out.append(f"{_cmd(run)}, measured {_measured(run)}:\n\n" + _table(("figure", "value"), rows))
    return "\n".join(out)


def _kinds(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v)


def _span(runs: list[dict[str, Any]]) -> str:
    dates = sorted({r["date"][:10] for r in runs})
    commits = sorted({r["commit"] for r in runs if r.get("commit")})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return when + (f" on commit {', '.join(commits)}" if commits else "")


# --- the README's headline table ------------------------------------------------------------------


def _after_passes(figures: dict[str, Any], passes: int) -> str:
    """The cluster's $/h after ``passes`` passes over the fresh plan's (the last, if fewer ran)."""
    series = figures["per_hour_by_pass"]
    reached = series[min(passes, len(series) - 1)]
    return f"{reached / figures['fresh_plan_per_hour']:.3f}{TIMES}"


def _at_the_end(figures: dict[str, Any]) -> str:
    """Where the passes stopped: the ratio to the fresh plan and how many passes were applied (fewer
    than asked when a pass found no command left)."""
    return f"{figures['after_vs_fresh']:.3f}{TIMES} after {figures['passes_applied']} passes"


def headline_section(results: Results) -> str:
    """One row per headline figure, each with the command that measures it."""
    rows: list[tuple[str, str, str, str]] = []

    def row(what: str, goal: str, command: str, value: Callable[[dict[str, Any]], str], bench: str) -> None:
        run = results.one(bench, canonical(command))
        rows.append((what, value(run["figures"]) if run else "not measured yet", goal, _cmd(command)))

    row(
        "scheduling: 10,000 diverse pods planned",
        "≥ 5,000 pods/s",
        "nodewright bench scheduling --pods 10000 --mix diverse",
        lambda f: f"{round(f['pods'] / f['cpu_seconds']):,} pods per CPU s",
        "scheduling",
    )
    row(
        "scheduling: plan cost against the LP lower bound, 10,000 generic pods",
        f"≤ 1.05{TIMES}",
        "nodewright bench scheduling --pods 10000 --mix generic",
        lambda f: f"{f['ratio']:.3f}{TIMES}",
        "scheduling",
    )
    large = "nodewright bench consolidation --nodes 1000 --pods 10000 --passes 30"
    row(
        "consolidation: a decision on 1,000 nodes / 10,000 pods (first; slowest of the passes)",
        "≤ 10 s",
        large,
        lambda f: (
            f"{f['first_pass_seconds']:.1f} s ({f['first_pass_cpu_seconds']:.1f} CPU s); "
            f"slowest {f.get('max_pass_cpu_seconds', 0):.1f} CPU s"
        ),
        "consolidation",
    )
    row(
        "consolidation: 1,000 nodes / 10,000 pods after 10 passes (10 % budget) against a fresh plan",
        f"≤ 1.05{TIMES}",
        large,
        lambda f: _after_passes(f, 10),
        "consolidation",
    )
    row(
        "consolidation: 1,000 nodes / 10,000 pods once no command is left (≤ 30 passes) against a fresh plan",
        f"≤ 1.02{TIMES}",
        large,
        _at_the_end,
        "consolidation",
    )
    row(
        "consolidation: 200 nodes / 2,000 pods once no command is left (≤ 30 passes) against a fresh plan",
        f"≤ 1.02{TIMES}",
        "nodewright bench consolidation --nodes 200 --pods 2000 --passes 30",
        _at_the_end,
        "consolidation",
    )
    row(
        "pending pod → CreateFleet, warm provisioner",
        "p50 ≤ 1.5 s, p99 ≤ 2.5 s",
        "nodewright bench latency",
        lambda f: f"p50 {f['p50Seconds']:.2f} s, p99 {f['p99Seconds']:.2f} s",
        "latency",
    )
    row(
        "100-pod burst needing 20 nodes: a batch closed → its last CreateFleet sent",
        "≤ 3 s",
        BURST_COMMAND,
        lambda f: (
            f"{f['batchClosedToLastFleetMaxSeconds']:.2f} s (answered "
            f"{f['batchClosedToLastLaunchedMaxSeconds']:.2f} s), worst batch of {f['bursts']} bursts"
        ),
        "latency",
    )
    row(
        "pod → NodeClaim from an idle provisioner, with the wake-up",
        "p50 ≤ 2 s, p99 ≤ 5 s",
        "nodewright bench latency --bursts 5 --pods 3 --from-idle --only-wakeup",
        lambda f: f"p50 {f['paths'][0]['p50Seconds']:.2f} s, p99 {f['paths'][0]['p99Seconds']:.2f} s",
        "latency",
    )
    row(
        "kube-scheduler with the wake-up's URL unreachable",
        "within 5 % of no webhook",
        "nodewright bench scheduler-stall",
        lambda f: f"{f['unreachablePerSecond']:g} vs {f['noWebhookPerSecond']:g} pods/s",
        "scheduler-stall",
    )
    throughputs = [r for r in results.of("interruption") if "messagesPerSecond" in r["figures"]]
    most = max(throughputs, key=lambda r: r["figures"]["messages"], default=None)
    rows.append(
        (
            "interruption: SQS messages handled",
            f"{most['figures']['messagesPerSecond']:g} msg/s" if most else "not measured yet",
            "≥ 200 msg/s",
            _cmd(most or "nodewright bench interruption --messages 1000"),
        )
    )
    storms = [r for r in results.of("interruption") if "cordonedP99Seconds" in r["figures"]]
    biggest = max(storms, key=lambda r: r["figures"]["nodes"], default=None)
    if biggest is None:
        rows.append(
            (
                "AZ-wide spot reclaim: warning → cordoned, → replacement, last drained",
                "not measured yet",
                "≤ 30 s, ≤ 30 s, ≤ 120 s (500 nodes)",
                _cmd("nodewright bench interruption --nodes 500 --messages 0"),
            )
        )
    # The biggest storm every node of which drained, and the biggest of all when that one did not
    # get through: where the goals hold, and where they do not yet.
    whole = [r for r in storms if r["figures"].get("drained") == r["figures"]["nodes"]]
    biggest_whole = max(whole, key=lambda r: r["figures"]["nodes"], default=None)
    if biggest_whole is not None:
        rows.append(_storm_row(biggest_whole))
    if biggest is not None and biggest is not biggest_whole:
        rows.append(_storm_row(biggest))
    row(
        "a pass over 5,000 nodes / 50,000 pods: provisioning, disruption",
        "≤ 20 s each, in 512 / 1024 MB",
        "nodewright bench pass --nodes 5000 --pods 50000",
        lambda f: (
            f"steady {f['provisioningPassSeconds']:.1f} s, {f['provisioningPeakRssMiB']} MB; "
            f"{f['disruptionPassSeconds']:.1f} s, {f['disruptionPeakRssMiB']} MB; a cold provisioner's "
            f"{f['provisioningFirstPassSeconds']:.1f} s; a searching disruption pass "
            f"{f['disruptionChangedPassSeconds']:.1f} s"
        ),
        "pass",
    )
    row(
        "idle cost (provisioner + disruption, Lambda arm64)",
        "—",
        "nodewright bench latency",
        lambda f: (
            f"${f['monthlyCostUSD']['idle']['arm64'] + f['disruptionIdleMonthlyCostUSD']['arm64']:.2f}/month"
        ),
        "latency",
    )
    row(
        "chaos: seeded faults, invariant violations",
        "0",
        "nodewright chaos --steps 300 --seed 3",
        lambda f: f"{sum(f['violations'].values())} in {f['steps']} steps, converged: {f['converged']}",
        "chaos",
    )
    return _table(("figure", "measured", "goal", "command"), rows)


# --- the feature table ----------------------------------------------------------------------------


def feature_summary() -> str:
    """The README's summary of ``docs/features.md``: per kind, fields acted on and those that are not."""
    from nodewright.api.features import FEATURES

    kinds: dict[str, list[Any]] = {}
    for feature in FEATURES:
        kinds.setdefault(feature.kind, []).append(feature)
    rows = []
    for kind, features in kinds.items():
        inert = [f"`{f.label}`" for f in features if not f.acted_on]
        if kind == "EC2NodeClass":  # the kubelet fields Karpenter passes through (feature_table's last row)
            inert.append("`spec.kubelet.<any other upstream field>`")
        rows.append((kind, len(features), sum(1 for f in features if f.acted_on), ", ".join(inert) or "—"))
    return _table(("kind", "fields", "acted on", "accepted, not acted on"), rows)


# --- pictures -------------------------------------------------------------------------------------


def _pyplot() -> Any:
    """matplotlib with a non-interactive backend and reproducible SVG (no date, fixed ids): a
    figure changes in git only when its data does."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "nodewright", "svg.fonttype": "none", "font.size": 9})
    return plt


def _save(plt: Any, figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(figure)
    return path


def latency_picture(results: Results, path: Path) -> Path | None:
    """The share of pods launched within t seconds, for each path measured (an empirical CDF)."""
    curves: list[tuple[str, list[float]]] = []
    for run in _warm_runs(results):
        curves.append(("warm provisioner: pod → CreateFleet", run["figures"]["samplesSeconds"]))
    for _run, p in _idle_paths(results):
        label = "from idle, with the wake-up" if p["wakeup"] else "from idle, schedule only"
        curves.append((f"{label}: pod → NodeClaim", p["samplesSeconds"]))
    for run in results.of("interruption"):
        nodes = run["figures"]["nodes"]
        curves.append((f"spot reclaim of {nodes}: warning → cordoned", run["figures"]["cordonedSeconds"]))
    curves = [(label, sorted(s)) for label, s in curves if s]
    if not curves:
        return None
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.6))
    for label, samples in curves:
        n = len(samples)
        axes.step(samples, [(i + 1) / n for i in range(n)], where="post", label=f"{label} ({n})")
    axes.axvline(2, color="grey", linestyle=":", linewidth=1)
    axes.axvline(5, color="grey", linestyle="--", linewidth=1)
    axes.set_xlabel("seconds (dotted: 2 s, the p50 goal; dashed: 5 s, the p99 goal)")
    axes.set_ylabel("share of pods / messages")
    axes.set_ylim(0, 1.02)
    axes.set_xlim(left=0)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right", fontsize=8)
    return _save(plt, figure, path)


def scheduling_picture(results: Results, path: Path) -> Path | None:
    """Plan $/h against the LP bound and the fixed-type baseline, per mix, at the most common size."""
    runs = [r for r in _scheduling_runs(results) if r["figures"].get("lp_bound_per_hour")]
    if not runs:
        return None
    sizes = [r["figures"]["pods"] for r in runs]
    size = max(set(sizes), key=lambda s: (sizes.count(s), -s))
    runs = [r for r in runs if r["figures"]["pods"] == size]
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.4))
    mixes = [r["figures"]["mix"] for r in runs]
    width = 0.27
    for offset, key, label in (
        (-width, "lp_bound_per_hour", "LP lower bound"),
        (0.0, "plan_per_hour", "Nodewright's plan"),
        (width, "ffd_per_hour", "first-fit on one type (node group)"),
    ):
        values = [r["figures"].get(key) or 0.0 for r in runs]
        axes.bar([i + offset for i in range(len(runs))], values, width, label=label)
    for i, r in enumerate(runs):
        ratio = r["figures"].get("ratio")
        if ratio:
            axes.annotate(
                f"{ratio:.2f}{TIMES}",
                (i, r["figures"]["plan_per_hour"]),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    axes.set_xticks(range(len(runs)), mixes, rotation=20, ha="right")
    axes.set_ylabel(f"$/h for {size:,} pods")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    return _save(plt, figure, path)


def consolidation_picture(results: Results, path: Path) -> Path | None:
    """The cluster's $/h after each consolidation pass, with the fresh plan and the LP bound."""
    runs = [r for r in results.of("consolidation") if r["figures"]["passes_applied"]]
    if not runs:
        return None
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 3.4))
    for run in runs:
        f = run["figures"]
        name = f"{f['nodes']} nodes / {f['pods']} pods"
        (line,) = axes.plot(
            range(len(f["per_hour_by_pass"])), f["per_hour_by_pass"], label=f"cluster, {name}"
        )
        axes.axhline(
            f["fresh_plan_per_hour"], color=line.get_color(), linestyle="--", linewidth=1, label="fresh plan"
        )
        axes.axhline(
            f["lp_bound_per_hour"], color=line.get_color(), linestyle=":", linewidth=1, label="LP bound"
        )
    axes.set_xlabel("consolidation passes applied")
    axes.set_ylabel("$/h")
    axes.set_ylim(bottom=0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return _save(plt, figure, path)


# --- rendering ------------------------------------------------------------------------------------

# (file under the root, section name, renderer)
SECTIONS: tuple[tuple[str, str, Callable[[Results], str]], ...] = (
    ("README.md", "headline", headline_section),
    ("README.md", "features-summary", lambda _r: feature_summary()),
    ("docs/performance.md", "scheduling", scheduling_section),
    ("docs/performance.md", "consolidation", consolidation_section),
    ("docs/performance.md", "latency", latency_section),
    ("docs/performance.md", "scheduler-stall", stall_section),
    ("docs/performance.md", "interruption", interruption_section),
    ("docs/performance.md", "pass", pass_section),
    ("docs/performance.md", "sandbox", sandbox_section),
    ("docs/performance.md", "cost", cost_section),
    ("docs/reliability.md", "chaos", chaos_section),
)
PICTURES: tuple[tuple[str, Callable[[Results, Path], Path | None]], ...] = (
    ("latency.svg", latency_picture),
    ("scheduling-cost.svg", scheduling_picture),
    ("consolidation.svg", consolidation_picture),
)


def replace_section(text: str, name: str, body: str, *, where: str) -> str:
    """``text`` with the lines between ``<!-- bench:NAME:begin -->`` and its end marker replaced."""
    pattern = re.compile(
        rf"(<!-- bench:{re.escape(name)}:begin -->\n).*?(<!-- bench:{re.escape(name)}:end -->)", re.S
    )
    if not pattern.search(text):
        raise ReportError(
            f"{where} has no section {name!r}: put <!-- bench:{name}:begin --> and <!-- bench:{name}:end --> "
            "on lines of their own where it belongs"
        )
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text, count=1)


def render(results_dir: Path, root: Path) -> list[Path]:
    """Rewrite every generated section and picture under ``root``; the files written."""
    from nodewright.api.features import feature_table

    results = Results(results_dir)
    texts: dict[str, str] = {}
    for relative, name, renderer in SECTIONS:
        path = root / relative
        if relative not in texts:
            if not path.exists():
                raise ReportError(f"{path} does not exist: the report fills its marked sections")
            texts[relative] = path.read_text()
        texts[relative] = replace_section(texts[relative], name, renderer(results), where=str(path))
    features = root / "docs" / "features.md"
    if features.exists():
        texts["docs/features.md"] = replace_section(
            features.read_text(), "features", feature_table(), where=str(features)
        )
    written = []
    for relative, text in texts.items():
        (root / relative).write_text(text)
        written.append(root / relative)
    for file_name, draw in PICTURES:
        drawn = draw(results, root / IMAGES / file_name)
        if drawn is not None:
            written.append(drawn)
    return written
