"""The simulated scheduler makes kube-scheduler's writes with kube-scheduler's synchronicity: the
``PodScheduled=False`` status write in its one loop (an admission webhook on it holds the loop), the
``FailedScheduling`` Event through its recorder (a webhook on Events never holds the loop), the
Event in events.k8s.io/v1 with kube-scheduler's shape and series.

No timings: the webhooks here answer only when the test lets them (``Gate``), so who waits for
whom is observed directly."""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import waiting
from kubernetes import config

from sandbox.apiserver import ApiServer
from sandbox.apiserver.testing import JsonWebhookServer
from sandbox.simulators.controllers import ServiceAccounts
from sandbox.simulators.kube import Kube, core, group
from sandbox.simulators.scheduler import Scheduler

pytestmark = pytest.mark.timeout(120)
CONFIGURATION = "gate"


class Gate(JsonWebhookServer):
    """An admission webhook that answers ``allowed`` only when let through: one call per
    ``let_one``, or every call once ``open``."""

    def __init__(self) -> None:
        self.held = 0
        self.most_held = 0
        self.arrived = 0
        self._lock = threading.Lock()
        self._one = threading.Semaphore(0)
        self._open = threading.Event()
        super().__init__(self._answer, "/gate")

    def _answer(self, review: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.arrived += 1
            self.held += 1
            self.most_held = max(self.most_held, self.held)
        while not self._open.is_set() and not self._one.acquire(timeout=0.05):
            pass
        with self._lock:
            self.held -= 1
        uid = review["request"]["uid"]
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True},
        }

    def let_one(self) -> None:
        self._one.release()

    def open(self) -> None:
        self._open.set()


# The suite's one wait (tests/waiting.py), with this module's default timeout and poll interval.
wait_for = functools.partial(waiting.wait_for, timeout=30, every=0.02)


@pytest.fixture
def kube(tmp_path: Any) -> Iterator[Kube]:
    with ApiServer() as server:
        kube = Kube(config.new_client_from_config(str(server.write_kubeconfig(tmp_path / "config"))))
        with ServiceAccounts(kube):  # kube-controller-manager's: without them no pod is admitted
            yield kube


@pytest.fixture
def scheduler(kube: Kube) -> Iterator[Scheduler]:
    loop = Scheduler(kube)
    loop.start()
    yield loop
    loop.stop()


def gate_on(kube: Kube, gate: Gate, rules: list[dict[str, Any]]) -> None:
    kube.create(
        group("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"),
        {
            "metadata": {"name": CONFIGURATION},
            "webhooks": [
                {
                    "name": "gate.example.com",
                    "clientConfig": {"url": gate.url, "caBundle": gate.ca_bundle},
                    "rules": rules,
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                    "timeoutSeconds": 30,
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    )


def rule(group_name: str, resource: str, operation: str) -> dict[str, Any]:
    return {
        "apiGroups": [group_name],
        "apiVersions": ["v1"],
        "operations": [operation],
        "resources": [resource],
    }


def pending_pods(kube: Kube, count: int) -> list[str]:
    names = [f"p{i}-{uuid.uuid4().hex[:4]}" for i in range(count)]
    for name in names:
        kube.create(
            core("pods", "default"),
            {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "pause"}]}},
        )
    return names


def marked(kube: Kube) -> set[str]:
    """Pods whose status says PodScheduled=False/Unschedulable."""
    pods, _ = kube.list(core("pods", "default"))
    return {
        p["metadata"]["name"]
        for p in pods
        if any(
            c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    }


def failed_scheduling(kube: Kube, pod: str) -> list[dict[str, Any]]:
    events, _ = kube.list(group("events.k8s.io/v1", "events", "default"))
    return [e for e in events if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == pod]


def test_a_pod_that_fits_nowhere_gets_kube_schedulers_event_and_one_status_write(
    kube: Kube, scheduler: Scheduler
) -> None:
    (pod,) = pending_pods(kube, 1)

    # The second attempt after the status write regards the pod's new resourceVersion (a second
    # Event); the third is isomorphic to it: a series of two.
    events = wait_for(
        "a series",
        lambda: [e for e in failed_scheduling(kube, pod) if (e.get("series") or {}).get("count") == 2],
    )
    all_events = failed_scheduling(kube, pod)
    assert len(all_events) == 2
    event = events[0]
    assert event["reportingController"] == "default-scheduler"
    assert event["reportingInstance"].startswith("default-scheduler-")
    assert event["action"] == "Scheduling"
    assert event["type"] == "Warning"
    assert event["note"] == "no nodes available to schedule pods"
    assert event["regarding"]["kind"] == "Pod"
    assert event["regarding"]["apiVersion"] == "v1"
    assert event["regarding"]["namespace"] == "default"
    assert event["eventTime"]
    assert "deprecatedCount" not in event
    core_view = kube.get(core("events", "default", event["metadata"]["name"]))
    assert core_view["reportingComponent"] == "default-scheduler"
    assert core_view["source"] == {}
    assert core_view["involvedObject"]["name"] == pod
    assert len(scheduler.marked_unschedulable) == 1  # written once: later attempts changed nothing
    (condition,) = kube.get(core("pods", "default", pod))["status"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")


def test_the_scheduling_loop_never_waits_for_an_event_write(kube: Kube, scheduler: Scheduler) -> None:
    """kube-scheduler records Events through its broadcaster: a webhook on Event creates that does
    not answer holds the Events, never the next pod. (The old simulator wrote its Events in the
    loop: the first pod's Event held every later pod.)"""
    gate = Gate()
    try:
        gate_on(kube, gate, [rule("events.k8s.io", "events", "CREATE"), rule("", "events", "CREATE")])
        pods = pending_pods(kube, 5)

        wait_for("every pod marked unschedulable", lambda: marked(kube) >= set(pods), timeout=20)

        # ... while not one Event got past the webhook, which has answered nothing yet.
        assert not any(failed_scheduling(kube, p) for p in pods)
        wait_for("the Events to wait at their webhook", lambda: gate.held >= 1)
    finally:
        gate.open()
        gate.close()
    wait_for("the events written once answered", lambda: all(failed_scheduling(kube, p) for p in pods))


def test_the_status_write_waits_for_its_webhook_in_the_loop(kube: Kube, scheduler: Scheduler) -> None:
    """kube-scheduler (v1.30-v1.35 by default) writes PodScheduled=False in its scheduling loop: a
    webhook on pods/status holds the next pod until it answers, one call at a time."""
    gate = Gate()
    try:
        gate_on(kube, gate, [rule("", "pods/status", "UPDATE")])
        pods = pending_pods(kube, 3)
        for done in range(len(pods)):
            wait_for(f"status write {done + 1} at the webhook", lambda: gate.arrived == done + 1)  # noqa: B023
            assert len(marked(kube)) == done, "no other pod is marked while one write is held"
            gate.let_one()
        wait_for("every pod marked", lambda: marked(kube) >= set(pods))
        assert gate.most_held == 1
    finally:
        gate.open()
        gate.close()
