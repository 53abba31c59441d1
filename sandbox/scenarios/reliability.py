"""What the fault matrix and the chaos run share: simulated time, killed invocations, the invariants.

* :class:`SimulatedTime` moves the wall clock of this whole process (the API emulator's timestamps,
  moto's launch times, the handlers' ``datetime.now``) with ``time-machine``; ``time.monotonic``
  (invocation deadlines, socket timeouts, the simulators' delays) keeps real time. A step of the
  story is a few real seconds and as many simulated minutes as it needs: a 15-minute registration
  timeout passes in one call.
* :class:`Functions` runs the real handlers in this process, each function in its own warm
  "container" (its ``app.py`` module), one invocation at a time in a thread of its own. An
  invocation can be **killed** at a named checkpoint of the layer (``nodewright.checkpoints``): the
  thread is frozen there for good, so nothing after the point runs (no ``finally``, no lease given
  back), exactly as when Lambda kills the process; the container is thrown away and the next
  invocation starts a fresh one. Lambda stops every thread of the process at once; a Python thread
  cannot be stopped from outside, so the invocation's other threads (a pass's concurrent launches,
  the interruption's replacement) stop at their next request to the API server or AWS, or at
  their next checkpoint, whichever comes first: nothing they would send after the kill reaches
  either. When the rig stops, the frozen threads are unwound (every request they try then fails),
  so the process can exit.
* :func:`observe` and :func:`check` are the invariants every scenario ends on: no leaked instance,
  no NodeClaim without an instance for longer than the registration timeout, never two instances
  for one NodeClaim, NodePool limits held, NodeClaims, instances and nodes consistent.
  :func:`check_churn` (a scenario turns it on with :meth:`Rig.watch_churn`): no instance launched
  and terminated more than once for the same pods without ever running one.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

from nodewright.spec import deployment

from sandbox.aws.server import forget_terminated_instances
from sandbox.runtime import events
from sandbox.runtime.lambdas import LambdaContext, load_function, provisioner_invocation

# The product's timeouts the invariants are stated against (provisioning/lifecycle.py).
REGISTRATION_TIMEOUT = timedelta(minutes=15)
LEAK_GRACE = timedelta(minutes=2)
GC_INTERVAL = timedelta(seconds=60)
LIVE_STATES = ("pending", "running", "stopping", "stopped")
GOING_STATES = ("stopping", "stopped", "shutting-down", "terminated")  # each announced by EventBridge
NODECLAIM_TAG = "karpenter.sh/nodeclaim"


class SimulatedTime:
    """The process's wall clock, started at the real now and moved forward by :meth:`advance`."""

    def __init__(self) -> None:
        self._traveller: Any = None
        self._coordinates: Any = None
        self.advanced = 0.0

    def start(self) -> SimulatedTime:
        import time_machine

        self._traveller = time_machine.travel(datetime.now(UTC), tick=True)
        self._coordinates = self._traveller.start()
        return self

    def advance(self, seconds: float) -> None:
        self._coordinates.shift(timedelta(seconds=seconds))
        self.advanced += seconds

    def now(self) -> datetime:
        return datetime.now(UTC)

    def stop(self) -> None:
        if self._traveller is not None:
            self._traveller.stop()
            self._traveller = None

    def __enter__(self) -> SimulatedTime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- killed invocations ------------------------------------------------------------------------


class _Invocation:
    """The invocation the current thread works for: a context variable, so the threads an invocation
    starts (a pass's concurrent launches run in a copy of its context, ``provisioning.parallel``)
    belong to it too, as every thread of a Lambda process dies with it."""

    _box: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("invocation", default=None)

    @property
    def box(self) -> dict[str, Any] | None:
        return self._box.get()

    @box.setter
    def box(self, value: dict[str, Any] | None) -> None:
        self._box.set(value)


class InvocationKilled(BaseException):
    """Raised in a killed invocation's frozen threads when the rig stops, to unwind them (and in any
    request they then try). A BaseException, so the product's ``except Exception`` never takes it
    for an error of its own to handle."""


