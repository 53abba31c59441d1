"""What every flow needs, bundled once per container: settings, cluster, cloud, state, telemetry, clock.

A flow (provisioning, interruption, disruption) receives one ``Context`` instead of
reaching for globals, so tests hand it fakes and the sandbox hands it the real
clients pointed at the emulator and moto. Building it is lazy about imports: the
kubernetes client and boto3 are only imported when ``Context.connect`` runs, so a
handler module that merely imports this file stays cheap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nodewright.settings import Settings
    from nodewright.state.interfaces import CloudProvider, Cluster, MarkerStore


class Clock(Protocol):
    """Time as the flows see it; tests substitute a clock they can advance."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


@dataclass
class Context:
    """One container's handles on the world: ``cluster`` and ``cloud`` are the protocols of
    ``nodewright.state.interfaces`` (the real ones talk to the API server and EC2; tests hand in
    the fakes of ``tests/fakes.py``); ``store`` keeps the markers a flow needs between invocations
    (the DynamoDB state table), or is None. Nothing here calls boto3 or kubernetes directly."""

    settings: Settings
    cluster: Cluster
    cloud: CloudProvider
    store: MarkerStore | None
    logger: Any
    metrics: Any
    clock: Clock = field(default_factory=SystemClock)

    @classmethod
    def connect(cls, settings: Settings, *, logger: Any = None, metrics: Any = None) -> Context:
        """Build the real clients from settings (EKS token or kubeconfig; boto3 with adaptive retries)."""
        from nodewright import cluster, observability
        from nodewright.cloud.provider import CloudProvider

        provider = CloudProvider.shared(settings)
        return cls(
            settings=settings,
            cluster=cluster.connect(settings),
            cloud=provider,
            store=provider.store,
            logger=logger or observability.logger(),
            metrics=metrics or observability.metrics(),
        )


DEFAULT_INVOCATION_SECONDS = 60.0  # outside Lambda (CLI, sandbox) when no context says otherwise
# Kept back from every invocation's API-server calls: the time to log and report what happened.
REPORT_MARGIN_SECONDS = 2.0


def remaining_seconds(lambda_context: Any) -> float:
    """Time left in this invocation (Lambda's clock), or a default outside Lambda."""
    if lambda_context is None or not hasattr(lambda_context, "get_remaining_time_in_millis"):
        return DEFAULT_INVOCATION_SECONDS
    return float(lambda_context.get_remaining_time_in_millis()) / 1000.0


class ContainerContext:
    """What a function keeps for its warm container's life, built on first use: the settings (read
    from the environment once), then the ``Context`` (EKS endpoint and token, boto3 clients) — the
    per-container cache Lambda recommends. Every handler module holds one; tests and the sandbox
    hand in their own settings or Context instead of the environment's."""

    def __init__(
        self,
        *,
        logger: Any,
        metrics: Any,
        settings: Settings | None = None,
        context: Context | None = None,
    ) -> None:
        self._logger = logger
        self._metrics = metrics
        self._settings = settings if settings is not None else (context.settings if context else None)
        self._context = context
        self._call_deadline: float | None = None
        self._identity: dict[str, str] = {}

    def start_invocation(self, lambda_context: Any) -> float:
        """Note this invocation's time; returns the seconds left. Every API-server call made
        through ``get()`` from now on ends before the invocation does (less a reporting margin)."""
        left = remaining_seconds(lambda_context)
        self._call_deadline = time.monotonic() + left - REPORT_MARGIN_SECONDS
        if self._context is not None:
            self._context.cluster.set_call_deadline(self._call_deadline)
        return left

    def run_as(self, variables: dict[str, str]) -> None:
        """Read the settings with ``variables`` over the process environment (the sandbox: this
        function's own role credentials, where several functions share one process). In Lambda
        each container is a process of its own and this is never called."""
        if self._settings is not None:
            raise RuntimeError("run_as must come before the container reads its settings")
        self._identity = dict(variables)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            import os

            from nodewright.settings import Settings

            self._settings = Settings.from_env({**os.environ, **self._identity} if self._identity else None)
        return self._settings

    @property
    def connected(self) -> bool:
        """Whether ``get`` has built (or was handed) the Context already."""
        return self._context is not None

    def get(self) -> Context:
        if self._context is None:
            self._context = Context.connect(self.settings, logger=self._logger, metrics=self._metrics)
            self._context.cluster.set_call_deadline(self._call_deadline)
        return self._context


