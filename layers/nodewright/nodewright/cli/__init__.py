"""The one ``nodewright`` command; each subcommand is a module of this package.

A subcommand module defines ``register(subparsers)``, which adds its parser and sets
``func=run`` with ``run(args) -> int``. Module top levels import only the standard
library so that ``nodewright --help`` stays fast; heavy imports happen inside ``run``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence


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
    return parser


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
