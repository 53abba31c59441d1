"""The sandbox's EKS-optimized AMIs as EC2 and SSM publish them, beyond what ``sandbox.aws.server`` registers:
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

``seed`` (called once from ``sandbox.aws.server.seed``) registers and publishes all this in moto's backends.
"""

from __future__ import annotations

import base64
import binascii
import email
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
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
    """Give ``sandbox.aws.server``'s Linux images their real block devices, register the Windows Server Core
    images (added to ``images`` as ``windows<year>/x86_64``) and publish their SSM parameters for
    ``versions``; returns the parameters published."""
    from moto.backends import get_backend

    from sandbox.aws.server import ACCOUNT_ID, inject_ssm_parameters

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
    """al2, al2023 or bottlerocket for an image ``sandbox.aws.server`` registered; None for any other."""
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


# The labels a kubelet may set on its own Node (k8s.io/api/core/v1 ``KubeletLabels`` and
# ``KubeletLabelNamespaces``): with any other kubernetes.io or k8s.io label in ``--node-labels`` it
# refuses to start ("unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels").
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "node.kubernetes.io/windows-build",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# apimachinery's IsQualifiedName and IsValidLabelValue.
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


class KubeletRefuses(ValueError):
    """What makes a node's kubelet (or its bootstrap) stop before it registers: the node never joins."""


@dataclass(frozen=True)
class Bootstrap:
    """What a node's bootstrap does with its user data, as far as its kubelet shows it.

    ``cluster`` is the cluster the bootstrap joins ('' when the user data names none: such a node
    never joins); ``labels`` and ``taints`` are what the kubelet registers the Node with
    (``--node-labels``, ``--register-with-taints``/``registerWithTaints``, Bottlerocket's
    ``node-labels``/``node-taints``); ``refused`` says why the kubelet would not start ('' when it
    starts)."""

    raid0: bool = False
    max_pods: int | None = None
    cluster: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    refused: str = ""


def read_user_data(family: str | None, encoded: str) -> Bootstrap:
    """What a family's bootstrap reads in the (base64) user data: the cluster it joins, the kubelet's
    labels, taints and ``--max-pods``, and whether it builds the instance-store RAID0 array.

    Per family, as the bootstrap itself reads it: AL2's ``/etc/eks/bootstrap.sh <cluster> ...
    --kubelet-extra-args '<flags>'``, AL2023's nodeadm ``NodeConfig`` documents (``spec.cluster``,
    ``spec.kubelet.flags`` and ``spec.kubelet.config``, later documents winning), Bottlerocket's TOML
    ``[settings.kubernetes]``, the Windows ``Start-EKSBootstrap.ps1 -EKSClusterName ...
    -KubeletExtraArgs '<flags>'``. An image of no known family is read as AL2's."""
    try:
        text = base64.b64decode(encoded).decode("utf-8") if encoded else ""
        if family == "bottlerocket":
            return _bottlerocket(text)
        if family == "al2023":
            return _nodeadm(text)
        if family == "windows":
            return _windows(text)
        return _bootstrap_sh(text)
    except (binascii.Error, UnicodeDecodeError):
        return Bootstrap(refused="the user data is not base64-encoded UTF-8 text")
    except KubeletRefuses as exc:
        return Bootstrap(refused=str(exc))


