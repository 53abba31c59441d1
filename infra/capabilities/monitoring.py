"""Dashboard and alarms over the metrics in ``infra.metrics`` and the AWS resources.

Queries match what the flows emit: plain metric queries (and alarms) only for metrics whose
dimensions are known; SEARCH over the exact dimension schema for the others (launches by
type/zone/capacity type, errors by code, interruptions by kind, disruptions by reason). A panel
of metrics no flow emits yet would be titled ``PLACEHOLDER:`` (none today).

Who is told: ``alarmEmail`` creates a topic with that subscription, whose policy lets CloudWatch
(of this account only) publish; ``alarmTopicArn`` uses an existing topic, whose policy must allow
the same (``nodewright doctor`` checks it). With neither, synth and deploy print a warning that
nobody will be told, and the stack output ``AlarmNotifications`` says so.

Alarms: new messages in any dead-letter queue (its depth rising, so a message left unpurged
hides no later failure); each function's errors and throttles; the scheduled
functions' heartbeat (``PassesCompleted``, which they emit at the end of every invocation, idle or
busy: missing data is a failure); pods pending too long, which also fires when the provisioner,
the only one that sees pending pods, has stopped completing passes; the interruption queue's
oldest message; interruption handling slower than the notice allows; launches failing, one alarm
per class (insufficient capacity, a quota, a denial, an invalid request, anything else); the
webhook unable to read its secret.
"""

from __future__ import annotations

from aws_cdk import Annotations, CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import metrics as m
from infra.capabilities import acknowledge
from infra.capabilities import outputs as out

