"""``nodewright bench latency --from-idle``: pending pod → NodeClaim from an idle provisioner.

The sandbox runtime as deployed: the provisioner in its own worker on its minute schedule (first
tick at start), reserved concurrency 1, and, with the wake-up, the webhook behind its function URL
that the emulator calls when a pod becomes unschedulable. Before each burst the provisioner is idle:
its last invocation has returned and nothing runs (``IDLE_AFTER_SECONDS`` is shortened so that it
returns seconds after a burst instead of 10 minutes; that changes when it stops looping, not how
fast it reacts). Bursts start at staggered phases of the minute, as pods arrive in real clusters.

The figure is pod created → NodeClaim created (the plan is made; CreateFleet follows in the same
pass), measured from this process by polling the API every 0.1 s: the CreateFleet request leaves
the provisioner's worker process, where this process cannot hook it. Run once with the wake-up and
once without (the schedule alone).
"""

from __future__ import annotations

import time
from typing import Any

from bench.latency import POD_TEMPLATE, SAMPLES
from sandbox.harness import percentile

TICK_SECONDS = 60
IDLE_AFTER_SECONDS = 3


def measure(bursts: int, pods: int, *, wakeup: bool, say: Any) -> dict[str, Any]:
    """Latencies (s) of ``bursts`` bursts of ``pods`` pods, each from an idle provisioner."""
    from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS

    from sandbox import Sandbox
    from sandbox.runtime.stack import Runtime
    from sandbox.scenarios.workloads import nodeclass, nodepool

    latencies: list[float] = []
    with Sandbox(cluster_name="bench-idle", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        admin = sb.admin_cluster()
        admin.create(EC2NODECLASSES, nodeclass(sb))
        admin.create(NODEPOOLS, nodepool("default", []))
        runtime = Runtime(
            sb,
            functions=("provisioner", "webhook") if wakeup else ("provisioner",),
            schedules={"provisioner": TICK_SECONDS},
            env={"IDLE_AFTER_SECONDS": str(IDLE_AFTER_SECONDS)},
            wakeup=wakeup,
        ).start()
        ticks_from = time.monotonic()
        try:
            for index in range(-1, bursts):  # -1: a warm-up burst (cold container, catalog), not counted
                _wait_idle(runtime)
                phase = ((index + 1) * 0.37 * TICK_SECONDS) % TICK_SECONDS
                _sleep_until_phase(ticks_from, phase)
                took = _burst(admin, f"b{index + 1}", pods)
                say(f"burst {index + 1}: {', '.join(f'{t:.1f}s' for t in took)} (phase {phase:.0f}s)")
                if index >= 0:
                    latencies += took
                _clean(sb, admin)
        finally:
            runtime.stop()
    return {
        "wakeup": wakeup,
        "bursts": bursts,
        "podsPerBurst": pods,
        "samples": len(latencies),
        "p50Seconds": round(percentile(latencies, 50), 3),
        "p99Seconds": round(percentile(latencies, 99), 3),
        "maxSeconds": round(max(latencies, default=float("nan")), 3),
        SAMPLES: sorted(round(s, 3) for s in latencies),
    }


def _wait_idle(runtime: Any, timeout: float = 180) -> None:
    """Until the provisioner's container is not running an invocation (and has run once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        worker = runtime.workers.get("provisioner")
        if worker is not None and not worker.busy and runtime.invocations:
            return
        time.sleep(0.2)
    raise RuntimeError("the provisioner did not go idle")


def _sleep_until_phase(ticks_from: float, phase: float) -> None:
    into = (time.monotonic() - ticks_from) % TICK_SECONDS
    time.sleep((phase - into) % TICK_SECONDS)


def _burst(admin: Any, name: str, count: int) -> list[float]:
    from nodewright.cluster.resources import NODECLAIMS, PODS

    created = []
    for i in range(count):
        admin.create(PODS, {**POD_TEMPLATE, "metadata": {"name": f"{name}-{i}", "namespace": "default"}})
        created.append(time.monotonic())
    deadline = time.monotonic() + 2 * TICK_SECONDS + 30
    took: list[float] = []
    while time.monotonic() < deadline:
        claims = admin.list(NODECLAIMS)
        if claims and not took:
            now = time.monotonic()
            took = [now - at for at in created]
        if took and all(_launched(c) for c in claims):
            return took  # the pass is over: cleaning up now cannot race its launch
        time.sleep(0.1)
    raise RuntimeError(f"burst {name}: no launched NodeClaim in {2 * TICK_SECONDS + 30}s")


def _launched(claim: dict[str, Any]) -> bool:
    conditions = (claim.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Launched" and c.get("status") == "True" for c in conditions)


def _clean(sb: Any, admin: Any, timeout: float = 120) -> None:
    """Back to an empty cluster: pods and NodeClaims deleted (their finalizer removed: no
    termination flow runs between bursts), instances terminated, so their Nodes go too."""
    from nodewright.cluster.resources import NODECLAIMS, NODES, PODS

    for pod in admin.list(PODS, namespace="default"):
        admin.delete(PODS, pod["metadata"]["name"], namespace="default", grace_period_seconds=0)
    for claim in admin.list(NODECLAIMS):
        admin.patch(NODECLAIMS, claim["metadata"]["name"], {"metadata": {"finalizers": None}})
        admin.delete(NODECLAIMS, claim["metadata"]["name"])
    ec2 = sb.aws_client("ec2")
    try:
        reservations = ec2.describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )["Reservations"]
        ids = [i["InstanceId"] for r in reservations for i in r["Instances"]]
        if ids:
            ec2.terminate_instances(InstanceIds=ids)
    finally:
        ec2.close()
    deadline = time.monotonic() + timeout
    while admin.list(NODES) or admin.list(NODECLAIMS):
        if time.monotonic() > deadline:
            raise RuntimeError("the cluster did not empty between bursts")
        time.sleep(0.2)
