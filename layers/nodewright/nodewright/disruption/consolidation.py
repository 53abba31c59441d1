"""Consolidation and drift replacement: a question to the scheduling core, and the command it answers.

"These pods, without these nodes: what is the cheapest way to place them?" — asked of the same
simulation the provisioner uses (``state.snapshot.Simulation``), built once per pass by
``simulation`` as Karpenter's ``SimulateScheduling`` builds it: the nodes on their way out (their
NodeClaim or Node deleting, or in a command) are no destination, and the pods that will leave them
are planned with every pending pod, so a command never takes room those pods need.

**Candidates** (``candidates``) — Karpenter v1's rules, each failing one a "why not":

* an initialized NodeClaim of a usable NodePool, with a Node, not being deleted, not already part
  of a command (the ``karpenter.sh/disrupted`` taint), not the replacement of a command whose
  candidates are still there (``execute.replacements_in_flight``: their pods are on their way to
  it, as Karpenter's nominated nodes are no candidates);
* the NodePool's ``consolidationPolicy`` is ``WhenEmptyOrUnderutilized`` and ``consolidateAfter``
  (not Never) has passed since the NodeClaim's last pod event and at least ``NOMINATION_SECONDS``
  since it was initialized (pods the provisioner nominated to it have bound by then);
* its instance type has a price (Karpenter's ``NewCandidate`` skips a type it cannot resolve);
* no ``karpenter.sh/do-not-disrupt`` on the Node or on any active pod of it;
* no pod of it the Eviction API would refuse now (``state.pdbs``: a PDB that allows no disruption,
  one without status yet, or more than one PDB).

Drift is eventual for a NodeClaim with a ``terminationGracePeriod`` (Karpenter v1): its pods'
do-not-disrupt and PDBs do not hold it back, the grace period bounds the drain.

**A command** (``evaluate``) for a set of candidates: every pod of theirs that will leave
(``state.pods.is_currently_reschedulable``) must find a place, and not on a node not yet
initialized (it may never become Ready: Karpenter's "would schedule against uninitialized
nodeclaim"). *Delete*: no new node is needed. *Replace*: exactly one new node, and only types strictly cheaper
than what is removed, each priced at its worst launch price (the dearest offering it may launch
as; one that may be spot at its dearest spot offering, and then pinned to spot, as Karpenter's
worstLaunchPrice does), still meeting the NodePool's minValues, less the NodePool's
price-improvement threshold (``PRICE_IMPROVEMENT_ANNOTATION``, percent of the removed nodes' $/h;
Karpenter's users asked for it to stop churn for a few cents). When every
candidate is spot and the replacement may be spot, it is spot-to-spot, which Karpenter puts behind
its ``SpotToSpotConsolidation`` feature gate (off by default; here the ``spotToSpotConsolidation``
stack setting, ``spot_to_spot``): off, there is no replacement at all (such nodes are consolidated
by deletion only); on, the replacement is pinned to spot and, for a single node, needs at least
``SPOT_TO_SPOT_MIN_TYPES`` cheaper types (or the NodePool's minValues) and launches with only the
cheapest that many, so it cannot race to the bottom. Multi-node replacements drop types at least
as dear as a removed node of the same type (deleting the others would do).

**Methods**: first Nodewright's many→several wave (``repack.wave``: the most wasteful candidates of a
whole-cluster repack, as many as the budgets allow, replaced by several strictly cheaper nodes in
one command, ``evaluate`` with ``replacements_max``); then Karpenter's (``multi_node``,
``single_node``), in Karpenter's order: candidates sorted by disruption cost (``disruption_cost``:
pods weighted by deletion cost and priority, times the share of the node's lifetime left);
multi-node binary-searches the longest prefix of at most ``MULTI_NODE_MAX`` candidates (within the
budgets) that one command can remove; single-node tries the rest one at a time, cheapest to
disrupt first. All skip empty candidates: they are emptiness's, within the ``Empty`` budgets.
All stop at their time limit (counted on ``search_clock``), and all three within the pass's search
time (``choose(seconds=)``: the disruption flow's invocation ends; a search it cuts short does not
count as one that found nothing). In a ``Balanced`` NodePool every
command must also pass Karpenter's score (``balanced``). A command is re-validated
``VALIDATION_SECONDS`` later before it acts (``flow``).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.cluster import objects
from nodewright.disruption.decide import (
    NODE_DO_NOT_DISRUPT,
    NOMINATION_SECONDS,
    pod_do_not_disrupt,
    replacement_held,
)
from nodewright.disruption.execute import replacements_in_flight
from nodewright.state.cost import disruption_cost
from nodewright.state.pods import as_pending, is_currently_reschedulable, is_disruptable, is_reschedulable
from nodewright.state.pods import key as pod_key
from nodewright.state.world import World

if TYPE_CHECKING:
    from nodewright.api.models import NodePool
    from nodewright.scheduling import NewClaim
    from nodewright.scheduling.requirements import Requirements
    from nodewright.scheduling.results import CandidateType
    from nodewright.state.interfaces import Obj
    from nodewright.state.snapshot import Simulation
    from nodewright.state.views import NodeView

UNDERUTILIZED = "Underutilized"
# The policies that consolidate underutilized nodes (Balanced: only the moves its score approves).
UNDERUTILIZED_POLICIES = frozenset({"WhenEmptyOrUnderutilized", "Balanced"})
DRIFTED = "Drifted"
MULTI_NODE_MAX = 100
SPOT_TO_SPOT_MIN_TYPES = 15
VALIDATION_SECONDS = 15.0
MULTI_NODE_SECONDS = 20.0  # Karpenter: 1 min; a Lambda pass must leave time for the rest
SINGLE_NODE_SECONDS = 20.0  # Karpenter: 3 min
# What the methods' time limits (MULTI_NODE_SECONDS, SINGLE_NODE_SECONDS, repack.WAVE_SECONDS) are
# counted on: wall time, as a Lambda's invocation is; ``bench consolidation`` counts CPU seconds
# instead, as a Lambda's dedicated core would give them, so a shared machine's load does not cut
# its search short.
search_clock: Callable[[], float] = time.monotonic
PRICE_IMPROVEMENT_ANNOTATION = "nodewright.io/consolidation-price-improvement-percent"
SPOT_TO_SPOT_DISABLED = "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"


@dataclass
class Candidate:
    """A node a command may remove, with what removing it costs and saves."""

    nodeclaim: Obj
    node: Obj
    nodepool: str
    pods: list[Obj]  # the reschedulable pods that must move
    price: float | None  # $/h (None: unknown to the price table)
    disruption_cost: float

    @property
    def name(self) -> str:
        return objects.name_of(self.nodeclaim)

    @property
    def node_name(self) -> str:
        return objects.name_of(self.node)

    @property
    def instance_type(self) -> str:
        return objects.labels_of(self.nodeclaim).get(labels.INSTANCE_TYPE, "?")

    @property
    def capacity_type(self) -> str:
        return objects.labels_of(self.nodeclaim).get(labels.CAPACITY_TYPE, "")


@dataclass
class Command:
    """Remove ``candidates``; launch ``replacements`` first (none: a delete)."""

    reason: str  # Underutilized, Empty, Drifted (the budget's reason)
    method: str  # empty, multi, single, drift
    candidates: list[Candidate]
    replacements: list[NewClaim] = field(default_factory=list)

    @property
    def price_before(self) -> float:
        return sum(c.price or 0.0 for c in self.candidates)

    @property
    def price_after(self) -> float:
        return sum(worst_launch_price(r) for r in self.replacements)

    @property
    def savings(self) -> float:
        return self.price_before - self.price_after

    @property
    def action(self) -> str:
        return "replace" if self.replacements else "delete"

    def describe(self) -> str:
        """E.g. ``Underutilized, replacing 2 nodes (m5.2xlarge x2) with c6g.2xlarge, saves $0.31/h``
        (a drift command says no saving: it replaces whatever the replacement costs)."""
        types = Counter(c.instance_type for c in self.candidates)
        removed = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in sorted(types.items()))
        count = f"{len(self.candidates)} node{'s' if len(self.candidates) != 1 else ''}"
        if len(self.replacements) > 1:
            cheapest = Counter(r.instance_types[0].name for r in self.replacements if r.instance_types)
            kinds = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in sorted(cheapest.items()))
            verb = f"replacing {count} ({removed}) with {len(self.replacements)} nodes ({kinds})"
        elif self.replacements:
            options = self.replacements[0].instance_types
            target = options[0].name + (f" (or {len(options) - 1} more types)" if len(options) > 1 else "")
            verb = f"replacing {count} ({removed}) with {target}"
        else:
            verb = f"deleting {count} ({removed})"
        if self.reason == DRIFTED:  # drift replaces whatever it costs: "saves" would mislead
            return f"{self.reason}, {verb}"
        return f"{self.reason}, {verb}, saves ${self.savings:.2f}/h"


# --- candidates -----------------------------------------------------------------------------------


def candidates(
    world: World,
    usable: list[Obj],
    last_pod_event: Mapping[str, datetime],
    *,
    reason: str = UNDERUTILIZED,
    drifted: Mapping[str, str] | None = None,
    ignore_waits: bool = False,
) -> tuple[list[Candidate], dict[str, str]]:
    """The NodeClaims a graceful method may disrupt for ``reason``, and why each other one may not.

    ``Underutilized``: the rules of the module docstring. ``Drifted``: the NodeClaims ``drifted``
    names, without the consolidation policy, ``consolidateAfter`` and the price (drift replaces
    whatever the policy and the cost); do-not-disrupt and PDBs hold both, except for a drifted
    NodeClaim with a ``terminationGracePeriod`` (eventual). ``ignore_waits`` (``nodewright plan
    --consolidate``) takes ``consolidateAfter`` and the nomination wait as passed; ``Never`` still
    holds.
    """
    pools = {p.name: p for p in world.nodepool_models(usable)}
    found: list[Candidate] = []
    why_not: dict[str, str] = {}
    now = world.taken_at
    replacing = replacements_in_flight(world.nodeclaims)
    for claim in world.claim_views:
        name, pool_name = claim.name, claim.nodepool
        pool = pools.get(pool_name)
        node = world.node_view_of(claim)
        if pool is None or node is None or claim.deleting or node.deleting:
            continue
        if reason == DRIFTED and name not in (drifted or {}):
            continue
        if node.has_taint(labels.DISRUPTED_TAINT_KEY):
            continue  # part of a command already (or being terminated)
        if name in replacing:
            why_not[name] = replacement_held(replacing[name])
            continue
        initialized = claim.initialized_at
        if initialized is None:
            continue
        if reason == UNDERUTILIZED:
            if pool.spec.is_static:
                continue  # a static NodePool is never consolidated (its replicas say how many)
            disruption = pool.spec.disruption
            after = disruption.consolidate_after_seconds
            if after is None:
                why_not[name] = consolidation_disabled(pool_name)
                continue
            if disruption.consolidation_policy not in UNDERUTILIZED_POLICIES:
                continue  # WhenEmpty: emptiness only (no event, as Karpenter)
            quiet = max(initialized, last_pod_event.get(name, initialized))
            if not ignore_waits and (
                now < quiet + timedelta(seconds=after)
                or now < initialized + timedelta(seconds=NOMINATION_SECONDS)
            ):
                continue  # not consolidatable yet
        price = world.price_of(claim.raw)
        if reason == UNDERUTILIZED and not claim.labels.get(labels.CAPACITY_TYPE):
            # Karpenter prices a candidate by its offering (type, capacity type, zone): none, no command
            why_not[name] = (
                f'NodeClaim has no "{labels.CAPACITY_TYPE}" label: what removing it saves is unknown'
            )
            continue
        if reason == UNDERUTILIZED and price is None:
            kind = claim.labels.get(labels.INSTANCE_TYPE) or "(none)"
            why_not[name] = f"instance type {kind} has no price: what removing it saves is unknown"
            continue
        eventual = reason == DRIFTED and bool(claim.termination_grace_period)
        problem = _blocked(world, node, eventual=eventual)
        if problem:
            why_not[name] = problem
            continue
        pods = [p for p in world.pods_on(node.name) if is_reschedulable(p)]
        found.append(
            Candidate(claim.raw, node.raw, pool_name, pods, price, disruption_cost(pods, claim, now))
        )
    return found, why_not


def _blocked(world: World, node: NodeView, *, eventual: bool) -> str | None:
    """Why a node must not be disrupted gracefully (Karpenter's ``ValidateNodeDisruptable`` and
    ``ValidatePodsDisruptable``): do-not-disrupt on the node; else a do-not-disrupt pod, or a pod the
    Eviction API would refuse now (``state.pdbs``) — not for an ``eventual`` disruption, whose
    drain the NodeClaim's terminationGracePeriod bounds."""
    if node.annotations.get(labels.DO_NOT_DISRUPT) == "true":
        return NODE_DO_NOT_DISRUPT
    if eventual:
        return None
    pods = world.pods_on(node.name)
    for pod in pods:
        if not is_disruptable(pod, world.taken_at):
            return pod_do_not_disrupt(pod_key(pod))
    for pod in pods:
        why = world.pdb_limits.eviction_blocker(pod)
        if why:
            return why
    return None


