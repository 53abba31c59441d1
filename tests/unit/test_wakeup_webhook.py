"""The wake-up webhook's HTTP side (``nodewright.wakeup.webhook``): who gets an answer, who is
woken (a scheduler's FailedScheduling Event about a Pod, nothing else), that nothing a stranger
sends gets further than a cheap refusal, and that the secret rotates without an outage and never
reaches a log line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import FakeClock
from nodewright.ratelimit import TokenBucket
from nodewright.settings import WEBHOOK_SECRET_MAX_AGE_SECONDS, Settings, SettingsError
from nodewright.wakeup import events
from nodewright.wakeup.webhook import (
    BURST,
    MAX_BODY_BYTES,
    ROTATION_WINDOW,
    SECRET_MISS_REFRESH_SECONDS,
    PathSecrets,
    Webhook,
)

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


def failed_scheduling(**changes: Any) -> dict[str, Any]:
    """kube-scheduler's Event (events.k8s.io/v1) for a pod it could not place."""
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-1.17a", "namespace": "default"},
        "eventTime": "2026-12-03T12:00:00.000000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-ip-10-0-0-1",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web-1", "apiVersion": "v1"},
        "note": "0/3 nodes are available: 3 Insufficient cpu.",
        "type": "Warning",
    }
    event.update(changes)
    return event


EVENTS_V1 = {"group": "events.k8s.io", "version": "v1", "resource": "events"}


def admission_review(uid: str = "uid-1", **request: Any) -> str:
    """An AdmissionReview as the wake-up's configuration sends it (``request`` fields override)."""
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "operation": "CREATE",
                "resource": EVENTS_V1,
                "object": failed_scheduling(),
                **request,
            },
        }
    )


