"""The emulator's API Priority and Fairness (``sandbox.apiserver.flowcontrol``): classification by
identity into kube-apiserver v1.36's default FlowSchemas, seats per priority level, queues chosen by
shuffle sharding, and the 429 a rejected request gets. Waits are on the filter's own condition
(``wait_for``), never on sleeps; nothing is timed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from sandbox.apiserver import errors, rbac
from sandbox.apiserver.flowcontrol import (
    CONCURRENCY_ENV,
    CONCURRENCY_LIMIT,
    DEFAULT_FLOW_SCHEMAS,
    DEFAULT_PRIORITY_LEVELS,
    QUEUE_FULL,
    TIME_OUT,
    FlowControl,
    Rejected,
    Ticket,
    _DroppedRequests,
    concurrency_from_env,
    deal,
    flow_hash,
    queue_wait_limit,
)

FUNCTIONS = rbac.Identity(
    "arn:aws:sts::123456789012:assumed-role/nodewright-functions/{{SessionName}}",
    ("nodewright:autoscaler", rbac.AUTHENTICATED),
)
ADMIN = rbac.Identity("kubernetes-admin", (rbac.MASTERS, rbac.AUTHENTICATED))
KUBELET = rbac.Identity("system:node:ip-10-0-0-1", ("system:nodes", rbac.AUTHENTICATED))
WAIT = 30.0  # bounds a hang; asserts nothing


def attrs(identity: rbac.Identity, method: str = "GET", path: str = "/api/v1/nodes", **query: str) -> Any:
    return rbac.request_attributes(identity, method, path, query)


def level(name: str, **changes: Any) -> Any:
    return replace(next(lv for lv in DEFAULT_PRIORITY_LEVELS if lv.name == name), **changes)


def service_account(namespace: str, name: str) -> rbac.Identity:
    return rbac.Identity(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", rbac.AUTHENTICATED),
    )


class Waiter:
    """A request admitted on another thread (it may wait in a queue): its ticket or its rejection."""

    def __init__(
        self, control: FlowControl, request: Any, query: dict[str, str] | None = None, *, answer: bool = False
    ) -> None:
        """``answer``: the request is served at once once admitted (its seats freed), else it holds them."""
        self.ticket: Ticket | None = None
        self.rejected: Rejected | None = None
        self.answer = answer
        self.thread = threading.Thread(target=self._run, args=(control, request, query or {}), daemon=True)
        self.thread.start()

    def _run(self, control: FlowControl, request: Any, query: dict[str, str]) -> None:
        try:
            self.ticket = control.admit(request, query)
        except Rejected as exc:
            self.rejected = exc
            return
        if self.answer:
            self.ticket.release()

    def done(self) -> bool:
        self.thread.join(WAIT)
        return not self.thread.is_alive()


@pytest.fixture
def tickets() -> Iterator[list[Ticket]]:
    held: list[Ticket] = []
    yield held
    for ticket in held:
        ticket.release()


def test_the_default_seats_are_kube_apiservers_600_shared_by_nominal_shares() -> None:
    control = FlowControl(600)

    assert control.limits == {
        "system": 74,
        "node-high": 98,
        "leader-election": 25,
        "workload-high": 98,
        "workload-low": 245,
        "global-default": 49,
        "catch-all": 13,
    }


def test_the_environment_sets_the_concurrency_and_a_bad_value_is_named(monkeypatch: Any) -> None:
    monkeypatch.delenv(CONCURRENCY_ENV, raising=False)
    assert concurrency_from_env() == 600
    monkeypatch.setenv(CONCURRENCY_ENV, "12")
    assert FlowControl().concurrency == 12
    monkeypatch.setenv(CONCURRENCY_ENV, "lots")
    with pytest.raises(ValueError, match=r"NODEWRIGHT_SANDBOX_API_CONCURRENCY='lots'.*positive integer"):
        FlowControl()


@pytest.mark.parametrize(
    ("identity", "method", "path", "schema", "priority"),
    [
        (ADMIN, "GET", "/api/v1/pods", "exempt", "exempt"),
        (rbac.Identity("system:anonymous", (rbac.UNAUTHENTICATED,)), "GET", "/readyz", "probes", "exempt"),
        (FUNCTIONS, "GET", "/livez", "probes", "exempt"),
        (FUNCTIONS, "GET", "/api/v1/pods", "global-default", "global-default"),
        (FUNCTIONS, "PATCH", "/api/v1/nodes/n1", "global-default", "global-default"),
        (FUNCTIONS, "GET", "/version", "global-default", "global-default"),
        (KUBELET, "PATCH", "/api/v1/nodes/n1/status", "system-node-high", "node-high"),
        (
            KUBELET,
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1",
            "system-node-high",
            "node-high",
        ),
        (KUBELET, "GET", "/api/v1/pods", "system-nodes", "system"),
        (service_account("default", "app"), "GET", "/api/v1/pods", "service-accounts", "workload-low"),
        (
            service_account("kube-system", "coredns"),
            "GET",
            "/api/v1/pods",
            "kube-system-service-accounts",
            "workload-high",
        ),
        (
            service_account("kube-system", "coredns"),
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/coredns",
            "system-leader-election",
            "leader-election",
        ),
        (
            service_account("team", "operator"),
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/team/leases/x",
            "service-accounts",
            "workload-low",
        ),
        (
            rbac.Identity("system:kube-scheduler", (rbac.AUTHENTICATED,)),
            "POST",
            "/api/v1/namespaces/default/pods/p/binding",
            "kube-scheduler",
            "workload-high",
        ),
    ],
)
def test_requests_are_classified_by_identity_as_the_default_flowschemas_do(
    identity: rbac.Identity, method: str, path: str, schema: str, priority: str
) -> None:
    found, level_ = FlowControl(600).classify(attrs(identity, method, path))

    assert (found.name, level_.name) == (schema, priority)


def test_a_list_takes_a_seat_per_hundred_objects_of_its_resource_up_to_its_levels_max() -> None:
    stored = {("", "pods"): 250, ("", "nodes"): 5000}
    control = FlowControl(600, count=lambda key: stored.get(key, 0))

    assert control.width(attrs(FUNCTIONS, path="/api/v1/namespaces/default/pods"), {}) == 3
    assert control.max_seats("global-default") == 8  # min(ceil(0.15 * 49), 49 // 6)
    assert control.width(attrs(FUNCTIONS, path="/api/v1/nodes"), {}) == 8
    assert control.max_seats("workload-low") == 10  # min(37, 40), capped at 10
    assert control.max_seats("catch-all") == 10  # no queues: the estimator's cap
    assert control.width(attrs(FUNCTIONS, path="/api/v1/nodes/n1"), {}) == 1
    assert control.width(attrs(FUNCTIONS, path="/api/v1/configmaps"), {}) == 1  # none stored: the minimum
    watch = attrs(FUNCTIONS, path="/api/v1/pods", watch="true")
    assert control.width(watch, {"watch": "true"}) == 1
    assert control.width(watch, {"watch": "true", "sendInitialEvents": "true"}) == 3


def test_a_request_waits_in_a_queue_for_a_seat_and_runs_when_one_frees(tickets: list[Ticket]) -> None:
    control = FlowControl(5)  # global-default: ceil(5 * 20 / 245) = 1 seat
    assert control.limits["global-default"] == 1
    tickets.append(control.admit(attrs(FUNCTIONS), {}))
    assert control.stats("global-default").peak_waiting == 0, "served at once: it never waited"

    queued = Waiter(control, attrs(FUNCTIONS))
    assert control.wait_for(lambda: control.waiting("global-default") == 1, WAIT)
    assert queued.ticket is None

    tickets.pop().release()

    assert queued.done()
    assert queued.ticket is not None
    assert queued.rejected is None
    assert control.seats_in_use("global-default") == 1
    queued.ticket.release()
    assert control.seats_in_use("global-default") == 0
    assert control.stats("global-default").dispatched == 2
    assert control.stats("global-default").peak_waiting == 1


def test_exempt_and_other_levels_are_not_held_back_by_a_full_level(tickets: list[Ticket]) -> None:
    control = FlowControl(5)
    tickets.append(control.admit(attrs(FUNCTIONS), {}))

    tickets.append(control.admit(attrs(ADMIN), {}))  # exempt: no seat, no wait
    tickets.append(control.admit(attrs(KUBELET, "PATCH", "/api/v1/nodes/n1/status"), {}))  # node-high

    assert control.seats_in_use("node-high") == 1
    assert control.waiting("global-default") == 0


def test_a_full_queue_rejects_at_once_with_kube_apiservers_429(tickets: list[Ticket]) -> None:
    control = FlowControl(5, levels=[*DEFAULT_PRIORITY_LEVELS])
    control.configure(levels=[level("global-default", queues=1, hand_size=1, queue_length_limit=1)])
    tickets.append(control.admit(attrs(FUNCTIONS), {}))
    queued = Waiter(control, attrs(FUNCTIONS))
    assert control.wait_for(lambda: control.waiting("global-default") == 1, WAIT)

    with pytest.raises(Rejected) as rejected:
        control.admit(attrs(FUNCTIONS), {})

    assert rejected.value.reason == QUEUE_FULL
    error = rejected.value.error
    assert (error.code, error.plain, error.message) == (429, True, errors.FLOW_CONTROL_REJECTED)
    assert error.message == "Too many requests, please try again later.\n"
    assert error.headers["Retry-After"] == "1"
    assert error.headers["X-Content-Type-Options"] == "nosniff"
    schema, priority = control.classify(attrs(FUNCTIONS))
    assert error.headers["X-Kubernetes-PF-FlowSchema-UID"] == schema.uid
    assert error.headers["X-Kubernetes-PF-PriorityLevel-UID"] == priority.uid
    assert control.stats("global-default").rejected == {QUEUE_FULL: 1}
    assert control.stats("global-default").rejected_flows == {FUNCTIONS.user: 1}
    tickets.pop().release()
    assert queued.done()
    assert queued.ticket is not None
    queued.ticket.release()


def test_a_request_waiting_past_a_quarter_of_its_deadline_is_rejected(tickets: list[Ticket]) -> None:
    control = FlowControl(5)
    tickets.append(control.admit(attrs(FUNCTIONS), {}))

    late = Waiter(control, attrs(FUNCTIONS), {"timeout": "40ms"})  # may wait 10 ms

    assert late.done()
    assert late.ticket is None
    assert late.rejected is not None
    assert late.rejected.reason == TIME_OUT
    assert control.waiting("global-default") == 0, "a timed-out request leaves its queue"


def test_the_queuing_time_limit_is_a_quarter_of_the_deadline_at_most_a_minute() -> None:
    assert queue_wait_limit({}) == 15.0  # --request-timeout 60 s
    assert queue_wait_limit({"timeout": "10s"}) == 2.5
    assert queue_wait_limit({"timeout": "1m30s"}) == 15.0  # capped by --request-timeout
    assert queue_wait_limit({"timeout": "soon"}) == 15.0


def test_a_reject_level_turns_away_what_its_seats_cannot_hold(tickets: list[Ticket]) -> None:
    schemas = [s for s in DEFAULT_FLOW_SCHEMAS if s.name != "global-default"]
    control = FlowControl(5, schemas=schemas)  # the functions fall through to catch-all: 1 seat, no queue
    tickets.append(control.admit(attrs(FUNCTIONS), {}))

    with pytest.raises(Rejected) as rejected:
        control.admit(attrs(FUNCTIONS), {})

    assert rejected.value.reason == CONCURRENCY_LIMIT
    assert control.classify(attrs(FUNCTIONS))[0].name == "catch-all"


def test_a_request_wider_than_its_level_runs_alone(tickets: list[Ticket]) -> None:
    schemas = [s for s in DEFAULT_FLOW_SCHEMAS if s.name != "global-default"]
    control = FlowControl(5, schemas=schemas, count=lambda key: 1000)  # catch-all: 1 seat, lists of 10
    wide = control.admit(attrs(FUNCTIONS, path="/api/v1/pods"), {})
    assert control.seats_in_use("catch-all") == 10
    with pytest.raises(Rejected):
        control.admit(attrs(FUNCTIONS, path="/api/v1/nodes/n1"), {})

    wide.release()

    tickets.append(control.admit(attrs(FUNCTIONS, path="/api/v1/nodes/n1"), {}))
    assert control.seats_in_use("catch-all") == 1


def test_a_small_servers_lists_take_one_seat(tickets: list[Ticket]) -> None:
    control = FlowControl(5, count=lambda key: 1000)  # global-default: 1 seat, max seats 1
    tickets.append(control.admit(attrs(FUNCTIONS, path="/api/v1/pods"), {}))
    assert control.seats_in_use("global-default") == 1
    queued = Waiter(control, attrs(FUNCTIONS, path="/api/v1/nodes/n1"))
    assert control.wait_for(lambda: control.waiting("global-default") == 1, WAIT)

    tickets.pop().release()

    assert queued.done()
    assert queued.ticket is not None
    queued.ticket.release()


def test_a_request_that_queues_without_a_seat_wakes_whoever_waits_for_a_change(tickets: list[Ticket]) -> None:
    """``wait_for`` wakes on changes of state; a request that queued and found no seat is one. Without
    a notification the watcher slept through the request's time in the queue (a loaded CI run: the
    request queued just after the watcher's first look)."""
    control = FlowControl(5, count=lambda key: 1000)  # global-default: 1 seat
    tickets.append(control.admit(attrs(FUNCTIONS, path="/api/v1/pods"), {}))
    waiters: list[Waiter] = []

    def queued() -> bool:
        if not waiters:  # first look, under the lock: the request can only queue once it is let go
            waiters.append(Waiter(control, attrs(FUNCTIONS, path="/api/v1/nodes/n1")))
        return control.waiting("global-default") == 1

    # Unwoken, the watcher slept past the request's 15 s in the queue (rejected then) and saw 0.
    assert control.wait_for(queued, WAIT)
    tickets.pop().release()
    assert waiters[0].done()
    assert waiters[0].ticket is not None
    waiters[0].ticket.release()


