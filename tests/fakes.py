"""The one fake of each edge, shared by every test: the cluster, the cloud provider, the clock.

``FakeCluster`` and ``FakeCloudProvider`` implement the protocols of ``nodewright.state.interfaces``
(mypy checks them against those in ``make test``) and keep the rules of the real thing that the
flows depend on: a delete of an object with finalizers only marks it, names are unique, a NodeClaim
is adopted by its tag. Tests that need the real API server's behaviour run against the emulator
(``tests/integration/cluster_flows``) with the same ``FakeCloudProvider``.
"""

from __future__ import annotations

import builtins
import copy
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodewright.api import labels
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.provider import DriftInputs, Instance, LaunchRequest, LaunchResult, NodeClassResolution
from nodewright.cloud.reservations import CapacityReservation
from nodewright.cluster.client import EvictionOutcome, EvictionResult
from nodewright.cluster.errors import Conflict
from nodewright.cluster.objects import format_time
from nodewright.cluster.resources import Resource
from nodewright.ratelimit import TokenBucket

if TYPE_CHECKING:
    from nodewright.context import Context
    from nodewright.state.interfaces import CloudProvider, Cluster, Lease

Obj = dict[str, Any]
T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)


@dataclass
class FakeLambdaContext:
    """What Lambda passes a handler as ``context``, its remaining time held still: for handler tests
    whose outcome must not depend on the machine's speed. (The sandbox's invocations use
    ``sandbox.runtime.lambdas.LambdaContext``, which counts down for real, as Lambda's does.)"""

    function_name: str = "nodewright-interruption"
    remaining_ms: int = 60_000
    memory_limit_in_mb: int = 512
    aws_request_id: str = "request-1"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-west-2:111122223333:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


