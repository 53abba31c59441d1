"""The CloudWatch metrics the functions emit (EMF, namespace ``Nodewright``) and the dashboard reads.

This is the contract between the flows (which emit) and the stack (which graphs and
alarms), reconciled with the code: ``emitted_by`` names the call site, and
tests/infra/test_infra_metrics.py scans the layer and the functions for every emitted name
and runs the emitters to compare their dimension sets with ``dimensions``.

CloudWatch matches a metric query on its *exact* dimension set. Powertools adds the
dimension ``service`` (POWERTOOLS_SERVICE_NAME) to every metric, also to ``single_metric``
ones, so a metric emitted with ``InstanceType``/``Zone``/``CapacityType`` exists only as
{InstanceType, Zone, CapacityType, service}: the dashboard reaches such metrics with SEARCH
expressions over that full schema, and plain metric queries are used only for metrics whose
one dimension is ``service``.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "Nodewright"
# Powertools Metrics adds the dimension ``service`` (POWERTOOLS_SERVICE_NAME) to every
# metric. The stack sets it per cluster, so two clusters in one account and region do
# not mix their numbers, and the dashboard queries with it.
SERVICE_DIMENSION = "service"


def service_name(cluster_name: str) -> str:
    """POWERTOOLS_SERVICE_NAME of every function of one cluster's stack."""
    return f"nodewright-{cluster_name}"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    unit: str
    statistic: str  # how the dashboard aggregates it
    dimensions: tuple[str, ...]  # what the emitter adds besides ``service``, in emission order
    meaning: str
    emitted_by: str | None  # the call site; None: PLACEHOLDER, no flow emits it yet

    @property
    def schema(self) -> str:
        """The SEARCH schema of the metric's exact dimension set."""
        return "{" + ",".join([NAMESPACE, *sorted({*self.dimensions, SERVICE_DIMENSION})]) + "}"


PROVISIONING = "nodewright/provisioning/flow.py publish_metrics"
INTERRUPTION = "nodewright/interruption/processing.py InterruptionProcessor"
PRICING = "nodewright/cloud/pricing.py refresh"
DISRUPTION = "nodewright/disruption/flow.py publish_metrics"
DISRUPTION_CHOICE = "nodewright/disruption/flow.py _choose and _why_not"