class Crashes:
    """The checkpoint hook: kills (freezes) the invocation that reaches an armed point, and with it
    every thread of that invocation at its next request (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[str, int] = {}  # point → hits to let pass first
        self._never = threading.Event()  # set only when the rig stops: frozen threads then unwind
        self._frozen: list[threading.Thread] = []
        self.current = _Invocation()
        self.killed: Counter[str] = Counter()
        self.reached: Counter[str] = Counter()
        self._urlopen: Any = None
        self._excepthook: Any = None

    def install(self) -> None:
        """The checkpoint hook, and the same check before every HTTP request of this process
        (urllib3 carries both the kubernetes client's and botocore's)."""
        import urllib3.connectionpool
        from nodewright import checkpoints

        self._never = threading.Event()  # a rig reused after a stop freezes its kills again
        checkpoints.set_hook(self._hook)
        pool = urllib3.connectionpool.HTTPConnectionPool
        original = self._urlopen = pool.urlopen
        crashes = self

        def urlopen(connections: Any, *args: Any, **kwargs: Any) -> Any:
            crashes.stop_if_killed()
            return original(connections, *args, **kwargs)

        pool.urlopen = urlopen  # type: ignore[method-assign,assignment]
        self._excepthook = threading.excepthook

        def excepthook(args: Any) -> None:  # an unwound thread is not a failure to print
            if not isinstance(args.exc_value, InvocationKilled):
                self._excepthook(args)

        threading.excepthook = excepthook

    def uninstall(self) -> None:
        """Unwind the frozen threads (each request they try on the way fails), then put back what
        :meth:`install` replaced."""
        import urllib3.connectionpool
        from nodewright import checkpoints

        checkpoints.set_hook(None)
        self._never.set()
        for thread in self._frozen:
            thread.join(5.0)
        self._frozen.clear()
        if self._urlopen is not None:
            urllib3.connectionpool.HTTPConnectionPool.urlopen = self._urlopen  # type: ignore[method-assign]
            self._urlopen = None
        if self._excepthook is not None:
            threading.excepthook = self._excepthook
            self._excepthook = None

    def stop_if_killed(self) -> None:
        """Freeze the calling thread if the invocation it works for was killed."""
        box = self.current.box
        if box is not None and box.get("killed"):
            self._freeze()

    def _freeze(self) -> None:
        with self._lock:
            self._frozen.append(threading.current_thread())
        self._never.wait()  # the container is gone: nothing after this point runs until the rig stops
        raise InvocationKilled

    def arm(self, point: str, *, after: int = 0) -> None:
        """Kill the next invocation that reaches ``point`` (after letting ``after`` hits pass)."""
        from nodewright.checkpoints import POINTS

        if point not in POINTS:
            raise ValueError(f"unknown checkpoint {point!r}; nodewright.checkpoints.POINTS lists them")
        with self._lock:
            self._armed[point] = after

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def _hook(self, point: str) -> None:
        box = self.current.box
        with self._lock:
            self.reached[point] += 1
            if box is None:
                return
            # Another thread of an invocation killed meanwhile: it dies with it at its next step.
            if not box.get("killed"):
                if point not in self._armed:
                    return
                if self._armed[point] > 0:
                    self._armed[point] -= 1
                    return
                del self._armed[point]
                self.killed[point] += 1
                box["killed"] = point
                box["done"].set()
        self._freeze()


def lose_process_state() -> None:
    """What Lambda's kill takes with the container's process: the layer's process-wide caches, the
    per-identity ``CloudProvider`` and the module-level ``TTLCache``s, and with them any
    single-flight load a thread frozen mid-call holds (``cloud.cache.TTLCache.get_or_load``). In
    this one process they outlived the kill: the killed interruption container's replacement thread
    froze inside its DescribeSubnets, and every later container of the function waited on that load
    for good (a 300-step chaos run hung at step 80). Warm containers of the other functions keep the
    provider they hold; the module-level caches start empty for all of them (colder than Lambda,
    never kinder)."""
    from nodewright.cloud import catalog, eks, reservations
    from nodewright.cloud.cache import TTLCache
    from nodewright.cloud.provider import CloudProvider

    with CloudProvider._shared_lock:
        CloudProvider._shared.clear()
    for module, name in (
        (catalog, "_CATALOGS"),
        (catalog, "_PRICES"),
        (eks, "_described"),
        (reservations, "_QUERIES"),
    ):
        cache = getattr(module, name)
        setattr(module, name, TTLCache(cache.ttl_seconds, cache.clock))


@dataclass
class Outcome:
    function: str
    ok: bool
    seconds: float
    result: Any = None
    error: str = ""
    killed_at: str | None = None


class Functions:
    """The real handlers, in this process, with their warm containers; see the module docstring."""

    def __init__(self, crashes: Crashes | None = None) -> None:
        self.crashes = crashes or Crashes()
        self.containers: dict[str, ModuleType] = {}
        self.cold_starts: Counter[str] = Counter()
        self.outcomes: list[Outcome] = []

    def container(self, name: str) -> ModuleType:
        if name not in self.containers:
            self.containers[name] = load_function(name)
            self.cold_starts[name] += 1
        return self.containers[name]

    def discard(self, name: str) -> None:
        """Throw the warm container away (the next invocation starts cold)."""
        self.containers.pop(name, None)

    def invoke(
        self, name: str, event: dict[str, Any], seconds: float, context: LambdaContext | None = None
    ) -> Outcome:
        """One invocation with ``seconds`` to run (Lambda's timeout for it; or ``context``); waits until
        it ends or is killed at an armed checkpoint."""
        module = self.container(name)
        box: dict[str, Any] = {"done": threading.Event()}
        context = context or LambdaContext(seconds, f"nodewright-{name.replace('_', '-')}")

        def run() -> None:
            self.crashes.current.box = box
            try:
                box["result"] = module.handler(event, context)
            except Exception as exc:  # Lambda logs it and keeps the container
                box["error"] = f"{type(exc).__name__}: {exc}"
            except InvocationKilled:  # unwound when the rig stopped: it was over long before
                pass
            finally:
                self.crashes.current.box = None
                box["done"].set()

        started = time.monotonic()
        thread = threading.Thread(target=run, name=f"invocation-{name}", daemon=True)
        thread.start()
        box["done"].wait()
        if not box.get("killed"):
            thread.join()
        outcome = Outcome(
            function=name,
            ok="error" not in box and "killed" not in box,
            seconds=time.monotonic() - started,
            result=box.get("result"),
            error=box.get("error", ""),
            killed_at=box.get("killed"),
        )
        if outcome.killed_at:
            self.discard(name)
            lose_process_state()
        self.outcomes.append(outcome)
        return outcome

    def provisioner(self, seconds: float = 12.0) -> Outcome:
        return self.invoke("provisioner", events.scheduled_event(rule="provisioner"), seconds)

    def disruption(self, seconds: float = 12.0) -> Outcome:
        return self.invoke("disruption", events.scheduled_event(rule="disruption"), seconds)

    def interruption(self, bodies: list[str], seconds: float = 30.0) -> Outcome:
        return self.invoke("interruption", events.sqs_event([events.sqs_record(b) for b in bodies]), seconds)

    def spot_events(self, event: dict[str, Any], seconds: float = 30.0) -> Outcome:
        return self.invoke("spot_events", event, seconds)


# --- the invariants ------------------------------------------------------------------------------


@dataclass
class Observation:
    """One consistent-enough look at EC2 and the cluster, from outside (the administrator's view)."""

    at: datetime
    instances: list[dict[str, Any]]  # live instances tagged for the cluster
    nodeclaims: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    nodepools: list[dict[str, Any]]

    def instances_of(self, claim_name: str) -> list[dict[str, Any]]:
        return [i for i in self.instances if _tags(i).get(NODECLAIM_TAG) == claim_name]


def observe(sandbox: Any, admin: Any, ec2: Any) -> Observation:
    """Read the instances first, then the NodeClaims: an instance launched in between is seen with
    its NodeClaim, never as a leak."""
    from nodewright.cluster.resources import NODECLAIMS, NODEPOOLS, NODES, PODS

    instances = []
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": "tag:eks:eks-cluster-name", "Values": [sandbox.cluster_name]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
        ]
    )
    for page in pages:
        for reservation in page["Reservations"]:
            instances.extend(reservation["Instances"])
    return Observation(
        at=datetime.now(UTC),
        instances=instances,
        nodeclaims=admin.list(NODECLAIMS),
        nodes=admin.list(NODES),
        pods=admin.list(PODS),
        nodepools=admin.list(NODEPOOLS),
    )


