"""Launch templates (one per configuration hash, reused) and instance profiles.

A template's name is ``nodewright/<cluster>/<hash>`` where the hash covers everything
in it: the NodeClass, AMI, user data, block devices, metadata options, security groups
and instance profile. The same configuration therefore always maps to the same template,
whichever function or container launches, and a changed NodeClass gets a new one.
Templates no live instance uses are deleted by ``cleanup``; a launch recreates any it needs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api.labels import WINDOWS_FAMILIES
from nodewright.cloud.amis import Image
from nodewright.cloud.cache import TTLCache
from nodewright.cloud.errors import CloudError, InvalidNodeClassError
from nodewright.cloud.nodeclass import NodeClass

TEMPLATE_CACHE_SECONDS = 300.0
NAME_PREFIX = "nodewright"
LAUNCH_TEMPLATE_TAG = "karpenter.k8s.aws/launch-template"  # on instances: which template launched them
CLUSTER_TAG = "karpenter.k8s.aws/cluster"


def volume_gib(size: Any) -> int:
    """``volumeSize`` (a Kubernetes quantity such as ``20Gi``/``100G``, or an int of GiB) in whole GiB."""
    if isinstance(size, int | float):
        return int(size)
    from nodewright.scheduling.resources import parse_quantity

    return max(1, math.ceil(parse_quantity(str(size)) / (1 << 30)))


# The volume each AMI family's kubelet keeps its files on (Karpenter's EphemeralBlockDevice): its size
# is the node's ephemeral storage. Bottlerocket's is its data volume; Custom has none.
EPHEMERAL_BLOCK_DEVICE = {
    "AL2": "/dev/xvda",
    "AL2023": "/dev/xvda",
    "Bottlerocket": "/dev/xvdb",
    **dict.fromkeys(WINDOWS_FAMILIES, "/dev/sda1"),
}


def default_block_devices(family: str) -> list[dict[str, Any]]:
    """Karpenter's defaults: a 20 GiB encrypted gp3 root (Bottlerocket: 4 GiB OS + 20 GiB data;
    Windows: a 50 GiB C: drive on /dev/sda1)."""

    def gp3(device: str, size: str) -> dict[str, Any]:
        return {"deviceName": device, "ebs": {"volumeSize": size, "volumeType": "gp3", "encrypted": True}}

    if family == "Bottlerocket":
        return [gp3("/dev/xvda", "4Gi"), gp3("/dev/xvdb", "20Gi")]
    if family in ("AL2", "AL2023"):
        return [gp3("/dev/xvda", "20Gi")]
    if family in WINDOWS_FAMILIES:
        return [gp3("/dev/sda1", "50Gi")]
    return []


def block_device_mappings(devices: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """EC2NodeClass ``blockDeviceMappings`` (camelCase) → the launch template's shape."""
    mappings = []
    for device in devices:
        ebs_in = device.get("ebs") or {}
        ebs: dict[str, Any] = {"DeleteOnTermination": bool(ebs_in.get("deleteOnTermination", True))}
        if ebs_in.get("volumeSize") is not None:
            ebs["VolumeSize"] = volume_gib(ebs_in["volumeSize"])
        strings = (("volumeType", "VolumeType"), ("kmsKeyID", "KmsKeyId"), ("snapshotID", "SnapshotId"))
        for key, out in strings:
            if ebs_in.get(key):
                ebs[out] = ebs_in[key]
        integers = (
            ("iops", "Iops"),
            ("throughput", "Throughput"),
            ("volumeInitializationRate", "VolumeInitializationRate"),
        )
        for key, out in integers:
            if ebs_in.get(key) is not None:
                ebs[out] = int(ebs_in[key])
        if ebs_in.get("encrypted") is not None:
            ebs["Encrypted"] = bool(ebs_in["encrypted"])
        mappings.append({"DeviceName": device["deviceName"], "Ebs": ebs})
    return mappings


