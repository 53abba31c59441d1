"""Carrying a disruption command out, one resumable step per pass (Karpenter's orchestration queue).

A **delete** asks for the termination of its nodes at once (``termination.request``: taint, cordon,
then the termination controller's PDB-aware drain and terminate). A **replace** goes in steps, each
recorded on the candidates' NodeClaims so that any invocation can take it up (a crash at any step
converges):

1. annotate the candidates with the command (``COMMAND_ANNOTATION``: id, reason, method, start),
   then taint them ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands on them;
2. launch the replacements through the provisioner's own path (``provisioning.launch_replacements``:
   NodeClaim first, CreateFleet, under the writers' lease the caller holds and its write guard), and
   record their names (``REPLACEMENTS_ANNOTATION``);
3. each later pass (``follow``): once every replacement is Initialized, ask for the candidates'
   termination; when one failed to launch, vanished, or is not initialized within
   ``REPLACEMENT_TIMEOUT``, **abandon**: untaint the candidates, drop the annotations, and say why
   in an event. A replacement that did come up stays a node like any other (consolidation removes
   it if nothing needs it); one that never registers is removed by the registration timeout.

``release_orphans`` lifts a disrupted taint that no command and no termination owns (a crash between
the taint and the annotation cannot happen, the annotation is written first; this is the guard
for anything else, e.g. a command whose annotation a user removed), and the ``DisruptionReason``
condition with it, as Karpenter clears it from nodes no command holds.

What users read, as Karpenter's disruption queue writes it: each candidate NodeClaim gets the
``DisruptionReason`` condition (True, reason Underutilized/Empty/Drifted) when its command starts,
removed if the command is abandoned; the events are Karpenter's — ``DisruptionLaunching``
("Launching NodeClaim: Underutilized") and ``DisruptionWaitingReadiness`` ("Waiting on readiness to
continue disruption") on each replacement NodeClaim, ``DisruptionTerminating`` ("Disrupting Node:
Underutilized", "Disrupting NodeClaim: Underutilized") on each candidate as its termination begins.
A command that is given up says why in a ``DisruptionAbandoned`` Warning (Nodewright's: Karpenter
only logs it).
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from nodewright import termination
from nodewright.api import labels
from nodewright.api.models import DISRUPTION_REASON, INITIALIZED, LAUNCHED
from nodewright.checkpoints import checkpoint
from nodewright.cluster import objects
from nodewright.provisioning import launch_replacements
from nodewright.state.views import NodeView
from nodewright.state.world import World, nodes_by_instance_id
from nodewright.termination import conditions

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.disruption.consolidation import Command
    from nodewright.state.guard import WriteGuard
    from nodewright.state.interfaces import Obj

COMMAND_ANNOTATION = "nodewright.io/disruption-command"
REPLACEMENTS_ANNOTATION = "nodewright.io/disruption-replacements"
REPLACEMENT_TIMEOUT = timedelta(minutes=10)
# A command whose replacements were never recorded (a crash during their launch) is given up after this.
UNRECORDED_GRACE = timedelta(minutes=2)
# Karpenter's event recorder drops a repeat within two minutes: a replacement waiting for minutes
# must not get an event every pass.
EVENT_REPEAT_SECONDS = 120.0
_recent_events: dict[tuple[str, str], float] = {}


def commands_in_flight(world: World) -> bool:
    """Whether a command started by an earlier pass is still under way (its NodeClaims annotated,
    not yet deleting): consolidation starts one command at a time."""
    return any(
        COMMAND_ANNOTATION in objects.annotations_of(c) and not objects.is_deleting(c)
        for c in world.nodeclaims
    )


class Step(StrEnum):
    """Where a command is after this pass."""

    STARTED = "started"  # candidates tainted, replacements launched and recorded
    WAITING = "waiting"  # for its replacements to be recorded or initialized
    DRAINING = "draining"  # its candidates' terminations asked for
    ABANDONED = "abandoned"  # given up: candidates untainted, why said

    @property
    def in_flight(self) -> bool:
        """Whether a later pass has to look at the command again (soon)."""
        return self in (Step.STARTED, Step.WAITING)


@dataclass(frozen=True)
class Outcome:
    """What became of one command in this pass."""

    command: str
    action: Step
    nodeclaims: list[str]
    detail: str = ""

    def summary(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "action": self.action.value,
            "nodeclaims": self.nodeclaims,
            "detail": self.detail,
        }


def start(ctx: Context, world: World, command: Command, *, guard: WriteGuard | None) -> Outcome:
    """Begin a command: a delete's terminations, or a replace's steps 1 and 2 (see the module);
    ``guard``: the pass's write guard, asked before each replacement is created and launched."""
    names = [c.name for c in command.candidates]
    message = command.describe()
    for candidate in command.candidates:
        mark_disrupted(ctx, candidate.nodeclaim, command.reason)
    if not command.replacements:
        _terminate(
            ctx,
            [c.nodeclaim for c in command.candidates],
            [c.node for c in command.candidates],
            message,
            reason=command.reason,
        )
        return Outcome(message, Step.DRAINING, names)
    command_id = uuid.uuid4().hex[:8]
    value = f"{command_id} {command.reason} {command.method} {objects.format_time(world.taken_at)}"
    for candidate in command.candidates:
        ctx.cluster.patch_nodeclaim(
            candidate.name, {"metadata": {"annotations": {COMMAND_ANNOTATION: value}}}
        )
        ctx.cluster.taint_node(candidate.node_name, [termination.DISRUPTED_TAINT])
    checkpoint("disruption.candidates-tainted")
    report = launch_replacements(ctx, world, command.replacements, guard=guard)
    if report.failures or len(report.created) != len(command.replacements):
        why = (
            "; ".join(f"{f.nodeclaim}: {f.message}" for f in report.failures)
            or (f"replacements not created: {report.stopped}" if report.stopped else "")
            or "no replacement was created"
        )
        abandon(ctx, [c.nodeclaim for c in command.candidates], [c.node for c in command.candidates], why)
        return Outcome(message, Step.ABANDONED, names, why)
    checkpoint("disruption.replacements-launched")
    for name in report.created:
        _say_once(ctx, _nodeclaim_ref(name), "DisruptionLaunching", f"Launching NodeClaim: {command.reason}")
    for candidate in command.candidates:
        ctx.cluster.patch_nodeclaim(
            candidate.name, {"metadata": {"annotations": {REPLACEMENTS_ANNOTATION: ",".join(report.created)}}}
        )
    checkpoint("disruption.replacements-recorded")
    return Outcome(message, Step.STARTED, names, f"replacements {', '.join(report.created)}")


