"""Every ``--json`` command prints only JSON on stdout; logs and metrics go to stderr.

Run as a user runs them: the installed ``nodewright`` command in a subprocess, so a log handler or
an EMF metric bound to the real stdout (Powertools binds its stream when a logger is built) is
caught, which an in-process ``capsys`` would miss. Each command runs at its smallest size, each
benchmark with ``--save`` too, whose file must hold what ``nodewright bench report`` reads. The list
is checked against the parser: a new ``--json`` command without a case here fails the suite.
``nodewright chaos --json`` is covered by ``test_chaos_run.py`` (the small chaos run of the suite).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from nodewright.cli import build_parser

from sandbox.shared_data import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODEWRIGHT = str(Path(sys.executable).with_name("nodewright"))
SEEDS = REPO_ROOT / "events"
# (command path, arguments after it, stdout is JSON Lines rather than one document)
CASES: list[tuple[str, list[str], bool]] = [
    (
        "event",
        [
            str(SEEDS / "payloads" / "spot-interruption-warning.json"),
            str(SEEDS / "payloads" / "rebalance-recommendation.json"),
        ],
        True,
    ),
    ("catalog", ["--region", "us-east-1", "--limit", "3"], False),
    ("plan", ["--manifests", str(SEEDS / "manifests"), "--region", "us-west-2"], False),
    ("doctor", ["--cluster", "absent", "--region", "us-east-1"], False),
    ("bench scheduling", ["--pods", "30", "--no-bound"], False),
    ("bench consolidation", ["--nodes", "6", "--pods", "30", "--passes", "1"], False),
    ("bench interruption", ["--messages", "20", "--nodes", "1", "--pods", "1"], False),
    ("bench pass", ["--nodes", "10", "--pods", "50", "--pending", "2"], False),
    ("bench latency", ["--bursts", "1", "--pods", "1"], False),
    ("bench sandbox", ["--runs", "1"], False),
    ("bench scheduler-stall", ["--pods", "4"], False),
]
ELSEWHERE = {"chaos": "tests/e2e/test_chaos_run.py"}


def _json_commands(parser: argparse.ArgumentParser, prefix: str = "") -> set[str]:
    found = set()
    for action in parser._actions:
        if "--json" in getattr(action, "option_strings", ()):
            found.add(prefix.strip())
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _json_commands(sub, f"{prefix} {name}")
    return found


@pytest.fixture(scope="module")
def aws_endpoint() -> Iterator[str]:
    """A moto server: ``catalog`` reads EC2's catalog from it, ``doctor`` finds no stack there."""
    from sandbox.aws.server import MotoServer

    server = MotoServer()
    yield server.start()
    server.stop()


def test_every_json_command_has_a_case() -> None:
    assert _json_commands(build_parser()) == {name for name, _, _ in CASES} | set(ELSEWHERE)


@pytest.mark.parametrize(("command", "arguments", "lines"), CASES, ids=[c[0] for c in CASES])
def test_json_output_is_only_json(
    aws_endpoint: str, command: str, arguments: list[str], lines: bool, tmp_path: Path
) -> None:
    env = {**os.environ, "KUBECONFIG": str(REPO_ROOT / "absent-kubeconfig")}
    if command in ("catalog", "doctor"):
        env["AWS_ENDPOINT_URL"] = aws_endpoint
    bench = command.split()[1] if command.startswith("bench ") else None
    save = ["--save", str(tmp_path)] if bench else []
    done = subprocess.run(
        [NODEWRIGHT, *command.split(), *arguments, "--json", *save],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.strip(), f"exit {done.returncode}, nothing on stdout; stderr: {done.stderr[-2000:]}"
    documents = done.stdout.splitlines() if lines else [done.stdout]
    for document in documents:
        try:
            json.loads(document)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{command} --json printed something that is not JSON ({exc}):\n{done.stdout[:3000]}")
    if bench:
        _check_saved(tmp_path / f"{bench}.json", f"nodewright {command} {' '.join(arguments)}")


def _check_saved(path: Path, command: str) -> None:
    """A benchmark's --save wrote parseable JSON with the command line and what the report reads."""
    from bench.report import FROM_IDLE_READS, READS

    (run,) = json.loads(path.read_text())["runs"]
    assert run["command"] == command
    assert len(run["loadAverage"]) == 3
    assert run["date"].endswith("Z")
    figures = run["figures"]
    assert READS[path.stem] <= set(figures)
    for path_figures in figures.get("paths", ()):
        assert set(path_figures) >= FROM_IDLE_READS