def test_shuffle_sharding_deals_distinct_queues_from_the_flow() -> None:
    for flow in ("a", "b", "arn:aws:sts::1:assumed-role/x/y"):
        hand = deal(flow_hash("global-default", flow), 128, 6)
        assert len(set(hand)) == 6
        assert all(0 <= q < 128 for q in hand)
        assert hand == deal(flow_hash("global-default", flow), 128, 6)
    assert sorted(deal(7, 4, 4)) == [0, 1, 2, 3]


def test_a_flooding_flow_fills_only_its_own_queues(tickets: list[Ticket]) -> None:
    control = FlowControl(5)
    control.configure(levels=[level("global-default", queues=8, hand_size=2, queue_length_limit=1)])
    flooder = FUNCTIONS
    hand = set(deal(flow_hash("global-default", flooder.user), 8, 2))
    # a user whose hand shares no queue with the flooder's (found deterministically from the hash)
    other = next(
        rbac.Identity(f"user-{i}", (rbac.AUTHENTICATED,))
        for i in range(1000)
        if not hand & set(deal(flow_hash("global-default", f"user-{i}"), 8, 2))
    )
    tickets.append(control.admit(attrs(flooder), {}))
    waiting = [Waiter(control, attrs(flooder), answer=True) for _ in range(2)]
    assert control.wait_for(lambda: control.waiting("global-default") == 2, WAIT)

    with pytest.raises(Rejected):
        control.admit(attrs(flooder), {})  # both of its queues are full
    polite = Waiter(control, attrs(other), answer=True)
    assert control.wait_for(lambda: control.waiting("global-default") == 3, WAIT)
    assert polite.rejected is None, "another flow still gets a queue"

    tickets.pop().release()  # each waiter answers and frees its seat for the next

    assert all(w.done() and w.ticket is not None for w in [*waiting, polite])
    assert control.seats_in_use("global-default") == 0


