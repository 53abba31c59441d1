"""The lifecycle controller, run by every provisioning pass: ``reconcile(ctx, world)``, a NodeClaim
after its launch: Registered → Initialized, and the registration timeout (Karpenter's nodeclaim
lifecycle controller).

Every step reads the state it needs from the cluster and is safe to repeat: a pass that dies
half-way is finished by the next one.

- Launched, and a Node with the same providerID appeared → Registered: the NodeClaim's
  labels, annotations (its NodePool template's) and taints are synced onto the Node (the taints
  not when the Node says ``karpenter.sh/do-not-sync-taints``: its kubelet registered them), which
  gets the ``karpenter.sh/termination`` finalizer and the ``karpenter.sh/registered`` label; the
  unregistered taint goes.
- Registered, the Node Ready, its startupTaints gone and the requested extended resources
  reported → Initialized (``karpenter.sh/initialized`` on the Node; capacity and
  allocatable copied to the NodeClaim).
- Not launched, or launched but not registered, within ``REGISTRATION_TTL`` → the NodeClaim is
  deleted, with an event: its termination (the termination controller's, which the pass runs next)
  terminates the instance.
- A NodeClaim being deleted is left to the termination controller; leaked instances, vanished
  ones and unused launch templates to the garbage-collection controller (``garbage``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.checkpoints import checkpoint
from nodewright.provisioning import nodeclaims
from nodewright.provisioning.nodeclaims import INITIALIZED, LAUNCHED, REGISTERED
from nodewright.state.views import ClaimView, NodeView
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.context import Context

REGISTRATION_TTL = timedelta(minutes=15)
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@dataclass
class LifecycleReport:
    """What one ``reconcile`` moved along: NodeClaims registered, initialized, given up on."""

    registered: list[str] = field(default_factory=list)
    initialized: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)


def reconcile(ctx: Context, world: World) -> LifecycleReport:
    """Move every NodeClaim one step along its lifecycle; see the module docstring."""
    report = LifecycleReport()
    for claim in world.claim_views:
        name = claim.name
        node = world.node_view_of(claim)
        if claim.deleting:
            continue  # the termination controller's
        if not claim.is_true(LAUNCHED):
            # The launch step owns it (launch, or adopt the instance a crash left) until the
            # registration timeout: a NodeClaim whose launch keeps failing must not hold its
            # pods' place for ever.
            if claim.created and claim.created < world.taken_at - REGISTRATION_TTL:
                _give_up_registration(ctx, claim, launched=False)
                report.timed_out.append(name)
        elif not claim.is_true(REGISTERED):
            if node is not None:
                register(ctx, claim, node, world.taken_at)
                report.registered.append(name)
            elif launched_before(claim, world.taken_at - REGISTRATION_TTL):
                _give_up_registration(ctx, claim)
                report.timed_out.append(name)
        elif not claim.is_true(INITIALIZED) and node is not None and _initialized(claim, node):
            initialize(ctx, claim, node, world.taken_at)
            report.initialized.append(name)
    return report


def register(ctx: Context, claim: ClaimView, node: NodeView, now: datetime) -> None:
    """Sync the NodeClaim's labels and taints onto its Node and mark both registered."""
    node_name = node.name
    node_labels = {**claim.labels, labels.NODE_REGISTERED: "true"}
    # The NodePool's template annotations reach the Node (Karpenter syncs the NodeClaim's); the
    # bookkeeping ones (static-drift hashes, disruption state) stay on the NodeClaim.
    node_annotations = {
        key: value
        for key, value in claim.annotations.items()
        if labels.label_domain(key) not in labels.BOOKKEEPING_ANNOTATION_DOMAINS
    }

    def sync(current: dict[str, Any]) -> dict[str, Any]:
        """From the Node as it is now (guarded by its resourceVersion): the kubelet may be lifting a
        startup taint at this very moment, and a stale list written back would restore it. A Node
        labelled ``karpenter.sh/do-not-sync-taints=true`` registered with its taints (the user data
        Nodewright writes, as Karpenter's AWS provider does): only the unregistered taint goes."""
        now_node = NodeView.of(current)
        taints = [t for t in now_node.taints if t.get("key") != labels.UNREGISTERED_TAINT_KEY]
        if now_node.labels.get(labels.DO_NOT_SYNC_TAINTS) != "true":
            present = {(t.get("key"), t.get("effect")) for t in taints}
            taints += [t for t in claim.taints if (t.get("key"), t.get("effect")) not in present]
        finalizers = now_node.finalizers
        if labels.TERMINATION_FINALIZER not in finalizers and not now_node.deleting:
            finalizers.append(labels.TERMINATION_FINALIZER)  # (the API server refuses it on a deleting node)
        metadata = {"labels": node_labels, "finalizers": finalizers}
        if node_annotations:
            metadata["annotations"] = node_annotations
        return {"metadata": metadata, "spec": {"taints": taints}}

    ctx.cluster.update_node(node_name, sync)
    checkpoint("lifecycle.node-registered")
    status = claim.status_to_write()
    status["nodeName"] = node_name
    status["conditions"] = nodeclaims.set_condition(
        status.get("conditions") or [], REGISTERED, True, reason="Registered", now=now
    )
    ctx.cluster.patch_nodeclaim_status(claim.name, status)
    ctx.logger.info("NodeClaim registered", extra={"nodeclaim": claim.name, "node": node_name})


