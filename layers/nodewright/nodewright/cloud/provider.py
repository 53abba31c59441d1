"""The EC2 cloud provider: everything the flows ask of EC2, behind one small interface.

In the spirit of Karpenter's CloudProvider: ``instance_types(nodeclass)``, ``create(request)``,
``delete(instance_id)``, ``get``, ``list``, and drift inputs. One ``create`` is one NodeClaim:
a CreateFleet call of type ``instant`` for one instance whose overrides are the cheapest
candidate types times one subnet per allowed zone. Capacity errors mark the offering unavailable
in the shared state store and the launch goes on with the offerings that remain.
"""

from __future__ import annotations

import builtins
import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

from nodewright.api import labels as wk
from nodewright.cloud import aws
from nodewright.cloud.amis import AmiResolver, Image
from nodewright.cloud.cache import TTLCache, is_fresh
from nodewright.cloud.catalog import ON_DEMAND, RESERVED, SPOT, Catalog, RawOffering, node_shape, reserved_key
from nodewright.cloud.eks import cluster_info
from nodewright.cloud.errors import (
    CloudError,
    FleetError,
    InstanceNotFoundError,
    InsufficientCapacityError,
    InvalidNodeClassError,
    LaunchError,
    PlacementGroupError,
    SelectorNoMatchError,
)
from nodewright.cloud.launchtemplates import LaunchTemplates, TemplateSpec, used_by
from nodewright.cloud.network import NetworkResolver, Subnet
from nodewright.cloud.nodeclass import NodeClass
from nodewright.cloud.pricetable import PriceTable
from nodewright.cloud.reservations import (
    CAPACITY_BLOCK,
    INTERRUPTIBLE_RESERVATION,
    RESERVED_CAPACITY,
    CapacityReservation,
    ReservationResolver,
    reservation_kind,
)
from nodewright.cloud.state import UNAVAILABLE_TTL_SECONDS, state_store
from nodewright.cloud.userdata import NodeBootstrap, kubelet_may_set, render
from nodewright.observability import logger, metrics
from nodewright.settings import Settings

if TYPE_CHECKING:
    from nodewright.scheduling import InstanceType
    from nodewright.state.interfaces import StateStore

MAX_LAUNCH_ATTEMPTS = 6  # CreateFleet calls per NodeClaim before giving up (each marks what failed)
LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")

