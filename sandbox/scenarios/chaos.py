"""``nodewright chaos``: a seeded random run of workload changes, interruptions and faults against the
sandbox, with the real handlers, checking the invariants after every step.

Each step draws one disturbance (a deployment scaled, an interruption of a random kind, a fault of
the fault matrix: ICE, CreateFleet throttling, the API server answering 409/429/500 or slowly, the
function killed at a named checkpoint, an instance terminated out of band, a node that never
registers, a duplicate or late interruption message), then runs one compressed minute of the
deployed system (``sandbox.scenarios.reliability.Rig.round``: the scheduled provisioner and disruption
invocations, the interruption queue, 20 s of simulated time) and checks the invariants of
``sandbox.scenarios.reliability.check``. At the end every fault is cleared, the functions get rounds to
converge, and the settled invariants are checked: no leaked instance, no NodeClaim with two
instances, every pod running. After every round the service invariants are checked too
(``sandbox.scenarios.reliability.check_service``): no pod pending over 60 s of simulated time while capacity
exists for it and no fault holds the functions, and the cluster's $/h not above 1.2x a fresh plan of
the same pods for longer than the consolidation window.

Figures: steps, disturbances by kind, pods that got a node, their time from pending to bound
(simulated seconds, p50/p99), the longest a pod was pending, invariant violations by kind, leaked
instances, duplicate NodeClaims, invocation errors and tracebacks. Exit status 1 when any invariant
was violated or the run did not converge.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sandbox.aws.faults import ApiFault
from sandbox.scenarios import workloads
from sandbox.scenarios.reliability import (
    CONSOLIDATION_WINDOW_SECONDS,
    COST_RATIO_LIMIT,
    PENDING_LIMIT_SECONDS,
)

# What the chaos run draws from, with weights: workload changes most, every fault kind regularly.
DISTURBANCES: dict[str, int] = {
    "scale": 6,
    "spot-interruption": 2,
    "rebalance": 1,
    "health-event": 1,
    "duplicate-message": 1,
    "late-message": 1,
    "out-of-band-termination": 1,
    "never-registers": 1,
    "ice": 1,
    "fleet-throttle": 1,
    "api-conflict": 1,
    "api-throttle": 1,
    "api-error": 1,
    "api-slow": 1,
    "kill": 2,
}
INSTANCE_TYPES = ["t3.small", "t3.medium", "t3.large", "t3a.large", "m5.large", "m5.xlarge", "c5.xlarge"]
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
CPU_LIMIT = 48  # the NodePool's limit: capacity is never unbounded
ICE_STEPS = 3  # an injected ICE lasts this many steps, then the capacity is back
STEP_SECONDS = 20.0  # simulated time per step
SETTLE_ROUNDS = 25
# Interruption-queue batches (of up to 10 messages) delivered per step: the event source mapping
# polls while messages wait, so a backlog (a burst of state changes) does not wait a step per ten.
QUEUE_BATCHES_PER_ROUND = 3
DOSSIER_ROUNDS = 8  # a dossier holds a pod's last looks and the functions' logs of this many rounds
COST_DOSSIER_LOOKS = 40  # a cost dossier holds this many looks: longer than the consolidation window
# The workload: (deployment, pod kind as in the scheduling benchmark's mixes, max replicas).
DEPLOYMENTS = (
    ("chaos-generic", "generic", 10),
    ("chaos-spread", "zonal-spread", 6),
    ("chaos-anti", "hostname-anti-affinity", 4),
)
CPU_CHOICES = ("250m", "500m", "1")
MEMORY_CHOICES = ("256Mi", "512Mi", "1Gi")


@dataclass
class ChaosReport:
    seed: int
    steps: int = 0
    disturbances: Counter[str] = field(default_factory=Counter)
    killed_at: Counter[str] = field(default_factory=Counter)
    pods_scheduled: int = 0
    bind_seconds: list[float] = field(default_factory=list)
    max_pending_seconds: float = 0.0
    # The pod that waited longest from pending to bound: how long, and what the looks said meanwhile.
    longest_wait: dict[str, Any] = field(default_factory=dict)
    max_pending_with_capacity_seconds: float = 0.0
    max_cost_ratio: float = 0.0
    max_cost_above_bound_seconds: float = 0.0
    looks: int = 0
    looks_with_faults: Counter[str] = field(default_factory=Counter)
    unhostable: dict[str, str] = field(default_factory=dict)  # pod → why no NodePool could host it
    violations: Counter[str] = field(default_factory=Counter)
    violation_examples: list[str] = field(default_factory=list)
    state_change_events: int = 0  # EC2 state-change notifications queued (every instance that went)
    invocations: int = 0
    invocation_errors: int = 0
    invocation_error_kinds: Counter[str] = field(default_factory=Counter)  # "function: error", counted
    tracebacks: int = 0
    # The exception each traceback ended with ("KeyError: 'x'"), so a run says what they were.
    traceback_errors: Counter[str] = field(default_factory=Counter)
    converged: bool = False
    pods_pending_at_end: int = 0
    real_seconds: float = 0.0
    simulated_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.converged and not self.violations

    def figures(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "steps": self.steps,
            "disturbances": dict(sorted(self.disturbances.items())),
            "killedAt": dict(sorted(self.killed_at.items())),
            "podsScheduled": self.pods_scheduled,
            "podPendingToBoundSeconds": {
                "p50": _percentile(self.bind_seconds, 50),
                "p99": _percentile(self.bind_seconds, 99),
                "max": max(self.bind_seconds, default=0.0),
            },
            "maxPendingSeconds": round(self.max_pending_seconds, 1),
            "longestWait": self.longest_wait,
            "pendingWithCapacity": {
                "limitSeconds": PENDING_LIMIT_SECONDS,
                "maxSeconds": round(self.max_pending_with_capacity_seconds, 1),
                "violations": self.violations.get("pod-pending-with-capacity", 0),
            },
            "costVersusFreshPlan": {
                "bound": COST_RATIO_LIMIT,
                "windowSeconds": CONSOLIDATION_WINDOW_SECONDS,
                "maxRatio": round(self.max_cost_ratio, 3),
                "longestAboveBoundSeconds": round(self.max_cost_above_bound_seconds, 1),
                "violations": self.violations.get("cost-above-fresh-plan", 0),
            },
            "looks": self.looks,
            "looksWithFaultInEffect": dict(sorted(self.looks_with_faults.items())),
            "podsNoNodePoolCouldHost": len(self.unhostable),
            "violations": dict(sorted(self.violations.items())),
            "violationExamples": self.violation_examples[:10],
            "leakedInstances": self.violations.get("leaked-instance", 0),
            "duplicateNodeClaims": self.violations.get("two-instances", 0),
            "stateChangeEvents": self.state_change_events,
            "invocations": self.invocations,
            "invocationErrors": self.invocation_errors,
            "invocationErrorKinds": dict(self.invocation_error_kinds.most_common(10)),
            "tracebacks": self.tracebacks,
            "tracebackErrors": dict(self.traceback_errors.most_common(10)),
            "converged": self.converged,
            "podsPendingAtEnd": self.pods_pending_at_end,
            "realSeconds": round(self.real_seconds, 1),
            "simulatedSeconds": round(self.simulated_seconds, 1),
        }


def traceback_errors(log: str) -> list[str]:
    """The last line of each Python traceback in ``log`` (the exception and its message, cut to 160
    characters), whether printed plainly or inside a JSON log line's escaped ``exception`` field."""
    found = []
    lines = log.replace("\\n", "\n").splitlines()
    for index, line in enumerate(lines):
        if "Traceback (most recent call last)" not in line:
            continue
        for following in lines[index + 1 :]:
            if following and not following.startswith((" ", "\t", "Traceback", "During handling")):
                found.append(following.split('"', 1)[0].strip()[:160])
                break
    return found


