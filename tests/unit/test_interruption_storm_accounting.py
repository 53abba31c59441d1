"""What an AZ-wide reclaim is measured and bounded with: the client's requests counted by second,
and the interruption functions' resume scan leaving the terminations other invocations drive."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fakes import T0, FakeClock
from nodewright.cluster import TokenBucket, objects
from nodewright.interruption.processing import DRIVEN_ELSEWHERE_SECONDS, _left_behind
from nodewright.termination import NodesAndClaims


def test_requests_are_counted_by_the_second_they_are_let_through() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=2, clock=clock)
    first = int(clock.now().timestamp())
    for _ in range(5):
        bucket.wait("GET /api/v1/nodes")
    # Two at once (the burst), then one every half second: seconds 0, 0, 0.5, 1.0, 1.5.
    assert bucket.drain_request_counts() == {first: 3, first + 1: 2}
    assert bucket.drain_request_counts() == {}, "counted once: the next report starts afresh"
    assert bucket.requests == 5


def test_a_container_keeps_at_most_the_last_kept_seconds() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=1000, burst=1000, clock=clock)
    first = int(clock.now().timestamp())
    for _ in range(TokenBucket.KEPT_SECONDS + 5):  # a warm container never asked for its counts
        bucket.wait("x")
        clock.advance(1.0)
    counts = bucket.drain_request_counts()
    assert len(counts) <= TokenBucket.KEPT_SECONDS
    assert first not in counts
    assert max(counts) == first + TokenBucket.KEPT_SECONDS + 4


def _claim(name: str, node: str, instance: str, deleted_seconds_ago: float | None) -> dict:
    meta: dict = {"name": name}
    if deleted_seconds_ago is not None:
        meta["deletionTimestamp"] = objects.format_time(T0 - timedelta(seconds=deleted_seconds_ago))
    return {
        "metadata": meta,
        "status": {"nodeName": node, "providerID": f"aws:///us-east-1a/{instance}"},
    }


def _node(name: str, instance: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"providerID": f"aws:///us-east-1a/{instance}"}}


@pytest.mark.parametrize(
    ("age", "resumed"),
    [(5.0, False), (DRIVEN_ELSEWHERE_SECONDS - 1, False), (DRIVEN_ELSEWHERE_SECONDS + 1, True)],
)
def test_the_resume_scan_leaves_a_young_termination_to_the_invocation_driving_it(
    age: float, resumed: bool
) -> None:
    world = NodesAndClaims(
        nodeclaims=[_claim("a", "node-a", "i-0a", age), _claim("b", "node-b", "i-0b", None)],
        nodes=[_node("node-a", "i-0a"), _node("node-b", "i-0b")],
    )
    left = _left_behind(world, T0)
    assert ("a" in [objects.name_of(c) for c in left.nodeclaims]) is resumed
    assert ("node-a" in [objects.name_of(n) for n in left.nodes]) is resumed, "nor its Node"
    assert "b" in [objects.name_of(c) for c in left.nodeclaims], "what is not terminating stays seen"


def test_the_storm_bench_splits_each_nodes_time_to_cordon_by_the_first_delivery_of_its_warning() -> None:
    """Warning → taken by a trigger → handler started (the Init of a cold container) → cordoned,
    from whichever path's invocation took the node's warning first."""
    import json

    from bench._storm import Storm
    from sandbox.runtime import events

    storm = Storm(2, 1)
    nodes = [
        {"metadata": {"name": f"node-{i}"}, "spec": {"providerID": f"aws:///us-east-1a/i-0{i}"}}
        for i in range(2)
    ]
    storm.sent = {"node-0": 100.0, "node-1": 100.0}
    storm.timeline.cordoned = {"node-0": 110.0, "node-1": 106.0}
    storm.timeline.claims_created = {"claim-a": 120.0, "claim-b": 130.0}
    batch = events.sqs_event(
        [events.sqs_record(json.dumps(events.spot_warning(f"i-0{i}"))) for i in range(2)]
    )
    starts = [
        ("provisioner", 90.0, True, 95.0, events.scheduled_event()),  # a cold start, no warning
        ("interruption", 101.0, True, 104.0, batch),  # cold: 3 s of Init
        ("spot_events", 100.5, False, 100.5, events.spot_warning("i-01")),  # node-1's warning first
    ]

    stages = storm._stages(nodes, starts)

    assert stages["warningToTakenSeconds"]["max"] == 1.0
    assert stages["takenToHandlerSeconds"]["max"] == 3.0
    # node-0: 110 - 104 (the batch's handler); node-1: 106 - 100.5 (the direct path's).
    assert stages["handlerToCordonedSeconds"]["max"] == 6.0
    assert stages["handlerToCordonedSeconds"]["p50"] == 5.75
    assert stages["firstTakenBy"] == {"interruption": 1, "spot_events": 1}
    assert stages["firstTakenCold"] == 1
    assert stages["coldStartsByFunction"] == {"provisioner": 1, "interruption": 1}
    assert stages["cordonedToReplacementSeconds"]["max"] == 20.0


def test_the_storm_benchs_watch_lists_again_when_its_version_expired_and_tells_what_changed() -> None:
    """A loaded machine falls behind the emulator's watch history: the ERROR (410) event must start
    the watch again from a list, telling the objects added and deleted meanwhile (a 100-node storm
    whose watches went quiet counted no replacement NodeClaim and no drained node)."""
    import threading

    from bench._storm import Storm

    class Resource:
        plural = "nodeclaims"

        def path(self, namespace):
            return "/apis/karpenter.sh/v1/nodeclaims"

    stop = threading.Event()
    lists = [
        ([{"metadata": {"name": "old-a"}}, {"metadata": {"name": "old-b"}}], "1"),
        ([{"metadata": {"name": "old-a"}}, {"metadata": {"name": "new-c"}}], "9"),
    ]
    watched: list[str | None] = []

    class Cluster:
        def _list(self, *args):
            return lists.pop(0) if lists else ([], "9")

        def _watch(self, path, query, read_timeout):
            watched.append(query["resourceVersion"])
            if len(watched) == 1:
                yield {"type": "ERROR", "object": {"code": 410}}
            else:
                stop.set()
                yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "10"}}}

    class Sandbox:
        def admin_cluster(self):
            return Cluster()

    told: list[tuple[str, str]] = []
    thread = Storm(1, 1)._watch(
        Sandbox(), Resource(), lambda kind, obj, at: told.append((kind, obj["metadata"]["name"])), stop
    )
    thread.join(timeout=10)

    assert watched == ["1", "9"], "watched again from the fresh list's version"
    assert ("ADDED", "new-c") in told
    assert ("DELETED", "old-b") in told
    assert ("ADDED", "old-a") not in told, "what was there before is not told as new"
