"""``nodewright bench report`` renders the docs' figures from saved runs, and ``--save`` writes them.

Correctness of the rendering, not timings: the saved runs here are a small fixture (the sandbox
benches' figures written by hand, labelled as such) plus real runs of the two in-process benches at
their smallest sizes; every bench's ``--save`` at its real size is checked by
``tests/e2e/test_json_output_hygiene.py`` and the chaos run's by ``tests/e2e/test_chaos_run.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from nodewright.api.features import feature_table
from nodewright.cli import build_parser

from bench import report
from bench._report import command_line
from sandbox.shared_data import REPO_ROOT

# FIXTURE: figures as the sandbox benches save them (values invented, shapes as saved).
LOAD = [1.5, 2.25, 3.0]
FIXTURE: dict[str, list[dict[str, Any]]] = {
    "latency": [
        {
            "command": "nodewright bench latency",
            "figures": {
                "bursts": 2,
                "podsPerBurst": 2,
                "samples": 4,
                "pollIntervalSeconds": 5,
                "p50Seconds": 1.25,
                "p99Seconds": 2.5,
                "maxSeconds": 2.5,
                "samplesSeconds": [0.5, 1.25, 1.5, 2.5],
                "handlerImportSeconds": 0.03,
                "idleInvocationSeconds": {"cold": 1.0, "warmMedian": 0.04},
                "monthlyCostUSD": {"idle": {"arm64": 0.02, "x86_64": 0.03}, "busy": {"arm64": 15.85}},
                "disruptionIdleInvocationSeconds": {"cold": 1.2, "warmMedian": 0.02},
                "disruptionIdleMonthlyCostUSD": {"arm64": 0.01, "x86_64": 0.02},
            },
        },
        {
            "command": "nodewright bench latency --bursts 5 --pods 3 --from-idle --only-wakeup",
            "figures": {
                "paths": [
                    {
                        "wakeup": True,
                        "bursts": 5,
                        "podsPerBurst": 3,
                        "samples": 3,
                        "p50Seconds": 1.75,
                        "p99Seconds": 3.5,
                        "maxSeconds": 3.5,
                        "samplesSeconds": [1.0, 1.75, 3.5],
                    }
                ]
            },
        },
    ],
    "scheduler-stall": [
        {
            "command": "nodewright bench scheduler-stall",
            "figures": {
                "noWebhookPerSecond": 70.0,
                "healthyPerSecond": 63.0,
                "unreachablePerSecond": 66.5,
                "design": "product",
                "pods": 300,
            },
        }
    ],
    "interruption": [
        {
            "command": "nodewright bench interruption --nodes 100",
            "figures": {
                "messages": 1000,
                "messagesPerSecond": 250.5,
                "failedMessages": 0,
                "nodes": 100,
                "podsPerNode": 5,
                "warningsSpreadSeconds": 0.8,
                "cordoned": 100,
                "cordonedP50Seconds": 0.75,
                "cordonedP99Seconds": 1.5,
                "cordonedMaxSeconds": 1.6,
                "replacementRequested": 100,
                "replacementRequestedP99Seconds": 4.5,
                "replacementRequestedMaxSeconds": 5.0,
                "drained": 100,
                "lastDrainedSeconds": 86.0,
                "handledTwice": 0,
                "apiRequestsPerSecondPeak": 240,
                "dynamodbWrites": 400,
                "cordonedSeconds": [0.5, 0.75, 1.5],
            },
        },
        {
            "command": "nodewright bench interruption --messages 0 --nodes 500",
            "figures": {
                "nodes": 500,
                "podsPerNode": 5,
                "warningsSpreadSeconds": 50.0,
                "cordoned": 300,
                "cordonedP50Seconds": 60.0,
                "cordonedP99Seconds": 130.0,
                "cordonedMaxSeconds": 135.0,
                "replacementRequested": 10,
                "replacementRequestedP99Seconds": 65.0,
                "replacementRequestedMaxSeconds": 65.0,
                "drained": 5,
                "lastDrainedSeconds": 116.0,
                "handledTwice": 0,
                "apiRequestsPerSecondPeak": 38,
                "dynamodbWrites": 600,
                "cordonedSeconds": [30.0, 60.0, 130.0],
            },
        },
    ],
    "chaos": [
        {
            "command": "nodewright chaos --steps 300 --seed 3",
            "figures": {
                "steps": 300,
                "seed": 3,
                "violations": {},
                "podsScheduled": 321,
                "podPendingToBoundSeconds": {"p50": 40.0, "p99": 400.0, "max": 900.0},
                "pendingWithCapacity": {"limitSeconds": 60, "maxSeconds": 21.5, "violations": 0},
                "costVersusFreshPlan": {
                    "bound": 1.2,
                    "windowSeconds": 300,
                    "maxRatio": 3.5,
                    "longestAboveBoundSeconds": 80.0,
                    "violations": 0,
                },
                "leakedInstances": 0,
                "duplicateNodeClaims": 0,
                "invocations": 777,
                "invocationErrors": 0,
                "tracebacks": 0,
                "converged": True,
                "realSeconds": 1234.0,
                "disturbances": {"scale": 90, "spot": 30},
            },
        }
    ],
}


def _write_fixture(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for bench, runs in FIXTURE.items():
        saved = [
            {**run, "date": "2026-12-05T10:00:00Z", "commit": "abc1234", "loadAverage": LOAD, "cpus": 2}
            for run in runs
        ]
        (directory / f"{bench}.json").write_text(json.dumps({"bench": bench, "runs": saved}))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    capsys.readouterr()
    return code


def _quietly(argv: list[str]) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        args = build_parser().parse_args(argv)
        code: int = args.func(args)
    return code


@pytest.fixture(scope="module")
def saved_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture's runs and the in-process benches' own, saved by their real --save (once)."""
    results = tmp_path_factory.mktemp("results")
    _write_fixture(results)
    for mix in ("generic", "inflate"):
        assert _quietly(["bench", "scheduling", "--pods", "40", "--mix", mix, "--save", str(results)]) == 0
    consolidation = ["bench", "consolidation", "--nodes", "8", "--pods", "40", "--passes", "3"]
    assert _quietly([*consolidation, "--save", str(results)]) == 0
    return results


