"""The function URL's HTTP side: ``POST /<secret>/admit`` and ``POST /<secret>/convert``.

The URL is public (``AuthType NONE``: kube-apiserver cannot sign requests), so every request is
judged before anything is parsed, cheapest check first, and the answer to a stranger says nothing:

1. more than ``RATE_PER_SECOND`` requests per container (bursts of ``BURST``): **429** (the API
   server then applies the webhook's ``failurePolicy: Ignore``);
2. a path that is not ``/<secret>/admit`` or ``/<secret>/convert``: **404** (the secrets compared
   in constant time; never logged, never in an answer);
3. not a POST: **405**; a body over the path's limit (``MAX_BODY_BYTES``): **413**;
4. not JSON, or not the review that path takes (``AdmissionReview`` admission.k8s.io/v1 with a
   request uid; ``ConversionReview`` apiextensions.k8s.io/v1): **400**;
5. an admission review: answered ``allowed: true`` with its uid, always. The provisioner is woken
   when the review is what the wake-up's configuration sends (``wake_reason``: the CREATE of a
   ``FailedScheduling`` Event about a Pod, or a pod's status update from a pods/status configuration
   installed before the wake-up moved to Events, with a warning to reinstall), unless this
   container woke it less than ``COALESCE_SECONDS`` ago (a burst of unschedulable pods is one
   wake-up, not hundreds) or the request is a dry run. Nothing else in the review is used: the
   provisioner reads the cluster. A failed wake-up is logged and counted; the answer is still
   ``allowed``.
6. a conversion review: ``api.conversion_review.review`` (the stack's node role fills in an
   EC2NodeClass with neither role nor instanceProfile: logged as a warning and recorded in an
   annotation, since a ConversionReview response has no warnings field).

**The secret rotates without an outage.** It is Secrets Manager's: ``AWSCURRENT`` and, after a
rotation, ``AWSPREVIOUS`` (``PutSecretValue`` moves the labels itself). Both are accepted while the
current version is younger than ``ROTATION_WINDOW`` (the API server keeps calling the old path
until ``install-webhooks --apply`` gives it the new one); then the previous one is refused, and an
operator can end the window at once by removing the ``AWSPREVIOUS`` label (docs/deploy.md). A
container rereads both at least every ``secret_max_age_seconds`` (a setting the stack sets,
``settings.WEBHOOK_SECRET_MAX_AGE_SECONDS``: a minute by default), and at most every
``SECRET_MISS_REFRESH_SECONDS`` when a path matches neither (the new configuration reached the API
server before this container's cache expired), so warm containers follow a rotation without a
redeploy and a stranger's guesses cost at most one read per that interval. A container that cannot
reread keeps what it read last.
"""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from nodewright.api.labels import EVENT_COMPONENT, FAILED_SCHEDULING
from nodewright.context import Clock, SystemClock
from nodewright.ratelimit import TokenBucket
from nodewright.settings import WEBHOOK_SECRET_MAX_AGE_SECONDS
from nodewright.wakeup.events import POD_UNSCHEDULABLE, wakeup_event

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
# The secret (reread at least every settings.webhook_secret_max_age_seconds by a warm container): at
# most this often when a path matches none of the known ones; the previous one accepted while the
# current is younger than the window.
SECRET_MISS_REFRESH_SECONDS = 10.0
ROTATION_WINDOW = timedelta(hours=24)
MIN_SECRET_LENGTH = 32


@dataclass(frozen=True)
class PathSecrets:
    """The URL's secret path segment as Secrets Manager holds it: ``AWSCURRENT``, and ``AWSPREVIOUS``
    with the time the current version was created (None when the secret was never rotated)."""

    current: str
    previous: str | None = None
    current_since: datetime | None = None


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

    def load_balancer_response(self) -> dict[str, Any]:
        """What a Lambda target returns to an Application Load Balancer (the private wake-up): the
        same, with the status line ELB requires."""
        from http import HTTPStatus

        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = ""
        return {**self.function_url_response(), "statusDescription": f"{self.status} {phrase}".strip()}


def refusal(status: int, message: str) -> Answer:
    return Answer(status, {"message": message})


NOT_FOUND = refusal(404, "Not Found")