def _percentile(values: list[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return round(ordered[index], 1)


class Chaos:
    """One seeded run on a started :class:`sandbox.scenarios.reliability.Rig`."""

    def __init__(self, rig: Any, seed: int, dossier: Path | None = None) -> None:
        self.rig = rig
        self.dossier = dossier  # a directory: each service violation's story, for analysis
        self.history: dict[str, deque[str]] = {}  # waiting pod → its last looks, one line each
        self.cost_history: deque[str] = deque(maxlen=COST_DOSSIER_LOOKS)  # the last looks' $/h, one line each
        self.recent_logs: deque[str] = deque(maxlen=DOSSIER_ROUNDS)
        self.last_disturbance = "setup"
        self.waits: dict[str, Counter[str]] = {}  # waiting pod → what the looks said of it, counted
        self.terminated_this_step = False  # an instance terminated out of band in this step
        self.rng = random.Random(seed)
        self.report = ChaosReport(seed=seed)
        self.pending_since: dict[str, datetime] = {}  # pod uid → first seen pending (simulated)
        self.bound: set[str] = set()
        self.queue: list[dict[str, Any]] = []  # interruption messages to deliver at the next step
        self.ice_until: dict[tuple[str, str, str], int] = {}

    # --- the story -----------------------------------------------------------------------------
    def setup(self) -> None:
        from nodewright.api import labels
        from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS

        from sandbox.scenarios.workloads import nodeclass, nodepool

        rig = self.rig
        rig.admin.create(EC2NODECLASSES, nodeclass(rig.sandbox))
        requirements = [
            {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]},
            {"key": labels.INSTANCE_TYPE, "operator": "In", "values": INSTANCE_TYPES},
        ]
        pool = nodepool(
            "default",
            requirements,
            limits={"cpu": str(CPU_LIMIT)},
            disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "60s"},
        )
        rig.admin.create(NODEPOOLS, pool)
        for name, kind, most in DEPLOYMENTS:
            cpu, memory = self.rng.choice(CPU_CHOICES), self.rng.choice(MEMORY_CHOICES)
            rig.admin.create(
                workloads.DEPLOYMENTS,
                deployment(name, kind, self.rng.randint(1, most), cpu, memory),
                namespace="default",
            )

    def step(self) -> None:
        kind = self.rng.choices(list(DISTURBANCES), weights=list(DISTURBANCES.values()))[0]
        applied = self.disturb(kind)
        self.last_disturbance = applied or f"{kind} (nothing to act on)"
        if applied:
            self.report.disturbances[applied] += 1
        self.expire_faults()
        self.round()
        self.terminated_this_step = False
        self.report.steps += 1

    def settle(self) -> None:
        """Every fault cleared; rounds until every pod runs; then the settled invariants."""
        rig = self.rig
        rig.crashes.disarm()
        rig.sandbox.faults.clear()
        rig.sandbox.api_faults.clear()
        rig.sandbox.kubelet.registry.fail_next_registrations = 0
        self.ice_until.clear()
        for _ in range(SETTLE_ROUNDS):
            self.round(advance=60.0, service=False)
            if not self.pending_now():
                break
        for _ in range(3):  # the leak GC's and the registration timeout's turn
            self.round(advance=60.0, service=False)
        self.report.pods_pending_at_end = len(self.pending_now())
        self.report.converged = self.report.pods_pending_at_end == 0
        self.record(rig.check(settled=True))

    # --- disturbances --------------------------------------------------------------------------
    def disturb(self, kind: str) -> str | None:
        rig, rng = self.rig, self.rng
        if kind == "scale":
            name, _, most = rng.choice(DEPLOYMENTS)
            rig.admin.patch(
                workloads.DEPLOYMENTS, name, {"spec": {"replicas": rng.randint(0, most)}}, namespace="default"
            )
            return kind
        if kind in ("spot-interruption", "rebalance", "health-event", "duplicate-message"):
            node = self.random_node()
            if node is None:
                return None
            event_kind = {
                "spot-interruption": "spot",
                "rebalance": "rebalance",
                "health-event": "health",
            }.get(kind, rng.choice(("spot", "rebalance")))
            event = rig.interrupt(node, event_kind)
            if event_kind in ("spot", "rebalance") and rng.random() < 0.5:
                rig.invoke("spot_events", event, seconds=30)  # the direct path; the queue's copy follows
            self.queue.append(event)
            if kind == "duplicate-message":
                self.queue.append(event)
            return kind
        if kind == "late-message":  # a warning about an instance already gone (or never ours)
            from sandbox.runtime.events import spot_warning

            gone = self.terminated_instances() or ["i-0123456789abcdef0"]
            self.queue.append(spot_warning(rng.choice(gone), rig.region))
            return kind
        if kind == "out-of-band-termination":
            live = [i["InstanceId"] for i in rig.observe().instances]
            if not live:
                return None
            rig.ec2.terminate_instances(InstanceIds=[rng.choice(live)])
            self.terminated_this_step = True
            return kind
        if kind == "never-registers":
            rig.sandbox.kubelet.registry.fail_next_registrations += 1
            return kind
        if kind == "ice":
            offering = (rng.choice(INSTANCE_TYPES), rng.choice(ZONES), rng.choice(("spot", "on-demand")))
            rig.sandbox.faults.insufficient_capacity(*offering)
            self.ice_until[offering] = self.report.steps + ICE_STEPS
            return kind
        if kind == "fleet-throttle":
            rig.sandbox.faults.throttle("CreateFleet", times=rng.randint(1, 6))
            return kind
        if kind.startswith("api-"):
            fault = {
                "api-conflict": ApiFault("conflict", times=rng.randint(1, 6)),
                "api-throttle": ApiFault("throttle", times=rng.randint(1, 8), retry_after=1),
                "api-error": ApiFault("error", times=rng.randint(1, 8)),
                "api-slow": ApiFault("slow", times=rng.randint(1, 4), delay=1.5),
            }[kind]
            rig.sandbox.api_faults.add(fault)
            return kind
        if kind == "kill":
            from nodewright.checkpoints import POINTS

            rig.crashes.disarm()
            rig.crashes.arm(rng.choice(sorted(POINTS)))
            return kind
        raise ValueError(f"unknown disturbance {kind!r}")

    def expire_faults(self) -> None:
        for offering, until in list(self.ice_until.items()):
            if self.report.steps >= until:
                self.rig.sandbox.faults.restore_capacity(*offering)
                del self.ice_until[offering]

    # --- one compressed minute ------------------------------------------------------------------
    def round(self, advance: float = STEP_SECONDS, *, service: bool = True) -> None:
        """One compressed minute and the invariants. ``service``: also the service invariants, which
        hold after each step; the settling rounds are a simulated minute apart (one provisioner pass
        a minute, not the deployed loop), so a pod that needs a new node is seen pending over 60 s
        there by construction, and settling has its own end: every pod running."""
        from sandbox.runtime import events

        rig = self.rig
        before = len(rig.functions.outcomes)
        acted_before = self.faults_acted()
        kept: list[dict[str, Any]] = []  # what failed: SQS redelivers it next step
        for _ in range(QUEUE_BATCHES_PER_ROUND):
            if not self.queue:
                break
            taken, self.queue = self.queue[:10], self.queue[10:]
            batch = events.sqs_event([events.sqs_record(json.dumps(e)) for e in taken])
            outcome = rig.invoke("interruption", batch, seconds=30)
            failed = {f["itemIdentifier"] for f in (outcome.result or {}).get("batchItemFailures", [])}
            ids = [r["messageId"] for r in batch["Records"]]
            kept += taken if not outcome.ok else [e for e, i in zip(taken, ids, strict=True) if i in failed]
        self.queue = kept + self.queue
        rig.round(advance=advance)
        changes = rig.instance_state_changes()  # EventBridge's copy of every instance that went
        self.report.state_change_events += len(changes)
        self.queue += changes
        self.report.simulated_seconds += advance
        for outcome in rig.functions.outcomes[before:]:
            self.report.invocations += 1
            if outcome.killed_at:
                self.report.killed_at[outcome.killed_at] += 1
            elif not outcome.ok:
                self.report.invocation_errors += 1
                self.report.invocation_error_kinds[f"{outcome.function}: {outcome.error[:160]}"] += 1
        log = rig.log.getvalue() if isinstance(rig.log, io.StringIO) else ""
        self.report.tracebacks += log.count("Traceback")
        self.report.traceback_errors.update(traceback_errors(log))
        if isinstance(rig.log, io.StringIO):
            self.recent_logs.append(f"=== step {self.report.steps} ({self.last_disturbance}) ===\n{log}")
            rig.log.seek(0)
            rig.log.truncate()
        self.record(rig.check())
        self.track_pods()
        if service:
            self.check_service(self.faults_in_effect(acted_before, rig.functions.outcomes[before:]))
        else:
            from nodewright.state.pods import key as pod_key

            for pod in self.pending_now():
                self.waits.setdefault(pod_key(pod), Counter())["settling (not looked at)"] += 1

    def faults_acted(self) -> tuple[int, int]:
        """How often the API server's and CreateFleet's injected faults have answered so far."""
        sandbox = self.rig.sandbox
        return sum(sandbox.api_faults.hits.values()), sandbox.faults.throttled

    def faults_in_effect(self, acted_before: tuple[int, int], outcomes: list[Any]) -> list[str]:
        """The faults that held the functions back in this round: one that answered during it or
        still has calls to answer, an invocation killed in it, or an instance terminated out of band
        at its start (the pods it held had no place this round: the state change that tells the
        functions arrives with the next)."""
        sandbox = self.rig.sandbox
        api, fleet = self.faults_acted()
        found = []
        if sandbox.api_faults.in_effect or api > acted_before[0]:
            found.append("api-server")
        if sandbox.faults.throttling or fleet > acted_before[1]:
            found.append("fleet-throttle")
        if any(o.killed_at for o in outcomes):
            found.append("killed")
        if self.terminated_this_step:  # its state change reaches the queue after this round
            found.append("instance-terminated")
        return found

    def check_service(self, faults: list[str]) -> None:
        """The service invariants (``sandbox.scenarios.reliability.check_service``) on a fresh look."""
        from nodewright.state.pods import key as pod_key

        from sandbox.scenarios.reliability import check_service, pending_pods

        rig = self.rig
        seen = rig.observe()
        look = rig.look_at_capacity(seen)
        waiting = {pod_key(p) for p in pending_pods(seen)}
        violations, figures = check_service(look, waiting, seen.at, rig.tracker, faults)
        self.remember(look, waiting, faults)
        self.cost_history.append(
            f"step {self.report.steps} ({self.last_disturbance}): faults {faults or '-'};"
            f" ${look.cluster_per_hour:.4f}/h vs fresh ${look.fresh_per_hour:.4f}/h ({look.cost_ratio:.2f}x),"
            f" ${look.held_per_hour:.4f}/h held by nodes that never register;"
            f" {len(seen.nodeclaims)} NodeClaims, {len(waiting)} pods waiting"
        )
        for violation in violations:
            if violation.invariant == "cost-above-fresh-plan":
                self.write_cost_dossier(look)
                continue
            pod = violation.detail.split(" ", 1)[0]
            violation.detail += f"; the look puts it {look.where.get(pod, 'nowhere')}"
            self.write_dossier(pod, look, waiting)
        self.record(violations)
        report = self.report
        report.looks += 1
        report.looks_with_faults.update(faults)
        report.unhostable.update({k: v for k, v in look.unhostable.items() if k in waiting})
        report.max_pending_with_capacity_seconds = max(
            report.max_pending_with_capacity_seconds, figures["pendingWithCapacitySeconds"]
        )
        if look.fresh_per_hour > 0:
            report.max_cost_ratio = max(report.max_cost_ratio, figures["costRatio"])
        report.max_cost_above_bound_seconds = max(
            report.max_cost_above_bound_seconds, figures["costAboveBoundSeconds"]
        )

    def remember(self, look: Any, waiting: set[str], faults: list[str]) -> None:
        """What this look said of each waiting pod: counted (the longest wait's story) and, with
        where it would go, one line of its dossier should it wait too long."""
        for pod in list(self.history):
            if pod not in waiting:
                del self.history[pod]
        for pod in waiting:
            said = (
                "held by a node that never registers"
                if pod in look.held
                else f"no place: {look.unhostable[pod]}"
                if pod in look.unhostable
                else ("placeable, a fault in effect" if faults else "placeable")
                if pod in look.placeable
                else "nowhere"
            )
            self.waits.setdefault(pod, Counter())[said] += 1
            line = (
                f"step {self.report.steps} ({self.last_disturbance}): faults {faults or '-'}; {said};"
                f" the look puts it {look.where.get(pod) or 'nowhere'}"
            )
            self.history.setdefault(pod, deque(maxlen=DOSSIER_ROUNDS)).append(line)

    def write_dossier(self, pod: str, look: Any, waiting: set[str]) -> None:
        if self.dossier is None:
            return
        from nodewright.api import labels
        from nodewright.cluster.resources import EVENTS, NODECLAIMS, NODES, PODS

        self.dossier.mkdir(parents=True, exist_ok=True)
        admin = self.rig.admin
        claims = [
            f"{c['metadata']['name']}: {json.dumps(c.get('status') or {}, sort_keys=True)[:600]}"
            for c in admin.list(NODECLAIMS)
        ]
        on_node: dict[str, list[str]] = {}
        for bound in admin.list(PODS):
            if (bound.get("spec") or {}).get("nodeName"):
                on_node.setdefault(bound["spec"]["nodeName"], []).append(bound["metadata"]["name"])
        nodes = [
            f"{n['metadata']['name']}: zone {n['metadata'].get('labels', {}).get(labels.ZONE)},"
            f" unschedulable {n['spec'].get('unschedulable')}, taints {n['spec'].get('taints')},"
            f" pods {sorted(on_node.get(n['metadata']['name'], []))}"
            for n in admin.list(NODES)
        ]
        looks = [
            f"{key}: {look.where.get(key) or look.unhostable.get(key) or 'nowhere'}"
            f"{' (held)' if key in look.held else ''}"
            for key in sorted(waiting)
        ]
        names = {key.split("/", 1)[1] for key in waiting}
        said = [
            f"{e['involvedObject']['name']}: {e.get('reason')} x{e.get('count')} at {e.get('lastTimestamp')}:"
            f" {e.get('message')}"
            for e in admin.list(EVENTS, namespace="default")
            if e.get("involvedObject", {}).get("name") in names
        ]
        story = [f"pod {pod}", *self.history.get(pod, ()), "", "The look, every waiting pod:", *looks]
        cluster = ["Their events:", *said, "", "NodeClaims:", *claims, "", "Nodes:", *nodes]
        text = "\n".join([*story, "", *cluster, "", *self.recent_logs])
        (self.dossier / f"step-{self.report.steps}-{pod.replace('/', '_')}.txt").write_text(text)

    def write_cost_dossier(self, look: Any) -> None:
        """A cost-above-fresh-plan episode's story: the last looks' $/h, what each NodeClaim is and
        holds, the disruption function's logs of the last rounds (what it considered and why not)."""
        if self.dossier is None:
            return
        from nodewright.cluster.resources import NODECLAIMS, NODES, PODS

        self.dossier.mkdir(parents=True, exist_ok=True)
        admin = self.rig.admin
        on_node: dict[str, list[str]] = {}
        for bound in admin.list(PODS):
            node = (bound.get("spec") or {}).get("nodeName")
            if node:
                requests = [c.get("resources", {}).get("requests", {}) for c in bound["spec"]["containers"]]
                on_node.setdefault(node, []).append(f"{bound['metadata']['name']} {requests}")
        nodes = {n["metadata"]["name"]: n for n in admin.list(NODES)}
        registry = self.rig.sandbox.kubelet.registry
        with registry.lock:
            never = set(registry.never_register)
        claims = []
        for claim in admin.list(NODECLAIMS):
            labels_ = claim["metadata"].get("labels") or {}
            node_name = (claim.get("status") or {}).get("nodeName", "")
            node_spec = (nodes.get(node_name) or {}).get("spec") or {}
            conditions = (claim.get("status") or {}).get("conditions", [])
            deleting = bool(claim["metadata"].get("deletionTimestamp"))
            instance = str((claim.get("status") or {}).get("providerID", "")).rsplit("/", 1)[-1]
            claims.append(
                f"{claim['metadata']['name']}: {labels_.get('node.kubernetes.io/instance-type')}"
                f" {labels_.get('karpenter.sh/capacity-type')} {labels_.get('topology.kubernetes.io/zone')}"
                f" node {node_name or '-'} unschedulable {node_spec.get('unschedulable')}"
                f" taints {node_spec.get('taints')} deleting {deleting}"
                f"{' NEVER REGISTERS (a fault)' if instance in never else ''}"
                f"\n  conditions {[(c['type'], c['status'], c.get('reason')) for c in conditions]}"
                f"\n  annotations {claim['metadata'].get('annotations')}"
                f"\n  pods {sorted(on_node.get(node_name, []))}"
            )
        text = "\n".join(
            [
                f"cost-above-fresh-plan at step {self.report.steps}: ${look.cluster_per_hour:.4f}/h,"
                f" fresh plan ${look.fresh_per_hour:.4f}/h",
                "",
                "The last looks:",
                *self.cost_history,
                "",
                "NodeClaims:",
                *claims,
                "",
                *self.recent_logs,
            ]
        )
        (self.dossier / f"step-{self.report.steps}-cost.txt").write_text(text)

    def record(self, violations: list[Any]) -> None:
        for violation in violations:
            self.report.violations[violation.invariant] += 1
            if len(self.report.violation_examples) < 20:
                self.report.violation_examples.append(f"step {self.report.steps}: {violation}")

    def track_pods(self) -> None:
        from nodewright.state.pods import key as pod_key

        from sandbox.scenarios.reliability import pending_pods, running_pods

        seen = self.rig.observe()
        now = seen.at
        for pod in pending_pods(seen):
            since = self.pending_since.setdefault(pod["metadata"]["uid"], now)
            self.report.max_pending_seconds = max(
                self.report.max_pending_seconds, (now - since).total_seconds()
            )
        for pod in running_pods(seen):
            uid = pod["metadata"]["uid"]
            if uid in self.bound:
                continue
            self.bound.add(uid)
            self.report.pods_scheduled += 1
            key = pod_key(pod)
            looks = self.waits.pop(key, Counter())
            if uid in self.pending_since:
                waited = (now - self.pending_since.pop(uid)).total_seconds()
                self.report.bind_seconds.append(waited)
                if waited >= self.report.longest_wait.get("seconds", 0.0):
                    self.report.longest_wait = {"pod": key, "seconds": round(waited, 1), "looks": dict(looks)}

    # --- looking ------------------------------------------------------------------------------
    def pending_now(self) -> list[dict[str, Any]]:
        from sandbox.scenarios.reliability import pending_pods

        return pending_pods(self.rig.observe())

    def random_node(self) -> str | None:
        from nodewright.cluster.resources import NODES

        nodes = [
            n["metadata"]["name"]
            for n in self.rig.admin.list(NODES)
            if not n["spec"].get("unschedulable") and not n["metadata"].get("deletionTimestamp")
        ]
        return self.rng.choice(sorted(nodes)) if nodes else None

    def terminated_instances(self) -> list[str]:
        pages = self.rig.ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["shutting-down", "terminated"]}]
        )
        return sorted(i["InstanceId"] for page in pages for r in page["Reservations"] for i in r["Instances"])


