"""The CloudWatch metrics the functions emit (EMF, namespace ``Nodewright``) and the dashboard reads.

This is the contract between the flows (which emit) and the stack (which graphs and
alarms). A flow that emits a metric not listed here is not on the dashboard; a name
changed on one side only leaves an empty graph and an alarm that never fires. Keep the
names in sync with the emitting code; the dimension names are part of the contract too.
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
    dimension: str | None  # the one dimension the flows add, if any
    meaning: str


PENDING_PODS = MetricSpec(
    "PendingPods", "Count", "Maximum", None, "unschedulable pods seen by the provisioner"
)
OLDEST_PENDING_POD_AGE = MetricSpec(
    "OldestPendingPodAgeSeconds", "Seconds", "Maximum", None, "age of the oldest pod still pending"
)
NODECLAIMS_LAUNCHED = MetricSpec(
    "NodeClaimsLaunched", "Count", "Sum", "CapacityType", "instances launched (spot / on-demand / reserved)"
)
LAUNCH_ERRORS = MetricSpec("LaunchErrors", "Count", "Sum", "ErrorCode", "failed launches by EC2 error code")
INSUFFICIENT_CAPACITY_ERRORS = MetricSpec(
    "InsufficientCapacityErrors", "Count", "Sum", None, "offerings that answered insufficient capacity (ICE)"
)
INTERRUPTIONS_HANDLED = MetricSpec(
    "InterruptionsHandled", "Count", "Sum", "Kind", "interruption events acted on, by kind"
)
INTERRUPTION_HANDLING_SECONDS = MetricSpec(
    "InterruptionHandlingSeconds", "Seconds", "Maximum", None, "event time to node drained"
)
MALFORMED_MESSAGES = MetricSpec(
    "MalformedMessages", "Count", "Sum", None, "queue messages that could not be parsed"
)
CONSOLIDATION_ACTIONS = MetricSpec(
    "ConsolidationActions", "Count", "Sum", None, "nodes deleted or replaced by disruption"
)
CONSOLIDATION_SAVINGS = MetricSpec(
    "ConsolidationSavingsPerHour", "None", "Sum", None, "$/h saved by the consolidation actions"
)
CLUSTER_COST = MetricSpec(
    "ClusterCostPerHour", "None", "Maximum", None, "$/h of the nodes Nodewright manages"
)
PLAN_SECONDS = MetricSpec("PlanSeconds", "Seconds", "Maximum", None, "time to compute one scheduling plan")

ALL_METRICS: tuple[MetricSpec, ...] = (
    PENDING_PODS,
    OLDEST_PENDING_POD_AGE,
    NODECLAIMS_LAUNCHED,
    LAUNCH_ERRORS,
    INSUFFICIENT_CAPACITY_ERRORS,
    INTERRUPTIONS_HANDLED,
    INTERRUPTION_HANDLING_SECONDS,
    MALFORMED_MESSAGES,
    CONSOLIDATION_ACTIONS,
    CONSOLIDATION_SAVINGS,
    CLUSTER_COST,
    PLAN_SECONDS,
)
METRIC_NAMES: frozenset[str] = frozenset(m.name for m in ALL_METRICS)

# Values of the dimensions, for the dashboard's per-dimension lines. The flows may emit
# others; those show up in CloudWatch but not on the fixed dashboard.
CAPACITY_TYPES = ("spot", "on-demand", "reserved")
INTERRUPTION_KINDS = (
    "SpotInterruption",
    "Rebalance",
    "StateChange",
    "ScheduledChange",
    "CapacityReservation",
)