def _initialized(claim: ClaimView, node: NodeView) -> bool:
    """Ready, no startupTaint (nor not-ready taint) left, and every requested extended resource reported."""
    if not node.is_true("Ready"):
        return False
    startup = {(t.get("key"), t.get("effect")) for t in claim.startup_taints}
    for taint in node.taints:
        if (taint.get("key"), taint.get("effect")) in startup or taint.get("key") == NOT_READY_TAINT:
            return False
    allocatable = node.allocatable or {}
    extended = [r for r in claim.requests if "/" in r]
    return all(str(allocatable.get(r, "0")) not in ("0", "") for r in extended)


def initialize(ctx: Context, claim: ClaimView, node: NodeView, now: datetime) -> None:
    ctx.cluster.patch_node(node.name, {"metadata": {"labels": {labels.NODE_INITIALIZED: "true"}}})
    status = claim.status_to_write()
    status["capacity"] = dict(node.capacity or status.get("capacity") or {})
    status["allocatable"] = dict(node.allocatable or status.get("allocatable") or {})
    status["conditions"] = nodeclaims.set_condition(
        status.get("conditions") or [], INITIALIZED, True, reason="Initialized", now=now
    )
    # Karpenter's root condition: Ready once Launched, Registered and Initialized all are (the
    # CRD's READY column, `kubectl get nodeclaims`, shows it).
    status["conditions"] = nodeclaims.set_condition(
        status["conditions"], "Ready", True, reason="Ready", now=now
    )
    ctx.cluster.patch_nodeclaim_status(claim.name, status)


def launched_before(claim: ClaimView, moment: datetime) -> bool:
    """Whether the NodeClaim was launched (created, when it says no launch time) before ``moment``."""
    cond = nodeclaims.condition(claim.raw, LAUNCHED) or {}
    launched = nodeclaims.timestamp(cond.get("lastTransitionTime")) or claim.created
    return bool(launched and launched < moment)


def _give_up_registration(ctx: Context, claim: ClaimView, *, launched: bool = True) -> None:
    name = claim.name
    minutes = int(REGISTRATION_TTL.total_seconds() // 60)
    if launched:
        message = (
            f"NodeClaim {name}: no Node registered within {minutes} minutes of the launch; the instance "
            "is terminated (check the node role's access entry, user data, subnets)"
        )
    else:
        cond = nodeclaims.condition(claim.raw, LAUNCHED) or {}
        why = cond.get("message") or "no launch succeeded"
        message = f"NodeClaim {name}: not launched within {minutes} minutes of its creation ({why}); deleted"
    ctx.cluster.record_event(claim.raw, "RegistrationTimeout", message, event_type="Warning")
    ctx.logger.warning("NodeClaim registration timed out", extra={"nodeclaim": name})
    ctx.cluster.delete_nodeclaim(name)  # asks for its termination: the instance is terminated
