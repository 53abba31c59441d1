"""CloudFormation custom resource: at ``cdk destroy``, leave nothing of Nodewright behind.

Create and Update do nothing. Delete runs once the functions and every trigger are gone, and
before the node role, the nodes' access entry and this function's own access entry go: it takes
the webhooks out of the cluster, drains and removes the nodes, terminates their instances and
deletes their launch templates and instance profiles (``nodewright.removal``). It always answers
SUCCESS, within the function's timeout, so the stack never ends in DELETE_FAILED: what could not be
removed is in the answer's reason with the command that removes it. The report of what was done
and left outlives the stack in the SSM parameter ``REMOVAL_REPORT_PARAMETER`` (docs/deploy.md,
"Removing it").

The event is never logged whole: its ``ResponseURL`` is a presigned S3 URL that lets whoever holds
it answer for this stack. Only ``LOGGED_KEYS`` are.
"""

from __future__ import annotations

import os
from typing import Any

from nodewright import removal
from nodewright.cloud.cleanup import send_custom_resource_response, store_report
from nodewright.context import remaining_seconds
from nodewright.observability import logger, metrics
from nodewright.settings import Settings

log = logger()
emf = metrics()
LOGGED_KEYS = ("RequestType", "LogicalResourceId", "StackId")
REPORT_PARAMETER = "REMOVAL_REPORT_PARAMETER"


# log_event=False, explicitly: POWERTOOLS_LOGGER_LOG_EVENT=true would otherwise log the event.
@log.inject_lambda_context(log_event=False, clear_state=True)
def handler(event: dict[str, Any], context: Any) -> None:
    log.info("CloudFormation request", extra={key: event.get(key) for key in LOGGED_KEYS})
    physical_id = event.get("PhysicalResourceId") or f"nodewright-removal-{event['LogicalResourceId']}"
    reason = "nothing to do until the stack is deleted"
    if event["RequestType"] == "Delete":
        reason = remove(event, context)
    send_custom_resource_response(event, "SUCCESS", reason, physical_id)


def remove(event: dict[str, Any], context: Any) -> str:
    """Run the removal and keep its report; the answer's reason. Never raises: the stack must go."""
    try:
        settings = Settings.from_env()
        report = removal.run(
            settings, seconds=remaining_seconds(context), stack_id=event["StackId"], logger=log, metrics=emf
        )
    except Exception as exc:
        log.exception("removal not run")
        return (
            f"removal not run ({type(exc).__name__}: {exc}): remove what is left by hand "
            "(docs/deploy.md, 'Removing it')"
        )
    details = report.as_dict()
    reason = report.summary()
    log.info("removal done" if report.complete else "removal incomplete", extra={"report": details})
    parameter = os.environ.get(REPORT_PARAMETER)
    if not parameter:
        return reason + f" (no report kept: {REPORT_PARAMETER} is not set)"
    try:
        store_report(settings, parameter, details)
    except Exception as exc:
        log.exception("report not stored")
        return (
            reason + f" (the report could not be stored in SSM parameter {parameter}: {type(exc).__name__})"
        )
    return reason + f" Report: SSM parameter {parameter} in {settings.region}."
