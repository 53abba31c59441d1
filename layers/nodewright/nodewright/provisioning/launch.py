"""Create NodeClaims and launch them through the cloud provider: the one path every launch takes.

``create_and_launch`` is that path, for a provisioning pass, an interruption's replacements and a
disruption command's (``provisioning.displaced``): each planned NodeClaim is created (the object is
the record of intent), then launched, the write guard (``state.guard``: the writers' lease still
ours, the invocation's time not up) asked before every write; what it stops short of, the next
provisioning pass launches. The NodeClaims go at once, at most ``settings.launch_concurrency`` of
them (``provisioning.parallel``), as Karpenter launches a batch in parallel: each one's create →
CreateFleet → status write is its own, and one's failure fails it alone.

A NodeClaim without ``Launched`` is either fresh from this pass or left by a pass that
crashed. Before launching, the instance tagged with the NodeClaim's name is looked up:
if a crash came after CreateFleet but before the status write, that instance is
adopted instead of launching a second one (CreateFleet's ClientToken, derived from the
NodeClaim's uid, is the second guard).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright import termination
from nodewright.api import labels
from nodewright.api.models import NodePool, ObjectMeta
from nodewright.api.overlays import PRICE_OVERLAY_APPLIED
from nodewright.api.validation import nodeclaim_launch_problems
from nodewright.checkpoints import checkpoint
from nodewright.cluster.errors import Conflict
from nodewright.context import is_outage
from nodewright.provisioning import nodeclaims, parallel, planning
from nodewright.provisioning.nodeclaims import LAUNCHED
from nodewright.state.views import ClaimView
from nodewright.state.world import World, nodepool_name

if TYPE_CHECKING:
    from nodewright.cloud.provider import LaunchResult
    from nodewright.context import Context
    from nodewright.scheduling import InstanceType
    from nodewright.state.guard import WriteGuard
    from nodewright.state.interfaces import Obj

# The Launched condition's reason (and the event's) for a NodeClaim that fails validation.
INVALID = "InvalidNodeClaim"


@dataclass(frozen=True)
class Launched:
    """One NodeClaim's instance, as recorded on the NodeClaim."""

    nodeclaim: str
    nodepool: str
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None
    adopted: bool = False


@dataclass(frozen=True)
class LaunchFailure:
    """One NodeClaim whose launch failed: the error code (EC2's, or ours) and its class
    (``cloud.errors.launch_failure_class``; the ``LaunchFailures{Class}`` metric's dimension)."""

    nodeclaim: str
    nodepool: str
    code: str
    message: str
    failure_class: str = ""

    def __post_init__(self) -> None:
        if not self.failure_class:
            from nodewright.cloud.errors import launch_failure_class

            object.__setattr__(self, "failure_class", launch_failure_class(self.code))


@dataclass
class Launches:
    """What one ``create_and_launch`` did: the NodeClaims created (in the plans' order), launched,
    failed (in the order they were asked for); ``stopped``: why it stopped writing early (the guard
    said so), else None. ``created_by_plan`` holds, for each plan, its NodeClaim's name or None when
    it was not created."""

    created: list[str] = field(default_factory=list)
    launched: list[Launched] = field(default_factory=list)
    failures: list[LaunchFailure] = field(default_factory=list)
    stopped: str | None = None
    created_by_plan: list[str | None] = field(default_factory=list)


Outcome = Launched | LaunchFailure | None


def create_and_launch(
    ctx: Context,
    world: World,
    plans: Sequence[planning.ClaimPlan],
    *,
    guard: WriteGuard | None,
    awaiting: Sequence[Obj] = (),
) -> Launches:
    """Launch ``awaiting`` (NodeClaims a crashed pass left unlaunched: their instance is adopted or
    launched now) and create and launch a NodeClaim for each of ``plans``, concurrently (see the
    module docstring), asking ``guard`` before every write (None: nothing stops it; tests and the
    CLI). One NodeClaim's failure never stops the others; an API server outage ends the pass once
    the launches in flight are done."""
    done = Launches()
    stop = _Stop(ctx, guard, done)

    def finish(claim: Obj) -> tuple[str | None, Outcome]:
        return None, None if stop() else launch_one(ctx, world, claim, fresh=False)

    def create_then_launch(claim_plan: planning.ClaimPlan) -> tuple[str | None, Outcome]:
        if stop():
            return None, None
        claim = create_nodeclaim(ctx, world, claim_plan)
        checkpoint("provisioning.nodeclaim-created")
        name = nodeclaims.name_of(claim)
        return name, None if stop() else launch_one(ctx, world, claim, fresh=True)

    tasks: list[Callable[[], tuple[str | None, Outcome]]] = [
        *(lambda claim=claim: finish(claim) for claim in awaiting),
        *(lambda claim_plan=claim_plan: create_then_launch(claim_plan) for claim_plan in plans),
    ]
    results = parallel.each(tasks, limit=ctx.settings.launch_concurrency)
    for index, result in enumerate(results):
        name, outcome = (None, None) if isinstance(result, parallel.Skipped) else result
        if index >= len(awaiting):
            done.created_by_plan.append(name)
            if name is not None:
                done.created.append(name)
        if isinstance(outcome, Launched):
            done.launched.append(outcome)
        elif outcome is not None:
            done.failures.append(outcome)
    return done


