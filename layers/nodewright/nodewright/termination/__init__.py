"""Node termination, the one owner of every finish of a node: cordon, tiered PDB-aware drain, the
VolumeAttachment wait, terminate, finalizers — resumable (Karpenter's termination controller).

Read in this order:

* ``reconcile(ctx, world, asked=, budget_seconds=) -> TerminationReport`` (``controller``): what every
  handler runs — the terminations the cluster holds (NodeClaims marked for deletion, Nodes deleted
  by hand) and those just asked for, one step each or driven within a time budget;
* ``request(ctx, nodeclaim=, node=, instance_id=, asked=TerminationRequest(...)) -> Termination``:
  how the other controllers (interruption, disruption, the removal, ``kubectl delete node``) ask
  for one — taint ``karpenter.sh/disrupted:NoSchedule`` + cordon, record the request (reason,
  involuntary, instance going, deadline) on the NodeClaim and mark it for deletion. Deleting a
  NodeClaim asks for the default request; ``resume`` rebuilds a termination from the NodeClaim;
* ``terminate`` (one ``step``, ``drive``), ``drain`` (one drain pass, Karpenter's tiers), ``volumes``
  (which VolumeAttachments hold the instance), ``conditions`` (the NodeClaim conditions Karpenter
  writes: termination's ``Drained``, ``VolumesDetached``, ``InstanceTerminating``, and disruption's);
* ``drivers`` — one container drives a termination at a time: a claim on the NodeClaim (a
  conditional write) that the others respect until it expires;
* ``finish_unlaunched`` (a NodeClaim whose launch failed for good: nothing to drain),
  ``finish_leaked`` (an instance with no NodeClaim, which garbage collection found) and
  ``finish_now`` (the removal's last resort past its deadline) are the ways to finish at once.

No other package deletes a Node or removes its finalizer, terminates a NodeClaim's instance or
removes the NodeClaim's finalizer (``tests/unit/test_import_boundaries.py``). Which pods a drain
waits for and may evict are ``state.pods`` rules.
"""

from __future__ import annotations

from nodewright.termination import drivers
from nodewright.termination.controller import NodesAndClaims, Observed, TerminationReport, observe, reconcile
from nodewright.termination.drain import DrainPass, drain_pass
from nodewright.termination.drivers import Driver
from nodewright.termination.terminate import (
    DISRUPTED_TAINT,
    Termination,
    TerminationRequest,
    cordon,
    finish_leaked,
    finish_now,
    finish_unlaunched,
    request,
    resume,
)

__all__ = [
    "DISRUPTED_TAINT",
    "DrainPass",
    "Driver",
    "NodesAndClaims",
    "Observed",
    "Termination",
    "TerminationReport",
    "TerminationRequest",
    "cordon",
    "drain_pass",
    "drivers",
    "finish_leaked",
    "finish_now",
    "finish_unlaunched",
    "observe",
    "reconcile",
    "request",
    "resume",
]