@pytest.fixture
def hook() -> tuple[Webhook, list[dict[str, Any]], Recorder, FakeClock]:
    sent: list[dict[str, Any]] = []
    recorder = Recorder()
    clock = FakeClock(T0)
    webhook = Webhook(
        secrets=lambda: PathSecrets(SECRET),
        wake=sent.append,
        logger=recorder,
        metrics=recorder,
        clock=clock,
        limiter=TokenBucket(50.0, BURST, clock=clock),
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
    assert sent[0]["detail"] == {"reason": "FailedScheduling"}
    assert recorder.metrics == ["Wakeups"]


def test_a_core_v1_failed_scheduling_event_wakes_as_well(hook: Any) -> None:
    """What the events library's fallback (and an older scheduler) writes: involvedObject,
    reportingComponent."""
    webhook, sent, _recorder, _clock = hook
    core_event = {
        "metadata": {"name": "web-1.17a", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1"},
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available",
        "source": {"component": "default-scheduler"},
        "reportingComponent": "default-scheduler",
    }
    resource = {"group": "", "version": "v1", "resource": "events"}

    answer = webhook.serve("POST", f"/{SECRET}/admit", admission_review(resource=resource, object=core_event))

    assert answer.body["response"]["allowed"] is True
    assert len(sent) == 1


@pytest.mark.parametrize(
    "request_changes",
    [
        {"object": failed_scheduling(reason="Scheduled")},
        {"object": failed_scheduling(regarding={"kind": "Node", "name": "n"})},
        {"object": failed_scheduling(reportingController="nodewright")},  # the provisioner's own
        {"operation": "UPDATE"},  # a series update repeats an Event already rung for
        {"resource": {"group": "", "version": "v1", "resource": "configmaps"}, "object": {}},
        {"object": None},
    ],
)
def test_a_review_the_wakeup_does_not_ring_for_is_allowed_and_wakes_nothing(
    hook: Any, request_changes: dict[str, Any]
) -> None:
    webhook, sent, recorder, _clock = hook

    answer = webhook.serve("POST", f"/{SECRET}/admit", admission_review(**request_changes))

    assert answer.status == 200
    assert answer.body["response"]["allowed"] is True
    assert sent == []
    assert any(line.startswith("review ignored") for line in recorder.lines)


def test_a_pods_status_review_from_the_old_configuration_still_wakes_and_says_to_reinstall(
    hook: Any,
) -> None:
    """Until install-webhooks --apply replaces it, a pods/status configuration keeps calling: the
    wake-up still works, and the log says it makes kube-scheduler wait (once per container)."""
    webhook, sent, recorder, clock = hook
    pods_status = {"resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "status"}
    for uid in ("a", "b"):
        review = admission_review(uid, operation="UPDATE", object={"kind": "Pod"}, **pods_status)
        assert webhook.serve("POST", f"/{SECRET}/admit", review).body["response"]["allowed"] is True
        clock.mono += 2.0

    assert [e["detail"] for e in sent] == [{"reason": "PodUnschedulable"}] * 2
    warnings = [line for line in recorder.lines if "install-webhooks --apply" in line]
    assert len(warnings) == 1


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
        secrets=lambda: PathSecrets(SECRET),
        wake=refuse,
        logger=recorder,
        metrics=recorder,
        clock=clock,
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

    def unreadable() -> PathSecrets:
        raise RuntimeError("AccessDenied")

    for source in (unreadable, lambda: PathSecrets("short")):
        webhook = Webhook(secrets=source, wake=sent.append, logger=recorder, metrics=recorder, clock=clock)
        assert webhook.serve("POST", "/short/admit", admission_review()).status == 503
    assert sent == []


def test_a_bug_inside_is_a_500_not_an_exception(hook: Any) -> None:
    _webhook, _sent, recorder, _clock = hook

    def broken_wake(event: dict[str, Any]) -> None:
        raise AssertionError("unexpected")

    webhook = Webhook(
        secrets=lambda: PathSecrets(SECRET), wake=broken_wake, logger=recorder, metrics=recorder
    )
    webhook._metrics = None  # the failure path itself breaks
    answer = webhook.serve("POST", f"/{SECRET}/admit", admission_review())
    assert answer.status == 500


def test_a_conversion_review_on_the_convert_path_is_converted_with_the_stacks_node_role(hook: Any) -> None:
    _webhook, _sent, recorder, clock = hook
    webhook = Webhook(
        secrets=lambda: PathSecrets(SECRET),
        wake=lambda e: None,
        logger=recorder,
        metrics=recorder,
        node_role="NodewrightNode-demo",
        clock=clock,
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
    from sandbox.runtime.lambdas import LambdaContext, load_function

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


OLD = "o" * 20 + "0123456789abcdefghijklmnop"
NEW = "n" * 20 + "0123456789abcdefghijklmnop"


class Rotating:
    """Secrets Manager's two labels as a test moves them, counting reads."""

    def __init__(self, secrets: PathSecrets) -> None:
        self.secrets = secrets
        self.reads = 0
        self.fail = False

    def __call__(self) -> PathSecrets:
        self.reads += 1
        if self.fail:
            raise RuntimeError("ThrottlingException: Rate exceeded")
        return self.secrets


def rotating_hook(
    source: Rotating,
    clock: FakeClock,
    recorder: Recorder,
    max_age: float = WEBHOOK_SECRET_MAX_AGE_SECONDS,
) -> Webhook:
    return Webhook(
        secrets=source,
        wake=lambda event: None,
        logger=recorder,
        metrics=recorder,
        clock=clock,
        limiter=TokenBucket(1000.0, 1000, clock=clock),
        coalesce_seconds=0.0,
        secret_max_age_seconds=max_age,
    )


def _status(webhook: Webhook, secret: str) -> int:
    return webhook.serve("POST", f"/{secret}/admit", admission_review()).status


def test_during_the_rotation_window_both_secrets_are_accepted_and_after_it_only_the_new_one() -> None:
    source = Rotating(PathSecrets(NEW, OLD, T0 - timedelta(minutes=5)))
    clock, recorder = FakeClock(T0), Recorder()
    webhook = rotating_hook(source, clock, recorder)

    assert _status(webhook, NEW) == 200
    assert _status(webhook, OLD) == 200  # the API server has not been given the new path yet
    assert recorder.metrics.count("PreviousSecretRequests") == 1

    clock.moment = T0 - timedelta(minutes=5) + ROTATION_WINDOW
    assert _status(webhook, OLD) == 404
    assert _status(webhook, NEW) == 200


def test_a_warm_container_follows_a_rotation_without_a_redeploy() -> None:
    """Reread every WEBHOOK_SECRET_MAX_AGE_SECONDS, and sooner (at most every SECRET_MISS_REFRESH_SECONDS)
    when the API server already calls a path this container does not know."""
    source = Rotating(PathSecrets(OLD))
    clock, recorder = FakeClock(T0), Recorder()
    webhook = rotating_hook(source, clock, recorder)
    assert _status(webhook, OLD) == 200

    source.secrets = PathSecrets(NEW, OLD, T0)  # put-secret-value, then install-webhooks at once
    clock.mono += 1.0
    assert _status(webhook, NEW) == 404  # read a second ago: not reread yet
    clock.mono += SECRET_MISS_REFRESH_SECONDS
    assert _status(webhook, NEW) == 200
    assert _status(webhook, OLD) == 200  # the window is open

    source.secrets = PathSecrets(NEW)  # the window closed early: the AWSPREVIOUS label removed
    clock.mono += WEBHOOK_SECRET_MAX_AGE_SECONDS
    assert _status(webhook, OLD) == 404
    assert _status(webhook, NEW) == 200


def test_a_withdrawn_previous_secret_is_refused_after_the_configured_reread_interval() -> None:
    """The stack's interval (WEBHOOK_SECRET_MAX_AGE_SECONDS), not the default: a container keeps the
    previous secret until its interval is up, and refuses it from then on."""
    source = Rotating(PathSecrets(NEW, OLD, T0))
    clock, recorder = FakeClock(T0), Recorder()
    webhook = rotating_hook(source, clock, recorder, max_age=5.0)
    assert _status(webhook, OLD) == 200

    source.secrets = PathSecrets(NEW)  # the AWSPREVIOUS label removed
    clock.mono += 4.9
    assert _status(webhook, OLD) == 200  # read 4.9 s ago: not reread yet
    assert source.reads == 1
    clock.mono += 0.1
    assert _status(webhook, OLD) == 404
    assert _status(webhook, NEW) == 200
    assert source.reads == 2


def test_the_reread_interval_is_a_setting_a_minute_by_default_and_a_bad_one_is_refused() -> None:
    env = {"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"}
    assert Settings.from_env(env).webhook_secret_max_age_seconds == WEBHOOK_SECRET_MAX_AGE_SECONDS == 60.0
    shorter = Settings.from_env({**env, "WEBHOOK_SECRET_MAX_AGE_SECONDS": "2.5"})
    assert shorter.webhook_secret_max_age_seconds == 2.5
    for bad in ("0", "-1", "soon", "nan"):
        with pytest.raises(
            SettingsError, match=f"WEBHOOK_SECRET_MAX_AGE_SECONDS='{bad}': use a number above"
        ):
            Settings.from_env({**env, "WEBHOOK_SECRET_MAX_AGE_SECONDS": bad})


def test_a_strangers_guesses_reread_the_secret_at_most_once_per_miss_interval() -> None:
    source = Rotating(PathSecrets(NEW))
    clock, recorder = FakeClock(T0), Recorder()
    webhook = rotating_hook(source, clock, recorder)
    for guess in range(200):  # 200 guesses over 20 s
        assert _status(webhook, f"{guess:048d}") == 404
        clock.mono += 0.1

    assert source.reads <= 1 + int(20 / SECRET_MISS_REFRESH_SECONDS) + 1


def test_a_container_that_cannot_reread_the_secret_keeps_serving_with_what_it_read() -> None:
    source = Rotating(PathSecrets(NEW))
    clock, recorder = FakeClock(T0), Recorder()
    webhook = rotating_hook(source, clock, recorder)
    assert _status(webhook, NEW) == 200

    source.fail = True
    clock.mono += WEBHOOK_SECRET_MAX_AGE_SECONDS
    assert _status(webhook, NEW) == 200
    assert any("cannot be reread" in line and "ThrottlingException" in line for line in recorder.lines)
    assert not any(NEW in line for line in recorder.lines)


@pytest.mark.parametrize("caller", ["function URL", "load balancer"])
def test_the_function_never_logs_the_secret_for_a_wrong_right_or_previous_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caller: str
) -> None:
    """The handler as deployed, its secret in (moto's) Secrets Manager, rotated once; every log
    line it writes captured, Powertools told to log events and everything at DEBUG (botocore's
    response bodies included, the secret's GetSecretValue among them). The function URL's event
    (-c wakeup=public) and the internal load balancer's (-c wakeup=private) alike: the same secret
    path, the same rotation, each answered in its caller's shape."""
    event = _url_event if caller == "function URL" else _load_balancer_event
    import io
    import logging

    import boto3
    from moto import mock_aws
    from nodewright.observability import logger_level

    from sandbox.runtime.lambdas import LambdaContext, load_function

    wrong = "w" * 48
    for key, value in {
        "CLUSTER_NAME": "demo",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "WAKE_FUNCTION": "arn:aws:lambda:us-east-1:123456789012:function:nodewright-provisioner:wakeup",
        "POWERTOOLS_LOGGER_LOG_EVENT": "true",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        secrets = boto3.client("secretsmanager", "us-east-1")
        arn = secrets.create_secret(Name="path", SecretString=OLD)["ARN"]
        secrets.put_secret_value(SecretId=arn, SecretString=NEW)
        monkeypatch.setenv("WEBHOOK_SECRET_ARN", arn)
        app = load_function("webhook")
        capsys.readouterr()  # only what the function writes from here on
        everything = io.StringIO()
        handler = logging.StreamHandler(everything)
        root = logging.getLogger()
        root.addHandler(handler)
        previous_level = root.level
        root.setLevel(logging.DEBUG)
        try:
            with logger_level("DEBUG"):
                answers = {
                    secret: app.handler(event(f"/{secret}/admit", admission_review()), LambdaContext(5))
                    for secret in (wrong, NEW, OLD)
                }
        finally:
            root.removeHandler(handler)
            root.setLevel(previous_level)

    assert {s: a["statusCode"] for s, a in answers.items()} == {wrong: 404, NEW: 200, OLD: 200}
    assert json.loads(answers[NEW]["body"])["response"]["allowed"] is True
    if caller == "load balancer":  # ELB needs the status line; a function URL has none
        assert {a.get("statusDescription") for a in answers.values()} == {"404 Not Found", "200 OK"}
    else:
        assert all("statusDescription" not in a for a in answers.values())
    written = capsys.readouterr().out + everything.getvalue()
    assert "request refused" in written  # the log was captured
    for secret in (wrong, NEW, OLD):
        assert secret not in written


def _url_event(path: str, body: str) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "timeout=1s",
        "headers": {"content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": path}, "requestId": "r-1"},
        "body": body,
        "isBase64Encoded": False,
    }


def _load_balancer_event(path: str, body: str) -> dict[str, Any]:
    """What an Application Load Balancer sends a Lambda target (the private wake-up): the body
    base64-encoded, as ELB does for a request it does not take for text."""
    import base64

    return {
        "requestContext": {
            "elb": {
                "targetGroupArn": "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/"
                "nodewright-wakeup-2a97516c354b68/0123456789abcdef"
            }
        },
        "httpMethod": "POST",
        "path": path,
        "queryStringParameters": {"timeout": "1s"},
        "headers": {"content-type": "application/json", "host": "internal-x.us-east-1.elb.amazonaws.com"},
        "body": base64.b64encode(body.encode()).decode(),
        "isBase64Encoded": True,
    }
