"""Every 12 hours: refresh the on-demand and spot price table in the state store.

Thin by design: Powertools around one call into the shared layer, with the per-container settings
every handler keeps. A failing price source does not fail the invocation (``refresh`` keeps the
previous prices and counts the error); only a missing setting or an unreachable state table does.
"""

from __future__ import annotations

from typing import Any

from nodewright.cloud.pricing import refresh
from nodewright.context import ContainerContext, check_scheduled_event
from nodewright.observability import logger, metrics, trace

log = logger()
emf = metrics()
container = ContainerContext(logger=log, metrics=emf)


@log.inject_lambda_context(correlation_id_path="id", clear_state=True)
@emf.log_metrics
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    check_scheduled_event(event, log)
    table = refresh(container.settings)
    return {
        "onDemandPrices": len(table.on_demand),
        "spotPrices": len(table.spot),
        "source": table.source,
        "updatedAt": table.updated_at,
    }
