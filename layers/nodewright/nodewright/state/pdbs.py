"""PodDisruptionBudgets as the Eviction API and Karpenter read them: the one place every flow asks.

kube-apiserver's eviction subresource (``pkg/registry/core/pod/storage/eviction.go``) is what a drain
meets; Karpenter's ``pkg/utils/pdb`` predicts it. The rules, each written once here:

* **which PDBs cover a pod**: those of its namespace whose selector matches its labels (a missing
  selector matches nothing, ``{}`` every pod of the namespace, as policy/v1 says);
* **one PDB only**: the API server refuses to evict a pod covered by more than one (HTTP 500), so
  such a pod can never be evicted, whatever the budgets allow;
* **no status yet allows nothing**: until the disruption controller has written the status for the
  PDB's current spec (``observedGeneration``), it allows no eviction (``disruptionsAllowed`` read as
  0; the API server answers 429 "still being processed" meanwhile);
* **unhealthy pods**: under ``unhealthyPodEvictionPolicy: AlwaysAllow`` a pod that is not Ready may
  go whatever the budget says (the API server's test, ``IsPodReady``);
* only a pod a drain would evict is held by a PDB (``state.pods.is_evictable``, at the moment the
  limits are read for): one the drain leaves alone (do-not-disrupt, tolerating the disrupted taint,
  a mirror pod, terminating) is not.

Two questions are asked of them:

* ``eviction_blocker`` (Karpenter's ``CanEvictPods``): would the Eviction API refuse this pod now?
  A graceful disruption (consolidation, drift) leaves such a node alone.
* ``fully_blocked`` (Karpenter's ``IsFullyBlocked``): can the pod never be evicted as its PDBs are
  written (``maxUnavailable: 0`` or ``0%``, ``minAvailable: 100%``, or more than one PDB)? Capacity
  for it would never be used: ``state.pods.is_currently_reschedulable`` asks this for the pods of
  nodes that are going.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nodewright.state.pods import is_evictable, is_ready
from nodewright.state.pods import key as pod_key
from nodewright.state.pods import labels_of as pod_labels
from nodewright.state.pods import namespace_of as pod_namespace

if TYPE_CHECKING:
    from nodewright.scheduling.model import LabelSelector

Obj = Mapping[str, Any]


class UnreadablePdb(ValueError):
    """A PodDisruptionBudget whose selector cannot be read (only a manifest that never met an API
    server's validation can be one); the message names the field."""


@dataclass(frozen=True)
class Budget:
    """One PodDisruptionBudget, as the rules above read it."""

    namespace: str
    name: str
    selector: LabelSelector
    disruptions_allowed: int  # 0 when the status has not been written
    computed: bool  # the disruption controller has written the status for this generation
    fully_blocking: bool  # maxUnavailable 0 / 0%, or minAvailable 100%
    always_allow_unhealthy: bool  # unhealthyPodEvictionPolicy: AlwaysAllow

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def budget_of(pdb: Obj) -> Budget:
    """One PDB read; ``UnreadablePdb`` when its selector is not a label selector."""
    from nodewright.scheduling.model import label_selector_from_k8s

    meta = pdb.get("metadata") or {}
    spec = pdb.get("spec") or {}
    status = pdb.get("status") or {}
    try:
        selector = label_selector_from_k8s(spec.get("selector"))
        hash(selector)  # a list or an object where a string belongs cannot be matched
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise UnreadablePdb(f"spec.selector: not a label selector ({type(exc).__name__}: {exc})") from exc
    allowed = status.get("disruptionsAllowed")
    # The API server answers 429 until the status is written for the current spec (observedGeneration).
    observed, generation = _int(status.get("observedGeneration")), _int(meta.get("generation"))
    computed = isinstance(allowed, int) and observed >= generation
    return Budget(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or "?"),
        selector=selector,
        disruptions_allowed=allowed if isinstance(allowed, int) else 0,
        computed=computed,
        fully_blocking=spec.get("maxUnavailable") in (0, "0%") or spec.get("minAvailable") == "100%",
        always_allow_unhealthy=spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow",
    )


class PdbLimits:
    """The PodDisruptionBudgets of a World, asked per pod at ``now`` (see the module)."""

    def __init__(self, pdbs: Iterable[Obj], *, now: datetime) -> None:
        self.now = now
        self._by_namespace: dict[str, list[Budget]] = defaultdict(list)
        for pdb in pdbs:
            try:
                budget = budget_of(pdb)
            except UnreadablePdb:
                continue  # the Eviction API: "an invalid selector does not match the pod"
            self._by_namespace[budget.namespace].append(budget)

    def covering(self, pod: Obj) -> list[Budget]:
        """The PDBs whose selector matches the pod, in its namespace."""
        found = pod_labels(pod)
        return [b for b in self._by_namespace.get(pod_namespace(pod), ()) if b.selector.matches(found)]

    def eviction_blocker(self, pod: Obj) -> str | None:
        """Why the Eviction API would refuse the pod now (None: it would not, or the drain will not
        ask: ``is_evictable`` is false)."""
        covering = self._holding(pod)
        if covering is None:
            return None
        if len(covering) > 1:
            return _several(pod, covering)
        (budget,) = covering
        if not budget.computed:
            return (
                f"PDB {budget.key} has no status for its spec yet (the disruption controller has not "
                f"computed it), so it allows no eviction of pod {pod_key(pod)}"
            )
        if budget.disruptions_allowed > 0:
            return None
        return f"PDB {budget.key} blocks eviction of pod {pod_key(pod)}"

    def fully_blocked(self, pod: Obj) -> str | None:
        """Why the pod can never be evicted as its PDBs are written (None: it can, in time)."""
        covering = self._holding(pod)
        if covering is None:
            return None
        if len(covering) > 1:
            return _several(pod, covering)
        (budget,) = covering
        if budget.fully_blocking:
            return f"PDB {budget.key} never allows an eviction of pod {pod_key(pod)}"
        return None

    def _holding(self, pod: Obj) -> list[Budget] | None:
        """The PDBs that hold the pod back, or None when none can: it is not one the drain evicts,
        no PDB covers it, or an unhealthy pod's only PDB lets it go (AlwaysAllow)."""
        covering = self.covering(pod)  # first: most pods of most clusters have none, and it is cheap
        if not covering or not is_evictable(pod, self.now):
            return None
        if len(covering) == 1 and covering[0].always_allow_unhealthy and not is_ready(pod):
            return None
        return covering


def _several(pod: Obj, covering: list[Budget]) -> str:
    names = ", ".join(sorted(b.key for b in covering))
    return (
        f"pod {pod_key(pod)} is covered by {len(covering)} PDBs ({names}); the Eviction API refuses "
        "to evict a pod covered by more than one"
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


__all__ = ["Budget", "PdbLimits", "UnreadablePdb", "budget_of"]
