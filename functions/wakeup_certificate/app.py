"""CloudFormation custom resource: the private wake-up's TLS certificate (``-c wakeup=private``).

Create (and an Update that changes the load balancer's DNS name) makes a P-256 key and a
certificate for that name signed by itself (``nodewright.wakeup.certificate``), imports both into
ACM tagged for this cluster, and answers with the certificate's ARN as the physical id (and
``Data.CertificateArn``), which the load balancer's HTTPS listener uses. The key exists only in this
invocation's memory and in ACM. CloudFormation deletes a replaced certificate once the listener has
moved to the new one; Delete removes it from ACM, waiting while ACM still sees the listener use it.

The event is never logged whole: its ``ResponseURL`` lets whoever holds it answer for this stack.
It always answers CloudFormation, FAILED with the reason when something went wrong.
"""

from __future__ import annotations

from typing import Any

from nodewright.cloud.cleanup import send_custom_resource_response
from nodewright.context import remaining_seconds
from nodewright.observability import logger
from nodewright.settings import Settings

log = logger()
LOGGED_KEYS = ("RequestType", "LogicalResourceId", "StackId")
# Kept for CloudFormation's answer and the log line after the deletion's last wait.
MARGIN_SECONDS = 20.0


# log_event=False, explicitly: POWERTOOLS_LOGGER_LOG_EVENT=true would otherwise log the event.
@log.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> None:
    log.info("CloudFormation request", extra={key: event.get(key) for key in LOGGED_KEYS})
    physical_id = str(
        event.get("PhysicalResourceId") or f"nodewright-wakeup-certificate-{event['RequestId']}"
    )
    try:
        physical_id, data, reason = _act(event, context, physical_id)
    except Exception as exc:  # answer CloudFormation whatever happened, or it waits an hour
        log.exception("certificate request failed")
        send_custom_resource_response(event, "FAILED", f"{type(exc).__name__}: {exc}", physical_id)
        return
    send_custom_resource_response(event, "SUCCESS", reason, physical_id, data)


def _act(event: dict[str, Any], context: Any, physical_id: str) -> tuple[str, dict[str, str], str]:
    from nodewright.cloud import wakeup
    from nodewright.spec.iam import certificate_tags
    from nodewright.wakeup.certificate import self_signed

    settings = Settings.from_env()
    properties = event.get("ResourceProperties") or {}
    kind = event["RequestType"]
    if kind == "Delete":
        if not physical_id.startswith("arn:"):
            return physical_id, {}, "no certificate was made"  # a Create that failed before importing one
        gone = wakeup.delete_certificate(
            settings, physical_id, max(remaining_seconds(context) - MARGIN_SECONDS, 0.0)
        )
        return physical_id, {}, "deleted" if gone else "already gone"
    if kind == "Update" and physical_id.startswith("arn:"):
        old = event.get("OldResourceProperties") or {}
        if old.get("DnsName") == properties.get("DnsName"):
            return physical_id, {"CertificateArn": physical_id}, "unchanged"
    dns_name = str(properties["DnsName"])
    made = self_signed(dns_name, settings.cluster_name)
    arn = wakeup.import_certificate(
        settings, made.certificate, made.private_key, certificate_tags(settings.cluster_name)
    )
    log.info(
        "certificate imported",
        extra={"certificateArn": arn, "dnsName": dns_name, "notAfter": str(made.not_after)},
    )
    return arn, {"CertificateArn": arn}, f"{dns_name} until {made.not_after:%Y-%m-%d}"
