"""Disruption: nodes removed or replaced because they expired, sit empty, drifted, or cost more than needed.

``run(ctx, remaining_seconds)`` is the disruption function's one call (``flow``). The rules are
separate: ``decide`` (expiration, emptiness, budgets; pure), ``drift`` (the Drifted condition),
``consolidation`` (candidates and commands, asked of the scheduling core through
``state.snapshot``), ``execute`` (a command's resumable steps). Termination itself (taint, cordon,
PDB-aware drain, terminate) is ``nodewright.termination``, shared with the interruption flow.
"""

from nodewright.disruption.flow import DisruptionReport, run

__all__ = ["DisruptionReport", "run"]
