"""Node termination: cordon, tiered PDB-aware drain, terminate, finalizers — resumable.

Shared by the interruption flow and (later) the disruption flow:

* ``begin(ctx, nodeclaim=, node=, instance_id=, deadline=, reason=, involuntary=, instance_going=)``
  → ``Termination``: taint ``karpenter.sh/disrupted:NoSchedule`` + cordon, record the deadline on the
  NodeClaim and mark it for deletion;
* ``step(ctx, term)``: one non-blocking pass; ``run(ctx, terms, budget_seconds=)``: passes until done;
* ``pending_terminations(ctx)`` / ``resume_all(ctx, budget_seconds=0)``: find / finish what an earlier
  invocation left half-done, and Nodes deleted by hand (``node_deletions``: ``kubectl delete node``
  drains and terminates exactly as ``kubectl delete nodeclaim`` does);
* ``drain_and_delete_node(ctx, node, nodeclaim) -> bool``: one pass for the provisioning lifecycle's
  finalizer step (True when the node is drained and gone).

Which pods a drain waits for and may evict are ``state.pods`` rules; the tiers are in ``termination.drain``.
"""

from __future__ import annotations

from nodewright.termination.drain import DrainPass, drain_pass
from nodewright.termination.terminate import (
    DISRUPTED_TAINT,
    Termination,
    begin,
    drain_and_delete_node,
    from_nodeclaim,
    node_deletions,
    pending_terminations,
    resume_all,
    run,
    step,
)

__all__ = [
    "DISRUPTED_TAINT",
    "DrainPass",
    "Termination",
    "begin",
    "drain_and_delete_node",
    "drain_pass",
    "from_nodeclaim",
    "node_deletions",
    "pending_terminations",
    "resume_all",
    "run",
    "step",
]