UNREGISTERED_TAINT = {"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}

TAG_NODEPOOL = "karpenter.sh/nodepool"
TAG_NODECLAIM = "karpenter.sh/nodeclaim"
TAG_NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
TAG_NODECLASS_HASH = "karpenter.k8s.aws/ec2nodeclass-hash"
TAG_CLUSTER_NAME = "eks:eks-cluster-name"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"


@dataclass(frozen=True)
class LaunchRequest:
    """One NodeClaim to launch.

    ``instance_types`` are the scheduler's candidates, cheapest first: InstanceType models
    (with ``name`` and ``offerings``) or plain type names (offerings then come from the
    catalog). ``zones``/``capacity_types`` are what the NodeClaim's requirements allow.
    """

    nodeclaim_name: str
    nodeclaim_uid: str
    nodepool_name: str
    nodeclass: Mapping[str, Any]
    instance_types: Sequence[InstanceType]
    zones: frozenset[str] | None = None
    capacity_types: frozenset[str] = frozenset({ON_DEMAND})
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    startup_taints: Sequence[Mapping[str, Any]] = ()
    kubelet: Mapping[str, Any] | None = None
    # The capacity reservations a ``reserved`` launch may target (``karpenter.k8s.aws/capacity-
    # reservation-id In [...]``: the ones the plan holds a slot in); None: any the candidates offer.
    reservation_ids: frozenset[str] | None = None
    # A NodeOverlay priced the candidates (the NodeClaim's karpenter.sh/price-overlay-applied): EC2
    # must launch in the order of those prices (prioritized), not its own list prices (lowest-price).
    prioritized: bool = False
    # Created by this very pass: no instance can carry its fresh name yet, so ``create`` skips the
    # DescribeInstances that finds a retried NodeClaim's instance (a round trip before CreateFleet).
    fresh: bool = False


@dataclass(frozen=True)
class LaunchResult:
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    provider_id: str
    image_id: str
    subnet_id: str = ""
    launch_template: str = ""
    price: float | None = None
    reservation_id: str = ""
    reservation_type: str = ""
    interruptible: bool = False

    @classmethod
    def from_instance(cls, instance: Instance) -> LaunchResult:
        """An instance found by its NodeClaim tag (a retried launch), shaped like a launch's result."""
        return cls(
            instance_id=instance.id,
            instance_type=instance.instance_type,
            zone=instance.zone,
            capacity_type=instance.capacity_type,
            provider_id=instance.provider_id,
            image_id=instance.image_id,
            subnet_id=instance.subnet_id,
            reservation_id=instance.capacity_reservation_id or "",
        )


@dataclass(frozen=True)
class Instance:
    """An instance of this cluster as DescribeInstances shows it (also the drift inputs)."""

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    image_id: str
    subnet_id: str
    security_groups: frozenset[str]
    launch_time: datetime | None
    tags: Mapping[str, str]
    capacity_reservation_id: str | None = None
    # Launched targeting its reservation (its launch template's CapacityReservationTarget), not an
    # on-demand instance EC2 counted against an open reservation it happened to match.
    reservation_targeted: bool = False

    @property
    def provider_id(self) -> str:
        return f"aws:///{self.zone}/{self.id}"

    @property
    def nodeclaim(self) -> str | None:
        return self.tags.get(TAG_NODECLAIM)

    @property
    def nodepool(self) -> str | None:
        return self.tags.get(TAG_NODEPOOL)

    @property
    def nodeclass(self) -> str | None:
        return self.tags.get(TAG_NODECLASS)

    @property
    def nodeclass_hash(self) -> str | None:
        return self.tags.get(TAG_NODECLASS_HASH)


@dataclass
class NodeClassResolution:
    """``CloudProvider.nodeclass_status``'s answer: the v1 ``status`` fields that resolved, and one
    (condition type, ok, reason, message) per part, in Karpenter's words (True: reason = type)."""

    status: dict[str, Any] = field(default_factory=dict)
    conditions: list[tuple[str, bool, str, str]] = field(default_factory=list)

    def succeed(self, kind: str) -> None:
        self.conditions.append((kind, True, kind, ""))

    def fail(self, kind: str, reason: str, message: str) -> None:
        self.conditions.append((kind, False, reason, message))


@dataclass(frozen=True)
class DriftInputs:
    """What a launch for the NodeClass would use now; an instance that differs has drifted."""

    image_ids: frozenset[str]
    subnet_ids: frozenset[str]
    security_groups: frozenset[str]


@dataclass(frozen=True)
class _Launch:
    """What one NodeClaim's launch resolved before its CreateFleet attempts."""

    request: LaunchRequest
    nodeclass: NodeClass
    subnets: Mapping[str, Subnet]
    security_groups: tuple[str, ...]
    images: tuple[Image, ...]
    instance_profile: str
    placement_group: str | None = None  # the id placementGroupSelector resolved to


@dataclass(frozen=True)
class FleetRequest:
    """One CreateFleet call, built and not yet sent: its parameters, and what reading the answer
    needs (the AMI behind each launch template, the price of each (type, zone), subnet zones)."""

    params: dict[str, Any]
    capacity_type: str
    image_by_template: Mapping[str, Image]
    prices: Mapping[tuple[str, str], float]
    zone_of_subnet: Mapping[str, str]
    # For a ``reserved`` fleet: the reserved offering behind each launch template.
    reservation_by_template: Mapping[str, RawOffering] = field(default_factory=dict)


@dataclass(frozen=True)
class FleetOutcome:
    """What one CreateFleet answered: the instance launched (if any) and the offerings refused."""

    launched: LaunchResult | None
    errors: tuple[FleetError, ...]


def parse_fleet_response(response: Mapping[str, Any], fleet: FleetRequest) -> FleetOutcome:
    """Read an instant fleet's answer (pure). ``launched`` has an empty zone or image id when the
    answer does not say them; the caller describes the instance for those."""
    errors = []
    for error in response.get("Errors", []):
        spec = error.get("LaunchTemplateAndOverrides") or {}
        override = spec.get("Overrides") or {}
        zone = override.get("AvailabilityZone") or fleet.zone_of_subnet.get(override.get("SubnetId", ""), "")
        capacity_type = error.get("Lifecycle") or fleet.capacity_type
        reserved = fleet.reservation_by_template.get(_template_name(spec))
        if reserved is not None:  # the reservation refused: that reservation is the offering
            capacity_type = reserved_key(reserved.reservation_id)
        errors.append(
            FleetError(
                code=error.get("ErrorCode", "Unknown"),
                instance_type=override.get("InstanceType", ""),
                zone=zone,
                capacity_type=capacity_type,
                message=error.get("ErrorMessage", ""),
            )
        )
    for launched in response.get("Instances", []):
        ids = launched.get("InstanceIds") or []
        if not ids:
            continue
        spec = launched.get("LaunchTemplateAndOverrides") or {}
        override = spec.get("Overrides") or {}
        template = _template_name(spec)
        subnet_id = override.get("SubnetId", "")
        zone = override.get("AvailabilityZone") or fleet.zone_of_subnet.get(subnet_id, "")
        instance_type = launched.get("InstanceType") or override.get("InstanceType", "")
        image = fleet.image_by_template.get(template)
        lifecycle = launched.get("Lifecycle") or fleet.capacity_type
        reserved = fleet.reservation_by_template.get(template)
        result = LaunchResult(
            instance_id=ids[0],
            instance_type=instance_type,
            zone=zone,
            capacity_type=RESERVED if reserved else SPOT if lifecycle == SPOT else ON_DEMAND,
            provider_id=f"aws:///{zone}/{ids[0]}",
            image_id=image.id if image else "",
            subnet_id=subnet_id,
            launch_template=template,
            price=reserved.price if reserved else fleet.prices.get((instance_type, zone)),
            reservation_id=reserved.reservation_id if reserved else "",
            reservation_type=reserved.reservation_type if reserved else "",
            interruptible=reserved.interruptible if reserved else False,
        )
        return FleetOutcome(result, tuple(errors))
    return FleetOutcome(None, tuple(errors))


def _template_name(spec: Mapping[str, Any]) -> str:
    return str((spec.get("LaunchTemplateSpecification") or {}).get("LaunchTemplateName", ""))


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """(zone, instance id) from ``aws:///<zone>/<instance id>``."""
    parts = provider_id.removeprefix("aws://").strip("/").split("/")
    if len(parts) != 2 or not parts[1].startswith("i-"):
        raise ValueError(f"not an EC2 providerID: {provider_id!r} (expected aws:///<zone>/i-...)")
    return parts[0], parts[1]


def _instance(raw: Mapping[str, Any]) -> Instance:
    target = (raw.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    reservation = raw.get("CapacityReservationId") or None
    return Instance(
        id=raw["InstanceId"],
        instance_type=raw.get("InstanceType", ""),
        zone=(raw.get("Placement") or {}).get("AvailabilityZone", ""),
        # As Karpenter's instance provider: an instance in a capacity reservation is ``reserved``; one
        # whose reservation ended runs on as on-demand (``nodewright.capacityreservation`` relabels it).
        capacity_type=SPOT
        if raw.get("InstanceLifecycle") == "spot"
        else RESERVED
        if reservation
        else ON_DEMAND,
        state=(raw.get("State") or {}).get("Name", ""),
        image_id=raw.get("ImageId", ""),
        subnet_id=raw.get("SubnetId", ""),
        security_groups=frozenset(g["GroupId"] for g in raw.get("SecurityGroups", [])),
        launch_time=raw.get("LaunchTime"),
        tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
        capacity_reservation_id=reservation,
        reservation_targeted=bool(target.get("CapacityReservationId")),
    )


def _one_reservation_type(
    entries: Sequence[tuple[float, int, str, list[RawOffering]]],
) -> list[tuple[float, int, str, list[RawOffering]]]:
    """The reserved candidates narrowed to one kind of reservation: CreateFleet's
    ``DefaultTargetCapacityType`` is ``on-demand`` for On-Demand Capacity Reservations,
    ``capacity-block`` for Capacity Blocks and ``reserved-capacity`` for interruptible ones, one per
    fleet. The kind of the cheapest offering wins (``scheduling.reservations.kind_order`` breaks a tie,
    as the plan did)."""
    from nodewright.scheduling.reservations import kind_order

    offerings = [o for entry in entries for o in entry[3]]
    if not offerings:
        return []
    chosen = reservation_kind(min(offerings, key=lambda o: (o.price, *kind_order(o))))
    narrowed = []
    for _price, order, name, usable in entries:
        kept = [o for o in usable if reservation_kind(o) == chosen]
        if kept:
            narrowed.append((min(o.price for o in kept), order, name, kept))
    return narrowed


def _allocation(
    capacity_type: str, prioritized: bool, reservations: Mapping[str, RawOffering]
) -> dict[str, Any]:
    """CreateFleet's allocation options, as Karpenter's fleet builder sets them: spot
    ``price-capacity-optimized``, on-demand (and an On-Demand Capacity Reservation) ``lowest-price``;
    with a NodeOverlay's prices (``prioritized``) ``capacity-optimized-prioritized`` and ``prioritized``,
    so EC2 follows the overrides' Priority, not its own prices. A Capacity Block takes neither; an
    interruptible Capacity Reservation its ``ReservedCapacityOptions``."""
    if capacity_type == SPOT:
        strategy = "capacity-optimized-prioritized" if prioritized else "price-capacity-optimized"
        return {"SpotOptions": {"AllocationStrategy": strategy}}
    if any(o.interruptible for o in reservations.values()):
        # EC2 Fleet launches into interruptible Capacity Reservations only as reserved capacity.
        return {"ReservedCapacityOptions": {"ReservationTypes": [INTERRUPTIBLE_RESERVATION]}}
    if any(o.reservation_type == CAPACITY_BLOCK for o in reservations.values()):
        return {}
    return {"OnDemandOptions": {"AllocationStrategy": "prioritized" if prioritized else "lowest-price"}}


def _fleet_capacity_type(capacity_type: str, reservations: Mapping[str, RawOffering]) -> str:
    """CreateFleet's ``DefaultTargetCapacityType``: a reserved launch is ``on-demand`` into an On-Demand
    Capacity Reservation (its templates target it), ``capacity-block`` into a Capacity Block,
    ``reserved-capacity`` into an interruptible Capacity Reservation."""
    if capacity_type != RESERVED:
        return capacity_type
    if any(o.interruptible for o in reservations.values()):
        return RESERVED_CAPACITY
    blocks = any(o.reservation_type == CAPACITY_BLOCK for o in reservations.values())
    return "capacity-block" if blocks else ON_DEMAND


def tenancy(request: LaunchRequest) -> str:
    """``dedicated`` when the NodeClaim is labelled so (it allows only Dedicated Instances), else
    ``default``: Karpenter launches default tenancy when both are allowed."""
    value = request.labels.get(wk.INSTANCE_TENANCY)
    return wk.TENANCY_DEDICATED if value == wk.TENANCY_DEDICATED else wk.TENANCY_DEFAULT


def supports_nested_virtualization(info: Mapping[str, Any] | None) -> bool:
    """DescribeInstanceTypes' ``ProcessorInfo.SupportedFeatures`` names ``nested-virtualization``."""
    features = ((info or {}).get("ProcessorInfo") or {}).get("SupportedFeatures") or []
    return "nested-virtualization" in features


def _type_name(candidate: Any) -> str:
    return candidate if isinstance(candidate, str) else str(candidate.name)


def _model_offerings(candidate: Any) -> list[RawOffering] | None:
    offerings = None if isinstance(candidate, str) else getattr(candidate, "offerings", None)
    if offerings is None:
        return None
    return [
        RawOffering(
            o.zone,
            o.capacity_type,
            float(o.price),
            bool(o.available),
            reservation_id=getattr(o, "reservation_id", ""),
            reservation_type=getattr(o, "reservation_type", ""),
            interruptible=bool(getattr(o, "interruptible", False)),
            reservation_capacity=int(getattr(o, "reservation_capacity", 0)),
        )
        for o in offerings
    ]


def _image_for(info: Mapping[str, Any] | None, images: Sequence[Image]) -> Image | None:
    """The AMI for a type: its architecture, the GPU variant for NVIDIA types when there is one."""
    if not info:
        return None
    arches = {"x86_64": "amd64", "arm64": "arm64"}
    processor = info.get("ProcessorInfo") or {}
    supported = [arches[a] for a in processor.get("SupportedArchitectures", []) if a in arches]
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    gpu = any((g.get("Manufacturer") or "").upper() == "NVIDIA" for g in gpus)
    for arch in supported:
        matching = [i for i in images if i.arch == arch]
        exact = [i for i in matching if i.gpu == gpu]
        if exact or matching:
            return (exact or matching)[0]
    return None


# The longest one list of InstanceTypes serves the passes of a container when its EC2NodeClass
# selects capacity reservations (``instance_types``: a Capacity Block's ``expiring`` state follows the
# clock); without any, nothing they are made of changes with time alone.
INSTANCE_TYPES_CACHE_SECONDS = 60.0
# How old a read of the unavailable offerings may be (``unavailable_offerings``): a pass plans and
# launches within it, and a mark another function makes is seen at most this much later.
UNAVAILABLE_READ_SECONDS = 1.0


@dataclass(frozen=True)
class _InstanceTypes:
    """One EC2NodeClass's InstanceTypes and what they were built from (``instance_types``)."""

    inputs: tuple[Any, ...]
    catalog: Any
    prices: PriceTable
    built_at: float
    types: tuple[Any, ...]


class CloudProvider:
    """EC2 for one cluster. Keep one per warm container (``CloudProvider.shared``) to reuse caches."""

    _shared: dict[tuple[str, str, str | None, str | None, str | None], CloudProvider] = {}
    _shared_lock = threading.Lock()

    def __init__(self, settings: Settings, store: StateStore | None = None) -> None:
        self.settings = settings
        self.cluster_name = settings.cluster_name
        self.store = store if store is not None else state_store(settings)
        self.ec2 = aws.client("ec2", settings)
        self.catalog = Catalog(self.ec2, self.store, (settings.region, settings.aws_endpoint_url))
        self.network = NetworkResolver(self.ec2)
        self.amis = AmiResolver(self.ec2, aws.client("ssm", settings), lambda: cluster_info(settings))
        self.reservations = ReservationResolver(self.ec2, (settings.region, settings.aws_endpoint_url))
        iam = aws.client("iam", settings)
        self.templates = LaunchTemplates(self.ec2, iam, settings.cluster_name, settings.region)
        self._types: dict[str, _InstanceTypes] = {}  # by EC2NodeClass name
        self._types_lock = threading.Lock()
        self._unavailable: TTLCache[frozenset[tuple[str, str, str]]] = TTLCache(UNAVAILABLE_READ_SECONDS)
        self._marked: dict[tuple[str, str, str], float] = {}  # marked here → until (epoch seconds)
        self._marked_lock = threading.Lock()

    @classmethod
    def shared(cls, settings: Settings) -> CloudProvider:
        key = (
            settings.cluster_name,
            settings.region,
            settings.aws_endpoint_url,
            settings.state_table,
            aws.identity(settings),  # its clients sign as this identity
        )
        with cls._shared_lock:
            if key not in cls._shared:
                cls._shared[key] = cls(settings)
            return cls._shared[key]

    # -- catalog -------------------------------------------------------------------------------
    def instance_types(self, nodeclass: Any) -> list[Any]:
        """The scheduler's InstanceTypes for the NodeClass: zones its subnets cover, arches its AMIs cover.

        Built again only when what they are made of changed (as Karpenter's instance type provider
        keys its cache on the EC2NodeClass, the unavailable offerings and the prices): the EC2NodeClass's
        spec, its subnets' zones, AMIs and reservations, the unavailable offerings, the catalog this container
        holds and the prices in its price table (compared by value: the table is read again every
        minute, and the same prices must not cost a rebuild), and, when it selects reservations, at
        most ``INSTANCE_TYPES_CACHE_SECONDS`` old (a Capacity Block's ``expiring`` state follows the
        clock). Building them for every type in the catalog is most of a warm pass's planning time
        (0.12-0.5 CPU seconds, about 0.4-1.7 s of a 512 MB function's 0.29 vCPU), paid by the first pass
        of a burst after a quiet minute when the list expired with the clock; the InstanceTypes are
        never changed by their users (NodeOverlays make changed copies), so one list serves every pass
        until then."""
        nc = NodeClass(nodeclass)
        subnets = self.network.subnets(nc.name, nc.subnet_selector_terms)
        images = self.amis.images(nc)
        reservations = self.capacity_reservations(nc)
        unavailable = frozenset(self.unavailable_offerings())
        data, prices = self.catalog.data(), self.catalog.prices()
        inputs = (
            json.dumps(nc.spec, sort_keys=True, default=str),
            # The zones the subnets cover, not the subnets: a subnet's free addresses change with
            # every launch and every pod's IP, and keyed on them the list was built again on nearly
            # every pass (Karpenter's key hashes the subnets' zones too).
            tuple(sorted({(s.zone, s.zone_id) for s in subnets})),
            tuple(images),
            tuple(reservations),
            unavailable,
        )
        now = time.time()
        with self._types_lock:
            cached = self._types.get(nc.name)
        if (
            cached is not None
            and cached.inputs == inputs
            and cached.catalog is data
            and cached.prices == prices
            and (not reservations or is_fresh(cached.built_at, now, INSTANCE_TYPES_CACHE_SECONDS))
        ):
            return list(cached.types)
        zone_ids = {s.zone: s.zone_id for s in subnets if s.zone_id}
        types = [
            instance_type
            for instance_type in self.catalog.instance_types(
                zones={s.zone for s in subnets},
                kubelet=nc.kubelet or None,
                zone_ids=zone_ids,
                reservations=reservations,
                shape=node_shape(nc.raw),
                unavailable=unavailable,
            )
            if _image_for(self.catalog.info(instance_type.name), images) is not None  # an AMI for its arch
            # cpuOptions.nestedVirtualization enabled: only the types EC2 says support it (as Karpenter).
            and (
                nc.nested_virtualization != "enabled"
                or supports_nested_virtualization(self.catalog.info(instance_type.name))
            )
        ]
        with self._types_lock:
            self._types[nc.name] = _InstanceTypes(inputs, data, prices, now, tuple(types))
        return types

    def capacity_reservations(self, nodeclass: Any) -> builtins.list[CapacityReservation]:
        """The active capacity reservations the EC2NodeClass selects (``cloud.reservations``). A
        DescribeCapacityReservations that fails (a denied call, a throttle past the retries) loses
        only the reserved offerings of this pass, logged and counted, never the launch itself."""
        nc = nodeclass if isinstance(nodeclass, NodeClass) else NodeClass(nodeclass)
        terms = nc.capacity_reservation_selector_terms
        if not terms:
            return []
        try:
            return self.reservations.select(terms)
        except ClientError as exc:
            logger().warning(
                "capacity reservations not read; no reserved offerings this pass",
                nodeclass=nc.name,
                error=str(exc),
            )
            self._count("CapacityReservationsUnread")
            return []

    def prices(self) -> PriceTable:
        """The shared price table (the state store's, cached a minute per container)."""
        return self.catalog.prices()

    def node_price(self, nodeclass: Any) -> float:
        """$/h every node of the NodeClass pays beyond its instance: its EBS volumes (``cloud.ebs``)."""
        from nodewright.cloud.ebs import node_storage

        return node_storage(nodeclass, self.settings.region).per_hour

    def nodeclass_status(self, nodeclass: Any) -> NodeClassResolution:
        """What the EC2NodeClass resolves to now, part by part, as Karpenter's EC2NodeClass status
        controllers find it: the v1 ``status`` fields of the parts that resolve (subnets most free IPs
        first, security groups with names, AMIs with their requirements, the instance profile, made
        for ``role`` when needed) and, per part, its condition (``SubnetsReady``, ``SecurityGroupsReady``,
        ``AMIsReady``, ``InstanceProfileReady``, ``PlacementGroupReady`` when a group is selected) with
        Karpenter's reasons. A part that fails never hides the others."""
        nc = NodeClass(nodeclass)
        resolution = NodeClassResolution()
        try:
            subnets = sorted(
                self.network.subnets(nc.name, nc.subnet_selector_terms),
                key=lambda s: (-s.available_ips, s.id),
            )
        except SelectorNoMatchError:
            resolution.fail("SubnetsReady", "SubnetsNotFound", "SubnetSelector did not match any Subnets")
        else:
            resolution.status["subnets"] = [
                {"id": s.id, "zone": s.zone, **({"zoneID": s.zone_id} if s.zone_id else {})} for s in subnets
            ]
            resolution.succeed("SubnetsReady")
        try:
            groups = self.network.security_group_names(nc.name, nc.security_group_selector_terms)
        except SelectorNoMatchError:
            resolution.fail(
                "SecurityGroupsReady",
                "SecurityGroupsNotFound",
                "SecurityGroupSelector did not match any SecurityGroups",
            )
        else:
            resolution.status["securityGroups"] = [{"id": i, **({"name": n} if n else {})} for i, n in groups]
            resolution.succeed("SecurityGroupsReady")
        try:
            images = self.amis.images(nc)
        except (SelectorNoMatchError, InvalidNodeClassError):
            resolution.fail("AMIsReady", "AMINotFound", "AMISelector did not match any AMIs")
        except ClientError as exc:  # e.g. an SSM parameter the functions may not read
            error = exc.response.get("Error") or {}
            resolution.fail(
                "AMIsReady", str(error.get("Code") or "AMIResolutionFailed"), str(error.get("Message"))
            )
        else:
            amis = []
            for image in images:
                requirements = [{"key": wk.ARCH, "operator": "In", "values": [image.arch]}]
                if image.gpu:
                    requirements.append({"key": wk.INSTANCE_GPU_COUNT, "operator": "Exists"})
                if image.windows_build:  # Karpenter's known requirements of a Windows alias's AMI
                    requirements.append({"key": wk.OS, "operator": "In", "values": ["windows"]})
                    requirements.append(
                        {"key": wk.WINDOWS_BUILD, "operator": "In", "values": [image.windows_build]}
                    )
                amis.append(
                    {
                        "id": image.id,
                        **({"name": image.name} if image.name else {}),
                        "requirements": requirements,
                    }
                )
            resolution.status["amis"] = amis
            resolution.succeed("AMIsReady")
        try:
            resolution.status["instanceProfile"] = self.templates.instance_profile(nc)
        except CloudError as exc:
            resolution.fail("InstanceProfileReady", "InstanceProfileCreationFailed", str(exc))
        else:
            resolution.succeed("InstanceProfileReady")
        self._reservations_status(nc, resolution)
        if nc.placement_group_selector:
            try:
                self._placement_group_id(nc)
            except PlacementGroupError as exc:
                reason = (
                    "PlacementGroupNotFound" if exc.reason == "not found" else "PlacementGroupNotAvailable"
                )
                resolution.fail("PlacementGroupReady", reason, str(exc))
            else:
                resolution.succeed("PlacementGroupReady")
        return resolution

    def _reservations_status(self, nc: NodeClass, resolution: NodeClassResolution) -> None:
        """``status.capacityReservations`` (Karpenter's nodeclass capacity-reservation controller: the
        active reservations the terms select, by id, each with its state, ``expiring`` for a Capacity
        Block within 40 minutes of its end) and ``CapacityReservationsReady``. Without terms the list
        is cleared; a failed DescribeCapacityReservations keeps the list as it was."""
        terms = nc.capacity_reservation_selector_terms
        if not terms:
            resolution.succeed("CapacityReservationsReady")
            return
        try:
            found = self.reservations.select(terms)
        except ClientError as exc:
            error = exc.response.get("Error") or {}
            resolution.fail(
                "CapacityReservationsReady",
                str(error.get("Code") or "CapacityReservationsUnresolved"),
                str(error.get("Message") or exc),
            )
            return
        now = datetime.now(UTC)
        resolution.status["capacityReservations"] = [r.status(now) for r in found]
        resolution.succeed("CapacityReservationsReady")

    def _placement_group_id(self, nc: NodeClass) -> str | None:
        """The id of the placement group the EC2NodeClass selects (raises ``PlacementGroupError``)."""
        selector = nc.placement_group_selector
        return self.network.placement_group(nc.name, selector).id if selector else None

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str = "") -> None:
        """Keep (type, zone, capacity type) out of plans for 3 minutes (ICE, spot interruption)."""
        self.store.mark_unavailable(instance_type, zone, capacity_type, reason=reason)
        with self._marked_lock:  # this container's own launches see it at once (unavailable_offerings)
            self._marked[(instance_type, zone, capacity_type)] = time.time() + UNAVAILABLE_TTL_SECONDS

    def unavailable_offerings(self) -> set[tuple[str, str, str]]:
        """The offerings marked unavailable: the state store's, read at most ``UNAVAILABLE_READ_SECONDS``
        ago (one read for a pass's plan and all its launches, not a query each), and those this
        container marked since, at once."""
        read = self._unavailable.get_or_load("all", lambda: frozenset(self.store.unavailable_offerings()))
        now = time.time()
        with self._marked_lock:
            mine = {key for key, until in self._marked.items() if until > now}
        return set(read) | mine

    # -- launch --------------------------------------------------------------------------------
    def create(self, request: LaunchRequest) -> LaunchResult:
        """Launch one instance for the NodeClaim; typed errors say why not.

        Raises NoSubnetError/SelectorNoMatchError (nodeclass selectors), InvalidNodeClassError,
        InsufficientCapacityError (every offering failed or is marked) or LaunchError.
        """
        existing = None if request.fresh else self.find_by_nodeclaim(request.nodeclaim_name)
        if existing is not None:  # a retried invocation: never launch a NodeClaim twice
            return LaunchResult.from_instance(existing)
        nc = NodeClass(request.nodeclass)
        # An IP of each subnet it may use is held while it launches (``NetworkResolver``): the one
        # its instance took stays counted, the others are given back whatever happens.
        subnets = self.network.reserve_subnets(nc.name, nc.subnet_selector_terms, request.zones)
        used: str | None = None
        try:
            groups = self.network.security_groups(nc.name, nc.security_group_selector_terms)
            launch = _Launch(
                request=request,
                nodeclass=nc,
                subnets=subnets,
                security_groups=tuple(groups),
                images=tuple(self.amis.images(nc)),
                instance_profile=self.templates.instance_profile(nc),
                placement_group=self._placement_group_id(nc),
            )
            allowed_types = set(request.capacity_types) & {RESERVED, SPOT, ON_DEMAND}
            if not allowed_types:
                raise InvalidNodeClassError(
                    f"NodeClaim {request.nodeclaim_name!r}: capacity types {sorted(request.capacity_types)} "
                    "include none of reserved, spot and on-demand"
                )
            result = self._launch(launch, allowed_types)
            used = result.subnet_id
            return result
        finally:
            self.network.release_ips(s.id for s in subnets.values() if s.id != used)

    def _launch(self, launch: _Launch, allowed_types: set[str]) -> LaunchResult:
        """CreateFleet until an instance launches or no offering is left (see ``create``)."""
        request = launch.request
        failures: list[FleetError] = []
        for attempt in range(MAX_LAUNCH_ATTEMPTS):
            unavailable = self.unavailable_offerings()
            candidates = self._candidates(launch, unavailable)
            capacity_type = self._capacity_type(allowed_types, candidates)
            if capacity_type is None:
                break
            fleet = self._fleet_request(launch, capacity_type, candidates[capacity_type], attempt)
            outcome = self._create_fleet(request.nodeclaim_name, fleet)
            result, errors = outcome.launched, outcome.errors
            if result is not None:
                logger().info(
                    "launched",
                    nodeclaim=request.nodeclaim_name,
                    instance_id=result.instance_id,
                    instance_type=result.instance_type,
                    zone=result.zone,
                    capacity_type=result.capacity_type,
                )
                return result
            capacity = [e for e in errors if e.insufficient_capacity]
            for error in capacity:
                self.mark_unavailable(*error.offering, reason=error.code)
            failures.extend(errors)
            # Launches by type/zone and errors by code are the provisioning flow's metrics; this one
            # counts what CreateFleet refused inside a launch, retried ones included.
            self._count("CreateFleetErrors", len(errors))
            other = [e for e in errors if not e.insufficient_capacity]
            if other and not capacity:
                raise LaunchError(request.nodeclaim_name, other[0].code, other[0].message)
            if not errors:
                raise LaunchError(
                    request.nodeclaim_name, "NoInstance", "CreateFleet returned no instance, no error"
                )
            if {e.offering for e in capacity} <= unavailable:
                break  # nothing new was ruled out: another call would fail the same way
        raise InsufficientCapacityError(request.nodeclaim_name, failures)

    def _candidates(
        self, launch: _Launch, unavailable: set[tuple[str, str, str]]
    ) -> dict[str, list[tuple[str, list[RawOffering]]]]:
        """Per capacity type: (type, its launchable offerings) cheapest first, at most 60 types."""
        from nodewright.scheduling.results import MAX_CANDIDATE_TYPES

        request, subnets, images = launch.request, launch.subnets, launch.images
        by_capacity: dict[str, list[tuple[float, int, str, list[RawOffering]]]] = {
            RESERVED: [],
            SPOT: [],
            ON_DEMAND: [],
        }
        for order, candidate in enumerate(request.instance_types):
            name = _type_name(candidate)
            if _image_for(self.catalog.info(name), images) is None:
                continue  # no AMI for its architecture
            offerings = _model_offerings(candidate)
            if offerings is None:
                offerings = self.catalog.offerings(name, subnets.keys(), unavailable)
            for capacity_type in (RESERVED, SPOT, ON_DEMAND):
                usable = [
                    o
                    for o in offerings
                    if o.capacity_type == capacity_type
                    and o.zone in subnets
                    and o.available
                    and (name, *o.unavailable_key) not in unavailable
                    and (request.zones is None or o.zone in request.zones)
                    and (
                        capacity_type != RESERVED
                        or request.reservation_ids is None
                        or o.reservation_id in request.reservation_ids
                    )
                ]
                if usable:
                    by_capacity[capacity_type].append((min(o.price for o in usable), order, name, usable))
        by_capacity[RESERVED] = _one_reservation_type(by_capacity[RESERVED])
        return {
            ct: [(name, usable) for _, _, name, usable in sorted(entries)[:MAX_CANDIDATE_TYPES]]
            for ct, entries in by_capacity.items()
        }

    @staticmethod
    def _capacity_type(allowed: set[str], candidates: Mapping[str, list[Any]]) -> str | None:
        """As Karpenter's ``getCapacityType``: reserved when the NodeClaim allows it and a reservation
        is left, else spot when allowed and left, else on-demand."""
        for capacity_type in (RESERVED, SPOT, ON_DEMAND):
            if capacity_type in allowed and candidates.get(capacity_type):
                return capacity_type
        return None

    def _fleet_request(
        self,
        launch: _Launch,
        capacity_type: str,
        candidates: Sequence[tuple[str, list[RawOffering]]],
        attempt: int,
    ) -> FleetRequest:
        """The CreateFleet call for one attempt: a launch template per AMI (ensured), one override
        per (type, subnet), the tags; and what reading its answer needs."""
        request, nc, subnets = launch.request, launch.nodeclass, launch.subnets
        tags = self._tags(request, nc)
        user_data = self._user_data(request, nc, capacity_type)
        configs: dict[str, dict[str, Any]] = {}
        image_by_template: dict[str, Image] = {}
        reservation_by_template: dict[str, RawOffering] = {}
        prices: dict[tuple[str, str], float] = {}
        # One template per (AMI, reservation): its name hashes the whole configuration, user data
        # included, so it is worked out once per call, not once per override.
        templates: dict[tuple[str, str, bool], str] = {}
        for name, offerings in candidates:
            image = _image_for(self.catalog.info(name), launch.images)
            if image is None:
                continue
            # A reserved launch has one template per reservation (its CapacityReservationTarget), as
            # Karpenter builds them; on-demand and spot share one per AMI.
            for offering in offerings:
                block = offering.reservation_type == CAPACITY_BLOCK
                which = (image.id, offering.reservation_id, block)
                if which not in templates:
                    spec = TemplateSpec(
                        nc,
                        image,
                        user_data,
                        launch.security_groups,
                        launch.instance_profile,
                        tags,
                        tenancy=tenancy(request),
                        placement_group=launch.placement_group,
                        capacity_reservation=offering.reservation_id or None,
                        capacity_block=block,
                    )
                    templates[which] = self.templates.ensure(spec)
                template = templates[which]
                image_by_template[template] = image
                if offering.reservation_id:
                    reservation_by_template[template] = offering
                template_spec = {"LaunchTemplateName": template, "Version": "$Latest"}
                config = configs.setdefault(
                    template, {"LaunchTemplateSpecification": template_spec, "Overrides": []}
                )
                prices[(name, offering.zone)] = offering.price
                # The price as the plan ranked it (a NodeOverlay's included): EC2 honours it with a
                # prioritized allocation strategy, lower first, as Karpenter's overrides carry it.
                config["Overrides"].append(
                    {"InstanceType": name, "SubnetId": subnets[offering.zone].id, "Priority": offering.price}
                )
        instance_tags = {
            **tags,
            TAG_NODECLAIM: request.nodeclaim_name,
            "Name": f"{request.nodepool_name}/{request.nodeclaim_name}",
        }
        tag_list = [{"Key": k, "Value": v} for k, v in sorted(instance_tags.items())]
        params: dict[str, Any] = {
            "Type": "instant",
            "ClientToken": f"{request.nodeclaim_uid}-{attempt}"[:64],
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": 1,
                "DefaultTargetCapacityType": _fleet_capacity_type(capacity_type, reservation_by_template),
            },
            "LaunchTemplateConfigs": list(configs.values()),
            # The instant fleet is tagged too (as Karpenter does), so the IAM policy can require this
            # cluster's tags on fleet/* like on instance/* (infra/capabilities/permissions.py). Network
            # interfaces are tagged by the launch template; EC2 offers no way to tag the spot request
            # of a fleet launch (aws/karpenter-provider-aws#4550).
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list} for kind in ("instance", "volume", "fleet")
            ],
        }
        if nc.context:
            params["Context"] = nc.context
        params.update(_allocation(capacity_type, request.prioritized, reservation_by_template))
        return FleetRequest(
            params=params,
            capacity_type=capacity_type,
            image_by_template=image_by_template,
            prices=prices,
            zone_of_subnet={s.id: s.zone for s in subnets.values()},
            reservation_by_template=reservation_by_template,
        )

    def _user_data(self, request: LaunchRequest, nc: NodeClass, capacity_type: str) -> str:
        """The node's bootstrap for its AMI family: cluster endpoint, labels, taints, kubelet.

        As Karpenter's AWS provider: the kubelet registers the Node with its taints and the
        ``karpenter.sh/unregistered:NoExecute`` taint (lifted at registration, once the NodeClaim's
        labels are on the Node), and labels it ``karpenter.sh/do-not-sync-taints=true``: its taints
        are set here, at registration, so registration does not write them again (a DaemonSet that
        already lifted a startup taint would see it come back)."""
        labels = {
            key: value
            for key, value in {
                **request.labels,
                TAG_NODEPOOL: request.nodepool_name,
                LABEL_CAPACITY_TYPE: capacity_type,
                wk.DO_NOT_SYNC_TAINTS: "true",
            }.items()
            if kubelet_may_set(key)
        }
        bootstrap = NodeBootstrap(
            cluster=cluster_info(self.settings),
            labels=labels,
            taints=[*request.taints, *request.startup_taints, UNREGISTERED_TAINT],
            kubelet={**nc.kubelet, **(request.kubelet or {})},
            custom_user_data=nc.user_data,
            nodeclass_name=nc.name,
            instance_store_raid0=nc.instance_store_policy == "RAID0",
        )
        return render(nc.ami_family, bootstrap)

    def _create_fleet(self, nodeclaim_name: str, fleet: FleetRequest) -> FleetOutcome:
        """Send one CreateFleet; a refused call raises LaunchError, an answer is parsed
        (``parse_fleet_response``). An instance whose zone or AMI the answer lacks is described."""
        try:
            response = self.ec2.create_fleet(**fleet.params)
        except ClientError as exc:
            error = exc.response["Error"]
            code = error.get("Code", "Unknown")
            if code == "IdempotentParameterMismatch":
                message = "an earlier attempt used this client token with other overrides; retry later"
                raise LaunchError(nodeclaim_name, code, message, retryable=True) from exc
            raise LaunchError(nodeclaim_name, code, error.get("Message", "")) from exc
        outcome = parse_fleet_response(response, fleet)
        launched = outcome.launched
        if launched is not None and not (launched.zone and launched.image_id):
            described = self.get(launched.instance_id)
            launched = replace(
                launched,
                zone=described.zone,
                subnet_id=described.subnet_id,
                image_id=described.image_id,
                provider_id=described.provider_id,
                price=fleet.prices.get((launched.instance_type, described.zone)),
            )
            outcome = FleetOutcome(launched, outcome.errors)
        return outcome

    def _tags(self, request: LaunchRequest, nc: NodeClass) -> dict[str, str]:
        """NodeClass tags, then the tags Nodewright owns (they win: IAM conditions key on them)."""
        return {
            **nc.tags,
            TAG_NODEPOOL: request.nodepool_name,
            TAG_NODECLASS: nc.name,
            TAG_NODECLASS_HASH: nc.hash(),
            TAG_CLUSTER_NAME: self.cluster_name,
            f"kubernetes.io/cluster/{self.cluster_name}": "owned",
        }

    # -- instances -----------------------------------------------------------------------------
    def get(self, instance_id: str) -> Instance:
        try:
            response = self.ec2.describe_instances(InstanceIds=[instance_id])
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"):
                raise InstanceNotFoundError(f"instance {instance_id} not found") from exc
            raise
        for reservation in response.get("Reservations", []):
            for raw in reservation.get("Instances", []):
                return _instance(raw)
        raise InstanceNotFoundError(f"instance {instance_id} not found")

    def list(self, extra_filters: Sequence[Mapping[str, Any]] = ()) -> builtins.list[Instance]:
        """Live instances Nodewright launched for this cluster (tagged with a NodeClaim)."""
        filters = [
            {"Name": f"tag:{TAG_CLUSTER_NAME}", "Values": [self.cluster_name]},
            {"Name": "tag-key", "Values": [TAG_NODECLAIM]},
            {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
            *extra_filters,
        ]
        found: builtins.list[Instance] = []
        for page in self.ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations", []):
                found.extend(_instance(raw) for raw in reservation.get("Instances", []))
        return sorted(found, key=lambda i: i.id)

    def find_by_nodeclaim(self, nodeclaim_name: str) -> Instance | None:
        matches = self.list([{"Name": f"tag:{TAG_NODECLAIM}", "Values": [nodeclaim_name]}])
        live = [i for i in matches if i.state != "shutting-down"]
        return live[0] if live else None

    def delete(self, instance_id: str) -> bool:
        """Terminate; True when a termination was requested, False when it was already gone."""
        try:
            current = self.get(instance_id)
        except InstanceNotFoundError:
            return False
        if current.state in ("shutting-down", "terminated"):
            return False
        try:
            self.ec2.terminate_instances(InstanceIds=[instance_id])
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "InvalidInstanceID.NotFound":
                return False
            raise
        return True

    def instance_gone(self, instance_id: str) -> bool:
        """True when EC2 no longer runs the instance: not found, shutting down or terminated."""
        try:
            return self.get(instance_id).state in ("shutting-down", "terminated")
        except InstanceNotFoundError:
            return True

    def delete_by_nodeclaim(self, nodeclaim_name: str) -> builtins.list[str]:
        """Terminate every live instance tagged with the NodeClaim (idempotent); their ids."""
        terminated = []
        for instance in self.list([{"Name": f"tag:{TAG_NODECLAIM}", "Values": [nodeclaim_name]}]):
            if self.delete(instance.id):
                terminated.append(instance.id)
        return terminated

    # -- drift ---------------------------------------------------------------------------------
    def drift_inputs(self, nodeclass: Any) -> DriftInputs:
        """What a launch for the NodeClass would use now (its selectors resolved in EC2)."""
        nc = NodeClass(nodeclass)
        subnets = self.network.subnets(nc.name, nc.subnet_selector_terms)
        groups = self.network.security_groups(nc.name, nc.security_group_selector_terms)
        return DriftInputs(
            image_ids=frozenset(i.id for i in self.amis.images(nc)),
            subnet_ids=frozenset(s.id for s in subnets),
            security_groups=frozenset(groups),
        )

    def drift_reason(self, instance: Instance, nodeclass: Any) -> str | None:
        """Dynamic drift (Karpenter's AWS provider): why the instance no longer matches what its
        EC2NodeClass selects now — its AMI, subnet or security groups, or (Karpenter's
        ``CapacityReservationDrift``) the capacity reservation it was launched into is no longer among
        the active ones its ``capacityReservationSelectorTerms`` select — or None. An instance whose
        reservation ended runs on as on-demand without one (``nodewright.capacityreservation``
        relabels it), and one EC2 merely counted against an open reservation is never judged so.
        Static drift (the EC2NodeClass's other fields) is the NodeClaim's hash annotation, compared by
        the disruption flow (``api.hashing``)."""
        expected = self.drift_inputs(nodeclass)
        terms = NodeClass(nodeclass).capacity_reservation_selector_terms
        if instance.image_id and expected.image_ids and instance.image_id not in expected.image_ids:
            return "AMIDrift"
        if instance.subnet_id and expected.subnet_ids and instance.subnet_id not in expected.subnet_ids:
            return "SubnetDrift"
        if (
            instance.security_groups
            and expected.security_groups
            and (instance.security_groups != expected.security_groups)
        ):
            return "SecurityGroupDrift"
        if (
            instance.capacity_reservation_id
            and instance.reservation_targeted
            and instance.capacity_reservation_id not in {r.id for r in self.reservations.select(terms)}
        ):
            return "CapacityReservationDrift"
        return None

    def capacity_reservations_by_id(self, ids: Iterable[str]) -> dict[str, CapacityReservation]:
        """The active reservations among ``ids`` as EC2 has them now (``nodewright.capacityreservation``)."""
        return self.reservations.by_ids(ids)

    # -- launch templates ------------------------------------------------------------------------
    def cleanup_launch_templates(self, live: Iterable[Instance]) -> builtins.list[str]:
        """Delete this cluster's launch templates that none of the ``live`` instances (``list()``'s:
        only Nodewright's instances launch from them, each tagged with its NodeClaim at launch)
        uses, older than an hour."""
        return self.templates.cleanup(in_use=used_by(i.tags for i in live))

    _metrics_lock = threading.Lock()

    @classmethod
    def _count(cls, name: str, value: float = 1) -> None:
        with cls._metrics_lock:  # the launches of a pass count from their threads into one Metrics
            metrics().add_metric(name=name, unit=MetricUnit.Count, value=value)


__all__ = [
    "CloudError",
    "CloudProvider",
    "DriftInputs",
    "FleetOutcome",
    "FleetRequest",
    "Instance",
    "LaunchRequest",
    "LaunchResult",
    "parse_fleet_response",
    "parse_provider_id",
]
