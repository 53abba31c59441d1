"""Pending pod → CreateFleet request latency of the real provisioner handler in the sandbox (p50/p99).

Each burst creates ``--pods`` pods (1 CPU / 1 GiB, nothing fits them), records when each was
created and when the CreateFleet request for the NodeClaim whose node it is then bound to left the
process (a botocore hook on the provider's own EC2 client), then deletes the pods and NodeClaims and
waits until the cluster is empty again. Bursts start at staggered moments, so they sample every phase of
the provisioner's poll. One warm-up burst (the first catalog load) is not counted.

From ``BURST_PODS`` pods on, a burst needs many nodes: its pods keep apart in groups
(``podAntiAffinity`` on the hostname: no two of a group share a node), ``PODS_PER_NODE`` to a node,
so 100 pods need 20 nodes. Its figures add the NodeClaims launched per burst and, per batch (a
burst the scheduler marks with a second's pause in between is two batches, as with Karpenter), the
seconds from the batch closing (the provisioner's batching window returned, timed in this process)
to its last CreateFleet request sent and answered: a pass launches its NodeClaims at once (issue
30's goal: all 20 within 3 s of the batch closing); and per burst, from its first batch closing to
its last CreateFleet. With them, the CPU seconds this whole process spent from a batch closing to
its last CreateFleet sent (the sandbox's servers and simulators run here beside the handler, so the
window is CPU work in one process: with a core to itself its seconds are about its CPU seconds, on
a loaded machine they stretch) and the 1-minute load average when each batch was counted.

The handler runs with the settings from the environment. Between passes the looping provisioner
watches the pending pods, so the figure is the time for the scheduler to mark a pod Unschedulable,
Karpenter's 1 s batching quiet time, and the pass (``POLL_INTERVAL_SECONDS`` only spaces the full
passes). Goal (issue 30): p50 ≤ 1.5 s, p99 ≤ 2.5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from bench._report import save

SAMPLES = "samplesSeconds"  # every pod's latency, sorted
# Lambda prices (us-east-1): per GB-second of duration, and per request.
GB_SECOND_PRICE = {"arm64": 0.0000133334, "x86_64": 0.0000166667}
REQUEST_PRICE = 0.20 / 1_000_000
INVOCATIONS_PER_MONTH = 60 * 24 * 30  # the EventBridge schedule: once a minute
DISRUPTION_MEMORY_MB = 1024  # infra/capabilities/functions.py FUNCTION_SPECS
IMPORT_PROBE = (
    "import importlib.util, sys, time; t = time.perf_counter(); "
    "s = importlib.util.spec_from_file_location('app', sys.argv[1]); "
    "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); print(time.perf_counter() - t)"
)

IDLE_RUNS = 6  # idle invocations of each handler: one cold, five warm
BURST_PODS = 20  # from this many pods a burst, its pods need PODS_PER_NODE to a node
PODS_PER_NODE = 5
BURST_GROUP = "bench.nodewright.io/group"
POD_TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "spec": {
        "containers": [
            {"name": "work", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ]
    },
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bursts", type=int, default=10, help="measured bursts (after one warm-up)")
    parser.add_argument(
        "--pods",
        type=int,
        default=5,
        help=f"pods per burst; from {BURST_PODS} on, the pods need {PODS_PER_NODE} to a node (100 pods: "
        "20 nodes) and the figures add batch closed → last CreateFleet",
    )
    parser.add_argument(
        "--idle-runs",
        type=_idle_runs,
        default=IDLE_RUNS,
        help=f"idle invocations of each handler, the first cold (default {IDLE_RUNS}; at least 2: the "
        "warm figure is the median of the others)",
    )
    parser.add_argument("--memory-mb", type=int, default=512, help="Lambda memory size for the cost figures")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--from-idle",
        action="store_true",
        help="from an idle provisioner on its minute schedule, with and without the wake-up "
        "(bench/_from_idle.py; --bursts defaults to 3 there: a burst without the wake-up waits for a tick)",
    )
    parser.add_argument(
        "--only-wakeup", action="store_true", help="with --from-idle: skip the schedule-only run"
    )


def _idle_runs(text: str) -> int:
    runs = int(text)
    if runs < 2:
        raise argparse.ArgumentTypeError(f"{runs}: one cold invocation and at least one warm one are needed")
    return runs


def run(args: argparse.Namespace) -> int:
    """The figures on stdout; everything the handlers print (logs, EMF) goes to stderr, so that
    ``--json`` output is JSON only."""
    with contextlib.redirect_stdout(sys.stderr):
        figures = measure_from_idle(args) if args.from_idle else measure_warm(args)
    # The samples themselves are kept only with --save (bench report draws their distribution).
    saved = {"paths": figures} if isinstance(figures, list) else figures
    save(args, saved)
    if isinstance(figures, list):
        figures = [{k: v for k, v in f.items() if k != SAMPLES} for f in figures]
    else:
        figures = {k: v for k, v in figures.items() if k != SAMPLES}
    if args.json:
        print(json.dumps(figures, indent=2))
    elif isinstance(figures, list):  # --from-idle: one entry per run
        print_from_idle(figures)
    else:
        print_warm(figures, args.memory_mb)
    return 0


def measure_warm(args: argparse.Namespace) -> dict[str, Any]:
    from sandbox.harness import quiet_functions

    with quiet_functions():
        return _measure_warm(args)


def _measure_warm(args: argparse.Namespace) -> dict[str, Any]:
    from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS

    from sandbox.harness import SandboxRun, percentile, seed_objects
    from sandbox.runtime.lambdas import load_function

    import_seconds = handler_import_seconds()
    latencies: list[float] = []
    # The functions print their JSON logs and EMF metrics on stdout, as in Lambda (from the
    # provisioner's thread too): to stderr here, so stdout holds only the figures (--json).
    with contextlib.redirect_stdout(sys.stderr), SandboxRun(quiet=True, boot_delay=0.5) as story:
        objects, _notes = seed_objects(story)
        for obj in objects:
            if obj["kind"] == "EC2NodeClass" or obj["metadata"]["name"] == "default":
                story.cluster.create(EC2NODECLASSES if obj["kind"] == "EC2NodeClass" else NODEPOOLS, obj)
        provisioner, disruption = load_function("provisioner"), load_function("disruption")
        idle = idle_invocation_seconds(provisioner, args.idle_runs, [provisioner, disruption])
        idle_disruption = idle_disruption_seconds(disruption, args.idle_runs, [provisioner, disruption])
        launches = Launches(story)
        story.start_provisioner()
        poll = story.settings.poll_interval_seconds
        burst(story, "warmup", args.pods)
        for index in range(args.bursts):
            time.sleep((index * 0.37 * poll) % poll)  # stagger against the poll phase
            latencies += burst(story, f"b{index}", args.pods, launches)
        launches.stop()
    warm_idle = statistics.median(idle[1:])
    warm_idle_disruption = statistics.median(idle_disruption[1:])
    figures = {
        "bursts": args.bursts,
        "podsPerBurst": args.pods,
        "samples": len(latencies),
        "pollIntervalSeconds": poll,
        "p50Seconds": round(percentile(latencies, 50), 3),
        "p99Seconds": round(percentile(latencies, 99), 3),
        "maxSeconds": round(max(latencies, default=float("nan")), 3),
        "handlerImportSeconds": round(import_seconds, 3),
        "idleRuns": args.idle_runs,  # per handler, the first cold
        "idleInvocationSeconds": {"cold": round(idle[0], 3), "warmMedian": round(warm_idle, 3)},
        "monthlyCostUSD": monthly_cost(warm_idle, args.memory_mb),
        "disruptionIdleInvocationSeconds": {
            "cold": round(idle_disruption[0], 3),
            "warmMedian": round(warm_idle_disruption, 3),
        },
        "disruptionIdleMonthlyCostUSD": monthly_cost(warm_idle_disruption, DISRUPTION_MEMORY_MB)["idle"],
        SAMPLES: sorted(round(s, 3) for s in latencies),
    }
    if args.pods >= BURST_PODS:
        figures.update(launches.figures())
    return figures


def print_warm(figures: dict[str, Any], memory_mb: int) -> None:
    if "nodesPerBurst" in figures:
        print(
            f"bursts of {figures['podsPerBurst']} pods, {figures['nodesPerBurst']} NodeClaims launched each "
            f"in {figures['batchesPerBurst']} batches: batch closed → its last CreateFleet sent max "
            f"{figures['batchClosedToLastFleetMaxSeconds']}s, answered max "
            f"{figures['batchClosedToLastLaunchedMaxSeconds']}s; first batch closed → a burst's last "
            f"CreateFleet {figures['firstBatchClosedToBurstsLastFleetSeconds']}s; the process's CPU "
            f"seconds from a batch closed to its last CreateFleet sent "
            f"{figures['batchClosedToLastFleetProcessCpuSeconds']} (load {figures['loadPerBatch']})"
        )
    cost = figures["monthlyCostUSD"]
    idle, disruption = figures["idleInvocationSeconds"], figures["disruptionIdleInvocationSeconds"]
    print(
        f"pending pod → CreateFleet over {figures['samples']} pods in {figures['bursts']} bursts "
        f"(poll {figures['pollIntervalSeconds']:g}s): p50 {figures['p50Seconds']}s, "
        f"p99 {figures['p99Seconds']}s, max {figures['maxSeconds']}s\n"
        f"handler import {figures['handlerImportSeconds']:.3f}s; "
        f"idle invocation {idle['cold']:.3f}s cold, {idle['warmMedian']:.3f}s warm\n"
        f"monthly Lambda cost at {memory_mb} MB: idle ${cost['idle']['arm64']:.3f} arm64 / "
        f"${cost['idle']['x86_64']:.3f} x86; busy ${cost['busy']['arm64']:.2f} arm64 / "
        f"${cost['busy']['x86_64']:.2f} x86\n"
        f"disruption idle invocation {disruption['cold']:.3f}s cold, {disruption['warmMedian']:.3f}s warm: "
        f"${figures['disruptionIdleMonthlyCostUSD']['arm64']:.3f}/month arm64 "
        f"at {DISRUPTION_MEMORY_MB} MB"
    )


def measure_from_idle(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Both runs of bench/_from_idle.py (progress on stderr)."""
    from sandbox.harness import quiet_functions

    with quiet_functions():
        return _measure_from_idle(args)