def report_aws_unavailable(logger: Any, metrics: Any, error: BaseException) -> dict[str, Any]:
    """As :func:`report_api_unavailable`, for AWS (``cloud.errors.aws_unreachable``): one log line
    and the ``AwsUnavailable`` metric its alarm watches, instead of an invocation traceback."""
    from aws_lambda_powertools.metrics import MetricUnit

    logger.error("AWS unreachable; nothing more this invocation", extra={"error": str(error)})
    metrics.add_metric(name="AwsUnavailable", unit=MetricUnit.Count, value=1)
    return {"error": "AwsUnavailable", "message": str(error)}


def report_api_unavailable(logger: Any, metrics: Any, error: BaseException) -> dict[str, Any]:
    """One log line and one metric (an alarm watches it) when the API server cannot be reached.

    The invocation then ends normally: a scheduled one would only be retried into the same outage,
    and the next tick (or the SQS redelivery) tries again anyway.
    """
    from aws_lambda_powertools.metrics import MetricUnit

    logger.error(
        "Kubernetes API server unavailable; nothing more this invocation", extra={"error": str(error)}
    )
    metrics.add_metric(name="ApiServerUnavailable", unit=MetricUnit.Count, value=1)
    return {"error": "ApiServerUnavailable", "message": str(error)}


def report_out_of_time(logger: Any, metrics: Any, error: BaseException) -> dict[str, Any]:
    """One log line and the ``InvocationsOutOfTime`` metric (its own alarm) when the invocation's time
    ran out before its work: the client's rate limiter refused a call the deadline leaves no time for
    (``cluster.ClientThrottled``). The API server was there; reporting it unreachable would send an
    operator to check endpoint access and access entries for what is a pass slower than the function's
    timeout allows, or a client request rate too low for the work."""
    from aws_lambda_powertools.metrics import MetricUnit

    logger.warning(
        "the invocation's time ran out before its work; the next invocation goes on",
        extra={"error": str(error)},
    )
    metrics.add_metric(name="InvocationsOutOfTime", unit=MetricUnit.Count, value=1)
    return {"error": "OutOfTime", "message": str(error)}


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` says the API server (``ApiUnavailable``) or AWS (``cloud.errors.
    aws_unreachable``) cannot be reached: the invocation can do nothing about it, and says so once
    (``report_outage``) instead of a traceback per object."""
    from nodewright.cloud.errors import aws_unreachable
    from nodewright.cluster.errors import ApiUnavailable

    return isinstance(error, ApiUnavailable) or aws_unreachable(error)


def report_outage(logger: Any, metrics: Any, error: BaseException) -> dict[str, Any] | None:
    """The one-line report of an outage (``is_outage``); None for any other error, which the
    caller raises. Every handler ends an outage this way, so the alarms on
    ``ApiServerUnavailable``, ``AwsUnavailable`` and ``InvocationsOutOfTime`` see it."""
    from nodewright.cluster.errors import ApiUnavailable, ClientThrottled

    if not is_outage(error):
        return None
    if isinstance(error, ClientThrottled):  # an ApiUnavailable to every caller but this report
        return report_out_of_time(logger, metrics, error)
    if isinstance(error, ApiUnavailable):
        return report_api_unavailable(logger, metrics, error)
    return report_aws_unavailable(logger, metrics, error)


def check_scheduled_event(event: Any, logger: Any) -> None:
    """Log the EventBridge scheduled event; a malformed one is logged as such and the pass still
    runs (it carries nothing a pass needs)."""
    from aws_lambda_powertools.utilities.parser import ValidationError, parse
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel

    try:
        scheduled = parse(event=event, model=EventBridgeModel)
    except ValidationError as exc:
        logger.warning("not an EventBridge scheduled event; running a pass anyway", extra={"error": str(exc)})
        return
    logger.debug("scheduled event", extra={"detailType": scheduled.detail_type, "time": str(scheduled.time)})
