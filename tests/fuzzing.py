"""Hypothesis strategies for interruption messages, shared by the parser's and the handlers' fuzzing.

The seed payloads are the project's own samples (``events/payloads``) plus, when the reference data
folder is present, the real EventBridge/SQS payloads collected from AWS's documentation, NTH and
Karpenter (``../shared/data/events``); without that folder the samples alone are fuzzed.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from sandbox.shared_data import REPO_ROOT, event_payloads_dir

SAMPLES = sorted((REPO_ROOT / "events" / "payloads").glob("*.json"))
_reference = event_payloads_dir()
REFERENCE = sorted(_reference.glob("*.json")) if _reference else []
PAYLOADS = [json.loads(p.read_text()) for p in [*SAMPLES, *REFERENCE] if p.suffix == ".json"]

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


@st.composite
def truncated_payloads(draw: st.DrawFn) -> str:
    """A real payload's JSON cut short (a message damaged in transit or by hand)."""
    text = json.dumps(draw(st.sampled_from(PAYLOADS)))
    return text[: draw(st.integers(min_value=0, max_value=len(text)))]


def message_bodies() -> st.SearchStrategy[str]:
    """SQS message bodies: real, mutated, truncated, any JSON value, any text."""
    return st.one_of(
        st.sampled_from(PAYLOADS).map(json.dumps),
        mutated_payloads().map(json.dumps),
        truncated_payloads(),
        json_values.map(json.dumps),
        st.text(max_size=200),
    )
