"""What every flow shares about the cluster: one World, one set of pod rules, one NodePool triage.

* ``state.world``: ``World`` (what a pass observes, with typed lookups) and ``observe(ctx)``;
* ``state.pods``: the pod predicates (provisionable, reschedulable, evictable, drainable, ...);
* ``state.nodepools``: which NodePools are usable (valid, EC2NodeClass ready), their conditions,
  limits and usage;
* ``state.interfaces``: the ``CloudProvider`` and ``Cluster`` protocols the flows talk through.

Provisioning, disruption and interruption depend on this package, on ``termination`` and on the
scheduling core, never on each other (the one exception: ``provisioning.replace_for_displaced``).
Nothing is imported here, so importing one module stays cheap.
"""
