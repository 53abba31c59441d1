"""Node termination, the one owner of every finish of a node (Karpenter's termination controller).

    request: what another controller calls to ask for a termination (a ``TerminationRequest``:
            reason, involuntary, instance going, deadline): taint karpenter.sh/disrupted:NoSchedule +
            cordon; record the request as NodeClaim annotations; delete the NodeClaim (its
            karpenter.sh/termination finalizer keeps it, marked, until we are done). Deleting a
            NodeClaim (``kubectl delete nodeclaim``, a registration timeout, a deleted NodePool) asks
            for the default one: voluntary, bounded by its terminationGracePeriod
    step:   one drain pass; once drained and the node's VolumeAttachments are gone (or the
            NodeClaim's terminationGracePeriod has elapsed; ``termination.volumes``): delete the
            Node, terminate the instance and any other tagged with the NodeClaim (unless EC2 is
            taking it: then the NodeClaim stays, deleting, until EC2 has — the record that keeps
            garbage collection from taking the instance for a leak — or until
            ``RECLAIM_GRACE_SECONDS`` after the deadline, when we terminate it after all), remove the
            Node's and then the NodeClaim's finalizer. The NodeClaim's conditions say where it is, as
            Karpenter's: ``Drained`` (Unknown/Draining, then True), ``VolumesDetached``
            (Unknown/AwaitingVolumeDetachment, then True, or False/TerminationGracePeriodElapsed) and
            ``InstanceTerminating`` (True once the instance is asked to go). When the instance is
            already gone (terminated out of band), finish at once: its kubelet will never confirm a
            pod's deletion, so the pods bound to the node are force-deleted (as the pod garbage
            collector does for a vanished node) and their controllers recreate them elsewhere — a
            StatefulSet only once the old pod is really gone
    drive:  steps for many nodes at once until all are done or the time budget is spent

``reconcile`` (``termination.controller``) is what the handlers run: every termination the cluster
holds, plus those just asked for, stepped or driven. Everything a step needs is read back from the
cluster, so a termination cut short (a Lambda timeout mid-drain) is resumed by the next invocation of
any function, and nothing is done twice: every write is idempotent (taints by key, finalizers by
name, deletes of missing objects).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.api.durations import DurationError, parse_duration
from nodewright.api.models import DRAINED, INSTANCE_TERMINATING, VOLUMES_DETACHED
from nodewright.checkpoints import checkpoint
from nodewright.cluster import objects
from nodewright.cluster.errors import NotFound
from nodewright.cluster.resources import NODECLAIMS, NODES
from nodewright.spec import deployment
from nodewright.state import pods as podrules
from nodewright.state.views import ClaimView, NodeView, by_instance_id
from nodewright.state.world import INVOLUNTARY_ANNOTATION
from nodewright.termination import conditions, drivers
from nodewright.termination.drain import DrainPass, drain_pass
from nodewright.termination.volumes import attached_to, blocking_attachments

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj

DEADLINE_ANNOTATION = "karpenter.sh/nodeclaim-termination-timestamp"
REASON_ANNOTATION = "nodewright.io/termination-reason"
INSTANCE_GOING_ANNOTATION = "nodewright.io/instance-going"
DISRUPTED_TAINT = {"key": labels.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
# The reason of a termination nobody gave one for (the NodeClaim was simply deleted).
DELETED_REASON = "NodeClaim deleted"

# EC2 reclaims a spot instance at the end of its notice (a reservation's at its end time); one it
# has not taken this long after the deadline is terminated by us: it is billed, and nobody else will.
RECLAIM_GRACE_SECONDS = 300.0
MIN_WAIT_SECONDS = 0.25
# How often a drain asks EC2 whether the instance still exists (one DescribeInstances).
INSTANCE_CHECK_SECONDS = 10.0
MAX_WAIT_SECONDS = 2.0
# Stop before the Lambda is killed mid-call (the interruption functions' timeouts count on it).
SAFETY_MARGIN_SECONDS = float(deployment.DRAIN_SAFETY_MARGIN_SECONDS)


@dataclass(frozen=True)
class TerminationRequest:
    """What a controller asks for when a node must go; ``request`` records it on the NodeClaim (or
    on the Node without one), so whichever invocation drives the termination reads it back."""

    reason: str
    # The drain evicts every pod regardless of PDBs and do-not-disrupt: the node goes anyway.
    involuntary: bool
    # EC2 is taking the instance itself (a spot reclaim, a reservation's end): it is left to EC2.
    instance_going: bool = False
    # Pods still there are deleted by then; None: the NodeClaim's terminationGracePeriod, if any.
    deadline: datetime | None = None
    # Who drives it (``drivers``), recorded with the request: other containers leave it alone.
    driver: drivers.Driver | None = None


@dataclass
class Termination:
    """One node on its way out; everything here is also recorded on the NodeClaim."""

    nodeclaim: str | None
    node: str | None
    instance_id: str | None
    deadline: datetime | None = None
    involuntary: bool = False
    instance_going: bool = False
    reason: str = ""
    done: bool = False
    last_pass: DrainPass | None = None
    passes: int = 0
    history: list[str] = field(default_factory=list)
    instance_checked_at: float | None = None  # monotonic time of the last "is it gone?" look
    # Every pass's evictions and deletions, for the caller's report (``last_pass`` has one pass's).
    evicted: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    conditions: list[dict[str, Any]] = field(default_factory=list)  # the NodeClaim's, kept current
    awaiting_volumes: int = 0  # VolumeAttachments the instance waits for (last look)
    terminated: list[str] = field(default_factory=list)  # the instances this termination terminated

    def hasten(self, deadline: datetime) -> None:
        """The node goes by ``deadline`` at the latest, whatever it waits for (the removal at
        ``cdk destroy``): every pod is evicted regardless and what is left then is deleted. Held in
        memory only: the NodeClaim keeps what was asked first, and a retried removal asks again."""
        self.involuntary = True
        self.deadline = min(self.deadline or deadline, deadline)

    def summary(self) -> dict[str, Any]:
        last = self.last_pass
        return {
            "nodeclaim": self.nodeclaim,
            "node": self.node,
            "instance": self.instance_id,
            "deadline": self.deadline.isoformat() if self.deadline else None,
            "done": self.done,
            "passes": self.passes,
            "remainingPods": last.remaining if last else 0,
            "blocked": list(last.blocked) if last else [],
            "steps": self.history,
        }


def request(
    ctx: Context,
    *,
    nodeclaim: Obj | None,
    node: Obj | None,
    instance_id: str | None,
    asked: TerminationRequest,
) -> Termination:
    """Ask for a node's termination: cordon and taint it, record ``asked`` and mark the NodeClaim for
    deletion (see the module docstring). A NodeClaim already being deleted keeps what it recorded;
    the returned termination carries ``asked``."""
    claim = ClaimView.of(nodeclaim) if nodeclaim else None
    claim_name = claim.name if claim else None
    node_name = objects.name_of(node) if node else None
    deadline = _earliest(asked.deadline, _grace_deadline(claim, ctx.clock.now()))
    term = Termination(
        claim_name,
        node_name,
        instance_id,
        deadline,
        asked.involuntary,
        asked.instance_going,
        asked.reason,
    )
    term.conditions = claim.conditions_to_write() if claim else []
    if node_name:
        cordon(ctx, node_name)
        term.history.append("cordoned")
        checkpoint("termination.cordoned")
    annotations = {
        REASON_ANNOTATION: asked.reason,
        INVOLUNTARY_ANNOTATION: "true" if asked.involuntary else "false",
        INSTANCE_GOING_ANNOTATION: "true" if asked.instance_going else "false",
    }
    if deadline:
        annotations[DEADLINE_ANNOTATION] = objects.format_time(deadline)
    if asked.driver is not None:
        annotations[drivers.DRIVER_ANNOTATION] = asked.driver.annotation()
    if claim_name:
        if not (claim and claim.deleting):
            # A NodeClaim without our finalizer would vanish at delete and take the record with it.
            ctx.cluster.add_finalizer(NODECLAIMS, claim_name, labels.TERMINATION_FINALIZER)
            ctx.cluster.patch_nodeclaim(claim_name, {"metadata": {"annotations": annotations}})
            ctx.cluster.delete_nodeclaim(claim_name)
            checkpoint("termination.nodeclaim-marked")
        term.history.append("nodeclaim-deleting")
    elif node_name:
        ctx.cluster.patch_node(node_name, {"metadata": {"annotations": annotations}})
    if node:
        ctx.cluster.record_event(
            node, "Disrupting", f"{asked.reason}; draining the node", event_type="Warning"
        )
    return term


def cordon(ctx: Context, node_name: str) -> None:
    """Taint ``karpenter.sh/disrupted:NoSchedule`` and cordon: nothing new lands on the node. The
    first write of every termination (``request``); idempotent (a node already tainted and
    cordoned costs one read), so a caller may do it ahead of the request, as the interruption
    queue's handler does for every node of a batch before it handles the batch's first message."""
    ctx.cluster.taint_node(node_name, [DISRUPTED_TAINT], cordon=True)


def resume(nodeclaim: ClaimView, node: NodeView | None, now: datetime) -> Termination:
    """The termination of a NodeClaim being deleted, rebuilt from what ``request`` recorded (the
    default request when it was simply deleted)."""
    annotations = nodeclaim.annotations
    deadline = objects.parse_time(annotations.get(DEADLINE_ANNOTATION)) or _grace_deadline(nodeclaim, now)
    return Termination(
        nodeclaim=nodeclaim.name,
        node=node.name if node else nodeclaim.node_name,
        instance_id=nodeclaim.instance_id,
        deadline=deadline,
        involuntary=annotations.get(INVOLUNTARY_ANNOTATION) == "true",
        instance_going=annotations.get(INSTANCE_GOING_ANNOTATION) == "true",
        reason=annotations.get(REASON_ANNOTATION, DELETED_REASON),
        conditions=nodeclaim.conditions_to_write(),
    )


def step(ctx: Context, term: Termination) -> Termination:
    """One non-blocking pass: drain, and when drained, delete the node and finish the NodeClaim."""
    if term.done:
        return term
    term.passes += 1
    if _instance_gone(ctx, term):
        _finish_without_instance(ctx, term)
        return term
    node = ctx.cluster.find_node(term.node) if term.node else None
    if node is not None:
        now_node = NodeView.of(node)
        if not now_node.unschedulable or not now_node.has_taint(labels.DISRUPTED_TAINT_KEY, "NoSchedule"):
            ctx.cluster.taint_node(term.node or "", [DISRUPTED_TAINT], cordon=True)  # resumed before cordon
        term.last_pass = drain_pass(
            ctx.cluster,
            term.node or "",
            now=ctx.clock.now(),
            deadline=term.deadline,
            involuntary=term.involuntary,
            logger=ctx.logger,
        )
        term.evicted += term.last_pass.evicted
        term.deleted += term.last_pass.deleted
        if not term.last_pass.drained:
            _condition(ctx, term, DRAINED, None, "Draining")
            return term
        if "drained" not in term.history:
            term.history.append("drained")
        _condition(ctx, term, DRAINED, True)
        checkpoint("termination.drained")
        if not _volumes_detached(ctx, term, node):
            return term
        ctx.cluster.delete_node(term.node or "")
    _finish(ctx, term)
    return term


def _volumes_detached(ctx: Context, term: Termination, node: dict[str, Any]) -> bool:
    """Whether the instance may go: none of the node's VolumeAttachments holds it any more
    (``termination.volumes``), or the NodeClaim's terminationGracePeriod has elapsed. Not asked when
    EC2 is taking the instance itself: nothing of ours terminates it."""
    if term.instance_going:
        return True
    name = term.node or ""
    now = ctx.clock.now()
    attached = [a.raw for a in attached_to(name, ctx.cluster.list_volume_attachments())]
    waiting = (  # the pods and their claims are read only when something is attached
        blocking_attachments(
            name,
            attached,
            ctx.cluster.list_pods_on_node(name),
            ctx.cluster.list_persistent_volume_claims(),
            now,
        )
        if attached
        else []
    )
    term.awaiting_volumes = len(waiting)
    if not waiting:
        _condition(ctx, term, VOLUMES_DETACHED, True)
        return True
    if term.deadline is not None and now >= term.deadline:
        _condition(ctx, term, VOLUMES_DETACHED, False, "TerminationGracePeriodElapsed")
        return True
    if _condition(ctx, term, VOLUMES_DETACHED, None, "AwaitingVolumeDetachment"):
        ctx.cluster.record_event(
            node,
            "AwaitingVolumeDetachment",
            f"Awaiting deletion of {len(waiting)} VolumeAttachments bound to node",
            event_type="Warning",
        )
    return False


def _condition(
    ctx: Context, term: Termination, condition_type: str, status: bool | None, reason: str | None = None
) -> bool:
    """Write one of the termination's NodeClaim conditions (``termination.conditions``); True when it
    changed. A NodeClaim already gone has nothing to say."""
    if not term.nodeclaim:
        return False
    try:
        return conditions.set_condition(
            ctx, term.nodeclaim, term.conditions, condition_type, status, reason=reason
        )
    except NotFound:
        return False


def _finish(ctx: Context, term: Termination, *, instance_gone: bool = False) -> None:
    """Drained: terminate the instance, then let the Node and NodeClaim go (in that order).

    An instance EC2 is taking (``instance_going``) is left to EC2 while its deadline and
    ``RECLAIM_GRACE_SECONDS`` last: the Node goes, the NodeClaim stays, deleting, and a later pass
    (``reconcile``) releases it once the instance is gone."""
    if term.instance_going and not instance_gone and term.instance_id:
        if not _reclaim_overdue(ctx, term):
            _release_node(ctx, term)
            term.history.append("left-for-ec2")
            term.done = True  # nothing to do until EC2 acts; the NodeClaim keeps the record
            return
        ctx.logger.warning(
            "EC2 has not reclaimed the instance past its deadline: terminating it",
            extra={"nodeclaim": term.nodeclaim, "instance": term.instance_id, "deadline": str(term.deadline)},
        )
        _terminate_instances(ctx, term)
    elif not term.instance_going and not instance_gone:
        _terminate_instances(ctx, term)
    elif term.nodeclaim:  # the recorded instance is gone; a second one a crash launched may not be
        term.terminated += ctx.cloud.delete_by_nodeclaim(term.nodeclaim)
    _release_node(ctx, term)
    if term.nodeclaim:
        ctx.cluster.delete_nodeclaim(term.nodeclaim)  # idempotent; marks it if a resume found it unmarked
        ctx.cluster.remove_finalizer(NODECLAIMS, term.nodeclaim, labels.TERMINATION_FINALIZER)
        ctx.logger.info(
            "NodeClaim finalized",
            extra={"nodeclaim": term.nodeclaim, "reason": term.reason, "terminated": term.terminated},
        )
    term.history.append("removed")
    term.done = True


def _terminate_instances(ctx: Context, term: Termination) -> None:
    """Terminate the recorded instance and every other one tagged with the NodeClaim (launched but
    never recorded, or a second launch a crash left); idempotent."""
    if term.instance_id and ctx.cloud.delete(term.instance_id):
        term.terminated.append(term.instance_id)
    if term.nodeclaim:
        swept = ctx.cloud.delete_by_nodeclaim(term.nodeclaim)
        term.terminated += [i for i in swept if i not in term.terminated]
    _condition(ctx, term, INSTANCE_TERMINATING, True)
    term.history.append("instance-terminated")
    checkpoint("termination.instance-terminated")


def _release_node(ctx: Context, term: Termination) -> None:
    if term.node:
        ctx.cluster.remove_finalizer(NODES, term.node, labels.TERMINATION_FINALIZER)
        ctx.cluster.delete_node(term.node)
        checkpoint("termination.node-released")


def _reclaim_overdue(ctx: Context, term: Termination) -> bool:
    """Whether EC2 should have taken the instance by now (no deadline: nothing to wait for)."""
    if term.deadline is None:
        return True
    return ctx.clock.now() >= term.deadline + timedelta(seconds=RECLAIM_GRACE_SECONDS)


def _instance_gone(ctx: Context, term: Termination) -> bool:
    """Whether EC2 no longer has the instance (asked at most every ``INSTANCE_CHECK_SECONDS``)."""
    if not term.instance_id:
        return False
    now = ctx.clock.monotonic()
    if term.instance_checked_at is not None and now - term.instance_checked_at < INSTANCE_CHECK_SECONDS:
        return False
    term.instance_checked_at = now
    return ctx.cloud.instance_gone(term.instance_id)


def _finish_without_instance(ctx: Context, term: Termination) -> None:
    """The instance is gone: nothing on the node can still run, and nothing will ever confirm a
    pod's graceful deletion there. Force-delete the pods bound to the node (grace 0, as the pod
    garbage collector does for a Node that no longer exists) so their controllers — StatefulSets
    included, which wait for the old pod to be gone — recreate them; then let the objects go."""
    if term.node:
        for pod in ctx.cluster.list_pods_on_node(term.node):
            ctx.cluster.delete_pod(podrules.namespace_of(pod), objects.name_of(pod), grace_period_seconds=0)
        ctx.cluster.delete_node(term.node)
    term.history.append("instance-gone")
    if term.nodeclaim:
        ctx.logger.info(
            "instance already gone: pods force-deleted, node and NodeClaim released",
            extra={"nodeclaim": term.nodeclaim, "node": term.node, "instance": term.instance_id},
        )
    _finish(ctx, term, instance_gone=True)


def finish_now(ctx: Context, term: Termination) -> None:
    """Finish a termination at once, whatever it still waits for (the removal's last resort for a node
    still there after its drain deadline: an error, a pod stuck terminating): terminate the instance,
    then one more step, which finds it gone and releases everything (its pods force-deleted, as for an
    instance terminated out of band; counted as ``deleted`` once it is done)."""
    pods = ctx.cluster.list_pods_on_node(term.node) if term.node else []
    if term.instance_id:
        ctx.cloud.delete(term.instance_id)
    elif term.nodeclaim:
        ctx.cloud.delete_by_nodeclaim(term.nodeclaim)
    term.deadline = ctx.clock.now()  # whatever is left is deleted now
    term.instance_checked_at = None  # ask EC2 at once
    step(ctx, term)
    if term.done:
        term.deleted += [objects.name_of(p) for p in pods]


def finish_unlaunched(ctx: Context, nodeclaim: str) -> None:
    """A NodeClaim whose launch failed for good (no instance was created): there is nothing to drain
    or terminate, so it is deleted and released at once, and its pods' place is free for the next
    plan."""
    ctx.cluster.delete_nodeclaim(nodeclaim)
    ctx.cluster.remove_finalizer(NODECLAIMS, nodeclaim, labels.TERMINATION_FINALIZER)


def finish_leaked(ctx: Context, instance_id: str) -> None:
    """An instance of this cluster that belongs to no NodeClaim (leaked by a crash; the garbage
    collector decides which): there is no Node or NodeClaim to release, only the instance to
    terminate."""
    ctx.cloud.delete(instance_id)


def drive(ctx: Context, terms: Sequence[Termination], *, budget_seconds: float) -> None:
    """Step every termination until all are done or ``budget_seconds`` (minus a margin) are spent.

    Between passes it backs off exponentially (0.25 s → 2 s, longer only when the server's
    retry-after for a blocked eviction asks so) but never past the next deadline-forced deletion,
    so a PDB that starts allowing evictions is noticed within two seconds.
    """
    clock = ctx.clock
    stop_at = clock.monotonic() + max(0.0, budget_seconds - SAFETY_MARGIN_SECONDS)
    backoff = MIN_WAIT_SECONDS
    while True:
        for term in terms:
            step(ctx, term)
        pending = [t for t in terms if not t.done]
        left = stop_at - clock.monotonic()
        if not pending or left <= 0:
            return
        wait = min(
            max(backoff, *(_retry_after(t) for t in pending)), *(_next_deletion(t) for t in pending), left
        )
        clock.sleep(max(0.0, wait))
        backoff = min(backoff * 2, MAX_WAIT_SECONDS)


def in_progress(
    ctx: Context,
    nodes: Sequence[NodeView],
    nodeclaims: Sequence[ClaimView],
    *,
    skip: frozenset[str] = frozenset(),
    driver: str | None = None,
) -> tuple[list[Termination], list[Termination]]:
    """The terminations the cluster holds: NodeClaims marked for deletion that still carry the
    finalizer (resumed from what they recorded), and Nodes someone deleted by hand
    (``node_deletions``), as two lists. ``skip``: NodeClaim (or Node) names already being driven;
    NodeClaims another container than ``driver`` has claimed (``drivers``) are left to it."""
    now = ctx.clock.now()
    by_instance = by_instance_id(nodes)
    resumed = [
        resume(claim, by_instance.get(claim.instance_id or ""), now)
        for claim in nodeclaims
        if claim.held_by(labels.TERMINATION_FINALIZER)
        and claim.name not in skip
        and not drivers.held_elsewhere(claim.raw, driver, now)
    ]
    return resumed, node_deletions(ctx, nodes, nodeclaims, skip=skip)


def node_deletions(
    ctx: Context,
    nodes: Sequence[NodeView],
    nodeclaims: Sequence[ClaimView],
    *,
    skip: frozenset[str] = frozenset(),
) -> list[Termination]:
    """Nodes deleted by hand (``kubectl delete node``), held by our finalizer, become terminations.

    As in Karpenter, deleting either the Node or its NodeClaim removes both, gracefully: a Node whose
    NodeClaim still lives gets that NodeClaim marked for deletion (``request``: taint, cordon, the
    drain bounded by its ``terminationGracePeriod``), and its termination is returned; a Node with no
    NodeClaim at all is drained, its instance (from its providerID) terminated, and its finalizer
    removed. NodeClaims already deleting are resumed by ``in_progress`` and are not returned here,
    nor are those (or Nodes) named in ``skip``.
    """
    claims_by_instance = by_instance_id(nodeclaims)
    terms = []
    for node in nodes:
        if not node.held_by(labels.TERMINATION_FINALIZER):
            continue
        instance_id = node.instance_id
        claim = claims_by_instance.get(instance_id or "")
        if claim is not None and claim.deleting:
            continue  # its NodeClaim's termination drains it
        if (claim.name if claim is not None else node.name) in skip:
            continue
        reason = f"Node {node.name} deleted"
        if claim is not None:
            terms.append(
                request(
                    ctx,
                    nodeclaim=claim.raw,
                    node=node.raw,
                    instance_id=instance_id,
                    asked=TerminationRequest(reason, involuntary=False),
                )
            )
        else:
            terms.append(Termination(None, node.name, instance_id, reason=reason))
    return terms


def _retry_after(term: Termination) -> float:
    """The server's "not before" for a blocked eviction (0 when it gave none)."""
    last = term.last_pass
    return last.retry_after_seconds if last and last.retry_after_seconds else 0.0


def _next_deletion(term: Termination) -> float:
    """Seconds until the deadline forces the next pod deletion (never later than the cap)."""
    last = term.last_pass
    if last is None or last.next_deletion_in_seconds is None:
        return MAX_WAIT_SECONDS
    return max(MIN_WAIT_SECONDS, last.next_deletion_in_seconds)


def _grace_deadline(nodeclaim: ClaimView | None, now: datetime) -> datetime | None:
    """deletion time + ``spec.terminationGracePeriod``; None when the NodeClaim sets none (wait for PDBs)."""
    if not nodeclaim:
        return None
    raw = nodeclaim.termination_grace_period
    try:
        seconds = parse_duration(raw) if raw else None
    except DurationError:
        return None
    if seconds is None:
        return None
    start = nodeclaim.deleted_at or now
    return start + timedelta(seconds=seconds)


def _earliest(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return min(known) if known else None