PENDING_PODS = MetricSpec(
    "PendingPods", "Count", "Maximum", (), "unschedulable pods seen by the provisioner", PROVISIONING
)
OLDEST_PENDING_POD_AGE = MetricSpec(
    "OldestPendingPodAgeSeconds",
    "Seconds",
    "Maximum",
    (),
    "age of the oldest pod still pending",
    PROVISIONING,
)
# Every launch path (a provisioning pass, an interruption's and a disruption command's replacements).
LAUNCHES = "nodewright/provisioning/flow.py publish_launches"
NODECLAIMS_LAUNCHED = MetricSpec(
    "NodeClaimsLaunched",
    "Count",
    "Sum",
    ("InstanceType", "Zone", "CapacityType"),
    "instances launched, per type, zone and capacity type",
    LAUNCHES,
)
LAUNCH_ERRORS = MetricSpec(
    "LaunchErrors",
    "Count",
    "Sum",
    ("ErrorCode",),
    "NodeClaims whose launch failed, by error code",
    LAUNCHES,
)
LAUNCH_FAILURES = MetricSpec(
    "LaunchFailures",
    "Count",
    "Sum",
    ("Class",),
    "NodeClaims whose launch failed, by class (LAUNCH_FAILURE_CLASSES): what the launch alarms watch",
    LAUNCHES,
)
CLUSTER_COST = MetricSpec(
    "ClusterCostPerHour", "None", "Maximum", (), "$/h of the nodes Nodewright manages", PROVISIONING
)
PLAN_SECONDS = MetricSpec(
    "PlanSeconds", "Seconds", "Maximum", (), "time to compute one scheduling plan", PROVISIONING
)
CREATE_FLEET_ERRORS = MetricSpec(
    "CreateFleetErrors",
    "Count",
    "Sum",
    (),
    "errors CreateFleet answered inside launches (ICE included, retried ones too)",
    "nodewright/cloud/provider.py CloudProvider.create",
)
CAPACITY_RESERVATIONS_UNREAD = MetricSpec(
    "CapacityReservationsUnread",
    "Count",
    "Sum",
    (),
    "EC2NodeClasses whose capacity reservations DescribeCapacityReservations did not answer for "
    "(no reserved offerings that pass)",
    "nodewright/cloud/provider.py CloudProvider.capacity_reservations",
)
PRICE_ESTIMATED = MetricSpec(
    "PriceEstimated",
    "Count",
    "Sum",
    (),
    "instance types priced by estimate (no price in the table)",
    "nodewright/cloud/catalog.py",
)
INTERRUPTIONS_HANDLED = MetricSpec(
    "InterruptionsHandled", "Count", "Sum", ("Kind",), "interruption events acted on, by kind", INTERRUPTION
)
INTERRUPTION_HANDLING_SECONDS = MetricSpec(
    "InterruptionHandlingSeconds",
    "Seconds",
    "Maximum",
    (),
    "message received to handled (node tainted, drain started)",
    INTERRUPTION,
)
NODE_DRAINED_SECONDS = MetricSpec(
    "NodeDrainedSeconds",
    "Seconds",
    "Maximum",
    (),
    "message received to the interrupted node drained and its instance terminated",
    INTERRUPTION,
)
API_REQUESTS = MetricSpec(
    "ApiRequests",
    "Count",
    "Sum",
    (),
    "Kubernetes API requests the interruption functions' containers sent (summed: the function's "
    "request rate against the API server, bounded by their client-side limit)",
    "nodewright/interruption/processing.py Processor._report_requests",
)
MALFORMED_MESSAGES = MetricSpec(
    "MalformedMessages", "Count", "Sum", (), "queue messages that could not be parsed", INTERRUPTION
)
IGNORED_MESSAGES = MetricSpec(
    "IgnoredMessages", "Count", "Sum", (), "events about instances this cluster does not own", INTERRUPTION
)
MESSAGES_TOLERATED = MetricSpec(
    "MessagesTolerated",
    "Count",
    "Sum",
    (),
    "events acted on although a field was unusable (placeholder time, resources not a list)",
    INTERRUPTION,
)
STALE_MESSAGES = MetricSpec(
    "StaleMessages",
    "Count",
    "Sum",
    (),
    "events older than their kind's maximum age, not acted on",
    INTERRUPTION,
)
API_SERVER_UNAVAILABLE = MetricSpec(
    "ApiServerUnavailable",
    "Count",
    "Sum",
    (),
    "invocations that ended because the Kubernetes API server could not be reached",
    "nodewright/context.py report_outage",
)
AWS_UNAVAILABLE = MetricSpec(
    "AwsUnavailable",
    "Count",
    "Sum",
    (),
    "invocations that ended because AWS could not be reached (endpoint down, no credentials)",
    "nodewright/context.py report_outage",
)
INVOCATIONS_OUT_OF_TIME = MetricSpec(
    "InvocationsOutOfTime",
    "Count",
    "Sum",
    (),
    "invocations that ended because their time ran out before their work (the client's rate limit "
    "would have held a call past the deadline); the API server was reachable",
    "nodewright/context.py report_outage",
)
DUPLICATE_MESSAGES = MetricSpec(
    "DuplicateMessages", "Count", "Sum", (), "events already handled (by the other path)", INTERRUPTION
)
PRICE_REFRESH_ERRORS = MetricSpec(
    "PriceRefreshErrors", "Count", "Sum", (), "price sources that failed (old prices kept)", PRICING
)
ON_DEMAND_PRICES = MetricSpec(
    "OnDemandPrices", "Count", "Maximum", (), "on-demand prices in the refreshed table", PRICING
)
SPOT_PRICES = MetricSpec("SpotPrices", "Count", "Maximum", (), "spot prices in the refreshed table", PRICING)
DISRUPTION_ACTIONS = MetricSpec(
    "DisruptionActions",
    "Count",
    "Sum",
    ("Reason",),
    "nodes the disruption flow removed, by reason (Empty, Expired, Drifted, Underutilized)",
    DISRUPTION,
)
DISRUPTION_DECISIONS = MetricSpec(
    "DisruptionDecisions",
    "Count",
    "Sum",
    ("Method",),
    "commands the disruption flow decided, by method (emptiness, expiration, drift, consolidation)",
    DISRUPTION,
)
DISRUPTION_DECISION_SECONDS = MetricSpec(
    "DisruptionDecisionSeconds",
    "Seconds",
    "Maximum",
    (),
    "time one disruption pass spent deciding (simulations included)",
    DISRUPTION,
)
CONSOLIDATION_CANDIDATES = MetricSpec(
    "ConsolidationCandidates",
    "Count",
    "Maximum",
    (),
    "nodes a consolidation pass evaluated (initialized, past consolidateAfter, not vetoed)",
    DISRUPTION_CHOICE,
)
DISRUPTION_BLOCKED = MetricSpec(
    "DisruptionBlocked",
    "Count",
    "Maximum",
    (),
    "nodes a pass left alone with a reason (do-not-disrupt, a PDB, a budget, no cheaper node...)",
    DISRUPTION_CHOICE,
)
DISRUPTION_SAVINGS = MetricSpec(
    "DisruptionSavingsPerHour", "None", "Sum", (), "$/h of the nodes the disruption flow removed", DISRUPTION
)

