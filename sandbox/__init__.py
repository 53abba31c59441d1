"""The development-side sandbox: a Kubernetes API emulator, cluster simulators and a moto server.

``from sandbox import Sandbox`` is the entry point (see sandbox.cluster); importing this package
stays cheap: the orchestrator and its dependencies load on first use.

Its rooms:

* ``apiserver/``: the Kubernetes API emulator (routing, storage, admission, per-kind behaviour);
* ``simulators/``: what runs in a cluster besides the API server (scheduler, kubelet, controllers);
* ``aws/``: the moto server and what it is taught so EC2, SSM and pricing answer as AWS does;
* ``iam/``: IAM policy evaluation of every AWS request a function makes;
* ``scenarios/``: what is told or checked on top (the demo, the chaos run, the reliability rig and
  the workloads they apply);
* ``runtime/``: the functions run as Lambda runs them (the stack's containers and triggers, the
  wake-up's URL, the events they receive, the handler loader, ``sandbox up``'s live log);
* the top level: the orchestrator (``cluster``), the harness the demo and benches share, and the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

__all__ = ["Sandbox"]


def __getattr__(name: str) -> Any:
    if name == "Sandbox":
        from sandbox.cluster import Sandbox

        return Sandbox
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
