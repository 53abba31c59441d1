"""Every 12 hours: refresh the on-demand and spot price table in the state store.

Thin by design: Powertools around one call into the shared layer. A failing price source
does not fail the invocation (``refresh`` keeps the previous prices and counts the error);
only a missing setting or an unreachable state table does.
"""

from __future__ import annotations

from typing import Any

from nodewright.cloud.pricing import refresh
from nodewright.observability import logger, metrics, trace
from nodewright.settings import Settings

log = logger()


@metrics().log_metrics
@log.inject_lambda_context(log_event=False)
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    table = refresh(Settings.from_env())
    return {
        "onDemandPrices": len(table.on_demand),
        "spotPrices": len(table.spot),
        "source": table.source,
        "updatedAt": table.updated_at,
    }