# --- one simulation ---------------------------------------------------------------------------------


def simulation(world: World, usable: list[Obj]) -> tuple[Simulation, list[Obj]]:
    """The simulation every method of a pass asks, and the pods it places besides a command's own
    (Karpenter's ``SimulateScheduling``): the cluster without the nodes on their way out (deleting,
    ``World.going_node_names``, or in a command, ``execute.nodes_in_commands``), with the pods that
    will leave them (``World.displaced_pods``) planned as pending with the pods pending now. Nodes
    not yet initialized stay capacity for those pods, as Karpenter assumes they will come up; a
    command's own pod that would land on one voids the command (``evaluate``)."""
    from nodewright.disruption.execute import nodes_in_commands
    from nodewright.state.snapshot import Simulation

    going = world.going_node_names() | nodes_in_commands(world)
    pending = world.provisionable_pods() + world.displaced_pods(going)
    return Simulation(world.without_nodes(going), usable), pending


@dataclass
class Verdict:
    """A command, or why there is none (for the "why not" events)."""

    command: Command | None
    why_not: str = ""
    # Refused as not cheaper: the new nodes its plan would launch (the repack refines a wave by them)
    claims: list[NewClaim] = field(default_factory=list)


def evaluate(
    sim: Simulation,
    chosen: list[Candidate],
    pending: list[Obj],
    *,
    reason: str,
    method: str,
    thresholds: Mapping[str, float],
    min_values: Callable[[NewClaim], int] | None = None,
    spot_to_spot: bool = False,
    replacements_max: int = 1,
) -> Verdict:
    """The command that removes ``chosen`` (see the module), or why there is none. ``sim`` and
    ``pending``: ``simulation``'s; ``spot_to_spot``: Karpenter's feature gate; ``replacements_max``:
    how many new nodes the command may launch (Karpenter's methods: one; a repack: several)."""
    from nodewright import scheduling

    limits = sim.world.pdb_limits
    now = sim.world.taken_at
    displaced = [as_pending(p) for c in chosen for p in c.pods if is_currently_reschedulable(p, limits, now)]
    snapshot, unreadable = sim.snapshot(displaced + pending, without=[c.node_name for c in chosen])
    plan = scheduling.plan(snapshot)
    displaced_keys = {pod_key(p) for p in displaced}
    stuck = sorted(k for k in (*plan.unschedulable, *unreadable) if k in displaced_keys)
    if stuck:
        why = plan.unschedulable.get(stuck[0]) or unreadable.get(stuck[0], "")
        return Verdict(None, f"pod {stuck[0]} would have no place: {why}")
    placed = dict(plan.placements)
    starting = sorted(k for k in displaced_keys if placed.get(k) in sim.uninitialized)
    if starting:
        where = sim.uninitialized[placed[starting[0]]]
        return Verdict(None, f"pod {starting[0]} would schedule against uninitialized {where}")
    claims = [c for c in plan.new_claims if displaced_keys & set(c.pods)]
    if not claims:
        return Verdict(Command(reason, method, chosen))
    if reason == DRIFTED:
        return Verdict(Command(reason, method, chosen, claims))  # drift replaces whatever it costs
    if len(claims) > replacements_max:
        return Verdict(None, f"removing it needs {len(claims)} new nodes")
    if len(claims) > 1:
        verdict = _cheaper_set(
            chosen,
            claims,
            reason=reason,
            method=method,
            thresholds=thresholds,
            spot_to_spot_gate=spot_to_spot,
            volumes={pool.name: pool.node_price for pool in sim.nodepools},
        )
        if verdict.command is None:
            verdict.claims = claims
    else:
        verdict = _cheaper(
            chosen,
            claims[0],
            reason=reason,
            method=method,
            thresholds=thresholds,
            min_values=min_values,
            spot_to_spot_gate=spot_to_spot,
        )
    if verdict.command is not None and not sim.world.relax_min_values:
        for replacement in verdict.command.replacements:
            short = _min_values_unmet(sim.world, replacement)
            if short:  # the cheaper types alone are fewer than the NodePool's minValues asks for
                return Verdict(None, f"minValues requirement is not met for {short}")
    return verdict


