"""What happens to nodes when their capacity reservation ends, as Karpenter's AWS provider's two
``capacityreservation`` controllers do it. One entry point, ``reconcile(ctx)``, that the
``disruption`` function runs every minute beside ``status.reconcile``:

1. **A Capacity Block's end drains its nodes ahead of time** (``expiration``). EC2 terminates the
   instances of a Capacity Block from 30 minutes before its end, and sends its EventBridge warning 10
   minutes before that. Karpenter does not wait for the event (it must survive a restart): from 40
   minutes before the end (``cloud.reservations.EXPIRATION_LEAD``, the block is then ``expiring``) it
   deletes the NodeClaims labelled with the block's ``karpenter.k8s.aws/capacity-reservation-id``, so
   the normal termination cordons and drains them (PDBs honoured, bounded by
   ``terminationGracePeriod``) and the provisioner plans their pods elsewhere (no reserved offering
   is offered in an expiring block). The reservations are asked of EC2 by id, uncached: the end is a
   time, not an event, and a minute's lag is all a one-minute schedule allows.
2. **An On-Demand Capacity Reservation's end makes its nodes on-demand** (``capacitytype``). The
   instances run on as plain on-demand instances (DescribeInstances no longer names the
   reservation); a NodeClaim (and its registered Node) still labelled ``karpenter.sh/capacity-type:
   reserved`` is relabelled ``on-demand`` and loses ``karpenter.k8s.aws/capacity-reservation-id``, so
   consolidation prices it as what it now costs.

Nothing here launches; writes are NodeClaim deletions and label patches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.cluster.objects import is_deleting, labels_of, name_of, nodeclaim_instance_id
from nodewright.state.world import nodes_by_instance_id

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj

EXPIRING = "expiring"


@dataclass
class ReservationReport:
    """What one reconcile did: NodeClaims deleted ahead of a block's end, NodeClaims made on-demand."""

    expired: list[str] = field(default_factory=list)
    demoted: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"capacityBlockDrains": self.expired, "reservationsEnded": self.demoted}


def reconcile(ctx: Context) -> ReservationReport:
    """Both controllers over the cluster's NodeClaims (see the module)."""
    report = ReservationReport()
    claims = [c for c in ctx.cluster.list_nodeclaims() if not is_deleting(c)]
    reserved = [c for c in claims if labels_of(c).get(labels.CAPACITY_RESERVATION_ID)]
    if not reserved:
        return report
    _expire(ctx, reserved, report)
    _demote(ctx, [c for c in reserved if name_of(c) not in report.expired], report)
    return report


def _expire(ctx: Context, claims: list[Obj], report: ReservationReport) -> None:
    ids = {labels_of(c)[labels.CAPACITY_RESERVATION_ID] for c in claims}
    now = ctx.clock.now()
    expiring = {i for i, r in ctx.cloud.capacity_reservations_by_id(ids).items() if r.state(now) == EXPIRING}
    for claim in claims:
        reservation = labels_of(claim)[labels.CAPACITY_RESERVATION_ID]
        if reservation not in expiring:
            continue
        name = name_of(claim)
        ctx.cluster.delete_nodeclaim(name)
        message = f"capacity block {reservation} ends: draining before EC2 reclaims the instance"
        ctx.cluster.record_event(claim, "CapacityBlockExpiring", message, event_type="Warning")
        ctx.logger.info(
            "initiating delete for capacity block expiration",
            extra={"nodeclaim": name, "capacity_reservation_id": reservation},
        )
        report.expired.append(name)


def _demote(ctx: Context, claims: list[Obj], report: ReservationReport) -> None:
    if not claims:
        return
    on_demand = {i.id for i in ctx.cloud.list() if i.capacity_type == labels.CAPACITY_TYPE_ON_DEMAND}
    nodes = nodes_by_instance_id(ctx.cluster.list_nodes())
    patch = {
        "metadata": {
            "labels": {
                labels.CAPACITY_TYPE: labels.CAPACITY_TYPE_ON_DEMAND,
                labels.CAPACITY_RESERVATION_ID: None,
            }
        }
    }
    for claim in claims:
        instance = nodeclaim_instance_id(claim)
        if (
            instance not in on_demand
            or labels_of(claim).get(labels.CAPACITY_TYPE) != labels.CAPACITY_TYPE_RESERVED
        ):
            continue
        ctx.cluster.patch_nodeclaim(name_of(claim), patch)
        node = nodes.get(instance or "")
        if (
            node is not None
            and not is_deleting(node)
            and labels_of(node).get(labels.CAPACITY_TYPE) == labels.CAPACITY_TYPE_RESERVED
        ):
            ctx.cluster.patch_node(name_of(node), patch)
        report.demoted.append(name_of(claim))
        ctx.logger.info(
            "capacity reservation ended: NodeClaim is on-demand now", extra={"nodeclaim": name_of(claim)}
        )