def network_interfaces(nodeclass: NodeClass, security_groups: list[str]) -> list[dict[str, Any]] | None:
    """The launch template's ``NetworkInterfaces``, or None when the defaults do (``SecurityGroupIds``).

    As Karpenter's AWS provider builds them: one per ``networkInterfaces`` entry (its network card,
    device index and type: ``interface`` is an ENA interface, ``efa-only`` an EFA without IP
    networking), else one primary interface when a field only an interface takes is set
    (``associatePublicIPAddress``, ``ipPrefixCount``, ``connectionTracking``). The primary interface
    (card 0, device 0) carries the public-IP choice and the IPv4 prefixes; every ENA interface the
    connection-tracking timeouts (EFA-only interfaces have no IP traffic to track).
    """
    wanted = nodeclass.network_interfaces
    public_ip = nodeclass.associate_public_ip
    prefixes = nodeclass.ip_prefix_count
    tracking = nodeclass.connection_tracking
    if not wanted and public_ip is None and prefixes is None and not tracking:
        return None
    wanted = wanted or [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    found = []
    for entry in wanted:
        card, device = int(entry.get("networkCardIndex", 0)), int(entry.get("deviceIndex", 0))
        kind = str(entry.get("interfaceType") or "interface")
        interface: dict[str, Any] = {
            "NetworkCardIndex": card,
            "DeviceIndex": device,
            "InterfaceType": kind,
            "Groups": list(security_groups),
            "DeleteOnTermination": True,
        }
        if (card, device) == (0, 0):
            if public_ip is not None:
                interface["AssociatePublicIpAddress"] = public_ip
            if prefixes is not None:
                interface["Ipv4PrefixCount"] = prefixes
        if tracking and kind != "efa-only":
            interface["ConnectionTrackingSpecification"] = dict(tracking)
        found.append(interface)
    return found


@dataclass(frozen=True)
class TemplateSpec:
    """Everything one launch template holds. ``tenancy`` is ``dedicated`` for a NodeClaim that allows
    only Dedicated Instances (``karpenter.k8s.aws/instance-tenancy``), ``placement_group`` the id of
    the placement group the EC2NodeClass's ``placementGroupSelector`` resolved to."""

    nodeclass: NodeClass
    image: Image
    user_data: str
    security_groups: tuple[str, ...]
    instance_profile: str
    tags: Mapping[str, str] = field(default_factory=dict)
    tenancy: str = "default"
    placement_group: str | None = None
    # The capacity reservation the instance launches into (Karpenter: one template per reservation),
    # and whether it is a Capacity Block (launched with the ``capacity-block`` market type).
    capacity_reservation: str | None = None
    capacity_block: bool = False

    def data(self, name: str) -> dict[str, Any]:
        nodeclass = self.nodeclass
        devices = nodeclass.block_device_mappings or default_block_devices(nodeclass.ami_family)
        metadata = nodeclass.metadata_options
        instance_tags = {**self.tags, LAUNCH_TEMPLATE_TAG: name}
        data: dict[str, Any] = {
            "ImageId": self.image.id,
            "IamInstanceProfile": {"Name": self.instance_profile},
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "MetadataOptions": {
                "HttpEndpoint": metadata["httpEndpoint"],
                "HttpProtocolIpv6": metadata["httpProtocolIPv6"],
                "HttpPutResponseHopLimit": int(metadata["httpPutResponseHopLimit"]),
                "HttpTokens": metadata["httpTokens"],
            },
            "Monitoring": {"Enabled": nodeclass.detailed_monitoring},
            # Every instance has a primary network interface, so tagging it can never fail a launch
            # (a spot-instances-request tag would fail every on-demand launch from the template).
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}
                for kind, tags in (
                    ("instance", instance_tags),
                    ("volume", self.tags),
                    ("network-interface", self.tags),
                )
            ],
        }
        mappings = block_device_mappings(devices)
        if mappings:
            data["BlockDeviceMappings"] = mappings
        interfaces = network_interfaces(nodeclass, list(self.security_groups))
        if interfaces is not None:
            data["NetworkInterfaces"] = interfaces  # EC2 refuses SecurityGroupIds beside them
        else:
            data["SecurityGroupIds"] = list(self.security_groups)
        placement: dict[str, Any] = {}
        if self.tenancy != "default":
            placement["Tenancy"] = self.tenancy
        if self.placement_group:
            placement["GroupId"] = self.placement_group
        if placement:
            data["Placement"] = placement
        if nodeclass.nested_virtualization:
            data["CpuOptions"] = {"NestedVirtualization": nodeclass.nested_virtualization}
        if nodeclass.enclaves_enabled is not None:
            data["EnclaveOptions"] = {"Enabled": nodeclass.enclaves_enabled}
        if self.capacity_reservation:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": self.capacity_reservation}
            }
            if self.capacity_block:
                data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        return data

    def digest(self) -> str:
        parts = {
            "nodeclass": self.nodeclass.name,
            "image": self.image.id,
            "userData": self.user_data,
            "blockDevices": self.nodeclass.block_device_mappings,
            "metadata": self.nodeclass.metadata_options,
            "securityGroups": sorted(self.security_groups),
            "instanceProfile": self.instance_profile,
            "publicIp": self.nodeclass.associate_public_ip,
            "interfaces": network_interfaces(self.nodeclass, sorted(self.security_groups)),
            "tenancy": self.tenancy,
            "placementGroup": self.placement_group,
            "cpu": self.nodeclass.nested_virtualization,
            "enclaves": self.nodeclass.enclaves_enabled,
            "monitoring": self.nodeclass.detailed_monitoring,
            "tags": dict(sorted(self.tags.items())),
            **({"capacityReservation": self.capacity_reservation} if self.capacity_reservation else {}),
            **({"capacityBlock": True} if self.capacity_block else {}),
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


class LaunchTemplates:
    """Creates, reuses and cleans up this cluster's launch templates and instance profiles."""

    def __init__(self, ec2: Any, iam: Any, cluster_name: str, region: str) -> None:
        self._ec2 = ec2
        self._iam = iam
        self.cluster_name = cluster_name
        self.region = region
        self._known: TTLCache[str] = TTLCache(TEMPLATE_CACHE_SECONDS)
        self._profiles: TTLCache[str] = TTLCache(TEMPLATE_CACHE_SECONDS)

    def name_for(self, spec: TemplateSpec) -> str:
        return f"{NAME_PREFIX}/{self.cluster_name}/{spec.digest()}"

    def ensure(self, spec: TemplateSpec) -> str:
        """The template's name, creating it when this configuration has none yet (once, however
        many of a pass's concurrent launches ask for it: ``TTLCache.get_or_load``)."""
        name = self.name_for(spec)
        return self._known.get_or_load(name, lambda: self._describe_or_create(name, spec))

    def _describe_or_create(self, name: str, spec: TemplateSpec) -> str:
        try:
            self._ec2.describe_launch_templates(LaunchTemplateNames=[name])
        except ClientError as exc:
            if "NotFound" not in exc.response["Error"]["Code"]:
                raise
            self._create(name, spec)
        return name

    def _create(self, name: str, spec: TemplateSpec) -> None:
        tags = {**spec.tags, CLUSTER_TAG: self.cluster_name}
        try:
            self._ec2.create_launch_template(
                LaunchTemplateName=name,
                LaunchTemplateData=spec.data(name),
                TagSpecifications=[
                    {
                        "ResourceType": "launch-template",
                        "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())],
                    }
                ],
            )
        except ClientError as exc:
            # Another invocation created the same configuration first: same name, same content.
            if exc.response["Error"]["Code"] not in (
                "InvalidLaunchTemplateName.AlreadyExistsException",
                "AlreadyExistsException",
            ):
                raise

    def instance_profile(self, nodeclass: NodeClass) -> str:
        """The NodeClass's ``instanceProfile``, or one made for its ``role`` (created once, reused)."""
        if nodeclass.instance_profile:
            return nodeclass.instance_profile
        role = nodeclass.role
        if not role:
            raise InvalidNodeClassError(
                f"EC2NodeClass {nodeclass.name!r}: set spec.role (the node IAM role) or spec.instanceProfile"
            )
        role_name = role.rsplit("/", 1)[-1]
        digest = hashlib.sha256(f"{self.region}/{self.cluster_name}/{role_name}".encode()).hexdigest()[:12]
        profile = f"{self.cluster_name}_{digest}"[:128]
        # Once per profile at a time: two launches adding the role at once would have the second
        # refused (an instance profile holds one role) and its NodeClaim failed.
        return self._profiles.get_or_load(
            profile, lambda: self._ensure_profile(profile, role_name, nodeclass)
        )

    def _ensure_profile(self, profile: str, role_name: str, nodeclass: NodeClass) -> str:
        try:
            existing = self._iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchEntity":
                raise
            existing = self._create_profile(profile)
        if role_name not in {r["RoleName"] for r in existing.get("Roles", [])}:
            for stale in existing.get("Roles", []):  # a profile holds one role: the NodeClass's
                self._iam.remove_role_from_instance_profile(
                    InstanceProfileName=profile, RoleName=stale["RoleName"]
                )
            try:
                self._iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=role_name)
            except ClientError as exc:
                raise CloudError(
                    f"EC2NodeClass {nodeclass.name!r}: cannot add role {role_name!r} to instance profile "
                    f"{profile!r}: {exc.response['Error']['Message']}"
                ) from exc
        return profile

    def _create_profile(self, profile: str) -> dict[str, Any]:
        try:
            created: dict[str, Any] = self._iam.create_instance_profile(
                InstanceProfileName=profile,
                Path=self.profile_path(),
                Tags=[
                    {"Key": "eks:eks-cluster-name", "Value": self.cluster_name},
                    {"Key": f"kubernetes.io/cluster/{self.cluster_name}", "Value": "owned"},
                ],
            )["InstanceProfile"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "EntityAlreadyExists":
                raise
            created = self._iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
        return created

    def cleanup(
        self,
        in_use: Iterable[str] | None = None,
        min_age: timedelta = timedelta(hours=1),
        now: datetime | None = None,
    ) -> list[str]:
        """Delete this cluster's templates that no live instance uses and that are older than ``min_age``.

        ``in_use``: the templates (names or ids) the live instances use, from a DescribeInstances the
        caller has just made (garbage collection's: ``used_by``); None: the cluster's live
        instances are listed here. The age guard keeps a template another invocation has just
        created for its launch.
        """
        now = now or datetime.now(UTC)
        keep = set(in_use) if in_use is not None else self._used_by_instances()
        deleted = []
        paginator = self._ec2.get_paginator("describe_launch_templates")
        mine = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster_name]}]
        for page in paginator.paginate(Filters=mine):
            for template in page.get("LaunchTemplates", []):
                name, template_id = template["LaunchTemplateName"], template["LaunchTemplateId"]
                created = template.get("CreateTime") or now
                if name in keep or template_id in keep or now - created < min_age:
                    continue
                try:
                    self._ec2.delete_launch_template(LaunchTemplateId=template_id)
                except ClientError as exc:
                    if "NotFound" not in exc.response["Error"]["Code"]:
                        raise
                self._known.forget(name)
                deleted.append(name)
        return deleted

    def profile_path(self) -> str:
        """Where this cluster's instance profiles live (the IAM policy is scoped to it)."""
        return f"/nodewright/{self.region}/{self.cluster_name}/"

    def delete_instance_profiles(self) -> tuple[list[str], list[str]]:
        """Delete this cluster's instance profiles that no live instance uses: (deleted, kept in use).

        Run when the stack is destroyed; a profile still attached to an instance is kept, since
        deleting it would take the credentials away from a running node.
        """
        in_use = self._profiles_of_live_instances()
        deleted, kept = [], []
        paginator = self._iam.get_paginator("list_instance_profiles")
        for page in paginator.paginate(PathPrefix=self.profile_path()):
            for profile in page.get("InstanceProfiles", []):
                name = profile["InstanceProfileName"]
                if profile["Path"] != self.profile_path():  # PathPrefix is a prefix: never another path
                    continue
                if profile["Arn"] in in_use:
                    kept.append(name)
                    continue
                for role in profile.get("Roles", []):
                    self._iam.remove_role_from_instance_profile(
                        InstanceProfileName=name, RoleName=role["RoleName"]
                    )
                try:
                    self._iam.delete_instance_profile(InstanceProfileName=name)
                except ClientError as exc:
                    if exc.response["Error"]["Code"] != "NoSuchEntity":
                        raise
                self._profiles.forget(name)
                deleted.append(name)
        return deleted, kept

    def _profiles_of_live_instances(self) -> set[str]:
        arns: set[str] = set()
        for instance in self._live_instances():
            arn = (instance.get("IamInstanceProfile") or {}).get("Arn")
            if arn:
                arns.add(arn)
        return arns

    def _live_instances(self) -> Iterable[dict[str, Any]]:
        paginator = self._ec2.get_paginator("describe_instances")
        for page in paginator.paginate(
            Filters=[
                {"Name": "tag:eks:eks-cluster-name", "Values": [self.cluster_name]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
            ]
        ):
            for reservation in page.get("Reservations", []):
                yield from reservation.get("Instances", [])

    def _used_by_instances(self) -> set[str]:
        return used_by({t["Key"]: t["Value"] for t in i.get("Tags", [])} for i in self._live_instances())


def used_by(instance_tags: Iterable[Mapping[str, str]]) -> set[str]:
    """The launch templates (names and ids) instances with these tags were launched from: ours tag
    theirs with the name (``LAUNCH_TEMPLATE_TAG``), EC2 with the id."""
    used: set[str] = set()
    for tags in instance_tags:
        used.update(v for k in (LAUNCH_TEMPLATE_TAG, "aws:ec2launchtemplate:id") if (v := tags.get(k)))
    return used
