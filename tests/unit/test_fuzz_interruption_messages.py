"""Fuzzing the interruption parser: valid, mutated, truncated and random payloads.

Every input gets a clean outcome: an event (acted on, recorded, or ignored with a reason) or
``MalformedMessage`` with a one-line message. Nothing else may escape, whatever the input.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fuzzing import PAYLOADS, json_values, mutated_payloads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodewright.interruption.events import Action, MalformedMessage, parse_message

NOW = datetime(2026, 1, 20, 12, 1, tzinfo=UTC)


def _outcome(message: Any) -> str:
    """Parse as the functions do; the only allowed outcomes."""
    try:
        event = parse_message(message, received=NOW, now=NOW)
    except MalformedMessage as exc:
        text = str(exc)
        assert text, "a malformed message says why"
        return "malformed"
    if event.action is Action.IGNORE:
        assert event.reason, "an ignored message says why"
        return "ignored"
    assert event.instance_ids, "an event that acts names its instances"
    assert all(i.startswith("i-") for i in event.instance_ids)
    if event.deadline is not None:
        assert event.deadline.tzinfo is not None
    return "acts"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_payloads())
def test_a_mutated_real_payload_is_acted_on_ignored_or_malformed(payload: Any) -> None:
    _outcome(payload)
    _outcome(json.dumps(payload))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PAYLOADS), st.integers(min_value=0, max_value=2000))
def test_a_truncated_payload_is_malformed_or_still_understood(payload: Any, cut: int) -> None:
    text = json.dumps(payload)
    _outcome(text[: min(cut, len(text))])


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_value_gets_a_clean_outcome(value: Any) -> None:
    _outcome(json.dumps(value))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_get_a_clean_outcome(raw: bytes) -> None:
    _outcome(raw)


def test_deep_nesting_and_huge_bodies_are_malformed_quickly() -> None:
    assert _outcome("[" * 200_000 + "]" * 200_000) == "malformed"
    assert _outcome('{"detail": ' * 5_000 + "1" + "}" * 5_000) == "malformed"
    assert (
        _outcome(json.dumps({"id": "x", "source": "aws.ec2", "detail-type": "y" * 1_000_000})) == "malformed"
    )


def test_every_sample_and_reference_payload_is_understood() -> None:
    outcomes = [_outcome(p) for p in PAYLOADS]
    assert "malformed" not in outcomes