PENDING_POD_ALARM_MINUTES = 10
INTERRUPTION_LATENCY_ALARM_SECONDS = 60  # a spot warning gives 120 s; acting after half of it is late
# The interruption queue is drained in seconds; a message waiting a minute has half its notice left.
QUEUE_AGE_ALARM_SECONDS = 60
# NodeClaims failed for lack of capacity in 15 minutes (a stuck pod's NodeClaim fails every pass).
ICE_ALARM_PER_15_MINUTES = 10
# Launches failed for no classified reason (throttling past botocore's retries, EC2 faults): a few.
# Quota, permission and invalid-request failures alarm on the first: each needs a person.
LAUNCH_OTHER_PER_15_MINUTES = 3
# Every invocation that cannot reach the API server counts once; a few in 5 minutes is an outage.
API_SERVER_UNAVAILABLE_PER_5_MINUTES = 3
# An invocation whose time ran out carries on in the next one; several in a quarter hour mean the
# work does not fit the function's time (a slow pass, a client request rate too low for it).
OUT_OF_TIME_PER_15_MINUTES = 3
# Functions that run every minute alarm on repeated errors; one failed tick is retried by
# the next one. The others alarm on any error.
REPEATED_ERRORS_ONLY = {"provisioner": 3, "disruption": 3, "webhook": 3}
# The scheduled functions run every minute: no completed invocation in this long is an outage.
HEARTBEAT_MINUTES = 5
# The provisioner's reserved concurrency of 1 turns a tick that arrives while the previous run
# ends into one throttle (retried by Lambda): only several in a quarter hour mean trouble.
# The webhook's reserved concurrency (infra/capabilities/wakeup.py) throttles bursts on purpose (the
# API server ignores a 429): only a flood (someone hammering the URL) is worth a look.
THROTTLES_PER_15_MINUTES = {"provisioner": 5, "webhook": 300}
NO_ALARM_TARGET_WARNING = (
    "Nodewright alarms notify nobody: pass -c alarmEmail=you@example.com (a new SNS topic) or "
    "-c alarmTopicArn=arn:aws:sns:REGION:ACCOUNT:TOPIC (an existing one whose policy lets "
    "cloudwatch.amazonaws.com publish). The alarms still change state on the dashboard."
)


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
        wakeup: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self._wakeup = wakeup
        self._service = m.service_name(cluster_name)
        self.topic = self._topic(alarm_email, alarm_topic_arn)
        self.alarms: list[cloudwatch.Alarm] = []

        for name, queue in dead_letter_queues.items():
            self._alarm(
                f"{name}NewMessages",
                self._new_messages(queue),
                threshold=0,
                comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                description=f"Nodewright {cluster_name}: new messages in {name} (its depth rose); read "
                "them, fix, redrive or purge. The alarm clears by itself: the next failure alarms again",
            )
        for name, function in functions.items():
            self._alarm(
                f"{name}Errors",
                function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=REPEATED_ERRORS_ONLY.get(name, 1),
                description=f"Nodewright {cluster_name}: the {name} function is failing; see its logs",
            )
            throttles = THROTTLES_PER_15_MINUTES.get(name)
            self._alarm(
                f"{name}Throttles",
                function.metric_throttles(period=Duration.minutes(15 if throttles else 5), statistic="Sum"),
                threshold=throttles or 1,
                description=f"Nodewright {cluster_name}: Lambda throttled the {name} function; check the "
                "account's concurrency quota (the provisioner reserves 1) and the function's logs",
            )
        for name in m.HEARTBEAT_FUNCTIONS:
            self._alarm(
                f"{name}Heartbeat",
                self._passes_completed(name),
                threshold=1,
                comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                missing=cloudwatch.TreatMissingData.BREACHING,
                description=f"Nodewright {cluster_name}: the {name} function completed no pass in "
                f"{HEARTBEAT_MINUTES} minutes (its schedule, permissions, the cluster endpoint or the "
                "function itself); see its logs and `nodewright doctor`",
            )
        self._alarm(
            "PodsPendingTooLong",
            self._pending_too_long(),
            threshold=PENDING_POD_ALARM_MINUTES * 60,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,
            description=f"Nodewright {cluster_name}: a pod has been pending over {PENDING_POD_ALARM_MINUTES} "
            "minutes, or the provisioner (the one that would see it) completed no pass in "
            f"{HEARTBEAT_MINUTES} minutes",
        )
        self._alarm(
            "InterruptionQueueBacklog",
            interruption_queue.metric_approximate_age_of_oldest_message(
                period=Duration.minutes(1), statistic="Maximum"
            ),
            threshold=QUEUE_AGE_ALARM_SECONDS,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Nodewright {cluster_name}: an interruption message has waited over "
            f"{QUEUE_AGE_ALARM_SECONDS} s in the queue (a spot warning gives 120 s); is the interruption "
            "function failing or throttled?",
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
            "ApiServerUnreachable",
            self._metric(m.API_SERVER_UNAVAILABLE, Duration.minutes(5)),
            threshold=API_SERVER_UNAVAILABLE_PER_5_MINUTES,
            description=f"Nodewright {cluster_name}: the functions could not reach the Kubernetes API "
            f"server {API_SERVER_UNAVAILABLE_PER_5_MINUTES}+ times in 5 minutes (endpoint access, "
            "private endpoint without VPC placement, access entry, or an outage); see `nodewright doctor`",
        )
        self._alarm(
            "AwsUnreachable",
            self._metric(m.AWS_UNAVAILABLE, Duration.minutes(5)),
            threshold=API_SERVER_UNAVAILABLE_PER_5_MINUTES,
            description=f"Nodewright {cluster_name}: the functions could not reach AWS "
            f"{API_SERVER_UNAVAILABLE_PER_5_MINUTES}+ times in 5 minutes (no credentials from the "
            "execution role, no route to the endpoints from the VPC, or an outage)",
        )
        self._alarm(
            "InvocationsOutOfTime",
            self._metric(m.INVOCATIONS_OUT_OF_TIME, Duration.minutes(15)),
            threshold=OUT_OF_TIME_PER_15_MINUTES,
            description=f"Nodewright {cluster_name}: invocations ran out of time before their work "
            f"{OUT_OF_TIME_PER_15_MINUTES}+ times in 15 minutes (the API server was reachable): a pass "
            "slower than the function's timeout allows, or a client request rate (kubeClientQPS) too "
            "low for the work; see the functions' logs",
        )
        self._launch_alarms(cluster_name)
        if wakeup:
            self._alarm(
                "WebhookSecretUnreadable",
                self._metric(m.WEBHOOK_SECRET_ERRORS, Duration.minutes(5)),
                threshold=1,
                description=f"Nodewright {cluster_name}: the webhook function cannot read its secret "
                "(its role, the secret's KMS key, or a deleted secret): until it can, the API server's "
                "wake-ups and v1beta1 conversions are refused (the schedule still provisions)",
            )
        self.dashboard = self._dashboard(cluster_name, functions, interruption_queue, dead_letter_queues)
        out.output(
            self,
            out.ALARM_TOPIC,
            self.topic.topic_arn if self.topic is not None else out.NONE,
            "the SNS topic the alarms notify (none: nobody)",
        )

    def _topic(self, email: str | None, topic_arn: str | None) -> sns.ITopic | None:
        if topic_arn:
            CfnOutput(self, "AlarmNotifications", value=f"alarms notify the existing topic {topic_arn}")
            return sns.Topic.from_topic_arn(self, "AlarmTopic", topic_arn)
        if not email:
            Annotations.of(self).add_warning_v2("nodewright:no-alarm-target", NO_ALARM_TARGET_WARNING)
            CfnOutput(self, "AlarmNotifications", value="NONE: " + NO_ALARM_TARGET_WARNING)
            return None
        topic = sns.Topic(self, "AlarmTopic", display_name="Nodewright alarms", enforce_ssl=True)
        topic.add_subscription(subscriptions.EmailSubscription(email))
        # The topic policy replaces SNS's default one: without this, CloudWatch could not publish.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccountPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            )
        )
        CfnOutput(
            self,
            "AlarmNotifications",
            value=f"alarms notify {email} (confirm the subscription e-mail SNS sends)",
        )
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

    def _passes_completed(self, function: str, period: Duration | None = None) -> cloudwatch.Metric:
        return self._metric(
            m.PASSES_COMPLETED, period or Duration.minutes(HEARTBEAT_MINUTES), {"Function": function}
        )

    @staticmethod
    def _new_messages(queue: sqs.IQueue) -> cloudwatch.MathExpression:
        """How much a dead-letter queue's depth rose in the period: an alarm on new failures.

        Not its depth: a queue left holding one message (nobody purged it) would keep the alarm in
        ALARM and hide every failure after it. Not ``NumberOfMessagesSent`` either: SQS does not
        count a message its redrive policy moves into a dead-letter queue there. A period without a
        datapoint (SQS stops reporting an idle queue) repeats the last depth, so it reads as no rise.
        """
        return cloudwatch.MathExpression(
            expression="DIFF(FILL(depth, REPEAT))",
            using_metrics={
                "depth": queue.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(5), statistic="Maximum"
                )
            },
            label="messages added to the queue",
            period=Duration.minutes(5),
        )

    def _pending_too_long(self) -> cloudwatch.MathExpression:
        """The oldest pending pod's age; when the provisioner completed no pass (it alone sees
        pending pods), a value over the threshold: an unobserved cluster is not a healthy one."""
        blind = PENDING_POD_ALARM_MINUTES * 60 + 1
        return cloudwatch.MathExpression(
            expression=f"IF(FILL(passes, 0) < 1, {blind}, FILL(age, 0))",
            using_metrics={
                "age": self._metric(m.OLDEST_PENDING_POD_AGE, Duration.minutes(HEARTBEAT_MINUTES)),
                "passes": self._passes_completed("provisioner"),
            },
            label="oldest pending pod (s), or the threshold when the provisioner is not running",
            period=Duration.minutes(HEARTBEAT_MINUTES),
        )

    def _launch_failures(self, failure_class: str, period: Duration) -> cloudwatch.Metric:
        """NodeClaims of one failure class (``LaunchFailures{Class}``): a plain metric per class,
        because an alarm cannot use SEARCH."""
        return self._metric(m.LAUNCH_FAILURES, period, {"Class": failure_class})

    def _launch_alarms(self, cluster_name: str) -> None:
        """One alarm per class of launch failure (``m.LAUNCH_FAILURE_CLASSES``), each saying what to
        do. Every launch path counts: provisioning, an interruption's and a disruption's replacements."""
        doctor = f"`nodewright doctor --cluster {cluster_name}`"
        logs = f"`aws logs tail /nodewright/{cluster_name}/provisioner` (or disruption, interruption)"
        for alarm_id, failure_class, threshold, description in (
            (
                "InsufficientCapacityRate",
                m.INSUFFICIENT_CAPACITY,
                ICE_ALARM_PER_15_MINUTES,
                f"{ICE_ALARM_PER_15_MINUTES}+ launches failed for lack of EC2 capacity (or free addresses "
                "in the subnets) in 15 minutes: widen the NodePools' instance requirements (more types, "
                "zones, spot and on-demand) or the subnets",
            ),
            (
                "LaunchQuotaExceeded",
                m.QUOTA,
                1,
                "a launch hit an account quota (VcpuLimitExceeded, MaxSpotInstanceCountExceeded, "
                "InstanceLimitExceeded, launch templates, instance profiles, ...): request an increase in "
                "the Service Quotas console (https://console.aws.amazon.com/servicequotas/home/services/"
                "ec2/quotas; the NodeClaim's LaunchFailed event names the code) or lower the NodePools' "
                "limits",
            ),
            (
                "LaunchPermissionDenied",
                m.PERMISSION,
                1,
                "a launch was denied (UnauthorizedOperation, AccessDenied): an SCP, a permissions "
                f"boundary or an edited role. Run {doctor}: it simulates each function's role against "
                "the actions it uses and names the denial; `aws sts decode-authorization-message` "
                "decodes EC2's message in the LaunchFailed event",
            ),
            (
                "LaunchRequestInvalid",
                m.INVALID_REQUEST,
                1,
                "EC2 refused a launch as invalid (InvalidParameter*, an AMI, subnet, security group, "
                "launch template or instance profile that is gone or wrong) or a NodeClaim cannot be "
                "launched as configured: read the NodeClaim's LaunchFailed event and "
                f"{logs}; fix the EC2NodeClass (`nodewright validate`, {doctor})",
            ),
            (
                "LaunchFailedOther",
                m.OTHER,
                LAUNCH_OTHER_PER_15_MINUTES,
                f"{LAUNCH_OTHER_PER_15_MINUTES}+ launches failed in 15 minutes for another reason "
                f"(throttling, an EC2 fault, an unexpected error): read {logs}",
            ),
        ):
            self._alarm(
                alarm_id,
                self._launch_failures(failure_class, Duration.minutes(15)),
                threshold=threshold,
                description=f"Nodewright {cluster_name}: {description}",
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
        # No data means nothing happened (no pending pods, no interruptions), except for the
        # heartbeats, whose silence is the failure they watch for.
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=comparison,
            treat_missing_data=missing,
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

        def graph(
            title: str, left: list[cloudwatch.IMetric], right: list[cloudwatch.IMetric] | None = None
        ) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=left, right=right, width=8, height=6)

        per_function = list(functions.items())
        # Dashboard names are account-wide: the region keeps two regions' stacks for one cluster apart.
        dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=dashboard_name(cluster_name, Stack.of(self).region)
        )
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
                "Launch failures by code / by class, CreateFleet errors, reservations unread (right)",
                [self._by_dimension(m.LAUNCH_ERRORS)],
                right=[
                    self._metric(m.CREATE_FLEET_ERRORS, five),
                    self._metric(m.CAPACITY_RESERVATIONS_UNREAD, five),
                    *(self._launch_failures(c, five).with_(label=c) for c in m.LAUNCH_FAILURE_CLASSES),
                ],
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
                        m.AWS_UNAVAILABLE,
                        m.INVOCATIONS_OUT_OF_TIME,
                    )
                ],
            ),
            graph(
                "Interruption: handled / node drained (s) / API server requests",
                [self._metric(m.INTERRUPTION_HANDLING_SECONDS), self._metric(m.NODE_DRAINED_SECONDS)],
                right=[self._metric(m.API_REQUESTS, five)],
            ),
        )
        dashboard.add_widgets(
            graph(
                "Disruption: nodes removed by reason / $/h saved (right)",
                [self._by_dimension(m.DISRUPTION_ACTIONS)],
                right=[self._metric(m.DISRUPTION_SAVINGS, five)],
            ),
            graph(
                "Disruption: commands by method / decision time (s, right)",
                [self._by_dimension(m.DISRUPTION_DECISIONS)],
                right=[self._metric(m.DISRUPTION_DECISION_SECONDS)],
            ),
            graph(
                "Consolidation: candidates evaluated / nodes held back with a reason",
                [self._metric(m.CONSOLIDATION_CANDIDATES), self._metric(m.DISRUPTION_BLOCKED)],
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
        heartbeat = graph(
            "Heartbeat: invocations that completed (per 5 min)",
            [self._passes_completed(name, five).with_(label=name) for name in m.HEARTBEAT_FUNCTIONS],
        )
        if not self._wakeup:
            dashboard.add_widgets(heartbeat)
        else:
            dashboard.add_widgets(
                heartbeat,
                # Whether the API server reaches the function URL: Wakeups flat at zero while pods go
                # pending means the path is broken (the schedule still provisions; docs/deploy.md).
                graph(
                    "Wake-ups: sent, handled, dropped / requests refused by reason (right)",
                    [
                        self._metric(spec, five)
                        for spec in (
                            m.WAKEUPS,
                            m.WAKEUPS_HANDLED,
                            m.WAKEUPS_STALE,
                            m.WAKEUPS_COALESCED,
                            m.WAKEUP_ERRORS,
                            m.WEBHOOK_SECRET_ERRORS,
                            m.PREVIOUS_SECRET_REQUESTS,
                        )
                    ],
                    right=[self._by_dimension(m.WEBHOOK_REFUSED)],
                ),
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


def dashboard_name(cluster_name: str, region: str) -> str:
    return f"Nodewright-{cluster_name}-{region}"