def _min_values_unmet(world: World, claim: NewClaim) -> str | None:
    """The key of a minValues requirement the replacement's (price-narrowed) types no longer meet
    (Karpenter's filterByPriceWithMinValues), else None."""
    from nodewright.scheduling.claims import min_values_short
    from nodewright.scheduling.requirements import Requirements

    by_name = {t.name: t for t in world.pool_instance_types(claim.nodepool)}
    if any(t.name not in by_name for t in claim.instance_types):
        return None  # types the NodePool no longer offers: nothing to count them by
    for key, requirement in claim.requirements.items():
        if requirement.min_values and min_values_short(
            claim.nodepool, Requirements([requirement]), claim.instance_types, by_name
        ):
            return key
    return None


def _cheaper(
    chosen: list[Candidate],
    claim: NewClaim,
    *,
    reason: str,
    method: str,
    thresholds: Mapping[str, float],
    min_values: Callable[[NewClaim], int] | None,
    spot_to_spot_gate: bool,
) -> Verdict:
    """Keep the replacement's types that are cheaper than the removed nodes (see the module)."""
    from nodewright.scheduling.requirements import Requirement

    price = sum(c.price or 0.0 for c in chosen)
    threshold = max((thresholds.get(c.nodepool, 0.0) for c in chosen), default=0.0)
    limit = price * (1.0 - threshold / 100.0)
    launch = _launched_as(
        claim,
        from_spot=all(c.capacity_type == labels.CAPACITY_TYPE_SPOT for c in chosen),
        spot_to_spot_gate=spot_to_spot_gate,
    )
    if launch is None:
        return Verdict(None, SPOT_TO_SPOT_DISABLED)
    requirements, options, spot_to_spot = launch
    if len(chosen) > 1:
        limit = min(limit, *(_same_type_limit(chosen, o.name) for o in options))
    options = sorted((o for o in options if _worst(o) < limit), key=lambda o: (_worst(o), o.name))
    if not options:
        why = "can't replace with a cheaper node"
        if threshold:
            why += f" (the NodePool asks for at least {threshold:g}% savings)"
        return Verdict(None, why)
    if spot_to_spot and len(chosen) == 1:
        needed = max(SPOT_TO_SPOT_MIN_TYPES, min_values(claim) if min_values else 0)
        if len(options) < needed:
            return Verdict(
                None,
                f"SpotToSpotConsolidation requires {needed} cheaper instance type options than the current "
                f"candidate to consolidate, got {len(options)}",
            )
        options = options[:needed]
    names = frozenset(o.name for o in options)
    replacement = dataclasses.replace(
        claim,
        instance_types=options,
        requirements=requirements.with_requirement(Requirement(labels.INSTANCE_TYPE, False, names)),
    )
    return Verdict(Command(reason, method, chosen, [replacement]))


