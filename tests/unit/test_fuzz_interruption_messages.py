"""Fuzzing the interruption parser: valid, mutated, truncated and random payloads.

Every input gets a clean outcome: an event (acted on, recorded, or ignored with a reason) or
``MalformedMessage`` with a one-line message. Nothing else may escape, whatever the input.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodewright.interruption.events import Action, MalformedMessage, parse_message

from sandbox.shared_data import REPO_ROOT, event_payloads_dir

SAMPLES = sorted((REPO_ROOT / "events" / "payloads").glob("*.json"))
_reference = event_payloads_dir()
REFERENCE = sorted(_reference.glob("*.json")) if _reference else []
PAYLOADS = [json.loads(p.read_text()) for p in [*SAMPLES, *REFERENCE] if p.suffix == ".json"]
NOW = datetime(2026, 1, 20, 12, 1, tzinfo=UTC)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
ODD_STRINGS = st.sampled_from(
    [
        "",
        "[Current time]",
        "yyyy-mm-ddThh:mm:ssZ",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "2026-01-20T12:00:00",
        "2026-01-20T12:00:00+14:00",
        "[instance arn]",
        "i-",
        "i-0123456789abcdef0",
        "arn:aws:ec2:us-east-1::instance/i-0123456789abcdef0",
        "\u2014",
        "\x00",
        "a" * 10_000,
    ]
)


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


@st.composite
def mutated_payloads(draw: st.DrawFn) -> Any:
    """A real payload with one field replaced, removed, or retyped (at the top or in detail)."""
    payload = json.loads(json.dumps(draw(st.sampled_from(PAYLOADS))))
    where = (
        payload if not isinstance(payload.get("detail"), dict) or draw(st.booleans()) else payload["detail"]
    )
    if not where:
        return payload
    key = draw(st.sampled_from(sorted(where)))
    change = draw(st.sampled_from(["remove", "json", "odd"]))
    if change == "remove":
        del where[key]
    elif change == "json":
        where[key] = draw(json_values)
    else:
        where[key] = draw(ODD_STRINGS)
    return payload


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
