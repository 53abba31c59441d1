"""The one builder of the events the functions receive: EventBridge events, SQS batches, schedules.

The demo, the benchmarks, the tests and ``nodewright sandbox interrupt`` all build their events
here, in the shapes AWS documents (and ``../shared/data/events`` holds real copies of):

* EventBridge events of the interruption kinds (``aws.ec2`` spot warning, rebalance
  recommendation, instance state change; ``aws.health`` EC2 scheduled change);
* SQS records and batches as the Lambda event source mapping delivers them;
* the event an EventBridge schedule delivers.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from nodewright.spec import deployment

ACCOUNT = "123456789012"  # moto's default account
DEFAULT_REGION = "us-east-1"
SPOT_WARNING = deployment.SPOT_INTERRUPTION
REBALANCE = deployment.REBALANCE_RECOMMENDATION
STATE_CHANGE = deployment.STATE_CHANGE
HEALTH = deployment.HEALTH_EVENT
SQS_BATCH_SIZE = deployment.QUEUE_BATCH_SIZE
KINDS = ("spot", "rebalance", "health", "state")


def _stamp(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def eventbridge_event(
    detail_type: str,
    detail: dict[str, Any],
    *,
    source: str = "aws.ec2",
    region: str = DEFAULT_REGION,
    resources: Iterable[str] = (),
    event_id: str | None = None,
) -> dict[str, Any]:
    """An event exactly as EventBridge delivers it to a target, stamped now."""
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": source,
        "account": ACCOUNT,
        "time": _stamp(),
        "region": region,
        "resources": list(resources),
        "detail": detail,
    }


def instance_arn(instance_id: str, region: str = DEFAULT_REGION) -> str:
    return f"arn:aws:ec2:{region}:{ACCOUNT}:instance/{instance_id}"


def ec2_event(
    detail_type: str, instance_id: str, region: str = DEFAULT_REGION, **detail: Any
) -> dict[str, Any]:
    """An ``aws.ec2`` event about one instance (``detail`` adds to ``instance-id``)."""
    return eventbridge_event(
        detail_type,
        {"instance-id": instance_id, **detail},
        region=region,
        resources=[instance_arn(instance_id, region)],
    )


def spot_warning(instance_id: str, region: str = DEFAULT_REGION) -> dict[str, Any]:
    """EC2 Spot Instance Interruption Warning: the instance is reclaimed two minutes later."""
    return ec2_event(SPOT_WARNING, instance_id, region, **{"instance-action": "terminate"})


def rebalance_recommendation(instance_id: str, region: str = DEFAULT_REGION) -> dict[str, Any]:
    return ec2_event(REBALANCE, instance_id, region)


def state_change(instance_id: str, state: str, region: str = DEFAULT_REGION) -> dict[str, Any]:
    """EC2 Instance State-change Notification (``state``: pending, running, stopping, ...)."""
    return ec2_event(STATE_CHANGE, instance_id, region, state=state)


def health_scheduled_change(
    instance_id: str, region: str = DEFAULT_REGION, starts_in: timedelta = timedelta(days=7)
) -> dict[str, Any]:
    """An AWS Health EC2 scheduled change (an instance retirement) naming ``instance_id``."""
    start = datetime.now(UTC) + starts_in
    code = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
    return eventbridge_event(
        HEALTH,
        {
            "eventArn": f"arn:aws:health:{region}::event/EC2/{code}/{code}_{uuid.uuid4().hex[:12]}",
            "service": "EC2",
            "eventTypeCode": code,
            "eventTypeCategory": "scheduledChange",
            "startTime": _stamp(start),
            "endTime": _stamp(start + timedelta(hours=1)),
            "eventDescription": [
                {"language": "en_US", "latestDescription": "EC2 has detected degradation of the host."}
            ],
            "affectedEntities": [{"entityValue": instance_id}],
        },
        source="aws.health",
        region=region,
        resources=[instance_id],
    )


def interruption_event(kind: str, instance_id: str, region: str = DEFAULT_REGION) -> dict[str, Any]:
    """One of ``KINDS`` for ``instance_id``: what ``nodewright sandbox interrupt --kind`` sends."""
    if kind == "spot":
        return spot_warning(instance_id, region)
    if kind == "rebalance":
        return rebalance_recommendation(instance_id, region)
    if kind == "health":
        return health_scheduled_change(instance_id, region)
    if kind == "state":
        return state_change(instance_id, "stopping", region)
    raise ValueError(f"unknown interruption kind {kind!r}; use one of {', '.join(KINDS)}")


def put_events_entry(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as a PutEvents entry: what EC2 or AWS Health puts on the default bus."""
    return {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event["detail"]),
        "Resources": event["resources"],
        "Time": datetime.now(UTC),
    }


def queue_arn(queue_url: str, region: str = DEFAULT_REGION) -> str:
    return f"arn:aws:sqs:{region}:{ACCOUNT}:{queue_url.rstrip('/').rsplit('/', 1)[-1]}"


def sqs_record(
    body: str,
    *,
    source_arn: str = f"arn:aws:sqs:{DEFAULT_REGION}:{ACCOUNT}:nodewright-interruption",
    region: str = DEFAULT_REGION,
    message_id: str | None = None,
    receipt_handle: str | None = None,
    receive_count: int = 1,
    sent_ms: int | None = None,
) -> dict[str, Any]:
    """One SQS message as the Lambda event source mapping puts it in ``Records``."""
    sent = str(sent_ms if sent_ms is not None else int(time.time() * 1000))
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": receipt_handle or "AQEB" + secrets.token_urlsafe(48),
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": sent,
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": sent,
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": source_arn,
        "awsRegion": region,
    }


def sqs_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}


def sqs_batches(bodies: Iterable[str], size: int = SQS_BATCH_SIZE, **record: Any) -> list[dict[str, Any]]:
    """SQS events of at most ``size`` records (``record`` passes to :func:`sqs_record`)."""
    records = [sqs_record(body, **record) for body in bodies]
    return [sqs_event(records[i : i + size]) for i in range(0, len(records), size)]


def scheduled_event(
    event_id: str | None = None, region: str = DEFAULT_REGION, rule: str = "schedule"
) -> dict[str, Any]:
    """What an EventBridge schedule delivers (EventBridge User Guide, "rule that runs on a schedule")."""
    return eventbridge_event(
        "Scheduled Event",
        {},
        source="aws.events",
        region=region,
        resources=[f"arn:aws:events:{region}:{ACCOUNT}:rule/{rule}"],
        event_id=event_id,
    )
