"""Dashboard and alarms over the metrics in ``infra.metrics`` and the AWS resources.

Alarms notify an SNS topic when one is given: ``alarmEmail`` creates a topic with that
subscription, ``alarmTopicArn`` uses an existing topic.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import metrics as m
from infra.capabilities import acknowledge

PENDING_POD_ALARM_MINUTES = 10
INTERRUPTION_LATENCY_ALARM_SECONDS = 60  # a spot warning gives 120 s; drained by half of it
ICE_ALARM_PER_15_MINUTES = 10
# Functions that run every minute alarm on repeated errors; one failed tick is retried by
# the next one. The others alarm on any error.
REPEATED_ERRORS_ONLY = {"provisioner": 3, "disruption": 3}


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        functions: dict[str, lambda_.IFunction],
        interruption_queue: sqs.IQueue,
        dead_letter_queues: dict[str, sqs.IQueue],
        alarm_email: str | None = None,
        alarm_topic_arn: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._service = m.service_name(cluster_name)
        self.topic = self._topic(alarm_email, alarm_topic_arn)
        self.alarms: list[cloudwatch.Alarm] = []

        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"{name}NotEmpty",
                queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(5), statistic="Maximum"
                ),
                threshold=0,
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                description=f"Nodewright {cluster_name}: messages in {name}; read them, fix, redrive",
            )
        for name, function in functions.items():
            self._alarm(
                f"{name}Errors",
                function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=REPEATED_ERRORS_ONLY.get(name, 1),
                description=f"Nodewright {cluster_name}: the {name} function is failing; see its logs",
            )
        self._alarm(
            "PodsPendingTooLong",
            self._metric(m.OLDEST_PENDING_POD_AGE),
            threshold=PENDING_POD_ALARM_MINUTES * 60,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Nodewright {cluster_name}: a pod has been pending over "
            f"{PENDING_POD_ALARM_MINUTES} minutes",
        )
        self._alarm(
            "InterruptionHandlingSlow",
            self._metric(m.INTERRUPTION_HANDLING_SECONDS),
            threshold=INTERRUPTION_LATENCY_ALARM_SECONDS,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Nodewright {cluster_name}: an interrupted node took over "
            f"{INTERRUPTION_LATENCY_ALARM_SECONDS} s to drain",
        )
        self._alarm(
            "InsufficientCapacityRate",
            self._metric(m.INSUFFICIENT_CAPACITY_ERRORS, period=Duration.minutes(15)),
            threshold=ICE_ALARM_PER_15_MINUTES,
            description=f"Nodewright {cluster_name}: {ICE_ALARM_PER_15_MINUTES}+ insufficient-capacity "
            "errors in 15 minutes; widen the NodePools' instance requirements",
        )
        self.dashboard = self._dashboard(cluster_name, functions, interruption_queue, dead_letter_queues)

    def _topic(self, email: str | None, topic_arn: str | None) -> sns.ITopic | None:
        if topic_arn:
            return sns.Topic.from_topic_arn(self, "AlarmTopic", topic_arn)
        if not email:
            return None
        topic = sns.Topic(self, "AlarmTopic", display_name="Nodewright alarms", enforce_ssl=True)
        topic.add_subscription(subscriptions.EmailSubscription(email))
        acknowledge.nag(
            topic,
            "Serverless-SNSRedrivePolicy",
            "an undeliverable alarm e-mail has nowhere more useful to go: the alarm's state and "
            "history stay in CloudWatch, and the dashboard shows it",
        )
        reason = (
            "CloudWatch alarms cannot publish to a topic encrypted with the AWS-managed SNS key, and "
            "alarm notifications carry no sensitive data; a customer-managed key is $1/month for nothing"
        )
        acknowledge.nag(topic, "AwsSolutions-SNS2", reason)
        acknowledge.checkov(topic, "CKV_AWS_26", reason)
        return topic

    def _metric(self, spec: m.MetricSpec, period: Duration | None = None) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=m.NAMESPACE,
            metric_name=spec.name,
            dimensions_map={m.SERVICE_DIMENSION: self._service},
            statistic=spec.statistic,
            period=period or Duration.minutes(1),
        )

    def _by_dimension(self, spec: m.MetricSpec, label: str) -> cloudwatch.MathExpression:
        """Every value of the metric's dimension (error codes are not known in advance)."""
        assert spec.dimension, f"{spec.name} has no dimension"
        query = (
            f"SEARCH('{{{m.NAMESPACE},{m.SERVICE_DIMENSION},{spec.dimension}}} "
            f'MetricName="{spec.name}" {m.SERVICE_DIMENSION}="{self._service}"\', '
            f"'{spec.statistic}', 300)"
        )
        return cloudwatch.MathExpression(expression=query, label=label, period=Duration.minutes(5))

    def _alarm(
        self,
        alarm_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        description: str,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=comparison,
            # No data means nothing happened (no pending pods, no interruptions).
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)

    def _dashboard(
        self,
        cluster_name: str,
        functions: dict[str, lambda_.IFunction],
        interruption_queue: sqs.IQueue,
        dead_letter_queues: dict[str, sqs.IQueue],
    ) -> cloudwatch.Dashboard:
        five = Duration.minutes(5)

        def graph(title: str, left: list[cloudwatch.IMetric], **kwargs: object) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=left, width=8, height=6, **kwargs)

        per_function = list(functions.items())
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"Nodewright-{cluster_name}")
        dashboard.add_widgets(
            graph("Pending pods", [self._metric(m.PENDING_PODS)]),
            graph("Oldest pending pod (s)", [self._metric(m.OLDEST_PENDING_POD_AGE)]),
            graph("NodeClaims launched by capacity type", [self._by_dimension(m.NODECLAIMS_LAUNCHED, "")]),
        )
        dashboard.add_widgets(
            graph(
                "Launch errors by code / ICE",
                [self._by_dimension(m.LAUNCH_ERRORS, "")],
                right=[self._metric(m.INSUFFICIENT_CAPACITY_ERRORS, five)],
            ),
            graph(
                "Interruptions by kind",
                [self._by_dimension(m.INTERRUPTIONS_HANDLED, "")],
                right=[self._metric(m.MALFORMED_MESSAGES, five)],
            ),
            graph("Interruption handling (s)", [self._metric(m.INTERRUPTION_HANDLING_SECONDS)]),
        )
        dashboard.add_widgets(
            graph(
                "Consolidation actions / savings $/h",
                [self._metric(m.CONSOLIDATION_ACTIONS, five)],
                right=[self._metric(m.CONSOLIDATION_SAVINGS, five)],
            ),
            graph("Cluster cost $/h", [self._metric(m.CLUSTER_COST, five)]),
            graph("Plan time (s)", [self._metric(m.PLAN_SECONDS)]),
        )
        dashboard.add_widgets(
            graph("Function errors", [f.metric_errors(period=five, label=n) for n, f in per_function]),
            graph(
                "Function duration p99 (ms)",
                [f.metric_duration(period=five, statistic="p99", label=n) for n, f in per_function],
            ),
            graph("Function throttles", [f.metric_throttles(period=five, label=n) for n, f in per_function]),
        )
        dashboard.add_widgets(
            graph(
                "Interruption queue: oldest message age (s)",
                [interruption_queue.metric_approximate_age_of_oldest_message(period=five)],
            ),
            graph(
                "Dead-letter queues depth",
                [
                    q.metric_approximate_number_of_messages_visible(period=five, label=n)
                    for n, q in dead_letter_queues.items()
                ],
            ),
        )
        return dashboard
