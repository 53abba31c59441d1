"""One invocation of the provisioner: passes in a loop until shortly before the next schedule.

EventBridge starts the function once a minute; a pod must not wait a minute, so while
there is work the invocation polls every ``poll_interval_seconds`` and runs a pass when a
new pending pod appears. New pods are batched as Karpenter batches them: the pass starts
after ``batch_idle_seconds`` without another new pod, or ``batch_max_seconds`` after the
first, so a burst is planned together.

Every second of a looping function is billed, so the loop is adaptive: when no pod has
been pending for ``idle_after_seconds`` (and no NodeClaim is still on its way), the
invocation makes one pass and returns. A pod that no NodePool can place stops counting as
activity after ``idle_after_seconds`` (it is retried every minute, never looped on forever).
The moment of the last activity is kept in the
state store (DynamoDB) when there is one, so a fresh container knows it too; without a
store the newest NodeClaim's age stands in for it.

The writers' lease is taken for each pass and given back after it, so the interruption and
disruption writers get their turn between passes; a long pass renews it as it writes and stops
writing at the loop's deadline or when the lease cannot be renewed (``state.guard``).

While looping, the invocation watches the pending pods between passes (``wait_for_pending_pods``:
a watch from its last list, as Karpenter's informer watches), so a new pod opens the batching
window the moment the API server stores it; a full pass (lifecycle included) runs at least every
``poll_interval_seconds``.

An invocation may also be a **wake-up** from the webhook (``woken_at``: when it was sent). Its
first pass batches from that moment, so what arrives within the batching window is planned with
it. A wake-up that Lambda delivers late (it waited, throttled, while this container was looping)
is dropped without a call when this container has listed the pending pods since it was sent.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.provisioning import nodeclaims
from nodewright.provisioning.flow import PassReport, provision
from nodewright.state.guard import WriteGuard
from nodewright.state.pods import is_provisionable, pending_since
from nodewright.state.pods import key as pod_key

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Lease

# The invocation stops looping this long after it started: the next scheduled invocation
# (every 60 s) takes over, and reserved concurrency 1 never sees two overlap.
LOOP_BUDGET_SECONDS = 55.0
# Stop when less than this is left before the Lambda timeout (a pass plus a launch must fit).
SAFETY_MARGIN_SECONDS = 8.0
# A pass already running may write until this long before the Lambda timeout (time to report);
# it is not held to the loop's deadline, which only decides whether another pass starts.
WRITE_MARGIN_SECONDS = 3.0
# While a batch is open, look for new pods this often (a cheap list of pending pods).
BATCH_POLL_SECONDS = 0.25
# Between passes a watch says when a new pod arrives; the pending pods are listed again at most
# this often, so pods that keep changing cannot turn the watch into a stream of lists.
MIN_LIST_SPACING_SECONDS = 0.25
# A wake-up is stale when this container listed the pending pods this long after it was sent:
# the API server stores the pod's Unschedulable status after the webhook answers (at most 2 s).
WAKEUP_MARGIN_SECONDS = 3.0
TIMESTAMP_RESOLUTION = 1.0  # metav1.Time has whole seconds
LEASE_IDENTITY = "provisioner"
# A pass takes seconds; a holder that died mid-pass frees the lease after this long.
LEASE_SECONDS = 30
# Another writer (an interruption's replacement passes, a disruption command) holds the lease: ask
# again after this long, not at once (the pods it skipped are still pending, so the loop would list
# them and ask for the lease as fast as the API server answers).
LEASE_RETRY_SECONDS = 1.0
ACTIVITY_KEY = "provisioner#last-active"


@dataclass
class InvocationReport:
    passes: list[PassReport] = field(default_factory=list)
    idle: bool = False
    lease_held: bool = True  # at least one pass ran under the writers' lease
    seconds: float = 0.0
    woken: bool = False  # started by a wake-up from the webhook
    stale_wakeup: bool = False  # a wake-up this container had already covered: nothing done

    def summary(self) -> dict[str, Any]:
        return {
            "passes": len(self.passes),
            "idle": self.idle,
            "woken": self.woken,
            "staleWakeup": self.stale_wakeup,
            "leaseHeld": self.lease_held,
            "seconds": round(self.seconds, 3),
            "launched": sum(len(p.launched) for p in self.passes),
            "nodeClaimsCreated": [c for p in self.passes for c in p.created],
            "staticDeleted": [c for p in self.passes for c in p.static_deleted],
            "failures": sum(len(p.failures) for p in self.passes),
            "pendingPods": self.passes[-1].pending_pods if self.passes else 0,
            # What its termination controller drove, as the disruption function reports it: a
            # termination is driven by whichever function's pass comes to it first.
            "terminations": [t for p in self.passes for t in p.termination.summary()],
        }


def run(ctx: Context, remaining_seconds: float, woken_at: datetime | None = None) -> InvocationReport:
    """Passes until the loop budget or the Lambda's remaining time runs out (see the module docstring).

    ``woken_at``: this invocation is a wake-up the webhook sent then (None: the schedule)."""
    clock = ctx.clock
    started = clock.monotonic()
    deadline = started + min(LOOP_BUDGET_SECONDS, remaining_seconds - SAFETY_MARGIN_SECONDS)
    write_deadline = started + remaining_seconds - WRITE_MARGIN_SECONDS
    report = InvocationReport(lease_held=False, woken=woken_at is not None)
    if woken_at is not None and is_stale_wakeup(ctx, woken_at):
        report.stale_wakeup = True
        return report
    # Held for one pass at a time, never while waiting: an interruption replacement must not wait
    # for a whole provisioner loop. A fresh identity per invocation: two overlapping invocations
    # (reserved concurrency 1 should prevent it) can never both believe they hold it.
    lease = ctx.cluster.writer_lease(
        f"{LEASE_IDENTITY}/{uuid.uuid4().hex[:8]}", duration_seconds=LEASE_SECONDS
    )
    last_active = _last_active(ctx)
    handled: frozenset[str] = frozenset()
    looked = _look(ctx)
    while True:
        if looked.pods or woken_at:  # a burst may be arriving right now: let it finish, then plan it
            _wait_for_quiet(ctx, looked, deadline, since=woken_at)
            woken_at = None
        # An idle loop asks once: a refused pass ends it, as the next scheduled one plans its pods.
        if _pass_under(lease, ctx, clock.monotonic() if _idle(ctx, last_active) else deadline):
            report.lease_held = True
            guard = WriteGuard(
                lease, deadline=write_deadline, lease_seconds=LEASE_SECONDS, monotonic=clock.monotonic
            )
            try:
                result = provision(ctx, guard)
            finally:
                lease.release()
            report.passes.append(result)
            handled = result.pending_keys
            if _active(result, ctx.settings.idle_after_seconds):
                last_active = ctx.clock.now()
                _store_last_active(ctx, last_active)
        if _idle(ctx, last_active):
            report.idle = True
            break
        waited = _wait_for_work(ctx, handled, deadline)
        if waited is None:
            break
        looked = waited
    report.seconds = clock.monotonic() - started
    return report


def _idle(ctx: Context, last_active: datetime | None) -> bool:
    idle_for = (ctx.clock.now() - last_active).total_seconds() if last_active else float("inf")
    return idle_for >= ctx.settings.idle_after_seconds


def _pass_under(lease: Lease, ctx: Context, deadline: float) -> bool:
    """Take the writers' lease for a pass whose batch has closed: asked again every
    ``LEASE_RETRY_SECONDS`` while another writer holds it, until ``deadline`` (False).

    The batch's pods wait for the lease, not for another batching window: in a 100-node spot
    reclaim, pods evicted one after another kept each window open its full ten seconds, and a pass
    refused the lease waited a new window before asking again, seven to nine seconds apart, while
    the replacement holders took the lease in between (the last replacements 33 s after their
    warnings). Karpenter's provisioner, which needs no lease, plans a closed batch at once; pods
    that arrive meanwhile are in the pass anyway, which lists them afresh."""
    clock = ctx.clock
    told = False
    while True:
        if lease.acquire():
            return True
        if not told:  # once a wait, not once a second
            ctx.logger.info("another writer holds the lease; the pass waits for it")
            told = True
        left = deadline - clock.monotonic()
        if left <= 0:
            return False
        clock.sleep(min(LEASE_RETRY_SECONDS, left))


def _active(result: PassReport, idle_after: float) -> bool:
    """Whether this pass counts as activity that keeps the loop awake.

    New capacity and its lifecycle count, and so does a pod pending for less than ``idle_after``.
    A pod that has stayed unplaceable for longer (no NodePool fits it) does not: it is still
    retried once a minute, but it cannot keep the function looping, and billed, forever. Nor can a
    termination that only waits (a drain a PodDisruptionBudget blocks): it counted while it existed,
    and one blocked for days kept the provisioner looping, and billed, all that time; it is still
    stepped once a minute, and counts again on the pass that evicts, deletes or finishes.
    """
    life = result.lifecycle
    moving = (
        result.created
        or result.launched
        or life.registered
        or result.termination.progressed
        or result.garbage.orphans_deleted
        or result.static_deleted
    )
    young = result.youngest_pending_seconds is not None and result.youngest_pending_seconds < idle_after
    return bool(moving or young)


@dataclass(frozen=True)
class _Looked:
    """The provisionable pods one list found, and when it answered (``clock.monotonic``)."""

    pods: list[dict[str, Any]]
    at: float


def _look(ctx: Context) -> _Looked:
    pods = _provisionable_pods(ctx)
    return _Looked(pods, ctx.clock.monotonic())


def _wait_for_work(ctx: Context, handled: frozenset[str], deadline: float) -> _Looked | None:
    """Wait until a new pending pod needs capacity or the poll interval ends; None at the deadline.

    Lists, then watches from that list until a provisionable pod not yet handled arrives (or the
    interval ends), then lists again to be sure; answers also when a plain poll interval passed,
    so in-flight NodeClaims keep moving through their lifecycle while the loop is awake. The list
    that found the pods is the answer: the batch window opens from it, not from another list.
    """
    clock, settings = ctx.clock, ctx.settings
    next_pass = clock.monotonic() + settings.poll_interval_seconds

    def wanted(pod: dict[str, Any]) -> bool:
        return is_provisionable(pod) and pod_key(pod) not in handled

    while True:
        listed = clock.monotonic()
        if listed >= deadline:
            return None
        looked = _look(ctx)
        if any(wanted(p) for p in looked.pods):
            return looked  # the batch window opens before the pass (see run)
        if listed >= next_pass:
            return looked
        ctx.cluster.wait_for_pending_pods(min(next_pass, deadline) - clock.monotonic(), wanted)
        spacing = MIN_LIST_SPACING_SECONDS - (clock.monotonic() - listed)
        if spacing > 0:
            clock.sleep(spacing)


def _wait_for_quiet(ctx: Context, looked: _Looked, deadline: float, since: datetime | None = None) -> None:
    """Karpenter's batching: ``batch_idle_seconds`` without a new pod, at most ``batch_max_seconds``.

    The window opens when the list of ``looked`` answered. Quiet is measured from the newest pod's
    own pending time (or ``since``, a wake-up's moment, when that is newer), so a burst that already
    went quiet before we looked is planned at once.
    """
    clock, settings = ctx.clock, ctx.settings
    fresh = looked.pods
    opened = looked.at
    seen = {pod_key(p) for p in fresh}
    ages = [_age_of_newest(ctx, fresh)] if fresh else []
    if since is not None:
        ages.append(max(0.0, (ctx.clock.now() - since).total_seconds()))
    since_opened = clock.monotonic() - opened  # the ages are now's; the window opened before
    last_arrival = opened - max(0.0, min(ages, default=0.0) - since_opened)
    while True:
        now = clock.monotonic()
        if now - last_arrival >= settings.batch_idle_seconds or now - opened >= settings.batch_max_seconds:
            return
        if now >= deadline:
            return
        clock.sleep(min(BATCH_POLL_SECONDS, settings.batch_idle_seconds - (now - last_arrival)))
        new = [p for p in _provisionable_pods(ctx) if pod_key(p) not in seen]
        if new:
            seen.update(pod_key(p) for p in new)
            last_arrival = clock.monotonic() - _age_of_newest(ctx, new)


def _provisionable_pods(ctx: Context) -> list[dict[str, Any]]:
    """The pending pods that need capacity, noting when this container last looked (before the call)."""
    looked = ctx.clock.now()
    pods = [p for p in ctx.cluster.list_pending_pods() if is_provisionable(p)]
    _observed[ctx.settings.cluster_name] = looked
    return pods


def is_stale_wakeup(ctx: Context, sent_at: datetime) -> bool:
    """Whether this container has listed the pending pods since a wake-up sent at ``sent_at`` (plus
    the time the API server may take to store the status that caused it)."""
    observed = _observed.get(ctx.settings.cluster_name)
    return observed is not None and observed > sent_at + timedelta(seconds=WAKEUP_MARGIN_SECONDS)


# When this container last listed the pending pods, per cluster (a warm container's memory).
_observed: dict[str, datetime] = {}


def _age_of_newest(ctx: Context, pods: list[dict[str, Any]]) -> float:
    """Seconds since the most recent of ``pods`` surely became pending (0 when unknown).

    API timestamps have whole seconds, truncated: a pod stamped ``:10`` may have become pending
    at ``:10.99``, so a second is taken off, lest a burst still arriving look quiet already.
    """
    now = ctx.clock.now()
    ages = [(now - since).total_seconds() - TIMESTAMP_RESOLUTION for p in pods if (since := pending_since(p))]
    return max(0.0, min(ages, default=0.0))


def _last_active(ctx: Context) -> datetime | None:
    """When a pod was last pending: the state store's record, else the newest NodeClaim's creation."""
    stored = None
    if ctx.store is not None:
        stored = nodeclaims.timestamp(ctx.store.get_marker(ACTIVITY_KEY))
    claims = [nodeclaims.created_at(c) for c in ctx.cluster.list_nodeclaims()]
    newest_claim = max((c for c in claims if c), default=None)
    candidates = [t for t in (stored, newest_claim, _memory.get(ctx.settings.cluster_name)) if t]
    return max(candidates, default=None)


_memory: dict[str, datetime] = {}


def _store_last_active(ctx: Context, moment: datetime) -> None:
    _memory[ctx.settings.cluster_name] = moment
    if ctx.store is not None:
        # Kept a day: after that the cluster counts as idle anyway.
        ctx.store.put_marker(ACTIVITY_KEY, nodeclaims.format_time(moment), ttl=86400)