def _measure_from_idle(args: argparse.Namespace) -> list[dict[str, Any]]:
    from bench import _from_idle

    bursts = args.bursts if args.bursts != 10 else 3  # 10: the warm-path default, too long here

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = []
    for wakeup in (True,) if args.only_wakeup else (True, False):
        say(f"-- from idle, {'with' if wakeup else 'without'} the wake-up")
        results.append(_from_idle.measure(bursts, args.pods, wakeup=wakeup, say=say))
    return results


def print_from_idle(results: list[dict[str, Any]]) -> None:
    for figures in results:
        print(
            f"from idle, {'with the wake-up' if figures['wakeup'] else 'schedule only'}: pending pod → "
            f"NodeClaim over {figures['samples']} pods in {figures['bursts']} bursts: "
            f"p50 {figures['p50Seconds']}s, p99 {figures['p99Seconds']}s, max {figures['maxSeconds']}s"
        )


def handler_import_seconds(runs: int = 5) -> float:
    """Median import time of the provisioner handler in fresh processes (what a cold start pays)."""
    from sandbox.shared_data import REPO_ROOT

    handler = str(REPO_ROOT / "functions" / "provisioner" / "app.py")
    times = []
    for _ in range(runs):
        command = [sys.executable, "-c", IMPORT_PROBE, handler]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def _rate_limit_refilled(apps: list[Any]) -> None:
    """Wait until the API client token buckets of these handlers' containers are full again, as
    they are a minute after the previous scheduled invocation. Back to back, the idle passes drained
    them and each then waited for tokens (the disruption pass measured 0.32 s warm instead of
    0.02 s), a cost no deployed schedule pays. A wait on the buckets themselves, not a fixed
    ``burst / qps``: an idle pass takes a few tokens, back in a fraction of a second. Every handler
    run so far is looked at: in this one process its containers share a bucket (``cluster.connect``
    keeps one per settings), so the disruption handler's cold run finds full the one the
    provisioner drew from, as its own container would in Lambda."""
    for app in apps:
        if not app.container.connected:
            continue  # its container builds its client, and the bucket, on first use
        limiter = app.container.get().cluster.limiter
        while limiter is not None and (left := limiter.seconds_until_full()) > 0:
            time.sleep(left)


