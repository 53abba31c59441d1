"""What ``cdk destroy`` removes from AWS that CloudFormation did not create, and how it answers.

The removal (``nodewright.removal``, run by the stack's custom resource, ``functions/cleanup``)
calls, after the cluster's nodes are drained:

* :func:`remove_cluster_resources`: every instance Nodewright launched for this cluster that is
  still running is terminated (``TerminateInstances``, allowed by the cleanup's role only for
  instances carrying this cluster's tags), then this cluster's launch templates and instance
  profiles are deleted. A profile is deleted only once no live instance uses it (the role is
  removed from it first: a role still in a profile cannot be deleted, and CloudFormation deletes
  the created node role next); whatever is kept is reported, with the command that removes it.
* :func:`store_report`: the report of what was done, in an SSM parameter that outlives the stack
  (the function's log group goes with the stack).
* :func:`send_custom_resource_response`: the answer to CloudFormation, always given.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nodewright.cloud import aws
from nodewright.settings import Settings

if TYPE_CHECKING:
    from nodewright.cloud.provider import CloudProvider

RESPONSE_TIMEOUT_SECONDS = 30
# CloudFormation keeps at most 4 KB of a custom resource's response: the reason gets this much.
MAX_REASON_CHARS = 3500
# An SSM String parameter of the standard tier (free) holds at most 4 KB.
MAX_REPORT_CHARS = 4096
# TerminateInstances takes many ids at once; a batch IAM refuses is retried one instance at a time.
TERMINATE_BATCH = 50
GONE_STATES = ("shutting-down", "terminated")
# How a list cut to fit the report ends: "… and 12 more".
DROPPED = "… and"


@dataclass
class CloudRemoval:
    """What :func:`remove_cluster_resources` did and kept."""

    instances_terminated: list[str] = field(default_factory=list)
    instances_not_terminated: dict[str, str] = field(default_factory=dict)  # id -> why
    launch_templates_deleted: list[str] = field(default_factory=list)
    instance_profiles_deleted: list[str] = field(default_factory=list)
    instance_profiles_in_use: list[str] = field(default_factory=list)

    def left(self, settings: Settings) -> list[str]:
        """What is still there, each with the command that removes it."""
        left = []
        if self.instances_not_terminated:
            ids = " ".join(sorted(self.instances_not_terminated))
            why = "; ".join(f"{i}: {m}" for i, m in sorted(self.instances_not_terminated.items()))
            left.append(f"instances not terminated ({why}): aws ec2 terminate-instances --instance-ids {ids}")
        if self.instance_profiles_in_use:
            left.append(
                f"instance profiles a live instance still uses ({', '.join(self.instance_profiles_in_use)}): "
                "terminate those instances, then per profile aws iam remove-role-from-instance-profile "
                "--instance-profile-name P --role-name ROLE and aws iam delete-instance-profile "
                f"--instance-profile-name P (aws iam list-instance-profiles --path-prefix "
                f"/nodewright/{settings.region}/{settings.cluster_name}/)"
            )
        return left


def remove_cluster_resources(provider: CloudProvider) -> CloudRemoval:
    """Terminate this cluster's remaining Nodewright instances, then delete its launch templates and
    the instance profiles no live instance uses. Idempotent (a second run finds nothing)."""
    removal = CloudRemoval()
    removal.instances_terminated, removal.instances_not_terminated = terminate_instances(provider)
    templates = provider.templates
    # Templates still named by a live instance are kept by cleanup(); min_age 0: nothing launches now.
    removal.launch_templates_deleted = templates.cleanup(min_age=timedelta(0))
    removal.instance_profiles_deleted, removal.instance_profiles_in_use = templates.delete_instance_profiles()
    return removal


def terminate_instances(provider: CloudProvider) -> tuple[list[str], dict[str, str]]:
    """Terminate every live instance Nodewright launched for this cluster (``CloudProvider.list``):
    (terminated ids, {id: why not} for the ones EC2 refused)."""
    running = [i.id for i in provider.list() if i.state not in GONE_STATES]
    terminated: list[str] = []
    refused: dict[str, str] = {}
    for start in range(0, len(running), TERMINATE_BATCH):
        batch = running[start : start + TERMINATE_BATCH]
        try:
            provider.ec2.terminate_instances(InstanceIds=batch)
            terminated += batch
            continue
        except ClientError:
            pass  # one refused instance fails the whole call: find which, one at a time
        for instance_id in batch:
            try:
                if provider.delete(instance_id):
                    terminated.append(instance_id)
            except ClientError as exc:
                error = exc.response.get("Error") or {}
                refused[instance_id] = f"{error.get('Code', 'Error')}: {error.get('Message', '')}"
    return terminated, refused


def store_report(settings: Settings, parameter: str, report: dict[str, Any]) -> str:
    """Write ``report`` (JSON, cut to fit a standard parameter) to the SSM parameter ``parameter``,
    replacing the previous removal's; returns what was written."""
    text = fit_report(report)
    aws.client("ssm", settings).put_parameter(
        Name=parameter,
        Value=text,
        Type="String",
        Overwrite=True,
        Description=f"What the last cdk destroy of Nodewright for {settings.cluster_name} did and left",
    )
    return text


def fit_report(report: dict[str, Any], limit: int = MAX_REPORT_CHARS) -> str:
    """``report`` as compact JSON of at most ``limit`` characters: the longest lists are halved
    first, each keeping its head and saying how many items it dropped."""
    shaped = json.loads(json.dumps(report, default=str))
    while True:
        text = json.dumps(shaped, separators=(",", ":"))
        if len(text) <= limit:
            return text
        cuttable = [(place, items) for place, items in _lists(shaped) if len(_kept(items)) > 1]
        if not cuttable:
            return text[: limit - 3] + "..."  # ASCII: 4096 characters are 4096 bytes
        (holder, key), items = max(cuttable, key=lambda found: len(json.dumps(found[1])))
        kept = _kept(items)
        dropped = len(items) - len(kept) and int(items[-1].split()[2])
        half = len(kept) // 2
        holder[key] = [*kept[:half], f"{DROPPED} {dropped + len(kept) - half} more"]


def _kept(items: list[Any]) -> list[Any]:
    """A list's items without the "… and N more" that ``fit_report`` put at its end."""
    if items and isinstance(items[-1], str) and items[-1].startswith(DROPPED):
        return items[:-1]
    return items


def _lists(node: Any) -> list[tuple[tuple[Any, Any], list[Any]]]:
    """((container, key), list) for every list in a JSON value."""
    found: list[tuple[tuple[Any, Any], list[Any]]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, list):
                found.append(((node, key), value))
            found += _lists(value)
    return found


def send_custom_resource_response(
    event: dict[str, Any], status: str, reason: str, physical_id: str, data: dict[str, Any] | None = None
) -> None:
    """Answer CloudFormation: a PUT of the result to the event's presigned S3 ``ResponseURL``."""
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:MAX_REASON_CHARS],
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