def deployment(name: str, kind: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    """A Deployment whose pods carry the scheduling benchmark's constraint of ``kind``."""
    from nodewright.api import labels

    match = {"app": name}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "work",
                "image": "public.ecr.aws/amazonlinux/amazonlinux:latest",
                "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ]
    }
    if kind == "zonal-spread":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": labels.ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": match},
            }
        ]
    elif kind == "hostname-anti-affinity":
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": match}, "topologyKey": labels.HOSTNAME}
                ]
            }
        }
    return workloads.deployment(name, replicas, spec)


def run_chaos(
    steps: int, seed: int, *, minutes: float | None = None, progress: Any = None, dossier: Path | None = None
) -> ChaosReport:
    """Start a sandbox, run ``steps`` seeded steps (or until ``minutes`` of real time), settle, report."""
    from sandbox.scenarios.reliability import Rig

    started = time.monotonic()
    # The whole run's stdout is the functions' log, not only each invocation's: a thread of a killed
    # invocation runs on to its next request (sandbox.scenarios.reliability.Crashes) and may log
    # between invocations, which put a JSON log line before ``chaos --json``'s figures.
    log = io.StringIO()
    with contextlib.redirect_stdout(log), Rig("chaos", log=log) as rig:  # its stop unwinds such threads
        chaos = Chaos(rig, seed, dossier)
        chaos.setup()
        for index in range(steps):
            if minutes is not None and time.monotonic() - started > minutes * 60:
                break
            chaos.step()
            if progress is not None and (index + 1) % 10 == 0:
                elapsed = time.monotonic() - started
                print(f"chaos: step {index + 1}/{steps} ({elapsed:.0f} s)", file=progress, flush=True)
        chaos.settle()
        chaos.report.real_seconds = time.monotonic() - started
        return chaos.report