class _Stop:
    """The guard's answer for the launches' threads: asked before each write; the first stop is
    logged once and kept in ``done.stopped``."""

    def __init__(self, ctx: Context, guard: WriteGuard | None, done: Launches) -> None:
        self._ctx, self._guard, self._done = ctx, guard, done
        self._lock = threading.Lock()

    def __call__(self) -> bool:
        why = self._guard.why_stop() if self._guard is not None else None
        if why is None:
            return False
        with self._lock:
            if self._done.stopped is None:
                self._done.stopped = why
                self._ctx.logger.warning("launches stop writing", extra={"reason": why})
        return True


def create_nodeclaim(ctx: Context, world: World, claim_plan: planning.ClaimPlan) -> Obj:
    """Create the NodeClaim for one planned node (a fresh random name on the rare name collision)."""
    name = claim_plan.nodepool
    pool = world.nodepool_model(name) or NodePool(metadata=ObjectMeta(name=name))
    nodeclass = world.nodeclass(pool.spec.template.spec.node_class_ref.name)
    for _attempt in range(5):
        body = nodeclaims.build(
            name=nodeclaims.new_name(name),
            nodepool=pool,
            requirements=claim_plan.requirements,
            requests=claim_plan.requests,
            nodeclass=nodeclass,
            min_values_relaxed=claim_plan.min_values_relaxed,
            price_overlay=claim_plan.price_overlay,
        )
        try:
            return ctx.cluster.create_nodeclaim(body)
        except Conflict as exc:
            if not exc.already_exists:
                raise
    raise RuntimeError(f"could not find a free NodeClaim name for NodePool {claim_plan.nodepool}")


def launch_one(ctx: Context, world: World, claim: Obj, *, fresh: bool) -> Launched | LaunchFailure | None:
    """Validate, then launch one NodeClaim; whatever goes wrong fails this NodeClaim, never the pass.

    None: an invalid NodeClaim already refused by an earlier pass (nothing new to report). A valid
    one is read through its ``ClaimView`` from here on; an invalid one, and one that fails, through
    the object, whatever it holds.
    """
    problems = nodeclaim_launch_problems(claim)
    if problems:
        return refuse_invalid(ctx, claim, problems)
    try:
        view = ClaimView.of(claim)
        candidates = planning.candidates_for(world, view)
        return launch_claim(ctx, view, world.nodeclass(view.nodeclass) or {}, candidates, fresh=fresh)
    except Exception as exc:  # isolation: one NodeClaim's failure must not stop the others
        if is_outage(exc):  # not this NodeClaim's failure: the handler reports it once, no traceback
            raise
        return fail_unexpectedly(ctx, claim, exc)


def launch_claim(
    ctx: Context,
    claim: ClaimView,
    nodeclass: dict[str, Any],
    candidates: Sequence[Any],
    *,
    fresh: bool = False,
) -> Launched | LaunchFailure:
    """Adopt the NodeClaim's instance if one exists, else launch one; then write the status.

    ``fresh``: created by this pass, so no instance can exist yet and the lookup is skipped.
    """
    from nodewright.cloud import errors as cloud_errors
    from nodewright.cloud.provider import LaunchResult

    name = claim.name
    existing = None if fresh else ctx.cloud.find_by_nodeclaim(name)
    if existing is not None:
        result, adopted = LaunchResult.from_instance(existing), True
    else:
        if not candidates:
            return _fail(
                ctx,
                claim,
                "NoInstanceTypes",
                f"NodeClaim {name}: none of its instance types is offered by its EC2NodeClass any more",
            )
        try:
            result = ctx.cloud.create(_launch_request(claim, nodeclass, candidates, fresh=fresh))
        except cloud_errors.InsufficientCapacityError as exc:
            codes = sorted({e.code for e in exc.errors}) or ["InsufficientInstanceCapacity"]
            return _fail(ctx, claim, codes[0], str(exc), cloud_errors.launch_failure_class(*codes))
        except cloud_errors.LaunchError as exc:
            return _fail(ctx, claim, exc.code, str(exc))
        except cloud_errors.CloudError as exc:
            return _fail(ctx, claim, type(exc).__name__, str(exc))
        adopted = False
        checkpoint("provisioning.fleet-created")
    record_launch(ctx, claim, result, candidates)
    checkpoint("provisioning.launch-recorded")
    return Launched(
        nodeclaim=name,
        nodepool=claim.nodepool,
        instance_id=result.instance_id,
        instance_type=result.instance_type,
        zone=result.zone,
        capacity_type=result.capacity_type,
        price=getattr(result, "price", None),
        adopted=adopted,
    )


