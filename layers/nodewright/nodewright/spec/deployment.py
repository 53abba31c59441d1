"""What the stack deploys and wires, as plain data: one definition read by the CDK app (``infra/``),
by the functions (``interruption/events.py``) and by the sandbox, which runs the functions as the
stack wires them. No CDK import here: ``aws_cdk`` starts a jsii runtime, which the functions and the
sandbox must not pay for; ``infra/`` turns these numbers into ``Duration`` objects.

Why each value is what it is stays next to it; the constructs in ``infra/capabilities`` say how
they use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# ----------------------------------------------------------------------------- EC2's own clock

# A spot instance is reclaimed two minutes after its interruption warning.
SPOT_NOTICE_SECONDS = 120

# ----------------------------------------------------------------------------- the functions

# The drain loop stops this long before the invocation's end (termination/terminate.py), so a
# call is never cut off mid-way.
DRAIN_SAFETY_MARGIN_SECONDS = 3
# The interruption functions handle their event(s), then drive the drains they started with the
# whole remaining time as budget (functions/*/app.py: processor.drive(remaining_seconds(context))).
# 125 s = the 120 s notice + the 3 s margin + 2 s of headroom: one invocation, started when the
# warning arrives, can see its drain through to the instance's end instead of leaving it to the
# next invocation or the provisioner's lifecycle pass. It is billed only while a drain is left.
INTERRUPTION_TIMEOUT_SECONDS = SPOT_NOTICE_SECONDS + DRAIN_SAFETY_MARGIN_SECONDS + 2
# The provisioner's loop (provisioning/loop.py) stops starting passes at
# min(LOOP_BUDGET_SECONDS 55, remaining - SAFETY_MARGIN_SECONDS 8) = 47 s with this timeout, and
# its last pass has those 8 s to finish: the invocation is over by 55 s, before the next tick.
PROVISIONER_TIMEOUT_SECONDS = 55


# An AZ-wide spot reclaim (`nodewright bench interruption --nodes 500`, docs/performance.md) is 500
# warnings within a second: 50 SQS batches. Each batch's invocation drives the drains it started
# for up to its whole timeout (the two-minute notice), so a batch waits for a free container until
# one is done: with fewer than 50 the last batches were cordoned minutes late (measured: 130 of 500
# acted on with batches handled one after another). Lambda's event source mapping starts five
# batches and adds 300 a minute, so 50 are at work within ten seconds of the warnings.
INTERRUPTION_MAX_CONCURRENCY = 50
# The direct EventBridge path: the first warnings are cordoned before the queue's pollers have
# scaled out; the queue carries every warning anyway (events beyond these are throttled, retried by
# Lambda for the event's two minutes, and acknowledged as duplicates once the queue has acted).
SPOT_EVENTS_CONCURRENCY = 5
# With 55 interruption containers at work at once, each one's own bucket at the default 50/s would
# let them ask the API server for 2,750 requests a second, where API Priority and Fairness answers
# 429. Each interruption container gets 5/s instead (275/s for all of them, near Karpenter's
# 200/300 for its one process; measured peak in docs/performance.md), and a burst of 50: a batch's
# ten cordons and its replacement's lists (~50 requests) go at once, only the drains' polling is paced.
INTERRUPTION_KUBE_CLIENT_QPS = 5.0
INTERRUPTION_KUBE_CLIENT_BURST = 50
# While it holds the writers' lease (one container of the cluster at a time), an interruption
# container asks at the provisioner's rate (nodewright.settings KUBE_CLIENT_QPS/KUBE_CLIENT_BURST):
# the holder plans and launches the replacements of every interrupted node (measured in a 100-node
# storm: one pass creating 81 NodeClaims, three or four requests each, held to 5/s for 58 s). The
# bound stays: 54 containers at 5/s and one at 50/s, 320/s.
# The functions many containers of which may be at work at once in a storm: the rate above is theirs.
INTERRUPTION_FUNCTIONS = ("interruption", "spot_events")
# Their memory, which buys their CPU (1,769 MB = one vCPU). What a cold container spends before a
# storm's first replacement can plan, measured in CPU seconds (docs/performance.md, Interruption):
# the Init phase (imports) ~0.8, connecting the clients ~0.7, the instance catalog and price table
# ~4.7 (DescribeInstanceTypes and offerings pages, parsed). At 512 MB (~0.29 vCPU) that is ~21 s of
# the 30 s goal before planning starts; at one vCPU ~6 s. Interruptions are rare and an invocation
# lasts at most INTERRUPTION_TIMEOUT_SECONDS: 1.73 GB x 125 s is ~$0.003 per container.
INTERRUPTION_MEMORY_MB = 1769


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    memory_mb: int
    timeout_seconds: int
    # Reserved concurrency; None = unreserved.
    reserved_concurrency: int | None = None
    description: str = ""


# The scheduled and event-driven functions (infra/capabilities/functions.py builds one Lambda each).
# Sizing: Graviton/arm64; Lambda gives CPU in proportion to memory (1,769 MB = one vCPU).
SCHEDULED_AND_EVENT_FUNCTIONS: tuple[FunctionSpec, ...] = (
    # Every minute; inside one invocation it polls until the loop deadline above, so a pending pod
    # waits seconds, not a minute; when nothing has been pending for a while it makes one pass and
    # returns. Reserved concurrency 1 makes the rare overlap (a tick a few seconds early) a throttle
    # that Lambda retries, never two planners at once. 512 MB: planning a few hundred pods is
    # milliseconds of CPU; more memory mostly raises the cost of a function that may run all minute.
    FunctionSpec(
        "provisioner", 512, PROVISIONER_TIMEOUT_SECONDS, 1, "plans and launches capacity for pending pods"
    ),
    # Every minute: removes expired, empty, drifted and underutilized nodes within the budgets and
    # drives their drains (disruption/flow.py: passes stop at min(50 s, remaining - 8 s) = 47 s, so
    # 55 s ends it before the next tick). Consolidation simulates the whole cluster without its
    # candidates, the most CPU of all the flows: 1 GB (~0.6 vCPU).
    FunctionSpec("disruption", 1024, 55, None, "removes expired and empty nodes within budgets"),
    # One SQS batch (up to QUEUE_BATCH_SIZE messages), then the drains (INTERRUPTION_TIMEOUT_SECONDS).
    # One vCPU (INTERRUPTION_MEMORY_MB): in an AZ-wide reclaim nearly every container is cold, and a
    # cold one's replacement must load the catalog before it can plan.
    FunctionSpec(
        "interruption",
        INTERRUPTION_MEMORY_MB,
        INTERRUPTION_TIMEOUT_SECONDS,
        None,
        "handles interruption queue messages",
    ),
    # The direct EventBridge path for the same spot warnings: the same budget, at most
    # SPOT_EVENTS_CONCURRENCY at once (see above).
    FunctionSpec(
        "spot_events",
        INTERRUPTION_MEMORY_MB,
        INTERRUPTION_TIMEOUT_SECONDS,
        SPOT_EVENTS_CONCURRENCY,
        "low-latency path for spot warnings",
    ),
    # Paginates the Pricing API for the region's EC2 offers (thousands of products): minutes.
    FunctionSpec("pricing", 512, 300, None, "refreshes on-demand and spot prices"),
)
# The wake-up webhook behind the function URL (or the private load balancer). 256 MB: it parses one
# review and makes one asynchronous call; a cold start imports Powertools and boto3 (~1-1.5 s). The
# API server waits at most 1 s (timeoutSeconds) and then ignores the answer, but the invocation goes
# on: 10 s lets a slow cold start still send its wake-up (a timeout costs nothing until it is used).
# Reserved concurrency 5: a burst of 500 unschedulable pods is at most this many wake-ups a second,
# and a flood of guesses at the URL at most this many short invocations at a time.
WEBHOOK_CONCURRENCY = 5
WEBHOOK = FunctionSpec("webhook", 256, 10, WEBHOOK_CONCURRENCY)
# The custom resource CloudFormation calls at `cdk destroy` (infra/capabilities/removal.py). Lambda's
# maximum: the removal drains for at most 10 minutes (nodewright/removal.py DRAIN_SECONDS,
# PodDisruptionBudgets may hold a workload that long), then finishes each node (1 minute), cleans up
# AWS (2 minutes) and answers CloudFormation (45 s kept for it): about 14 minutes at worst. It sizes
# the drain from the time the invocation has, so it answers before this timeout.
CLEANUP = FunctionSpec("cleanup", 256, 900)

FUNCTIONS: dict[str, FunctionSpec] = {
    spec.name: spec for spec in (*SCHEDULED_AND_EVENT_FUNCTIONS, WEBHOOK, CLEANUP)
}

# The EventBridge schedules, in seconds. On-demand prices change a few times a year, spot prices
# drift slowly: twice a day.
SCHEDULES: dict[str, int] = {"provisioner": 60, "disruption": 60, "pricing": 12 * 3600}
# A tick that cannot be delivered within a minute is superseded by the next one: no retries.
SCHEDULE_RETRY_ATTEMPTS = 0
SCHEDULE_MAX_EVENT_AGE_SECONDS = 60

# The provisioner's wake-up alias, invoked asynchronously by the webhook: no retries (the next
# unschedulable pod or the schedule wakes it again), events at most a minute old.
WAKEUP_RETRY_ATTEMPTS = 0
WAKEUP_MAX_EVENT_AGE_SECONDS = 60

# ----------------------------------------------------------------------------- events and rules

SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH_EVENT = "AWS Health Event"
CAPACITY_RESERVATION_INTERRUPTION = "EC2 Capacity Reservation Instance Interruption Warning"

# Rule id → event pattern, in EventBridge's own JSON (``detail-type``); every one of them feeds the
# interruption queue (as Karpenter's rules do).
QUEUE_RULES: dict[str, dict[str, Any]] = {
    "SpotInterruption": {"source": ["aws.ec2"], "detail-type": [SPOT_INTERRUPTION]},
    "Rebalance": {"source": ["aws.ec2"], "detail-type": [REBALANCE_RECOMMENDATION]},
    "StateChange": {"source": ["aws.ec2"], "detail-type": [STATE_CHANGE]},
    # Only EC2 scheduled changes (retirements, maintenance); other Health events are noise.
    "ScheduledChange": {
        "source": ["aws.health"],
        "detail-type": [HEALTH_EVENT],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
    "CapacityReservationInterruption": {
        "source": ["aws.ec2"],
        "detail-type": [CAPACITY_RESERVATION_INTERRUPTION],
    },
}
# The low-latency direct path to the spot_events function: the two spot events only. The same
# events also reach the queue; the two paths deduplicate through the idempotency records.
DIRECT_RULE: dict[str, Any] = {
    "source": ["aws.ec2"],
    "detail-type": [SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION],
}
# The direct rule's Lambda target: invoked asynchronously, 2 retries, events at most the warning's
# whole notice old.
DIRECT_RETRY_ATTEMPTS = 2
DIRECT_MAX_EVENT_AGE_SECONDS = SPOT_NOTICE_SECONDS

# ----------------------------------------------------------------------------- the interruption queue

# The interruption function reads the queue in batches of 10 and reports per-item failures, so one
# bad message is retried (then dead-lettered) without re-running the other nine.
QUEUE_BATCH_SIZE = 10
# A spot warning gives two minutes; a message older than five is about an instance that is gone,
# so the queue drops it (Karpenter uses the same 300 s).
QUEUE_RETENTION_SECONDS = 300
# Lambda refuses an SQS event source whose queue's visibility timeout is shorter than the
# function's timeout; 5 s more, so the message is not handed to another poller while the
# invocation holding it is still finishing.
QUEUE_VISIBILITY_SECONDS = INTERRUPTION_TIMEOUT_SECONDS + 5
# A failed message is received again after each visibility timeout, and moved to the DLQ on the
# receive after the last allowed one: at 2 x 130 s = 260 s, inside the 300 s retention (with 3,
# at 390 s, it would silently expire instead). One retry is all a spot warning can use anyway:
# its instance is gone 120 s after the event; the drains of an earlier attempt are resumed by
# the next invocation and by the provisioner's lifecycle pass.
QUEUE_MAX_RECEIVE_COUNT = 2
# A dead-lettered message is kept two weeks for whoever answers its alarm.
DEAD_LETTER_RETENTION_SECONDS = 14 * 24 * 3600
