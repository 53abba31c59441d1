"""The schedules: provisioner and disruption every minute, price refresh every 12 hours."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from nodewright.spec import deployment

# Which function runs how often, and why: nodewright/spec/deployment.py.
SCHEDULES: dict[str, Duration] = {
    name: Duration.seconds(every) for name, every in deployment.SCHEDULES.items()
}


class Schedules(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: dict[str, lambda_.IFunction],
        dead_letter_queue: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        for name, every in SCHEDULES.items():
            self.rules[name] = events.Rule(
                self,
                f"{name}Schedule",
                description=f"Nodewright: run {name} every {every.to_human_string()}",
                schedule=events.Schedule.rate(every),
                targets=[
                    targets.LambdaFunction(
                        functions[name],
                        # Recorded in the failure queue when it is dropped.
                        retry_attempts=deployment.SCHEDULE_RETRY_ATTEMPTS,
                        max_event_age=Duration.seconds(deployment.SCHEDULE_MAX_EVENT_AGE_SECONDS),
                        dead_letter_queue=dead_letter_queue,
                    )
                ],
            )