def _launch_request(
    claim: ClaimView, nodeclass: dict[str, Any], candidates: Sequence[Any], *, fresh: bool
) -> Any:
    """The cloud provider's LaunchRequest: candidates, the zones and capacity types the claim allows;
    ``fresh``: the NodeClaim was created by this pass (no instance to look for)."""
    from nodewright.cloud.provider import LaunchRequest

    requirements = claim.requirements
    capacity_types = allowed_values(
        requirements,
        labels.CAPACITY_TYPE,
        {labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_RESERVED},
    )
    zones = allowed_values(requirements, labels.ZONE, None)
    reservations = allowed_values(requirements, labels.CAPACITY_RESERVATION_ID, None)
    return LaunchRequest(
        nodeclaim_name=claim.name,
        nodeclaim_uid=claim.uid or claim.name,
        nodepool_name=claim.nodepool,
        nodeclass=nodeclass,
        instance_types=list(candidates),
        zones=frozenset(zones) if zones is not None else None,
        # Karpenter's default when a NodePool says nothing about capacity type: on-demand.
        capacity_types=frozenset(capacity_types or {labels.CAPACITY_TYPE_ON_DEMAND}),
        labels=dict(claim.labels),
        taints=list(claim.taints),
        startup_taints=list(claim.startup_taints),
        kubelet=_kubelet_overrides(claim.raw) or None,
        reservation_ids=frozenset(reservations) if reservations is not None else None,
        prioritized=claim.annotations.get(PRICE_OVERLAY_APPLIED) == "true",
        fresh=fresh,
    )


def _kubelet_overrides(claim: dict[str, Any]) -> dict[str, Any]:
    """A v1beta1 NodePool's kubelet (converted by the webhook), in v1's form, over the EC2NodeClass's."""
    from nodewright.api.conversion_review import kubelet_overrides
    from nodewright.api.convert import convert_kubelet

    overrides = kubelet_overrides(claim)
    return convert_kubelet(overrides, "", []) if overrides else {}


def allowed_values(
    requirements: Sequence[dict[str, Any]], key: str, universe: set[str] | None
) -> set[str] | None:
    """Values the requirements allow for ``key``; None when unconstrained (or NotIn with no universe)."""
    allowed = set(universe) if universe is not None else None
    constrained = False
    for requirement in requirements:
        if requirement.get("key") != key:
            continue
        values = {str(v) for v in requirement.get("values") or []}
        operator = requirement.get("operator")
        if operator == "In":
            allowed = values if allowed is None else allowed & values
            constrained = True
        elif operator == "NotIn" and allowed is not None:
            allowed -= values
            constrained = True
    return allowed if constrained else None


def record_launch(
    ctx: Context, claim: ClaimView, result: LaunchResult, candidates: Sequence[InstanceType]
) -> None:
    """Labels for the chosen type/zone/capacity type; status: providerID, instanceID, capacity, Launched."""
    name = claim.name
    chosen = next((t for t in candidates if t.name == result.instance_type), None)
    type_labels = dict(chosen.labels) if chosen is not None else {}
    new_labels = {
        **{k: str(v) for k, v in type_labels.items() if k in labels.WELL_KNOWN_LABELS},
        labels.INSTANCE_TYPE: result.instance_type,
        labels.ZONE: result.zone,
        labels.CAPACITY_TYPE: result.capacity_type,
    }
    offerings = chosen.offerings if chosen is not None else ()
    zone_ids = [o.zone_id for o in offerings if o.zone == result.zone]
    zone_id = next((z for z in zone_ids if z), None)
    if zone_id:
        new_labels[labels.TOPOLOGY_ZONE_ID] = zone_id  # topology.k8s.aws/zone-id, as Karpenter labels nodes
    if result.reservation_id:  # launched into a capacity reservation: its three labels
        new_labels.update(
            {
                labels.CAPACITY_RESERVATION_ID: result.reservation_id,
                labels.CAPACITY_RESERVATION_TYPE: result.reservation_type or "default",
                labels.CAPACITY_RESERVATION_INTERRUPTIBLE: str(bool(result.interruptible)).lower(),
            }
        )
    ctx.cluster.patch_nodeclaim(name, {"metadata": {"labels": new_labels}})
    status = claim.status_to_write()
    status.update(
        {
            "providerID": nodeclaims.make_provider_id(result.zone, result.instance_id),
            "instanceID": result.instance_id,
        }
    )
    if result.image_id:
        status["imageID"] = result.image_id
    if chosen is not None:
        status["capacity"] = _quantities(chosen.capacity)
        status["allocatable"] = _quantities(chosen.allocatable)
    status["conditions"] = nodeclaims.set_condition(
        status.get("conditions") or [],
        LAUNCHED,
        True,
        reason="Launched",
        message=f"{result.instance_type} {result.capacity_type} in {result.zone}: {result.instance_id}",
        now=ctx.clock.now(),
    )
    ctx.cluster.patch_nodeclaim_status(name, status)


