"""One driver per termination at a time, across containers (Karpenter: one worker per NodeClaim).

Karpenter's termination controller runs in one process, with a work queue that hands each NodeClaim
to one worker at a time. Here every function container may find the same termination: each
interruption invocation's resume scan, each EC2 state-change notice for an instance already being
terminated, the provisioner's and the disruption function's passes. Stepping it from all of them
multiplies the API server's requests by the number of containers: in the 100-node storm about 50
containers drove the same terminations (315 "instance already gone" finishes for 100 nodes) and the
API emulator timed requests out.

So a container that means to drive a termination it did not ask for first **claims** the NodeClaim:
the annotation ``nodewright.io/termination-driver: <holder> <until>``, written by a merge patch
carrying the ``resourceVersion`` it read. kube-apiserver applies such a patch only to that version
(409 Conflict otherwise), so of containers racing for one NodeClaim exactly one writes its claim; the
others read it and leave the termination alone (``held_elsewhere``) until ``until``. The claim lasts
the driver's own invocation, so it is never renewed: a driver that dies (a Lambda timeout) lets it
expire and the next look takes the termination over. The record lives on the NodeClaim, with the
rest of the termination's record, so every container sees it (an in-memory flag would be seen by one).

The invocation that asked for a termination (``request``) drives it without a claim: the resume
scans leave young terminations alone (``interruption.processing._left_behind``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from nodewright.cluster import objects
from nodewright.cluster.errors import ApiError, ApiUnavailable, Conflict, NotFound

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import Obj

DRIVER_ANNOTATION = "nodewright.io/termination-driver"


@dataclass(frozen=True)
class Driver:
    """Who drives (one per container: a container runs one invocation at a time, and the next one
    goes on with what the last one claimed), and until when (the end of its invocation)."""

    holder: str
    until: datetime

    def annotation(self) -> str:
        return f"{self.holder} {objects.format_time(self.until)}"


def holder_of(nodeclaim: Obj, now: datetime) -> str | None:
    """Who holds a live claim on ``nodeclaim`` (None: nobody, it expired, or it cannot be read —
    a hand-edited value must not freeze a termination)."""
    value = objects.annotations_of(nodeclaim).get(DRIVER_ANNOTATION) or ""
    holder, _, until = value.rpartition(" ")
    expires = objects.parse_time(until) if holder else None
    if expires is None or expires <= now:
        return None
    return holder


def held_elsewhere(nodeclaim: Obj, holder: str | None, now: datetime) -> bool:
    """Whether another driver than ``holder`` (None: any driver) holds a live claim on it."""
    current = holder_of(nodeclaim, now)
    return current is not None and current != holder


def claim(ctx: Context, nodeclaim: Obj, driver: Driver) -> bool:
    """Claim ``nodeclaim`` (as read, with its ``resourceVersion``) for ``driver``; True when it is
    ours now. False when another holds it, or changed it since it was read (a racing claim won,
    or a step wrote: the next look decides), or it is gone."""
    now = ctx.clock.now()
    if held_elsewhere(nodeclaim, driver.holder, now):
        return False
    version = (nodeclaim.get("metadata") or {}).get("resourceVersion")
    if not version:  # without it the write would not be conditional
        return False
    patch = {
        "metadata": {"resourceVersion": version, "annotations": {DRIVER_ANNOTATION: driver.annotation()}}
    }
    try:
        ctx.cluster.patch_nodeclaim(objects.name_of(nodeclaim), patch)
    except (Conflict, NotFound):
        return False
    return True


def claim_each(ctx: Context, nodeclaims: Iterable[Obj], driver: Driver, *, limit: int) -> list[str]:
    """Claim up to ``limit`` of ``nodeclaims`` for ``driver``; the names now ours."""
    taken: list[str] = []
    for nodeclaim in nodeclaims:
        if len(taken) >= limit:
            break
        if claim(ctx, nodeclaim, driver):
            taken.append(objects.name_of(nodeclaim))
    return taken


def release(ctx: Context, nodeclaims: Iterable[str]) -> None:
    """Give back the claims of a drive that has ended, so the next look (a state-change notice, a
    resume scan, the provisioner's pass) takes over at once instead of when they expire. Not
    conditional: a claim lasts at least as long as its driver's drive, so nobody else holds one
    of these yet. Best effort: one that cannot be given back (gone, or the API server cannot take
    it now) expires on its own."""
    for name in nodeclaims:
        try:
            ctx.cluster.patch_nodeclaim(name, {"metadata": {"annotations": {DRIVER_ANNOTATION: None}}})
        except (ApiError, ApiUnavailable):  # NotFound (finished) among them
            continue
