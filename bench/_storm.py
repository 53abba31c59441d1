"""An AZ-wide spot reclaim against the sandbox, through the functions as deployed.

``Storm(nodes, pods).run()``: the provisioner launches ``nodes`` spot m5.large nodes for a Deployment
of ``nodes x pods`` pods under a PodDisruptionBudget (each node holds ``pods`` of them); then every
node gets its EC2 Spot Instance Interruption Warning within about a second, put on the default
event bus as EC2 puts it. From there everything is the stack's: the rules deliver each warning to
the interruption queue and, directly, to ``spot_events``; the queue's event source mapping scales
out in batches of 10 up to its maximum concurrency (``sandbox.runtime.stack.QueueSource``), the direct
path runs at its reserved concurrency; both deduplicate through the idempotency records in the
state table; the provisioner keeps running on its schedule; the spot market takes every instance
back two minutes after its warning, drained or not.

What is measured, from outside the functions:

* per node, warning put → Node cordoned (a watch on Nodes), → Node deleted (drained: the
  termination deletes the Node once its pods are gone);
* warning → replacement NodeClaim created: the k-th NodeClaim created after the warnings (a watch on
  NodeClaims) against the k-th warning. The NodePool allows one instance type, so each
  replacement holds exactly the pods of one reclaimed node, whichever pass (an interruption's
  replacement or a provisioning pass) created it;
* events acted on more than once (the functions' ``interruption handled`` log lines);
* the functions' API server requests by second (each container logs its client's count,
  ``nodewright.ratelimit.TokenBucket.by_second``, once per invocation) and DynamoDB writes
  (the sandbox's IAM enforcement counts every call it allows).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodewright.interruption.events import EventKind
from nodewright.spec import deployment

from sandbox.runtime import events

# One instance type so each node holds exactly ``pods`` pods; spot, as the reclaim needs.
INSTANCE_TYPE = "m5.large"
NODEPOOL = "storm"
APP = "storm"
# m5.large allocates about 1.9 CPU to pods; this much is shared by the pods of one node.
NODE_CPU_MILLIS = 1800
# At most this share of the storm's pods may be unavailable at once (the PDB).
PDB_MAX_UNAVAILABLE = "20%"
NOTICE_SECONDS = float(deployment.SPOT_NOTICE_SECONDS)
# The goal's window: what the function containers and the machine spent on CPU in it.
CPU_WINDOW_SECONDS = 30.0
DYNAMODB_WRITES = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
INTERRUPTION_FUNCTIONS = deployment.INTERRUPTION_FUNCTIONS
# PutEvents calls in flight at once while the warnings go out (ten warnings each).
WARNING_CALLS_AT_ONCE = 10


@dataclass
class Timeline:
    """What the watches saw, in epoch seconds."""

    cordoned: dict[str, float] = field(default_factory=dict)
    deleted: dict[str, float] = field(default_factory=dict)
    claims_created: dict[str, float] = field(default_factory=dict)
    # NodeClaim → when it was first seen marked for deletion (deletionTimestamp) or gone.
    claims_marked: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def percentile(values: list[float], fraction: float) -> float | None:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if ordered else None


def _rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _log_lines(path: Path) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    if not path.exists():
        return lines
    for raw in path.read_text(errors="replace").splitlines():
        if raw.startswith("{"):
            with contextlib.suppress(ValueError):
                lines.append(json.loads(raw))
    return lines


def _instances(event: Any) -> list[str]:
    """The instance ids an invocation's event carries: an SQS batch's EventBridge bodies, or one
    EventBridge event (the direct path)."""
    bodies: list[Any] = []
    if isinstance(event, dict) and "Records" in event:
        for record in event["Records"]:
            with contextlib.suppress(ValueError, TypeError):
                bodies.append(json.loads(record.get("body") or ""))
    else:
        bodies.append(event)
    return [
        str((body.get("detail") or {}).get("instance-id"))
        for body in bodies
        if isinstance(body, dict) and isinstance(body.get("detail"), dict)
    ]


def _containers_cpu(runtime: Any) -> dict[int, float] | None:
    """CPU seconds (user + system) of every function container alive, by process id."""
    ticks = os.sysconf("SC_CLK_TCK")
    workers = [
        *list(runtime.workers.values()),
        *(w for pool in list(runtime.pools.values()) for w in list(pool)),
    ]
    found: dict[int, float] = {}
    for worker in workers:
        process = worker._process
        if process is None or process.pid is None:
            continue
        try:
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[process.pid] = (int(fields[11]) + int(fields[12])) / ticks
    return found if Path("/proc/self/stat").exists() else None


def _machine_busy() -> float | None:
    """Busy CPU seconds of every core since boot (/proc/stat: all but idle and iowait)."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Storm:
    def __init__(self, nodes: int, pods: int, *, say: Any = None, keep_logs: Path | None = None) -> None:
        self.nodes = nodes
        self.pods = pods
        self.say = say or (lambda text: None)
        self.timeline = Timeline()
        self.sent: dict[str, float] = {}  # node → when its warning was put on the bus
        self.setup_seconds = 0.0
        self.untouched: list[str] = []
        self.keep_logs = keep_logs  # the functions' logs are copied here at the end
        self.warned_by = 0.0  # when the last PutEvents call returned
        # CPU seconds over the goal's first 30 s after the first warning: the function containers'
        # and the whole machine's (busy time of every core), and the cores there are.
        self.cpu: dict[str, float] = {}

    # ------------------------------------------------------------------ setup
    def _apply(self, sb: Any, admin: Any) -> None:
        from nodewright.api import labels
        from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS, PDBS

        from sandbox.scenarios.workloads import DEPLOYMENTS, deployment, nodeclass, nodepool

        admin.create(EC2NODECLASSES, nodeclass(sb))
        requirements = [
            {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
            {"key": labels.INSTANCE_TYPE, "operator": "In", "values": [INSTANCE_TYPE]},
        ]
        admin.create(NODEPOOLS, nodepool(NODEPOOL, requirements))
        cpu = f"{NODE_CPU_MILLIS // self.pods}m"
        pod_spec = {
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "app",
                    "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                    "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
                }
            ],
        }
        admin.create(DEPLOYMENTS, deployment(APP, self.nodes * self.pods, pod_spec), namespace="default")
        admin.create(
            PDBS,
            {
                "metadata": {"name": APP, "namespace": "default"},
                "spec": {"maxUnavailable": PDB_MAX_UNAVAILABLE, "selector": {"matchLabels": {"app": APP}}},
            },
            namespace="default",
        )

    def _launch(self, sb: Any, admin: Any, timeout: float) -> list[dict[str, Any]]:
        """The storm's nodes, launched by the provisioner's own passes run here, one after another
        until every pod runs (the functions' workers start after: a loaded machine's slow
        invocations would spend the setup's time queued on the writers' lease)."""
        from nodewright.cluster import reset_connections
        from nodewright.provisioning import provision

        from sandbox.harness import environment, quiet_functions
        from sandbox.runtime.lambdas import load_function

        try:
            with quiet_functions("ERROR"), environment(sb.env()):
                ctx = load_function("provisioner").container.get()
                deadline = time.monotonic() + timeout
                while True:
                    with contextlib.redirect_stdout(io.StringIO()):
                        provision(ctx)
                    pods = admin.list_pods("default", label_selector=f"app={APP}")
                    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
                    nodes = admin.list_nodes(label_selector=f"karpenter.sh/nodepool={NODEPOOL}")
                    if len(running) == self.nodes * self.pods and len(nodes) >= self.nodes:
                        return nodes
                    if time.monotonic() > deadline:
                        raise RuntimeError(
                            f"setup: {len(running)} of {self.nodes * self.pods} pods running on "
                            f"{len(nodes)} nodes after {timeout:.0f}s"
                        )
                    self.say(f"setup: {len(running)} pods running, {len(nodes)} nodes")
                    time.sleep(1)
        finally:
            reset_connections()

    # ------------------------------------------------------------------ watches
    def _watch(self, sb: Any, resource: Any, on_event: Any, stop: threading.Event) -> threading.Thread:
        """Every change to ``resource``'s objects, told as ``on_event(kind, obj, seen_at)``, for as
        long as the storm lasts, as an informer keeps one: a watch the API server ends, refuses, or
        cannot be reached for is resumed, and one whose resourceVersion expired (an ``ERROR`` event,
        410: the emulator keeps a bounded history, and a loaded machine falls behind it) starts
        again from a fresh list, telling what changed meanwhile (seen then: late, never early).
        Without this a 100-node storm's watches went quiet and it counted no replacement."""
        cluster = sb.admin_cluster()
        known: set[str] = set()

        def relist(*, tell: bool = True) -> str | None:
            items, version = cluster._list(resource, None, None, None)
            at = time.time()
            names = {str(item["metadata"]["name"]) for item in items}
            for item in items if tell else ():
                on_event("MODIFIED" if item["metadata"]["name"] in known else "ADDED", item, at)
            for gone in known - names if tell else ():
                on_event("DELETED", {"metadata": {"name": gone}}, at)
            known.clear()
            known.update(names)
            return version

        version = relist(tell=False)  # what is there before the storm is not its doing

        def run() -> None:
            nonlocal version
            while not stop.is_set():
                try:
                    if version is None:
                        version = relist()
                    query = {
                        "watch": "true",
                        "resourceVersion": version,
                        "timeoutSeconds": 30,
                        "allowWatchBookmarks": "true",
                    }
                    for event in cluster._watch(resource.path(None), query, read_timeout=35):
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":  # 410 Gone: too old; list again
                            version = None
                            break
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            name = str((obj.get("metadata") or {}).get("name"))
                            (known.discard if event["type"] == "DELETED" else known.add)(name)
                            on_event(event["type"], obj, time.time())
                        if stop.is_set():
                            return
                except Exception as exc:  # the API server busy or unreachable: resume in a moment
                    self.say(f"watch {resource.plural}: {type(exc).__name__}: {exc}; resuming")
                    stop.wait(1.0)

        thread = threading.Thread(target=run, name=f"watch-{resource.plural}", daemon=True)
        thread.start()
        return thread

    def _on_node(self, kind: str, node: dict[str, Any], at: float) -> None:
        name = node["metadata"]["name"]
        with self.timeline.lock:
            if kind == "DELETED":
                self.timeline.deleted.setdefault(name, at)
            elif (node.get("spec") or {}).get("unschedulable"):
                self.timeline.cordoned.setdefault(name, at)

    def _on_claim(self, kind: str, claim: dict[str, Any], at: float) -> None:
        name = claim["metadata"]["name"]
        with self.timeline.lock:
            if kind == "ADDED":
                self.timeline.claims_created.setdefault(name, at)
            if kind == "DELETED" or claim["metadata"].get("deletionTimestamp"):
                self.timeline.claims_marked.setdefault(name, at)

    # ------------------------------------------------------------------ the storm
    def _warn(self, sb: Any, runtime: Any, nodes: list[dict[str, Any]]) -> None:
        """Every node's spot warning, within about a second: EC2's reclaim tag (the spot market takes
        the instance two minutes later) and the event on the default bus, ten per PutEvents, the
        calls made at once (``WARNING_CALLS_AT_ONCE``). One after another they took 57 s for 100
        warnings at load 12: moto serves them in this process, beside the API emulator, under one
        GIL, while the containers the first warnings woke call both; EventBridge takes an AZ's
        warnings within a second."""
        from concurrent.futures import ThreadPoolExecutor

        from sandbox.runtime.stack import RECLAIM_TAG

        by_instance = {n["spec"]["providerID"].rsplit("/", 1)[-1]: n["metadata"]["name"] for n in nodes}
        ids = list(by_instance)
        ec2 = sb.aws_client("ec2")
        try:
            reclaim = str(time.time() + NOTICE_SECONDS)
            for start in range(0, len(ids), 100):
                ec2.create_tags(
                    Resources=ids[start : start + 100], Tags=[{"Key": RECLAIM_TAG, "Value": reclaim}]
                )
        finally:
            ec2.close()
        chunks = [ids[start : start + 10] for start in range(0, len(ids), 10)]
        buses = [sb.event_source_client() for _ in range(min(WARNING_CALLS_AT_ONCE, len(chunks)))]
        free = list(buses)
        lock = threading.Lock()

        def put(chunk: list[str]) -> None:
            entries = [events.put_events_entry(events.spot_warning(i, sb.region)) for i in chunk]
            with lock:
                bus = free.pop()
            try:
                # Stamped before the call: a warning counts from when it is put, however long the
                # (loaded) EventBridge takes to take it.
                at = time.time()
                answer = bus.put_events(Entries=entries)
            finally:
                with lock:
                    free.append(bus)
            if answer.get("FailedEntryCount"):
                raise RuntimeError(f"EventBridge refused events: {answer['Entries']}")
            with lock:
                for instance_id in chunk:
                    self.sent[by_instance[instance_id]] = at

        try:
            with ThreadPoolExecutor(max_workers=len(buses), thread_name_prefix="warn") as pool:
                for done in [pool.submit(put, chunk) for chunk in chunks]:
                    done.result()
        finally:
            for bus in buses:
                bus.close()

    def _sample_cpu(self, runtime: Any, first: float, stop: threading.Event) -> None:
        """The function containers' CPU seconds, and the machine's, over ``CPU_WINDOW_SECONDS`` from
        the first warning (Linux /proc; nothing elsewhere): how much of a 2-core box the storm's
        cold starts and handlers had, where Lambda gives each container CPU of its own."""
        began = time.time()
        containers_before, machine_before = _containers_cpu(runtime), _machine_busy()
        if stop.wait(max(0.0, first + CPU_WINDOW_SECONDS - time.time())):
            return
        containers_after, machine_after = _containers_cpu(runtime), _machine_busy()
        window = time.time() - began  # a starved sampler wakes late: the window it really measured
        if containers_before is None or containers_after is None:
            return
        if machine_before is None or machine_after is None:
            return
        # A container started within the window counts from zero: its Init is in the window too.
        functions = sum(cpu - containers_before.get(pid, 0.0) for pid, cpu in containers_after.items())
        self.cpu = {
            "windowSeconds": round(window, 1),
            "cores": float(os.cpu_count() or 1),
            "functionContainers": round(functions, 1),
            "machineBusy": round(machine_after - machine_before, 1),
        }

    def _steady(self, runtime: Any, timeout: float = 180.0) -> None:
        """Wait for the provisioner's first scheduled invocation to have made a pass, as in a stack
        deployed all along, where it runs every minute: its container is warm and has its instance
        catalog, kept in the state table, so the storm's cold containers start from that snapshot
        (``cloud.catalog``) rather than each paging EC2 because the sandbox is one minute old. Its
        first pass is enough: after a launch the invocation goes on polling for most of its minute
        (waiting for its end cost about 50 s of every storm), and a deployed stack's provisioner
        is in such an invocation at almost any moment."""
        log = runtime.logs_dir / "provisioner.log"
        deadline = time.monotonic() + timeout
        while not (
            any(line.get("message") == "provisioning pass" for line in _log_lines(log))
            or any(i.function == "provisioner" for i in list(runtime.invocations))
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"setup: the provisioner's first pass not done after {timeout:.0f}s")
            time.sleep(0.5)

    def _wait_drained(self, names: list[str], deadline: float) -> None:
        while time.time() < deadline:
            with self.timeline.lock:
                left = [n for n in names if n not in self.timeline.deleted]
            if not left:
                return
            time.sleep(1)

    def _wait_quiet(self, runtime: Any, timeout: float = 30.0) -> None:
        """The interruption functions' last invocations finish their batches and log their figures
        (read from their logs afterwards): wait until none of their containers is busy."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            containers = [
                *(runtime.workers.get(f) for f in INTERRUPTION_FUNCTIONS),
                *(w for f in INTERRUPTION_FUNCTIONS for w in list(runtime.pools.get(f, []))),
            ]
            if not any(w is not None and w.busy for w in containers):
                return
            time.sleep(0.5)

    def run(self, *, setup_timeout: float = 900.0, settle: Any = None) -> dict[str, Any]:
        """The storm and its figures. ``settle(sb, admin, claims)``: called after the storm, with the
        functions still running (a test waits there for the cluster to settle and checks it)."""
        from nodewright.cluster import reset_connections
        from nodewright.cluster.resources import NODECLAIMS, NODES

        from sandbox import Sandbox
        from sandbox.runtime.stack import Runtime

        began = time.monotonic()
        stop = threading.Event()
        with Sandbox(cluster_name="bench-storm", boot_delay=0.1, init_delay=0.1) as sb:
            sb.apply_crds()
            admin = sb.admin_cluster()
            self._apply(sb, admin)
            nodes = self._launch(sb, admin, setup_timeout)
            runtime = Runtime(
                sb,
                functions=("provisioner", "interruption", "spot_events"),
                schedules={"provisioner": 60},
                wakeup=False,
                state_changes=True,  # EC2 announces each reclaimed instance going, as in AWS
                say=lambda source, text: self.say(f"{source}: {text}"),
            )
            with runtime:
                self._steady(runtime)
                names = [n["metadata"]["name"] for n in nodes]
                node_of_claim = {
                    c["metadata"]["name"]: (c.get("status") or {}).get("nodeName")
                    for c in admin.list_nodeclaims()
                }
                claims = set(node_of_claim)
                self.setup_seconds = time.monotonic() - began
                self.say(f"setup: {len(names)} nodes ready in {self.setup_seconds:.0f}s; the warnings go out")
                calls_before = Counter(sb.iam.calls)
                watches = [
                    self._watch(sb, NODES, self._on_node, stop),
                    self._watch(sb, NODECLAIMS, self._on_claim, stop),
                ]
                first = time.time()
                cpu = threading.Thread(target=self._sample_cpu, args=(runtime, first, stop), daemon=True)
                cpu.start()
                self._warn(sb, runtime, nodes)
                self.warned_by = time.time()
                self._wait_drained(names, first + NOTICE_SECONDS + 10)
                self._wait_quiet(runtime)
                if settle is not None:
                    settle(sb, admin, claims)
                stop.set()
                calls = Counter(sb.iam.calls)
                calls.subtract(calls_before)
                logs = runtime.logs_dir
                starts = list(runtime.handler_starts)
                # The storm's NodeClaims that no termination took (one acted on is deleting, or gone).
                self.untouched = [
                    c["metadata"]["name"]
                    for c in admin.list_nodeclaims()
                    if c["metadata"]["name"] in claims and not c["metadata"].get("deletionTimestamp")
                ]
            for thread in watches:
                thread.join(timeout=40)
            figures = self._figures(names, first, logs, calls, node_of_claim)
            figures["stages"] = self._stages(nodes, starts)
            figures["cpuSecondsFirst30s"] = self.cpu
            if self.keep_logs is not None:
                import shutil

                shutil.copytree(logs, self.keep_logs, dirs_exist_ok=True)
        reset_connections()
        return figures

    # ------------------------------------------------------------------ figures
    def _stages(
        self, nodes: list[dict[str, Any]], starts: list[tuple[str, float, bool, float, Any]]
    ) -> dict[str, Any]:
        """Where each node's time from warning to cordon went, by the first invocation that got its
        warning (either path): warning put → taken by a trigger (EventBridge, SQS, the event source
        mapping's pollers and their scaling), → handler started (a cold start's Init phase, when the
        container was new), → Node cordoned (the handler's own work before this node's cordon)."""
        node_of = {n["spec"]["providerID"].rsplit("/", 1)[-1]: n["metadata"]["name"] for n in nodes}
        first: dict[str, tuple[str, float, bool, float]] = {}
        cold_inits: list[float] = []
        for function, taken, cold, handler, event in starts:
            if cold:
                cold_inits.append(handler - taken)
            if function not in INTERRUPTION_FUNCTIONS:
                continue
            for instance in _instances(event):
                name = node_of.get(instance)
                if name is not None and (name not in first or taken < first[name][1]):
                    first[name] = (function, taken, cold, handler)
        tl = self.timeline
        queued = [first[n][1] - self.sent[n] for n in first if n in self.sent]
        init = [first[n][3] - first[n][1] for n in first]
        working = [tl.cordoned[n] - first[n][3] for n in first if n in tl.cordoned]
        created = sorted(tl.claims_created.values())
        cordons = sorted(tl.cordoned.values())
        after_cordon = [c - k for c, k in zip(created, cordons, strict=False)]

        def spread(values: list[float]) -> dict[str, float | None]:
            return {
                "p50": _rounded(statistics.median(values) if values else None),
                "p99": _rounded(percentile(values, 0.99)),
                "max": _rounded(max(values, default=None)),
            }

        return {
            "warningToTakenSeconds": spread(queued),
            "takenToHandlerSeconds": spread(init),
            "handlerToCordonedSeconds": spread(working),
            "cordonedToReplacementSeconds": spread(after_cordon),
            "firstTakenBy": dict(Counter(first[n][0] for n in first)),
            "firstTakenCold": sum(1 for n in first if first[n][2]),
            "coldStarts": len(cold_inits),
            "coldStartInitSeconds": spread(cold_inits),
            "coldStartsByFunction": dict(Counter(f for f, _, c, _, _ in starts if c)),
        }

    def _figures(
        self,
        names: list[str],
        first: float,
        logs: Path,
        calls: Counter[tuple[str, str]],
        node_of_claim: dict[str, str | None],
    ) -> dict[str, Any]:
        lines = {f: _log_lines(logs / f"{f}.log") for f in (*INTERRUPTION_FUNCTIONS, "provisioner")}
        acted: Counter[str] = Counter()
        dispositions: Counter[str] = Counter()
        acted_by_kind: Counter[str] = Counter()
        requests_by_second: Counter[int] = Counter()
        for function, records in lines.items():
            for record in records:
                message = record.get("message")
                if message == "interruption handled":
                    dispositions[record.get("disposition", "?")] += 1
                    kind = record.get("kind", "?")
                    acted_by_kind[f"{kind}/{record.get('disposition', '?')}"] += 1
                    # The warnings; EC2's state-change notifications for the reclaimed instances
                    # (each an event of its own) resume the terminations the warnings began.
                    if record.get("disposition") == "acted" and kind == EventKind.SPOT_INTERRUPTION.value:
                        acted[record.get("eventId", "?")] += 1
                elif message == "event already handled; nothing done again":
                    dispositions["duplicate"] += 1
                elif message == "kubernetes API requests" and function in INTERRUPTION_FUNCTIONS:
                    for second, count in (record.get("apiRequestsBySecond") or {}).items():
                        requests_by_second[int(second)] += int(count)
        tl = self.timeline
        cordon = [tl.cordoned[n] - self.sent[n] for n in names if n in tl.cordoned]
        drained = [tl.deleted[n] - self.sent[n] for n in names if n in tl.deleted]
        # Warning → its node's NodeClaim marked for deletion (the termination asked for).
        marked = [
            at - self.sent[node]
            for claim, at in tl.claims_marked.items()
            if (node := node_of_claim.get(claim)) is not None and node in self.sent
        ]
        created = sorted(tl.claims_created.values())
        replacement = [at - sent for at, sent in zip(created, sorted(self.sent.values()), strict=False)]
        writes = {
            op: sum(c for (f, o), c in calls.items() if o == op and f in INTERRUPTION_FUNCTIONS)
            for op in DYNAMODB_WRITES
        }
        peak = max(requests_by_second.values(), default=0)
        busy = [s for s, c in requests_by_second.items() if c]
        return {
            "nodes": len(names),
            "podsPerNode": self.pods,
            "pdbMaxUnavailable": PDB_MAX_UNAVAILABLE,
            "warningsSpreadSeconds": round(self.warned_by - first, 2),
            "cordoned": len(cordon),
            "cordonedP50Seconds": _rounded(statistics.median(cordon) if cordon else None),
            "cordonedP99Seconds": _rounded(percentile(cordon, 0.99)),
            "cordonedMaxSeconds": _rounded(max(cordon, default=None)),
            "nodeClaimsMarked": len(marked),
            "nodeClaimMarkedP50Seconds": _rounded(statistics.median(marked) if marked else None),
            "nodeClaimMarkedP99Seconds": _rounded(percentile(marked, 0.99)),
            "nodeClaimMarkedMaxSeconds": _rounded(max(marked, default=None)),
            "replacementRequested": len(replacement),
            "replacementRequestedP50Seconds": _rounded(
                statistics.median(replacement) if replacement else None
            ),
            "replacementRequestedP99Seconds": _rounded(percentile(replacement, 0.99)),
            "replacementRequestedMaxSeconds": _rounded(max(replacement, default=None)),
            "drained": len(drained),
            "drainedP50Seconds": _rounded(statistics.median(drained) if drained else None),
            "lastDrainedSeconds": _rounded(max(drained, default=None)),
            "handledTwice": sum(1 for c in acted.values() if c > 1),
            "eventsActed": len(acted),
            "dispositions": dict(sorted(dispositions.items())),
            "dispositionsByKind": dict(sorted(acted_by_kind.items())),
            "apiRequests": sum(requests_by_second.values()),
            "apiRequestsPerSecondPeak": peak,
            "apiRequestsPerSecondMean": round(sum(requests_by_second.values()) / max(1, len(busy)), 1),
            "dynamodbWrites": sum(writes.values()),
            "dynamodbWritesByOperation": writes,
            "nodeClaimsUntouched": len(self.untouched),
            "replacementNodeClaims": len(tl.claims_created),
            "setupSeconds": round(self.setup_seconds, 1),
            "cordonedSeconds": sorted(round(s, 3) for s in cordon),
            "drainedSeconds": sorted(round(s, 3) for s in drained),
        }
