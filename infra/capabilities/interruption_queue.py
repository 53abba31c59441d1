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
from nodewright.spec import deployment

from infra.capabilities import acknowledge
from infra.capabilities.queues import encrypted_queue

# The rules, the queue's settings and why they are what they are: nodewright/spec/deployment.py.
MESSAGE_RETENTION = Duration.seconds(deployment.QUEUE_RETENTION_SECONDS)
VISIBILITY_TIMEOUT = Duration.seconds(deployment.QUEUE_VISIBILITY_SECONDS)
MAX_RECEIVE_COUNT = deployment.QUEUE_MAX_RECEIVE_COUNT


def event_pattern(rule: dict[str, Any]) -> events.EventPattern:
    """An EventBridge pattern (``detail-type``) as the CDK's keyword form (``detail_type``)."""
    return events.EventPattern(**{key.replace("-", "_"): value for key, value in rule.items()})


class InterruptionQueue(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.dead_letter_queue = encrypted_queue(
            self, "DeadLetterQueue", retention=Duration.seconds(deployment.DEAD_LETTER_RETENTION_SECONDS)
        )
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
        for rule_id, pattern in deployment.QUEUE_RULES.items():
            rule = events.Rule(
                self,
                f"{rule_id}Rule",
                description=f"Nodewright: {rule_id} events to the interruption queue",
                event_pattern=event_pattern(pattern),
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
        """The interruption function reads the queue in batches and reports per-item failures; at most
        ``INTERRUPTION_MAX_CONCURRENCY`` batches at once (spec/deployment.py says why that many)."""
        source = sources.SqsEventSource(
            self.queue,
            batch_size=deployment.QUEUE_BATCH_SIZE,
            report_batch_item_failures=True,
            max_concurrency=deployment.INTERRUPTION_MAX_CONCURRENCY,
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
            event_pattern=event_pattern(deployment.DIRECT_RULE),
            targets=[
                targets.LambdaFunction(
                    function,
                    retry_attempts=deployment.DIRECT_RETRY_ATTEMPTS,
                    max_event_age=Duration.seconds(deployment.DIRECT_MAX_EVENT_AGE_SECONDS),
                    dead_letter_queue=dead_letter_queue,
                )
            ],
        )
