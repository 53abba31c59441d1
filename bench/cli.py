"""``nodewright bench NAME …``: the benchmarks under ``bench/``, one module each.

A benchmark module ``bench/<name>.py`` defines ``configure(parser)`` and
``run(args) -> int``; it prints its figures (``--json`` for machines). The ``nodewright`` command
finds this module through the ``nodewright.cli`` entry point (pyproject.toml).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil


def _benchmarks() -> list[str]:
    import bench

    return sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_") and m.name != "cli"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="run a benchmark and print its figures")
    subparsers_for = parser.add_subparsers(dest="benchmark", metavar="NAME", required=True)
    for name in _benchmarks():
        module = importlib.import_module(f"bench.{name}")
        # bench/scheduler_stall.py is ``nodewright bench scheduler-stall``
        sub = subparsers_for.add_parser(
            name.replace("_", "-"), help=(module.__doc__ or "").strip().splitlines()[0]
        )
        module.configure(sub)
        sub.set_defaults(func=module.run)
