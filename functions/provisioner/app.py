"""Provisioner: EventBridge schedule (every minute) → poll pending pods, plan, launch.

Thin on purpose: parse the scheduled event, build the per-container context, call
``nodewright.provisioning.run``. Module import stays cheap (< 0.8 s): the kubernetes
client and boto3 load on the first invocation, inside ``_context``, and the Tracer
only when ``NODEWRIGHT_TRACING`` is on.
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
    """Run passes until shortly before the next scheduled invocation; return what was done."""
    from aws_lambda_powertools.utilities.parser import ValidationError, parse
    from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
    from nodewright import provisioning

    try:
        scheduled = parse(event=event, model=EventBridgeModel)
        log.debug("scheduled event", extra={"detailType": scheduled.detail_type, "time": str(scheduled.time)})
    except ValidationError as exc:
        # The payload carries nothing the pass needs: a malformed one is logged, and the pass still runs.
        log.warning("not an EventBridge scheduled event; running a pass anyway", extra={"error": str(exc)})

    remaining = context.get_remaining_time_in_millis() / 1000 if context is not None else 60.0
    report = provisioning.run(_get_context(), remaining)
    summary = report.summary()
    log.info("provisioner invocation done", extra=summary)
    return summary
