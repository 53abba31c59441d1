"""The termination controller's entry point, which every handler runs: ``reconcile(ctx, world)``.

Karpenter's termination controller reconciles every NodeClaim (and Node) being deleted; here a pass
does the same over what it observed: each NodeClaim marked for deletion that still carries the
``karpenter.sh/termination`` finalizer (resumed from what ``request`` recorded on it), each Node
deleted by hand (``kubectl delete node`` asks for its NodeClaim's termination), and the
terminations the handler's other controllers asked for since ``world`` was observed (``asked``:
their own objects carry what those passes learnt, e.g. when EC2 was last asked about the
instance). With no time budget each gets one non-blocking step (the provisioner's passes, an
interruption's first step right after the replacement); with one they are driven until done or the
budget is spent (the disruption function's slice, the interruption functions' drain, the removal).

The other controllers only ask (``request``, or deleting the NodeClaim); this package is the only
code that finishes a node: deletes a Node or removes its finalizer, terminates a NodeClaim's
instance, removes the NodeClaim's finalizer (``tests/unit/test_import_boundaries.py`` holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from nodewright.state.views import ClaimView, NodeView
from nodewright.termination.terminate import Termination, drive, in_progress, step

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj


class Observed(Protocol):
    """What the controller reads of a pass's observation: a ``state.world.World``, or ``observe``'s:
    its NodeClaims and Nodes as the typed views (``state.views``), each read once."""

    @property
    def claim_views(self) -> Sequence[ClaimView]: ...

    @property
    def node_views(self) -> Sequence[NodeView]: ...


@dataclass(frozen=True)
class NodesAndClaims:
    """The NodeClaims and Nodes alone (two list calls), for callers without a ``World``."""

    nodeclaims: Sequence[Obj]
    nodes: Sequence[Obj]

    @cached_property
    def claim_views(self) -> list[ClaimView]:
        return [ClaimView.of(c) for c in self.nodeclaims]

    @cached_property
    def node_views(self) -> list[NodeView]:
        return [NodeView.of(n) for n in self.nodes]


def observe(ctx: Context) -> NodesAndClaims:
    """Read what ``reconcile`` looks at, for a caller that has no ``World`` of the moment (the
    interruption functions between messages, the disruption function after its pass's writes)."""
    return NodesAndClaims(nodeclaims=ctx.cluster.list_nodeclaims(), nodes=ctx.cluster.list_nodes())


@dataclass(frozen=True)
class TerminationReport:
    """What one reconcile drove, in order: the terminations asked for, then those the cluster held."""

    terminations: tuple[Termination, ...] = ()
    # NodeClaims (or Nodes without one) whose Node someone deleted by hand: terminations from now on.
    node_deletions: tuple[str, ...] = ()

    @property
    def unfinished(self) -> list[Termination]:
        return [t for t in self.terminations if not t.done]

    @property
    def finished(self) -> list[Termination]:
        return [t for t in self.terminations if t.done]

    @property
    def progressed(self) -> list[Termination]:
        """Those this reconcile moved on: finished, or pods evicted or deleted by their last pass.
        One that only waited (on a PodDisruptionBudget, a pod's grace period, a volume, EC2 taking
        the instance) did not: a drain a PDB blocks for days is not work to stay awake for."""
        return [
            t
            for t in self.terminations
            if t.done or (t.last_pass and (t.last_pass.evicted or t.last_pass.deleted))
        ]

    def summary(self) -> list[dict[str, Any]]:
        return [t.summary() for t in self.terminations]


def reconcile(
    ctx: Context,
    world: Observed | None,
    *,
    asked: Sequence[Termination] = (),
    budget_seconds: float = 0.0,
    driver: str | None = None,
) -> TerminationReport:
    """Drive every termination ``world`` holds and those ``asked`` for since (see the module);
    ``world`` None: only ``asked``. A termination already done is not stepped again. Of ``world``'s,
    those another container has claimed (``termination.drivers``; ``driver``: this one's holder name)
    are left to it."""
    found: list[Termination] = []
    deletions: list[Termination] = []
    if world is not None:
        skip = frozenset(name for t in asked if (name := t.nodeclaim or t.node))
        found, deletions = in_progress(ctx, world.node_views, world.claim_views, skip=skip, driver=driver)
    terms = [*asked, *found, *deletions]
    if budget_seconds > 0:
        drive(ctx, terms, budget_seconds=budget_seconds)
    else:
        for term in terms:
            step(ctx, term)
    return TerminationReport(
        terminations=tuple(terms),
        node_deletions=tuple(t.nodeclaim or t.node or "" for t in deletions),
    )
