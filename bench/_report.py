"""How every benchmark gives its figures: printed (one JSON document with ``--json``, else aligned
lines) and, with ``--save``, kept in ``bench/results/<bench>.json`` for ``nodewright bench report``.

A saved run carries what a reader needs to judge the figures: the command that produced them
(every option off its default, less ``--save`` and ``--json``), when, the commit checked out when
it was saved, and the machine's load average when it ended (this project's machines are shared: a
wall-clock figure taken at load 8 is not one taken at load 1). A results file holds one run per
command line; saving the same command again replaces its run, so the report shows the latest of
each and history stays in git.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
# Options that change how figures are given, not what is measured: left out of the saved command.
NOT_IN_COMMAND = ("save", "json", "verbose", "keep_logs", "plot")


def print_figures(figures: Mapping[str, Any], as_json: bool, *, sort_keys: bool = True) -> None:
    if as_json:
        print(json.dumps(figures, sort_keys=sort_keys))
        return
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")


def add_save_option(parser: argparse.ArgumentParser, name: str) -> None:
    """``--save [DIR]`` on a benchmark's parser (``bench/cli.py`` adds it to every one, and
    ``nodewright chaos`` has it too); ``save`` reads what it sets."""
    parser.add_argument(
        "--save",
        nargs="?",
        const=RESULTS,
        type=Path,
        metavar="DIR",
        help=f"also write the figures, the command, the date and the load average to "
        f"DIR/{name}.json (default DIR: bench/results) for `nodewright bench report`",
    )
    parser.set_defaults(save_as=name, save_parser=parser)


def command_line(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command that reproduces ``args``: the parser's program and every option not at its default."""
    words = parser.prog.split()
    for action in parser._actions:
        if not action.option_strings or action.dest in NOT_IN_COMMAND or action.dest == "help":
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = max(action.option_strings, key=len)
        if isinstance(action, argparse._StoreTrueAction):
            words.append(flag)
        else:
            words += [flag, str(value)]
    return shlex.join(words)


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=RESULTS.parent,
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except OSError:
        return None
    return done.stdout.strip() or None


def save(args: argparse.Namespace, figures: Mapping[str, Any]) -> Path | None:
    """With ``--save``: the run (command, date, commit, load average, figures) into the bench's
    results file, replacing an earlier run of the same command. Without it, nothing."""
    directory: Path | None = getattr(args, "save", None)
    if directory is None:
        return None
    name: str = args.save_as
    run = {
        "command": command_line(args.save_parser, args),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": _commit(),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "figures": figures,
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    runs = load(path)
    runs = [r for r in runs if r["command"] != run["command"]] + [run]
    path.write_text(json.dumps({"bench": name, "runs": runs}, indent=1) + "\n")
    return path


def load(path: Path) -> list[dict[str, Any]]:
    """The runs a results file holds ([] when there is none yet)."""
    if not path.exists():
        return []
    document = json.loads(path.read_text())
    runs: list[dict[str, Any]] = document["runs"]
    return runs