@dataclass
class Violation:
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}"


@dataclass
class Tracker:
    """Invariants over time: when each suspect was first seen, so a transient state (an instance
    launched a moment before its NodeClaim records it) is told from a lasting one."""

    first_seen: dict[tuple[str, str], datetime] = field(default_factory=dict)
    reported: set[tuple[str, str]] = field(default_factory=set)

    def age(self, kind: str, key: str, now: datetime, present: bool) -> float:
        """Seconds ``(kind, key)`` has been seen continuously (0 when not present now)."""
        if not present:
            self.first_seen.pop((kind, key), None)
            self.reported.discard((kind, key))
            return 0.0
        since = self.first_seen.setdefault((kind, key), now)
        return (now - since).total_seconds()

    def forget_absent(self, kind: str, present: set[str], now: datetime) -> None:
        """End the episodes of ``kind`` whose key is no longer seen at all."""
        for seen_kind, key in list(self.first_seen):
            if seen_kind == kind and key not in present:
                self.age(kind, key, now, False)

    def first_report(self, kind: str, key: str) -> bool:
        """True once per episode of ``(kind, key)``: a lasting state counts as one violation."""
        if (kind, key) in self.reported:
            return False
        self.reported.add((kind, key))
        return True


def check(seen: Observation, tracker: Tracker | None = None, *, settled: bool = False) -> list[Violation]:
    """The invariants (see the module docstring). ``settled``: the story is over and the functions
    had their time, so nothing may be left in flight: any leak or inconsistency counts at once."""
    tracker = tracker or Tracker()
    out: list[Violation] = []
    now = seen.at
    claims = {c["metadata"]["name"]: c for c in seen.nodeclaims}
    by_claim: dict[str, list[str]] = {}
    for instance in seen.instances:
        by_claim.setdefault(_tags(instance).get(NODECLAIM_TAG, ""), []).append(instance["InstanceId"])

    # Never two instances for one NodeClaim (any moment).
    for name, ids in by_claim.items():
        if name and len(ids) > 1:
            out.append(Violation("two-instances", f"NodeClaim {name} has instances {sorted(ids)}"))

    # No leaked instance: each live instance belongs to a NodeClaim that records it (or will).
    leak_allowance = (LEAK_GRACE + 2 * GC_INTERVAL).total_seconds()
    for instance in seen.instances:
        instance_id = instance["InstanceId"]
        name = _tags(instance).get(NODECLAIM_TAG, "")
        claim = claims.get(name)
        recorded = _instance_id(claim) if claim else None
        leaked = claim is None or (recorded is not None and recorded != instance_id)
        age = tracker.age("leak", instance_id, now, leaked)
        if leaked and (settled or age > leak_allowance):
            why = "no NodeClaim" if claim is None else f"NodeClaim {name} records {recorded}"
            out.append(Violation("leaked-instance", f"{instance_id} ({why}) for {age:.0f}s"))

    # No NodeClaim without an instance for longer than the registration timeout: since its creation
    # when it never had one, since it was first seen without it when its instance went away (a
    # NodeClaim hours old whose instance was reclaimed a minute ago is not a violation).
    live_ids = {i["InstanceId"] for i in seen.instances}
    allowance = REGISTRATION_TIMEOUT.total_seconds() + GC_INTERVAL.total_seconds() * 2
    for name, claim in claims.items():
        instance_id = _instance_id(claim)
        gone = instance_id is not None and instance_id not in live_ids
        since_gone = tracker.age("instance-gone", name, now, gone)
        if instance_id is None:
            created = _time((claim.get("metadata") or {}).get("creationTimestamp"))
            age = (now - created).total_seconds() if created else 0.0
            state = "no instance launched"
        else:
            age, state = since_gone, f"instance {instance_id} gone"
        if age > allowance:
            out.append(Violation("nodeclaim-without-instance", f"{name}: {state} for {age / 60:.0f} min"))

    # NodeClaims ↔ instances ↔ nodes: a Node of a live instance, once settled, has a NodeClaim.
    node_ids = {_provider_instance(n): n["metadata"]["name"] for n in seen.nodes}
    claim_ids = {_instance_id(c) for c in claims.values()}
    for instance_id, node_name in node_ids.items():
        orphan = instance_id is not None and instance_id not in claim_ids
        age = tracker.age("node", node_name, now, orphan)
        if orphan and (settled or age > leak_allowance):
            out.append(
                Violation("node-without-nodeclaim", f"node {node_name} ({instance_id}) for {age:.0f}s")
            )
    for instance_id, node_name in node_ids.items():
        gone = instance_id is not None and instance_id not in live_ids
        age = tracker.age("dead-node", node_name, now, gone)
        if gone and (settled or age > leak_allowance):
            out.append(Violation("node-without-instance", f"node {node_name} ({instance_id}) for {age:.0f}s"))

    # NodePool limits: the live NodeClaims' capacity never exceeds spec.limits.
    out.extend(_limits(seen))
    return out


