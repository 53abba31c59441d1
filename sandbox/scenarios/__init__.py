"""What is told or checked on top of a started sandbox: the demo (``demo``, ``demo_disruption``), the
chaos run (``chaos``), the fault matrix's rig and invariants (``reliability``) and the manifests they
apply (``workloads``)."""
