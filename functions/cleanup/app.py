"""CloudFormation custom resource: on stack deletion, remove what the launch path created at run time.

Create and Update do nothing. Delete runs after the schedules, rules and the other functions are
gone (they depend on this resource), then deletes this cluster's launch templates and the
instance profiles no live instance uses. It always answers SUCCESS: leftovers are reported in
the reason and the log, never a stack stuck in DELETE_FAILED.
"""

from __future__ import annotations

from typing import Any

from nodewright.cloud.cleanup import remove_cluster_resources, send_custom_resource_response
from nodewright.observability import logger
from nodewright.settings import Settings

log = logger()


@log.inject_lambda_context(log_event=True)
def handler(event: dict[str, Any], context: Any) -> None:
    physical_id = event.get("PhysicalResourceId") or f"nodewright-removal-{event['LogicalResourceId']}"
    reason = "nothing to do until the stack is deleted"
    if event["RequestType"] == "Delete":
        try:
            report = remove_cluster_resources(Settings.from_env())
            reason = report.summary()
            log.info("removal done", extra={"summary": reason})
        except Exception as exc:  # never leave the stack stuck: say what is left and how to remove it
            reason = (
                f"removal incomplete ({type(exc).__name__}: {exc}); delete this cluster's launch "
                "templates and instance profiles by hand (docs/deploy.md, 'Removing it')"
            )
            log.exception("removal incomplete")
    send_custom_resource_response(event, "SUCCESS", reason, physical_id)
