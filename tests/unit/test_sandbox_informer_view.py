"""ReconcileLoop.view: an informer's cache as the loop last wrote it (client-go's expectations)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.simulators import loop as loop_module
from sandbox.simulators.kube import core
from sandbox.simulators.loop import ReconcileLoop, list_path

PODS = core("pods")


def pod(name: str, version: int, **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": str(version),
            **metadata,
        }
    }


class FakeKube:
    """What the loop asks of its client: the listeners of its writes, and a list (counted)."""

    def __init__(self, listed: list[dict[str, Any]], version: int) -> None:
        self.write_listeners: list[Any] = []
        self.listed, self.version, self.lists = listed, version, 0

    def list(self, path: str, **query: Any) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return self.listed, str(self.version)

    def wrote(self, method: str, path: str, answer: dict[str, Any]) -> None:
        for listener in self.write_listeners:
            listener(method, path, answer)


class Pods(ReconcileLoop):
    watch_paths = (PODS,)
    informed_paths = watch_paths


@pytest.fixture
def informed(monkeypatch: pytest.MonkeyPatch) -> tuple[Pods, FakeKube]:
    """A loop whose informer has listed one pod at resourceVersion 10 (no threads started)."""
    monkeypatch.setattr(loop_module, "WRITES_SEEN_SECONDS", 0.05)
    kube = FakeKube([pod("a", 10)], 10)
    informed = Pods(kube)  # type: ignore[arg-type]
    informed._list_for_watch(PODS)
    kube.lists = 0
    return informed, kube


def names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects)


def test_the_cache_is_read_when_the_loop_has_written_nothing_newer(informed: tuple[Pods, FakeKube]) -> None:
    loop, kube = informed
    assert names(loop.view(PODS)) == ["a"]
    assert kube.lists == 0


def test_a_create_the_watch_has_not_brought_back_is_listed_and_then_read_from_the_cache(
    informed: tuple[Pods, FakeKube],
) -> None:
    loop, kube = informed
    kube.wrote("POST", "/api/v1/namespaces/default/pods", pod("b", 12))
    kube.listed = [pod("a", 10), pod("b", 12)]
    assert names(loop.view(PODS)) == ["a", "b"]  # the cache lags: a fresh list after the wait
    assert kube.lists == 1
    loop._inform(PODS, {"type": "ADDED", "object": pod("b", 12)})
    assert names(loop.view(PODS)) == ["a", "b"]
    assert kube.lists == 1


def test_a_pod_deleted_at_once_is_left_out_until_the_watch_sees_it_go(
    informed: tuple[Pods, FakeKube],
) -> None:
    loop, kube = informed
    kube.wrote("DELETE", "/api/v1/namespaces/default/pods/a", pod("a", 10))  # no deletionTimestamp: gone
    assert names(loop.view(PODS)) == []
    loop._inform(PODS, {"type": "DELETED", "object": pod("a", 11)})
    assert names(loop.view(PODS)) == []
    assert loop._deleted[PODS] == {}
    assert kube.lists == 0


def test_a_pod_deleted_gracefully_is_shown_terminating_once_the_watch_has_brought_its_delete_back(
    informed: tuple[Pods, FakeKube],
) -> None:
    loop, kube = informed
    terminating = pod("a", 13, deletionTimestamp="2026-12-07T17:00:00Z")
    kube.wrote("DELETE", "/api/v1/namespaces/default/pods/a", terminating)
    loop._inform(PODS, {"type": "ADDED", "object": pod("b", 12)})  # another pod's change first
    kube.listed = [terminating, pod("b", 12)]
    assert names(loop.view(PODS)) == ["a", "b"]  # not yet seen at 13: a fresh list
    assert kube.lists == 1
    loop._inform(PODS, {"type": "MODIFIED", "object": terminating})
    shown = loop.view(PODS)
    assert [o["metadata"].get("deletionTimestamp") for o in shown if o["metadata"]["name"] == "a"] == [
        "2026-12-07T17:00:00Z"
    ]
    assert kube.lists == 1


@pytest.mark.parametrize(
    ("path", "listed"),
    [
        ("/apis/apps/v1/namespaces/default/replicasets/web/scale", "/apis/apps/v1/replicasets"),
        ("/api/v1/namespaces/default/pods/a/status", "/api/v1/pods"),
        ("/api/v1/namespaces/team", "/api/v1/namespaces"),
        ("/api/v1/namespaces/team/finalize", "/api/v1/namespaces"),
        ("/api/v1/nodes/n1", "/api/v1/nodes"),
        ("/apis/karpenter.sh/v1/nodeclaims/c1", "/apis/karpenter.sh/v1/nodeclaims"),
    ],
)
def test_a_write_path_names_its_resources_cluster_wide_list(path: str, listed: str) -> None:
    assert list_path(path) == listed
