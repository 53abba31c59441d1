"""The interruption queue and the EventBridge rules that feed it (as Karpenter's).

EventBridge → SQS decouples the event from its handling: a burst of interruptions
waits in the queue instead of being dropped, and a message that keeps failing lands
in the DLQ where an alarm sees it.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.capabilities import acknowledge
from infra.capabilities.functions import INTERRUPTION_MAX_CONCURRENCY, INTERRUPTION_TIMEOUT_SECONDS
from infra.capabilities.queues import encrypted_queue

SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
CAPACITY_RESERVATION_INTERRUPTION = "EC2 Capacity Reservation Instance Interruption Warning"

# rule id → event pattern; every one of them feeds the queue.
QUEUE_RULES: dict[str, dict[str, Any]] = {
    "SpotInterruption": {"source": ["aws.ec2"], "detail_type": [SPOT_INTERRUPTION]},
    "Rebalance": {"source": ["aws.ec2"], "detail_type": [REBALANCE_RECOMMENDATION]},
    "StateChange": {"source": ["aws.ec2"], "detail_type": [STATE_CHANGE]},
    # Only EC2 scheduled changes (retirements, maintenance); other Health events are noise.
    "ScheduledChange": {
        "source": ["aws.health"],
        "detail_type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
    "CapacityReservationInterruption": {
        "source": ["aws.ec2"],
        "detail_type": [CAPACITY_RESERVATION_INTERRUPTION],
    },
}
# The low-latency direct path to the spot_events function: the two spot events only.
DIRECT_SPOT_PATTERN: dict[str, Any] = {
    "source": ["aws.ec2"],
    "detail_type": [SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION],
}

# A spot warning gives two minutes; a message older than five is about an instance that
# is gone, so the queue drops it (Karpenter uses the same 300 s).
MESSAGE_RETENTION = Duration.seconds(300)
# Lambda refuses an SQS event source whose queue's visibility timeout is shorter than the
# function's timeout; 5 s more, so the message is not handed to another poller while the
# invocation holding it is still finishing.
VISIBILITY_TIMEOUT = Duration.seconds(INTERRUPTION_TIMEOUT_SECONDS + 5)
# A failed message is received again after each visibility timeout, and moved to the DLQ on the
# receive after the last allowed one: at 2 x 130 s = 260 s, inside the 300 s retention (with 3,
# at 390 s, it would silently expire instead). One retry is all a spot warning can use anyway:
# its instance is gone 120 s after the event; the drains of an earlier attempt are resumed by
# the next invocation and by the provisioner's lifecycle pass.
MAX_RECEIVE_COUNT = 2


class InterruptionQueue(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = encrypted_queue(self, "DeadLetterQueue", retention=Duration.days(14))
        self.queue = encrypted_queue(
            self,
            "Queue",
            retention=MESSAGE_RETENTION,
            visibility_timeout=VISIBILITY_TIMEOUT,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=MAX_RECEIVE_COUNT
            ),
        )
        # Only EventBridge may send, one statement per rule (added by each rule's target, scoped by
        # aws:SourceArn). No sqs.amazonaws.com principal: SQS needs none to move a message to the DLQ.
        self.rules: dict[str, events.Rule] = {}
        for rule_id, pattern in QUEUE_RULES.items():
            rule = events.Rule(
                self,
                f"{rule_id}Rule",
                description=f"Nodewright: {rule_id} events to the interruption queue",
                event_pattern=events.EventPattern(**pattern),
                # A message EventBridge cannot deliver lands in the DLQ (and its alarm fires).
                targets=[targets.SqsQueue(self.queue, dead_letter_queue=self.dead_letter_queue)],
            )
            self.rules[rule_id] = rule
        acknowledge.nag(
            self.dead_letter_queue,
            "Serverless-SQSRedrivePolicy",
            "this is the dead-letter queue: a redrive policy on it would have nowhere better to go",
        )

    def add_consumer(self, function: lambda_.IFunction) -> None:
        """The interruption function reads the queue in batches of 10 and reports per-item failures,
        so one bad message is retried (then dead-lettered) without re-running the other nine; at most
        ``INTERRUPTION_MAX_CONCURRENCY`` batches at once (functions.py says why that many)."""
        source = sources.SqsEventSource(
            self.queue,
            batch_size=10,
            report_batch_item_failures=True,
            max_concurrency=INTERRUPTION_MAX_CONCURRENCY,
        )
        function.add_event_source(source)
        acknowledge.nag(
            function,
            "Serverless-LambdaEventSourceMappingDestination",
            "SQS event sources take no on-failure destination: the queue's redrive policy sends a "
            f"message that failed {MAX_RECEIVE_COUNT} times to the DLQ",
        )


class SpotEventsRoute(Construct):
    """The direct rule: spot warning + rebalance straight to ``spot_events`` (no queue hop).

    The same events also reach the queue; the two paths deduplicate through the
    idempotency records in the state table.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rule = events.Rule(
            self,
            "Rule",
            description="Nodewright: spot interruption warnings and rebalance recommendations, direct",
            event_pattern=events.EventPattern(**DIRECT_SPOT_PATTERN),
            targets=[
                targets.LambdaFunction(
                    function,
                    retry_attempts=2,
                    max_event_age=Duration.minutes(2),  # the warning's whole notice
                    dead_letter_queue=dead_letter_queue,
                )
            ],
        )
