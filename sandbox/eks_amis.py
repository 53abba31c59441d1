"""The sandbox's EKS-optimized AMIs as EC2 and SSM publish them, beyond what ``sandbox.aws`` registers:
the Windows Server Core AMIs with their public parameters, every AMI's block devices, and what a node
booted from one makes of its user data.

Written from AWS's own facts, not the product's, so that a wrong computation in Nodewright shows:

* Windows: EC2 publishes the latest EKS-optimized Windows Server Core AMI of each Kubernetes version
  at ``/aws/service/ami-windows-latest/Windows_Server-<year>-English-Core-EKS_Optimized-<k8s>/image_id``
  (Amazon EKS user guide, "Retrieve recommended Microsoft Windows AMI IDs"), x86_64 only, platform
  ``windows``, its C: drive on ``/dev/sda1`` (50 GiB); its kubelet labels the node
  ``node.kubernetes.io/windows-build`` with the OS build (Server 2019: 10.0.17763, 2022: 10.0.20348,
  2025: 10.0.26100).
* The Linux EKS AMIs' root device is ``/dev/xvda``: AL2 and AL2023 a 20 GiB root the kubelet lives on;
  Bottlerocket a 2 GiB OS volume and a 20 GiB data volume (``/dev/xvdb``) the kubelet lives on.
* With the instance store asked for as RAID0 in user data (AL2 ``bootstrap.sh --local-disks raid0``,
  AL2023 NodeConfig ``instance.localStorage.strategy: RAID0``, Bottlerocket's ``apiclient
  ephemeral-storage init``/``bind`` bootstrap command), the kubelet's filesystem is the array of the
  NVMe instance-store disks; the ``--max-pods`` of the bootstrap is the node's pod capacity.

``seed`` (called once from ``sandbox.aws.seed``) registers and publishes all this in moto's backends.
"""

from __future__ import annotations

import base64
import binascii
import email
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

# Windows Server Core EKS-optimized AMIs: family key → (year, OS build).
WINDOWS_SERVERS = {
    "windows2019": ("2019", "10.0.17763"),
    "windows2022": ("2022", "10.0.20348"),
    "windows2025": ("2025", "10.0.26100"),
}
# Block devices of each AMI family's image: (device, GiB). The first is the root device.
AMI_BLOCK_DEVICES: Mapping[str, tuple[tuple[str, int], ...]] = {
    "al2": (("/dev/xvda", 20),),
    "al2023": (("/dev/xvda", 20),),
    "bottlerocket": (("/dev/xvda", 2), ("/dev/xvdb", 20)),
    "windows": (("/dev/sda1", 50),),
}
# The device a family's kubelet keeps its files on (Bottlerocket: the data volume; others: the root).
KUBELET_DEVICE = {"bottlerocket": "/dev/xvdb"}
_SANDBOX_IMAGE = re.compile(r"^sandbox-eks-(?P<family>al2023|al2|bottlerocket)-")


def windows_parameter(year: str, kubernetes_version: str) -> str:
    return (
        f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-"
        f"{kubernetes_version}/image_id"
    )


def seed(ec2: Any, region: str, images: dict[str, str], versions: tuple[str, ...]) -> dict[str, str]:
    """Give ``sandbox.aws``'s Linux images their real block devices, register the Windows Server Core
    images (added to ``images`` as ``windows<year>/x86_64``) and publish their SSM parameters for
    ``versions``; returns the parameters published."""
    from moto.backends import get_backend

    from sandbox.aws import ACCOUNT_ID, inject_ssm_parameters

    backend = get_backend("ec2")[ACCOUNT_ID][region]
    for image_id in images.values():
        ami = backend.amis[image_id]
        family = sandbox_family(ami.name or "")
        if family:
            ami.root_device_name = AMI_BLOCK_DEVICES[family][0][0]
            ami.root_device_type = "ebs"
    parameters: dict[str, str] = {}
    for alias, (year, _build) in WINDOWS_SERVERS.items():
        name = f"Windows_Server-{year}-English-Core-EKS_Optimized-sandbox"
        image_id = ec2.register_image(Name=name, Description=f"EKS-optimized Windows Server {year} Core")[
            "ImageId"
        ]
        ami = backend.amis[image_id]
        ami.architecture = "x86_64"  # register_image ignores Architecture in moto
        ami.platform = "windows"
        ami.root_device_name = AMI_BLOCK_DEVICES["windows"][0][0]
        ami.root_device_type = "ebs"
        images[f"{alias}/x86_64"] = image_id
        for version in versions:
            parameters[windows_parameter(year, version)] = image_id
    inject_ssm_parameters(region, parameters)
    return parameters


