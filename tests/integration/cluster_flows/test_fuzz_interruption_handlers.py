"""Fuzzing both interruption handlers end to end: whatever arrives, a clean outcome, never a raise.

The parser is fuzzed alone in ``tests/unit/test_fuzz_interruption_messages.py``; here the same
payloads (real ones from ``events/payloads`` and, when present, ``../shared/data/events``; mutated,
truncated, any JSON, any text) go through the real handlers (``functions/*/app.py``) on the API
emulator, with one owned spot node whose drain really runs. The properties:

* the SQS handler never raises and answers ``batchItemFailures`` naming only its own records; with a
  healthy API server nothing is handed back (a malformed message is acknowledged, never retried into
  the DLQ), and each malformed one is counted in the ``MalformedMessages`` metric;
* the direct EventBridge handler never raises and always names a disposition.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fakes import FakeLambdaContext
from fuzzing import PAYLOADS, message_bodies, mutated_payloads
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodewright.interruption.events import MalformedMessage, parse_message

from sandbox.runtime import events

from .interruption_support import INSTANCE, CountingReplacement

OUTCOMES: Counter[str] = Counter()
# Real payloads about the test's own node (instance ids rewritten, sent just now), so some act.
OWNED = [json.loads(re.sub(r"i-[0-9a-f]{8,17}", INSTANCE, json.dumps(p))) for p in PAYLOADS]


def _sent_now(payload: Any) -> Any:
    if isinstance(payload, dict) and "time" in payload:
        return {**payload, "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return payload


owned_payloads = st.sampled_from(OWNED).map(_sent_now)
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module", autouse=True)
def outcome_counts() -> Iterator[None]:
    """Print what the fuzzing tried and how it ended (``pytest -s`` shows it; reliability.md cites it)."""
    yield
    print(f"\ninterruption handler fuzzing: {dict(sorted(OUTCOMES.items()))}", file=sys.stderr)


def _malformed(body: str) -> bool:
    try:
        parse_message(body)
    except MalformedMessage:
        return True
    return False


@pytest.mark.usefixtures("owned_node")
@FUZZ
@given(bodies=st.lists(message_bodies() | owned_payloads.map(json.dumps), min_size=1, max_size=10))
def test_any_sqs_batch_is_acknowledged_without_a_raise_and_malformed_messages_are_counted(
    make_processor: Any, functions: Any, capsys: Any, bodies: list[str]
) -> None:
    interruption, _ = functions
    interruption.processor = make_processor(CountingReplacement(), state=False)
    batch = events.sqs_event(
        [events.sqs_record(body, message_id=f"m-{i}", region="us-west-2") for i, body in enumerate(bodies)]
    )
    capsys.readouterr()

    response = interruption.handler(batch, FakeLambdaContext())

    assert response == {"batchItemFailures": []}, "a healthy API server: nothing goes back to the queue"
    emitted = capsys.readouterr().out
    assert "Traceback" not in emitted
    malformed = sum(_malformed(body) for body in bodies)
    OUTCOMES["sqs acted"] += emitted.count('"InterruptionsHandled"')
    if malformed:
        assert '"MalformedMessages"' in emitted, "each malformed message is counted"
    OUTCOMES["sqs messages"] += len(bodies)
    OUTCOMES["sqs malformed (acknowledged, counted)"] += malformed


@pytest.mark.usefixtures("owned_node")
@FUZZ
@given(event=st.one_of(st.sampled_from(PAYLOADS), owned_payloads, mutated_payloads()))
def test_any_eventbridge_event_on_the_direct_path_gets_a_disposition(
    make_processor: Any, functions: Any, event: Any
) -> None:
    _, spot_events = functions
    spot_events.processor = make_processor(CountingReplacement(), state=False)

    result = spot_events.handler(
        json.loads(json.dumps(event)), FakeLambdaContext(function_name="nodewright-spot-events")
    )

    assert isinstance(result, dict)
    assert result.get("disposition"), result
    OUTCOMES[f"direct: {result['disposition']}"] += 1