@dataclass
class Churn:
    """What :func:`check_churn` remembers between looks: for each instance, the pods that needed a
    place when it was first seen; which instances ever ran a workload pod; and, by those pods, the
    instances that went without running any."""

    launched_for: dict[str, frozenset[str]] = field(default_factory=dict)
    ran: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    wasted: dict[frozenset[str], list[str]] = field(default_factory=dict)
    reported: set[frozenset[str]] = field(default_factory=set)


def check_churn(seen: Observation, churn: Churn) -> list[Violation]:
    """**launched-and-terminated-twice**: no instance launched and terminated more than once for the
    same pods without ever running a workload pod. The pods an instance is launched for are those
    that needed a place when it was first seen: waiting, or running on a node that is going (its
    Node or NodeClaim being deleted). Launching for pods that can never leave (a drain a PDB holds)
    and removing the empty node again, minute after minute, is the loop this catches."""
    out: list[Violation] = []
    going_nodes = {n["metadata"]["name"] for n in seen.nodes if n["metadata"].get("deletionTimestamp")}
    going_nodes |= {
        (c.get("status") or {}).get("nodeName", "")
        for c in seen.nodeclaims
        if (c.get("metadata") or {}).get("deletionTimestamp")
    }
    needing = frozenset(
        _pod_key(p)
        for p in seen.pods
        if is_waiting(p) or (is_workload(p) and (p.get("spec") or {}).get("nodeName") in going_nodes)
    )
    instance_of_node = {n["metadata"]["name"]: _provider_instance(n) for n in seen.nodes}
    for pod in seen.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and is_workload(pod) and (instance := instance_of_node.get(node)):
            churn.ran.add(instance)
    live = {i["InstanceId"] for i in seen.instances}
    for instance_id in live:
        churn.launched_for.setdefault(instance_id, needing)
    for instance_id, pods in churn.launched_for.items():
        if instance_id in live or instance_id in churn.ended:
            continue
        churn.ended.add(instance_id)
        if instance_id not in churn.ran and pods:
            churn.wasted.setdefault(pods, []).append(instance_id)
    for pods, instances in churn.wasted.items():
        if len(instances) > 1 and pods not in churn.reported:
            churn.reported.add(pods)
            out.append(
                Violation(
                    "launched-and-terminated-twice",
                    f"instances {', '.join(instances)} were launched for {', '.join(sorted(pods))} and "
                    "terminated without running a pod",
                )
            )
    return out


def _pod_key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"


def _limits(seen: Observation) -> list[Violation]:
    from kubernetes.utils.quantity import parse_quantity

    out = []
    for pool in seen.nodepools:
        limits = (pool.get("spec") or {}).get("limits") or {}
        if not limits:
            continue
        name = pool["metadata"]["name"]
        used: Counter[str] = Counter()
        for claim in seen.nodeclaims:
            meta = claim.get("metadata") or {}
            if (meta.get("labels") or {}).get("karpenter.sh/nodepool") != name or meta.get(
                "deletionTimestamp"
            ):
                continue
            for resource, amount in ((claim.get("status") or {}).get("capacity") or {}).items():
                used[resource] += parse_quantity(amount)
            used["nodes"] += 1
        for resource, limit in limits.items():
            if used[resource] > parse_quantity(limit):
                out.append(Violation("limits", f"NodePool {name}: {resource} {used[resource]} > {limit}"))
    return out


# --- the service invariants: pods get a place, the cluster costs what a fresh plan would ----------

# A pod may wait this long (simulated) for a node while capacity exists for it and no fault holds it.
PENDING_LIMIT_SECONDS = 60.0
# The cluster's $/h may be above this multiple of our scheduler's fresh plan of the same pods ...
COST_RATIO_LIMIT = 1.2
# ... for at most the consolidation window: consolidateAfter (60 s in the chaos NodePool), the
# command's 15 s validation, the replacement launched and registered and the node drained and
# terminated (about two minutes here), and the disruption function's one-minute schedule.
CONSOLIDATION_WINDOW_SECONDS = 300.0


