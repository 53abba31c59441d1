"""Typed views of the NodeClaims, Nodes and NodePools a pass observes: what the flows read of them, as
attributes, each object read once per ``World`` (``World.claim_views``, ``World.node_view_of``,
``World.pool_views``).

A view is for reading only. Its ``raw`` is the object as the API server returned it, which every
write (patches, events, terminations) still takes. The fields a pass never changes (names, the
NodePool label, the instance, timestamps, the termination settings) are read when the view is made;
the ones a pass's own marks change in place (annotations, status conditions: ``drift.mark``,
``termination.conditions``) are read through ``raw`` when asked, so a view never disagrees with what
the pass has written; a writer patching a whole status or condition list back starts from a copy
(``status_to_write``, ``conditions_to_write``). These are small hand-written readers, not
``api.models.NodeClaim.from_dict``: a pass over 5,000 nodes reads every NodeClaim and Node, and
only these fields. NodeClaims and Nodes are matched by their instance by one rule,
``by_instance_id``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from nodewright.api import labels
from nodewright.api.models import INITIALIZED, static_replicas
from nodewright.cluster.objects import (
    condition,
    node_instance_id,
    nodeclaim_instance_id,
    nodeclass_name,
    parse_time,
)

if TYPE_CHECKING:
    from nodewright.state.interfaces import Obj


def _meta(obj: Obj) -> dict[str, Any]:
    found: dict[str, Any] = obj.get("metadata") or {}
    return found


@dataclass(frozen=True, slots=True, eq=False)
class _View:
    """What NodeClaims and Nodes share: the object, its name, whether it is being deleted."""

    raw: Obj
    name: str
    deleting: bool  # it has a deletionTimestamp

    @property
    def labels(self) -> dict[str, str]:
        found: dict[str, str] = _meta(self.raw).get("labels") or {}
        return found

    @property
    def annotations(self) -> dict[str, str]:
        found: dict[str, str] = _meta(self.raw).get("annotations") or {}
        return found

    @property
    def finalizers(self) -> list[str]:
        found: list[str] = _meta(self.raw).get("finalizers") or []
        return list(found)

    def status_to_write(self) -> dict[str, Any]:
        """A copy of the object's status as written, for a writer to change and patch back whole."""
        return dict(self.raw.get("status") or {})

    def held_by(self, finalizer: str) -> bool:
        """Whether it is being deleted and ``finalizer`` still holds it."""
        return self.deleting and finalizer in self.finalizers

    @property
    def conditions(self) -> list[dict[str, Any]]:
        """The status conditions as written (read through ``raw``); a writer starts from
        ``conditions_to_write``."""
        found: list[dict[str, Any]] = (self.raw.get("status") or {}).get("conditions") or []
        return found

    def conditions_to_write(self) -> list[dict[str, Any]]:
        """A copy of each status condition, for a writer to keep current and patch back."""
        return [dict(c) for c in self.conditions]

    def condition_status(self, kind: str) -> str | None:
        """The status of the condition of type ``kind`` as written ("True", "False", "Unknown"; None
        when it has none), read through ``raw``."""
        status: str | None = (condition(self.raw, kind) or {}).get("status")
        return status

    def is_true(self, kind: str) -> bool:
        """Whether the status condition of type ``kind`` is True (read through ``raw``)."""
        return self.condition_status(kind) == "True"

    def true_since(self, kind: str) -> datetime | None:
        """When the condition ``kind`` turned True (its lastTransitionTime); None when it is not True
        or its time is missing or unreadable."""
        found = condition(self.raw, kind)
        if not found or found.get("status") != "True":
            return None
        return parse_time(found.get("lastTransitionTime"))