def _launched_as(
    claim: NewClaim, *, from_spot: bool, spot_to_spot_gate: bool
) -> tuple[Requirements, list[CandidateType], bool] | None:
    """How a replacement may launch, one rule for one replacement and for a wave's each: its
    requirements, its types with the offerings it may launch as, and whether it is spot-to-spot
    (``from_spot``: every pod it takes comes from a spot node, and it may be spot); None when it is
    spot-to-spot and the gate is off. Karpenter prices a replacement that may be spot at its
    dearest spot offering (worstLaunchPrice) and pins it to spot, so that a spot shortage never
    launches a dearer on-demand node instead. (A reservation's offering is left as it is: that
    replacement keeps its own price rule.)"""
    requirements = claim.requirements
    options = list(claim.instance_types)
    capacity = requirements.get(labels.CAPACITY_TYPE)
    may_be_spot = capacity is None or capacity.has(labels.CAPACITY_TYPE_SPOT)
    spot_to_spot = from_spot and may_be_spot
    if spot_to_spot and not spot_to_spot_gate:
        return None
    reserved = any(x.capacity_type == labels.CAPACITY_TYPE_RESERVED for o in options for x in o.offerings)
    if spot_to_spot or (may_be_spot and not reserved and any(_has_spot(o) for o in options)):
        requirements, options = _pinned_to_spot(requirements, options)
    return requirements, options, spot_to_spot