def idle_invocation_seconds(app: Any, runs: int, handlers: list[Any]) -> list[float]:
    """Durations of the provisioner ``app``'s invocations on a cluster with nothing pending (the
    first one is cold), each after the buckets of ``handlers`` refilled.

    Each includes the leaked-instance check (DescribeInstances), as a real invocation a minute
    after the previous one would."""
    from nodewright.provisioning import garbage

    from sandbox.runtime.events import scheduled_event
    from sandbox.runtime.lambdas import LambdaContext

    durations = []
    for index in range(runs):
        garbage.reset_gc_clock()  # invocations come a minute apart: each one lists EC2 for leaks
        _rate_limit_refilled(handlers)
        started = time.monotonic()
        report = app.handler(scheduled_event(f"idle-{index}"), LambdaContext(70))
        durations.append(time.monotonic() - started)
        if not report["idle"]:
            raise RuntimeError(f"the invocation did not run in idle mode: {report}")
    return durations


def idle_disruption_seconds(app: Any, runs: int, handlers: list[Any]) -> list[float]:
    """Durations of the disruption ``app``'s invocations with nothing to remove (the first one is
    cold), each after the buckets of ``handlers`` refilled."""
    from sandbox.runtime.events import scheduled_event
    from sandbox.runtime.lambdas import LambdaContext

    durations = []
    for index in range(runs):
        _rate_limit_refilled(handlers)
        started = time.monotonic()
        report = app.handler(scheduled_event(f"idle-disruption-{index}"), LambdaContext(55))
        durations.append(time.monotonic() - started)
        if report["passes"] != 1 or report["disrupted"]:
            raise RuntimeError(f"the disruption invocation was not idle: {report}")
    return durations