@dataclass(frozen=True, slots=True, eq=False)
class ClaimView(_View):
    """A NodeClaim as the flows read it."""

    nodepool: str  # its karpenter.sh/nodepool label ('' when absent)
    nodeclass: str  # spec.nodeClassRef.name ('' when absent)
    uid: str  # metadata.uid ('' until the API server has stored it)
    instance_id: str | None  # status.instanceID, else the instance of status.providerID
    creation_timestamp: str  # as written ('' when absent): the flows order NodeClaims by it
    created: datetime | None
    deleted_at: datetime | None  # its deletionTimestamp (None when absent or unreadable)
    expire_after: str | None  # spec.expireAfter as written (None: unset, Karpenter's default applies)
    termination_grace_period: str | None  # spec.terminationGracePeriod as written
    provider_id: str | None  # status.providerID (None until launched)
    node_name: str | None  # status.nodeName (None until its Node registers)
    requirements: list[dict[str, Any]]  # spec.requirements
    taints: list[dict[str, Any]]  # spec.taints
    startup_taints: list[dict[str, Any]]  # spec.startupTaints
    requests: dict[str, Any]  # spec.resources.requests
    allocatable: dict[str, Any] | None  # status.allocatable (None until launched)
    capacity: dict[str, Any] | None  # status.capacity (None until launched)

    @classmethod
    def of(cls, claim: Obj) -> ClaimView:
        meta = _meta(claim)
        spec = claim.get("spec") or {}
        status = claim.get("status") or {}
        stamp = str(meta.get("creationTimestamp") or "")
        return cls(
            raw=claim,
            name=str(meta.get("name", "")),
            deleting=bool(meta.get("deletionTimestamp")),
            nodepool=str((meta.get("labels") or {}).get(labels.NODEPOOL) or ""),
            nodeclass=nodeclass_name(claim),
            uid=str(meta.get("uid") or ""),
            instance_id=nodeclaim_instance_id(claim),
            creation_timestamp=stamp,
            created=parse_time(stamp),
            deleted_at=parse_time(meta.get("deletionTimestamp")),
            expire_after=spec.get("expireAfter") or None,
            termination_grace_period=spec.get("terminationGracePeriod") or None,
            provider_id=status.get("providerID") or None,
            node_name=status.get("nodeName") or None,
            requirements=spec.get("requirements") or [],
            taints=spec.get("taints") or [],
            startup_taints=spec.get("startupTaints") or [],
            requests=(spec.get("resources") or {}).get("requests") or {},
            allocatable=status.get("allocatable") or None,
            capacity=status.get("capacity") or None,
        )

    @property
    def last_pod_event(self) -> datetime | None:
        """``status.lastPodEventTime`` (read through ``raw``: a pass records it)."""
        return parse_time((self.raw.get("status") or {}).get("lastPodEventTime"))

    @property
    def initialized_at(self) -> datetime | None:
        """When it became ``Initialized`` (its creation when that time is missing); None while it
        is not."""
        if not self.is_true(INITIALIZED):
            return None
        return self.true_since(INITIALIZED) or self.created


@dataclass(frozen=True, slots=True, eq=False)
class NodeView(_View):
    """A Node as the flows read it."""

    instance_id: str | None  # the EC2 instance of spec.providerID
    taints: list[dict[str, Any]]  # spec.taints
    unschedulable: bool  # spec.unschedulable (cordoned)
    allocatable: dict[str, Any] | None  # status.allocatable (None until the kubelet reports it)
    capacity: dict[str, Any] | None  # status.capacity (None until the kubelet reports it)

    @classmethod
    def of(cls, node: Obj) -> NodeView:
        meta = _meta(node)
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        return cls(
            raw=node,
            name=str(meta.get("name", "")),
            deleting=bool(meta.get("deletionTimestamp")),
            instance_id=node_instance_id(node),
            taints=spec.get("taints") or [],
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=status.get("allocatable") or None,
            capacity=status.get("capacity") or None,
        )

    def has_taint(self, key: str, effect: str | None = None) -> bool:
        """Whether the Node carries a taint with ``key`` (and ``effect``, when given):
        ``cluster.objects.has_taint``'s rule."""
        return any(t.get("key") == key and (effect is None or t.get("effect") == effect) for t in self.taints)


@dataclass(frozen=True, slots=True, eq=False)
class PoolView(_View):
    """A NodePool as the triage reads it (``state.nodepools``): what it reads of every NodePool,
    valid or not, to judge it. A NodePool that passed the triage is read through the typed
    ``api.models.NodePool`` (``World.nodepool_model``), which assumes the API server's schema."""

    generation: int | None  # metadata.generation (what its conditions observe)
    weight: int  # spec.weight (0 when absent)
    nodeclass: str  # spec.template.spec.nodeClassRef.name ('' when absent)
    replicas: int | None  # spec.replicas when it is a count (a static NodePool), else None
    limits: dict[str, Any]  # spec.limits as written
    template_labels: dict[str, str]  # spec.template.metadata.labels as written

    @classmethod
    def of(cls, pool: Obj) -> PoolView:
        meta = _meta(pool)
        spec = pool.get("spec") or {}
        return cls(
            raw=pool,
            name=str(meta.get("name", "")),
            deleting=bool(meta.get("deletionTimestamp")),
            generation=meta.get("generation"),
            weight=int(spec.get("weight") or 0),
            nodeclass=nodeclass_name(pool),
            replicas=static_replicas(spec.get("replicas")),
            limits=spec.get("limits") or {},
            template_labels=((spec.get("template") or {}).get("metadata") or {}).get("labels") or {},
        )


_Instanced = TypeVar("_Instanced", ClaimView, NodeView)


def by_instance_id(views: Iterable[_Instanced]) -> dict[str, _Instanced]:
    """NodeClaims or Nodes by their EC2 instance, the one rule a NodeClaim finds its Node by (and an
    instance its NodeClaim and Node: ``World.node_of``, ``World.node_view_of``,
    ``state.world.nodes_by_instance_id`` and ``nodeclaims_by_instance_id``): one without an
    instance (a NodeClaim not launched yet, a Node whose kubelet has not set its providerID, or
    not EC2) is found by no instance, so never matches another without one."""
    return {view.instance_id: view for view in views if view.instance_id}


__all__ = ["ClaimView", "NodeView", "PoolView", "by_instance_id"]
