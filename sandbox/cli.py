"""The development side's ``nodewright`` subcommands: ``demo`` and ``sandbox``.

Registered through the ``nodewright.cli`` entry points (pyproject.toml); module top levels import
only the standard library so ``nodewright --help`` stays fast.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading


def register_demo(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the seeds' story in the sandbox: NodePools, inflate, launches, pods Running, a summary",
        description="The seeds' story in the sandbox (see sandbox/demo.py): what `make demo` runs.",
    )
    parser.add_argument("--kubeconfig", help="run against this API server instead of the built-in emulator")
    parser.add_argument(
        "--boot-delay", type=float, default=1.0, help="seconds a simulated instance takes to boot"
    )
    parser.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from sandbox import demo

    return demo.main(kubeconfig=args.kubeconfig, boot_delay=args.boot_delay)


def register_sandbox(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sandbox", help="run a local cluster and AWS (moto) to try Nodewright without AWS"
    )
    actions = parser.add_subparsers(dest="sandbox_action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start the sandbox, print how to reach it, run until Ctrl-C")
    up.add_argument("--cluster-name", default="demo", help="EKS cluster name (default: demo)")
    up.add_argument("--region", default="us-east-1", help="AWS region (default: us-east-1)")
    up.add_argument(
        "--zones",
        default="a,b,c",
        help="zone suffixes or names, comma-separated (default: a,b,c of the region)",
    )
    up.add_argument(
        "--boot-delay", type=float, default=3.0, help="seconds from instance running to node Ready"
    )
    up.add_argument(
        "--kubeconfig",
        default=None,
        help="use this API server instead of the emulator (simulators run against it)",
    )
    up.add_argument("--no-crds", action="store_true", help="do not apply the project's CRDs from crds/")
    up.set_defaults(func=run)


def _zones(region: str, spec: str) -> tuple[str, ...]:
    names = [z.strip() for z in spec.split(",") if z.strip()]
    return tuple(z if z.startswith(region) else f"{region}{z}" for z in names)


def run(args: argparse.Namespace) -> int:
    from sandbox import Sandbox
    from sandbox.cluster import SandboxError

    stop = threading.Event()
    previous_term = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        sandbox = Sandbox(
            cluster_name=args.cluster_name,
            region=args.region,
            zones=_zones(args.region, args.zones),
            boot_delay=args.boot_delay,
            kubeconfig=args.kubeconfig,
        )
        with sandbox:
            if not args.no_crds:
                sandbox.apply_crds()
            # From here Ctrl-C means "stop cleanly": an event, not a KeyboardInterrupt that could land
            # between two statements (before start-up it still interrupts, and `with` tears down).
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            print(f"kubeconfig:    {sandbox.kubeconfig_path}")
            print(f"moto endpoint: {sandbox.aws_endpoint}")
            print(f"started in {sandbox.startup_seconds:.1f}s; environment for the functions:")
            for name, value in sandbox.env().items():
                print(f"  export {name}={shlex.quote(value)}")
            print("Ctrl-C to stop.", flush=True)
            while not stop.wait(0.5):
                pass
            print("stopping...", flush=True)
    except SandboxError as exc:
        print(f"nodewright sandbox: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)
    print("stopped.")
    return 0
