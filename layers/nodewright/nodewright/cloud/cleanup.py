"""What ``cdk destroy`` removes that CloudFormation did not create: this cluster's launch templates
and instance profiles, made at run time by the launch path.

The stack's removal custom resource (``functions/cleanup``) calls :func:`remove_cluster_resources`
when it is deleted, after the schedules and rules that could start a launch are gone. Anything a
live instance still uses is kept and reported (docs/deploy.md, "Removing it", has the commands),
and a failure never blocks the stack's deletion: CloudFormation is told SUCCESS with the reason.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from nodewright.cloud import aws
from nodewright.cloud.launchtemplates import LaunchTemplates
from nodewright.settings import Settings

RESPONSE_TIMEOUT_SECONDS = 30


@dataclass
class RemovalReport:
    launch_templates_deleted: list[str] = field(default_factory=list)
    instance_profiles_deleted: list[str] = field(default_factory=list)
    instance_profiles_in_use: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"deleted {len(self.launch_templates_deleted)} launch template(s) and "
            f"{len(self.instance_profiles_deleted)} instance profile(s)"
        )
        if self.instance_profiles_in_use:
            text += (
                f"; kept {len(self.instance_profiles_in_use)} instance profile(s) live instances still use "
                f"({', '.join(self.instance_profiles_in_use)}): terminate those instances, then see "
                "docs/deploy.md 'Removing it'"
            )
        return text


def remove_cluster_resources(settings: Settings, ec2: Any = None, iam: Any = None) -> RemovalReport:
    """Delete this cluster's launch templates and unused instance profiles."""
    templates = LaunchTemplates(
        ec2 or aws.client("ec2", settings),
        iam or aws.client("iam", settings),
        settings.cluster_name,
        settings.region,
    )
    report = RemovalReport()
    # Templates still named by a live instance are kept by cleanup(): deleting them would not stop the
    # instance, but they are what it was launched from; min_age 0: nothing new is being launched.
    report.launch_templates_deleted = templates.cleanup(min_age=timedelta(0))
    report.instance_profiles_deleted, report.instance_profiles_in_use = templates.delete_instance_profiles()
    return report


def send_custom_resource_response(
    event: dict[str, Any], status: str, reason: str, physical_id: str, data: dict[str, Any] | None = None
) -> None:
    """Answer CloudFormation: a PUT of the result to the event's presigned S3 ``ResponseURL``."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:3500],  # CloudFormation keeps at most 4 KB of response
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "NoEcho": False,
            "Data": data or {},
        }
    ).encode()
    request = urllib.request.Request(
        event["ResponseURL"],
        data=body,
        method="PUT",
        # A presigned S3 URL is signed without a content type: send none (an empty one).
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as response:
        response.read()
