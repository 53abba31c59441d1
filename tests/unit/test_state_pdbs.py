"""The PodDisruptionBudget rules every flow shares (``nodewright.state.pdbs``) and the pod predicate
built on them (``state.pods.is_currently_reschedulable``).

The cases follow Karpenter's ``pkg/utils/pdb`` suite (CanEvictPods, IsCurrentlyReschedulable) and
what kube-apiserver's eviction subresource answers (one PDB only; no status yet allows nothing).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from nodewright.state import pods
from nodewright.state.pdbs import PdbLimits, UnreadablePdb, budget_of

LABELS = {"app": "web"}
NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


def pdb(name: str = "web", *, status: dict[str, Any] | None = None, generation: int = 1, **spec: Any) -> dict:
    spec.setdefault("selector", {"matchLabels": LABELS})
    found: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "shop", "generation": generation},
        "spec": spec,
    }
    if status is not None:
        found["status"] = {"observedGeneration": generation, **status}
    return found


def pod(*, ready: bool | None = True, labels: dict[str, str] | None = None, **annotations: str) -> dict:
    conditions = [] if ready is None else [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "labels": LABELS if labels is None else labels,
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u"}],
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "conditions": conditions},
    }


ALLOWS_ONE = {"disruptionsAllowed": 1}
ALLOWS_NONE = {"disruptionsAllowed": 0}


@pytest.mark.parametrize(
    "budgets",
    [
        [pdb(minAvailable="100%", status=ALLOWS_NONE)],
        [pdb(maxUnavailable="0%", status=ALLOWS_NONE)],
        [pdb(maxUnavailable=0, status=ALLOWS_NONE)],
        [pdb("one", maxUnavailable=1, status=ALLOWS_ONE), pdb("two", maxUnavailable=1, status=ALLOWS_ONE)],
    ],
    ids=["100%-min-available", "0%-max-unavailable", "0-max-unavailable", "two-pdbs-each-allowing-one"],
)
def test_a_pod_under_a_fully_blocking_pdb_or_two_pdbs_is_neither_evictable_nor_currently_reschedulable(
    budgets: list[dict[str, Any]],
) -> None:
    limits = PdbLimits(budgets, now=NOW)
    assert limits.eviction_blocker(pod()) is not None
    assert limits.fully_blocked(pod()) is not None
    assert not pods.is_currently_reschedulable(pod(), limits, NOW)
    assert pods.is_reschedulable(pod()), "it still dies with its node: emptiness counts it"


def test_two_pdbs_are_named_with_the_api_servers_reason() -> None:
    limits = PdbLimits(
        [pdb("b", maxUnavailable=1, status=ALLOWS_ONE), pdb("a", maxUnavailable=1, status=ALLOWS_ONE)],
        now=NOW,
    )
    assert limits.eviction_blocker(pod()) == (
        "pod shop/web-1 is covered by 2 PDBs (shop/a, shop/b); the Eviction API refuses to evict a pod "
        "covered by more than one"
    )


def test_a_pdb_without_status_allows_no_eviction_but_is_not_fully_blocking() -> None:
    """The API server answers 429 "still being processed" until the disruption controller writes the
    status; the pod may leave once it has, so its place is still planned."""
    limits = PdbLimits([pdb(maxUnavailable=1)], now=NOW)
    assert "has no status for its spec yet" in (limits.eviction_blocker(pod()) or "")
    assert limits.fully_blocked(pod()) is None
    assert pods.is_currently_reschedulable(pod(), limits, NOW)


def test_a_status_written_for_an_older_generation_allows_no_eviction() -> None:
    stale = pdb(maxUnavailable=1, status=ALLOWS_ONE, generation=2)
    stale["status"]["observedGeneration"] = 1
    assert PdbLimits([stale], now=NOW).eviction_blocker(pod()) is not None


def test_a_pdb_allowing_a_disruption_blocks_nothing_and_one_allowing_none_blocks_eviction_only() -> None:
    assert PdbLimits([pdb(maxUnavailable=1, status=ALLOWS_ONE)], now=NOW).eviction_blocker(pod()) is None
    none_now = PdbLimits([pdb(maxUnavailable=1, status=ALLOWS_NONE)], now=NOW)
    assert none_now.eviction_blocker(pod()) == "PDB shop/web blocks eviction of pod shop/web-1"
    assert none_now.fully_blocked(pod()) is None, "it lets the pod go once another is back"


@pytest.mark.parametrize("ready", [False, None], ids=["ready-false", "no-ready-condition"])
def test_an_unhealthy_pod_may_go_under_always_allow_and_not_otherwise(ready: bool | None) -> None:
    always = PdbLimits(
        [pdb(minAvailable="100%", unhealthyPodEvictionPolicy="AlwaysAllow", status=ALLOWS_NONE)], now=NOW
    )
    assert always.eviction_blocker(pod(ready=ready)) is None
    assert pods.is_currently_reschedulable(pod(ready=ready), always, NOW)
    assert always.eviction_blocker(pod(ready=True)) is not None
    default = PdbLimits([pdb(minAvailable="100%", status=ALLOWS_NONE)], now=NOW)
    assert default.eviction_blocker(pod(ready=ready)) is not None
    assert not pods.is_currently_reschedulable(pod(ready=ready), default, NOW)


def test_which_pdbs_cover_a_pod_by_namespace_and_selector() -> None:
    other_namespace = pdb(maxUnavailable=0, status=ALLOWS_NONE)
    other_namespace["metadata"]["namespace"] = "elsewhere"
    no_selector = pdb("none", maxUnavailable=0, status=ALLOWS_NONE)
    no_selector["spec"]["selector"] = None
    everything = pdb("all", maxUnavailable=0, status=ALLOWS_NONE, selector={})
    other_labels = pdb("db", maxUnavailable=0, status=ALLOWS_NONE, selector={"matchLabels": {"app": "db"}})

    assert PdbLimits([other_namespace, no_selector, other_labels], now=NOW).covering(pod()) == []
    assert [b.key for b in PdbLimits([everything], now=NOW).covering(pod(labels={}))] == ["shop/all"]


def test_a_pod_the_drain_does_not_evict_is_not_held_by_a_pdb() -> None:
    limits = PdbLimits([pdb(maxUnavailable=0, status=ALLOWS_NONE)], now=NOW)
    protected = pod(**{"karpenter.sh/do-not-disrupt": "true"})
    assert limits.eviction_blocker(protected) is None, "do-not-disrupt holds it, not the PDB"
    assert not pods.is_currently_reschedulable(protected, limits, NOW), "do-not-disrupt keeps it"
    assert not pods.is_currently_reschedulable(protected, PdbLimits([], now=NOW), NOW)


def test_an_unreadable_selector_is_refused_by_name_and_matches_nothing() -> None:
    broken = pdb(maxUnavailable=0, status=ALLOWS_NONE, selector={"matchExpressions": [{"operator": "In"}]})
    with pytest.raises(UnreadablePdb, match=r"spec.selector"):
        budget_of(broken)
    assert PdbLimits([broken], now=NOW).covering(pod()) == []