# --- the command ----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if args.steps < 0:
        print(f"chaos: --steps {args.steps}: give a count >= 0", file=sys.stderr)
        return 2
    report = run_chaos(args.steps, args.seed, minutes=args.minutes, progress=sys.stderr, dossier=args.dossier)
    figures = report.figures()
    if getattr(args, "save", None):
        from bench._report import save

        save(args, figures)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        _print(figures)
    return 0 if report.ok else 1


def _print(figures: dict[str, Any]) -> None:
    timing = figures["podPendingToBoundSeconds"]
    print(f"chaos: seed {figures['seed']}, {figures['steps']} steps")
    print("  disturbances: " + ", ".join(f"{k} {v}" for k, v in figures["disturbances"].items()))
    if figures["killedAt"]:
        print("  killed at:    " + ", ".join(f"{k} {v}" for k, v in figures["killedAt"].items()))
    print(f"  pods scheduled: {figures['podsScheduled']}")
    print(
        f"  pending → bound (simulated s): p50 {timing['p50']}  p99 {timing['p99']}  max {timing['max']};"
        f" longest pending {figures['maxPendingSeconds']} s"
    )
    if figures["longestWait"]:
        longest = figures["longestWait"]
        said = ", ".join(f"{what} x{count}" for what, count in sorted(longest["looks"].items()))
        print(f"  longest wait: {longest['pod']} {longest['seconds']} s; the looks said: {said or '-'}")
    waiting, cost = figures["pendingWithCapacity"], figures["costVersusFreshPlan"]
    print(
        f"  pending with capacity: longest {waiting['maxSeconds']} s (limit {waiting['limitSeconds']} s),"
        f" {waiting['violations']} violations;"
        f" {figures['podsNoNodePoolCouldHost']} pods no NodePool could host"
    )
    print(
        f"  $/h vs fresh plan: max {cost['maxRatio']}x, longest above {cost['bound']}x"
        f" {cost['longestAboveBoundSeconds']} s (window {cost['windowSeconds']} s),"
        f" {cost['violations']} violations"
    )
    print(
        f"  leaked instances: {figures['leakedInstances']}"
        f"  duplicate NodeClaims: {figures['duplicateNodeClaims']}"
    )
    print(f"  invariant violations: {figures['violations'] or 0}")
    for example in figures["violationExamples"]:
        print(f"    {example}")
    print(
        f"  invocations: {figures['invocations']} ({figures['invocationErrors']} errors,"
        f" {figures['tracebacks']} tracebacks)"
    )
    for error, count in figures["invocationErrorKinds"].items():
        print(f"    invocation error x{count}: {error}")
    for error, count in figures["tracebackErrors"].items():
        print(f"    traceback x{count}: {error}")
    print(
        f"  converged: {'yes' if figures['converged'] else 'NO'} ({figures['podsPendingAtEnd']} pods pending)"
        f"; {figures['realSeconds']} s real, {figures['simulatedSeconds']} s simulated"
    )
