"""Pure parts of the cluster package: REST paths, instance-id matching, conditions, error classes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from nodewright.cluster import errors, objects
from nodewright.cluster.resources import LEASES, NODECLAIMS, NODES, PODS


@pytest.mark.parametrize(
    ("resource", "args", "path"),
    [
        (PODS, (None,), "/api/v1/pods"),
        (PODS, ("ns", "web", "eviction"), "/api/v1/namespaces/ns/pods/web/eviction"),
        (NODES, (None, "ip-10-0-0-1.ec2.internal"), "/api/v1/nodes/ip-10-0-0-1.ec2.internal"),
        (NODECLAIMS, (None, "default-abc", "status"), "/apis/karpenter.sh/v1/nodeclaims/default-abc/status"),
        (LEASES, ("kube-system", "w"), "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/w"),
    ],
)
def test_resource_paths(resource, args, path) -> None:
    assert resource.path(*args) == path


def test_namespaced_object_path_needs_namespace() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        PODS.path(None, "web")


@pytest.mark.parametrize(
    ("provider_id", "instance_id"),
    [
        ("aws:///us-west-2a/i-0123456789abcdef0", "i-0123456789abcdef0"),
        ("aws:///us-east-1b/i-abcd1111", "i-abcd1111"),
        ("aws://us-east-1b/i-abcd1111", "i-abcd1111"),
        ("gce://project/zone/vm", None),
        ("", None),
        (None, None),
    ],
)
def test_instance_id_from_provider_id(provider_id, instance_id) -> None:
    assert objects.instance_id_from_provider_id(provider_id) == instance_id


def test_nodeclaim_instance_id_prefers_status_instance_id_then_provider_id() -> None:
    assert (
        objects.nodeclaim_instance_id({"status": {"instanceID": "i-1", "providerID": "aws:///z/i-2"}})
        == "i-1"
    )
    assert objects.nodeclaim_instance_id({"status": {"providerID": "aws:///z/i-0abc12345"}}) == "i-0abc12345"
    assert objects.nodeclaim_instance_id({"metadata": {"name": "x"}}) is None


def test_set_condition_moves_the_transition_time_only_when_the_status_changes() -> None:
    old = [{"type": "Ready", "status": "False", "reason": "A", "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    same = objects.set_condition(old, "Ready", False, reason="B", now=now)
    assert same == [
        {
            "type": "Ready",
            "status": "False",
            "reason": "B",
            "message": "",
            "lastTransitionTime": "2020-01-01T00:00:00Z",
        }
    ]
    flipped = objects.set_condition(old, "Ready", True, reason="Ok", now=now)
    assert flipped[0]["lastTransitionTime"] == "2026-01-02T03:04:05Z"
    added = objects.set_condition(old, "Launched", True, reason="Ok", now=now, observed_generation=3)
    assert [c["type"] for c in added] == ["Ready", "Launched"]
    assert added[1]["observedGeneration"] == 3
    assert old[0]["reason"] == "A", "the input is not modified"


def test_error_classes_and_transience() -> None:
    gone = errors.error_for(404, {"reason": "NotFound", "message": 'pods "x" not found'}, "")
    assert isinstance(gone, errors.NotFound)
    assert not gone.transient
    exists = errors.error_for(409, {"reason": "AlreadyExists", "message": "exists"}, "")
    assert isinstance(exists, errors.Conflict)
    assert exists.already_exists
    throttled = errors.error_for(429, {"message": "slow down", "details": {"retryAfterSeconds": 10}}, "")
    assert throttled.transient
    assert throttled.retry_after_seconds == 10
    assert errors.error_for(503, None, "fallback").transient
    assert errors.error_for(503, None, "fallback").message == "fallback"
    assert errors.ApiUnavailable("down").transient
