"""Provisioning: pending pods get nodes within seconds.

Read in this order:

- ``loop.run(ctx, remaining_seconds)`` — one Lambda invocation: the writers' lease, passes in an
  adaptive loop with Karpenter's batching (1 s quiet, 10 s at most);
- ``flow.provision(ctx, guard)`` — one pass: its controllers in order over one ``World``, each
  ``reconcile(ctx, world)`` with a typed report: ``lifecycle`` (Registered → Initialized,
  registration timeouts) → termination (``nodewright.termination``) → provisioning
  (``flow.reconcile``: NodePools → static NodePools → plan → create and launch → pod events) →
  ``garbage`` (orphaned NodeClaims, vanished and leaked instances, unused launch templates);
  lifecycle and garbage collection ask for terminations by deleting NodeClaims, never finish one;
- ``planning`` (the bridge to the pure scheduling core and the catalog), ``nodeclaims`` (the
  objects), ``launch`` (``create_and_launch``, the one create-and-launch routine under the write
  guard: create, then adopt or launch the instance and write the status);
- ``displaced.replace_for_displaced(ctx, node_names, guard=)`` — capacity for the pods of nodes
  about to go (used by the interruption flow); ``displaced.launch_replacements(ctx, world,
  new_claims, guard=)`` — the replacement NodeClaims of a disruption command (used by the
  disruption flow); both through ``create_and_launch``.
"""

from __future__ import annotations

from nodewright.provisioning.displaced import launch_replacements, replace_for_displaced
from nodewright.provisioning.flow import PassReport, provision
from nodewright.provisioning.loop import InvocationReport, run

__all__ = [
    "InvocationReport",
    "PassReport",
    "launch_replacements",
    "provision",
    "replace_for_displaced",
    "run",
]