def _quantities(resources: Mapping[str, Any]) -> dict[str, str]:
    """The scheduler's canonical integers (cpu in millicores) as Kubernetes quantities."""
    from nodewright.scheduling.resources import format_resource

    return {
        str(k): v if isinstance(v, str) else format_resource(str(k), int(v)) for k, v in resources.items()
    }


def refuse_invalid(ctx: Context, claim: dict[str, Any], problems: Sequence[object]) -> LaunchFailure | None:
    """A NodeClaim that fails validation is never launched: condition, event, and it is left as is.

    The object may be someone's hand-made NodeClaim; it stays for them to fix or delete (the
    lifecycle removes it once the registration timeout has passed). Only the first refusal of
    a given problem is reported, so a pass a minute does not repeat the event and the metric.
    """
    name = nodeclaims.name_of(claim)
    message = f"NodeClaim {name} is not launched: " + "; ".join(str(p) for p in problems)
    current = nodeclaims.condition(claim, LAUNCHED) or {}
    if current.get("reason") == INVALID and current.get("message") == message:
        return None
    _mark_not_launched(ctx, claim, INVALID, message)
    ctx.cluster.record_event(claim, INVALID, message, event_type="Warning")
    ctx.logger.warning("NodeClaim refused", extra={"nodeclaim": name, "problems": [str(p) for p in problems]})
    return LaunchFailure(nodeclaim=name, nodepool=nodepool_name(claim), code=INVALID, message=message)


def fail_unexpectedly(ctx: Context, claim: dict[str, Any], exc: Exception) -> LaunchFailure:
    """Anything else that went wrong launching one NodeClaim fails that NodeClaim alone.

    The NodeClaim is kept with ``Launched=False``: if CreateFleet went through before the
    error, the next pass adopts the instance by its tag; if not, the next pass tries again,
    until the registration timeout removes the NodeClaim.
    """
    from nodewright.cloud.errors import error_code

    name = nodeclaims.name_of(claim)
    code = error_code(exc)  # an AWS answer's own code (AccessDenied, ...), else the exception's type
    message = f"NodeClaim {name}: launch failed unexpectedly ({code}: {exc}); it is retried on the next pass"
    ctx.logger.exception("launch failed unexpectedly", extra={"nodeclaim": name, "code": code})
    steps: tuple[Callable[[], object], ...] = (
        lambda: _mark_not_launched(ctx, claim, "LaunchFailed", message),
        lambda: ctx.cluster.record_event(claim, "LaunchFailed", message, event_type="Warning"),
    )
    for step in steps:
        try:
            step()
        except Exception:  # the API server may be what failed; the log line above still says it
            ctx.logger.exception("could not record the failed launch", extra={"nodeclaim": name})
    return LaunchFailure(nodeclaim=name, nodepool=nodepool_name(claim), code=code, message=message)


def _mark_not_launched(ctx: Context, claim: dict[str, Any], reason: str, message: str) -> None:
    status = dict(claim.get("status") or {})
    status["conditions"] = nodeclaims.set_condition(
        status.get("conditions") or [], LAUNCHED, False, reason=reason, message=message, now=ctx.clock.now()
    )
    ctx.cluster.patch_nodeclaim_status(nodeclaims.name_of(claim), status)


def _fail(ctx: Context, claim: ClaimView, code: str, message: str, failure_class: str = "") -> LaunchFailure:
    """A launch that cannot succeed: event, log, and the NodeClaim goes (no instance exists).
    ``failure_class``: when several codes made it fail (``cloud.errors.launch_failure_class``)."""
    name = claim.name
    ctx.cluster.record_event(claim.raw, "LaunchFailed", message, event_type="Warning")
    ctx.logger.warning("launch failed", extra={"nodeclaim": name, "code": code, "error": message})
    termination.finish_unlaunched(ctx, name)
    return LaunchFailure(name, claim.nodepool, code, message, failure_class)
