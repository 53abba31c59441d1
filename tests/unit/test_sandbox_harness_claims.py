"""``claims_of_pods``: which NodeClaim gave a pod its capacity, read from the pod's binding and the
NodeClaims' ``status.nodeName``. ``bench latency`` and the demo's summary time each pod's launch
through it; they read the ``Nominated`` events before, which go out at Karpenter's rate (5/s,
burst 10) and may never come for a pod bound before the next pass."""

from __future__ import annotations

from typing import Any

from sandbox.harness import claims_of_pods


def _pod(name: str, node: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node} if node else {}}


def _claim(name: str, node: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"nodeName": node} if node else {}}


def test_a_bound_pod_maps_to_the_nodeclaim_of_its_node_and_the_others_to_nothing() -> None:
    pods = [
        _pod("a", "node-1"),
        _pod("b", "node-2"),
        _pod("c", "node-1"),
        _pod("pending"),
        _pod("d", "other"),
    ]
    claims = [_claim("claim-1", "node-1"), _claim("claim-2", "node-2"), _claim("launching")]

    assert claims_of_pods(pods, claims) == {"a": "claim-1", "b": "claim-2", "c": "claim-1"}


def test_a_pod_not_bound_is_not_matched_to_a_nodeclaim_not_registered() -> None:
    """Neither has a node: ``None`` must not pair them."""
    pods = [{"metadata": {"name": "p"}, "spec": {"nodeName": None}}]
    claims = [{"metadata": {"name": "c"}, "status": {"nodeName": None}}, {"metadata": {"name": "bare"}}]

    assert claims_of_pods(pods, claims) == {}
