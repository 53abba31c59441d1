"""Disruption: EventBridge schedule (every minute) → expiration, emptiness, drift, consolidation,
then the EC2NodeClass and NodePool status (``nodewright.status``).

Thin on purpose: check the scheduled event, reuse the per-container context, call
``nodewright.disruption.run`` (see ``nodewright.disruption``), ``nodewright.status.reconcile`` and
``nodewright.capacityreservation.reconcile``.
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
    """One pass, or passes while drains and budgets have something to follow; what was done."""
    from nodewright import capacityreservation, disruption, status

    check_scheduled_event(event, log)
    left = container.start_invocation(context)
    try:
        report = disruption.run(container.get(), left)
        statuses = status.reconcile(container.get())
        reservations = capacityreservation.reconcile(container.get())  # capacity blocks, ODCRs ended
    except Exception as exc:  # API server or AWS unreachable: one line and metric; no pass, no heartbeat
        outage = report_outage(log, emf, exc)
        if outage is None:
            raise
        return outage
    record_pass_completed("disruption")
    return {**report.summary(), **statuses.summary(), **reservations.summary()}