def _pinned_to_spot(
    requirements: Requirements, options: list[CandidateType]
) -> tuple[Requirements, list[CandidateType]]:
    """A replacement launched only as spot: its requirements pinned to spot, and each type keeping
    its spot offerings (a type without any dropped)."""
    from nodewright.scheduling.requirements import Requirement

    spot = Requirement(labels.CAPACITY_TYPE, False, frozenset({labels.CAPACITY_TYPE_SPOT}))
    pinned = [
        dataclasses.replace(
            o, offerings=tuple(x for x in o.offerings if x.capacity_type == labels.CAPACITY_TYPE_SPOT)
        )
        for o in options
    ]
    return requirements.with_requirement(spot), [o for o in pinned if o.offerings]


def _cheaper_set(
    chosen: list[Candidate],
    claims: list[NewClaim],
    *,
    reason: str,
    method: str,
    thresholds: Mapping[str, float],
    spot_to_spot_gate: bool,
    volumes: Mapping[str, float] | None = None,
) -> Verdict:
    """Several replacements (a repack): each keeps its cheapest type and the types whose worst launch
    price stays within its equal share of what the set saves, so that whatever types the launches
    get, the new nodes together cost strictly less than the removed ones (less the price-improvement
    threshold), by their instances and with each node's EBS volumes (``volumes``: NodePool → $/h
    of a node's volumes; a new node's is its ``volume_price``): a wave may launch more nodes than
    it removes, and the volumes of the extra ones must not eat what it saves. Each is priced,
    pinned to spot, and spot-to-spot by the rule of one replacement (``_launched_as``), without the
    single-node type-count floor (Karpenter asks it of single-node consolidation only); a
    replacement narrowed below its NodePool's minValues is not proposed."""
    from nodewright.scheduling.requirements import Requirement

    price = sum(c.price or 0.0 for c in chosen)
    threshold = max((thresholds.get(c.nodepool, 0.0) for c in chosen), default=0.0)
    limit = price * (1.0 - threshold / 100.0)
    # Whose pods each replacement takes: one that takes only spot nodes' pods is spot-to-spot
    # whatever else the set holds (Karpenter's one replacement of a multi-node command is judged by
    # all of its candidates; here each replacement stands for the nodes it takes from).
    from_spot = {pod_key(p): c.capacity_type == labels.CAPACITY_TYPE_SPOT for c in chosen for p in c.pods}
    narrowed: list[tuple[NewClaim, Any, list[Any]]] = []
    for claim in claims:
        moved = [from_spot[key] for key in claim.pods if key in from_spot]
        only_spot = bool(moved) and all(moved)
        launch = _launched_as(claim, from_spot=only_spot, spot_to_spot_gate=spot_to_spot_gate)
        if launch is None:
            return Verdict(None, SPOT_TO_SPOT_DISABLED)
        requirements, options, _ = launch
        options = sorted(options, key=lambda o: (_worst(o), o.name))
        if not options:
            return Verdict(None, "can't replace with cheaper nodes")
        narrowed.append((claim, requirements, options))
    base = sum(_worst(options[0]) for _, _, options in narrowed)
    # What the set's volumes add (the removed nodes' volumes go with them): the instances must save it.
    extra = sum(c.volume_price for c in claims) - sum((volumes or {}).get(c.nodepool, 0.0) for c in chosen)
    limit = min(limit, limit - extra)
    if base >= limit:
        why = (
            f"can't replace with cheaper nodes: {len(claims)} new nodes cost ${base:.2f}/h, "
            f"the removed ${price:.2f}/h"
        )
        if threshold:
            why += f" (the NodePool asks for at least {threshold:g}% savings)"
        return Verdict(None, why)
    slack = (limit - base) / len(narrowed)
    replacements = []
    for claim, requirements, options in narrowed:
        ceiling = _worst(options[0]) + slack
        # The cheapest always stays: the set is cheaper with it (base < limit), and a slack below half
        # a float step of its price would otherwise drop it too.
        kept = [options[0], *(o for o in options[1:] if _worst(o) < ceiling)]
        needed = min_values_of(claim)
        if len(kept) < needed:
            return Verdict(
                None,
                f"a replacement would offer {len(kept)} instance types, fewer than its minValues {needed}",
            )
        names = frozenset(o.name for o in kept)
        replacements.append(
            dataclasses.replace(
                claim,
                instance_types=kept,
                requirements=requirements.with_requirement(Requirement(labels.INSTANCE_TYPE, False, names)),
            )
        )
    return Verdict(Command(reason, method, chosen, replacements))


