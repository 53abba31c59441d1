"""What the CDK stack wires between AWS and the functions, as plain data the sandbox can use.

The CDK app cannot be imported here (aws_cdk starts a jsii runtime); these tables mirror
``infra/capabilities`` and ``tests/infra/test_infra_sandbox_mirror.py`` holds them equal:

* ``FUNCTIONS``: memory and timeout of each function (functions.py ``FUNCTION_SPECS``, the
  webhook of wakeup.py and the removal's cleanup of removal.py);
* ``SCHEDULES``: the EventBridge schedules (schedules.py ``SCHEDULES``);
* ``QUEUE_RULES``: the EventBridge rules that feed the interruption queue, and ``DIRECT_RULE`` the
  one that sends spot warnings and rebalance recommendations straight to ``spot_events``
  (interruption_queue.py), in EventBridge's own pattern syntax;
* the queue's batch size, visibility timeout, retention and redrive, and the concurrency its event
  source mapping and the direct rule's function may reach (interruption_queue.py, functions.py);
* how Lambda's SQS event source mapping scales (AWS's documented behaviour, not a stack setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    memory_mb: int
    timeout_seconds: int


FUNCTIONS: dict[str, FunctionSpec] = {
    spec.name: spec
    for spec in (
        FunctionSpec("provisioner", 512, 55),
        FunctionSpec("disruption", 1024, 55),
        FunctionSpec("interruption", 512, 125),
        FunctionSpec("spot_events", 512, 125),
        FunctionSpec("pricing", 512, 300),
        # infra/capabilities/wakeup.py: behind the function URL, not on a schedule
        FunctionSpec("webhook", 256, 10),
        # infra/capabilities/removal.py: the custom resource CloudFormation deletes at cdk destroy
        FunctionSpec("cleanup", 256, 900),
    )
}
SCHEDULES: dict[str, int] = {"provisioner": 60, "disruption": 60, "pricing": 12 * 3600}

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
REBALANCE = "EC2 Instance Rebalance Recommendation"
QUEUE_RULES: dict[str, dict[str, Any]] = {
    "SpotInterruption": {"source": ["aws.ec2"], "detail-type": [SPOT_WARNING]},
    "Rebalance": {"source": ["aws.ec2"], "detail-type": [REBALANCE]},
    "StateChange": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "ScheduledChange": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
    "CapacityReservationInterruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
DIRECT_RULE: dict[str, Any] = {"source": ["aws.ec2"], "detail-type": [SPOT_WARNING, REBALANCE]}

QUEUE_BATCH_SIZE = 10
QUEUE_VISIBILITY_SECONDS = FUNCTIONS["interruption"].timeout_seconds + 5
QUEUE_RETENTION_SECONDS = 300
QUEUE_MAX_RECEIVE_COUNT = 2
# The event source mapping's maximum concurrency (interruption_queue.py INTERRUPTION_MAX_CONCURRENCY):
# at most this many batches in flight, i.e. interruption containers at once.
INTERRUPTION_MAX_CONCURRENCY = 50
# The spot_events function's reserved concurrency (functions.py SPOT_EVENTS_CONCURRENCY): an
# asynchronous invocation beyond it is throttled and retried by Lambda's own event queue.
SPOT_EVENTS_CONCURRENCY = 5
# The request rate limit (KUBE_CLIENT_QPS, KUBE_CLIENT_BURST) the stack gives the interruption
# functions' containers (functions.py INTERRUPTION_KUBE_CLIENT_QPS/BURST); the others keep the defaults.
KUBE_CLIENT_RATE: dict[str, tuple[float, int]] = {"interruption": (5.0, 50), "spot_events": (5.0, 50)}
# Lambda's SQS event source mapping on a standard queue (AWS Lambda developer guide, "Configuring
# scaling behavior for SQS event source mappings"): five batches at once when messages appear, then
# up to 300 more concurrent batches a minute while messages remain, never past the maximum above.
SQS_INITIAL_BATCHES = 5
SQS_SCALE_UP_PER_MINUTE = 300
# The direct rule's Lambda target: invoked asynchronously, 2 retries, events at most 2 minutes old.
DIRECT_RETRY_ATTEMPTS = 2
DIRECT_MAX_EVENT_AGE_SECONDS = 120
# The provisioner's wakeup alias (wakeup.py): no retries, events at most a minute old.
WAKEUP_RETRY_ATTEMPTS = 0
WAKEUP_MAX_EVENT_AGE_SECONDS = 60
# The webhook's reserved concurrency (wakeup.py WEBHOOK_CONCURRENCY): containers behind its URL.
WEBHOOK_CONCURRENCY = 5
