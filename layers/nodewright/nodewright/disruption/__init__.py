"""Disruption: nodes removed because they expired or sit empty, within the NodePools' budgets.

``run(ctx, remaining_seconds)`` is the disruption function's one call (``flow``); the rules are
pure and separate (``decide``). Termination itself (taint, cordon, PDB-aware drain, terminate) is
``nodewright.termination``, shared with the interruption flow.

Built: expiration (forceful, as in Karpenter v1), emptiness (WhenEmpty / WhenEmptyOrUnderutilized
after consolidateAfter), disruption budgets (counts and percentages, schedules, reasons), the node
``karpenter.sh/do-not-disrupt`` annotation. Not built yet: consolidation of underutilized nodes
(delete or replace cheaper) and drift.
"""

from nodewright.disruption.flow import DisruptionReport, run

__all__ = ["DisruptionReport", "run"]
