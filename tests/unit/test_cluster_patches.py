"""A pass's NodeClaim writes (``cluster.patches``): merged per NodeClaim, status before metadata,
and a NodeClaim deleted meanwhile skipped without stopping the others."""

from __future__ import annotations

from typing import Any

from nodewright.cluster.errors import NotFound
from nodewright.cluster.patches import NodeClaimPatches


class Recording:
    """The two NodeClaim writes of the cluster edge, recorded; ``gone`` answer 404."""

    def __init__(self, gone: set[str]) -> None:
        self.gone = gone
        self.calls: list[tuple[str, str, Any]] = []

    def patch_nodeclaim_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        return self._write("status", name, status)

    def patch_nodeclaim(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._write("metadata", name, patch)

    def _write(self, what: str, name: str, body: Any) -> dict[str, Any]:
        self.calls.append((what, name, body))
        if name in self.gone:
            raise NotFound(404, f'nodeclaims.karpenter.sh "{name}" not found', reason="NotFound")
        return {}


def test_each_nodeclaim_gets_one_status_then_one_metadata_patch_and_a_deleted_one_is_skipped() -> None:
    patches = NodeClaimPatches()
    patches.annotate("a", {"x": "1"})
    patches.status("a", {"lastPodEventTime": "t1"})
    patches.status("a", {"conditions": [{"type": "Consolidatable"}]})
    patches.annotate("a", {"y": "2"})
    patches.status("gone", {"lastPodEventTime": "t1"})
    patches.annotate("gone", {"x": "1"})
    patches.annotate("b", {"x": "3"})
    cluster = Recording(gone={"gone"})

    patches.send(cluster)  # type: ignore[arg-type]

    assert cluster.calls == [
        ("status", "a", {"lastPodEventTime": "t1", "conditions": [{"type": "Consolidatable"}]}),
        ("metadata", "a", {"metadata": {"annotations": {"x": "1", "y": "2"}}}),
        ("metadata", "b", {"metadata": {"annotations": {"x": "3"}}}),
        ("status", "gone", {"lastPodEventTime": "t1"}),
    ], "the deleted NodeClaim's annotations are not tried after its status answered 404"
    cluster.calls.clear()
    patches.send(cluster)  # type: ignore[arg-type]
    assert cluster.calls == [], "sent patches are forgotten"


class Clock:
    """Monotonic seconds that the recording cluster moves by one per write."""

    def __init__(self) -> None:
        self.now = 0.0


def test_no_nodeclaims_writes_start_past_the_deadline_and_the_rest_are_sent_next_time() -> None:
    patches = NodeClaimPatches()
    for name in ("a", "b", "c", "d"):
        patches.status(name, {"lastPodEventTime": "t1"})
        patches.annotate(name, {"x": name})
    clock = Clock()
    cluster = Recording(gone=set())
    write = cluster._write

    def slow(what: str, name: str, body: Any) -> dict[str, Any]:
        clock.now += 1.0
        return write(what, name, body)

    cluster._write = slow  # type: ignore[method-assign]

    left = patches.send(cluster, until=3.0, monotonic=lambda: clock.now)  # type: ignore[arg-type]

    assert left == 2
    assert [(what, name) for what, name, _ in cluster.calls] == [
        ("status", "a"),
        ("metadata", "a"),
        ("status", "b"),
        ("metadata", "b"),
    ], "a NodeClaim's two writes are not split by the deadline"
    cluster.calls.clear()
    assert patches.send(cluster) == 0  # type: ignore[arg-type]
    assert [name for _, name, _ in cluster.calls] == ["c", "c", "d", "d"]
