"""Karpenter's "consolidated" state, kept where a Lambda can trust it: skip the consolidation
search while nothing it depends on has changed since a search that found nothing.

Karpenter's disruption controller skips multi- and single-node consolidation while its cluster
state is ``Consolidated()``: a search found no command and no node, NodeClaim, pod binding or
NodePool has changed since (its cluster state marks itself unconsolidated on every such change),
and at most five minutes have passed (then it searches again anyway, for what it cannot see
change: an instance type's availability, a price). Its memory of that is the controller process's.

A Lambda container's memory is not to be trusted across invocations (a cold start, or another
container, has none), so the marker lives in the state table (``ctx.store``: a marker expiring with
the five minutes) and holds a digest of what consolidation depends on, computed from the pass's
``World`` (``digest``): each NodeClaim and Node as far as candidacy and room go (names, instance,
initialized, deleting, taints, labels, allocatable, do-not-disrupt), each pod's binding and phase,
the NodePools' specs and their Underutilized budgets' room now, the PodDisruptionBudgets' allowances,
the DaemonSets, and the candidates and vetoes the rules give now (so what time alone changes —
``consolidateAfter`` elapsing, a do-not-disrupt duration ending, a budget's schedule — counts as a
change, as Karpenter's candidate filter re-runs each time). A digest that differs, a marker that is
missing or older than ``CONSOLIDATED_SECONDS``, or no state store: the search runs. The marker
also keeps why the search left the nodes (``HELD_KEPT`` of them), which each pass it spares
reports as its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.cluster import objects
from nodewright.state.pods import is_terminating, node_name
from nodewright.state.pods import key as pod_key

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj
    from nodewright.state.views import ClaimView, NodeView
    from nodewright.state.world import World

# Karpenter's forced re-evaluation: a consolidated cluster is searched again after five minutes.
CONSOLIDATED_SECONDS = 300
MARKER_KEY = "disruption/consolidated"
# The "why not"s a marker keeps for the passes it spares (a DynamoDB item holds 400 KB).
HELD_KEPT = 200


def digest(
    world: World,
    usable: Iterable[Obj],
    *,
    candidates: Iterable[str],
    vetoed: Iterable[str],
    room: Mapping[str, int | None],
    spot_to_spot: bool,
) -> str:
    """What a consolidation search over ``world`` depends on, as one short digest (see the module
    docstring); ``candidates``/``vetoed``: the NodeClaims the rules make candidates and those they
    hold back, now."""
    h = hashlib.sha256()

    def add(*parts: Any) -> None:
        h.update(json.dumps(parts, sort_keys=True, default=str, separators=(",", ":")).encode())
        h.update(b"\n")

    add("settings", spot_to_spot)
    for pool in sorted(usable, key=objects.name_of):
        add("nodepool", objects.name_of(pool), pool.get("spec"))
    add("room", dict(room))
    for claim in sorted(world.claim_views, key=_name):
        add(
            "nodeclaim",
            _written(claim.raw, "metadata", "name"),
            claim.instance_id,
            claim.condition_status("Initialized"),
            claim.deleting,
            _written(claim.raw, "metadata", "labels"),
            _relevant_annotations(claim.annotations),
        )
    for node in sorted(world.node_views, key=_name):
        add(
            "node",
            _written(node.raw, "metadata", "name"),
            _written(node.raw, "spec", "providerID"),
            bool(_written(node.raw, "spec", "unschedulable")),
            _written(node.raw, "spec", "taints"),
            node.deleting,
            _written(node.raw, "metadata", "labels"),
            _relevant_annotations(node.annotations),
            _written(node.raw, "status", "allocatable"),
            node.condition_status("Ready"),
        )
    for pod in sorted(world.pods, key=pod_key):
        add(
            "pod",
            _written(pod, "metadata", "uid") or pod_key(pod),
            node_name(pod) or "",
            _written(pod, "status", "phase"),
            is_terminating(pod),
            _written(pod, "metadata", "annotations", labels.DO_NOT_DISRUPT),
        )
    for pdb in sorted(world.pdbs, key=pod_key):
        allowed = _written(pdb, "status", "disruptionsAllowed")
        expected = _written(pdb, "status", "expectedPods")
        add("pdb", pod_key(pdb), pdb.get("spec"), allowed, expected)
    for daemonset in sorted(world.daemonsets, key=pod_key):
        add("daemonset", pod_key(daemonset), _written(daemonset, "spec", "template", "spec"))
    add("candidates", sorted(candidates))
    add("vetoed", sorted(vetoed))
    return h.hexdigest()[:32]


def _name(view: ClaimView | NodeView) -> str:
    return view.name


def _written(obj: Mapping[str, Any], *path: str) -> Any:
    """The value at ``path`` as the API server returned it (None where a step is absent or empty):
    the digest hashes what is stored, not what a reader makes of it (an absent list and an empty
    one, say), so that the digest of the same objects never changes with how the flows read them."""
    found: Any = obj
    for step in path:
        found = found.get(step) if found else None
    return found


def _relevant_annotations(found: Mapping[str, str]) -> dict[str, Any]:
    """The annotations candidacy reads: do-not-disrupt, and nodewright's own disruption marks
    (a command in flight, an involuntary termination); not the pod-event digest, which a pass
    rewrites itself."""
    from nodewright.disruption.execute import COMMAND_ANNOTATION
    from nodewright.state.world import INVOLUNTARY_ANNOTATION

    return {
        k: found[k] for k in (labels.DO_NOT_DISRUPT, COMMAND_ANNOTATION, INVOLUNTARY_ANNOTATION) if k in found
    }


def recall(ctx: Context, state: str, now: datetime) -> dict[str, str] | None:
    """Why the nodes stayed, when a search that found nothing was made over this very ``state``
    less than ``CONSOLIDATED_SECONDS`` before ``now`` (at most ``HELD_KEPT`` of them); None
    otherwise, or without a state store or a readable marker: the search then runs, as it does in
    a Karpenter that has just started."""
    if ctx.store is None:
        return None
    raw = ctx.store.get_marker(MARKER_KEY)
    if not raw:
        return None
    try:
        marked = json.loads(raw)
        at = objects.parse_time(marked["at"])
        held = {str(k): str(v) for k, v in (marked.get("held") or {}).items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if at is None or marked.get("state") != state:
        return None
    return held if at <= now < at + timedelta(seconds=CONSOLIDATED_SECONDS) else None


def mark(ctx: Context, state: str, now: datetime, held: Mapping[str, str]) -> None:
    """Record that a search over ``state`` at ``now`` found nothing, and why the nodes stay (the
    first ``HELD_KEPT`` by name: the passes it spares report them)."""
    if ctx.store is None:
        return
    kept = dict(sorted(held.items())[:HELD_KEPT])
    value = json.dumps({"state": state, "at": objects.format_time(now), "held": kept})
    ctx.store.put_marker(MARKER_KEY, value, ttl=CONSOLIDATED_SECONDS)
