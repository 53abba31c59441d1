"""The development side's ``nodewright`` subcommands: ``demo`` and ``sandbox``.

Registered through the ``nodewright.cli`` entry points (pyproject.toml); module top levels import
only the standard library so ``nodewright --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any


def register_demo(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="the seeds' story in the sandbox: NodePools, inflate, launches, pods Running, a summary",
        description="The seeds' story in the sandbox (see sandbox/scenarios/demo.py): what `make demo` runs.",
    )
    parser.add_argument(
        "--kubeconfig",
        help="run against this API server instead of the built-in emulator (the functions impersonate "
        "deploy/rbac.yaml's identity there: the kubeconfig's user needs impersonate on it)",
    )
    parser.add_argument(
        "--boot-delay", type=float, default=1.0, help="seconds a simulated instance takes to boot"
    )
    parser.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from sandbox.cluster import SandboxError
    from sandbox.scenarios import demo

    try:
        return demo.main(kubeconfig=args.kubeconfig, boot_delay=args.boot_delay)
    except SandboxError as exc:  # an unusable --kubeconfig, a sandbox already running: one line
        print(f"nodewright demo: {exc}", file=sys.stderr)
        return 2


def register_sandbox(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sandbox", help="run a local cluster and AWS (moto) with the functions on their triggers"
    )
    actions = parser.add_subparsers(dest="sandbox_action", metavar="ACTION", required=True)
    up = actions.add_parser(
        "up",
        help="start the sandbox and run the functions as AWS would, until Ctrl-C",
        description="A local EKS twin: Kubernetes API emulator, simulated scheduler/kubelet/controllers, "
        "moto, and the real functions on their real triggers (schedules, the interruption queue, the "
        "direct EventBridge path), each in its own worker. Use it with kubectl like a cluster.",
    )
    _cluster_options(up)
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
        help="use this API server instead of the emulator (simulators and functions run against it; "
        "the functions impersonate deploy/rbac.yaml's identity, which the kubeconfig's user must be allowed)",
    )
    up.add_argument("--no-crds", action="store_true", help="do not apply the project's CRDs from crds/")
    up.add_argument("--no-functions", action="store_true", help="run only the cluster and moto, no function")
    up.add_argument(
        "--no-wakeup",
        action="store_true",
        help="no function URL webhook (as -c wakeup=false): pending pods wait for the provisioner's tick",
    )
    up.add_argument(
        "--private-wakeup",
        action="store_true",
        help="serve the wake-up as -c wakeup=private does: behind a load balancer on https://localhost with "
        "the certificate the stack makes (in moto's ACM) as the caBundle",
    )
    up.add_argument("--quiet", action="store_true", help="no live log of what the functions do")
    up.set_defaults(func=run_up)
    interrupt = actions.add_parser(
        "interrupt",
        help="send an interruption event for a node's instance (as EC2 or AWS Health would)",
        description="Puts a real-shaped event for NODE's EC2 instance on the sandbox's EventBridge bus: its "
        "rules deliver it to the interruption queue and (spot, rebalance) straight to spot_events. A spot "
        "warning also has EC2 reclaim the instance two minutes later; a state change stops it.",
    )
    interrupt.add_argument("node", metavar="NODE", help="the node's name (kubectl get nodes)")
    interrupt.add_argument(
        "--kind",
        choices=("spot", "rebalance", "health", "state"),
        default="spot",
        help="spot interruption warning (default), rebalance recommendation, AWS Health scheduled "
        "change, or instance state change (stopping)",
    )
    _cluster_options(interrupt)
    interrupt.set_defaults(func=run_interrupt)
    kubeconfig = actions.add_parser("kubeconfig", help="print the path of the running sandbox's kubeconfig")
    _cluster_options(kubeconfig)
    kubeconfig.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="wait this long for the sandbox to be up"
    )
    kubeconfig.set_defaults(func=run_kubeconfig)
    report = actions.add_parser(
        "iam-report",
        help="write docs/iam.md from the IAM decisions the last runs recorded",
        description="Every sandbox records what its IAM enforcement allowed each function and by which "
        "statement (make test and make demo write them to .nodewright/iam-decisions). This writes the "
        "table: per function, each action, resource type and allowing statement; statements not "
        "exercised; denials met.",
    )
    report.add_argument("--records", type=Path, default=None, help="default: .nodewright/iam-decisions")
    report.add_argument("--out", type=Path, default=Path("docs") / "iam.md", help="default: docs/iam.md")
    report.set_defaults(func=run_iam_report)


def run_iam_report(args: argparse.Namespace) -> int:
    from sandbox.iam import report

    try:
        count = report.write(args.records or report.DEFAULT_RECORDS, args.out)
    except FileNotFoundError as exc:
        print(f"nodewright sandbox iam-report: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} from {count} recorded decisions")
    return 0


def _cluster_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster-name", default="demo", help="EKS cluster name (default: demo)")
    parser.add_argument(
        "--state-dir",
        default=None,
        help="the running sandbox's folder (default: nodewright-sandbox-<cluster> in the temp folder)",
    )


def _state_dir(args: argparse.Namespace) -> Path:
    import tempfile

    return Path(args.state_dir or Path(tempfile.gettempdir()) / f"nodewright-sandbox-{args.cluster_name}")


def _zones(region: str, spec: str) -> tuple[str, ...]:
    names = [z.strip() for z in spec.split(",") if z.strip()]
    return tuple(z if z.startswith(region) else f"{region}{z}" for z in names)


def _running(args: argparse.Namespace) -> dict[str, str] | None:
    """The environment ``sandbox up`` recorded in its folder, or None (with a message) when none runs."""
    record = _state_dir(args) / "sandbox.json"
    if not record.is_file():
        print(
            f"nodewright sandbox: no sandbox {args.cluster_name!r} is running ({record} is missing); "
            "start one with: nodewright sandbox up",
            file=sys.stderr,
        )
        return None
    return json.loads(record.read_text())


def run_kubeconfig(args: argparse.Namespace) -> int:
    import time

    deadline = time.monotonic() + args.wait
    while not (_state_dir(args) / "sandbox.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    running = _running(args)
    if running is None:
        return 2
    print(running["KUBECONFIG"])
    return 0


def run_interrupt(args: argparse.Namespace) -> int:
    from sandbox.runtime.stack import interrupt

    running = _running(args)
    if running is None:
        return 2
    try:
        event = interrupt(running, args.node, args.kind, running["KUBECONFIG"])
    except LookupError as exc:
        print(f"nodewright sandbox interrupt: {exc}", file=sys.stderr)
        return 2
    instance = event["detail"].get("instance-id") or event["resources"][0]
    print(f"sent {event['detail-type']} for {instance} (node {args.node}), event {event['id']}")
    if args.kind == "spot":
        print("EC2 reclaims the instance in 120 s; watch: kubectl get nodes,nodeclaims -w")
    return 0


def run_up(args: argparse.Namespace) -> int:
    from sandbox import Sandbox
    from sandbox.cluster import SandboxError

    stop = threading.Event()
    previous_term = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    previous_int = signal.getsignal(signal.SIGINT)
    state_dir = _state_dir(args)
    try:
        sandbox = Sandbox(
            cluster_name=args.cluster_name,
            region=args.region,
            zones=_zones(args.region, args.zones),
            boot_delay=args.boot_delay,
            kubeconfig=args.kubeconfig,
            state_dir=state_dir,
        )
        with sandbox:
            if not args.no_crds:
                sandbox.apply_crds()
            # From here Ctrl-C means "stop cleanly": an event, not a KeyboardInterrupt that could land
            # between two statements (before start-up it still interrupts, and `with` tears down).
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            _serve(args, sandbox, stop)
    except SandboxError as exc:
        print(f"nodewright sandbox: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGINT, previous_int)
    print("stopped.", flush=True)
    # Everything this command started is stopped and its record removed. Skip the interpreter's
    # teardown of the sandbox's heap (the API server's store, moto's backends): on a busy machine it
    # took longer than the whole stop.
    sys.stderr.flush()
    os._exit(0)


def _serve(args: argparse.Namespace, sandbox: Any, stop: threading.Event) -> None:
    """Record the environment, start the functions and the live log, wait for Ctrl-C."""
    from sandbox.runtime.livelog import LiveLog, printer
    from sandbox.runtime.stack import Runtime

    env = sandbox.env()
    record = sandbox.state_dir / "sandbox.json"
    record.write_text(json.dumps(env, indent=2))
    say = printer()
    print(f"Nodewright sandbox {sandbox.cluster_name!r} up in {sandbox.startup_seconds:.1f}s ({args.region})")
    print(f"kubeconfig:    {sandbox.kubeconfig_path}")
    print(f"  export KUBECONFIG={shlex.quote(str(sandbox.kubeconfig_path))}")
    print(f"moto endpoint: {sandbox.aws_endpoint}")
    print("environment for running a function by hand:")
    for name, value in env.items():
        print(f"  export {name}={shlex.quote(value)}")
    print("  # and the function's own role keys (each function has its own; the provisioner's:)")
    for name, value in sandbox.credentials("provisioner").items():
        print(f"  export {name}={shlex.quote(value)}")
    runtime = None
    live = None
    try:
        if not args.no_functions:
            runtime = Runtime(
                sandbox,
                say=say,
                wakeup=not args.no_wakeup,
                wakeup_mode="private" if args.private_wakeup else "public",
            ).start()
            print(
                "functions: provisioner and disruption every minute, pricing every 12 hours, interruption "
                "on the SQS queue, spot_events on the direct EventBridge rule; each in its own worker "
                "acting as the group deploy/rbac.yaml binds"
            )
            if runtime.wakeup:
                through = "private load balancer" if args.private_wakeup else "function URL"
                print(
                    f"wake-up: the API server calls the webhook's {through} "
                    f"{runtime.function_url}<secret>/admit when a pod becomes unschedulable "
                    "(kubectl get validatingwebhookconfigurations; --no-wakeup: pods wait for the tick)"
                )
            print(f"their logs: {runtime.logs_dir}/<function>.log")
            print("interrupt a node: nodewright sandbox interrupt NODE --kind spot|rebalance|health|state")
            if not args.quiet:
                live = LiveLog(runtime.logs_dir, say, _pricer(sandbox)).start()
        print("Ctrl-C to stop.", flush=True)
        while not stop.wait(0.5):
            pass
        print("stopping...", flush=True)
    finally:
        if live is not None:
            live.stop()
        if runtime is not None:
            runtime.stop()
        record.unlink(missing_ok=True)


def _pricer(sandbox: Any) -> Any:
    """$/h of an offering as the functions price it: the sandbox prices, else the production estimate."""
    from nodewright.cloud.pricetable import estimate_on_demand_price, estimate_spot_price

    from sandbox.aws.catalog import bundled_catalog
    from sandbox.aws.prices import price_table

    catalog = bundled_catalog(sandbox.region)
    table = price_table(catalog)

    def price(kind: str, zone: str, capacity: str) -> float | None:
        info = catalog.types.get(kind)
        if info is None:
            return None
        on_demand = table.on_demand_price(kind) or estimate_on_demand_price(info)
        if capacity == "spot":
            return table.spot_price(kind, zone) or estimate_spot_price(on_demand)
        return on_demand

    return price


def register_chaos(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chaos",
        help="a seeded random run of workload changes, interruptions and faults in the sandbox",
        description="Draws one disturbance per step (scaling, interruptions, the fault matrix's faults), "
        "runs the real functions on simulated time, checks the invariants after every step, then "
        "settles and prints the figures (see sandbox/scenarios/chaos.py). Exit 1 on any invariant violation.",
    )
    parser.add_argument("--steps", type=int, default=50, help="disturbances, one per step (default 50)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1): same seed, same draws")
    parser.add_argument("--minutes", type=float, help="stop drawing steps after this much real time")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    parser.add_argument(
        "--dossier",
        type=Path,
        metavar="DIR",
        help="write each pod-pending-with-capacity violation's story to DIR: the pod's last looks,"
        " the NodeClaims and Nodes then, the functions' logs of the last rounds",
    )
    from bench._report import add_save_option  # the same --save as every benchmark: bench report reads it

    add_save_option(parser, "chaos")
    parser.set_defaults(func=run_chaos)


def run_chaos(args: argparse.Namespace) -> int:
    from sandbox.scenarios import chaos

    return chaos.run(args)