@pytest.fixture
def repo(tmp_path: Path, saved_runs: Path) -> tuple[Path, Path]:
    """A copy of the README and the docs with their marked sections, and of the saved runs."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "README.md", root / "README.md")
    for name in ("performance.md", "reliability.md", "features.md"):
        shutil.copy(REPO_ROOT / "docs" / name, root / "docs" / name)
    results = tmp_path / "results"
    shutil.copytree(saved_runs, results)
    return root, results


def _section(text: str, name: str) -> str:
    begin, end = f"<!-- bench:{name}:begin -->\n", f"<!-- bench:{name}:end -->"
    return text[text.index(begin) + len(begin) : text.index(end)]


def test_save_keeps_one_run_per_command_with_the_command_line_and_the_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        _run(["bench", "scheduling", "--pods", "20", "--no-bound", "--json", "--save", str(tmp_path)], capsys)
    _run(
        ["bench", "scheduling", "--pods", "20", "--mix", "generic", "--no-bound", "--save", str(tmp_path)],
        capsys,
    )
    saved = json.loads((tmp_path / "scheduling.json").read_text())
    assert saved["bench"] == "scheduling"
    assert [r["command"] for r in saved["runs"]] == [
        "nodewright bench scheduling --pods 20 --no-bound",  # --json and --save are not part of it
        "nodewright bench scheduling --pods 20 --mix generic --no-bound",
    ]
    run = saved["runs"][0]
    assert len(run["loadAverage"]) == 3
    assert run["figures"]["pods"] == 20
    assert report.READS["scheduling"] <= set(run["figures"])


def test_without_save_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setattr("bench._report.RESULTS", tmp_path / "default")
    _run(["bench", "scheduling", "--pods", "10", "--no-bound"], capsys)
    assert not (tmp_path / "default").exists()


def test_the_command_line_names_only_options_off_their_default() -> None:
    parser = build_parser()
    args = parser.parse_args(["bench", "consolidation", "--passes", "0", "--json", "--save", "/x"])
    assert command_line(args.save_parser, args) == "nodewright bench consolidation --passes 0"


def test_the_report_renders_every_section_from_the_saved_runs(
    repo: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, results = repo
    assert _run(["bench", "report", "--results", str(results), "--root", str(root)], capsys) == 0
    readme = (root / "README.md").read_text()
    performance = (root / "docs" / "performance.md").read_text()
    reliability = (root / "docs" / "reliability.md").read_text()

    headline = _section(readme, "headline")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in headline.splitlines()[2:]}
    assert "p50 1.25 s, p99 2.50 s" in rows["pending pod → CreateFleet, warm provisioner"]
    assert "p50 1.75 s, p99 3.50 s" in rows["pod → NodeClaim from an idle provisioner, with the wake-up"]
    assert "66.5 vs 70 pods/s" in rows["kube-scheduler with the wake-up's URL unreachable"]
    assert "250.5 msg/s" in rows["interruption: SQS messages handled"]
    reclaim = "AZ-wide spot reclaim of {} nodes: warning → cordoned, → replacement, last drained"
    # The biggest storm whose every node drained, and the biggest, saying how many of its nodes got how far.
    assert "| p99 1.5 s; p99 4.5 s; last 86 s; peak 240 API requests/s |" in rows[reclaim.format(100)]
    assert (
        "| 300 of 500, p99 130.0 s; 10 of 500, p99 65.0 s; 5 of 500, last 116 s; peak 38 API requests/s |"
        in rows[reclaim.format(500)]
    )
    assert "not measured yet" in rows["a pass over 5,000 nodes / 50,000 pods: provisioning, disruption"]
    assert "$0.03/month" in rows["idle cost (provisioner + disruption, Lambda arm64)"]
    assert "0 in 300 steps, converged: True" in rows["chaos: seeded faults, invariant violations"]
    # No saved run of these commands: said so, never a figure from elsewhere.
    assert "not measured yet" in rows["scheduling: 10,000 diverse pods planned"]
    assert (
        "not measured yet"
        in rows["consolidation: a decision on 1,000 nodes / 10,000 pods (first; slowest of the passes)"]
    )
    assert all("`nodewright " in line for line in rows.values())  # every figure with its command

    scheduling = _section(performance, "scheduling")
    saved = {r["figures"]["mix"]: r for r in json.loads((results / "scheduling.json").read_text())["runs"]}
    for mix, run in saved.items():
        (line,) = [row for row in scheduling.splitlines() if row.startswith(f"| {mix} |")]
        assert f"{run['figures']['plan_per_hour']:,.2f}" in line
        assert f"`{run['command']}`" in line
    assert "optimal" in next(r for r in scheduling.splitlines() if r.startswith("| inflate |"))
    consolidation = json.loads((results / "consolidation.json").read_text())["runs"][0]
    assert consolidation["figures"]["per_hour_by_pass"][0] == consolidation["figures"]["before_per_hour"]
    assert f"`{consolidation['command']}`" in _section(performance, "consolidation")
    assert "1.5 / 2.25 / 3" in _section(performance, "latency")  # the load average of the run
    assert "| 300 | 70 | 63 (90%) | 66.5 (95%) |" in _section(performance, "scheduler-stall")
    assert "Not measured yet: run `nodewright bench sandbox --runs 5 --save`" in _section(
        performance, "sandbox"
    )
    chaos = _section(reliability, "chaos")
    assert "`nodewright chaos --steps 300 --seed 3`, measured 2026-12-05, commit abc1234" in chaos
    assert "| invariant violations | **0** |" in chaos
    assert "scale 90, spot 30" in chaos
    assert _section((root / "docs" / "features.md").read_text(), "features") == feature_table()

    for picture in ("latency.svg", "scheduling-cost.svg", "consolidation.svg"):
        svg = ET.parse(root / "docs" / "img" / picture).getroot()
        assert svg.tag.endswith("svg")
    latency_svg = (root / "docs" / "img" / "latency.svg").read_text()
    assert "spot reclaim of 100: warning → cordoned (3)" in latency_svg  # each distribution, with its count


def test_a_second_report_changes_nothing(repo: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, results = repo
    argv = ["bench", "report", "--results", str(results), "--root", str(root)]
    _run(argv, capsys)
    first = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    _run(argv, capsys)
    assert {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} == first


def test_a_doc_without_its_markers_is_named_and_nothing_is_written(
    repo: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, results = repo
    performance = root / "docs" / "performance.md"
    performance.write_text(performance.read_text().replace("<!-- bench:sandbox:end -->", ""))
    readme = (root / "README.md").read_text()
    args = build_parser().parse_args(["bench", "report", "--results", str(results), "--root", str(root)])
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert "performance.md has no section 'sandbox'" in err
    assert "<!-- bench:sandbox:end -->" in err
    assert (root / "README.md").read_text() == readme


def test_a_saved_run_missing_a_figure_names_the_command_to_run_again(
    repo: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root, results = repo
    path = results / "interruption.json"
    saved = json.loads(path.read_text())
    del saved["runs"][0]["figures"]["cordonedSeconds"]
    path.write_text(json.dumps(saved))
    args = build_parser().parse_args(["bench", "report", "--results", str(results), "--root", str(root)])
    assert args.func(args) == 1
    err = capsys.readouterr().err
    assert "`nodewright bench interruption --nodes 100` lacks cordonedSeconds" in err
    assert "Traceback" not in err


def test_the_repository_docs_are_rendered_from_the_saved_runs() -> None:
    """The committed docs are what `nodewright bench report` makes of the committed bench/results."""
    results = report.Results(report.RESULTS)
    for relative, name, renderer in report.SECTIONS:
        text = (REPO_ROOT / relative).read_text()
        assert _section(text, name) == renderer(results), (
            f"run `nodewright bench report` ({relative}: {name})"
        )


def test_every_test_the_reliability_doc_names_exists() -> None:
    """The fault matrix's table names its tests; a renamed or removed one must not stay cited."""
    doc = (REPO_ROOT / "docs" / "reliability.md").read_text()
    named = set(re.findall(r"`(test_[a-z0-9_]+)", doc))
    defined = {
        match
        for path in (REPO_ROOT / "tests").rglob("test_*.py")
        for match in re.findall(r"^def (test_[a-z0-9_]+)", path.read_text(), re.M)
    }
    assert named
    assert named <= defined, sorted(named - defined)
