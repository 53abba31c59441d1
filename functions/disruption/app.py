"""Disruption: EventBridge schedule (every minute) → remove expired and empty nodes within budgets.

Thin on purpose: parse the scheduled event, build the per-container context, call
``nodewright.disruption.run``. Consolidation of underutilized nodes and drift are not built yet
(see ``nodewright.disruption``).
"""

from __future__ import annotations

from typing import Any

from nodewright.observability import logger, metrics, trace
from nodewright.settings import Settings

log = logger()
emf = metrics()
_context: Any = None


def _get_context() -> Any:
    """One Context per warm container: the EKS endpoint/token and boto3 clients are reused."""
    global _context  # noqa: PLW0603 - the per-container cache Lambda recommends
    if _context is None:
        from nodewright.context import Context

        _context = Context.connect(Settings.from_env(), logger=log, metrics=emf)
    return _context


@log.inject_lambda_context(correlation_id_path="id", clear_state=True)
@emf.log_metrics
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """One pass, or passes while drains and budgets have something to follow; what was done."""
    from aws_lambda_powertools.utilities.parser import ValidationError, parse
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
    from nodewright import disruption

    try:
        parse(event=event, model=EventBridgeModel)
    except ValidationError as exc:
        # The payload carries nothing the pass needs: a malformed one is logged, and the pass still runs.
        log.warning("not an EventBridge scheduled event; running a pass anyway", extra={"error": str(exc)})

    remaining = context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0
    report = disruption.run(_get_context(), remaining)
    return report.summary()
