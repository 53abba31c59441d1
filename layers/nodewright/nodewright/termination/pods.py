"""Which pods a drain must move, and in which order (pure; Karpenter's terminator rules).

* Not drained: DaemonSet pods (they belong to the node and go with it), static/mirror pods (the
  kubelet owns them), finished pods (Succeeded/Failed), and pods that tolerate the
  ``karpenter.sh/disrupted:NoSchedule`` taint (they chose to stay to the end).
* Tiers: non-critical pods first, then critical ones (``system-cluster-critical`` /
  ``system-node-critical``), so cluster services keep running while the workload moves.
* ``karpenter.sh/do-not-disrupt: "true"``: not evicted by a voluntary termination before its
  deadline; when the node is going away regardless (an interruption) it is evicted like the rest.
"""

from __future__ import annotations

from typing import Any

from nodewright.api import labels

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
DEFAULT_GRACE_SECONDS = 30


def is_daemonset_pod(pod: dict[str, Any]) -> bool:
    refs = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("kind") == "DaemonSet" for ref in refs)


def is_mirror_pod(pod: dict[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    return MIRROR_ANNOTATION in (meta.get("annotations") or {}) or any(
        ref.get("kind") == "Node" for ref in meta.get("ownerReferences") or []
    )


def is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def is_critical(pod: dict[str, Any]) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def tolerates_disrupted_taint(pod: dict[str, Any]) -> bool:
    """A toleration matching ``karpenter.sh/disrupted:NoSchedule`` (by key, or an empty key with Exists)."""
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        key = toleration.get("key") or ""
        effect = toleration.get("effect") or ""
        operator = toleration.get("operator") or "Equal"
        if effect not in ("", "NoSchedule"):
            continue
        if key == "" and operator == "Exists":
            return True
        if key == labels.DISRUPTED_TAINT_KEY:
            return True
    return False


def has_do_not_disrupt(pod: dict[str, Any]) -> bool:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(labels.DO_NOT_DISRUPT) == "true"


def needs_drain(pod: dict[str, Any]) -> bool:
    """A pod the node must be emptied of before it goes."""
    return not (
        is_daemonset_pod(pod) or is_mirror_pod(pod) or is_terminal(pod) or tolerates_disrupted_taint(pod)
    )


def is_terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def grace_seconds(pod: dict[str, Any]) -> int:
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return int(value) if isinstance(value, int | float) else DEFAULT_GRACE_SECONDS


def drain_tiers(pods: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The pods to move, in eviction order: non-critical, then critical. Empty tiers are dropped."""
    movable = [p for p in pods if needs_drain(p)]
    tiers = [[p for p in movable if not is_critical(p)], [p for p in movable if is_critical(p)]]
    return [tier for tier in tiers if tier]


def pod_ref(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
