"""Which nodes a disruption pass removes, and why the others stay (the pure rules)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodewright.api.models import Budget, NodePool
from nodewright.disruption.decide import (
    EMPTY,
    EXPIRED,
    NOMINATION_SECONDS,
    allowed_disruptions,
    budget_active,
    decide,
    pods_fingerprint,
)
from nodewright.state.views import ClaimView, NodeView

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)  # a Thursday


def _time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _provider_id(claim: str) -> str:
    return f"aws:///us-west-2a/i-{hashlib.sha256(claim.encode()).hexdigest()[:17]}"


def nodepool(
    name: str = "default",
    policy: str = "WhenEmpty",
    after: str = "30s",
    budgets: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    disruption: dict[str, Any] = {"consolidationPolicy": policy, "consolidateAfter": after}
    if budgets is not None:
        disruption["budgets"] = budgets
    return {"metadata": {"name": name}, "spec": {"disruption": disruption}}


def nodeclaim(
    name: str,
    *,
    pool: str = "default",
    age: timedelta = timedelta(hours=1),
    initialized: timedelta | None = timedelta(minutes=50),
    deleting: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"karpenter.sh/nodepool": pool},
        "creationTimestamp": _time(NOW - age),
    }
    if deleting:
        meta["deletionTimestamp"] = _time(NOW)
    conditions = []
    if initialized is not None:
        conditions.append(
            {"type": "Initialized", "status": "True", "lastTransitionTime": _time(NOW - initialized)}
        )
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"providerID": _provider_id(name), "conditions": conditions},
    }


def node(claim: str, *, ready: bool = True, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": f"node-{claim}", "annotations": annotations or {}},
        "spec": {"providerID": _provider_id(claim)},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(name: str, claim: str, owner: str = "ReplicaSet", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": owner}],
        },
        "spec": {"nodeName": f"node-{claim}"},
        "status": {"phase": phase},
    }


def run(
    claims: list[dict[str, Any]],
    pods: list[dict[str, Any]] | None = None,
    *,
    pools: list[dict[str, Any]] | None = None,
    nodes: list[dict[str, Any]] | None = None,
    last_pod_event: dict[str, datetime] | None = None,
    now: datetime = NOW,
) -> Any:
    return decide(
        nodeclaims=[ClaimView.of(c) for c in claims],
        nodes=[
            NodeView.of(n)
            for n in (nodes if nodes is not None else [node(c["metadata"]["name"]) for c in claims])
        ],
        pods=pods or [],
        nodepools=[NodePool.from_dict(p) for p in (pools if pools is not None else [nodepool()])],
        last_pod_event=last_pod_event or {},
        now=now,
    )


def removed(decision: Any) -> list[tuple[str, str]]:
    return [(c.name, c.reason) for c in decision.disrupt]


# --- emptiness ----------------------------------------------------------------------------------


def test_an_empty_node_goes_once_consolidate_after_has_passed_since_its_last_pod_event() -> None:
    last = {"a": NOW - timedelta(seconds=31)}
    assert removed(run([nodeclaim("a")], last_pod_event=last)) == [("a", EMPTY)]


def test_an_empty_node_waits_for_consolidate_after_and_says_until_when() -> None:
    last = {"a": NOW - timedelta(seconds=10)}
    decision = run([nodeclaim("a")], last_pod_event=last)
    assert decision.disrupt == []
    assert decision.next_check == NOW + timedelta(seconds=20)
    assert decision.held["a"].startswith("empty; eligible at")


def test_only_pods_a_drain_would_move_make_a_node_busy() -> None:
    claims = [nodeclaim("busy"), nodeclaim("daemons"), nodeclaim("done"), nodeclaim("leaving")]
    terminating = pod("old", "leaving")
    terminating["metadata"]["deletionTimestamp"] = _time(NOW)
    pods = [
        pod("web", "busy"),
        pod("agent", "daemons", owner="DaemonSet"),
        pod("job", "done", owner="Job", phase="Succeeded"),
        terminating,
    ]
    everything = [nodepool(budgets=[{"nodes": "100%"}])]
    assert removed(run(claims, pods, pools=everything)) == [
        ("daemons", EMPTY),
        ("done", EMPTY),
        ("leaving", EMPTY),
    ]


@pytest.mark.parametrize("candidate", ["tainted", "draining", "gone"])
def test_a_replacement_stays_while_its_commands_candidates_are_there(candidate: str) -> None:
    """A command's replacement is empty until the drain moves the candidates' pods onto it, which
    may be long after consolidateAfter and the nomination wait (the validation, the launch, the
    initialization): while any of the command's candidates is there, tainted or draining, emptiness
    leaves it be (Karpenter never disrupts a node nominated for pods); once they are gone, it is an
    empty node like any other."""
    from nodewright.disruption.execute import COMMAND_ANNOTATION, REPLACEMENTS_ANNOTATION

    old = nodeclaim("old", deleting=candidate == "draining")
    old["metadata"]["annotations"] = {
        COMMAND_ANNOTATION: "c0ffee00 Underutilized repack 2026-12-03T11:58:00Z",
        REPLACEMENTS_ANNOTATION: "new",
    }
    new = nodeclaim("new", age=timedelta(minutes=2), initialized=timedelta(seconds=NOMINATION_SECONDS + 40))
    claims = [new] if candidate == "gone" else [old, new]
    pods = [] if candidate == "gone" else [pod("web", "old")]

    pool = nodepool(policy="WhenEmptyOrUnderutilized", after="10s", budgets=[{"nodes": "100%"}])
    decision = run(claims, pods, pools=[pool])

    if candidate == "gone":
        assert removed(decision) == [("new", EMPTY)]
    else:
        assert removed(decision) == []
        assert "replacement" in decision.held["new"], decision.held


@pytest.mark.parametrize(
    ("policy", "after", "expected"),
    [
        ("WhenEmpty", "30s", [("a", EMPTY)]),
        ("WhenEmptyOrUnderutilized", "0s", [("a", EMPTY)]),
        ("WhenEmpty", "Never", []),
    ],
)
def test_emptiness_follows_the_consolidation_policy(policy: str, after: str, expected: list[Any]) -> None:
    assert removed(run([nodeclaim("a")], pools=[nodepool(policy=policy, after=after)])) == expected


def test_a_node_just_initialized_is_protected_for_the_nomination_window() -> None:
    young = nodeclaim("a", age=timedelta(seconds=60), initialized=timedelta(seconds=5))
    decision = run([young], pools=[nodepool(after="0s")])
    assert decision.disrupt == []
    assert decision.next_check == NOW + timedelta(seconds=NOMINATION_SECONDS - 5)


def test_nodes_not_initialized_or_without_a_node_or_nodepool_are_not_candidates() -> None:
    claims = [
        nodeclaim("uninitialized", initialized=None),
        nodeclaim("unregistered"),
        nodeclaim("orphan", pool="gone"),
    ]
    nodes = [node("uninitialized"), node("orphan")]
    decision = run(claims, nodes=nodes)
    assert removed(decision) == []
    assert decision.held == {"uninitialized": "empty, but not initialized yet"}
    assert decision.next_check is None, "the next scheduled run looks again"


def test_a_nodeclaim_not_launched_yet_matches_no_node_without_a_provider_id() -> None:
    unlaunched = nodeclaim("new")
    unlaunched["status"] = {"conditions": unlaunched["status"]["conditions"]}  # no providerID yet
    joining = node("joining")
    joining["spec"] = {}  # the kubelet has not set its providerID yet
    decision = run([unlaunched], nodes=[joining])
    assert decision.disrupt == []
    assert decision.held == {}


def test_the_node_do_not_disrupt_annotation_holds_an_empty_node() -> None:
    nodes = [node("a", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    decision = run([nodeclaim("a")], nodes=nodes)
    assert decision.disrupt == []
    assert "karpenter.sh/do-not-disrupt" in decision.held["a"]


# --- budgets -------------------------------------------------------------------------------------


def test_a_do_not_disrupt_daemonset_pod_holds_an_empty_node_until_its_duration_ends_and_says_when() -> None:
    agent = pod("agent", "a", owner="DaemonSet")
    agent["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "10m"}
    agent["status"]["startTime"] = _time(NOW - timedelta(minutes=4))
    held = run([nodeclaim("a")], [agent])
    assert held.disrupt == []
    assert held.held["a"] == 'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/agent)'
    assert held.next_check == NOW + timedelta(minutes=6), "looked at again when the protection ends"
    later = run([nodeclaim("a")], [agent], now=NOW + timedelta(minutes=6))
    assert [(c.name, c.reason) for c in later.disrupt] == [("a", EMPTY)]


def test_the_default_budget_lets_ten_percent_of_a_nodepool_go_at_once_rounded_up() -> None:
    claims = [nodeclaim(f"n{i:02d}") for i in range(11)]
    decision = run(claims)  # default budget: nodes 10% of 11 → 2
    assert removed(decision) == [("n00", EMPTY), ("n01", EMPTY)]
    assert decision.budget_blocked
    assert "allows 2 of its 11 node(s)" in decision.held["n02"]


def test_nodes_already_disrupting_or_not_ready_use_the_budget_up() -> None:
    claims = [nodeclaim(f"n{i}") for i in range(4)] + [nodeclaim("leaving", deleting=True)]
    nodes = [node("n0", ready=False)] + [node(f"n{i}") for i in range(1, 4)] + [node("leaving")]
    pools = [nodepool(budgets=[{"nodes": "2"}])]
    decision = run(claims, pods=[pod("web", "n0")], pools=pools, nodes=nodes)
    assert decision.disrupt == [], "one node NotReady and one deleting: the budget of 2 is used up"


def test_the_most_restrictive_active_budget_for_the_reason_wins() -> None:
    claims = [nodeclaim(f"n{i}") for i in range(4)]
    budgets = [{"nodes": "3"}, {"nodes": "1", "reasons": ["Empty"]}, {"nodes": "0", "reasons": ["Drifted"]}]
    assert len(run(claims, pools=[nodepool(budgets=budgets)]).disrupt) == 1


def test_a_scheduled_zero_budget_blocks_only_inside_its_window() -> None:
    claims = [nodeclaim(f"n{i}") for i in range(3)]
    business_hours = [{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}]
    pools = [nodepool(budgets=business_hours)]
    assert run(claims, pools=pools).disrupt == []  # Thursday 12:00 UTC: inside
    evening = NOW + timedelta(hours=6)
    assert len(run(claims, pools=pools, now=evening).disrupt) == 3, "no active budget: unbounded"


def test_budget_arithmetic() -> None:
    assert allowed_disruptions([Budget(nodes="10%")], EMPTY, 0, NOW) == 0
    assert allowed_disruptions([Budget(nodes="10%")], EMPTY, 1, NOW) == 1
    assert allowed_disruptions([Budget(nodes="25%")], EMPTY, 10, NOW) == 3
    assert allowed_disruptions([Budget(nodes="5", reasons=["Drifted"])], EMPTY, 10, NOW) is None
    assert budget_active(Budget(nodes="0", schedule="@daily", duration="1h"), NOW) is False
    assert budget_active(Budget(nodes="0", schedule="@daily", duration="13h"), NOW) is True


# --- expiration ----------------------------------------------------------------------------------


def test_an_expired_nodeclaim_goes_whatever_its_pods_budgets_and_annotations_say() -> None:
    old = nodeclaim("old", age=timedelta(hours=721))
    nodes = [node("old", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    pools = [nodepool(budgets=[{"nodes": "0"}])]
    decision = run([old], pods=[pod("web", "old")], pools=pools, nodes=nodes)
    assert removed(decision) == [("old", EXPIRED)]


@pytest.mark.parametrize(
    ("expire_after", "age", "expired"),
    [
        ("720h", timedelta(hours=719), False),
        ("1h", timedelta(minutes=61), True),
        ("Never", timedelta(days=999), False),
    ],
)
def test_expire_after_comes_from_the_nodeclaim(expire_after: str, age: timedelta, expired: bool) -> None:
    claim = nodeclaim("a", age=age, expireAfter=expire_after)
    decision = run([claim], pods=[pod("web", "a")])
    assert removed(decision) == ([("a", EXPIRED)] if expired else [])


def test_an_expiring_node_counts_against_the_budget_of_its_empty_neighbours() -> None:
    claims = [nodeclaim("old", age=timedelta(hours=800)), nodeclaim("empty")]
    decision = run(claims, pods=[pod("web", "old")], pools=[nodepool(budgets=[{"nodes": "1"}])])
    assert removed(decision) == [("old", EXPIRED)]
    assert decision.held["empty"].startswith("budget")


def test_a_nodeclaim_already_deleting_is_left_to_its_termination() -> None:
    assert run([nodeclaim("a", deleting=True, age=timedelta(hours=800))]).disrupt == []


def test_the_pods_fingerprint_changes_with_the_set_of_pods_not_their_order() -> None:
    a, b = pod("a", "x"), pod("b", "x")
    assert pods_fingerprint([a, b]) == pods_fingerprint([b, a])
    assert pods_fingerprint([a]) != pods_fingerprint([a, b])
    assert pods_fingerprint([]) == pods_fingerprint([])


def test_an_expire_after_beyond_what_kubernetes_accepts_never_expires_and_never_crashes() -> None:
    claims = [
        nodeclaim("huge", age=timedelta(hours=800), expireAfter="80000000h"),
        nodeclaim("old", age=timedelta(hours=800)),
    ]
    decision = run(claims, pods=[pod("web", "huge"), pod("db", "old")])
    assert removed(decision) == [("old", EXPIRED)]