class _Kubelet:
    """The kubelet's command line as far as registration goes: later flags win, as pflag sets them."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.taints: tuple[Mapping[str, str], ...] | None = None
        self.max_pods: int | None = None

    def parse(self, args: list[str]) -> None:
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if not arg.startswith("--"):
                continue
            name, has_value, value = arg[2:].partition("=")
            if name not in ("node-labels", "register-with-taints", "max-pods"):
                continue
            if not has_value:
                if index >= len(args):
                    raise KubeletRefuses(f"flag needs an argument: --{name}")
                value, index = args[index], index + 1
            if name == "node-labels":
                self.labels.update(node_labels(value))
            elif name == "register-with-taints":
                self.taints = tuple(parse_taint(spec) for spec in value.split(",") if spec.strip())
            else:
                try:
                    self.max_pods = int(value)
                except ValueError:
                    raise KubeletRefuses(f'invalid argument "{value}" for "--max-pods" flag') from None


def node_labels(value: str) -> dict[str, str]:
    """``--node-labels k=v,k2=v2`` as the kubelet reads and checks it."""
    labels: dict[str, str] = {}
    for pair in value.split(","):
        if not pair.strip():
            continue
        key, has_value, label = pair.partition("=")
        if not has_value:
            raise KubeletRefuses(f'invalid argument "{value}" for "--node-labels" flag: malformed pair')
        labels[key.strip()] = label.strip()
    check_labels(labels)
    return labels


def check_labels(labels: Mapping[str, str]) -> None:
    """The kubelet's own checks of the labels it registers with (NodeRestriction's allowed set; the
    syntax the API server would otherwise refuse the Node for)."""
    unknown = sorted(key for key in labels if _restricted(key))
    if unknown:
        raise KubeletRefuses(
            f"unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: {unknown}"
        )
    for key, value in labels.items():
        if not _qualified(key) or not (len(value) <= 63 and _VALUE.fullmatch(value)):
            raise KubeletRefuses(f"invalid node label {key}={value}")


def _restricted(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    kubernetes = any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    allowed = key in KUBELET_LABELS or any(
        domain == ns or domain.endswith("." + ns) for ns in KUBELET_LABEL_NAMESPACES
    )
    return kubernetes and not allowed


def _qualified(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return bool(
        (not prefix or (len(prefix) <= 253 and _PREFIX.fullmatch(prefix)))
        and len(name) <= 63
        and _NAME.fullmatch(name)
    )


def parse_taint(spec: str) -> dict[str, str]:
    """One ``key[=value]:Effect`` of ``--register-with-taints`` (utiltaints.ParseTaints)."""
    body, _, effect = spec.strip().rpartition(":")
    key, _, value = body.partition("=")
    if not body or effect not in TAINT_EFFECTS or not _qualified(key) or not _VALUE.fullmatch(value):
        raise KubeletRefuses(f"invalid taint spec: {spec.strip()}")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def _taint_object(taint: Any) -> dict[str, str]:
    """A ``registerWithTaints`` entry of a KubeletConfiguration (a v1.Taint)."""
    if not isinstance(taint, dict):
        raise KubeletRefuses(f"registerWithTaints entry {taint!r} is not a taint")
    return parse_taint(_spec(taint.get("key"), taint.get("value"), taint.get("effect")))


def _spec(key: Any, value: Any, effect: Any) -> str:
    """A taint in ``--register-with-taints``' form."""
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _bottlerocket(text: str) -> Bootstrap:
    try:
        settings = tomllib.loads(text).get("settings") or {}
    except tomllib.TOMLDecodeError as exc:
        raise KubeletRefuses(f"the user data is not valid TOML: {exc}") from None
    commands = settings.get("bootstrap-commands") or {}
    raid0 = any(
        ["apiclient", "ephemeral-storage", "init"] in (entry.get("commands") or [])
        for entry in commands.values()
        if isinstance(entry, dict)
    )
    k8s = settings.get("kubernetes") or {}
    pods = k8s.get("max-pods")
    labels = {str(k): str(v) for k, v in (k8s.get("node-labels") or {}).items()}
    check_labels(labels)
    taints: list[dict[str, str]] = []
    for key, entries in (k8s.get("node-taints") or {}).items():
        for entry in [entries] if isinstance(entries, str) else list(entries):
            value, _, effect = str(entry).rpartition(":")
            taints.append(parse_taint(_spec(key, value, effect)))
    return Bootstrap(
        raid0,
        int(pods) if isinstance(pods, int) else None,
        str(k8s.get("cluster-name") or ""),
        labels,
        tuple(taints),
    )


def _nodeadm(text: str) -> Bootstrap:
    """nodeadm merges every NodeConfig part of the MIME document, later parts winning (their kubelet
    flags appended); the kubelet's flags win over its configuration file."""
    raid0, cluster, config_pods, config_taints = False, "", None, None
    kubelet = _Kubelet()
    message = email.message_from_string(text)
    for part in message.walk():
        if part.is_multipart() or part.get_content_type() != "application/node.eks.aws":
            continue
        payload = part.get_payload(decode=True)
        try:
            config = yaml.safe_load(payload.decode("utf-8") if isinstance(payload, bytes) else "") or {}
        except yaml.YAMLError as exc:
            raise KubeletRefuses(f"a NodeConfig part is not valid YAML: {exc}") from None
        spec = (config.get("spec") or {}) if isinstance(config, dict) else {}
        strategy = ((spec.get("instance") or {}).get("localStorage") or {}).get("strategy")
        if strategy:
            raid0 = strategy == "RAID0"
        cluster = str((spec.get("cluster") or {}).get("name") or cluster)
        kubelet_spec = spec.get("kubelet") or {}
        kubelet_config = kubelet_spec.get("config") or {}
        if isinstance(kubelet_config.get("maxPods"), int):
            config_pods = kubelet_config["maxPods"]
        if kubelet_config.get("registerWithTaints") is not None:
            config_taints = tuple(_taint_object(t) for t in kubelet_config["registerWithTaints"] or [])
        kubelet.parse([str(flag) for flag in kubelet_spec.get("flags") or []])
    taints = kubelet.taints if kubelet.taints is not None else config_taints
    pods = kubelet.max_pods if kubelet.max_pods is not None else config_pods
    return Bootstrap(raid0, pods, cluster, kubelet.labels, taints or ())


