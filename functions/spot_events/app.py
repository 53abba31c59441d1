"""The low-latency path: spot interruption warnings and rebalance recommendations straight from EventBridge.

The same events also reach the interruption queue; the idempotency record keyed on the event id
(shared with the ``interruption`` function) makes whichever path comes first act, and the other
replay the stored outcome. When the other path is handling the same event right now, this one
returns at once: the queue copy is retried later and resumes anything left undone.
"""

from __future__ import annotations

import time
from typing import Any

from nodewright.context import ContainerContext, remaining_seconds, report_outage
from nodewright.interruption.processing import EventInProgress, InterruptionProcessor
from nodewright.observability import logger, metrics, trace

log = logger()
emf = metrics()
container = ContainerContext(logger=log, metrics=emf)
processor = InterruptionProcessor(container)


@log.inject_lambda_context(clear_state=True)
@emf.log_metrics
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    container.start_invocation(context)
    try:
        try:
            result = processor.handle(event, received_at=time.monotonic(), lambda_context=context)
        except EventInProgress as exc:
            log.info(
                "event in progress in the queue path; leaving it to that path", extra={"error": str(exc)}
            )
            return {"disposition": "in-progress-elsewhere"}
        except Exception as exc:  # API server or AWS unreachable: the event's queue copy is retried by SQS
            outage = report_outage(log, emf, exc)
            if outage is None:
                raise
            return outage
        try:
            processor.drive(budget_seconds=remaining_seconds(context))
        except Exception as exc:
            # The event stays handled (its cordon is recorded); the answer says what stopped.
            outage = report_outage(log, emf, exc)
            if outage is None:
                raise
            return {**result.as_dict(), **outage}
        return result.as_dict()
    finally:
        processor.end_replacement()  # when the drive did not end it: nothing outlives the invocation