PASSES_COMPLETED = MetricSpec(
    "PassesCompleted",
    "Count",
    "Sum",
    ("Function",),
    "invocations of a scheduled function that ran to the end (the heartbeat, emitted idle or busy)",
    "nodewright/observability.py record_pass_completed (functions/provisioner, functions/disruption)",
)
WEBHOOK = "nodewright/wakeup/webhook.py Webhook"
WAKEUP_HANDLER = "functions/provisioner/app.py handler"
WAKEUPS = MetricSpec(
    "Wakeups",
    "Count",
    "Sum",
    (),
    "wake-ups the webhook sent to the provisioner (an unschedulable pod reached the function URL)",
    WEBHOOK,
)
WAKEUP_ERRORS = MetricSpec(
    "WakeupErrors", "Count", "Sum", (), "wake-ups Lambda did not accept (the schedule still runs)", WEBHOOK
)
WAKEUPS_COALESCED = MetricSpec(
    "WakeupsCoalesced",
    "Count",
    "Sum",
    (),
    "admission reviews answered without a wake-up (one was sent less than a second before)",
    WEBHOOK,
)
WEBHOOK_REFUSED = MetricSpec(
    "WebhookRefused",
    "Count",
    "Sum",
    ("Reason",),
    "function URL requests refused, by reason (NotFound, RateLimited, TooLarge, NotAReview, ...)",
    WEBHOOK,
)
WEBHOOK_SECRET_ERRORS = MetricSpec(
    "WebhookSecretErrors",
    "Count",
    "Sum",
    (),
    "reads of the webhook's secret that failed (first read: requests refused 503; reread: the last "
    "one read is kept)",
    WEBHOOK,
)
PREVIOUS_SECRET_REQUESTS = MetricSpec(
    "PreviousSecretRequests",
    "Count",
    "Sum",
    (),
    "requests on the path the last rotation replaced (the API server still has the old URL: run "
    "nodewright install-webhooks --apply before the rotation window closes)",
    WEBHOOK,
)
WAKEUPS_HANDLED = MetricSpec(
    "WakeupsHandled", "Count", "Sum", (), "provisioner invocations started by a wake-up", WAKEUP_HANDLER
)
WAKEUPS_STALE = MetricSpec(
    "WakeupsStale",
    "Count",
    "Sum",
    (),
    "wake-ups delivered after the provisioner had already looked (throttled behind its loop): dropped",
    WAKEUP_HANDLER,
)

ALL_METRICS: tuple[MetricSpec, ...] = (
    PENDING_PODS,
    OLDEST_PENDING_POD_AGE,
    NODECLAIMS_LAUNCHED,
    LAUNCH_ERRORS,
    LAUNCH_FAILURES,
    CLUSTER_COST,
    PLAN_SECONDS,
    CREATE_FLEET_ERRORS,
    CAPACITY_RESERVATIONS_UNREAD,
    PRICE_ESTIMATED,
    INTERRUPTIONS_HANDLED,
    INTERRUPTION_HANDLING_SECONDS,
    NODE_DRAINED_SECONDS,
    API_REQUESTS,
    MALFORMED_MESSAGES,
    IGNORED_MESSAGES,
    MESSAGES_TOLERATED,
    STALE_MESSAGES,
    API_SERVER_UNAVAILABLE,
    AWS_UNAVAILABLE,
    INVOCATIONS_OUT_OF_TIME,
    DUPLICATE_MESSAGES,
    PRICE_REFRESH_ERRORS,
    ON_DEMAND_PRICES,
    SPOT_PRICES,
    DISRUPTION_ACTIONS,
    DISRUPTION_DECISIONS,
    DISRUPTION_DECISION_SECONDS,
    CONSOLIDATION_CANDIDATES,
    DISRUPTION_BLOCKED,
    DISRUPTION_SAVINGS,
    PASSES_COMPLETED,
    WAKEUPS,
    WAKEUP_ERRORS,
    WAKEUPS_COALESCED,
    WEBHOOK_REFUSED,
    WEBHOOK_SECRET_ERRORS,
    PREVIOUS_SECRET_REQUESTS,
    WAKEUPS_HANDLED,
    WAKEUPS_STALE,
)
METRIC_NAMES: frozenset[str] = frozenset(m.name for m in ALL_METRICS)
EMITTED: tuple[MetricSpec, ...] = tuple(m for m in ALL_METRICS if m.emitted_by)
NOT_EMITTED: tuple[MetricSpec, ...] = tuple(m for m in ALL_METRICS if not m.emitted_by)

# The scheduled functions that emit PassesCompleted (its Function dimension's values).
HEARTBEAT_FUNCTIONS = ("provisioner", "disruption")
# Values of the dimensions, for the dashboard's per-value lines: the capacity types the cloud
# provider reports (nodewright/cloud/catalog.py SPOT, ON_DEMAND).
CAPACITY_TYPES = ("spot", "on-demand")
# The values of LaunchFailures' Class dimension (nodewright/cloud/errors.py LAUNCH_FAILURE_CLASSES;
# a test keeps the two equal): an alarm cannot use SEARCH, so each class is its own series.
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
QUOTA = "Quota"
PERMISSION = "Permission"
INVALID_REQUEST = "InvalidRequest"
OTHER = "Other"
LAUNCH_FAILURE_CLASSES = (PERMISSION, INVALID_REQUEST, QUOTA, OTHER, INSUFFICIENT_CAPACITY)
