"""A pass's writes to NodeClaims, gathered and sent as one merge patch per NodeClaim and subresource.

The disruption pass's first controllers (pod events, ``Consolidatable``, drift) each change a few
fields of many NodeClaims. Written as each decided, a cold pass over a 5,000-node cluster made up to
four PATCHes per NodeClaim (20,000 requests against the API server's priority and fairness);
gathered here, a NodeClaim gets at most one status PATCH (``lastPodEventTime`` and its conditions
together) and one metadata PATCH, and one whose values did not change gets none.

The status goes first: the pod-event digest (an annotation) is what tells the next pass an event
was recorded, so a failure between the two repeats the event rather than losing it.

Even gathered, a pass over a cluster no pass has marked yet (a first deployment on 5,000 nodes)
has two writes per NodeClaim: 10,000 requests, minutes at the client's rate limit. ``send`` takes a
deadline: past it, the NodeClaims not yet written are left for the next pass, which computes their
marks again from what it observes (a pod event not recorded is recorded then, later: it only ever
delays a disruption).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nodewright.cluster.errors import NotFound

if TYPE_CHECKING:
    from nodewright.state.interfaces import Cluster


class NodeClaimPatches:
    """Merge patches for NodeClaims' ``status`` and ``metadata.annotations``, sent by ``send``."""

    def __init__(self) -> None:
        self._status: dict[str, dict[str, Any]] = {}
        self._annotations: dict[str, dict[str, str]] = {}

    def status(self, name: str, fields: dict[str, Any]) -> None:
        """Set these status fields of NodeClaim ``name`` (later calls win per field)."""
        self._status.setdefault(name, {}).update(fields)

    def annotate(self, name: str, annotations: dict[str, str]) -> None:
        self._annotations.setdefault(name, {}).update(annotations)

    def send(
        self,
        cluster: Cluster,
        *,
        until: float | None = None,
        monotonic: Callable[[], float] | None = None,
    ) -> int:
        """One status PATCH, then one metadata PATCH, per NodeClaim with changes; a NodeClaim
        deleted meanwhile is skipped (nothing left to mark). Sent patches are forgotten. ``until``
        (on ``monotonic``): no NodeClaim's writes start after it; the ones left stay pending.
        Returns how many NodeClaims are left unwritten."""
        names = sorted(self._status.keys() | self._annotations.keys())
        for index, name in enumerate(names):
            if until is not None and monotonic is not None and monotonic() >= until:
                return len(names) - index
            try:
                if name in self._status:
                    cluster.patch_nodeclaim_status(name, self._status.pop(name))
                if name in self._annotations:
                    cluster.patch_nodeclaim(name, {"metadata": {"annotations": self._annotations.pop(name)}})
            except NotFound:
                self._status.pop(name, None)
                self._annotations.pop(name, None)
        return 0
