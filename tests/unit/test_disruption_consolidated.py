"""What keeps a disruption pass over a big cluster short: the consolidated state
(``disruption.consolidated``: an unchanged cluster is not searched again for five minutes, any
change it depends on ends that, the marker is the state table's, not a container's memory), and
the pass's time for its NodeClaim marks and its "why not" events (the rest in later passes)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from fakes import FakeCluster, FakeLease
from nodewright.cloud.state import InMemoryStateStore
from nodewright.cluster import objects
from nodewright.context import Context
from nodewright.disruption import consolidated, consolidation, flow
from nodewright.state.world import World, observe
from test_disruption_consolidation import add_node, add_pod, env, one_pass  # noqa: F401 - env: fixture

DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}


@pytest.fixture
def stored(env):  # noqa: F811 - the fixture imported above
    """The consolidation tests' context with a state table (the flow's markers live there)."""
    ctx, cluster, cloud = env
    store = InMemoryStateStore(clock=lambda: ctx.clock.now().timestamp())
    return dataclasses.replace(ctx, store=store), cluster, cloud


def two_protected_nodes(cluster: FakeCluster) -> None:
    """Nodes a and b (m5.xlarge), one pod each, both pods do-not-disrupt: nothing to consolidate."""
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a", **DO_NOT_DISRUPT)
    add_pod(cluster, "web-2", "node-b", **DO_NOT_DISRUPT)


def consolidation_of(report: flow.DisruptionReport) -> str:
    [what] = report.consolidation
    return what


def test_an_unchanged_cluster_is_searched_again_only_after_five_minutes(stored) -> None:
    ctx, cluster, _cloud = stored
    two_protected_nodes(cluster)
    assert consolidation_of(one_pass(ctx)) == flow.SEARCHED
    for _ in range(4):  # a pass a minute, nothing changes
        ctx.clock.advance(60)
        spared = one_pass(ctx)
        assert consolidation_of(spared) == flow.SKIPPED
        assert set(spared.held) == {"a", "b"}, "each pass still says why the nodes stay"
        assert all("do-not-disrupt" in why for why in spared.held.values())
    ctx.clock.advance(consolidated.CONSOLIDATED_SECONDS - 4 * 60)
    assert consolidation_of(one_pass(ctx)) == flow.SEARCHED, "Karpenter's forced re-evaluation"


def test_a_pod_replaced_without_do_not_disrupt_is_consolidated_on_the_next_pass(stored) -> None:
    ctx, cluster, _cloud = stored
    two_protected_nodes(cluster)
    one_pass(ctx)
    ctx.clock.advance(60)
    assert consolidation_of(one_pass(ctx)) == flow.SKIPPED

    del cluster.objects["Pod"]["web-2"]
    add_pod(cluster, "web-3", "node-b")
    first = one_pass(ctx)
    assert consolidation_of(first) == flow.SEARCHED
    assert any("validating" in why for why in first.held.values())
    ctx.clock.advance(consolidation.VALIDATION_SECONDS)
    second = one_pass(ctx)
    [decision] = second.decisions
    assert decision.nodeclaims == ["b"]


@pytest.mark.parametrize(
    "change",
    ["pod bound", "pod deleted", "node cordoned", "nodepool changed", "nodeclaim deleting", "node added"],
)
def test_every_change_consolidation_depends_on_ends_the_consolidated_state(stored, change: str) -> None:
    ctx, cluster, _cloud = stored
    two_protected_nodes(cluster)
    one_pass(ctx)
    ctx.clock.advance(60)
    assert consolidation_of(one_pass(ctx)) == flow.SKIPPED
    if change == "pod bound":
        add_pod(cluster, "web-4", "node-a", **DO_NOT_DISRUPT)
    elif change == "pod deleted":
        add_pod(cluster, "web-4", "node-a", **DO_NOT_DISRUPT)
        one_pass(ctx)
        ctx.clock.advance(60)
        assert consolidation_of(one_pass(ctx)) == flow.SKIPPED
        del cluster.objects["Pod"]["web-4"]
    elif change == "node cordoned":
        cluster.objects["Node"]["node-a"]["spec"]["unschedulable"] = True
    elif change == "nodepool changed":
        cluster.objects["NodePool"]["default"]["spec"]["disruption"]["budgets"] = [{"nodes": "50%"}]
    elif change == "nodeclaim deleting":
        cluster.objects["NodeClaim"]["a"]["metadata"]["deletionTimestamp"] = "2026-12-02T11:00:00Z"
    elif change == "node added":
        add_node(cluster, "c", "m5.xlarge")
        add_pod(cluster, "web-5", "node-c", **DO_NOT_DISRUPT)
    ctx.clock.advance(60)
    assert consolidation_of(one_pass(ctx)) == flow.SEARCHED


def test_the_marker_is_the_state_tables_so_another_container_skips_too_and_none_searches(stored) -> None:
    ctx, cluster, _cloud = stored
    two_protected_nodes(cluster)
    one_pass(ctx)
    flow.forget_proposals()  # another container: nothing of this one's memory
    ctx.clock.advance(60)
    other: Context = dataclasses.replace(ctx)
    assert consolidation_of(one_pass(other)) == flow.SKIPPED
    without_store = dataclasses.replace(ctx, store=None)
    assert consolidation_of(one_pass(without_store)) == flow.SEARCHED


def test_a_search_that_finds_a_command_leaves_the_cluster_unconsolidated(stored) -> None:
    ctx, cluster, _cloud = stored
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    first = one_pass(ctx)
    assert consolidation_of(first) == flow.SEARCHED
    assert ctx.store is not None
    assert ctx.store.get_marker(consolidated.MARKER_KEY) is None
    ctx.clock.advance(consolidation.VALIDATION_SECONDS)
    second = one_pass(ctx)
    assert consolidation_of(second) == flow.SEARCHED
    assert len(second.decisions) == 1


def test_a_search_the_invocations_time_cuts_short_marks_nothing_and_the_next_pass_searches(
    stored, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx, cluster, _cloud = stored
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    evaluated: list[int] = []
    evaluate = consolidation.evaluate
    monkeypatch.setattr(
        consolidation,
        "evaluate",
        lambda sim, chosen, *a, **k: evaluated.append(len(chosen)) or evaluate(sim, chosen, *a, **k),
    )
    # The pass may write for COMMAND_START_SECONDS more: no time left to search.
    no_time = flow.reconcile(
        ctx,
        observe(ctx),
        lease=FakeLease(),
        write_deadline=ctx.clock.monotonic() + flow.COMMAND_START_SECONDS,
    )

    assert no_time.consolidation == flow.CUT_SHORT
    assert evaluated == [], "no method searched past the pass's time"
    assert ctx.store is not None
    assert ctx.store.get_marker(consolidated.MARKER_KEY) is None, "not a search that found nothing"
    ctx.clock.advance(60)
    with_time = one_pass(ctx)
    assert consolidation_of(with_time) == flow.SEARCHED
    assert evaluated
    assert any("validating" in why for why in with_time.held.values())


def test_the_methods_share_the_search_time_each_within_its_own_limit(
    env,  # noqa: F811 - the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ctx, cluster, _cloud = env
    for name in "abc":
        add_node(cluster, name, "m5.xlarge")
        add_pod(cluster, f"web-{name}", f"node-{name}", **DO_NOT_DISRUPT if name == "c" else {})
    now = [0.0]
    monkeypatch.setattr(consolidation, "search_clock", lambda: now[0])
    given: dict[str, float] = {}

    def method(name: str, spends: float) -> object:
        def run(*args: object, seconds: float, **kwargs: object) -> None:
            given[name] = seconds
            now[0] += spends

        return run

    from nodewright.disruption import repack

    monkeypatch.setattr(repack, "wave", method("repack", 7.0))
    monkeypatch.setattr(consolidation, "multi_node", method("multi", 30.0))
    monkeypatch.setattr(consolidation, "single_node", method("single", 0.0))
    world = observe(ctx)
    usable = [cluster.objects["NodePool"]["default"]]
    sim, pending = consolidation.simulation(world, usable)

    choice = consolidation.choose(
        sim, world, usable, {}, pending=pending, room={}, ignore_waits=True, seconds=25.0
    )

    assert given == {"repack": repack.WAVE_SECONDS, "multi": 18.0, "single": 0.0}
    assert choice.cut_short
    unbounded = consolidation.choose(sim, world, usable, {}, pending=pending, room={}, ignore_waits=True)
    assert given == {
        "repack": repack.WAVE_SECONDS,
        "multi": consolidation.MULTI_NODE_SECONDS,
        "single": consolidation.SINGLE_NODE_SECONDS,
    }
    assert not unbounded.cut_short


def slow_writes(ctx: Context, cluster: FakeCluster, *methods: str) -> None:
    """Each call of these cluster methods takes one second of the pass's clock."""
    for method in methods:
        original = getattr(cluster, method)

        def slow(*args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            ctx.clock.advance(1.0)  # type: ignore[attr-defined]
            return _original(*args, **kwargs)

        setattr(cluster, method, slow)


def test_a_first_pass_writes_its_nodeclaim_marks_for_mark_seconds_and_the_next_pass_the_rest(env) -> None:  # noqa: F811
    ctx, cluster, _cloud = env
    names = [f"n{i:02d}" for i in range(12)]
    for name in names:
        add_node(cluster, name, "m5.xlarge")
        add_pod(cluster, f"web-{name}", f"node-{name}", **DO_NOT_DISRUPT)
    slow_writes(ctx, cluster, "patch_nodeclaim_status", "patch_nodeclaim")

    first = flow.reconcile(ctx, observe(ctx), lease=FakeLease())

    claims = cluster.objects["NodeClaim"]
    marked = [n for n in names if flow.FINGERPRINT_ANNOTATION in objects.annotations_of(claims[n])]
    assert 0 < len(marked) <= flow.MARK_SECONDS / 2 + 1, "two writes a NodeClaim, a second each"
    assert first.marks_left == len(names) - len(marked)
    left = sorted(set(names) - set(marked))
    ctx.clock.advance(60)
    second_at = ctx.clock.now()
    for _ in range(len(names)):  # the passes after write the rest, a few each
        if not flow.reconcile(ctx, observe(ctx), lease=FakeLease()).marks_left:
            break
    for name in left:
        claim = cluster.objects["NodeClaim"][name]
        assert flow.FINGERPRINT_ANNOTATION in objects.annotations_of(claim)
        recorded = objects.parse_time(claim["status"]["lastPodEventTime"])
        assert recorded is not None
        assert recorded >= second_at.replace(microsecond=0), "recorded late, never earlier"


def test_why_not_events_are_said_for_event_seconds_a_pass_and_the_rest_by_a_later_search(env) -> None:  # noqa: F811
    ctx, cluster, _cloud = env
    names = [f"n{i:02d}" for i in range(8)]
    for name in names:
        add_node(cluster, name, "m5.xlarge", **DO_NOT_DISRUPT)
        add_pod(cluster, f"web-{name}", f"node-{name}")
    slow_writes(ctx, cluster, "record_event")

    first = flow.reconcile(ctx, observe(ctx), lease=FakeLease())

    def told() -> set[str]:
        return {e[1] for e in cluster.events if e[0] == "NodeClaim" and e[2] == "DisruptionBlocked"}

    said = told()
    assert 0 < len(said) < len(names)
    assert first.unsaid > 0
    for _ in range(len(names)):
        flow.reconcile(ctx, observe(ctx), lease=FakeLease())
    assert told() == set(names), "each node is told why it stays, a few a pass"
    counts = [e[1] for e in cluster.events if e[0] == "NodeClaim" and e[2] == "DisruptionBlocked"]
    assert len(counts) == len(names), "and only once (the quiet time holds for the ones said)"
    on_nodes = {e[1] for e in cluster.events if e[0] == "Node" and e[2] == "DisruptionBlocked"}
    assert on_nodes == {f"node-{name}" for name in names}, "each Node told with its NodeClaim"


def calls_of(monkeypatch: pytest.MonkeyPatch, function: str) -> list[int]:
    """A 1 for each call of ``consolidation.<function>`` from now on (the function still runs)."""
    calls: list[int] = []
    real = getattr(consolidation, function)

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(consolidation, function, counted)
    return calls


def test_a_spared_pass_builds_no_simulation(stored, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, cluster, _cloud = stored
    two_protected_nodes(cluster)
    one_pass(ctx)
    built = calls_of(monkeypatch, "simulation")
    ctx.clock.advance(60)
    assert consolidation_of(one_pass(ctx)) == flow.SKIPPED
    assert built == [], "the simulation (every bound pod parsed) is the spared search's cost"


def test_a_searching_pass_walks_the_candidates_once(stored, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, cluster, _cloud = stored
    add_node(cluster, "a", "m5.xlarge")
    add_node(cluster, "b", "m5.xlarge")
    add_pod(cluster, "web-1", "node-a")
    add_pod(cluster, "web-2", "node-b")
    walked = calls_of(monkeypatch, "candidates")
    report = one_pass(ctx)
    assert consolidation_of(report) == flow.SEARCHED
    assert any("validating" in why for why in report.held.values()), "the search found its command"
    assert walked == [1], "the digest and the search share one walk of every node's pods"


def _digest_world() -> World:
    """Objects as an API server may return them, with the fields the digest reads present, empty
    and absent."""
    claim = {
        "metadata": {
            "name": "a",
            "labels": {"karpenter.sh/nodepool": "default"},
            "annotations": {"karpenter.sh/do-not-disrupt": "true", "other": "x"},
            "creationTimestamp": "2026-01-20T12:00:00Z",
        },
        "spec": {"nodeClassRef": {"name": "default"}},
        "status": {
            "providerID": "aws:///us-west-2a/i-0aaaaaaaaaaaaaaa1",
            "conditions": [{"type": "Initialized", "status": "True"}],
        },
    }
    bare_claim = {"metadata": {"name": "b", "deletionTimestamp": "2026-01-20T12:05:00Z"}}
    node = {
        "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a"}, "annotations": {}},
        "spec": {
            "providerID": "aws:///us-west-2a/i-0aaaaaaaaaaaaaaa1",
            "unschedulable": True,
            "taints": [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}],
        },
        "status": {"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    bare_node = {"metadata": {"name": "node-b", "labels": {}}}
    pods = [
        {
            "metadata": {"name": "p", "namespace": "web", "uid": "u-1", "annotations": DO_NOT_DISRUPT},
            "spec": {"nodeName": "node-a"},
            "status": {"phase": "Running"},
        },
        {"metadata": {"name": "q"}},
    ]
    pdb = {
        "metadata": {"name": "budget", "namespace": "web"},
        "spec": {"maxUnavailable": 1},
        "status": {"disruptionsAllowed": 1, "expectedPods": 2},
    }
    daemonset = {
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {"template": {"spec": {}}},
    }
    pool = {"metadata": {"name": "default"}, "spec": {"template": {"spec": {}}}}
    return World(
        taken_at=datetime(2026, 1, 20, 12, 10, tzinfo=UTC),
        nodeclaims=[claim, bare_claim],
        nodes=[node, bare_node],
        pods=pods,
        nodepools=[pool],
        nodeclasses=[],
        daemonsets=[daemonset],
        pdbs=[pdb],
    )


def test_the_digest_of_a_cluster_stays_the_same_across_versions() -> None:
    """A new version reading the objects differently must not change the digest of the same
    cluster: a marker written before a deployment still spares the next pass."""
    world = _digest_world()
    found = consolidated.digest(
        world,
        world.nodepools,
        candidates=["a"],
        vetoed=["b"],
        room={"default": 1},
        spot_to_spot=False,
    )
    assert found == "a338297aed982ffa47c1f18e60377620"