@dataclass
class CapacityLook:
    """What our scheduler would do with the cluster now, on the capacity that truly exists.

    ``placeable``: the waiting pods it places, on a node, a NodeClaim in flight, or a new NodeClaim
    within the NodePools' limits on an offering that is not out of capacity; ``held``: placeable pods
    it nominates to a NodeClaim whose instance will never register (an injected fault: the product,
    like Karpenter, waits for it until the registration timeout), and those whose topology counts
    them (:func:`counted_with`); ``unhostable``: the waiting pods it
    cannot place, with the reason (limits reached, every fitting offering out of capacity, no
    NodePool can ever host them). ``cluster_per_hour``: what the NodeClaims cost (instance and EBS),
    leaving out ``held_per_hour``, what the NodeClaims whose instance will never register cost: the
    fault holds that money as it holds their pods (the product, like Karpenter, keeps such a
    NodeClaim until its 15-minute registration timeout, three times the consolidation window);
    ``fresh_per_hour``: ``state.snapshot.fresh_plan`` of every workload pod, running or waiting."""

    placeable: set[str]
    held: set[str]
    unhostable: dict[str, str]
    cluster_per_hour: float
    fresh_per_hour: float
    unpriced: list[str]
    # Where the look puts each placeable pod: "node/x", "nodeclaim/y" or "new <types> in <zones>".
    where: dict[str, str] = field(default_factory=dict)
    held_per_hour: float = 0.0

    @property
    def cost_ratio(self) -> float:
        if self.fresh_per_hour > 0:
            return self.cluster_per_hour / self.fresh_per_hour
        return float("inf") if self.cluster_per_hour > 0 else 1.0


def look_at_capacity(
    cluster: Any, instance_types: Any, region: str, never_registering: set[str]
) -> CapacityLook:
    """The provisioner's own planning over a read of the cluster (``provisioning.whatif``: the same
    triage, limits and scheduling core), with ``instance_types(nodeclass)`` giving the offerings as
    they truly are; ``never_registering``: instance ids whose node will never join."""
    from nodewright.cluster.objects import nodeclaim_instance_id
    from nodewright.provisioning import planning
    from nodewright.provisioning.whatif import live_world, usable_nodepools
    from nodewright.state.pods import key as pod_key
    from nodewright.state.snapshot import fresh_plan

    catalogs: dict[str, list[Any]] = {}

    def once(nodeclass: Mapping[str, Any]) -> list[Any]:  # the plan and its price table ask alike
        name = str((nodeclass.get("metadata") or {}).get("name"))
        if name not in catalogs:
            catalogs[name] = instance_types(nodeclass)
        return catalogs[name]

    world, _ = live_world(cluster, once, region)
    usable, _ = usable_nodepools(world)
    waiting = [p for p in world.pods if is_waiting(p)]
    view = planning.plan(world, waiting, usable)
    stuck = {c["metadata"]["name"] for c in world.nodeclaims if nodeclaim_instance_id(c) in never_registering}
    held = {key for key, target in view.nominated.items() if target.removeprefix("nodeclaim/") in stuck}
    held |= counted_with(waiting, held)
    where = dict(view.nominated)
    for new in view.new_claims:
        shape = f"new {','.join(new.instance_types[:3])} {'/'.join(new.capacity_types)}"
        where.update({pod_key(p): f"{shape} in {','.join(new.zones)}" for p in new.pods})
    placeable = set(where) - held
    cluster_per_hour, held_per_hour, unpriced = 0.0, 0.0, []
    for claim in world.nodeclaims:
        price = world.price_of(claim)
        nodeclass = world.nodeclass_of(claim)
        if price is None:
            unpriced.append(claim["metadata"]["name"])
            continue
        price += world.cloud.node_price(nodeclass) if world.cloud and nodeclass else 0.0
        if claim["metadata"]["name"] in stuck:
            held_per_hour += price
        else:
            cluster_per_hour += price
    fresh = fresh_plan(world, [p for p in world.pods if is_workload(p)], usable)
    return CapacityLook(
        placeable=placeable,
        held=held,
        unhostable=dict(view.unschedulable),
        cluster_per_hour=cluster_per_hour,
        fresh_per_hour=fresh.cost_per_hour,
        unpriced=unpriced,
        where=where,
        held_per_hour=held_per_hour,
    )


def counted_with(waiting: list[dict[str, Any]], held: set[str]) -> set[str]:
    """The waiting pods whose topology counts a held pod: a zonal spread or required (anti-)affinity
    whose selector matches it. Where they may go depends on where the held pods land (the product,
    like Karpenter, counts a pod nominated to a NodeClaim in flight in its zone; kube-scheduler
    counts bound pods only), and which of two equal pods the plan calls held is the order's choice:
    the fault that holds one holds its group."""
    from nodewright.scheduling.model import pods_from_k8s

    pods, _ = pods_from_k8s(waiting)
    stuck = [p for p in pods if p.key in held]
    if not stuck:
        return set()

    def counts_a_held_pod(pod: Any) -> bool:
        spec = pod.spec
        for spread in spec.spreads:
            if any(h.namespace == pod.namespace and spread.selector.matches(h.spec.label_map) for h in stuck):
                return True
        return any(
            term.weight == 0 and term.selects(pod.namespace, h.namespace, h.spec.label_map)
            for term in spec.affinity
            for h in stuck
        )

    return {p.key for p in pods if p.key not in held and counts_a_held_pod(p)}


