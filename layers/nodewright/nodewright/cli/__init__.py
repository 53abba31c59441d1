"""The one ``nodewright`` command; each subcommand is a module of this package.

A subcommand module defines ``register(subparsers)``, which adds its parser and sets
``func=run`` with ``run(args) -> int``. Module top levels import only the standard
library so that ``nodewright --help`` stays fast; heavy imports happen inside ``run``.

The development side adds its own subcommands (``demo``, ``sandbox``, ``bench``) as entry points of
the group ``nodewright.cli`` (see pyproject.toml), each a ``register(subparsers)`` callable: this
package never imports the development side, and where it is not installed (the production CLI, the
Lambda layer) those commands simply do not exist.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence

PLUGIN_GROUP = "nodewright.cli"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nodewright",
        description="Karpenter-compatible node autoscaler for Amazon EKS, running as AWS Lambda functions.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        module.register(subparsers)
    for register in _plugin_commands():
        register(subparsers)
    return parser


@functools.cache
def _plugin_commands() -> list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]]:
    """``register`` callables of the ``nodewright.cli`` entry points whose package is installed.
    Read once per process: scanning every installed distribution's metadata costs tens of
    milliseconds, paid on each in-process ``main`` (the CLI tests call it hundreds of times)."""
    from importlib.metadata import entry_points

    found = []
    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            found.append(entry.load())
        except ModuleNotFoundError as exc:
            # The development packages are absent here (a production install): no such command.
            # Any other import error is a bug in that package and is raised.
            if exc.name is None or exc.name.split(".")[0] != entry.module.split(".")[0]:
                raise
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `nodewright convert ... | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
