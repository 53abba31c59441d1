"""Every ``--json`` command prints only JSON on stdout; logs and metrics go to stderr.

Run as a user runs them (``json_commands.run_json_command``: the installed command in a subprocess),
each at its smallest size, each benchmark with ``--save`` too. The list is checked against the
parser: a new ``--json`` command without a case here or in ``ELSEWHERE`` (a test that runs the
command anyway and checks it the same way) fails the suite.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest
from json_commands import run_json_command
from nodewright.cli import build_parser

from sandbox.shared_data import REPO_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

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
    ("bench pass", ["--nodes", "10", "--pods", "50", "--pending", "2"], False),
    ("bench latency", ["--bursts", "1", "--pods", "1", "--idle-runs", "2"], False),
    ("bench sandbox", ["--runs", "1"], False),
]
# Commands whose own test runs them through run_json_command (one run checks the figures and the
# output): a benchmark run twice cost the suite minutes.
ELSEWHERE = {
    "chaos": "tests/e2e/test_chaos_run.py",
    "bench interruption": "tests/e2e/test_interruption_bench.py",
    "bench scheduler-stall": "tests/e2e/test_bench_scheduler_stall.py",
}


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
    env = {"AWS_ENDPOINT_URL": aws_endpoint} if command in ("catalog", "doctor") else {}
    run_json_command(command, arguments, tmp_path, lines=lines, env=env)
