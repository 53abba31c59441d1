"""Dashboard and alarms over the metrics in ``infra.metrics`` and the AWS resources.

Queries match what the flows emit: plain metric queries (and alarms) only for metrics whose
one dimension is ``service``; SEARCH over the exact dimension schema for the others (launches
by type/zone/capacity type, errors by code, interruptions by kind, disruptions by reason). A
panel of metrics no flow emits yet would be titled ``PLACEHOLDER:`` (none today).

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
INTERRUPTION_LATENCY_ALARM_SECONDS = 60  # a spot warning gives 120 s; acting after half of it is late
# NodeClaims failed for lack of capacity in 15 minutes (a stuck pod's NodeClaim fails every pass).
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
            description=f"Nodewright {cluster_name}: an interruption took over "
            f"{INTERRUPTION_LATENCY_ALARM_SECONDS} s from its message to being acted on (node "
            "tainted, drain started); a spot warning gives 120 s in all",
        )
        self._alarm(
            "InsufficientCapacityRate",
            self._insufficient_capacity(Duration.minutes(15)),
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

    def _metric(
        self,
        spec: m.MetricSpec,
        period: Duration | None = None,
        dimensions: dict[str, str] | None = None,
    ) -> cloudwatch.Metric:
        """One metric; ``dimensions`` must name every dimension the emitter adds (exact match)."""
        extra = dimensions or {}
        assert set(extra) == set(spec.dimensions), f"{spec.name} is emitted with {spec.dimensions}"
        return cloudwatch.Metric(
            namespace=m.NAMESPACE,
            metric_name=spec.name,
            dimensions_map={**extra, m.SERVICE_DIMENSION: self._service},
            statistic=spec.statistic,
            period=period or Duration.minutes(1),
        )

    def _search(self, spec: m.MetricSpec, filters: str = "") -> str:
        """SEARCH over the metric's exact dimension schema, this cluster's service only."""
        return (
            f'SEARCH(\'{spec.schema} MetricName="{spec.name}" '
            f"{m.SERVICE_DIMENSION}=\"{self._service}\"{filters}', '{spec.statistic}', 300)"
        )

    def _by_dimension(self, spec: m.MetricSpec) -> cloudwatch.MathExpression:
        """One line per value of the metric's only dimension (error codes are not known in advance)."""
        (dimension,) = spec.dimensions
        return cloudwatch.MathExpression(
            expression=self._search(spec), label=f"${{PROP('Dim.{dimension}')}}", period=Duration.minutes(5)
        )

    def _summed_by(
        self, spec: m.MetricSpec, dimension: str, values: tuple[str, ...]
    ) -> list[cloudwatch.IMetric]:
        """One line per value of ``dimension``, summed over the metric's other dimensions."""
        assert dimension in spec.dimensions, f"{spec.name} has no dimension {dimension}"
        lines: list[cloudwatch.IMetric] = []
        for value in values:
            only_this_value = f' {dimension}="{value}"'
            lines.append(
                cloudwatch.MathExpression(
                    expression=f"SUM({self._search(spec, only_this_value)})",
                    label=value,
                    period=Duration.minutes(5),
                )
            )
        return lines

    def _insufficient_capacity(self, period: Duration) -> cloudwatch.MathExpression:
        """LaunchErrors summed over the no-capacity codes: alarms cannot use SEARCH."""
        by_code = {
            f"ice{index}": self._metric(m.LAUNCH_ERRORS, period, {"ErrorCode": code})
            for index, code in enumerate(m.INSUFFICIENT_CAPACITY_CODES)
        }
        return cloudwatch.MathExpression(
            expression=" + ".join(f"FILL({name}, 0)" for name in by_code),
            using_metrics=by_code,
            label="NodeClaims failed for lack of capacity",
            period=period,
        )

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
            graph(
                "NodeClaims launched by capacity type",
                self._summed_by(m.NODECLAIMS_LAUNCHED, "CapacityType", m.CAPACITY_TYPES),
            ),
        )
        dashboard.add_widgets(
            graph(
                "Launch errors by code / CreateFleet errors",
                [self._by_dimension(m.LAUNCH_ERRORS)],
                right=[self._metric(m.CREATE_FLEET_ERRORS, five), self._insufficient_capacity(five)],
            ),
            graph(
                "Interruptions by kind / messages not acted on",
                [self._by_dimension(m.INTERRUPTIONS_HANDLED)],
                right=[
                    self._metric(spec, five)
                    for spec in (
                        m.MALFORMED_MESSAGES,
                        m.IGNORED_MESSAGES,
                        m.DUPLICATE_MESSAGES,
                        m.STALE_MESSAGES,
                        m.MESSAGES_TOLERATED,
                        m.API_SERVER_UNAVAILABLE,
                    )
                ],
            ),
            graph(
                "Interruption: handled / node drained (s)",
                [self._metric(m.INTERRUPTION_HANDLING_SECONDS), self._metric(m.NODE_DRAINED_SECONDS)],
            ),
        )
        dashboard.add_widgets(
            graph(
                "Disruption: nodes removed by reason / $/h saved (right)",
                [self._by_dimension(m.DISRUPTION_ACTIONS)],
                right=[self._metric(m.DISRUPTION_SAVINGS, five)],
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
            graph(
                "Prices: table size / refresh errors / estimated",
                [self._metric(m.ON_DEMAND_PRICES, five), self._metric(m.SPOT_PRICES, five)],
                right=[self._metric(m.PRICE_REFRESH_ERRORS, five), self._metric(m.PRICE_ESTIMATED, five)],
            ),
        )
        return dashboard
