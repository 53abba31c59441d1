"""PLACEHOLDER: the disruption function, until the disruption flow lands.

The stack schedules it every minute so the wiring (schedule, role, layer, alarms) is
deployed and tested now. It only logs that it ran and emits ``DisruptionPlaceholderRuns``;
it does not look at the cluster, and never deletes or replaces a node.
"""

from __future__ import annotations

from typing import Any

from nodewright import observability

logger = observability.logger()
metrics = observability.metrics()


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """PLACEHOLDER: record the tick and do nothing (no emptiness, expiry, drift or consolidation yet)."""
    logger.info(
        "disruption placeholder ran: no disruption logic deployed yet", extra={"event_id": event.get("id")}
    )
    metrics.add_metric(name="DisruptionPlaceholderRuns", unit="Count", value=1)
    return {"placeholder": True, "actions": 0}
