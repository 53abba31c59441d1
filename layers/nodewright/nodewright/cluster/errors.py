"""Errors of the Kubernetes API, classified so callers decide retry vs. give up without parsing bodies.

``transient`` errors (API server unreachable, 5xx, throttling 429 outside eviction) are worth
retrying later — a Lambda handler lets the message go back to its queue; the others will not
succeed by waiting.
"""

from __future__ import annotations

from typing import Any


class ClusterError(Exception):
    """Base of every error raised by ``nodewright.cluster``."""

    transient = False


class ClusterConfigError(ClusterError):
    """The cluster cannot be reached as configured (no kubeconfig, no endpoint); fix the settings."""


class ApiError(ClusterError):
    """A non-2xx answer of the API server, with its ``Status`` body when it sent one."""

    def __init__(
        self, status: int, message: str, *, reason: str = "", body: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}

    @property
    def transient(self) -> bool:  # type: ignore[override]
        return self.status == 429 or self.status >= 500

    @property
    def retry_after_seconds(self) -> float | None:
        """``details.retryAfterSeconds`` of the Status body, when the server gave a positive one."""
        value = (self.body.get("details") or {}).get("retryAfterSeconds")
        # 0 is what the API server sends when it has no hint (a PDB-blocked eviction).
        return float(value) if isinstance(value, int | float) and value > 0 else None


class NotFound(ApiError):
    """404: the object (or its resource type) does not exist."""


class Conflict(ApiError):
    """409: a stale resourceVersion, or the object already exists (``reason == 'AlreadyExists'``)."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Invalid(ApiError):
    """422: the object or patch is invalid (or a finalizer was added to an object being deleted)."""


class ApiUnavailable(ClusterError):
    """The API server could not be reached (connection refused, timeout, TLS failure)."""

    transient = True


class ClientThrottled(ApiUnavailable):
    """The client's own request rate limit (``nodewright.ratelimit``) would hold a call past the
    invocation's deadline: not started, as a call the deadline leaves no time for is not."""


class ServerBusy(ApiError, ApiUnavailable):  # type: ignore[override]  # both say transient: True for 429/5xx
    """429 or 5xx: the server is there but cannot serve now (API Priority and Fairness, overload,
    etcd trouble). An ``ApiError`` (status, ``Retry-After``) and an ``ApiUnavailable``, so a handler
    that ends cleanly with one log line and a metric when the server is unreachable ends the same way
    when it keeps answering 500, instead of raising a traceback."""

    @property
    def turned_away(self) -> bool:
        """A 429 that is not a ``Status``: kube-apiserver's flow control (API Priority and Fairness,
        or max-in-flight) answered with Go's plain-text ``http.Error`` before any handler ran, so the
        request did nothing and may be sent again whatever its verb (a PodDisruptionBudget's 429 on an
        eviction is a ``Status``: the eviction was decided, not turned away)."""
        return self.status == 429 and self.body.get("kind") != "Status"


def error_for(status: int, body: dict[str, Any] | None, fallback_message: str) -> ApiError:
    """Build the right ``ApiError`` subclass from a response's status and decoded body."""
    body = body or {}
    message = str(body.get("message") or fallback_message)
    reason = str(body.get("reason") or "")
    cls: type[ApiError] = {404: NotFound, 409: Conflict, 422: Invalid}.get(status) or (
        ServerBusy if status == 429 or status >= 500 else ApiError
    )
    return cls(status, message, reason=reason, body=body)
