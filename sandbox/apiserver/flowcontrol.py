"""API Priority and Fairness (APF), as kube-apiserver v1.36 applies it with its default configuration.

kube-apiserver never runs a request the moment it arrives: after authentication and impersonation
(before authorization) the APF filter classifies it by the first matching **FlowSchema** (lowest
``matchingPrecedence``) into a **priority level**, and a flow (the schema's name plus its
distinguisher: the user for ``ByUser``, the namespace for ``ByNamespace``). Each limited level has a
number of **seats**; a request takes one or more seats while it executes. When the level's seats are
taken the request waits in one of the level's queues, chosen by shuffle sharding over the flow, and is
answered **429** when that queue is full or when it has waited longer than its queuing time limit.
Without this model the emulator served any load at once, kinder than every real API server.

The facts modelled (sources: k8s.io/apiserver ``pkg/apis/flowcontrol/bootstrap/default.go``,
``pkg/server/filters/priority-and-fairness.go``, ``pkg/util/flowcontrol``; the Kubernetes docs "API
Priority and Fairness"):

* **Seats.** The server's concurrency limit is ``--max-requests-inflight`` (400) plus
  ``--max-mutating-requests-inflight`` (200): 600. Each level's nominal limit is
  ``ceil(600 * shares / sum of shares)`` over the limited levels (exempt has 0 shares):
  global-default 49, workload-low 245, workload-high 98, node-high 98, system 74, leader-election 25,
  catch-all 13 (``DEFAULT_CONCURRENCY``; ``NODEWRIGHT_SANDBOX_API_CONCURRENCY`` or ``concurrency=``
  make it smaller for a test). Amazon EKS runs at least two API server instances with these flags'
  defaults behind its load balancer; a client's connections may spread over them, so one emulator
  with one server's seats is at least as strict as EKS.
* **Classification.** The default FlowSchemas, in precedence order: ``exempt`` (system:masters) and
  ``probes`` (health checks) are exempt from limits; kubelets (system:nodes) go to ``node-high`` and
  ``system``; kube-controller-manager, kube-scheduler and kube-system service accounts to
  ``workload-high`` (their leader election to ``leader-election``); any other service account to
  ``workload-low``; every other authenticated or anonymous user — the functions' IAM-mapped identity
  among them — to ``global-default``; ``catch-all`` (Reject: no queues) takes the rest.
* **Work estimates.** A request takes one seat, a LIST (and a watch asking for its initial events)
  ``ceil(objects of the resource / 100)`` seats (the list work estimator: lists are served from the
  watch cache, which scans every object of the resource), at least 1 and at most the level's max
  seats: ``max(1, min(ceil(15% of nominal), nominal / hand size))``, capped at 10 (8 for
  global-default at 600 seats, 1 at a test's 5).
* **Queues.** Queues, hand size and queue length limit per level as the defaults set them (e.g.
  global-default: 128 queues, hand 6, 50 per queue); the flow's hand is dealt from the SHA-256 of
  ``schema NUL distinguisher`` and the request joins the hand's queue with the fewest seats waiting or
  executing; a queue at its limit rejects at once.
* **Queuing time limit.** A quarter of the request's deadline (``?timeout=``, else
  ``--request-timeout`` 60 s), at most one minute: 15 s by default.
* **Rejection.** ``429`` with kube-apiserver's plain-text body ``Too many requests, please try again
  later.`` (``http.Error``: ``text/plain``, ``X-Content-Type-Options: nosniff``) and ``Retry-After``
  from the dropped-requests tracker: 1 s, doubled (up to 32) when a level dropped at least three times
  its current value in that many seconds, lowered by one when it dropped fewer.
* **Long-running requests.** A watch is admitted like any request and holds its seats while it
  initializes (here: until the emulator has built its initial events), then streams without a seat.
  exec, attach, port-forward, proxy and log requests bypass APF, as kube-apiserver's
  ``LongRunningFunc`` makes them do.
* **Headers.** Every classified response carries ``X-Kubernetes-PF-FlowSchema-UID`` and
  ``X-Kubernetes-PF-PriorityLevel-UID`` (stable UIDs of the default objects).

Simplified, and said so: dispatching among a level's queues is round-robin over the non-empty queues
(kube-apiserver's fair queuing orders by virtual finish time: the same order for equal-width requests);
seat **borrowing** between levels (``lendablePercent``, adjusted every 10 s from each level's seat
demand) is not modelled, so a level never exceeds its nominal limit here while other levels idle
(stricter than kube-apiserver under one-sided load, never kinder); a mutating request's extra seats
for notifying watchers (~5 ms) are not held. The flowcontrol.apiserver.k8s.io objects themselves are
not served.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from . import errors, rbac

# --max-requests-inflight 400 + --max-mutating-requests-inflight 200 (kube-apiserver's defaults).
DEFAULT_CONCURRENCY = 600
CONCURRENCY_ENV = "NODEWRIGHT_SANDBOX_API_CONCURRENCY"
REQUEST_TIMEOUT_SECONDS = 60.0  # --request-timeout
MAX_QUEUE_WAIT_SECONDS = 60.0  # the hard cap of getRequestWaitContext
OBJECTS_PER_SEAT = 100  # the list work estimator's DefaultWorkEstimatorConfig
MAX_SEATS = 10
MAX_SEATS_PERCENT = 0.15  # apf_controller.go priorityLevelMaxSeatsPercent
MAX_RETRY_AFTER = 32  # dropped_requests_tracker.go maxRetryAfter
# kube-apiserver's LongRunningFunc: these never reach the APF filter.
LONG_RUNNING_SUBRESOURCES = frozenset({"exec", "attach", "portforward", "proxy", "log"})

ALL = "*"

QUEUE_FULL = "queue-full"
TIME_OUT = "time-out"
CONCURRENCY_LIMIT = "concurrency-limit"


def _uid(kind: str, name: str) -> str:
    """A stable UID for a default object (kube-apiserver's are random per cluster: only stability matters)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"flowcontrol.apiserver.k8s.io/{kind}/{name}"))


@dataclass(frozen=True)
class PriorityLevel:
    """A PriorityLevelConfiguration: ``queues == 0`` is a Limited level with limitResponse Reject."""

    name: str
    shares: int = 0  # nominalConcurrencyShares
    queues: int = 0
    hand_size: int = 0
    queue_length_limit: int = 0
    exempt: bool = False

    @property
    def uid(self) -> str:
        return _uid("prioritylevelconfigurations", self.name)


@dataclass(frozen=True)
class ResourceRule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    namespaces: tuple[str, ...]
    cluster_scope: bool

    def matches(self, attrs: rbac.Attributes) -> bool:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        if not (_any(self.verbs, attrs.verb) and _any(self.api_groups, attrs.api_group)):
            return False
        if not _any(self.resources, resource):
            return False
        if not attrs.namespace:  # a cluster-scoped request
            return self.cluster_scope
        return _any(self.namespaces, attrs.namespace)


@dataclass(frozen=True)
class NonResourceRule:
    verbs: tuple[str, ...]
    urls: tuple[str, ...]

    def matches(self, attrs: rbac.Attributes) -> bool:
        if not _any(self.verbs, attrs.verb):
            return False
        return any(
            u in (ALL, attrs.path) or (u.endswith("/*") and attrs.path.startswith(u[:-1])) for u in self.urls
        )


@dataclass(frozen=True)
class Subjects:
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    service_accounts: tuple[tuple[str, str], ...] = ()  # (namespace, name or "*")

    def match(self, identity: rbac.Identity) -> bool:
        if any(u in (ALL, identity.user) for u in self.users):
            return True
        if any(g == ALL or g in identity.groups for g in self.groups):
            return True
        if identity.user.startswith(rbac.SERVICE_ACCOUNT_PREFIX):
            namespace, _, name = identity.user.removeprefix(rbac.SERVICE_ACCOUNT_PREFIX).partition(":")
            return any(ns == namespace and n in (ALL, name) for ns, n in self.service_accounts)
        return False


@dataclass(frozen=True)
class FlowSchema:
    name: str
    priority_level: str
    precedence: int
    distinguisher: str  # "ByUser", "ByNamespace" or "" (one flow)
    subjects: Subjects
    resource_rules: tuple[ResourceRule, ...] = ()
    non_resource_rules: tuple[NonResourceRule, ...] = ()

    @property
    def uid(self) -> str:
        return _uid("flowschemas", self.name)

    def matches(self, attrs: rbac.Attributes) -> bool:
        if not self.subjects.match(attrs.identity):
            return False
        rules: Iterable[ResourceRule | NonResourceRule] = (
            self.resource_rules if attrs.resource_request else self.non_resource_rules
        )
        return any(rule.matches(attrs) for rule in rules)

    def flow(self, attrs: rbac.Attributes) -> str:
        if self.distinguisher == "ByUser":
            return attrs.identity.user
        if self.distinguisher == "ByNamespace":
            return attrs.namespace
        return ""


def _any(allowed: tuple[str, ...], value: str) -> bool:
    return ALL in allowed or value in allowed


_EVERYTHING = (ResourceRule((ALL,), (ALL,), (ALL,), (ALL,), True),)
_EVERY_URL = (NonResourceRule((ALL,), (ALL,)),)
_LEADER_VERBS = ("get", "create", "update")
_KUBE_SYSTEM_SAS = (("kube-system", ALL),)
_KCM, _SCHEDULER = "system:kube-controller-manager", "system:kube-scheduler"


def _all(name: str, level: str, precedence: int, distinguisher: str, subjects: Subjects) -> FlowSchema:
    return FlowSchema(name, level, precedence, distinguisher, subjects, _EVERYTHING, _EVERY_URL)


# The mandatory and suggested configuration of kube-apiserver v1.36 (flowcontrol/v1).
DEFAULT_PRIORITY_LEVELS: tuple[PriorityLevel, ...] = (
    PriorityLevel("exempt", exempt=True),
    PriorityLevel("system", 30, 64, 6, 50),
    PriorityLevel("node-high", 40, 64, 6, 50),
    PriorityLevel("leader-election", 10, 16, 4, 50),
    PriorityLevel("workload-high", 40, 128, 6, 50),
    PriorityLevel("workload-low", 100, 128, 6, 50),
    PriorityLevel("global-default", 20, 128, 6, 50),
    PriorityLevel("catch-all", 5),  # Reject: no queuing
)
DEFAULT_FLOW_SCHEMAS: tuple[FlowSchema, ...] = (
    _all("exempt", "exempt", 1, "", Subjects(groups=(rbac.MASTERS,))),
    FlowSchema(
        "probes",
        "exempt",
        2,
        "",
        Subjects(groups=(rbac.UNAUTHENTICATED, rbac.AUTHENTICATED)),
        non_resource_rules=(NonResourceRule(("get",), ("/healthz", "/readyz", "/livez")),),
    ),
    FlowSchema(
        "system-leader-election",
        "leader-election",
        100,
        "ByUser",
        Subjects(users=(_KCM, _SCHEDULER), service_accounts=_KUBE_SYSTEM_SAS),
        (
            ResourceRule(_LEADER_VERBS, ("",), ("endpoints", "configmaps"), ("kube-system",), False),
            ResourceRule(_LEADER_VERBS, ("coordination.k8s.io",), ("leases",), (ALL,), False),
        ),
    ),
    FlowSchema(
        "endpoint-controller",
        "workload-high",
        150,
        "ByUser",
        Subjects(users=(_KCM,), service_accounts=(("kube-system", "endpoint-controller"),)),
        (ResourceRule(_LEADER_VERBS, ("",), ("endpoints",), (ALL,), False),),
    ),
    FlowSchema(
        "workload-leader-election",
        "leader-election",
        200,
        "ByUser",
        Subjects(service_accounts=_KUBE_SYSTEM_SAS),
        (
            ResourceRule(_LEADER_VERBS, ("",), ("endpoints", "configmaps"), (ALL,), False),
            ResourceRule(_LEADER_VERBS, ("coordination.k8s.io",), ("leases",), (ALL,), False),
        ),
    ),
    FlowSchema(
        "system-node-high",
        "node-high",
        400,
        "ByUser",
        Subjects(groups=(rbac.NODES_GROUP,)),
        (
            ResourceRule((ALL,), ("",), ("nodes", "nodes/status"), (ALL,), True),
            ResourceRule((ALL,), ("coordination.k8s.io",), ("leases",), (ALL,), False),
        ),
    ),
    _all("system-nodes", "system", 500, "ByUser", Subjects(groups=(rbac.NODES_GROUP,))),
    _all("kube-controller-manager", "workload-high", 800, "ByNamespace", Subjects(users=(_KCM,))),
    _all("kube-scheduler", "workload-high", 800, "ByNamespace", Subjects(users=(_SCHEDULER,))),
    _all(
        "kube-system-service-accounts",
        "workload-high",
        900,
        "ByNamespace",
        Subjects(service_accounts=_KUBE_SYSTEM_SAS),
    ),
    _all("service-accounts", "workload-low", 9000, "ByUser", Subjects(groups=("system:serviceaccounts",))),
    _all(
        "global-default",
        "global-default",
        9900,
        "ByUser",
        Subjects(groups=(rbac.UNAUTHENTICATED, rbac.AUTHENTICATED)),
    ),
    _all(
        "catch-all", "catch-all", 10000, "ByUser", Subjects(groups=(rbac.UNAUTHENTICATED, rbac.AUTHENTICATED))
    ),
)


def nominal_limits(concurrency: int, levels: Iterable[PriorityLevel]) -> dict[str, int]:
    """NominalCL(l) = ceil(ServerCL * NCS(l) / sum of NCS) for every limited level."""
    limited = [lv for lv in levels if not lv.exempt]
    total = sum(lv.shares for lv in limited)
    return {lv.name: math.ceil(concurrency * lv.shares / total) for lv in limited}


def concurrency_from_env() -> int:
    """``NODEWRIGHT_SANDBOX_API_CONCURRENCY`` when set (a positive integer), else ``DEFAULT_CONCURRENCY``."""
    raw = os.environ.get(CONCURRENCY_ENV, "").strip()
    if not raw:
        return DEFAULT_CONCURRENCY
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(
            f"{CONCURRENCY_ENV}={raw!r}: give the API server's total concurrency (seats) as a positive "
            f"integer; kube-apiserver's default is {DEFAULT_CONCURRENCY}"
        )
    return int(raw)


def deal(hash_value: int, deck_size: int, hand_size: int) -> list[int]:
    """Shuffle sharding: ``hand_size`` distinct queue indices out of ``deck_size`` from one hash
    (the mixed-radix dealing of k8s.io/apiserver's shufflesharding.Dealer)."""
    remainders = []
    for i in range(hand_size):
        hash_value, remainder = divmod(hash_value, deck_size - i)
        remainders.append(remainder)
    hand = []
    for i, remainder in enumerate(remainders):
        card = remainder
        for j in range(i, 0, -1):
            if card >= remainders[j - 1]:
                card += 1
        hand.append(card)
    return hand


def flow_hash(schema: str, distinguisher: str) -> int:
    digest = hashlib.sha256(schema.encode() + b"\x00" + distinguisher.encode()).digest()
    return int.from_bytes(digest[:8], "little")


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def queue_wait_limit(query: dict[str, str]) -> float:
    """A quarter of the request's deadline (``?timeout=`` as a Go duration, capped by
    --request-timeout; else --request-timeout), at most one minute."""
    deadline = REQUEST_TIMEOUT_SECONDS
    text = query.get("timeout", "")
    parts = _DURATION.findall(text)
    if text and parts and "".join(n + u for n, u in parts) == text:
        deadline = min(deadline, sum(float(n) * _UNIT_SECONDS[u] for n, u in parts))
    return min(deadline / 4, MAX_QUEUE_WAIT_SECONDS)


class _DroppedRequests:
    """dropped_requests_tracker.go for one level: the Retry-After its rejections carry."""

    def __init__(self) -> None:
        self.retry_after = 1
        self.history: list[tuple[int, int]] = []  # (unix second, drops), closed seconds only
        self.current_unix = 0
        self.current_count = 0
        self.updated_unix = 0

    def record(self, unix: int) -> None:
        if unix == self.current_unix:
            self.current_count += 1
            return
        self.history.append((self.current_unix, self.current_count))
        keep = min(2 * self.retry_after, MAX_RETRY_AFTER)
        self.history = [(t, n) for t, n in self.history if unix - t <= keep]
        self.current_unix, self.current_count = unix, 1
        dropped = sum(n for t, n in self.history if unix - t <= self.retry_after and t < unix)
        if unix - self.updated_unix >= self.retry_after and dropped >= 3 * self.retry_after:
            self.retry_after = min(self.retry_after * 2, MAX_RETRY_AFTER)
            self.updated_unix = unix
        elif dropped < self.retry_after and self.retry_after > 1:
            self.retry_after -= 1


@dataclass(eq=False)
class _Request:
    flow: str
    seats: int
    queue: int = -1
    dispatched: bool = False


@dataclass
class LevelStats:
    """What one priority level did: requests dispatched, rejected by reason and by flow (the
    distinguisher: the user for ByUser schemas), and the peaks."""

    dispatched: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    rejected_flows: Counter[str] = field(default_factory=Counter)
    peak_seats: int = 0
    peak_waiting: int = 0


class _Level:
    def __init__(self, spec: PriorityLevel, limit: int) -> None:
        self.spec = spec
        self.limit = limit
        self.seats_in_use = 0
        self.queues: list[deque[_Request]] = [deque() for _ in range(spec.queues)]
        self.queue_seats_in_use = [0] * spec.queues
        self.next_queue = 0
        self.waiting = 0
        self.dropped = _DroppedRequests()
        self.stats = LevelStats()

    def fits(self, seats: int) -> bool:
        if seats > self.limit:  # wider than the level: runs alone (canAccommodateSeatsLocked)
            return self.seats_in_use == 0
        return self.seats_in_use + seats <= self.limit


class Rejected(Exception):
    """A request APF answers 429 (``reason``: queue-full, time-out or concurrency-limit)."""

    def __init__(self, error: errors.ApiError, reason: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.reason = reason


class Ticket:
    """An admitted request: its response headers, and its seats until ``release``."""

    def __init__(
        self, control: FlowControl, level: _Level | None, request: _Request | None, headers: dict[str, str]
    ) -> None:
        self._control = control
        self._level = level
        self._request = request
        self.headers = headers

    def release(self) -> None:
        level, request, self._level, self._request = self._level, self._request, None, None
        if level is not None and request is not None:
            self._control._finish(level, request)


class FlowControl:
    """The APF filter of one API server (see the module docstring). Thread-safe.

    ``admit`` classifies a request and returns its ``Ticket`` once it holds its seats (waiting in a
    queue if it must), or raises ``Rejected``; the caller releases the ticket when the request is done.
    ``concurrency``: the server's total seats (``DEFAULT_CONCURRENCY``, or the environment's
    ``NODEWRIGHT_SANDBOX_API_CONCURRENCY``); ``clock``/``wall``: monotonic seconds for queue waits and
    Unix seconds for the Retry-After tracker (tests give their own).
    """

    def __init__(
        self,
        concurrency: int | None = None,
        *,
        levels: Iterable[PriorityLevel] = DEFAULT_PRIORITY_LEVELS,
        schemas: Iterable[FlowSchema] = DEFAULT_FLOW_SCHEMAS,
        count: Callable[[tuple[str, str]], int] = lambda key: 0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.schemas = sorted(schemas, key=lambda s: (s.precedence, s.name))
        self.count = count
        self.clock = clock
        self.wall = wall
        self._cond = threading.Condition()
        self._closing = False
        self.concurrency = 0
        self.specs: dict[str, PriorityLevel] = {}
        self._levels: dict[str, _Level] = {}
        self.configure(concurrency_from_env() if concurrency is None else concurrency, levels)

    def configure(
        self, concurrency: int | None = None, levels: Iterable[PriorityLevel] | None = None
    ) -> None:
        """Apply another server concurrency and/or PriorityLevelConfigurations (by name, replacing the
        default of that name), as kube-apiserver's config controller applies an edited object. Only
        while no request of a limited level executes or waits: a test reconfigures a started sandbox
        before its functions run."""
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency={concurrency}: the server needs at least one seat")
        with self._cond:
            busy = [n for n, lv in self._levels.items() if lv.seats_in_use or lv.waiting]
            if busy:
                raise RuntimeError(f"priority levels {busy} are serving requests: reconfigure when idle")
            self.concurrency = concurrency or self.concurrency
            self.specs = {**self.specs, **{lv.name: lv for lv in levels or ()}}
            unknown = {s.priority_level for s in self.schemas} - set(self.specs)
            if unknown:
                raise ValueError(
                    f"FlowSchemas name priority levels {sorted(unknown)} that are not configured"
                )
            limits = nominal_limits(self.concurrency, self.specs.values())
            self._levels = {name: _Level(spec, limits.get(name, 0)) for name, spec in self.specs.items()}

    def close(self) -> None:
        """The server is stopping: every queued request is turned away now, not at its time limit,
        so no request thread outlives ``ApiServer.stop``. Admission goes on (a restarted server)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: not any(lv.waiting for lv in self._levels.values()), 5.0)
            self._closing = False

    # ------------------------------------------------------------------ introspection
    @property
    def limits(self) -> dict[str, int]:
        """Each limited level's concurrency limit (seats)."""
        return {n: lv.limit for n, lv in self._levels.items() if not lv.spec.exempt}

    def stats(self, level: str) -> LevelStats:
        return self._levels[level].stats

    def seats_in_use(self, level: str) -> int:
        with self._cond:
            return self._levels[level].seats_in_use

    def waiting(self, level: str) -> int:
        with self._cond:
            return self._levels[level].waiting

    @property
    def rejected(self) -> int:
        """Every rejection so far, all levels."""
        with self._cond:
            return sum(sum(lv.stats.rejected.values()) for lv in self._levels.values())

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block until ``predicate()`` holds after some change of state (tests), or ``timeout`` passes."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    # ------------------------------------------------------------------ classification
    def classify(self, attrs: rbac.Attributes) -> tuple[FlowSchema, PriorityLevel]:
        for schema in self.schemas:
            if schema.matches(attrs):
                return schema, self.specs[schema.priority_level]
        raise AssertionError("the catch-all FlowSchema matches every authenticated or anonymous request")

    def max_seats(self, level: str) -> int:
        """The most seats one request of ``level`` may take: ``max(1, min(ceil(15% of its nominal
        limit), nominal / hand size))`` for a queuing level (apf_controller.go; 8 for global-default
        at 600), the work estimator's cap of 10 otherwise and above."""
        spec, nominal = self.specs[level], self._levels[level].limit
        if not spec.queues:
            return MAX_SEATS
        share = max(1, min(math.ceil(nominal * MAX_SEATS_PERCENT), nominal // spec.hand_size))
        return min(MAX_SEATS, share)

    def width(self, attrs: rbac.Attributes, query: dict[str, str], level: str = "global-default") -> int:
        """The seats a request of ``level`` occupies (the work estimator)."""
        listing = attrs.verb == "list" or (
            attrs.verb == "watch" and query.get("sendInitialEvents") in ("true", "1")
        )
        if not (attrs.resource_request and listing):
            return 1
        objects = self.count((attrs.api_group, attrs.resource))
        return max(1, min(self.max_seats(level), math.ceil(objects / OBJECTS_PER_SEAT)))

    @staticmethod
    def bypasses(attrs: rbac.Attributes) -> bool:
        """kube-apiserver's long-running requests other than watches never reach the APF filter."""
        return attrs.resource_request and (
            attrs.subresource in LONG_RUNNING_SUBRESOURCES or attrs.verb == "proxy"
        )

    # ------------------------------------------------------------------ admission
    def admit(self, attrs: rbac.Attributes, query: dict[str, str]) -> Ticket:
        if self.bypasses(attrs):
            return Ticket(self, None, None, {})
        schema, spec = self.classify(attrs)
        headers = {
            "X-Kubernetes-PF-FlowSchema-UID": schema.uid,
            "X-Kubernetes-PF-PriorityLevel-UID": spec.uid,
        }
        if spec.exempt:
            return Ticket(self, None, None, headers)
        level = self._levels[spec.name]
        request = _Request(schema.flow(attrs), self.width(attrs, query, spec.name))
        limit_seconds = queue_wait_limit(query)
        with self._cond:
            if not spec.queues:  # limitResponse Reject
                if not level.fits(request.seats):
                    raise self._reject(level, request, CONCURRENCY_LIMIT, headers)
                self._start(level, request)
                return Ticket(self, level, request, headers)
            request.queue = self._choose_queue(level, schema.name, request.flow)
            queue = level.queues[request.queue]
            if len(queue) >= spec.queue_length_limit:
                raise self._reject(level, request, QUEUE_FULL, headers)
            queue.append(request)
            level.waiting += 1
            self._cond.notify_all()  # a change of state (``wait_for``), even when no seat frees for it
            self._dispatch(level)
            level.stats.peak_waiting = max(level.stats.peak_waiting, level.waiting)  # those that wait
            deadline = self.clock() + limit_seconds
            while not request.dispatched:
                left = deadline - self.clock()
                if left <= 0 or self._closing:
                    queue.remove(request)
                    level.waiting -= 1
                    self._cond.notify_all()
                    raise self._reject(level, request, TIME_OUT, headers)
                self._cond.wait(left)
        return Ticket(self, level, request, headers)

    def _choose_queue(self, level: _Level, schema: str, flow: str) -> int:
        hand = deal(flow_hash(schema, flow), level.spec.queues, level.spec.hand_size)

        def load(i: int) -> int:
            return sum(r.seats for r in level.queues[i]) + level.queue_seats_in_use[i]

        return min(hand, key=load)  # min keeps the first dealt of equals

    def _dispatch(self, level: _Level) -> None:
        """Start waiting requests while their seats fit, visiting the non-empty queues in turn."""
        while level.waiting:
            count = len(level.queues)
            index = next(
                (level.next_queue + k) % count
                for k in range(count)
                if level.queues[(level.next_queue + k) % count]
            )
            head = level.queues[index][0]
            if not level.fits(head.seats):
                return
            level.queues[index].popleft()
            level.waiting -= 1
            level.next_queue = (index + 1) % count
            self._start(level, head)
        self._cond.notify_all()

    def _start(self, level: _Level, request: _Request) -> None:
        request.dispatched = True
        level.seats_in_use += request.seats
        if request.queue >= 0:
            level.queue_seats_in_use[request.queue] += request.seats
        level.stats.dispatched += 1
        level.stats.peak_seats = max(level.stats.peak_seats, level.seats_in_use)
        self._cond.notify_all()

    def _finish(self, level: _Level, request: _Request) -> None:
        with self._cond:
            level.seats_in_use -= request.seats
            if request.queue >= 0:
                level.queue_seats_in_use[request.queue] -= request.seats
            self._dispatch(level)
            self._cond.notify_all()

    def _reject(self, level: _Level, request: _Request, reason: str, headers: dict[str, str]) -> Rejected:
        level.stats.rejected[reason] += 1
        level.stats.rejected_flows[request.flow] += 1
        level.dropped.record(int(self.wall()))
        self._cond.notify_all()
        return Rejected(errors.rejected_by_flow_control(level.dropped.retry_after, headers), reason)