def sandbox_family(image_name: str) -> str | None:
    """al2, al2023 or bottlerocket for an image ``sandbox.aws`` registered; None for any other."""
    match = _SANDBOX_IMAGE.match(image_name)
    return match["family"] if match else None


def image_family(ami: Any) -> str | None:
    """The family of a moto image object (see ``family_of``)."""
    return family_of(getattr(ami, "name", "") or "", getattr(ami, "platform", None))


def family_of(name: str, platform: str | None) -> str | None:
    """The family of an image by its name and platform: windows (platform ``windows``),
    al2/al2023/bottlerocket (a sandbox image), or None (an image a test registered itself)."""
    if platform == "windows":
        return "windows"
    return sandbox_family(name)


def windows_build(image_name: str) -> str:
    """The OS build of a Windows Server AMI from its name (``Windows_Server-2022-...``); '' if none."""
    match = re.match(r"^Windows_Server-(\d{4})-", image_name)
    for year, build in WINDOWS_SERVERS.values():
        if match and match.group(1) == year:
            return build
    return ""


def block_devices(ami: Any) -> tuple[tuple[str, int], ...]:
    """The block devices EC2 gives an instance of this image before its launch template's mappings:
    the family's, else moto's root volume of the image."""
    family = image_family(ami)
    if family:
        return AMI_BLOCK_DEVICES[family]
    return tuple(
        (str(m["DeviceName"]), int((m.get("Ebs") or {}).get("VolumeSize") or 8))
        for m in getattr(ami, "block_device_mappings", [])
    )


@dataclass(frozen=True)
class Bootstrap:
    """What a node's bootstrap does with its user data that its kubelet reports."""

    raid0: bool = False
    max_pods: int | None = None


def read_user_data(family: str | None, encoded: str) -> Bootstrap:
    """The RAID0 and ``--max-pods`` a family's bootstrap reads in the (base64) user data."""
    try:
        text = base64.b64decode(encoded).decode("utf-8") if encoded else ""
    except (binascii.Error, UnicodeDecodeError):
        return Bootstrap()
    if family == "bottlerocket":
        try:
            settings = tomllib.loads(text).get("settings") or {}
        except tomllib.TOMLDecodeError:
            return Bootstrap()
        commands = settings.get("bootstrap-commands") or {}
        raid0 = any(
            ["apiclient", "ephemeral-storage", "init"] in (entry.get("commands") or [])
            for entry in commands.values()
            if isinstance(entry, dict)
        )
        pods = (settings.get("kubernetes") or {}).get("max-pods")
        return Bootstrap(raid0, int(pods) if isinstance(pods, int) else None)
    if family == "al2023":
        return _nodeadm(text)
    if family == "windows":
        pods = re.search(r"--max-pods=(\d+)", text)
        return Bootstrap(False, int(pods.group(1)) if pods else None)
    # AL2 (and anything else with a bootstrap.sh line)
    pods = re.search(r"--max-pods=(\d+)", text)
    return Bootstrap(bool(re.search(r"--local-disks\s+raid0", text)), int(pods.group(1)) if pods else None)


def _nodeadm(text: str) -> Bootstrap:
    """nodeadm merges every NodeConfig part of the MIME document, later parts winning."""
    raid0, pods = False, None
    message = email.message_from_string(text)
    for part in message.walk():
        if part.is_multipart() or part.get_content_type() != "application/node.eks.aws":
            continue
        payload = part.get_payload(decode=True)
        try:
            config = yaml.safe_load(payload.decode("utf-8") if isinstance(payload, bytes) else "") or {}
        except yaml.YAMLError:
            continue
        spec = config.get("spec") or {} if isinstance(config, dict) else {}
        strategy = ((spec.get("instance") or {}).get("localStorage") or {}).get("strategy")
        if strategy:
            raid0 = strategy == "RAID0"
        value = ((spec.get("kubelet") or {}).get("config") or {}).get("maxPods")
        if isinstance(value, int):
            pods = value
    return Bootstrap(raid0, pods)


def kubelet_device(family: str | None, root_device: str) -> str:
    """The device whose volume the kubelet's filesystem (its ephemeral storage) is on."""
    return KUBELET_DEVICE.get(family or "", root_device)