def check_service(
    look: CapacityLook, waiting: Iterable[str], now: datetime, tracker: Tracker, faults: list[str]
) -> tuple[list[Violation], dict[str, float]]:
    """The two service invariants, with their clocks in ``tracker``; and the figures of this look.

    * **pod-pending-with-capacity**: a waiting pod (``waiting``: its namespace/name) pending longer
      than ``PENDING_LIMIT_SECONDS`` while, at every look, capacity existed for it (it is in
      ``look.placeable``) and no fault was in effect (``faults``: the API server answering
      faults, CreateFleet throttled, an invocation killed in this round). A look without capacity
      or with a fault starts the pod's clock again; a pod no NodePool can host never counts.
    * **cost-above-fresh-plan**: the cluster's $/h above ``COST_RATIO_LIMIT`` times the fresh plan for
      longer than ``CONSOLIDATION_WINDOW_SECONDS`` without a fault in effect (a look with a fault, or
      at or under the bound, starts the clock again). Unpriced NodeClaims (not launched yet) and
      those a fault keeps from registering are left out of the cluster's side.

    Each lasting episode counts once."""
    out: list[Violation] = []
    waiting = set(waiting)
    faulted = bool(faults)
    longest = 0.0
    tracker.forget_absent("pending-with-capacity", waiting, now)
    for key in sorted(waiting):
        age = tracker.age("pending-with-capacity", key, now, key in look.placeable and not faulted)
        longest = max(longest, age)
        if age > PENDING_LIMIT_SECONDS and tracker.first_report("pending-with-capacity", key):
            out.append(
                Violation("pod-pending-with-capacity", f"{key} pending {age:.0f}s while capacity existed")
            )
    ratio = look.cost_ratio
    above = tracker.age("cost", "cluster", now, ratio > COST_RATIO_LIMIT and not faulted)
    if above > CONSOLIDATION_WINDOW_SECONDS and tracker.first_report("cost", "cluster"):
        out.append(
            Violation(
                "cost-above-fresh-plan",
                f"${look.cluster_per_hour:.4f}/h is {ratio:.2f}x the fresh plan's"
                f" ${look.fresh_per_hour:.4f}/h for {above:.0f}s",
            )
        )
    return out, {"pendingWithCapacitySeconds": longest, "costRatio": ratio, "costAboveBoundSeconds": above}


def pending_pods(seen: Observation) -> list[dict[str, Any]]:
    """Workload pods waiting for a node (unbound, not being deleted, not DaemonSet pods)."""
    return [p for p in seen.pods if is_waiting(p)]


def is_waiting(pod: dict[str, Any]) -> bool:
    """A workload pod waiting for a node: unbound, Pending, not being deleted, not a DaemonSet's."""
    return (
        not (pod.get("spec") or {}).get("nodeName")
        and not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        and not _daemon(pod)
    )


def is_workload(pod: dict[str, Any]) -> bool:
    """A workload pod that needs a place: waiting for a node, or Running and not being deleted."""
    return is_waiting(pod) or (
        (pod.get("status") or {}).get("phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
        and not _daemon(pod)
    )


def _daemon(pod: dict[str, Any]) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or [])


def running_pods(seen: Observation, selector: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [
        p
        for p in seen.pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
        and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in (selector or {}).items())
    ]


def _tags(instance: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or []}


def _instance_id(claim: dict[str, Any] | None) -> str | None:
    if not claim:
        return None
    status = claim.get("status") or {}
    return status.get("instanceID") or (status.get("providerID") or "").rsplit("/", 1)[-1] or None