def follow(ctx: Context, world: World) -> list[Outcome]:
    """Step 3 for every command in flight (see the module)."""
    commands: dict[str, list[Obj]] = defaultdict(list)
    for claim in world.nodeclaims:
        value = objects.annotations_of(claim).get(COMMAND_ANNOTATION)
        if value and not objects.is_deleting(claim):
            commands[value].append(claim)
    by_name = {objects.name_of(c): c for c in world.nodeclaims}
    outcomes = []
    for value, claims in sorted(commands.items()):
        names = sorted(objects.name_of(c) for c in claims)
        nodes = [n for c in claims if (n := world.node_of(c)) is not None]
        started = _started(value) or world.taken_at
        recorded = objects.annotations_of(claims[0]).get(REPLACEMENTS_ANNOTATION)
        reason = value.split(" ")[1] if " " in value else "Disruption"
        if not recorded:
            if world.taken_at - started > UNRECORDED_GRACE:
                abandon(ctx, claims, nodes, "its replacements were never recorded")
                outcomes.append(Outcome(value, Step.ABANDONED, names, "replacements never recorded"))
            else:
                outcomes.append(Outcome(value, Step.WAITING, names, "replacements being launched"))
            continue
        replacements = [by_name.get(r) for r in recorded.split(",")]
        problem = _replacement_problem(replacements, recorded.split(","), started, world.taken_at)
        if problem:
            abandon(ctx, claims, nodes, problem)
            outcomes.append(Outcome(value, Step.ABANDONED, names, problem))
        elif all(r is not None and _is_true(r, INITIALIZED) for r in replacements):
            _terminate(ctx, claims, nodes, f"{reason}: replaced by {recorded}", reason=reason)
            outcomes.append(Outcome(value, Step.DRAINING, names, f"replacements {recorded} initialized"))
        else:
            for replacement in replacements:
                if replacement is not None and not _is_true(replacement, INITIALIZED):
                    _say_once(
                        ctx,
                        replacement,
                        "DisruptionWaitingReadiness",
                        "Waiting on readiness to continue disruption",
                    )
            outcomes.append(Outcome(value, Step.WAITING, names, f"waiting for {recorded} to initialize"))
    return outcomes


