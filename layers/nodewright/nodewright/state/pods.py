"""Pod rules, each defined once and named, as Karpenter's ``pkg/utils/pod/scheduling.go`` names them.

Every flow asks these questions of a pod (a plain Kubernetes dict as the API server returns it); none
writes its own version. Each predicate is a composition of the small checks below it, listed in its
docstring. Where Nodewright departs from Karpenter, the docstring says so and why.

Which flow asks which question:

* provisioning: ``is_provisionable`` (a pending pod that needs capacity);
* emptiness and disruption cost (disruption): ``is_reschedulable`` (a pod that will need a place
  elsewhere when its node goes);
* the pods of nodes that are going, planned by provisioning, an interruption's replacement and
  disruption's simulations: ``is_currently_reschedulable`` (reschedulable, and free to leave now:
  no do-not-disrupt, no PodDisruptionBudget that never lets it go — ``state.pdbs``);
* termination: ``is_waiting_eviction`` (a pod the node must be rid of before it goes),
  ``is_evictable`` (one the drain may evict now), ``is_critical`` and ``is_daemon`` (its tier).

``karpenter.sh/do-not-disrupt`` is read once, by ``do_not_disrupt_until``: ``"true"`` protects the
pod for good, a Go duration (``"5m"``) until that long after the kubelet started the pod
(``status.startTime``, as Karpenter v1.12+ reads it), any other value not at all (Karpenter ignores
it with an ``InvalidDoNotDisruptAnnotation`` event: ``invalid_do_not_disrupt`` says why). Every
question that depends on it takes the moment it is asked at.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.api.durations import DurationError, parse_duration
from nodewright.api.tolerations import Toleration
from nodewright.cluster.objects import parse_time

if TYPE_CHECKING:
    from nodewright.state.pdbs import PdbLimits

Pod = Mapping[str, Any]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DEFAULT_GRACE_SECONDS = 30
# Karpenter stops waiting for a pod this long past its deletionTimestamp (deletion + grace period):
# its kubelet is gone or stuck, and the node must not wait for it for ever.
STUCK_TERMINATING = timedelta(minutes=1)
# ``do_not_disrupt_until`` for a protection that never ends ("true", or a duration on a pod whose
# start the kubelet has not reported yet: Karpenter fails safe there).
FOREVER = datetime.max.replace(tzinfo=UTC)


# --- the questions the flows ask ---------------------------------------------------------------------


def is_active(pod: Pod) -> bool:
    """Running or about to: not ``is_terminal``, not ``is_terminating``."""
    return not is_terminal(pod) and not is_terminating(pod)


def is_provisionable(pod: Pod) -> bool:
    """A pod that needs new capacity:

    * ``failed_to_schedule``: kube-scheduler marked it ``PodScheduled=False/Unschedulable``;
    * not ``is_bound`` to a node;
    * not ``is_preempting``: it has ``status.nominatedNodeName`` (it preempted pods there and will bind);
    * not ``is_daemon``, not ``is_mirror`` (their node is given);
    * ``is_active`` (Nodewright's addition: a finished or deleted pod needs nothing).
    """
    return (
        failed_to_schedule(pod)
        and not is_bound(pod)
        and not is_preempting(pod)
        and not is_daemon(pod)
        and not is_mirror(pod)
        and is_active(pod)
    )


def is_reschedulable(pod: Pod) -> bool:
    """A pod that will need a place elsewhere when its node goes:

    * ``is_active``, or a terminating StatefulSet pod (``is_owned_by_statefulset``: its successor is
      only created once it is gone, so it still needs the room);
    * not ``is_daemon`` (it goes with its node), not ``is_mirror`` (the kubelet owns it).

    A pod that tolerates the disrupted taint is reschedulable (it is not evicted, but it dies with
    the node and comes back elsewhere); a completed Job pod is not.
    """
    return (
        (is_active(pod) or (is_owned_by_statefulset(pod) and is_terminating(pod)))
        and not is_daemon(pod)
        and not is_mirror(pod)
    )


def is_currently_reschedulable(pod: Pod, pdbs: PdbLimits, now: datetime) -> bool:
    """A pod of a node that is going which will need a place now (Karpenter's
    ``IsCurrentlyReschedulable``):

    * ``is_reschedulable``;
    * ``is_disruptable`` at ``now`` (no active do-not-disrupt);
    * not ``fully_blocked`` by its PodDisruptionBudgets (``state.pdbs``: ``maxUnavailable: 0``,
      ``minAvailable: 100%``, or more than one PDB).

    The others may never leave a voluntarily drained node: capacity launched for them would stand
    empty until emptiness removed it, and be launched again the next minute.
    """
    return is_reschedulable(pod) and is_disruptable(pod, now) and pdbs.fully_blocked(pod) is None


def is_evictable(pod: Pod, now: datetime) -> bool:
    """A pod a voluntary drain may evict now (Karpenter's ``IsEvictable``):

    * ``is_active`` (a terminating pod is already leaving);
    * not ``tolerates_disrupted_taint`` (it chose to stay to the end);
    * not ``is_mirror`` (the API server cannot delete it);
    * not ``has_do_not_disrupt`` at ``now`` (it holds the drain until its protection ends or the
      deadline; an involuntary termination, where the instance goes anyway, evicts it regardless).

    DaemonSet pods are evictable: the drain takes them in a last tier (``termination.drain``).
    """
    return (
        is_active(pod)
        and not tolerates_disrupted_taint(pod)
        and not is_mirror(pod)
        and not has_do_not_disrupt(pod, now)
    )


def is_drainable(pod: Pod, now: datetime) -> bool:
    """A pod a drain waits for (Karpenter's ``IsDrainable``):

    * not ``tolerates_disrupted_taint``;
    * not ``is_stuck_terminating`` (terminating a minute past its deletionTimestamp);
    * not ``is_mirror``.

    DaemonSet pods are drainable, as in Karpenter: they are evicted last, so log and metrics agents
    outlive the workload, and the node goes only once they are gone. ``has_do_not_disrupt`` pods are
    drainable: the drain waits for them even though it does not evict them before the deadline.
    """
    return not tolerates_disrupted_taint(pod) and not is_stuck_terminating(pod, now) and not is_mirror(pod)


def is_waiting_eviction(pod: Pod, now: datetime) -> bool:
    """A pod the node must be rid of before it goes: not ``is_terminal`` and ``is_drainable``."""
    return not is_terminal(pod) and is_drainable(pod, now)


def is_disruptable(pod: Pod, now: datetime) -> bool:
    """A pod that does not veto a voluntary disruption at ``now`` (Karpenter's ``IsDisruptable``):
    not (``is_active`` and ``has_do_not_disrupt``)."""
    return not (is_active(pod) and has_do_not_disrupt(pod, now))


def as_pending(pod: Pod) -> dict[str, Any]:
    """The pod as the scheduler would see it once evicted: unbound and Unschedulable (what a
    simulation of its node going away plans for).

    A new pod dict with its own ``spec`` (without ``nodeName``) and ``status``; the parts it does not
    change (metadata, containers, ...) are the observed pod's own, read-only as every observed
    object is. Not a deep copy: a consolidation pass makes one for every pod of every candidate
    node (10,000 at 1,000 nodes), and copying each whole pod was a sixth of that pass's CPU."""
    spec = {key: value for key, value in (pod.get("spec") or {}).items() if key != "nodeName"}
    return {
        **pod,
        "spec": spec,
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def reschedulable_by_node(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    """The ``is_reschedulable`` pods bound to each node: what keeps a node from being empty."""
    by_node: dict[str, list[Pod]] = defaultdict(list)
    for pod in pods:
        bound = node_name(pod)
        if bound and is_reschedulable(pod):
            by_node[bound].append(pod)
    return dict(by_node)


# --- the small checks ---------------------------------------------------------------------------------


def failed_to_schedule(pod: Pod) -> bool:
    """kube-scheduler looked and gave up: condition ``PodScheduled`` False with reason ``Unschedulable``."""
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in _status(pod).get("conditions") or ()
    )


def is_bound(pod: Pod) -> bool:
    return bool(_spec(pod).get("nodeName"))


def is_preempting(pod: Pod) -> bool:
    """``status.nominatedNodeName`` set: it preempted lower-priority pods and waits for their room."""
    return bool(_status(pod).get("nominatedNodeName"))


def is_terminal(pod: Pod) -> bool:
    """Succeeded or Failed (a completed Job pod, for one): it holds no resources any more."""
    return _status(pod).get("phase") in TERMINAL_PHASES


def is_terminating(pod: Pod) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def is_stuck_terminating(pod: Pod, now: datetime) -> bool:
    """Terminating more than ``STUCK_TERMINATING`` past its deletionTimestamp (which already adds the
    pod's grace period)."""
    deleted = parse_time(_meta(pod).get("deletionTimestamp"))
    return deleted is not None and now - deleted > STUCK_TERMINATING


def is_owned_by(pod: Pod, kind: str, api_version: str) -> bool:
    """An ownerReference of this kind and apiVersion (a CRD's own ``DaemonSet`` kind is not apps/v1's)."""
    return any(
        ref.get("kind") == kind and ref.get("apiVersion", api_version) == api_version
        for ref in _meta(pod).get("ownerReferences") or ()
    )


def is_daemon(pod: Pod) -> bool:
    """Owned by an apps/v1 DaemonSet."""
    return is_owned_by(pod, "DaemonSet", "apps/v1")


def is_owned_by_statefulset(pod: Pod) -> bool:
    return is_owned_by(pod, "StatefulSet", "apps/v1")


def is_mirror(pod: Pod) -> bool:
    """A static pod's mirror: owned by its v1 Node, or annotated ``kubernetes.io/config.mirror``."""
    return is_owned_by(pod, "Node", "v1") or MIRROR_ANNOTATION in (_meta(pod).get("annotations") or {})


def has_do_not_disrupt(pod: Pod, now: datetime) -> bool:
    """``karpenter.sh/do-not-disrupt`` protects the pod at ``now`` (see ``do_not_disrupt_until``)."""
    until = do_not_disrupt_until(pod)
    return until is not None and now < until


def do_not_disrupt_until(pod: Pod) -> datetime | None:
    """When the pod's ``karpenter.sh/do-not-disrupt`` protection ends (Karpenter's
    ``IsDoNotDisruptActive``, v1.12+):

    * ``"true"``: never (``FOREVER``);
    * a positive Go duration (``"5m"``, ``"1h30m"``): that long after ``status.startTime`` (when the
      kubelet acknowledged the pod); ``FOREVER`` while the pod has no start time yet (fail-safe);
    * absent, or anything else (``"false"``, ``"soon"``, ``"0s"``, ``"-5m"``): None, no protection
      (``invalid_do_not_disrupt`` says why; Karpenter ignores such a value with a Warning event).
    """
    value = _annotations(pod).get(labels.DO_NOT_DISRUPT)
    if value is None:
        return None
    if value == "true":
        return FOREVER
    seconds = _do_not_disrupt_seconds(value)
    if seconds is None:
        return None
    started = parse_time(_status(pod).get("startTime"))
    return FOREVER if started is None else started + timedelta(seconds=seconds)


def invalid_do_not_disrupt(pod: Pod) -> str | None:
    """Why the pod's ``karpenter.sh/do-not-disrupt`` value is ignored, or None when it is absent,
    ``"true"`` or a positive duration."""
    value = _annotations(pod).get(labels.DO_NOT_DISRUPT)
    if value is None or value == "true" or _do_not_disrupt_seconds(value) is not None:
        return None
    return (
        f"Invalid {labels.DO_NOT_DISRUPT} annotation value {value!r}, ignoring annotation. "
        "Use 'true' or a duration like '5m', '1h'"
    )


def _do_not_disrupt_seconds(value: str) -> float | None:
    """A positive Go duration in seconds (Go's ``time.ParseDuration`` accepts a leading ``+``)."""
    try:
        seconds = parse_duration(value.removeprefix("+"), allow_never=False)
    except DurationError:
        return None
    return seconds if seconds and seconds > 0 else None


def tolerates_disrupted_taint(pod: Pod) -> bool:
    """A toleration of ``karpenter.sh/disrupted:NoSchedule`` (by key, or an empty key with Exists)."""
    return any(
        Toleration.from_k8s(t).matches(labels.DISRUPTED_TAINT_KEY, "", "NoSchedule")
        for t in _spec(pod).get("tolerations") or ()
    )


def is_critical(pod: Pod) -> bool:
    """``system-cluster-critical`` / ``system-node-critical``: drained after the others."""
    return _spec(pod).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


# --- facts about a pod ----------------------------------------------------------------------------------


def key(pod: Pod) -> str:
    """``namespace/name``: how every flow and the scheduling core name a pod."""
    meta = _meta(pod)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '?')}"


def node_name(pod: Pod) -> str | None:
    return _spec(pod).get("nodeName") or None


def priority(pod: Pod) -> Any:
    """``spec.priority`` as written (the priority admission plugin's integer; None when absent)."""
    return _spec(pod).get("priority")


def labels_of(pod: Pod) -> Mapping[str, str]:
    return _meta(pod).get("labels") or {}


def namespace_of(pod: Pod) -> str:
    """Its namespace (``default`` when absent, as the API server defaults it)."""
    return str(_meta(pod).get("namespace") or "default")


def claim_names(pod: Pod) -> list[str]:
    """The PersistentVolumeClaims (in its namespace) the pod mounts: each ``persistentVolumeClaim``
    volume's, and each generic ephemeral volume's, which the API server names ``<pod>-<volume>``."""
    names = []
    for volume in _spec(pod).get("volumes") or ():
        if (claim := volume.get("persistentVolumeClaim")) and claim.get("claimName"):
            names.append(str(claim["claimName"]))
        elif volume.get("ephemeral") is not None:
            names.append(f"{_meta(pod).get('name')}-{volume.get('name')}")
    return names


def is_ready(pod: Pod) -> bool:
    """Condition ``Ready`` True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in _status(pod).get("conditions") or ()
    )


def grace_seconds(pod: Pod) -> int:
    """``spec.terminationGracePeriodSeconds`` (the API server's default 30 when absent)."""
    value = _spec(pod).get("terminationGracePeriodSeconds")
    return int(value) if isinstance(value, int | float) else DEFAULT_GRACE_SECONDS


def pending_since(pod: Pod) -> datetime | None:
    """When the scheduler gave up on the pod (the Unschedulable transition), else its creation."""
    for cond in _status(pod).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            moment = parse_time(cond.get("lastTransitionTime"))
            if moment:
                return moment
    return parse_time(_meta(pod).get("creationTimestamp"))


def _meta(pod: Pod) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _annotations(pod: Pod) -> Mapping[str, str]:
    return _meta(pod).get("annotations") or {}


def _spec(pod: Pod) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def _status(pod: Pod) -> Mapping[str, Any]:
    return pod.get("status") or {}