class FakeClock:
    """Time that moves only when the code sleeps (or a test advances it); each sleep runs the
    registered ``ticks`` (controllers a test plays, e.g. a kubelet confirming deletions)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.moment = start or T0
        self.mono = 1000.0
        self.ticks: list[Callable[[], None]] = []
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.moment

    def monotonic(self) -> float:
        return self.mono

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)
        for tick in list(self.ticks):
            tick()

    def advance(self, seconds: float) -> None:
        self.mono += seconds
        self.moment += timedelta(seconds=seconds)


class FakeLease:
    held_elsewhere = False
    lost = False  # renew fails: another writer took the lease over
    renewals = 0

    def acquire(self) -> bool:
        return not self.held_elsewhere

    def renew(self) -> None:
        if self.lost:
            raise RuntimeError("lease taken over by another writer")
        self.renewals += 1

    def release(self) -> None:
        return None


KINDS = (
    "NodeClaim",
    "Node",
    "Pod",
    "NodePool",
    "EC2NodeClass",
    "PodDisruptionBudget",
    "VolumeAttachment",
    "NodeOverlay",
)
# How finely the fake watch lets the clock move while it waits for a pod.
WATCH_STEP_SECONDS = 0.25


class FakeCluster:
    """Objects by kind and name; deletes honour finalizers as the API server does."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.objects: dict[str, dict[str, Obj]] = {kind: {} for kind in KINDS}
        self.events: list[tuple[str, str, str, str]] = []
        self.calls: list[str] = []
        self.evicted: list[str] = []
        self.lease = FakeLease()
        self.lease_identities: list[str] = []
        self.call_deadline: float | None = None
        self.limiter: TokenBucket | None = None  # no request rate limit
        self._uids = itertools.count(1)
        self._pending_listed: set[str] = set()

    def add(self, kind: str, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta.setdefault("creationTimestamp", format_time(self.clock.now()))
        obj["kind"] = kind
        self.objects[kind][meta["name"]] = obj
        return copy.deepcopy(obj)

    def _list(self, kind: str) -> list[Obj]:
        return [copy.deepcopy(o) for o in self.objects[kind].values()]

    # reads
    def list_pods(self) -> list[Obj]:
        return self._list("Pod")

    def list_pending_pods(self) -> list[Obj]:
        pending = self._pending()
        self._pending_listed = {p["metadata"]["uid"] for p in pending}
        return pending

    def _pending(self) -> list[Obj]:
        return [p for p in self._list("Pod") if (p.get("status") or {}).get("phase", "Pending") == "Pending"]

    def wait_for_pending_pods(self, timeout_seconds: float, wanted: Callable[[Obj], bool]) -> None:
        """The watch on the fake clock: time passes in steps of ``WATCH_STEP_SECONDS`` (the clock's
        script may add pods) until a wanted Pending pod the last list did not have appears. A pod
        that changes without being new is not seen (the real watch's MODIFIED events)."""
        waited = 0.0
        while waited < timeout_seconds:
            step = min(WATCH_STEP_SECONDS, timeout_seconds - waited)
            self.clock.sleep(step)
            waited += step
            if any(p["metadata"]["uid"] not in self._pending_listed and wanted(p) for p in self._pending()):
                return

    def list_pods_on_node(self, node_name: str) -> list[Obj]:
        return [p for p in self._list("Pod") if (p.get("spec") or {}).get("nodeName") == node_name]

    def list_nodes(self) -> list[Obj]:
        return self._list("Node")

    def list_nodeclaims(self) -> list[Obj]:
        return self._list("NodeClaim")

    def list_nodepools(self) -> list[Obj]:
        return self._list("NodePool")

    def list_ec2nodeclasses(self) -> list[Obj]:
        return self._list("EC2NodeClass")

    def list_nodeoverlays(self) -> list[Obj]:
        return self._list("NodeOverlay")

    def list_daemonsets(self) -> list[Obj]:
        return []

    def list_pdbs(self) -> list[Obj]:
        return self._list("PodDisruptionBudget")

    def list_persistent_volumes(self) -> list[Obj]:
        return []

    def list_persistent_volume_claims(self) -> list[Obj]:
        return []

    def list_storage_classes(self) -> list[Obj]:
        return []

    def list_volume_attachments(self) -> list[Obj]:
        return self._list("VolumeAttachment")

    def find_node(self, name: str) -> Obj | None:
        found = self.objects["Node"].get(name)
        return copy.deepcopy(found) if found else None

    def find_nodeclaim(self, name: str) -> Obj | None:
        found = self.objects["NodeClaim"].get(name)
        return copy.deepcopy(found) if found else None

    # nodes
    def patch_node(self, name: str, patch: Obj) -> Obj:
        _merge(self.objects["Node"][name], patch)
        return copy.deepcopy(self.objects["Node"][name])

    def update_node(self, name: str, mutate: Callable[[Obj], Obj | None]) -> Obj | None:
        patch = mutate(copy.deepcopy(self.objects["Node"][name]))
        if patch is not None:
            _merge(self.objects["Node"][name], patch)
        return copy.deepcopy(self.objects["Node"][name])

    def taint_node(self, name: str, taints: Iterable[Obj], *, cordon: bool = False) -> Obj:
        node = self.objects["Node"][name]
        spec = node.setdefault("spec", {})
        present = {(t.get("key"), t.get("effect")) for t in spec.get("taints") or []}
        spec["taints"] = [
            *(spec.get("taints") or []),
            *(t for t in taints if (t["key"], t.get("effect")) not in present),
        ]
        if cordon:
            spec["unschedulable"] = True
        return copy.deepcopy(node)

    def delete_node(self, name: str) -> Obj | None:
        return self._delete("Node", name)

    # NodeClaims and NodePools
    def create_nodeclaim(self, body: Obj) -> Obj:
        if body["metadata"]["name"] in self.objects["NodeClaim"]:
            raise Conflict(409, "exists", reason="AlreadyExists")
        self.calls.append(f"create {body['metadata']['name']}")
        return self.add("NodeClaim", body)

    def patch_nodeclaim(self, name: str, patch: Obj) -> Obj:
        self.calls.append(f"patch NodeClaim {name}")
        _merge(self.objects["NodeClaim"][name], patch)
        return copy.deepcopy(self.objects["NodeClaim"][name])

    def patch_nodeclaim_status(self, name: str, status: Obj) -> Obj:
        self.calls.append(f"status {name}")
        _merge(self.objects["NodeClaim"][name], {"status": status})
        return copy.deepcopy(self.objects["NodeClaim"][name])

    def delete_nodeclaim(self, name: str) -> Obj | None:
        return self._delete("NodeClaim", name)

    def patch_nodepool_status(self, name: str, status: Obj) -> Obj:
        self.calls.append(f"patch NodePool {name} status")
        _merge(self.objects["NodePool"][name], {"status": status})
        return copy.deepcopy(self.objects["NodePool"][name])

    def patch_ec2nodeclass_status(self, name: str, status: Obj) -> Obj:
        self.calls.append(f"patch EC2NodeClass {name} status")
        _merge(self.objects["EC2NodeClass"][name], {"status": status})
        return copy.deepcopy(self.objects["EC2NodeClass"][name])

    def patch_nodeoverlay_status(self, name: str, status: Obj) -> Obj:
        self.calls.append(f"patch NodeOverlay {name} status")
        _merge(self.objects["NodeOverlay"][name], {"status": status})
        return copy.deepcopy(self.objects["NodeOverlay"][name])

    def add_finalizer(self, resource: Resource, name: str, finalizer: str) -> Obj | None:
        obj = self.objects[resource.kind].get(name)
        if obj is None:
            return None
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if finalizer not in finalizers:
            finalizers.append(finalizer)
        return copy.deepcopy(obj)

    def remove_finalizer(self, resource: Resource, name: str, finalizer: str) -> Obj | None:
        obj = self.objects[resource.kind].get(name)
        if obj is None:
            return None
        obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers", []) if f != finalizer]
        if not obj["metadata"]["finalizers"] and obj["metadata"].get("deletionTimestamp"):
            del self.objects[resource.kind][name]
        return copy.deepcopy(obj)

    # pods
    def evict(self, pod: Obj) -> EvictionResult:
        name = pod["metadata"]["name"]
        if self._delete("Pod", name) is None and name not in self.objects["Pod"]:
            return EvictionResult(EvictionOutcome.GONE, 404)
        self.evicted.append(name)
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    def delete_pod(self, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> Obj | None:
        return self._delete("Pod", name)

    # events and the lease
    def record_event(
        self, involved: Obj, reason: str, message: str, *, event_type: str = "Normal"
    ) -> Obj | None:
        self.events.append((involved.get("kind", ""), involved["metadata"]["name"], reason, message))
        return None

    def writer_lease(
        self, identity: str, *, duration_seconds: int = 30, wait_seconds: float = 0.0
    ) -> FakeLease:
        self.lease_identities.append(identity)
        return self.lease

    def set_call_deadline(self, deadline: float | None) -> None:
        self.call_deadline = deadline

    def _delete(self, kind: str, name: str) -> Obj | None:
        obj = self.objects[kind].get(name)
        if obj is None:
            return None
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", format_time(self.clock.now()))
        else:
            del self.objects[kind][name]
        return copy.deepcopy(obj)


def _merge(target: Obj, patch: Mapping[str, Any]) -> None:
    """A JSON merge patch (RFC 7386), as the API server applies it."""
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif value is None:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class Offering:
    """The fields of the scheduler's ``Offering`` the flows read."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    zone_id: str = ""


@dataclass
class InstanceType:
    """The fields of the scheduler's ``InstanceType`` the flows read."""

    name: str
    offerings: list[Offering]
    capacity: dict[str, int] = field(default_factory=lambda: {"cpu": 4000, "memory": 16 * 2**30, "pods": 58})
    allocatable: dict[str, int] = field(
        default_factory=lambda: {"cpu": 3920, "memory": 14 * 2**30, "pods": 58}
    )
    labels: dict[str, str] = field(default_factory=lambda: {labels.ARCH: "amd64"})


def instance(
    instance_id: str,
    instance_type: str,
    zone: str,
    capacity_type: str,
    nodeclaim: str,
    *,
    launch_time: datetime,
    image_id: str = "ami-1",
    subnet_id: str = "subnet-1",
) -> Instance:
    """An instance as ``CloudProvider.list`` shows it, tagged with its NodeClaim."""
    return Instance(
        id=instance_id,
        instance_type=instance_type,
        zone=zone,
        capacity_type=capacity_type,
        state="running",
        image_id=image_id,
        subnet_id=subnet_id,
        security_groups=frozenset({"sg-1"}),
        launch_time=launch_time,
        tags={"karpenter.sh/nodeclaim": nodeclaim},
    )


class FakeCloudProvider:
    """EC2 over a dict of instances. An instance id it never launched counts as one EC2 has (a test
    that builds nodes directly), terminated once."""

    def __init__(self, clock: FakeClock, prices: PriceTable | None = None) -> None:
        self.clock = clock
        self.instances: dict[str, Instance] = {}
        self.terminated: list[str] = []
        self.deleted_by_nodeclaim: list[str] = []
        self.unavailable: list[tuple[str, str, str, str]] = []
        self.requests: list[LaunchRequest] = []
        self.fail_with: Exception | None = None
        self.gone: set[str] = set()  # instances terminated out of band (EC2 no longer has them)
        self.images: set[str] = {"ami-1"}  # what the EC2NodeClass selects now
        self.reservations: dict[str, CapacityReservation] = {}  # capacity reservations EC2 holds
        self.nodeclass_problems: dict[str, tuple[str, str]] = {}  # condition type → (reason, message)
        self.unused_templates: list[str] = []
        self.template_cleanups = 0
        self._ids = itertools.count(1)
        self._prices = prices
        self.types = [
            InstanceType("m5.large", [Offering("us-west-2a", "on-demand", 0.096)]),
            InstanceType("m5.xlarge", [Offering("us-west-2a", "on-demand", 0.192)]),
        ]

    @property
    def creates(self) -> int:
        return len(self.requests)

    def instance_types(self, nodeclass: Mapping[str, Any]) -> list[Any]:
        return list(self.types)

    def node_price(self, nodeclass: Mapping[str, Any]) -> float:
        return 0.0  # instance prices only: the flows' tests pin launches, not the EBS share

    def prices(self) -> PriceTable:
        """The price table given, else what the fake's offerings say."""
        if self._prices is not None:
            return self._prices
        on_demand = {
            t.name: o.price for t in self.types for o in t.offerings if o.capacity_type == "on-demand"
        }
        spot = {
            (t.name, o.zone): o.price for t in self.types for o in t.offerings if o.capacity_type == "spot"
        }
        return PriceTable(on_demand=on_demand, spot=spot)

    def create(self, request: LaunchRequest) -> LaunchResult:
        self.requests.append(request)
        if self.fail_with:
            raise self.fail_with
        chosen = request.instance_types[0]
        offering = chosen.offerings[0]
        launched = instance(
            f"i-{next(self._ids):017x}",
            chosen.name,
            offering.zone,
            offering.capacity_type,
            request.nodeclaim_name,
            launch_time=self.clock.now(),
        )
        self.instances[launched.id] = launched
        return replace(LaunchResult.from_instance(launched), price=offering.price)

    def find_by_nodeclaim(self, nodeclaim_name: str) -> Instance | None:
        return next((i for i in self.instances.values() if i.nodeclaim == nodeclaim_name), None)

    def list(self) -> builtins.list[Instance]:
        return list(self.instances.values())

    def delete(self, instance_id: str) -> bool:
        if instance_id in self.terminated:
            return False
        self.instances.pop(instance_id, None)
        self.terminated.append(instance_id)
        return True

    def instance_gone(self, instance_id: str) -> bool:
        return instance_id in self.gone or instance_id in self.terminated

    def delete_by_nodeclaim(self, nodeclaim_name: str) -> builtins.list[str]:
        self.deleted_by_nodeclaim.append(nodeclaim_name)
        return [
            i.id for i in list(self.instances.values()) if i.nodeclaim == nodeclaim_name and self.delete(i.id)
        ]

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str = "") -> None:
        self.unavailable.append((instance_type, zone, capacity_type, reason))

    def cleanup_launch_templates(self, live: Iterable[Instance]) -> builtins.list[str]:
        assert [i.id for i in live] == list(self.instances), "the pass's one listing of the instances"
        self.template_cleanups += 1
        deleted, self.unused_templates = self.unused_templates, []
        return deleted

    def nodeclass_status(self, nodeclass: Mapping[str, Any]) -> NodeClassResolution:
        """Everything resolves; ``nodeclass_problems[type] = (reason, message)`` fails a part."""
        resolution = NodeClassResolution(
            status={
                "subnets": [{"id": "subnet-1", "zone": "us-west-2a", "zoneID": "usw2-az1"}],
                "securityGroups": [{"id": "sg-1"}],
                "amis": [{"id": i, "requirements": []} for i in sorted(self.images)],
                "instanceProfile": "profile",
            }
        )
        for kind in ("SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady"):
            if kind in self.nodeclass_problems:
                resolution.fail(kind, *self.nodeclass_problems[kind])
            else:
                resolution.succeed(kind)
        return resolution

    def drift_inputs(self, nodeclass: Mapping[str, Any]) -> DriftInputs:
        return DriftInputs(frozenset(self.images), frozenset({"subnet-1"}), frozenset({"sg-1"}))

    def drift_reason(self, instance: Instance, nodeclass: Mapping[str, Any]) -> str | None:
        """AMI drift only: the AMIs the NodeClass selects are ``images`` (a test changes them)."""
        return None if instance.image_id in self.drift_inputs(nodeclass).image_ids else "AMIDrift"

    def capacity_reservations_by_id(self, ids: Iterable[str]) -> dict[str, CapacityReservation]:
        """The ``reservations`` (a test fills them) among ``ids``."""
        return {i: self.reservations[i] for i in ids if i in self.reservations}


class RecordingMetrics:
    def __init__(self) -> None:
        self.values: list[tuple[str, float]] = []
        self.namespace = "Test"

    def add_metric(self, name: str, unit: Any, value: float) -> None:
        self.values.append((name, value))


class RecordingLogger:
    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def info(self, msg: str, **_: Any) -> None:
        self.records.append(("info", msg))

    def warning(self, msg: str, **_: Any) -> None:
        self.records.append(("warning", msg))

    def exception(self, msg: str, **_: Any) -> None:
        self.records.append(("exception", msg))


if TYPE_CHECKING:  # mypy (make test) holds the fakes to the protocols the flows use

    def _conforms(clock: FakeClock) -> tuple[Cluster, CloudProvider, Lease]:
        return FakeCluster(clock), FakeCloudProvider(clock), FakeLease()


def fake_context(cluster: FakeCluster, cloud: FakeCloudProvider, clock: FakeClock) -> Context:
    """A flow's context on the shared fakes: cluster ``test`` in us-west-2, no state store."""
    from nodewright.context import Context
    from nodewright.settings import Settings

    return Context(
        Settings(cluster_name="test", region="us-west-2"),
        cluster,
        cloud,
        None,
        RecordingLogger(),
        RecordingMetrics(),
        clock=clock,
    )
