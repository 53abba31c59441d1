"""Drift: which NodeClaims no longer match what their NodePool and EC2NodeClass ask for now.

Karpenter v1's three kinds, checked in this order for every launched NodeClaim of a usable NodePool:

* **static** (``NodePoolDrifted``, ``NodeClassDrift``: Karpenter's and its AWS provider's names,
  which users and dashboards match on): the NodeClaim's hash annotations
  (``api.hashing``, written when it was created) differ from the hashes of its NodePool's template
  and its EC2NodeClass's static fields now. A NodeClaim whose hash version differs (another
  release, or Karpenter) is re-annotated with the current hashes instead, as Karpenter's hash
  controller does, and is not drifted by that;
* **requirements** (``RequirementsDrifted``): the NodeClaim's labels no longer satisfy its
  NodePool's requirements (a label the NodePool now requires is missing, or has a value it no
  longer allows). Widening a requirement drifts nothing;
* **dynamic** (``AMIDrift``, ``SubnetDrift``, ``SecurityGroupDrift``, ``CapacityReservationDrift``):
  the cloud provider compares the instance with what the EC2NodeClass's selectors resolve to now
  (``CloudProvider.drift_reason``). It costs a DescribeInstances, so it is looked at most every
  ``DYNAMIC_EVERY`` per container (Karpenter rechecks every 5 minutes), and at once when an
  EC2NodeClass was edited since (Karpenter's drift controller watches them too): an AMI released
  behind an alias is seen within a minute, a user's edit at the next pass.

The verdict is the NodeClaim's ``Drifted`` condition as Karpenter writes it (True, reason and
message the drift reason; removed when no longer drifted), written only when it changes. The drift
*method* (``flow``) replaces the drifted nodes, empty ones first, then the oldest, within the
``Drifted`` budgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import hashing
from nodewright.api.models import DRIFTED, LAUNCHED, NodePool
from nodewright.cluster import objects
from nodewright.cluster.patches import NodeClaimPatches
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj
    from nodewright.state.views import ClaimView

NODEPOOL_DRIFTED = "NodePoolDrifted"
NODECLASS_DRIFTED = "NodeClassDrift"  # the AWS provider's name (its other reasons: cloud/provider.py)
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
DYNAMIC_EVERY = timedelta(minutes=1)

# cluster name → (when dynamic drift was last looked at, the EC2NodeClasses' versions then,
# NodeClaim → reason found then)
_dynamic_cache: dict[str, tuple[datetime, tuple[tuple[str, str], ...], dict[str, str]]] = {}


def static_reason(
    claim: Mapping[str, Any], nodepool: Mapping[str, Any], nodeclass: Mapping[str, Any] | None
) -> str | None:
    """``NodePoolDrifted`` / ``NodeClassDrifted`` when a hash of the same version differs, else None."""
    annotations = objects.annotations_of(claim)
    if annotations.get(hashing.NODEPOOL_HASH_VERSION) == hashing.HASH_VERSION and annotations.get(
        hashing.NODEPOOL_HASH
    ) not in (None, hashing.nodepool_hash(nodepool)):
        return NODEPOOL_DRIFTED
    if (
        nodeclass is not None
        and annotations.get(hashing.NODECLASS_HASH_VERSION) == hashing.HASH_VERSION
        and annotations.get(hashing.NODECLASS_HASH) not in (None, hashing.nodeclass_hash(nodeclass))
    ):
        return NODECLASS_DRIFTED
    return None


def requirements_reason(claim: Mapping[str, Any], nodepool: NodePool) -> str | None:
    """``RequirementsDrifted`` when the NodeClaim's labels no longer satisfy the NodePool's requirements."""
    from nodewright.scheduling.model import requirements_from_model
    from nodewright.scheduling.requirements import Requirements

    wanted = requirements_from_model(nodepool.spec.template.spec.requirements)
    conflict = Requirements.from_labels(objects.labels_of(claim)).conflict(wanted)
    return REQUIREMENTS_DRIFTED if conflict else None


def stale_hashes(
    claim: Mapping[str, Any], nodepool: Mapping[str, Any], nodeclass: Mapping[str, Any] | None
) -> dict[str, str]:
    """The hash annotations to rewrite on a NodeClaim annotated by another hash version (adoption)."""
    annotations = objects.annotations_of(claim)
    current = hashing.nodeclaim_annotations(nodepool, nodeclass)
    stale = {}
    if annotations.get(hashing.NODEPOOL_HASH_VERSION) != hashing.HASH_VERSION:
        stale.update(
            {k: v for k, v in current.items() if k in (hashing.NODEPOOL_HASH, hashing.NODEPOOL_HASH_VERSION)}
        )
    if nodeclass is not None and annotations.get(hashing.NODECLASS_HASH_VERSION) != hashing.HASH_VERSION:
        stale.update(
            {
                k: v
                for k, v in current.items()
                if k in (hashing.NODECLASS_HASH, hashing.NODECLASS_HASH_VERSION)
            }
        )
    return stale


def drifted(claim: Mapping[str, Any]) -> str | None:
    """The reason of a True ``Drifted`` condition, or None."""
    found = objects.condition(claim, DRIFTED)
    return str(found.get("reason") or "Drifted") if found and found.get("status") == "True" else None


def mark(
    ctx: Context, world: World, usable: list[Obj], *, patches: NodeClaimPatches | None = None
) -> dict[str, str]:
    """Judge every launched NodeClaim of a usable NodePool; write the ``Drifted`` conditions that
    changed (and adopt hashes of another version). NodeClaim → reason for the drifted ones; the
    world's NodeClaims are updated in place, so the rest of the pass sees the verdicts. ``patches``:
    the pass's NodeClaim writes, sent by the caller (without it, written before returning)."""
    own = patches is None
    pending = NodeClaimPatches() if patches is None else patches
    pools = {objects.name_of(p): p for p in usable}  # as stored: the drift hashes read the JSON
    typed = {p.name: p for p in world.nodepool_models(usable)}
    judged = [
        view
        for view in world.claim_views
        if view.nodepool in pools and not view.deleting and view.is_true(LAUNCHED)
    ]
    dynamic = _dynamic(ctx, world, judged)
    verdicts: dict[str, str] = {}
    for view in judged:
        claim, name = view.raw, view.name  # the hashes and the writes take the object as stored
        pool = pools[view.nodepool]
        nodeclass = world.nodeclass_of(claim)
        stale = stale_hashes(claim, pool, nodeclass)
        if stale and not drifted(claim):
            pending.annotate(name, stale)
            claim.setdefault("metadata", {}).setdefault("annotations", {}).update(stale)
        reason = (
            static_reason(claim, pool, nodeclass)
            or requirements_reason(claim, typed[view.nodepool])
            or dynamic.get(name)
        )
        _record(ctx, claim, reason, pending)
        if reason:
            verdicts[name] = reason
    if own:
        pending.send(ctx.cluster)
    return verdicts