def test_retry_after_doubles_under_sustained_drops_and_falls_back() -> None:
    tracker = _DroppedRequests()
    for _ in range(3):
        tracker.record(100)
    tracker.record(101)  # 3 drops in the last second: 3 >= 3 * 1
    assert tracker.retry_after == 2
    tracker.record(110)  # 1 drop in the 2 s before: fewer than 2
    assert tracker.retry_after == 1
    for second in range(200, 240):
        for _ in range(200):
            tracker.record(second)
    assert tracker.retry_after == 32  # the cap


def test_reconfiguring_a_busy_level_is_refused(tickets: list[Ticket]) -> None:
    control = FlowControl(5)
    tickets.append(control.admit(attrs(FUNCTIONS), {}))

    with pytest.raises(RuntimeError, match="global-default"):
        control.configure(concurrency=600)


def test_closing_turns_queued_requests_away_at_once(tickets: list[Ticket]) -> None:
    control = FlowControl(5)
    tickets.append(control.admit(attrs(FUNCTIONS), {}))
    queued = Waiter(control, attrs(FUNCTIONS))  # would wait 15 s
    assert control.wait_for(lambda: control.waiting("global-default") == 1, WAIT)

    control.close()

    assert queued.done()
    assert queued.rejected is not None
    assert control.waiting("global-default") == 0
