"""Disruption: nodes removed or replaced because they expired, sit empty, drifted, or cost more than needed.

``run(ctx, remaining_seconds)`` is the disruption function's one call (``flow``): passes, each the
disruption controller's ``flow.reconcile(ctx, world)`` then the termination controller's. The rules
are separate: ``decide`` (expiration, emptiness, budgets; pure), ``drift`` (the Drifted condition),
``consolidation`` (candidates and commands, asked of the scheduling core through
``state.snapshot``), ``execute`` (a command's resumable steps). Disruption only asks for
terminations; ``nodewright.termination`` carries them out (taint, cordon, PDB-aware drain,
terminate, finalizers), as it does every other one.
"""

from nodewright.disruption.flow import DisruptionReport, run

__all__ = ["DisruptionReport", "run"]
