"""Webhook: what kube-apiserver calls (wake-up admission webhook, CRD conversion), through the
function URL (``-c wakeup=public``) or the internal load balancer (``-c wakeup=private``).

Thin on purpose: read the function URL's event or the load balancer's (Powertools' data classes,
no pydantic to import on a cold start the API server is waiting for), hand method, path and body to
the container's ``nodewright.wakeup.webhook.Webhook``, return its answer in the caller's shape. The
event is never logged: its path holds the secret.
"""

from __future__ import annotations

import logging
from typing import Any

from aws_lambda_powertools.utilities.data_classes import ALBEvent, LambdaFunctionUrlEvent
from nodewright.observability import logger, metrics, trace

# botocore logs every response body at DEBUG, and GetSecretValue's is the secret: whatever level
# Lambda's log controls give the root logger, that line is never written.
logging.getLogger("botocore.parsers").setLevel(logging.INFO)
log = logger()
emf = metrics()
_webhook: Any = None


def webhook() -> Any:
    """The container's Webhook, built on the first request (settings, secret source, wake-up)."""
    global _webhook  # noqa: PLW0603 - the per-container webhook, as Lambda recommends
    if _webhook is None:
        from nodewright.cloud import wakeup
        from nodewright.settings import Settings
        from nodewright.wakeup.webhook import Webhook

        settings = Settings.from_env()
        _webhook = Webhook(
            secrets=lambda: wakeup.read_path_secrets(settings),
            wake=lambda event: wakeup.wake(settings, event),
            logger=log,
            metrics=emf,
            node_role=settings.node_role,
            region=settings.region,
            secret_max_age_seconds=settings.webhook_secret_max_age_seconds,
        )
    return _webhook


# log_event=False whatever POWERTOOLS_LOGGER_LOG_EVENT says: the event's path is the secret.
@log.inject_lambda_context(correlation_id_path="requestContext.requestId", clear_state=True, log_event=False)
@emf.log_metrics
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from nodewright.wakeup.webhook import Answer, refusal

    from_load_balancer = "elb" in (event.get("requestContext") or {})
    respond = Answer.load_balancer_response if from_load_balancer else Answer.function_url_response
    try:
        if from_load_balancer:
            target = ALBEvent(event)
            body, method, path = target.decoded_body or "", target.http_method, target.path or "/"
        else:
            request = LambdaFunctionUrlEvent(event)
            body = request.decoded_body or ""
            method, path = request.request_context.http.method, request.raw_path or "/"
        hook = webhook()
    except Exception as exc:  # a misconfigured function (no CLUSTER_NAME) or a malformed event
        log.error("webhook cannot serve", extra={"error": f"{type(exc).__name__}: {exc}"})
        return respond(refusal(500, "Internal Server Error"))
    return respond(hook.serve(method, path, body))
