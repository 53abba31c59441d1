"""The schedules: provisioner and disruption every minute, price refresh every 12 hours."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

SCHEDULES: dict[str, Duration] = {
    "provisioner": Duration.minutes(1),
    "disruption": Duration.minutes(1),
    # On-demand prices change a few times a year, spot prices drift slowly: twice a day.
    "pricing": Duration.hours(12),
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
                        # A tick that cannot be delivered within a minute is superseded by
                        # the next one: no retries, but recorded in the failure queue.
                        retry_attempts=0,
                        max_event_age=Duration.minutes(1),
                        dead_letter_queue=dead_letter_queue,
                    )
                ],
            )
