"""The two edges the flows talk through: the cloud provider and the cluster, as ``typing.Protocol``s.

Each lists only what a flow (or ``state``) really calls; ``nodewright.cloud.provider.CloudProvider``
(EC2) and ``nodewright.cluster.Cluster`` (the Kubernetes API) implement them, and so do the shared
test doubles in ``tests/fakes.py``. mypy checks both against these (``Context.connect`` assigns the
real ones to these types). Objects cross the cluster edge as plain dicts shaped like the API's JSON.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nodewright.cloud.pricetable import PriceTable
    from nodewright.cloud.provider import (
        DriftInputs,
        Instance,
        LaunchRequest,
        LaunchResult,
        NodeClassResolution,
    )
    from nodewright.cloud.reservations import CapacityReservation
    from nodewright.cluster.client import EvictionResult
    from nodewright.cluster.resources import Resource
    from nodewright.scheduling import InstanceType

Obj = dict[str, Any]


class CloudView(Protocol):
    """What a pass observes of the cloud: the instance types an EC2NodeClass allows, and prices."""

    def instance_types(self, nodeclass: Mapping[str, Any]) -> list[InstanceType]: ...

    def prices(self) -> PriceTable: ...

    def node_price(self, nodeclass: Mapping[str, Any]) -> float: ...


class CloudProvider(CloudView, Protocol):
    """EC2 as the flows use it (Karpenter's CloudProvider): launch, find, list, delete, mark
    offerings unavailable, collect unused launch templates; and the drift inputs the drift
    method will compare (``nodeclass_status``, ``drift_inputs``, ``drift_reason``)."""

    def create(self, request: LaunchRequest) -> LaunchResult: ...

    def find_by_nodeclaim(self, nodeclaim_name: str) -> Instance | None: ...

    def list(self) -> builtins.list[Instance]: ...

    def delete(self, instance_id: str) -> bool: ...

    def instance_gone(self, instance_id: str) -> bool: ...

    def delete_by_nodeclaim(self, nodeclaim_name: str) -> builtins.list[str]: ...

    def mark_unavailable(
        self, instance_type: str, zone: str, capacity_type: str, reason: str = ""
    ) -> None: ...

    def cleanup_launch_templates(self) -> builtins.list[str]: ...

    def nodeclass_status(self, nodeclass: Mapping[str, Any]) -> NodeClassResolution: ...

    def drift_inputs(self, nodeclass: Mapping[str, Any]) -> DriftInputs: ...

    def drift_reason(self, instance: Instance, nodeclass: Mapping[str, Any]) -> str | None: ...

    def capacity_reservations_by_id(self, ids: Iterable[str]) -> dict[str, CapacityReservation]:
        """The active capacity reservations among ``ids``, as EC2 has them now."""
        ...


class Lease(Protocol):
    """The writers' lease: one pass (or one replacement) at a time plans against the capacity."""

    def acquire(self) -> bool: ...

    def renew(self) -> None:
        """Extend the hold; raises (``cluster.LeaseLost``) when another writer has taken it."""
        ...

    def release(self) -> None: ...


class Cluster(Protocol):
    """The Kubernetes API as the flows use it; reads answer plain dicts."""

    # reads
    def list_pods(self) -> list[Obj]: ...

    def list_pending_pods(self) -> list[Obj]: ...

    def wait_for_pending_pods(self, timeout_seconds: float, wanted: Callable[[Obj], bool]) -> None:
        """Until a wanted Pending pod arrives after the last ``list_pending_pods``, or the timeout."""
        ...

    def list_pods_on_node(self, node_name: str) -> list[Obj]: ...

    def list_nodes(self) -> list[Obj]: ...

    def list_nodeclaims(self) -> list[Obj]: ...

    def list_nodepools(self) -> list[Obj]: ...

    def list_ec2nodeclasses(self) -> list[Obj]: ...

    def list_daemonsets(self) -> list[Obj]: ...

    def list_pdbs(self) -> list[Obj]: ...

    def list_persistent_volumes(self) -> list[Obj]: ...

    def list_persistent_volume_claims(self) -> list[Obj]: ...

    def list_storage_classes(self) -> list[Obj]: ...

    def list_volume_attachments(self) -> list[Obj]: ...

    def find_node(self, name: str) -> Obj | None: ...

    # nodes
    def patch_node(self, name: str, patch: Obj) -> Obj: ...

    def update_node(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None: ...

    def taint_node(self, name: str, taints: Iterable[Obj], *, cordon: bool = False) -> Obj: ...

    def delete_node(self, name: str) -> Obj | None: ...

    # NodeClaims and NodePools
    def create_nodeclaim(self, body: Obj) -> Obj: ...

    def patch_nodeclaim(self, name: str, patch: Obj) -> Obj: ...

    def patch_nodeclaim_status(self, name: str, status: Obj) -> Obj: ...

    def delete_nodeclaim(self, name: str) -> Obj | None: ...

    def patch_nodepool_status(self, name: str, status: Obj) -> Obj: ...

    def patch_ec2nodeclass_status(self, name: str, status: Obj) -> Obj: ...

    def add_finalizer(self, resource: Resource, name: str, finalizer: str) -> Obj | None: ...

    def remove_finalizer(self, resource: Resource, name: str, finalizer: str) -> Obj | None: ...

    # pods
    def evict(self, pod: Obj) -> EvictionResult: ...

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> Obj | None: ...

    # events and the writers' lease
    def record_event(
        self, involved: Obj, reason: str, message: str, *, event_type: str = "Normal"
    ) -> Obj | None: ...

    def writer_lease(
        self, identity: str, *, duration_seconds: int = ..., wait_seconds: float = ...
    ) -> Lease: ...

    def set_call_deadline(self, deadline: float | None) -> None:
        """Bound every later call to end by ``deadline`` (``time.monotonic()``), or lift the bound."""
        ...


class MarkerStore(Protocol):
    """The state table's small markers a flow keeps between invocations."""

    def get_marker(self, key: str) -> str | None: ...

    def put_marker(self, key: str, value: str, ttl: int | None = None) -> None: ...


__all__ = ["CloudProvider", "CloudView", "Cluster", "Lease", "MarkerStore", "Obj"]