def _same_type_limit(chosen: list[Candidate], type_name: str) -> float:
    """A replacement of a type some removed node has must cost less than that node (else: delete
    the others and keep it)."""
    prices = [c.price or 0.0 for c in chosen if c.instance_type == type_name]
    return min(prices) if prices else float("inf")


def _has_spot(option: Any) -> bool:
    return any(o.capacity_type == labels.CAPACITY_TYPE_SPOT for o in option.offerings)


def _worst(option: Any) -> float:
    return float(max((o.price for o in option.offerings), default=option.price))


def worst_launch_price(claim: NewClaim, *, cheapest_only: bool = False) -> float:
    """The most a NodeClaim may cost per hour: its dearest allowed offering of its type list (of its
    cheapest type only: what a replacement narrowed to that type would cost at worst)."""
    types = claim.instance_types[:1] if cheapest_only else claim.instance_types
    return max((_worst(o) for o in types), default=0.0)


# --- methods ------------------------------------------------------------------------------------------


def multi_node(
    sim: Simulation,
    ordered: list[Candidate],
    pending: list[Obj],
    room: Mapping[str, int | None],
    thresholds: Mapping[str, float],
    *,
    seconds: float = MULTI_NODE_SECONDS,
    spot_to_spot: bool = False,
) -> Command | None:
    """The longest prefix (≥ 2, ≤ ``MULTI_NODE_MAX``) of the budget-filtered, non-empty candidates
    one command removes, by binary search (Karpenter's firstNConsolidationOption)."""
    left = dict(room)
    allowed: list[Candidate] = []
    for candidate in ordered:
        budget = left.get(candidate.nodepool)
        if budget is not None and budget <= 0:
            continue
        if not candidate.pods:
            continue  # empty: emptiness removes it, within the Empty budgets (Karpenter skips it too)
        allowed.append(candidate)
        if budget is not None:
            left[candidate.nodepool] = budget - 1
        if len(allowed) == MULTI_NODE_MAX:
            break
    if len(allowed) < 2 or seconds <= 0:
        return None
    stop = search_clock() + seconds
    low, high = 1, len(allowed) - 1
    best: Command | None = None
    while low <= high and search_clock() < stop:
        mid = (low + high) // 2
        verdict = evaluate(
            sim,
            allowed[: mid + 1],
            pending,
            reason=UNDERUTILIZED,
            method="multi",
            thresholds=thresholds,
            spot_to_spot=spot_to_spot,
        )
        if verdict.command is not None:
            best, low = verdict.command, mid + 1
        else:
            high = mid - 1
    return best


