"""NodeClaim status conditions as Karpenter's controllers write them, through ``cluster.objects``.

Karpenter's ``operatorpkg/status`` helpers, which the conditions users read follow:
``SetTrue(type)`` (reason = the type, no message), ``SetTrueWithReason``, ``SetFalse`` and
``SetUnknownWithReason`` (status ``Unknown``), ``Clear`` (the condition removed). Each write here
patches the NodeClaim's status only when the condition changes (so a pass that repeats a verdict
writes nothing), keeps ``lastTransitionTime`` unless the status changed
(``cluster.objects.set_condition``), and updates the given conditions list in place so the caller
goes on with what the API server now holds. Given ``patches`` (``cluster.patches``), the write joins
the NodeClaim's other status changes of the pass instead of going out at once.

Shared by the termination (``Drained``, ``VolumesDetached``, ``InstanceTerminating``) and the
disruption flow (``Consolidatable``, ``DisruptionReason``, ``Drifted``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodewright.cluster import objects

if TYPE_CHECKING:
    from nodewright.cluster.patches import NodeClaimPatches
    from nodewright.context import Context

Conditions = list[dict[str, Any]]


def set_condition(
    ctx: Context,
    nodeclaim: str,
    conditions: Conditions,
    condition_type: str,
    status: bool | None,
    *,
    reason: str | None = None,
    message: str | None = None,
    patches: NodeClaimPatches | None = None,
) -> bool:
    """Set ``condition_type`` on the NodeClaim named ``nodeclaim`` whose status holds ``conditions``
    (True, False, or Unknown for None); ``reason`` defaults to the type and ``message`` to the
    reason, as Karpenter writes them. True when it was written."""
    reason = reason or condition_type
    message = reason if message is None else message
    wanted = "Unknown" if status is None else "True" if status else "False"
    found = next((c for c in conditions if c.get("type") == condition_type), None)
    if found is not None and (found.get("status"), found.get("reason"), found.get("message") or "") == (
        wanted,
        reason,
        message,
    ):
        return False
    updated = objects.set_condition(
        conditions, condition_type, status, reason=reason, message=message, now=ctx.clock.now()
    )
    _write(ctx, nodeclaim, updated, patches)
    conditions[:] = updated
    return True


def clear_condition(
    ctx: Context,
    nodeclaim: str,
    conditions: Conditions,
    condition_type: str,
    *,
    patches: NodeClaimPatches | None = None,
) -> bool:
    """Remove ``condition_type`` (Karpenter's ``Clear``); True when it was there."""
    kept = [c for c in conditions if c.get("type") != condition_type]
    if len(kept) == len(conditions):
        return False
    _write(ctx, nodeclaim, kept, patches)
    conditions[:] = kept
    return True


def _write(ctx: Context, nodeclaim: str, conditions: Conditions, patches: NodeClaimPatches | None) -> None:
    if patches is None:
        ctx.cluster.patch_nodeclaim_status(nodeclaim, {"conditions": conditions})
    else:
        patches.status(nodeclaim, {"conditions": conditions})


def conditions_of(nodeclaim: dict[str, Any]) -> Conditions:
    """The NodeClaim's conditions list, created in its status when absent (the list is shared: the
    writes above keep the object current)."""
    status = nodeclaim.setdefault("status", {})
    if not isinstance(status.get("conditions"), list):
        status["conditions"] = []
    found: Conditions = status["conditions"]
    return found
