"""Run a ``nodewright … --json`` command as a user runs it and hold it to its output contract: the
installed command in a subprocess (a log handler or an EMF metric bound to the real stdout, which
Powertools binds when a logger is built, is caught; an in-process ``capsys`` would miss it), only
JSON on stdout, and for a benchmark the ``--save`` file holding what ``nodewright bench report``
reads. Used by tests/e2e/test_json_output_hygiene.py for every such command, and by a benchmark's
own test where that test runs the benchmark anyway (one run checks both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.shared_data import REPO_ROOT

NODEWRIGHT = str(Path(sys.executable).with_name("nodewright"))


def run_json_command(
    command: str,
    arguments: list[str],
    tmp_path: Path,
    *,
    lines: bool = False,
    env: dict[str, str] | None = None,
    timeout: float = 240,
) -> tuple[int, list[Any]]:
    """Run ``nodewright <command> <arguments> --json`` (with ``--save`` for a benchmark); its exit
    code and the JSON documents it printed (one per line when ``lines``)."""
    environment = {**os.environ, "KUBECONFIG": str(REPO_ROOT / "absent-kubeconfig"), **(env or {})}
    bench = command.split()[1] if command.startswith("bench ") else None
    save = ["--save", str(tmp_path)] if bench else []
    done = subprocess.run(
        [NODEWRIGHT, *command.split(), *arguments, "--json", *save],
        capture_output=True,
        text=True,
        env=environment,
        timeout=timeout,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.strip(), f"exit {done.returncode}, nothing on stdout; stderr: {done.stderr[-2000:]}"
    documents = []
    for document in done.stdout.splitlines() if lines else [done.stdout]:
        try:
            documents.append(json.loads(document))
        except json.JSONDecodeError as exc:
            pytest.fail(f"{command} --json printed something that is not JSON ({exc}):\n{done.stdout[:3000]}")
    if bench:
        _check_saved(tmp_path / f"{bench}.json", f"nodewright {command} {' '.join(arguments)}")
    return done.returncode, documents


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
