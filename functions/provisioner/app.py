"""Provisioner: EventBridge schedule (every minute), or a wake-up from the webhook → poll pending
pods, plan, launch.

Thin on purpose: tell a wake-up (``nodewright.wakeup.events``) from the scheduled event, reuse the
per-container context, call ``nodewright.provisioning.run``. Module import stays cheap (< 0.8 s):
the kubernetes client and boto3 load on the first invocation, inside ``ContainerContext.get``, and
the Tracer only when ``NODEWRIGHT_TRACING`` is on.
"""

from __future__ import annotations

from typing import Any

from nodewright.context import (
    ContainerContext,
    check_scheduled_event,
    report_outage,
)
from nodewright.observability import logger, metrics, record_pass_completed, trace

log = logger()
emf = metrics()
container = ContainerContext(logger=log, metrics=emf)


@log.inject_lambda_context(correlation_id_path="id", clear_state=True)
@emf.log_metrics
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Run passes until shortly before the next scheduled invocation; return what was done."""
    from aws_lambda_powertools.metrics import MetricUnit
    from nodewright import provisioning
    from nodewright.wakeup.events import sent_at

    woken_at = sent_at(event)
    if woken_at is None:
        check_scheduled_event(event, log)
    left = container.start_invocation(context)
    try:
        report = provisioning.run(container.get(), left, woken_at=woken_at)
    except Exception as exc:  # API server or AWS unreachable: one line and metric; no pass, no heartbeat
        outage = report_outage(log, emf, exc)
        if outage is None:
            raise
        return outage
    if report.stale_wakeup:  # a pass of this container already saw the cluster after it was sent
        emf.add_metric(name="WakeupsStale", unit=MetricUnit.Count, value=1)
        log.info("wake-up dropped: this container looked at the pods after it was sent")
        return report.summary()
    if woken_at is not None:
        emf.add_metric(name="WakeupsHandled", unit=MetricUnit.Count, value=1)
    record_pass_completed("provisioner")
    summary = report.summary()
    log.info("provisioner invocation done", extra=summary)
    return summary
