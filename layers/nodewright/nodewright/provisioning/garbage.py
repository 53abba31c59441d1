"""The garbage-collection controller, run by every provisioning pass: ``reconcile(ctx, world)``.

What Kubernetes' garbage collector and Karpenter's garbage-collection controllers do for Karpenter,
over the pass's ``World``; each step is safe to repeat:

- NodeClaims of a deleted NodePool (``state.nodepools.orphaned_claims``) → deleted, with an event
  (what the ownerReference's garbage collection does in a cluster running Karpenter);
- a launched NodeClaim whose instance is gone (terminated out of band) → deleted, with an event;
- an instance tagged for this cluster whose NodeClaim does not exist (leaked by a crash) →
  terminated once it is older than ``LEAK_GRACE``; one tagged with a live NodeClaim whose recorded
  instance is another one (a second launch for the same NodeClaim) → terminated once it is older
  than ``lifecycle.REGISTRATION_TTL``. EC2 is asked at most every ``GC_INTERVAL`` per container;
- launch templates of this cluster that no live instance uses (and older than an hour) → deleted,
  at most every ``TEMPLATE_GC_INTERVAL``: every AMI or user-data change leaves one behind.

One DescribeInstances serves both (over a 5,000-node cluster it is seconds of CPU to read).

Deleting a NodeClaim asks for its termination, which the termination controller carries out; the
leaked instances, which have neither NodeClaim nor Node, are terminated through it too
(``termination.finish_leaked``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nodewright import termination
from nodewright.provisioning import nodeclaims
from nodewright.provisioning.lifecycle import REGISTRATION_TTL, launched_before
from nodewright.state import nodepools
from nodewright.state.world import World, nodepool_name

if TYPE_CHECKING:
    from nodewright.cloud.provider import Instance
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj

# An instance younger than this may belong to a NodeClaim whose status write is in flight.
LEAK_GRACE = timedelta(minutes=2)
# DescribeInstances for garbage collection at most this often per container.
GC_INTERVAL = timedelta(seconds=60)
# Unused launch templates are looked for this often (DescribeLaunchTemplates + DescribeInstances).
TEMPLATE_GC_INTERVAL = timedelta(minutes=10)


@dataclass
class GarbageReport:
    """What one ``reconcile`` collected."""

    orphans_deleted: list[str] = field(default_factory=list)  # NodeClaims of a deleted NodePool
    vanished: list[str] = field(default_factory=list)  # NodeClaims whose instance is gone
    leaked_terminated: list[str] = field(default_factory=list)  # instance ids
    templates_deleted: list[str] = field(default_factory=list)  # launch template names


_last_gc: dict[str, datetime] = {}
_last_template_gc: dict[str, datetime] = {}


def reset_gc_clock(*, templates: bool = False) -> None:
    """Forget when leaks were last looked for (tests and benchmarks emulating invocations a minute
    apart); ``templates``: the launch-template clock too (tests starting from a fresh container)."""
    _last_gc.clear()
    if templates:
        _last_template_gc.clear()


def reconcile(ctx: Context, world: World, *, force: bool = False) -> GarbageReport:
    """Collect what the module docstring lists; ``force``: whatever the intervals say (tests)."""
    report = GarbageReport()
    report.orphans_deleted = _delete_orphans(ctx, nodepools.orphaned_claims(world))
    key = ctx.settings.cluster_name
    leaks_due = _due(_last_gc, key, world.taken_at, GC_INTERVAL, force=force)
    templates_due = _due(_last_template_gc, key, world.taken_at, TEMPLATE_GC_INTERVAL, force=force)
    if not (leaks_due or templates_due):
        return report
    instances = ctx.cloud.list()
    if templates_due:
        report.templates_deleted = _collect_launch_templates(ctx, instances)
    claims = {nodeclaims.name_of(c): c for c in world.nodeclaims}
    for instance in instances:
        if not _leaked(instance, claims.get(instance.nodeclaim or ""), world.taken_at):
            continue
        ctx.logger.warning(
            "terminating leaked instance",
            extra={"instance": instance.id, "nodeclaim": instance.nodeclaim},
        )
        termination.finish_leaked(ctx, instance.id)
        report.leaked_terminated.append(instance.id)
    live_instance_ids = {instance.id for instance in instances}
    for claim in world.claim_views:
        instance_id = claim.instance_id
        if (
            instance_id
            and instance_id not in live_instance_ids
            and not claim.deleting
            and launched_before(claim, world.taken_at - LEAK_GRACE)
        ):
            name = claim.name
            ctx.cluster.record_event(
                claim.raw,
                "InstanceTerminated",
                f"instance {instance_id} of NodeClaim {name} is gone",
                event_type="Warning",
            )
            ctx.cluster.delete_nodeclaim(name)
            report.vanished.append(name)
    return report


def _delete_orphans(ctx: Context, orphans: list[Obj]) -> list[str]:
    """NodeClaims of a deleted NodePool: delete them (their termination drains and terminates)."""
    deleted = []
    for claim in orphans:
        name = nodeclaims.name_of(claim)
        ctx.cluster.record_event(claim, "NodePoolDeleted", f"NodePool {nodepool_name(claim)} was deleted")
        ctx.cluster.delete_nodeclaim(name)
        deleted.append(name)
    return deleted


def _leaked(instance: Instance, claim: Obj | None, now: datetime) -> bool:
    """Whether an instance tagged for this cluster belongs to no NodeClaim.

    Checks: its NodeClaim is gone (after ``LEAK_GRACE``: the create may still be in flight), or
    its NodeClaim records another instance (after ``REGISTRATION_TTL``: a NodeClaim that has
    recorded none yet may still adopt this one by its tag).
    """
    age = now - instance.launch_time if instance.launch_time else None
    if claim is None:
        return age is None or age >= LEAK_GRACE
    recorded = nodeclaims.instance_id(claim)
    return bool(recorded) and recorded != instance.id and (age is None or age >= REGISTRATION_TTL)


def _due(last_at: dict[str, datetime], key: str, now: datetime, interval: timedelta, *, force: bool) -> bool:
    """Whether ``interval`` has passed since ``last_at[key]`` (or ``force``); if so, now is the last."""
    last = last_at.get(key)
    if not force and last is not None and now - last < interval:
        return False
    last_at[key] = now
    return True


def _collect_launch_templates(ctx: Context, instances: list[Instance]) -> list[str]:
    try:
        deleted = ctx.cloud.cleanup_launch_templates(instances)
    except Exception as exc:  # best effort: the next interval tries again, the pass goes on
        ctx.logger.warning("launch template cleanup failed", extra={"error": f"{type(exc).__name__}: {exc}"})
        return []
    if deleted:
        ctx.logger.info("unused launch templates deleted", extra={"templates": deleted})
    return deleted