def monthly_cost(idle_seconds: float, memory_mb: int) -> dict[str, dict[str, float]]:
    """Lambda cost per 30-day month of the once-a-minute schedule, idle and busy (looping 55 s)."""
    from nodewright.provisioning.loop import LOOP_BUDGET_SECONDS

    gb = memory_mb / 1024
    requests = INVOCATIONS_PER_MONTH * REQUEST_PRICE
    return {
        mode: {
            arch: round(INVOCATIONS_PER_MONTH * seconds * gb * price + requests, 3)
            for arch, price in GB_SECOND_PRICE.items()
        }
        for mode, seconds in (("idle", idle_seconds), ("busy", LOOP_BUDGET_SECONDS))
    }


class Launches:
    """When the provisioner's batches closed and its CreateFleet calls were answered, in this process:
    the handler runs here, so its batching window (``loop._wait_for_quiet``) is timed by wrapping
    it, and the answers by a botocore hook on the provider's own EC2 client (as the harness times
    the requests)."""

    def __init__(self, story: Any) -> None:
        from nodewright.cloud.provider import CloudProvider
        from nodewright.provisioning import loop

        self.closed: list[float] = []
        # The whole process's CPU seconds (sandbox and handler) when each batch closed and each
        # CreateFleet was sent: the window between them is CPU work in this one process.
        self.closed_cpu: dict[float, float] = {}
        self.sent_cpu: dict[str, float] = {}
        self.answered: dict[str, float] = {}  # NodeClaim → when its CreateFleet was answered
        self.bursts: list[dict[str, Any]] = []
        self._loop = loop
        self._window = loop._wait_for_quiet
        self._ec2 = CloudProvider.shared(story.settings).ec2

        def timed_window(*args: Any, **kwargs: Any) -> None:
            try:
                self._window(*args, **kwargs)
            finally:
                closed = time.monotonic()
                self.closed_cpu[closed] = time.process_time()
                self.closed.append(closed)

        loop._wait_for_quiet = timed_window
        self._ec2.meta.events.register("after-call.ec2.CreateFleet", self._answer)
        self._ec2.meta.events.register("before-parameter-build.ec2.CreateFleet", self._ask)

    def _ask(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        tags = {t["Key"]: t["Value"] for spec in params.get("TagSpecifications", []) for t in spec["Tags"]}
        context["nodeclaim"] = tags.get("karpenter.sh/nodeclaim", "")
        self.sent_cpu.setdefault(context["nodeclaim"], time.process_time())

    def _answer(self, context: dict[str, Any], **_: Any) -> None:
        self.answered.setdefault(context.get("nodeclaim", ""), time.monotonic())

    def record(self, fleet_at: dict[str, float], claims: set[str]) -> None:
        """One burst: its NodeClaims' CreateFleet requests (``fleet_at``) and answers, each counted
        from the batch that closed last before it was sent. A burst the scheduler marks unschedulable
        with a second's pause in between is planned in two batches (Karpenter's window closes alike):
        each batch's own figure, and the whole burst's from its first batch."""
        sent = {c: fleet_at[c] for c in claims if c in fleet_at}
        answered = {c: self.answered[c] for c in sent if c in self.answered}
        if not sent or len(answered) != len(sent) or not any(c <= min(sent.values()) for c in self.closed):
            seen = f"{len(sent)} sent, {len(answered)} answered"
            raise RuntimeError(f"a burst's launches were not all seen: {seen}")
        batches: dict[float, list[str]] = {}
        for claim, moment in sent.items():
            batches.setdefault(max(c for c in self.closed if c <= moment), []).append(claim)
        first = min(batches)
        self.bursts.append(
            {
                "nodes": len(sent),
                "batches": [
                    {
                        "nodes": len(members),
                        "lastSentSeconds": round(max(sent[c] for c in members) - closed, 3),
                        "lastAnsweredSeconds": round(max(answered[c] for c in members) - closed, 3),
                        "lastSentProcessCpuSeconds": round(
                            max(self.sent_cpu.get(c, 0.0) for c in members) - self.closed_cpu[closed], 3
                        ),
                        "load1": round(os.getloadavg()[0], 2),
                    }
                    for closed, members in sorted(batches.items())
                ],
                "burstLastSentSeconds": round(max(sent.values()) - first, 3),
            }
        )

    def figures(self) -> dict[str, Any]:
        batches = [b for burst in self.bursts for b in burst["batches"]]
        sent = [b["lastSentSeconds"] for b in batches]
        answered = [b["lastAnsweredSeconds"] for b in batches]
        return {
            "nodesPerBurst": sorted({b["nodes"] for b in self.bursts}),
            "batchesPerBurst": [len(b["batches"]) for b in self.bursts],
            "nodesPerBatch": [b["nodes"] for b in batches],
            "batchClosedToLastFleetSeconds": sent,
            "batchClosedToLastFleetMaxSeconds": max(sent, default=float("nan")),
            "batchClosedToLastLaunchedSeconds": answered,
            "batchClosedToLastLaunchedMaxSeconds": max(answered, default=float("nan")),
            "batchClosedToLastFleetProcessCpuSeconds": [b["lastSentProcessCpuSeconds"] for b in batches],
            "loadPerBatch": [b["load1"] for b in batches],
            "firstBatchClosedToBurstsLastFleetSeconds": [b["burstLastSentSeconds"] for b in self.bursts],
        }

    def stop(self) -> None:
        self._loop._wait_for_quiet = self._window
        self._ec2.meta.events.unregister("after-call.ec2.CreateFleet", self._answer)
        self._ec2.meta.events.unregister("before-parameter-build.ec2.CreateFleet", self._ask)


def burst_pod(name: str, index: int, count: int) -> dict[str, Any]:
    """One pod of a burst; in a burst of ``BURST_PODS`` or more, one of ``count // PODS_PER_NODE``
    apart from the others of its group, so the burst needs that many nodes."""
    pod = {**POD_TEMPLATE, "metadata": {"name": f"{name}-{index}", "namespace": "default"}}
    if count < BURST_PODS:
        return pod
    group = f"{name}-{index % PODS_PER_NODE}"  # PODS_PER_NODE groups of count/PODS_PER_NODE pods each
    pod["metadata"]["labels"] = {BURST_GROUP: group}
    apart = {
        "labelSelector": {"matchLabels": {BURST_GROUP: group}},
        "topologyKey": "kubernetes.io/hostname",
    }
    small = {"requests": {"cpu": "250m", "memory": "256Mi"}}
    pod["spec"] = {
        "containers": [{**POD_TEMPLATE["spec"]["containers"][0], "resources": small}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}},
    }
    return pod


