"""The pod rules every flow shares (``nodewright.state.pods``), one table per kind of pod.

Each row is a pod as the API server returns it and what each predicate answers for it; the
expectations follow Karpenter's ``pkg/utils/pod/scheduling.go`` (v1.12+, with the do-not-disrupt
grace period) except where ``state.pods`` documents a departure.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodewright.state import pods

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    *,
    owner: tuple[str, str] | None = ("ReplicaSet", "apps/v1"),
    node: str | None = "node-a",
    phase: str = "Running",
    conditions: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    deleted: datetime | None = None,
    nominated: str | None = None,
    priority_class: str | None = None,
    started: datetime | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "p", "namespace": "shop", "annotations": annotations or {}}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": owner[1], "kind": owner[0], "name": "o", "uid": "u"}]
    if deleted:
        metadata["deletionTimestamp"] = _time(deleted)
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    if tolerations:
        spec["tolerations"] = tolerations
    if priority_class:
        spec["priorityClassName"] = priority_class
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if nominated:
        status["nominatedNodeName"] = nominated
    if started:
        status["startTime"] = _time(started)
    return {"metadata": metadata, "spec": spec, "status": status}


def pending(**kwargs: Any) -> dict[str, Any]:
    return pod(node=None, phase="Pending", conditions=[UNSCHEDULABLE], **kwargs)


DISRUPTED = {"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}
EVERYTHING = {"operator": "Exists"}

# name: (pod, provisionable, reschedulable, evictable, waiting eviction, disruptable)
BOUND_PODS: dict[str, tuple[dict[str, Any], bool, bool, bool, bool, bool]] = {
    "running ReplicaSet pod": (pod(), False, True, True, True, True),
    # Drained, in a last tier, as Karpenter's terminator drains them (it waits for them too).
    "DaemonSet pod": (pod(owner=("DaemonSet", "apps/v1")), False, False, True, True, True),
    "a CRD's own DaemonSet kind": (pod(owner=("DaemonSet", "example.com/v1")), False, True, True, True, True),
    "mirror pod (owned by its Node)": (pod(owner=("Node", "v1")), False, False, False, False, True),
    "mirror pod (annotation)": (
        pod(owner=None, annotations={"kubernetes.io/config.mirror": "abc"}),
        False,
        False,
        False,
        False,
        True,
    ),
    "tolerates the disrupted taint": (pod(tolerations=[DISRUPTED]), False, True, False, False, True),
    "tolerates every taint": (pod(tolerations=[EVERYTHING]), False, True, False, False, True),
    "tolerates another NoSchedule key": (
        pod(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        False,
        True,
        True,
        True,
        True,
    ),
    "tolerates the disrupted key only for NoExecute": (
        pod(tolerations=[{**DISRUPTED, "effect": "NoExecute"}]),
        False,
        True,
        True,
        True,
        True,
    ),
    "terminating": (pod(deleted=NOW - timedelta(seconds=10)), False, False, False, True, True),
    "terminating StatefulSet pod": (
        pod(owner=("StatefulSet", "apps/v1"), deleted=NOW - timedelta(seconds=10)),
        False,
        True,
        False,
        True,
        True,
    ),
    "stuck terminating (2 min past its deletionTimestamp)": (
        pod(deleted=NOW - timedelta(minutes=2)),
        False,
        False,
        False,
        False,
        True,
    ),
    "completed Job pod": (
        pod(owner=("Job", "batch/v1"), phase="Succeeded"),
        False,
        False,
        False,
        False,
        True,
    ),
    "failed pod": (pod(phase="Failed"), False, False, False, False, True),
    "do-not-disrupt": (
        pod(annotations={"karpenter.sh/do-not-disrupt": "true"}),
        False,
        True,
        False,
        True,
        False,
    ),
    "do-not-disrupt, completed": (
        pod(annotations={"karpenter.sh/do-not-disrupt": "true"}, phase="Succeeded"),
        False,
        False,
        False,
        False,
        True,
    ),
    "do-not-disrupt other than true": (
        pod(annotations={"karpenter.sh/do-not-disrupt": "false"}),
        False,
        True,
        True,
        True,
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(BOUND_PODS))
def test_bound_pods(case: str) -> None:
    subject, provisionable, reschedulable, evictable, waiting, disruptable = BOUND_PODS[case]
    assert pods.is_provisionable(subject) is provisionable
    assert pods.is_reschedulable(subject) is reschedulable
    assert pods.is_evictable(subject, NOW) is evictable
    assert pods.is_waiting_eviction(subject, NOW) is waiting
    assert pods.is_disruptable(subject, NOW) is disruptable


PENDING_PODS: dict[str, tuple[dict[str, Any], bool]] = {
    "marked Unschedulable by the scheduler": (pending(), True),
    "not looked at by the scheduler yet": (pod(node=None, phase="Pending"), False),
    "scheduled (PodScheduled True)": (
        pod(node=None, phase="Pending", conditions=[{**UNSCHEDULABLE, "status": "True"}]),
        False,
    ),
    "bound already": (pod(phase="Pending", conditions=[UNSCHEDULABLE]), False),
    "nominated to a node (it preempted pods there)": (pending(nominated="node-b"), False),
    "DaemonSet pod": (pending(owner=("DaemonSet", "apps/v1")), False),
    "mirror pod": (pending(owner=("Node", "v1")), False),
    "being deleted": (pending(deleted=NOW), False),
    "a completed Job pod that once was unschedulable": (
        pod(owner=("Job", "batch/v1"), node=None, phase="Succeeded", conditions=[UNSCHEDULABLE]),
        False,
    ),
    "do-not-disrupt does not matter to provisioning": (
        pending(annotations={"karpenter.sh/do-not-disrupt": "true"}),
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(PENDING_PODS))
def test_pending_pods(case: str) -> None:
    subject, provisionable = PENDING_PODS[case]
    assert pods.is_provisionable(subject) is provisionable


def test_reschedulable_pods_are_grouped_by_the_node_they_are_bound_to() -> None:
    web, agent, done = pod(), pod(owner=("DaemonSet", "apps/v1")), pod(phase="Succeeded")
    elsewhere = pod(node="node-b")
    assert pods.reschedulable_by_node([web, agent, done, elsewhere, pending()]) == {
        "node-a": [web],
        "node-b": [elsewhere],
    }


def test_facts_about_a_pod() -> None:
    subject = pod(priority_class="system-node-critical")
    assert pods.key(subject) == "shop/p"
    assert pods.key({"metadata": {"name": "x"}}) == "default/x"
    assert pods.is_critical(subject)
    assert not pods.is_critical(pod())
    assert pods.grace_seconds(subject) == 30
    assert pods.grace_seconds({"spec": {"terminationGracePeriodSeconds": 5}}) == 5
    since = NOW - timedelta(seconds=42)
    marked = pending()
    marked["status"]["conditions"] = [{**UNSCHEDULABLE, "lastTransitionTime": _time(since)}]
    assert pods.pending_since(marked) == since


# --- karpenter.sh/do-not-disrupt with a duration (Karpenter v1.12+) ---------------------------------

DND = "karpenter.sh/do-not-disrupt"


def protected(value: str, started: datetime | None) -> dict[str, Any]:
    return pod(annotations={DND: value}, started=started)


@pytest.mark.parametrize(
    ("value", "started", "until"),
    [
        ("5m", NOW - timedelta(minutes=2), NOW + timedelta(minutes=3)),
        ("1h30m", NOW, NOW + timedelta(minutes=90)),
        ("+20s", NOW - timedelta(seconds=5), NOW + timedelta(seconds=15)),
        ("5m", NOW - timedelta(minutes=6), NOW - timedelta(minutes=1)),
    ],
)
def test_a_duration_protects_the_pod_until_that_long_after_the_kubelet_started_it(
    value: str, started: datetime, until: datetime
) -> None:
    subject = protected(value, started)
    assert pods.do_not_disrupt_until(subject) == until
    still = until > NOW
    assert pods.has_do_not_disrupt(subject, NOW) is still
    assert pods.is_disruptable(subject, NOW) is not still
    assert pods.is_evictable(subject, NOW) is not still
    assert pods.is_disruptable(subject, until), "free the moment the duration has passed"
    assert pods.invalid_do_not_disrupt(subject) is None


def test_a_duration_on_a_pod_the_kubelet_has_not_started_protects_it_until_it_starts() -> None:
    subject = protected("5m", None)
    assert pods.do_not_disrupt_until(subject) == pods.FOREVER
    assert not pods.is_disruptable(subject, NOW + timedelta(days=365))


def test_true_protects_for_good() -> None:
    subject = protected("true", NOW - timedelta(days=30))
    assert pods.do_not_disrupt_until(subject) == pods.FOREVER
    assert not pods.is_evictable(subject, NOW + timedelta(days=365))


@pytest.mark.parametrize("value", ["false", "soon", "5", "0s", "-5m", "Never", "", "5 m", "TRUE"])
def test_a_value_that_is_neither_true_nor_a_positive_duration_is_ignored_and_said_so(value: str) -> None:
    subject = protected(value, NOW - timedelta(seconds=1))
    assert pods.do_not_disrupt_until(subject) is None
    assert pods.is_disruptable(subject, NOW)
    assert pods.is_evictable(subject, NOW)
    assert pods.invalid_do_not_disrupt(subject) == (
        f"Invalid karpenter.sh/do-not-disrupt annotation value {value!r}, ignoring annotation. "
        "Use 'true' or a duration like '5m', '1h'"
    )


def test_no_annotation_is_neither_protected_nor_invalid() -> None:
    assert pods.do_not_disrupt_until(pod()) is None
    assert pods.invalid_do_not_disrupt(pod()) is None