def _dynamic(ctx: Context, world: World, claims: list[ClaimView]) -> dict[str, str]:
    """NodeClaim → dynamic drift reason, from one DescribeInstances at most every ``DYNAMIC_EVERY``
    (sooner when an EC2NodeClass changed)."""
    key = ctx.settings.cluster_name
    versions = tuple(
        sorted(
            (objects.name_of(nc), str((nc.get("metadata") or {}).get("generation") or ""))
            for nc in world.nodeclasses
        )
    )
    cached = _dynamic_cache.get(key)
    if cached is not None and world.taken_at - cached[0] < DYNAMIC_EVERY and cached[1] == versions:
        return cached[2]
    found: dict[str, str] = {}
    if claims:
        instances = {i.id: i for i in ctx.cloud.list()}
        for claim in claims:
            instance = instances.get(claim.instance_id or "")
            nodeclass = world.nodeclass_of(claim.raw)
            if instance is None or nodeclass is None:
                continue
            try:
                reason = ctx.cloud.drift_reason(instance, nodeclass)
            except Exception as exc:  # one EC2NodeClass whose selectors fail must not stop the rest
                ctx.logger.warning(
                    "dynamic drift not judged", extra={"nodeclaim": claim.name, "error": str(exc)}
                )
                continue
            if reason:
                found[claim.name] = reason
    _dynamic_cache[key] = (world.taken_at, versions, found)
    return found


def forget_dynamic() -> None:
    """Drop the per-container dynamic-drift memory (tests, and a fresh container)."""
    _dynamic_cache.clear()


def _record(ctx: Context, claim: Obj, reason: str | None, patches: NodeClaimPatches) -> None:
    """Write the ``Drifted`` condition when the verdict changed (Karpenter publishes no event for it;
    the log says it, as Karpenter's "marking drifted")."""
    from nodewright.termination import conditions

    name, present = objects.name_of(claim), conditions.conditions_of(claim)
    if reason is None:
        conditions.clear_condition(ctx, name, present, DRIFTED, patches=patches)
    elif conditions.set_condition(ctx, name, present, DRIFTED, True, reason=reason, patches=patches):
        ctx.logger.info("NodeClaim drifted", extra={"nodeclaim": name, "reason": reason})