def burst(story: Any, name: str, count: int, launches: Launches | None = None) -> list[float]:
    """Create ``count`` pods, wait until each is bound to a node whose NodeClaim's CreateFleet was
    seen, clean up; the latencies (each pod's creation to that CreateFleet). The launch is read from
    the binding and the NodeClaims (``claims_of_pods``), not from ``Nominated`` events: those go out
    at Karpenter's rate and may legitimately never come for a pod."""
    from nodewright.cluster.resources import NODECLAIMS, NODES, PODS

    from sandbox.harness import claims_of_pods

    cluster = story.cluster
    created: dict[str, float] = {}
    for i in range(count):
        pod = burst_pod(name, i, count)
        cluster.create(PODS, pod, namespace="default")
        created[pod["metadata"]["name"]] = time.monotonic()

    def placed() -> dict[str, str]:
        pods = [p for p in cluster.list(PODS, namespace="default") if p["metadata"]["name"] in created]
        return claims_of_pods(pods, cluster.list(NODECLAIMS))

    def launched() -> bool:
        claims = placed()
        fleets = {claim for _, claim in story.fleet_calls}
        return len(claims) == count and set(claims.values()) <= fleets

    if not story.wait_for(f"burst {name} launched", launched, timeout=120):
        raise RuntimeError(f"burst {name}: {len(placed())} of {count} pods on a launched node after 120 s")
    fleet_at: dict[str, float] = {}
    for moment, claim in story.fleet_calls:
        fleet_at.setdefault(claim, moment)
    claims = placed()
    latencies = [fleet_at[claim] - created[pod] for pod, claim in claims.items()]
    if launches is not None and count >= BURST_PODS:
        story.wait_for(
            f"burst {name}'s CreateFleet answered",
            lambda: set(claims.values()) <= set(launches.answered),
            timeout=120,
        )
        launches.record(fleet_at, set(claims.values()))
    for pod_name in created:
        cluster.delete(PODS, pod_name, namespace="default", grace_period_seconds=0)
    for claim in cluster.list(NODECLAIMS):
        cluster.delete(NODECLAIMS, claim["metadata"]["name"])
    cleaned = story.wait_for(
        f"burst {name} cleaned up",
        lambda: not cluster.list(NODECLAIMS) and not cluster.list(NODES),
        timeout=120,
    )
    if not cleaned:  # the next burst's pods would land on what is left and time an old launch
        raise RuntimeError(f"burst {name}: NodeClaims or nodes still there 120 s after its clean-up")
    return latencies
