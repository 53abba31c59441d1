"""A metric with its own dimensions reaches CloudWatch whole, even from a thread beside log lines."""

from __future__ import annotations

import io
import json
import sys

import pytest
from aws_lambda_powertools.metrics import MetricUnit
from nodewright import observability


class RecordingStdout(io.StringIO):
    """Every ``write`` call kept apart: two calls are where another thread's line can land."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def test_a_dimensioned_metric_is_one_emf_line_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Powertools' ``single_metric`` prints: the document, then the newline. A log line of another
    thread between the two glued two JSON documents into one CloudWatch line (CI, the interruption
    function's batch threads), and both were lost."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    out = RecordingStdout()
    monkeypatch.setattr(sys, "stdout", out)

    observability.emit_metric(
        name="InterruptionsHandled",
        unit=MetricUnit.Count,
        value=2,
        dimensions={"Kind": "SpotInterruption", "Zone": "us-east-1a"},
        namespace="Test",
    )

    assert len(out.writes) == 1
    assert out.writes[0].endswith("\n")
    assert out.writes[0].count("\n") == 1
    document = json.loads(out.writes[0])
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Test"
    assert directive["Dimensions"] == [["Kind", "Zone"]]
    assert directive["Metrics"] == [{"Name": "InterruptionsHandled", "Unit": "Count"}]
    assert (document["InterruptionsHandled"], document["Kind"], document["Zone"]) == (
        [2.0],
        "SpotInterruption",
        "us-east-1a",
    )


def test_metrics_disabled_writes_no_metric_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``POWERTOOLS_METRICS_DISABLED`` silences these too (``single_metric`` ignored it in 3.37)."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    out = RecordingStdout()
    monkeypatch.setattr(sys, "stdout", out)

    observability.emit_metric(
        name="PassesCompleted", unit=MetricUnit.Count, value=1, dimensions={"Function": "x"}
    )

    assert out.writes == []


def test_counts_are_one_document_per_dimension_value_in_a_stable_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    out = RecordingStdout()
    monkeypatch.setattr(sys, "stdout", out)

    observability.emit_counts(
        name="LaunchErrors",
        dimensions=("ErrorCode", "Zone"),
        counts={
            ("InsufficientInstanceCapacity", "b"): 2,
            ("Unsupported", "a"): 1,
            ("InsufficientInstanceCapacity", "a"): 3,
        },
        namespace="Test",
    )

    documents = [json.loads(w) for w in out.writes]
    assert [(d["ErrorCode"], d["Zone"], d["LaunchErrors"]) for d in documents] == [
        ("InsufficientInstanceCapacity", "a", [3.0]),
        ("InsufficientInstanceCapacity", "b", [2.0]),
        ("Unsupported", "a", [1.0]),
    ]
    assert all(d["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["ErrorCode", "Zone"]] for d in documents)