def _provider_instance(node: dict[str, Any]) -> str | None:
    provider = (node.get("spec") or {}).get("providerID") or ""
    instance = provider.rsplit("/", 1)[-1]
    return instance if instance.startswith("i-") else None


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def wait_until(check_fn: Any, timeout: float, every: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check_fn():
            return True
        time.sleep(every)
    return bool(check_fn())


def names(objs: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


# --- the rig: a sandbox, simulated time and the real handlers, for a story told step by step --------


ROUND_INVOCATION_SECONDS = 9.5  # a scheduled invocation's time here: one or two passes, then it ends
# The provisioner's loop in a round: one pass, then it ends (its invocation keeps the deployed
# timeout, so a pass that starts late still has a real invocation's time to write).
ROUND_LOOP_SECONDS = 0.3
FUNCTION_ENV = {
    "POWERTOOLS_SERVICE_NAME": "nodewright",
    "POWERTOOLS_METRICS_NAMESPACE": "NodewrightSandbox",
    "POLL_INTERVAL_SECONDS": "1",
    "REBALANCE_MODE": "replace",
    "NODEWRIGHT_TRACING": "false",
}


class Rig:
    """A started sandbox whose functions run in this process on simulated time (see the module
    docstring): the fault matrix's scenarios and the chaos run drive it step by step."""

    def __init__(
        self,
        cluster_name: str = "reliability",
        *,
        region: str = "us-east-1",
        zones: tuple[str, ...] = ("us-east-1a", "us-east-1b", "us-east-1c"),
        log: Any = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.region = region
        self.zones = zones
        self.log = log  # a text stream for the functions' stdout (JSON logs, EMF); None: this stdout
        self.sandbox: Any = None
        self.admin: Any = None
        self.ec2: Any = None
        self.clock = SimulatedTime()
        self.crashes = Crashes()
        self.functions = Functions(self.crashes)
        self.tracker = Tracker()
        self.churn: Churn | None = None  # see watch_churn
        self.violations: list[Violation] = []
        self._saved_env: dict[str, str | None] = {}
        self._reclaim: dict[str, datetime] = {}
        self._announced: set[str] = set()  # instances whose state change was announced
        self._catalogs: dict[tuple[str, str], list[Any]] = {}  # see true_instance_types

    # lifecycle
    def start(self) -> Rig:
        import os

        from sandbox import Sandbox

        self.sandbox = Sandbox(
            cluster_name=self.cluster_name,
            region=self.region,
            zones=self.zones,
            boot_delay=0.2,
            init_delay=0.2,
        ).start()
        try:
            self.sandbox.apply_crds()
            env = {**self.sandbox.env(), **FUNCTION_ENV}
            for key, value in env.items():
                self._saved_env[key] = os.environ.get(key)
                os.environ[key] = value
            self.admin = self.sandbox.admin_cluster()
            self.ec2 = self.sandbox.aws_client("ec2")
            self.sandbox.warm_catalog()
            self.crashes.install()
            self.clock.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        import os

        from nodewright.cluster import reset_connections

        self.clock.stop()
        self.crashes.uninstall()
        if self.ec2 is not None:
            self.ec2.close()
            self.ec2 = None
        reset_connections()
        if self.sandbox is not None:
            self.sandbox.stop()
            self.sandbox = None
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def __enter__(self) -> Rig:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # the functions
    def invoke(self, name: str, event: dict[str, Any] | None = None, seconds: float = 12.0) -> Outcome:
        """One invocation of a real handler; its stdout goes to ``self.log`` when given. The
        container's shared API client is left unbounded afterwards (the user's side reuses it)."""
        import contextlib

        if event is None:
            event = events.scheduled_event(region=self.region, rule=name)
        redirect = contextlib.redirect_stdout(self.log) if self.log is not None else contextlib.nullcontext()
        # The provisioner's loop is shortened, not its invocation (sandbox.runtime.lambdas); set here, in the
        # caller's thread, so a killed invocation cannot leave the loop's budget changed.
        shortened = (
            provisioner_invocation(ROUND_LOOP_SECONDS)
            if name == "provisioner" and seconds == ROUND_INVOCATION_SECONDS
            else contextlib.nullcontext()
        )
        with redirect, shortened as context:
            outcome = self.functions.invoke(name, event, seconds, context)
        self.sandbox.warm_catalog()  # a warm container keeps its catalog; simulated time may age it
        return outcome

    # observing
    def observe(self) -> Observation:
        return observe(self.sandbox, self.admin, self.ec2)

    def check(self, *, settled: bool = False) -> list[Violation]:
        seen = self.observe()
        found = check(seen, self.tracker, settled=settled)
        if self.churn is not None:
            found += check_churn(seen, self.churn)
        self.violations.extend(found)
        return found

    def watch_churn(self) -> None:
        """Check :func:`check_churn` with every look from now on (until :meth:`reset`)."""
        self.churn = Churn()

    def look_at_capacity(self, seen: Observation) -> CapacityLook:
        """:func:`look_at_capacity` with the offerings as the sandbox's EC2 has them (an injected
        ICE is unavailable, whatever the product has learnt) and the nodes that will never join."""
        import contextlib

        live = {i["InstanceId"] for i in seen.instances}
        with self.sandbox.kubelet.registry.lock:
            never = set(self.sandbox.kubelet.registry.never_register) & live
        # The layer's code logs as the functions do (the catalog's price-estimate warning): to the
        # functions' log, never to this process's stdout (``chaos --json`` prints only JSON there).
        redirect = contextlib.redirect_stdout(self.log) if self.log is not None else contextlib.nullcontext()
        with redirect:
            return look_at_capacity(self.admin, self.true_instance_types, self.region, never)

    def true_instance_types(self, nodeclass: dict[str, Any]) -> list[Any]:
        """The product's catalog for ``nodeclass`` (``CloudProvider``) with each offering's
        availability as EC2 would answer now (``sandbox.aws.faults``)."""
        import os
        from dataclasses import replace

        from nodewright.cloud.provider import CloudProvider
        from nodewright.settings import Settings

        from sandbox.aws.faults import Offering

        meta = nodeclass.get("metadata") or {}
        key = (str(meta.get("name")), str(meta.get("generation")))
        if key not in self._catalogs:  # built once per NodeClass spec: 1,400 types take a second
            # the sandbox's own look, as the account's owner
            owner = Settings.from_env({**os.environ, **self.sandbox.owner_credentials()})
            self._catalogs[key] = CloudProvider.shared(owner).instance_types(nodeclass)
        out = self.sandbox.faults.unavailable_offerings()
        iced = {o.instance_type for o in out}

        def as_ec2_answers(name: str, offering: Any) -> Any:
            gone = Offering(name, offering.zone, offering.capacity_type) in out
            return replace(offering, available=not gone)

        return [
            replace(kind, offerings=tuple(as_ec2_answers(kind.name, o) for o in kind.offerings))
            if kind.name in iced or not all(o.available for o in kind.offerings)
            else kind
            for kind in self._catalogs[key]
        ]

    def pods(self, selector: dict[str, str] | None = None) -> tuple[int, int]:
        """(running, pending) workload pods matching ``selector``."""
        seen = self.observe()
        pending = [
            p
            for p in pending_pods(seen)
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in (selector or {}).items())
        ]
        return len(running_pods(seen, selector)), len(pending)

    # the story
    def round(self, *, advance: float = 20.0, disruption: bool = True) -> list[Outcome]:
        """A minute of the deployed system, compressed: the provisioner's and the disruption function's
        scheduled invocations, a moment for the simulators, then ``advance`` seconds of simulated time."""
        done = [self.invoke("provisioner", seconds=ROUND_INVOCATION_SECONDS)]
        if disruption:
            done.append(self.invoke("disruption", seconds=ROUND_INVOCATION_SECONDS))
        time.sleep(0.3)  # the simulated kubelet and scheduler act on what was written
        self.clock.advance(advance)
        self._spot_market()
        forget_terminated_instances(self.region, self.clock.now())
        return done

    def instance_state_changes(self) -> list[dict[str, Any]]:
        """The EC2 Instance State-change Notifications EventBridge would route to the interruption
        queue since the last call: one for each of the cluster's instances that began terminating or
        stopping, whoever caused it (an out-of-band termination, EC2 reclaiming a spot instance,
        the product itself)."""
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag:eks:eks-cluster-name", "Values": [self.cluster_name]},
                {"Name": "instance-state-name", "Values": list(GOING_STATES)},
            ]
        )
        out = []
        for page in pages:
            for instance in (i for r in page["Reservations"] for i in r["Instances"]):
                instance_id = instance["InstanceId"]
                if instance_id not in self._announced:
                    self._announced.add(instance_id)
                    out.append(events.state_change(instance_id, instance["State"]["Name"], self.region))
        return out

    def interrupt(self, node_name: str, kind: str = "spot") -> dict[str, Any]:
        """The event EC2 (or AWS Health) would send about ``node_name``'s instance; a spot warning
        also has EC2 take the instance back two minutes (of simulated time) later."""
        node = self.admin.get_node(node_name)
        instance_id = node["spec"]["providerID"].rsplit("/", 1)[-1]
        if kind == "spot":
            self._reclaim[instance_id] = self.clock.now() + timedelta(seconds=deployment.SPOT_NOTICE_SECONDS)
        return events.interruption_event(kind, instance_id, self.region)

    def _spot_market(self) -> None:
        due = [i for i, at in self._reclaim.items() if at <= self.clock.now()]
        for instance_id in due:
            del self._reclaim[instance_id]
            self.ec2.terminate_instances(InstanceIds=[instance_id])

    def converge(
        self, until: Any, *, rounds: int = 12, advance: float = 20.0, disruption: bool = True
    ) -> bool:
        """Rounds until ``until()`` holds (checked after each); the invariants are checked as it goes."""
        for _ in range(rounds):
            self.round(advance=advance, disruption=disruption)
            self.check()
            if until():
                return True
        return bool(until())

    def reset(self) -> None:
        """Between scenarios: every fault cleared, the workload, NodeClaims, nodes and instances gone."""
        from nodewright.cluster.resources import (
            EC2NODECLASSES,
            LEASES,
            NODECLAIMS,
            NODEPOOLS,
            NODES,
            PDBS,
            PODS,
        )
        from nodewright.provisioning import garbage

        from sandbox.scenarios.workloads import DEPLOYMENTS, REPLICASETS

        self.crashes.disarm()
        self.sandbox.faults.clear()
        self.sandbox.api_faults.clear()
        self.sandbox.kubelet.registry.fail_next_registrations = 0
        # The workload first, its pods force-deleted rather than waited for: a scenario's end is no
        # test of graceful termination, and waiting on the garbage collector cost seconds each time.
        for workload in (DEPLOYMENTS, REPLICASETS):
            for obj in self.admin.list(workload, namespace="default"):
                self.admin.delete(workload, obj["metadata"]["name"], namespace="default")
        for pdb in self.admin.list(PDBS):
            self.admin.delete(PDBS, pdb["metadata"]["name"], namespace=pdb["metadata"]["namespace"])

        def no_pods_left() -> bool:
            pods = self.admin.list(PODS, namespace="default")
            for pod in pods:
                self.admin.delete(PODS, pod["metadata"]["name"], namespace="default", grace_period_seconds=0)
            return not pods

        wait_until(no_pods_left, 20, every=0.2)
        for resource in (NODEPOOLS, NODECLAIMS, NODES):
            for obj in self.admin.list(resource):
                name = obj["metadata"]["name"]
                self.admin.patch(resource, name, {"metadata": {"finalizers": None}})
                self.admin.delete(resource, name)
        ids = [i["InstanceId"] for i in self.observe().instances]
        if ids:
            self.ec2.terminate_instances(InstanceIds=ids)
        registry = self.sandbox.kubelet.registry
        with registry.lock:  # the last scenario's silent instances are terminated: forget them
            registry.never_register.clear()
        for obj in self.admin.list(EC2NODECLASSES):
            self.admin.patch(EC2NODECLASSES, obj["metadata"]["name"], {"metadata": {"finalizers": None}})
            self.admin.delete(EC2NODECLASSES, obj["metadata"]["name"])
        for lease in self.admin.list(LEASES, namespace="nodewright"):
            self.admin.delete(LEASES, lease["metadata"]["name"], namespace="nodewright")
        for name in list(self.functions.containers):
            self.functions.discard(name)
        garbage.reset_gc_clock(templates=True)
        self.tracker = Tracker()
        self.churn = None
        self.violations = []
        self._reclaim.clear()
        self._catalogs.clear()
        self.clock.advance(600)  # leave the unavailable-offerings cache and idle markers behind
