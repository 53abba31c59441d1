"""``nodewright bench NAME …``: the benchmarks under ``bench/``, one module each.

A benchmark module ``bench/<name>.py`` defines ``configure(parser)`` and
``run(args) -> int``; it prints its figures (``--json`` for machines) and keeps them with ``--save``
(added here to every benchmark, ``bench/_report.py``). ``bench/report.py`` is not a benchmark: it
renders the saved figures into the docs. The ``nodewright`` command finds this module through the
``nodewright.cli`` entry point (pyproject.toml).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

from bench._report import add_save_option

NOT_BENCHMARKS = ("cli", "report")


def _benchmarks() -> list[str]:
    import bench

    return sorted(
        m.name
        for m in pkgutil.iter_modules(bench.__path__)
        if not m.name.startswith("_") and m.name not in NOT_BENCHMARKS
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="run a benchmark and print its figures")
    subparsers_for = parser.add_subparsers(dest="benchmark", metavar="NAME", required=True)
    for name in _benchmarks():
        module = importlib.import_module(f"bench.{name}")
        # bench/scheduler_stall.py is ``nodewright bench scheduler-stall``; bench/pass_.py (``pass``
        # is Python's) is ``nodewright bench pass``
        command = name.rstrip("_").replace("_", "-")
        sub = subparsers_for.add_parser(command, help=(module.__doc__ or "").strip().splitlines()[0])
        module.configure(sub)
        add_save_option(sub, command)
        sub.set_defaults(func=module.run)
    from bench import report

    report.register(subparsers_for)
