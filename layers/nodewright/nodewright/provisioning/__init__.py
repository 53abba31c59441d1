"""Provisioning: pending pods get nodes within seconds.

Read in this order:

- ``loop.run(ctx, remaining_seconds)`` — one Lambda invocation: the writers' lease, passes in an
  adaptive loop with Karpenter's batching (1 s quiet, 10 s at most);
- ``flow.provision(ctx)`` — one pass: observe → lifecycle → NodePools → plan → NodeClaims created
  → launch → status → events → metrics;
- ``world`` (what a pass reads), ``nodepools`` (which pools are usable, their usage, conditions),
  ``planning`` (the bridge to the pure scheduling core and the catalog), ``nodeclaims`` (the
  objects), ``launch`` (create/adopt the instance, write the status), ``lifecycle`` (Registered →
  Initialized, timeouts, deletions, leaked instances);
- ``displaced.replace_for_displaced(ctx, node_names)`` — capacity for the pods of nodes about to go
  (used by the interruption flow); ``displaced.launch_replacements(ctx, world, new_claims)`` — the
  replacement NodeClaims of a disruption command, launched through the same path (used by the
  disruption flow).
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
