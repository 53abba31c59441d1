"""The wake-up webhook's HTTP side (``nodewright.wakeup.webhook``): who gets an answer, who is
woken, and that nothing a stranger sends gets further than a cheap refusal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from nodewright.wakeup import events
from nodewright.wakeup.webhook import BURST, MAX_BODY_BYTES, TokenBucket, Webhook

SECRET = "s" * 20 + "0123456789abcdefghijklmnop"
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


class Recorder:
    """Logger and Metrics stand-ins that keep what they were given."""

    namespace = "Nodewright"

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.metrics: list[str] = []

    def _log(self, message: str, *args: Any, extra: dict[str, Any] | None = None, **_: Any) -> None:
        self.lines.append(f"{message} {json.dumps(extra or {})}")

    info = warning = error = exception = _log

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        self.metrics.append(name)


class Clock:
    def __init__(self) -> None:
        self.mono = 100.0

    def __call__(self) -> float:
        return self.mono


def admission_review(uid: str = "uid-1", **request: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "UPDATE", **request},
        }
    )


@pytest.fixture
def hook() -> tuple[Webhook, list[dict[str, Any]], Recorder, Clock]:
    sent: list[dict[str, Any]] = []
    recorder = Recorder()
    clock = Clock()
    webhook = Webhook(
        secret=lambda: SECRET,
        wake=sent.append,
        logger=recorder,
        metrics=recorder,
        monotonic=clock,
        now=lambda: T0,
        limiter=TokenBucket(50.0, BURST, clock),
    )
    return webhook, sent, recorder, clock


def test_an_admission_review_on_the_secret_path_is_allowed_and_wakes_the_provisioner(hook: Any) -> None:
    webhook, sent, recorder, _clock = hook

    answer = webhook.serve("POST", f"/{SECRET}/admit", admission_review("abc"))

    assert answer.status == 200
    assert answer.body["response"] == {"uid": "abc", "allowed": True}
    assert answer.body["kind"] == "AdmissionReview"
    assert len(sent) == 1
    assert events.sent_at(sent[0]) == T0
    assert recorder.metrics == ["Wakeups"]


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/admit",
        f"/{SECRET}",
        f"/{SECRET}x/admit",
        f"/{SECRET[:-1]}/admit",
        f"/{SECRET}/other",
        f"/{SECRET}/admit/more",
        f"/x/{SECRET}/admit",
    ],
)
def test_any_other_path_is_404_and_wakes_nothing(hook: Any, path: str) -> None:
    webhook, sent, _recorder, _clock = hook

    answer = webhook.serve("POST", path, admission_review())

    assert answer.status == 404
    assert answer.body == {"message": "Not Found"}
    assert sent == []


def test_the_secret_never_reaches_the_logs(hook: Any) -> None:
    webhook, _sent, recorder, _clock = hook
    webhook.serve("POST", f"/{SECRET}/admit", admission_review())
    webhook.serve("POST", f"/{SECRET}/nope", "{}")
    webhook.serve("GET", f"/{SECRET}/admit", "")
    webhook.serve("POST", f"/{SECRET}/admit", "not json")

    assert recorder.lines
    assert not any(SECRET in line for line in recorder.lines)


def test_a_body_over_the_limit_is_413_before_it_is_parsed(hook: Any) -> None:
    webhook, sent, _recorder, _clock = hook
    huge = " " * (MAX_BODY_BYTES["admit"] + 1)

    answer = webhook.serve("POST", f"/{SECRET}/admit", huge)

    assert answer.status == 413
    assert sent == []


def test_a_get_on_the_secret_path_is_405(hook: Any) -> None:
    webhook, sent, _recorder, _clock = hook
    assert webhook.serve("GET", f"/{SECRET}/admit", "").status == 405
    assert sent == []


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        "null",
        '"a string"',
        "{}",
        '{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}',
        '{"apiVersion": "admission.k8s.io/v1", "kind": "ConversionReview", "request": {"uid": "u"}}',
        '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}',
        '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
        "[" * 100_000,
    ],
)
def test_a_body_that_is_not_an_admission_review_is_400_and_wakes_nothing(hook: Any, body: str) -> None:
    webhook, sent, _recorder, _clock = hook

    answer = webhook.serve("POST", f"/{SECRET}/admit", body)

    assert answer.status == 400
    assert sent == []


def test_a_burst_of_reviews_is_one_wakeup_per_second_and_every_review_is_allowed(hook: Any) -> None:
    webhook, sent, recorder, clock = hook
    answers = []
    for i in range(30):  # 30 pods within 0.6 s
        answers.append(webhook.serve("POST", f"/{SECRET}/admit", admission_review(f"u{i}")))
        clock.mono += 0.02
    clock.mono += 1.0
    answers.append(webhook.serve("POST", f"/{SECRET}/admit", admission_review("late")))

    assert all(a.status == 200 and a.body["response"]["allowed"] for a in answers)
    assert len(sent) == 2
    assert recorder.metrics.count("WakeupsCoalesced") == 29


def test_a_dry_run_review_is_allowed_without_a_wakeup(hook: Any) -> None:
    webhook, sent, _recorder, _clock = hook
    answer = webhook.serve("POST", f"/{SECRET}/admit", admission_review(dryRun=True))
    assert answer.body["response"]["allowed"] is True
    assert sent == []


def test_requests_beyond_the_rate_limit_are_429_until_the_bucket_refills(hook: Any) -> None:
    webhook, _sent, _recorder, clock = hook
    statuses = [webhook.serve("POST", "/guess", "{}").status for _ in range(BURST + 5)]

    assert statuses[:BURST] == [404] * BURST
    assert statuses[BURST:] == [429] * 5
    clock.mono += 1.0  # 50 tokens back
    assert webhook.serve("POST", f"/{SECRET}/admit", admission_review()).status == 200


def test_a_failed_wakeup_is_counted_and_the_review_still_allowed_and_the_next_one_retries(
    hook: Any,
) -> None:
    _webhook, _sent, recorder, clock = hook
    calls: list[dict[str, Any]] = []

    def refuse(event: dict[str, Any]) -> None:
        calls.append(event)
        raise RuntimeError("TooManyRequestsException")

    webhook = Webhook(
        secret=lambda: SECRET, wake=refuse, logger=recorder, metrics=recorder, monotonic=clock, now=lambda: T0
    )
    first = webhook.serve("POST", f"/{SECRET}/admit", admission_review())
    second = webhook.serve("POST", f"/{SECRET}/admit", admission_review())

    assert first.body["response"]["allowed"] is True
    assert second.body["response"]["allowed"] is True
    assert len(calls) == 2  # a failure does not hold the next pod back by the coalescing second
    assert recorder.metrics == ["WakeupErrors", "WakeupErrors"]


def test_an_unreadable_or_short_secret_refuses_everything_with_503(hook: Any) -> None:
    _webhook, _sent, recorder, clock = hook
    sent: list[dict[str, Any]] = []

    def unreadable() -> str:
        raise RuntimeError("AccessDenied")

    for source in (unreadable, lambda: "short"):
        webhook = Webhook(secret=source, wake=sent.append, logger=recorder, metrics=recorder, monotonic=clock)
        assert webhook.serve("POST", "/short/admit", admission_review()).status == 503
    assert sent == []


def test_a_bug_inside_is_a_500_not_an_exception(hook: Any) -> None:
    _webhook, _sent, recorder, _clock = hook

    def broken_wake(event: dict[str, Any]) -> None:
        raise AssertionError("unexpected")

    webhook = Webhook(secret=lambda: SECRET, wake=broken_wake, logger=recorder, metrics=recorder)
    webhook._metrics = None  # the failure path itself breaks
    answer = webhook.serve("POST", f"/{SECRET}/admit", admission_review())
    assert answer.status == 500


def test_a_conversion_review_on_the_convert_path_is_converted_with_the_stacks_node_role(hook: Any) -> None:
    _webhook, _sent, recorder, clock = hook
    webhook = Webhook(
        secret=lambda: SECRET,
        wake=lambda e: None,
        logger=recorder,
        metrics=recorder,
        node_role="NodewrightNode-demo",
        monotonic=clock,
    )
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "c1",
            "desiredAPIVersion": "karpenter.k8s.aws/v1",
            "objects": [
                {
                    "apiVersion": "karpenter.k8s.aws/v1beta1",
                    "kind": "EC2NodeClass",
                    "metadata": {"name": "default"},
                    "spec": {
                        "amiFamily": "AL2023",
                        "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                        "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                    },
                }
            ],
        },
    }

    answer = webhook.serve("POST", f"/{SECRET}/convert", json.dumps(review))

    assert answer.status == 200
    response = answer.body["response"]
    assert response["uid"] == "c1"
    assert response["result"]["status"] == "Success"
    assert response["convertedObjects"][0]["spec"]["role"] == "NodewrightNode-demo"
    assert "warnings" not in response  # ConversionResponse has no such field: the warning is logged
    (warned,) = [line for line in recorder.lines if line.startswith("conversion warning")]
    assert "EC2NodeClass default: neither role nor instanceProfile is set" in warned
    assert "NodewrightNode-demo" in warned


def test_the_function_url_answer_is_json_with_the_status() -> None:
    from nodewright.wakeup.webhook import NOT_FOUND

    answer = NOT_FOUND.function_url_response()
    assert answer["statusCode"] == 404
    assert json.loads(answer["body"]) == {"message": "Not Found"}
    assert answer["headers"]["content-type"] == "application/json"


def test_a_wakeup_event_is_told_from_a_schedule_event_and_carries_when_it_was_sent() -> None:
    event = events.wakeup_event(T0, "us-east-1")
    assert events.sent_at(event) == T0
    assert events.sent_at({"source": "aws.events", "time": "2026-12-03T12:00:00Z"}) is None
    assert events.sent_at({"source": events.SOURCE, "time": "yesterday"}) is None
    assert events.sent_at("not an event") is None


def test_the_handler_answers_500_when_the_function_is_misconfigured(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.lambdas import LambdaContext, load_function

    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    app = load_function("webhook")
    event = {
        "version": "2.0",
        "rawPath": "/x/admit",
        "headers": {},
        "requestContext": {"http": {"method": "POST", "path": "/x/admit"}, "requestId": "r"},
        "body": "{}",
        "isBase64Encoded": False,
    }
    answer = app.handler(event, LambdaContext(5, "nodewright-webhook"))
    assert answer["statusCode"] == 500
    assert app.handler({"not": "a url event"}, LambdaContext(5, "nodewright-webhook"))["statusCode"] == 500
