"""Provisioning's side of the scheduling core: its plan, as what the flow creates and reports.

Input side: the World as the scheduling core's ``Snapshot`` — built by ``state.snapshot``, the
one bridge that disruption's simulations use too. Output side: a ``PlanView`` the flow reads —
NodeClaims to create (NodePool, requirements with the candidate instance types cheapest first,
requests, pods), the pods nominated to capacity that exists or is in flight, and a reason for every
other pod. ``claim_plan`` translates one of the core's ``NewClaim``s (a replacement that disruption
asks provisioning to launch, too).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.provisioning import nodeclaims
from nodewright.state.pods import key as pod_key
from nodewright.state.snapshot import build_snapshot, candidates_for
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.scheduling import NewClaim

__all__ = ["ClaimPlan", "PlanView", "candidates_for", "claim_plan", "plan"]


@dataclass
class ClaimPlan:
    """One NodeClaim the plan wants: requirements already carry the candidate instance types
    (``instance_types``: their names, cheapest first)."""

    nodepool: str
    requirements: list[dict[str, Any]]
    requests: dict[str, str]
    pods: list[dict[str, Any]]
    instance_types: list[str] = field(default_factory=list)
    price: float = 0.0  # $/h: the cheapest candidate offering plus the node's EBS volumes
    zones: list[str] = field(default_factory=list)
    zone_ids: list[str] = field(default_factory=list)  # topology.k8s.aws/zone-id of those zones, when known
    capacity_types: list[str] = field(default_factory=list)
    volume_price: float = 0.0  # the EBS part of ``price``
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    startup_taints: list[dict[str, str]] = field(default_factory=list)
    min_values_relaxed: bool = False  # the BestEffort minValues policy lowered a requirement's minValues
    # A NodeOverlay priced one of its candidates: the NodeClaim says so, and its launch ranks the
    # candidates by their overlaid prices (Karpenter's price-overlay-applied).
    price_overlay: bool = False
    reservation_ids: list[str] = field(default_factory=list)  # the capacity reservations it holds a slot in
    overlays: list[str] = field(default_factory=list)  # the NodeOverlays that priced its cheapest candidate


@dataclass
class PlanView:
    """Keys are ``namespace/name`` of pods; ``seconds`` is the scheduling core's own time."""

    new_claims: list[ClaimPlan] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)
    unschedulable: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def plan(world: World, pending: list[dict[str, Any]], pools: list[dict[str, Any]]) -> PlanView:
    """The scheduling core's plan for ``pending`` pods, against everything the world already holds."""
    snapshot, unreadable = build_snapshot(world, pending, pools)
    view = _schedule(world, pending, snapshot)
    view.unschedulable.update(unreadable)
    return view


def _schedule(world: World, pending: list[dict[str, Any]], snapshot: Any) -> PlanView:
    """Run the scheduling core and translate its ``Plan`` into what the flow creates and reports."""
    from nodewright import scheduling

    started = time.perf_counter()
    result = scheduling.plan(snapshot)
    view = PlanView(seconds=time.perf_counter() - started)
    claim_names = {nodeclaims.name_of(c) for c in world.nodeclaims}
    for pod, target in result.placements.items():
        view.nominated[pod] = f"nodeclaim/{target}" if target in claim_names else f"node/{target}"
    view.unschedulable.update(result.unschedulable)
    by_key = {pod_key(p): p for p in pending}
    for claim in result.new_claims:
        view.new_claims.append(claim_plan(claim, [by_key[k] for k in claim.pods if k in by_key]))
    return view


def claim_plan(claim: NewClaim, pods: list[dict[str, Any]]) -> ClaimPlan:
    """One of the scheduling core's ``NewClaim``s as the NodeClaim to create (its candidates, at most
    ``MAX_CANDIDATE_TYPES``, cheapest first, in its requirements)."""
    from nodewright.scheduling.resources import format_resource
    from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

    names = [c.name for c in claim.instance_types][:MAX_CANDIDATE_TYPES]
    kept = claim.instance_types[:MAX_CANDIDATE_TYPES]
    requirements = [r for r in claim.requirements.to_k8s() if r.get("key") != labels.INSTANCE_TYPE]
    # The candidates in the scheduler's order (cheapest first): the launcher and a resumed
    # launch after a crash read them back from here.
    candidates: dict[str, Any] = {"key": labels.INSTANCE_TYPE, "operator": "In", "values": names}
    asked = claim.requirements.get(labels.INSTANCE_TYPE)
    if asked is not None and asked.min_values is not None:
        candidates["minValues"] = asked.min_values  # the NodePool's (or the relaxed) minValues stays
    requirements.append(candidates)
    return ClaimPlan(
        nodepool=claim.nodepool,
        requirements=requirements,
        requests={k: format_resource(k, v) for k, v in sorted(claim.requests.items())},
        pods=pods,
        instance_types=names,
        price=claim.price,
        zones=sorted({o.zone for c in claim.instance_types for o in c.offerings}),
        zone_ids=sorted({o.zone_id for c in claim.instance_types for o in c.offerings if o.zone_id}),
        capacity_types=sorted({o.capacity_type for c in claim.instance_types for o in c.offerings}),
        volume_price=claim.volume_price,
        labels={**claim.labels, **claim.requirements.node_labels()},
        taints=[_taint(t) for t in claim.taints],
        startup_taints=[_taint(t) for t in claim.startup_taints],
        min_values_relaxed=claim.min_values_relaxed,
        price_overlay=any(o.price_overlaid for c in kept for o in c.offerings),
        reservation_ids=sorted(held.values)
        if (held := claim.requirements.get(labels.CAPACITY_RESERVATION_ID))
        else [],
    )


def _taint(taint: Any) -> dict[str, str]:
    """A scheduling-core Taint in the Kubernetes shape."""
    shaped = {"key": taint.key, "effect": taint.effect}
    if taint.value:
        shaped["value"] = taint.value
    return shaped
