"""The wake-up event: the webhook's asynchronous invocation of the provisioner's wake-up alias.

EventBridge-shaped (``source``, ``detail-type``, ``time``, ``id``) so the provisioner's handler
logs it like its schedule events. It carries nothing a pass trusts: when it was sent, so the
provisioner can drop a wake-up that Lambda delivers after a pass has already looked at the cluster
(one that waited, throttled, while the provisioner was looping), and what rang (``detail.reason``:
``FailedScheduling``, or ``PodUnschedulable`` from a pods/status configuration installed before
the wake-up moved to Events), for its log.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from nodewright.api.labels import FAILED_SCHEDULING

SOURCE = "nodewright.webhook"
DETAIL_TYPE = "Nodewright Wakeup"
# What rang besides a scheduler's FailedScheduling Event (api.webhooks): a pod's status becoming
# Unschedulable (the pods/status configuration before issue 25, until install-webhooks replaces it).
POD_UNSCHEDULABLE = "PodUnschedulable"


def wakeup_event(sent_at: datetime, region: str = "", reason: str = FAILED_SCHEDULING) -> dict[str, Any]:
    """The event the webhook sends (``sent_at`` timezone-aware)."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": DETAIL_TYPE,
        "source": SOURCE,
        "account": "",
        "time": sent_at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "region": region,
        "resources": [],
        "detail": {"reason": reason},
    }


def is_wakeup(event: Any) -> bool:
    return isinstance(event, dict) and event.get("source") == SOURCE


def sent_at(event: Any) -> datetime | None:
    """When a wake-up event was sent; None for any other event or an unreadable time."""
    if not is_wakeup(event) or not isinstance(event.get("time"), str):
        return None
    try:
        moment = datetime.fromisoformat(event["time"].replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