# AL2's bootstrap line (continuations joined) and the Windows bootstrap's PowerShell arguments.
_BOOTSTRAP_SH = re.compile(r"/etc/eks/bootstrap\.sh(?P<args>(?:[^\n\\]|\\\n|\\.)*)")
_PS_ARGUMENT = r"-{name}\s+(?:'(?P<single>(?:[^']|'')*)'|\"(?P<double>[^\"]*)\")"


def _words(line: str, what: str) -> list[str]:
    """A command line split as the shell splits it (quotes removed)."""
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise KubeletRefuses(f"{what} does not parse: {exc}") from None


def _bootstrap_sh(text: str) -> Bootstrap:
    """AL2: ``/etc/eks/bootstrap.sh <cluster> [options]`` in a shell script part (or the whole text)."""
    scripts = [text]
    if text.lstrip().startswith("MIME-Version"):
        scripts = []
        for part in email.message_from_string(text).walk():
            payload = part.get_payload(decode=True) if not part.is_multipart() else None
            if isinstance(payload, bytes) and part.get_content_type() == "text/x-shellscript":
                scripts.append(payload.decode("utf-8", "replace"))
    for script in scripts:
        match = _BOOTSTRAP_SH.search(script)
        if match is None:
            continue
        args = _words(match["args"].replace("\\\n", " "), "the bootstrap.sh line")
        cluster, raid0, kubelet = "", False, _Kubelet()
        index = 0
        while index < len(args):  # bootstrap.sh: the cluster name, then options that each take a value
            arg, value = args[index], args[index + 1] if index + 1 < len(args) else ""
            if not arg.startswith("-"):
                cluster, index = cluster or arg, index + 1
                continue
            if arg == "--kubelet-extra-args":
                kubelet.parse(_words(value, "--kubelet-extra-args"))
            elif arg == "--local-disks":
                raid0 = value == "raid0"
            index += 2
        return Bootstrap(raid0, kubelet.max_pods, cluster, kubelet.labels, kubelet.taints or ())
    return Bootstrap()


def _windows(text: str) -> Bootstrap:
    """``Start-EKSBootstrap.ps1 -EKSClusterName '<name>' ... -KubeletExtraArgs '<flags>'``."""

    def argument(name: str) -> str | None:
        match = re.search(_PS_ARGUMENT.format(name=name), text)
        if match is None:
            return None
        return match["single"].replace("''", "'") if match["single"] is not None else match["double"]

    kubelet = _Kubelet()
    kubelet.parse(_words(argument("KubeletExtraArgs") or "", "-KubeletExtraArgs"))
    return Bootstrap(
        False, kubelet.max_pods, argument("EKSClusterName") or "", kubelet.labels, kubelet.taints or ()
    )


def kubelet_device(family: str | None, root_device: str) -> str:
    """The device whose volume the kubelet's filesystem (its ephemeral storage) is on."""
    return KUBELET_DEVICE.get(family or "", root_device)


def nodeadm_user_data(
    cluster: str,
    labels: Mapping[str, str] | None = None,
    taints: tuple[str, ...] = (),
    **kubelet_config: Any,
) -> str:
    """AL2023 user data that joins ``cluster`` with these kubelet labels, taints (``key[=value]:Effect``)
    and configuration: what a self-managed node group's launch template gives its nodes, for nodes
    the sandbox's tests start themselves."""
    flags = []
    if labels:
        flags.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    if taints:
        flags.append("--register-with-taints=" + ",".join(taints))
    spec: dict[str, Any] = {
        "cluster": {
            "name": cluster,
            "apiServerEndpoint": "https://127.0.0.1",
            "certificateAuthority": "",
            "cidr": "172.20.0.0/16",
        },
        "kubelet": {"config": dict(kubelet_config), "flags": flags},
    }
    config = yaml.safe_dump({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec})
    return (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
        f"Content-Type: application/node.eks.aws\n\n{config}\n--//--\n"
    )