def _replacement_problem(
    replacements: list[Obj | None], names: list[str], started: datetime, now: datetime
) -> str | None:
    for name, claim in zip(names, replacements, strict=True):
        if claim is None or objects.is_deleting(claim):
            return f"replacement {name} is gone"
        launched = objects.condition(claim, LAUNCHED) or {}
        if launched.get("status") == "False":
            return f"replacement {name} failed to launch: {launched.get('message') or launched.get('reason')}"
    if now - started > REPLACEMENT_TIMEOUT and not all(
        r is not None and _is_true(r, INITIALIZED) for r in replacements
    ):
        minutes = int(REPLACEMENT_TIMEOUT.total_seconds() // 60)
        return f"replacements {', '.join(names)} not initialized within {minutes} minutes"
    return None


def abandon(ctx: Context, claims: list[Obj], nodes: list[Obj], why: str) -> None:
    """Untaint, drop the command's annotations, and say why (a Warning event on each object)."""
    for node in nodes:
        _untaint(ctx, objects.name_of(node))
        ctx.cluster.record_event(node, "DisruptionAbandoned", why, event_type="Warning")
    for claim in claims:
        ctx.cluster.patch_nodeclaim(
            objects.name_of(claim),
            {"metadata": {"annotations": {COMMAND_ANNOTATION: None, REPLACEMENTS_ANNOTATION: None}}},
        )
        conditions.clear_condition(
            ctx, objects.name_of(claim), conditions.conditions_of(claim), DISRUPTION_REASON
        )
        ctx.cluster.record_event(claim, "DisruptionAbandoned", why, event_type="Warning")
    ctx.logger.warning(
        "disruption command abandoned", extra={"nodeclaims": [objects.name_of(c) for c in claims], "why": why}
    )


def nodes_in_commands(world: World) -> set[str]:
    """The nodes of the NodeClaims a command in flight will remove (annotated, not yet deleting)."""
    return {
        objects.name_of(node)
        for claim in world.nodeclaims
        if COMMAND_ANNOTATION in objects.annotations_of(claim)
        and not objects.is_deleting(claim)
        and (node := world.node_of(claim)) is not None
    }


def replacements_in_flight(nodeclaims: Iterable[Obj]) -> dict[str, list[str]]:
    """Replacement NodeClaim → the candidates of its command that are still there (tainted, or
    deleting while they drain): their pods are on their way to it, so it is no node to disrupt
    yet, however empty it looks (Karpenter never disrupts a node nominated for pods). Once its
    candidates are gone it is a node like any other."""
    found: dict[str, list[str]] = defaultdict(list)
    for claim in nodeclaims:
        annotations = objects.annotations_of(claim)
        if COMMAND_ANNOTATION not in annotations:
            continue
        for name in filter(None, (annotations.get(REPLACEMENTS_ANNOTATION) or "").split(",")):
            found[name].append(objects.name_of(claim))
    return {name: sorted(candidates) for name, candidates in found.items()}


def release_orphans(ctx: Context, world: World) -> list[str]:
    """Untaint nodes carrying the disrupted taint that no command and no termination owns."""
    released = []
    for claim in world.nodeclaims:
        node = world.node_of(claim)
        if node is None or objects.is_deleting(claim) or objects.is_deleting(node):
            continue
        if COMMAND_ANNOTATION in objects.annotations_of(claim):
            continue
        conditions.clear_condition(
            ctx, objects.name_of(claim), conditions.conditions_of(claim), DISRUPTION_REASON
        )
        if objects.has_taint(node, labels.DISRUPTED_TAINT_KEY):
            _untaint(ctx, objects.name_of(node))
            released.append(objects.name_of(node))
    if released:
        ctx.logger.info("disrupted taint lifted from nodes no command owns", extra={"nodes": released})
    return released


def _terminate(ctx: Context, claims: list[Obj], nodes: list[Obj], why: str, *, reason: str) -> None:
    """Ask for each candidate's termination (voluntary: PDBs and do-not-disrupt hold the drain, which
    the NodeClaim's terminationGracePeriod, if any, bounds), with Karpenter's ``DisruptionTerminating``
    events."""
    node_of = nodes_by_instance_id(nodes)
    asked = termination.TerminationRequest(why, involuntary=False)
    for claim in claims:
        instance = objects.nodeclaim_instance_id(claim)
        node = node_of.get(instance) if instance else None
        termination.request(ctx, nodeclaim=claim, node=node, instance_id=instance, asked=asked)
        say_terminating(ctx, claim, node, reason)


def mark_disrupted(ctx: Context, claim: Obj, reason: str) -> None:
    """The ``DisruptionReason`` condition Karpenter's queue sets on a candidate it disrupts."""
    conditions.set_condition(
        ctx, objects.name_of(claim), conditions.conditions_of(claim), DISRUPTION_REASON, True, reason=reason
    )


def say_terminating(ctx: Context, claim: Obj, node: Obj | None, reason: str) -> None:
    """Karpenter's ``DisruptionTerminating`` events on the Node and the NodeClaim."""
    if node is not None:
        ctx.cluster.record_event(node, "DisruptionTerminating", f"Disrupting Node: {reason}")
    ctx.cluster.record_event(claim, "DisruptionTerminating", f"Disrupting NodeClaim: {reason}")


def _nodeclaim_ref(name: str) -> Obj:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": name}}


def _say_once(ctx: Context, involved: Obj, reason: str, message: str) -> None:
    """An event, not repeated within ``EVENT_REPEAT_SECONDS`` (per container)."""
    now = time.monotonic()
    for seen, stamp in list(_recent_events.items()):
        if now - stamp > EVENT_REPEAT_SECONDS:
            del _recent_events[seen]
    key = (objects.name_of(involved), reason)
    if key not in _recent_events:
        _recent_events[key] = now
        ctx.cluster.record_event(involved, reason, message)


def _untaint(ctx: Context, node_name: str) -> None:
    def mutate(node: Obj) -> Obj | None:
        taints = NodeView.of(node).taints
        kept = [t for t in taints if t.get("key") != labels.DISRUPTED_TAINT_KEY]
        return None if len(kept) == len(taints) else {"spec": {"taints": kept}}

    ctx.cluster.update_node(node_name, mutate)


def _started(value: str) -> datetime | None:
    parts = value.split(" ")
    return objects.parse_time(parts[3]) if len(parts) >= 4 else None


def _is_true(claim: Obj, kind: str) -> bool:
    return (objects.condition(claim, kind) or {}).get("status") == "True"