def single_node(
    sim: Simulation,
    ordered: list[Candidate],
    pending: list[Obj],
    room: Mapping[str, int | None],
    thresholds: Mapping[str, float],
    *,
    why_not: dict[str, str],
    seconds: float = SINGLE_NODE_SECONDS,
    min_values: Callable[[NewClaim], int] | None = None,
    spot_to_spot: bool = False,
    refuse: Callable[[Command], str | None] | None = None,
) -> Command | None:
    """The first candidate (cheapest to disrupt first) one command removes; each other one gets its
    "why not" in ``why_not``. ``refuse``: why a policy turns a found command down (``Balanced``);
    the search then goes on with the next candidate."""
    stop = search_clock() + seconds
    for candidate in ordered:
        if search_clock() >= stop:
            break
        budget = room.get(candidate.nodepool)
        if budget is not None and budget <= 0:
            why_not[candidate.name] = budget_message(candidate.nodepool, UNDERUTILIZED)
            continue
        if not candidate.pods:
            continue  # empty: emptiness removes it (its own budget reason)
        verdict = evaluate(
            sim,
            [candidate],
            pending,
            reason=UNDERUTILIZED,
            method="single",
            thresholds=thresholds,
            min_values=min_values,
            spot_to_spot=spot_to_spot,
        )
        refused = refuse(verdict.command) if refuse and verdict.command is not None else None
        if verdict.command is not None and not refused:
            return verdict.command
        why_not[candidate.name] = refused or verdict.why_not
    return None


@dataclass
class Choice:
    """What one pass's consolidation found: its command, or why each node was left alone."""

    command: Command | None
    blocked: dict[str, str]  # NodeClaim → veto (do-not-disrupt, a PDB, no price): DisruptionBlocked
    why_not: dict[str, str]  # NodeClaim → why no command removes it (consolidateAfter: Never, and the
    # evaluated ones when none was found): Unconsolidatable
    evaluated: int  # candidates past the vetoes
    # The pass's ``seconds`` ran out before the methods had their own time limits' worth: what they
    # did not try is not known to hold nothing (the flow then does not mark the cluster consolidated).
    cut_short: bool = False


