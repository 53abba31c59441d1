"""core/v1 and events.k8s.io/v1 Events are one set of objects, as on kube-apiserver (cohabiting
storage): what kube-scheduler writes through events.k8s.io/v1 is what ``kubectl get events`` lists
through core/v1, converted field by field; events.k8s.io/v1 creates are validated strictly."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import config
from kubernetes.client.exceptions import ApiException

from sandbox.apiserver import ApiServer
from sandbox.simulators.kube import STRATEGIC_MERGE_PATCH, Kube, core, group

pytestmark = pytest.mark.timeout(60)
NOW = "2026-03-01T12:00:00.123456Z"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with ApiServer() as server:
        path = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
        yield Kube(config.new_client_from_config(str(path)))


def events_v1(name: str | None = None) -> str:
    return group("events.k8s.io/v1", "events", "default", name)


def core_events(name: str | None = None) -> str:
    return core("events", "default", name)


def scheduler_event(pod: str, **changes: Any) -> dict[str, Any]:
    """An Event as kube-scheduler's events recorder (k8s.io/client-go/tools/events) creates it."""
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{uuid.uuid4().int % 2**60:x}", "namespace": "default"},
        "eventTime": NOW,
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-host",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {
            "kind": "Pod",
            "namespace": "default",
            "name": pod,
            "uid": "7f1c",
            "apiVersion": "v1",
            "resourceVersion": "1001",
        },
        "note": "0/3 nodes are available: 3 Insufficient cpu.",
        "type": "Warning",
    }
    event.update(changes)
    return event


def test_an_event_written_through_events_k8s_io_is_listed_through_core_v1_converted(kube: Kube) -> None:
    created = kube.create(events_v1(), scheduler_event("web-1"))
    name = created["metadata"]["name"]
    assert created["regarding"]["name"] == "web-1"
    assert created["note"] == "0/3 nodes are available: 3 Insufficient cpu."

    raw = kube.get(core_events(name))
    assert raw["apiVersion"] == "v1"
    assert raw["involvedObject"]["name"] == "web-1"
    assert raw["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert raw["reportingComponent"] == "default-scheduler"
    assert raw["reportingInstance"] == "default-scheduler-host"
    assert raw["action"] == "Scheduling"
    assert raw["source"] == {}  # deprecatedSource, unset by the events library
    assert raw["firstTimestamp"] is None
    assert raw["lastTimestamp"] is None
    assert "count" not in raw
    assert raw["eventTime"] == NOW
    selected, _ = kube.list(core_events(), fieldSelector="involvedObject.name=web-1")
    assert [e["metadata"]["name"] for e in selected] == [name]


def test_a_core_event_reads_through_events_k8s_io_with_its_deprecated_fields(kube: Kube) -> None:
    body = {
        "metadata": {"name": "legacy.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "legacy"},
        "reason": "Nominated",
        "message": "Pod should schedule on: nodeclaim/default-x",
        "source": {"component": "nodewright"},
        "reportingComponent": "nodewright",
        "count": 1,
        "firstTimestamp": "2026-03-01T12:00:00Z",
        "lastTimestamp": "2026-03-01T12:00:00Z",
        "type": "Normal",
    }
    kube.create(core_events(), body)

    raw = kube.get(events_v1("legacy.1"))
    assert raw["apiVersion"] == "events.k8s.io/v1"
    assert raw["regarding"] == body["involvedObject"]
    assert raw["note"] == body["message"]
    assert raw["reportingController"] == "nodewright"
    assert raw["deprecatedSource"] == {"component": "nodewright"}
    assert raw["deprecatedCount"] == 1
    assert raw["deprecatedFirstTimestamp"] == "2026-03-01T12:00:00Z"
    assert raw["eventTime"] is None
    selected, _ = kube.list(events_v1(), fieldSelector="regarding.name=legacy")
    assert [e["metadata"]["name"] for e in selected] == ["legacy.1"]


def test_a_watch_through_one_group_sees_what_is_written_through_the_other(kube: Kube) -> None:
    _, resource_version = kube.list(core_events())
    seen: list[dict[str, Any]] = []

    def watch_core() -> None:
        for change in kube.watch(core_events(), resource_version, timeout_seconds=20):
            if change["object"]["involvedObject"]["name"] == "watched":
                seen.append(change["object"])
                return

    watcher = threading.Thread(target=watch_core, daemon=True)
    watcher.start()
    kube.create(events_v1(), scheduler_event("watched"))
    watcher.join(25)

    assert [e["involvedObject"]["name"] for e in seen] == ["watched"]
    assert seen[0]["reportingComponent"] == "default-scheduler"


def test_a_series_patch_through_events_k8s_io_updates_the_one_event(kube: Kube) -> None:
    """The events library's second isomorphic Event is a strategic merge patch of ``series``."""
    name = kube.create(events_v1(), scheduler_event("repeated"))["metadata"]["name"]
    series = {"count": 2, "lastObservedTime": "2026-03-01T12:00:05.000000Z"}
    kube.patch(events_v1(name), {"series": series}, STRATEGIC_MERGE_PATCH)

    assert kube.get(core_events(name))["series"] == series


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"eventTime": None}, "eventTime"),
        ({"type": "Info"}, "type"),
        ({"deprecatedCount": 3}, "deprecatedCount"),
        ({"deprecatedSource": {"component": "x"}}, "deprecatedSource"),
        ({"reportingController": ""}, "reportingController"),
        ({"action": ""}, "action"),
        ({"note": "x" * 1025}, "message"),
        ({"series": {"count": 1, "lastObservedTime": NOW}}, "series.count"),
    ],
)
def test_an_events_k8s_io_create_is_validated_as_validate_event_create_does(
    kube: Kube, changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ApiException) as refused:
        kube.create(events_v1(), scheduler_event("invalid", **changes))

    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert field in [c["field"] for c in causes]


def test_a_core_create_without_an_event_time_keeps_the_legacy_rules(kube: Kube) -> None:
    """What the product and older components send: no eventTime, no reporting controller needed."""
    body = {
        "metadata": {"name": "plain.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "plain"},
        "reason": "Anything",
        "message": "fine",
    }
    kube.create(core_events(), body)
    body["metadata"]["name"] = "plain.2"
    body["involvedObject"]["namespace"] = "elsewhere"
    with pytest.raises(ApiException) as refused:
        kube.create(core_events(), body)
    assert refused.value.status == 422