class Webhook:
    """One container's webhook: its secrets (read on the first request, reread as the module says),
    the wake-up it sends, the rate limit and the coalescing clock.

    ``secrets`` reads the URL's secret path segments (:class:`PathSecrets`), reread every
    ``secret_max_age_seconds``; ``wake`` sends one wake-up event (an asynchronous Lambda
    invocation); ``metrics`` is Powertools Metrics.
    """

    def __init__(
        self,
        *,
        secrets: Callable[[], PathSecrets],
        wake: Callable[[dict[str, Any]], None],
        logger: Any,
        metrics: Any,
        node_role: str | None = None,
        region: str = "",
        clock: Clock | None = None,
        limiter: TokenBucket | None = None,
        coalesce_seconds: float = COALESCE_SECONDS,
        secret_max_age_seconds: float = WEBHOOK_SECRET_MAX_AGE_SECONDS,
    ) -> None:
        self._secret_source = secrets
        self._secret_max_age = secret_max_age_seconds
        self._secrets: PathSecrets | None = None
        self._secrets_read_at = 0.0
        self._secrets_lock = threading.Lock()
        self._warned_pods_status = False
        self._wake = wake
        self._log = logger
        self._metrics = metrics
        self._node_role = node_role
        self._region = region
        self._clock = clock = clock or SystemClock()
        self._limiter = limiter or TokenBucket(RATE_PER_SECOND, BURST, clock=clock)
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
        if not self._limiter.try_accept():
            return self._refuse("RateLimited", refusal(429, "Too Many Requests"))
        try:
            action = self._route(path)
        except Exception as exc:  # no secret, no way to tell a caller from a stranger
            self._log.error("the webhook secret cannot be read", extra={"error": _error_text(exc)})
            return self._refuse("SecretUnavailable", refusal(503, "Service Unavailable"))
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

    def _route(self, path: str) -> str | None:
        """``admit`` or ``convert`` for a path under an accepted secret, else None; a miss rereads
        the secrets (at most every ``SECRET_MISS_REFRESH_SECONDS``) and tries once more."""
        action, previous = _action(path, self._accepted(miss=False))
        if action is None:
            action, previous = _action(path, self._accepted(miss=True))
        if action is not None and previous:
            from aws_lambda_powertools.metrics import MetricUnit

            # The API server still calls the path the rotation replaced: install-webhooks is due.
            self._metrics.add_metric(name="PreviousSecretRequests", unit=MetricUnit.Count, value=1)
        return action

    def _accepted(self, *, miss: bool) -> tuple[str, str | None]:
        """(current, previous while the rotation window is open); reread when too old."""
        with self._secrets_lock:
            age = self._clock.monotonic() - self._secrets_read_at
            due = SECRET_MISS_REFRESH_SECONDS if miss else self._secret_max_age
            if self._secrets is None or age >= due:
                try:
                    self._secrets = _checked(self._secret_source())
                except Exception as exc:
                    from aws_lambda_powertools.metrics import MetricUnit

                    # Alarmed on (WebhookSecretUnreadable): a role, key or secret problem to fix.
                    self._metrics.add_metric(name="WebhookSecretErrors", unit=MetricUnit.Count, value=1)
                    if self._secrets is None:
                        raise
                    # Keep serving with what was read last; say so (never the values).
                    self._log.error("the webhook secret cannot be reread", extra={"error": _error_text(exc)})
                self._secrets_read_at = self._clock.monotonic()
            secrets = self._secrets
        since = secrets.current_since
        in_window = since is not None and self._clock.now() - since < ROTATION_WINDOW
        return secrets.current, secrets.previous if in_window else None

    def _admit(self, review: Any) -> Answer:
        request = review.get("request") if isinstance(review, dict) else None
        if (
            not isinstance(request, dict)
            or review.get("apiVersion") != ADMISSION_API_VERSION
            or review.get("kind") != "AdmissionReview"
            or not isinstance(request.get("uid"), str)
        ):
            return self._refuse("NotAReview", refusal(400, "not an admission.k8s.io/v1 AdmissionReview"))
        reason = wake_reason(request)
        if reason is None:
            # Not what the wake-up's configuration sends: allowed, and nobody woken for it.
            self._log.info("review ignored", extra={"resource": _resource_name(request)})
        elif not request.get("dryRun"):
            if reason == POD_UNSCHEDULABLE and not self._warned_pods_status:
                self._warned_pods_status = True
                self._log.warning(
                    "the installed wake-up configuration is the pods/status one, which makes "
                    "kube-scheduler wait for this URL: run nodewright install-webhooks --apply"
                )
            self._maybe_wake(reason)
        return Answer(
            200,
            {
                "apiVersion": ADMISSION_API_VERSION,
                "kind": "AdmissionReview",
                "response": {"uid": request["uid"], "allowed": True},
            },
        )

    def _maybe_wake(self, reason: str) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        with self._wake_lock:
            now = self._clock.monotonic()
            if self._last_wake is not None and now - self._last_wake < self._coalesce:
                self._metrics.add_metric(name="WakeupsCoalesced", unit=MetricUnit.Count, value=1)
                return
            self._last_wake = now
        try:
            self._wake(wakeup_event(self._clock.now(), self._region, reason))
        except Exception as exc:  # the schedule still provisions; the next unschedulable pod tries again
            with self._wake_lock:
                self._last_wake = None
            self._log.error("could not wake the provisioner", extra={"error": str(exc)})
            self._metrics.add_metric(name="WakeupErrors", unit=MetricUnit.Count, value=1)
            return
        self._metrics.add_metric(name="Wakeups", unit=MetricUnit.Count, value=1)
        self._log.info("provisioner woken", extra={"reason": reason})

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
        from aws_lambda_powertools.metrics import MetricUnit

        from nodewright.observability import emit_metric

        emit_metric(
            name="WebhookRefused",
            unit=MetricUnit.Count,
            value=1,
            dimensions={"Reason": reason},
            namespace=self._metrics.namespace,
        )
        self._log.info("request refused", extra={"status": answer.status, "reason": reason})
        return answer