def choose(
    sim: Simulation,
    world: World,
    usable: list[Obj],
    last_pod_event: Mapping[str, datetime],
    *,
    pending: list[Obj],
    room: Mapping[str, int | None],
    ignore_waits: bool = False,
    spot_to_spot: bool = False,
    seconds: float = float("inf"),
    found: tuple[list[Candidate], dict[str, str]] | None = None,
) -> Choice:
    """Many→several (``repack.wave``), then Karpenter's multi-node, then single-node consolidation over
    the candidates (the disruption flow's choice after drift, and ``nodewright plan --consolidate``'s),
    every command of a ``Balanced`` NodePool scored (``balanced``); ``spot_to_spot``: Karpenter's
    ``SpotToSpotConsolidation`` feature gate (the stack's setting).

    ``seconds``: how long the whole search may take (on ``search_clock``), each method within its
    own limit and what is left of it: the disruption flow's invocation ends, and over a big cluster
    the three limits together (60 s) outlast a 55 s function. ``found``: what ``candidates`` gives
    for these arguments, when the caller has it already (the flow's consolidated-state digest
    needs it first: over 5,000 nodes it is a walk of every pod)."""
    from nodewright.disruption import balanced, repack

    stop = search_clock() + seconds

    def left(limit: float) -> float:
        return max(0.0, min(limit, stop - search_clock()))

    listed, blocked = found or candidates(world, usable, last_pod_event, ignore_waits=ignore_waits)
    ordered = by_disruption_cost(listed)
    pools = world.nodepool_models(usable)
    thresholds = thresholds_of(pools)
    # Karpenter says a disabled consolidation as Unconsolidatable, the vetoes as DisruptionBlocked.
    disabled = {consolidation_disabled(p.name) for p in pools}
    why_not = {name: why for name, why in blocked.items() if why in disabled}
    blocked = {name: why for name, why in blocked.items() if why not in disabled}
    scored = balanced.totals(world, balanced.balanced_pools(pools))
    command = repack.wave(
        sim,
        ordered,
        pending,
        room,
        thresholds,
        balanced_totals=scored,
        spot_to_spot=spot_to_spot,
        seconds=left(repack.WAVE_SECONDS),
    )
    if command is None:
        command = multi_node(
            sim,
            ordered,
            pending,
            room,
            thresholds,
            spot_to_spot=spot_to_spot,
            seconds=left(MULTI_NODE_SECONDS),
        )
        if command is not None and balanced.refusal(command, scored):
            command = None  # Karpenter's multi-node gives up on a refused prefix; single-node goes on
    if command is None:
        worth = [c for c in ordered if balanced.delete_passes(c, scored)]
        kept = {c.name for c in worth}
        for candidate in ordered:
            if candidate.name not in kept and candidate.pods:
                why_not[candidate.name] = (
                    f"NodePool {candidate.nodepool} is Balanced: even deleting the node would not save "
                    "enough for what it disrupts"
                )
        command = single_node(
            sim,
            worth,
            pending,
            room,
            thresholds,
            why_not=why_not,
            min_values=min_values_of,
            spot_to_spot=spot_to_spot,
            refuse=lambda found: balanced.refusal(found, scored),
            seconds=left(SINGLE_NODE_SECONDS),
        )
    cut_short = command is None and any(c.pods for c in ordered) and search_clock() >= stop
    return Choice(command, blocked, why_not, len(ordered), cut_short=cut_short)


def consolidation_disabled(pool: str) -> str:
    return f'NodePool "{pool}" has consolidation disabled'


def budget_message(pool: str, reason: str) -> str:
    return f"budget: NodePool {pool} allows no more nodes to be disrupting at once for {reason}"


def thresholds_of(usable: Iterable[NodePool]) -> dict[str, float]:
    """NodePool → its price-improvement threshold in percent (``PRICE_IMPROVEMENT_ANNOTATION``;
    0 when absent or unreadable: any strictly cheaper replacement)."""
    found = {}
    for pool in usable:
        raw = pool.metadata.annotations.get(PRICE_IMPROVEMENT_ANNOTATION)
        try:
            value = float(raw) if raw is not None else 0.0
        except ValueError:
            value = 0.0
        found[pool.name] = min(100.0, max(0.0, value))
    return found


def min_values_of(claim: NewClaim) -> int:
    """The largest minValues among a replacement's requirements (spot-to-spot's flexibility floor)."""
    return max((r.min_values or 0 for r in claim.requirements.values()), default=0)


def by_disruption_cost(found: list[Candidate]) -> list[Candidate]:
    return sorted(found, key=lambda c: (c.disruption_cost, c.name))
