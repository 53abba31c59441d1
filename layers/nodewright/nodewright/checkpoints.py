"""Named step boundaries of the flows, where a fault test can stop a function as if it were killed.

Each flow calls ``checkpoint(NAME)`` between two writes whose order matters (a NodeClaim created
but not launched, an instance launched but not recorded, a node drained but not deleted, ...).
In production nothing is registered and the call returns at once; the sandbox registers a hook
that freezes the invocation at a chosen point, so the next invocation must finish what this one
left (``tests/e2e/test_fault_matrix.py``, ``nodewright chaos``).

``POINTS`` lists every name, so a test can kill a function at each of them in turn.
"""

from __future__ import annotations

from collections.abc import Callable

POINTS: dict[str, str] = {
    "provisioning.nodeclaim-created": "a NodeClaim is created, nothing launched for it yet",
    "provisioning.fleet-created": "CreateFleet answered, the instance not yet recorded on the NodeClaim",
    "provisioning.launch-recorded": "the NodeClaim records its instance (Launched)",
    "lifecycle.node-registered": "the Node got the NodeClaim's labels, taints and finalizer; the "
    "NodeClaim not yet Registered",
    "termination.cordoned": "the node is tainted and cordoned, the NodeClaim not yet marked",
    "termination.nodeclaim-marked": "the NodeClaim is marked for deletion (its finalizer keeps it)",
    "termination.drained": "the node's pods are gone, the Node not yet deleted",
    "termination.instance-terminated": "the instance is terminated, the finalizers not yet removed",
    "termination.node-released": "the Node's finalizer is removed, the NodeClaim's not yet",
    "interruption.offering-marked": "a spot interruption marked its offering unavailable",
    "interruption.replacement-launched": "the replacement is launched, the drain not started",
    "disruption.candidate-chosen": "a node is chosen for disruption, nothing written yet",
    "disruption.candidates-tainted": "a replace command's candidates are annotated and tainted, no "
    "replacement launched yet",
    "disruption.replacements-launched": "the replacements are launched, not yet recorded on the candidates",
    "disruption.replacements-recorded": "the replacements are recorded; the candidates wait for them to "
    "initialize",
}


class _Hook:
    """The registered hook (module state without ``global``); None in production."""

    hook: Callable[[str], None] | None = None


def checkpoint(name: str) -> None:
    """Mark a step boundary (see the module docstring); a no-op unless a hook is registered."""
    hook = _Hook.hook
    if hook is not None:
        hook(name)


def set_hook(hook: Callable[[str], None] | None) -> None:
    """Register the one hook (the sandbox's), or None to remove it."""
    _Hook.hook = hook
