"""The function URL's HTTP side: ``POST /<secret>/admit`` and ``POST /<secret>/convert``.

The URL is public (``AuthType NONE``: kube-apiserver cannot sign requests), so every request is
judged before anything is parsed, cheapest check first, and the answer to a stranger says nothing:

1. more than ``RATE_PER_SECOND`` requests per container (bursts of ``BURST``): **429** (the API
   server then applies the webhook's ``failurePolicy: Ignore``);
2. a path that is not ``/<secret>/admit`` or ``/<secret>/convert``: **404** (the secret compared
   in constant time; never logged);
3. not a POST: **405**; a body over the path's limit (``MAX_BODY_BYTES``): **413**;
4. not JSON, or not the review that path takes (``AdmissionReview`` admission.k8s.io/v1 with a
   request uid; ``ConversionReview`` apiextensions.k8s.io/v1): **400**;
5. an admission review: answered ``allowed: true`` with its uid, always. The provisioner is woken
   unless this container woke it less than ``COALESCE_SECONDS`` ago (a burst of unschedulable pods
   is one wake-up, not hundreds) or the request is a dry run. A failed wake-up is logged and
   counted; the answer is still ``allowed``.
6. a conversion review: ``api.conversion_review.review`` (the stack's node role fills in an
   EC2NodeClass with neither role nor instanceProfile: logged as a warning and recorded in an
   annotation, since a ConversionReview response has no warnings field).
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nodewright.wakeup.events import wakeup_event

ADMIT = "admit"
CONVERT = "convert"
# An AdmissionReview of a pods/status update holds the pod twice (object and oldObject): tens of
# KiB for most pods. A ConversionReview may hold a whole list read through v1beta1 (a large
# cluster's NodeClaims): Lambda's own request limit is 6 MB.
MAX_BODY_BYTES = {ADMIT: 512 * 1024, CONVERT: 5 * 1024 * 1024}
RATE_PER_SECOND = 50.0
BURST = 100
# At most one wake-up per container this often: the provisioner's first pass batches what arrives
# within Karpenter's batching window (1 s idle) after it, so a closer wake-up adds nothing.
COALESCE_SECONDS = 1.0
ADMISSION_API_VERSION = "admission.k8s.io/v1"


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]

    def function_url_response(self) -> dict[str, Any]:
        """What a Lambda function URL returns to its caller."""
        return {
            "statusCode": self.status,
            "headers": {"content-type": "application/json"},
            "body": json.dumps(self.body, separators=(",", ":")),
            "isBase64Encoded": False,
        }


def refusal(status: int, message: str) -> Answer:
    return Answer(status, {"message": message})


NOT_FOUND = refusal(404, "Not Found")


@dataclass
class TokenBucket:
    """``rate`` requests per second with bursts of ``burst``, per container; thread-safe."""

    rate: float
    burst: float
    monotonic: Callable[[], float] = time.monotonic
    _tokens: float = field(init=False)
    _at: float = field(init=False)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._tokens = self.burst
        self._at = self.monotonic()

    def take(self) -> bool:
        with self._lock:
            now = self.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


class Webhook:
    """One container's webhook: its secret (read once, on the first request), the wake-up it sends,
    the rate limit and the coalescing clock.

    ``secret`` returns the URL's secret path segment; ``wake`` sends one wake-up event (an
    asynchronous Lambda invocation); ``metrics`` is Powertools Metrics.
    """

    def __init__(
        self,
        *,
        secret: Callable[[], str],
        wake: Callable[[dict[str, Any]], None],
        logger: Any,
        metrics: Any,
        node_role: str | None = None,
        region: str = "",
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        limiter: TokenBucket | None = None,
        coalesce_seconds: float = COALESCE_SECONDS,
    ) -> None:
        self._secret_source = secret
        self._secret: str | None = None
        self._wake = wake
        self._log = logger
        self._metrics = metrics
        self._node_role = node_role
        self._region = region
        self._monotonic = monotonic
        self._now = now
        self._limiter = limiter or TokenBucket(RATE_PER_SECOND, BURST, monotonic)
        self._coalesce = coalesce_seconds
        self._last_wake: float | None = None
        self._wake_lock = threading.Lock()

    def serve(self, method: str, path: str, body: str) -> Answer:
        """The answer to one request; never raises (a bug answers 500, which the API server's
        ``failurePolicy: Ignore`` treats as no webhook at all)."""
        try:
            return self._serve(method, path, body)
        except Exception as exc:
            failed = refusal(500, "Internal Server Error")
            try:
                self._log.exception("webhook failed", extra={"error": type(exc).__name__})
                return self._refuse("Error", failed)
            except Exception:  # the logger or the metrics themselves
                return failed

    def _serve(self, method: str, path: str, body: str) -> Answer:
        if not self._limiter.take():
            return self._refuse("RateLimited", refusal(429, "Too Many Requests"))
        try:
            secret = self._secret_value()
        except Exception as exc:  # no secret, no way to tell a caller from a stranger
            self._log.error("the webhook secret cannot be read", extra={"error": str(exc)})
            return self._refuse("SecretUnavailable", refusal(503, "Service Unavailable"))
        action = _action(path, secret)
        if action is None:
            return self._refuse("NotFound", NOT_FOUND)
        if method.upper() != "POST":
            return self._refuse("MethodNotAllowed", refusal(405, "Method Not Allowed"))
        if len(body) > MAX_BODY_BYTES[action]:
            limit = MAX_BODY_BYTES[action]
            return self._refuse("TooLarge", refusal(413, f"a review is at most {limit} bytes"))
        try:
            review = json.loads(body)
        except (ValueError, RecursionError):
            return self._refuse("NotAReview", refusal(400, "the body is not JSON"))
        if action == ADMIT:
            return self._admit(review)
        return self._convert(review)

    def _secret_value(self) -> str:
        if self._secret is None:
            value = self._secret_source().strip()
            if len(value) < 32:
                raise ValueError("the secret is shorter than 32 characters: not unguessable")
            self._secret = value
        return self._secret

    def _admit(self, review: Any) -> Answer:
        request = review.get("request") if isinstance(review, dict) else None
        if (
            not isinstance(request, dict)
            or review.get("apiVersion") != ADMISSION_API_VERSION
            or review.get("kind") != "AdmissionReview"
            or not isinstance(request.get("uid"), str)
        ):
            return self._refuse("NotAReview", refusal(400, "not an admission.k8s.io/v1 AdmissionReview"))
        if not request.get("dryRun"):
            self._maybe_wake()
        return Answer(
            200,
            {
                "apiVersion": ADMISSION_API_VERSION,
                "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": True},
            },
        )

    def _maybe_wake(self) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        with self._wake_lock:
            now = self._monotonic()
            if self._last_wake is not None and now - self._last_wake < self._coalesce:
                self._metrics.add_metric(name="WakeupsCoalesced", unit=MetricUnit.Count, value=1)
                return
            self._last_wake = now
        try:
            self._wake(wakeup_event(self._now(), self._region))
        except Exception as exc:  # the schedule still provisions; the next unschedulable pod tries again
            with self._wake_lock:
                self._last_wake = None
            self._log.error("could not wake the provisioner", extra={"error": str(exc)})
            self._metrics.add_metric(name="WakeupErrors", unit=MetricUnit.Count, value=1)
            return
        self._metrics.add_metric(name="Wakeups", unit=MetricUnit.Count, value=1)
        self._log.info("provisioner woken")

    def _convert(self, review: Any) -> Answer:
        from nodewright.api import conversion_review

        request = review.get("request") if isinstance(review, dict) else None
        if (
            not isinstance(request, dict)
            or review.get("apiVersion") != conversion_review.REVIEW_API_VERSION
            or review.get("kind") != "ConversionReview"
        ):
            return self._refuse("NotAReview", refusal(400, "not an apiextensions.k8s.io/v1 ConversionReview"))
        warnings: list[str] = []
        answer = conversion_review.review(review, node_role=self._node_role, warnings=warnings)
        for warning in warnings:  # a ConversionReview cannot carry them to the client: logged here
            self._log.warning("conversion warning", extra={"warning": warning})
        result = answer["response"]["result"]
        if result["status"] != "Success":
            self._log.warning("conversion refused", extra={"message": result.get("message")})
        else:
            self._log.info(
                "converted",
                extra={
                    "objects": len(answer["response"]["convertedObjects"]),
                    "to": request.get("desiredAPIVersion"),
                },
            )
        return Answer(200, answer)

    def _refuse(self, reason: str, answer: Answer) -> Answer:
        from aws_lambda_powertools.metrics import MetricUnit, single_metric

        with single_metric(
            name="WebhookRefused", unit=MetricUnit.Count, value=1, namespace=self._metrics.namespace
        ) as metric:
            metric.add_dimension(name="Reason", value=reason)
        self._log.info("request refused", extra={"status": answer.status, "reason": reason})
        return answer


def _action(path: str, secret: str) -> str | None:
    """``admit`` or ``convert`` for ``/<secret>/<action>``; None for anything else."""
    parts = path.strip("/").split("/")
    if len(parts) != 2 or parts[1] not in (ADMIT, CONVERT):
        # Still compare: a wrong action must not take less time than a wrong secret.
        hmac.compare_digest(parts[0].encode(), secret.encode())
        return None
    return parts[1] if hmac.compare_digest(parts[0].encode(), secret.encode()) else None