def wake_reason(request: dict[str, Any]) -> str | None:
    """What an admission request says happened, when it is one the wake-up rings for:
    ``FailedScheduling`` (a scheduler's Event about a Pod, in either group, not Nodewright's own),
    ``PodUnschedulable`` (a pod's status update: the pods/status configuration), else None."""
    resource = _mapping(request.get("resource"))
    obj = _mapping(request.get("object"))
    if resource.get("resource") == "events" and request.get("operation") == "CREATE":
        regarding = obj.get("regarding") if "regarding" in obj else obj.get("involvedObject")
        reporter = obj.get("reportingController") or obj.get("reportingComponent")
        if (
            obj.get("reason") == FAILED_SCHEDULING
            and isinstance(regarding, dict)
            and regarding.get("kind") == "Pod"
            and reporter != EVENT_COMPONENT
        ):
            return FAILED_SCHEDULING
        return None
    if resource.get("resource") == "pods" and request.get("subResource") == "status":
        return POD_UNSCHEDULABLE
    return None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _resource_name(request: dict[str, Any]) -> str:
    resource = _mapping(request.get("resource"))
    name = "/".join(str(resource.get(k) or "") for k in ("group", "version", "resource"))
    return name[:100]


def _checked(secrets: PathSecrets) -> PathSecrets:
    """``secrets`` with a current one long enough to be unguessable; a short previous one dropped."""
    current = secrets.current.strip()
    if len(current) < MIN_SECRET_LENGTH:
        raise ValueError(f"the secret is shorter than {MIN_SECRET_LENGTH} characters: not unguessable")
    previous = (secrets.previous or "").strip()
    return PathSecrets(
        current, previous if len(previous) >= MIN_SECRET_LENGTH else None, secrets.current_since
    )


def _error_text(exc: Exception) -> str:
    """An exception's text for a log line: its type and message. AWS's errors name the secret's ARN,
    never its value (that is only ever in GetSecretValue's response), and this module raises none
    that holds one."""
    return f"{type(exc).__name__}: {exc}"[:500]


def _action(path: str, secrets: tuple[str, str | None]) -> tuple[str | None, bool]:
    """(``admit`` or ``convert``, whether the previous secret matched) for ``/<secret>/<action>``;
    (None, False) for anything else. Every candidate is compared, in constant time, whatever
    matched first: a wrong action or secret takes as long as a right one."""
    parts = path.strip("/").split("/")
    given = parts[0].encode()
    current, previous = secrets
    matches_current = hmac.compare_digest(given, current.encode())
    matches_previous = hmac.compare_digest(given, (previous or current).encode()) and previous is not None
    if len(parts) != 2 or parts[1] not in (ADMIT, CONVERT) or not (matches_current or matches_previous):
        return None, False
    return parts[1], not matches_current
