"""User data per AMI family, merged with the EC2NodeClass ``userData`` the way Karpenter does.

- AL2: a MIME multipart document; the NodeClass's script(s) first, then a part that runs
  ``/etc/eks/bootstrap.sh`` with the cluster facts and the kubelet settings as flags.
- AL2023: a MIME multipart document; the NodeClass's parts first (shell or NodeConfig),
  then nodeadm's ``NodeConfig`` (``application/node.eks.aws``) with the kubelet config.
- Bottlerocket: the NodeClass's TOML with ``[settings.kubernetes]`` laid over it.
- Windows2019/2022/2025: a ``<powershell>`` block, the NodeClass's PowerShell first, then the EKS
  Windows bootstrap (``Start-EKSBootstrap.ps1``) with the cluster facts and the kubelet flags.
- Custom: the NodeClass's ``userData`` as given, untouched.

``instanceStorePolicy: RAID0`` makes the node assemble its NVMe instance-store disks into a RAID0 array
its kubelet and containerd live on, as Karpenter's user data asks each family to: AL2's bootstrap.sh
``--local-disks raid0``, AL2023's NodeConfig ``instance.localStorage.strategy: RAID0``, Bottlerocket's
``settings.bootstrap-commands`` (``apiclient ephemeral-storage init`` and ``bind``). Windows and Custom
get nothing (Karpenter's docs: configure the disks yourself).

Kubelet settings are only passed when the NodePool/NodeClass sets them; otherwise the AMI
computes its own defaults (max pods from the ENI limits, kube-reserved from the size), which
is what the scheduling core's allocatable model assumes.

User data runs as root on the node, and labels, taints and kubelet settings may come from a
NodeClaim that someone wrote by hand. So nothing is pasted into a script as it is:
- every value that reaches the node is checked here against the pattern Kubernetes itself
  enforces (label keys/values, taint effects) or, for kubelet settings, a conservative set of
  characters, whatever validated it before (the flows validate too; this is the last guard);
- every argument of AL2's bootstrap.sh line is quoted with ``shlex.quote``;
- YAML is written by PyYAML and TOML by tomli-w, never by string formatting.
User data is UTF-8: a NodeClass script with non-ASCII text goes in an 8bit UTF-8 part.
"""

from __future__ import annotations

import email
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from email.mime.multipart import MIMEMultipart
from email.policy import SMTP
from typing import Any

import tomli_w
import yaml

from nodewright.api.labels import WINDOWS_FAMILIES
from nodewright.cloud.eks import ClusterInfo
from nodewright.cloud.errors import InvalidNodeClassError

MIME_BOUNDARY = "//"
NODECONFIG_CONTENT_TYPE = "application/node.eks.aws"


# Labels the kubelet may set on its own Node (NodeRestriction); with any other kubernetes.io or
# k8s.io label in --node-labels it refuses to start. The API server side adds those later.
KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "node.kubernetes.io/windows-build",
    }
)
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def kubelet_may_set(label: str) -> bool:
    """Whether the kubelet accepts ``label`` in --node-labels (the NodeRestriction rules)."""
    if "/" not in label:
        return True
    domain = label.split("/", 1)[0]
    restricted = any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    if not restricted or label in KUBELET_LABELS:
        return True
    return any(domain == ns or domain.endswith("." + ns) for ns in KUBELET_LABEL_NAMESPACES)


@dataclass(frozen=True)
class NodeBootstrap:
    """Everything a family's user data needs besides the NodeClass's own ``userData``."""

    cluster: ClusterInfo
    labels: Mapping[str, str] = field(default_factory=dict)  # filtered with kubelet_may_set
    taints: Sequence[Mapping[str, Any]] = ()  # taints + startupTaints, {key, value?, effect}
    kubelet: Mapping[str, Any] = field(default_factory=dict)
    custom_user_data: str | None = None
    nodeclass_name: str = ""
    instance_store_raid0: bool = False  # instanceStorePolicy: RAID0


# What Kubernetes accepts (apimachinery's IsQualifiedName / IsValidLabelValue), and the kubelet
# settings' characters (quantities, percentages, signals, durations, "<"): nothing a shell, a
# systemd drop-in or nodeadm's environment file would read as syntax.
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_KUBELET_TOKEN = re.compile(r"[A-Za-z0-9._%+\-]+")


class UnsafeNodeValueError(InvalidNodeClassError):
    """A label, taint or kubelet setting that is not valid Kubernetes syntax reached user data."""


def _qualified_name(key: object, what: str) -> str:
    text = str(key)
    prefix, _, name = text.rpartition("/")
    prefix_ok = not prefix or (len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix))
    if not prefix_ok or len(name) > 63 or not _NAME.fullmatch(name):
        raise UnsafeNodeValueError(
            f"{what} {text!r} is not a valid Kubernetes key (optional DNS prefix/, then up to 63 "
            "letters, digits, '-', '_', '.'); the node is not launched with it"
        )
    return text


def _label_value(value: object, what: str) -> str:
    text = "" if value is None else str(value)
    if len(text) > 63 or not _LABEL_VALUE.fullmatch(text):
        raise UnsafeNodeValueError(
            f"{what} value {text!r} is not a valid Kubernetes label value (up to 63 letters, digits, "
            "'-', '_', '.'); the node is not launched with it"
        )
    return text


def _kubelet_token(value: object, what: str) -> str:
    text = str(value)
    if not _KUBELET_TOKEN.fullmatch(text):
        raise UnsafeNodeValueError(
            f"kubelet setting {what} = {text!r} holds characters a kubelet flag cannot take; give a "
            "quantity, a percentage or a duration"
        )
    return text


def safe_labels(spec: NodeBootstrap) -> dict[str, str]:
    """The bootstrap's labels, each key and value checked against Kubernetes' own rules."""
    return {
        _qualified_name(key, "label"): _label_value(value, f"label {key}")
        for key, value in sorted(spec.labels.items())
    }


def safe_taints(spec: NodeBootstrap) -> list[tuple[str, str, str]]:
    """The bootstrap's taints as checked (key, value, effect) triples."""
    out = []
    for taint in spec.taints:
        key = _qualified_name(taint.get("key"), "taint key")
        value = _label_value(taint.get("value"), f"taint {key}")
        effect = str(taint.get("effect"))
        if effect not in _TAINT_EFFECTS:
            raise UnsafeNodeValueError(
                f"taint {key} effect {effect!r} is not one of {', '.join(sorted(_TAINT_EFFECTS))}"
            )
        out.append((key, value, effect))
    return out


def _taint(key: str, value: str, effect: str) -> str:
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _pairs(mapping: Mapping[str, Any], what: str, sep: str = "=") -> str:
    return ",".join(
        f"{_kubelet_token(k, what)}{sep}{_kubelet_token(v, f'{what}[{k}]')}"
        for k, v in sorted(mapping.items())
    )


def _cluster_dns(spec: NodeBootstrap) -> list[str]:
    return [str(ip) for ip in spec.kubelet.get("clusterDNS") or []] or [spec.cluster.dns_ip]


def kubelet_flags(spec: NodeBootstrap) -> list[str]:
    """Kubelet command-line flags for labels, taints and the kubelet settings (AL2's format)."""
    kubelet = spec.kubelet
    flags: list[str] = []
    labels = safe_labels(spec)
    if labels:
        flags.append(f'--node-labels="{",".join(f"{k}={v}" for k, v in labels.items())}"')
    taints = safe_taints(spec)
    if taints:
        flags.append(f'--register-with-taints="{",".join(_taint(*t) for t in taints)}"')
    if kubelet.get("maxPods") is not None:
        flags.append(f"--max-pods={int(kubelet['maxPods'])}")
    if kubelet.get("podsPerCore") is not None:
        flags.append(f"--pods-per-core={int(kubelet['podsPerCore'])}")
    for key, flag in (("systemReserved", "system-reserved"), ("kubeReserved", "kube-reserved")):
        if kubelet.get(key):
            flags.append(f"--{flag}={_pairs(kubelet[key], key)}")
    for key, flag in (("evictionHard", "eviction-hard"), ("evictionSoft", "eviction-soft")):
        if kubelet.get(key):
            flags.append(f'--{flag}="{_pairs(kubelet[key], key, "<")}"')
    if kubelet.get("evictionSoftGracePeriod"):
        grace = _pairs(kubelet["evictionSoftGracePeriod"], "evictionSoftGracePeriod")
        flags.append(f'--eviction-soft-grace-period="{grace}"')
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        flags.append(f"--eviction-max-pod-grace-period={int(kubelet['evictionMaxPodGracePeriod'])}")
    if kubelet.get("imageGCHighThresholdPercent") is not None:
        flags.append(f"--image-gc-high-threshold={int(kubelet['imageGCHighThresholdPercent'])}")
    if kubelet.get("imageGCLowThresholdPercent") is not None:
        flags.append(f"--image-gc-low-threshold={int(kubelet['imageGCLowThresholdPercent'])}")
    if kubelet.get("cpuCFSQuota") is not None:
        flags.append(f"--cpu-cfs-quota={str(bool(kubelet['cpuCFSQuota'])).lower()}")
    return flags


def _text_part(text: str, content_type: str) -> Message:
    """One MIME part: 7bit US-ASCII when the text is ASCII, else 8bit UTF-8 (user data is UTF-8)."""
    part = Message()
    charset = "us-ascii" if text.isascii() else "utf-8"
    part["Content-Type"] = f'{content_type}; charset="{charset}"'
    part["Content-Transfer-Encoding"] = "7bit" if text.isascii() else "8bit"
    part.set_payload(text)
    return part


def _user_parts(user_data: str | None, default_type: str, nodeclass: str) -> list[Message]:
    """The NodeClass's userData as MIME parts: its own parts if it is MIME, else one part."""
    if not user_data or not user_data.strip():
        return []
    if user_data.lstrip().startswith("MIME-Version"):
        message = email.message_from_bytes(user_data.encode("utf-8"))
        parts = []
        for part in message.walk():
            if part.is_multipart():
                continue
            payload = part.get_payload(decode=True)
            payload = payload if isinstance(payload, bytes) else b""
            charset = part.get_content_charset() or "utf-8"
            try:
                text = payload.decode(charset)
            except (LookupError, UnicodeDecodeError) as exc:
                raise InvalidNodeClassError(
                    f"EC2NodeClass {nodeclass!r}: a userData MIME part is not valid {charset} text ({exc}); "
                    "write user data as UTF-8"
                ) from exc
            parts.append(_text_part(text, part.get_content_type()))
        return parts
    if user_data.lstrip().startswith("#!"):
        content_type = "text/x-shellscript"
    elif "kind: NodeConfig" in user_data or "node.eks.aws/" in user_data:
        content_type = NODECONFIG_CONTENT_TYPE
    else:
        content_type = default_type
    return [_text_part(user_data, content_type)]


def _mime(parts: Sequence[Message]) -> str:
    message = MIMEMultipart("mixed", boundary=MIME_BOUNDARY)
    for part in parts:
        message.attach(part)
    return message.as_string(policy=SMTP.clone(linesep="\n"))


def al2(spec: NodeBootstrap) -> str:
    cluster = spec.cluster
    q = shlex.quote
    lines = [
        "#!/bin/bash -xe",
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
        f"/etc/eks/bootstrap.sh {q(cluster.name)} --apiserver-endpoint {q(cluster.endpoint)} "
        f"--b64-cluster-ca {q(cluster.certificate_authority)} \\",
        f"--dns-cluster-ip {q(_cluster_dns(spec)[0])} \\",
    ]
    if spec.kubelet.get("maxPods") is not None:
        lines.append("--use-max-pods false \\")
    extra = f"--kubelet-extra-args {q(' '.join(kubelet_flags(spec)))}"
    if spec.instance_store_raid0:
        lines += [f"{extra} \\", "--local-disks raid0"]
    else:
        lines.append(extra)
    bootstrap = _text_part("\n".join(lines) + "\n", "text/x-shellscript")
    return _mime([*_user_parts(spec.custom_user_data, "text/x-shellscript", spec.nodeclass_name), bootstrap])


def nodeconfig(spec: NodeBootstrap) -> dict[str, Any]:
    """nodeadm's NodeConfig for AL2023, kubelet settings under ``kubelet.config``."""
    kubelet = spec.kubelet
    config: dict[str, Any] = {"clusterDNS": _cluster_dns(spec)}
    for key in (
        "maxPods",
        "podsPerCore",
        "systemReserved",
        "kubeReserved",
        "evictionHard",
        "evictionSoft",
        "evictionSoftGracePeriod",
        "evictionMaxPodGracePeriod",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "cpuCFSQuota",
    ):
        if kubelet.get(key) is not None:
            config[key] = kubelet[key]
    flags = []
    labels = safe_labels(spec)
    if labels:
        flags.append(f"--node-labels={','.join(f'{k}={v}' for k, v in labels.items())}")
    taints = safe_taints(spec)
    if taints:
        flags.append(f"--register-with-taints={','.join(_taint(*t) for t in taints)}")
    body: dict[str, Any] = {"config": config}
    if flags:
        body["flags"] = flags
    node_spec: dict[str, Any] = {
        "cluster": {
            "name": spec.cluster.name,
            "apiServerEndpoint": spec.cluster.endpoint,
            "certificateAuthority": spec.cluster.certificate_authority,
            "cidr": spec.cluster.service_cidr,
        },
        "kubelet": body,
    }
    if spec.instance_store_raid0:
        node_spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": node_spec}


def al2023(spec: NodeBootstrap) -> str:
    part = _text_part(yaml.safe_dump(nodeconfig(spec), sort_keys=False), NODECONFIG_CONTENT_TYPE)
    return _mime([*_user_parts(spec.custom_user_data, NODECONFIG_CONTENT_TYPE, spec.nodeclass_name), part])


def dump_toml(document: Mapping[str, Any]) -> str:
    """Bottlerocket settings as TOML, written by tomli-w (every string escaped by the library)."""
    return tomli_w.dumps(document)


def bottlerocket(spec: NodeBootstrap) -> str:
    try:
        document = tomllib.loads(spec.custom_user_data or "")
    except tomllib.TOMLDecodeError as exc:
        raise InvalidNodeClassError(
            f"EC2NodeClass {spec.nodeclass_name!r}: userData is not valid TOML for Bottlerocket: {exc}"
        ) from exc
    settings = document.setdefault("settings", {})
    k8s = settings.setdefault("kubernetes", {})
    kubelet = spec.kubelet
    k8s["cluster-name"] = spec.cluster.name
    k8s["api-server"] = spec.cluster.endpoint
    k8s["cluster-certificate"] = spec.cluster.certificate_authority
    k8s["cluster-dns-ip"] = _cluster_dns(spec) if len(_cluster_dns(spec)) > 1 else _cluster_dns(spec)[0]
    if kubelet.get("maxPods") is not None:
        k8s["max-pods"] = int(kubelet["maxPods"])
    for key, setting in (
        ("systemReserved", "system-reserved"),
        ("kubeReserved", "kube-reserved"),
        ("evictionHard", "eviction-hard"),
        ("evictionSoft", "eviction-soft"),
        ("evictionSoftGracePeriod", "eviction-soft-grace-period"),
    ):
        if kubelet.get(key):
            k8s[setting] = {**k8s.get(setting, {}), **{str(k): str(v) for k, v in kubelet[key].items()}}
    for key, setting in (
        ("evictionMaxPodGracePeriod", "eviction-max-pod-grace-period"),
        ("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
        ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent"),
        ("podsPerCore", "pods-per-core"),
    ):
        if kubelet.get(key) is not None:
            k8s[setting] = int(kubelet[key])
    if kubelet.get("cpuCFSQuota") is not None:
        k8s["cpu-cfs-quota-enforced"] = bool(kubelet["cpuCFSQuota"])
    labels = safe_labels(spec)
    if labels:
        k8s["node-labels"] = {**k8s.get("node-labels", {}), **labels}
    checked_taints = safe_taints(spec)
    if checked_taints:
        taints: dict[str, list[str]] = {key: list(v) for key, v in k8s.get("node-taints", {}).items()}
        for key, value, effect in checked_taints:
            entry = f"{value}:{effect}"
            taints.setdefault(key, [])
            if entry not in taints[key]:
                taints[key].append(entry)
        k8s["node-taints"] = taints
    if spec.instance_store_raid0:
        commands = settings.setdefault("bootstrap-commands", {})
        commands[BOTTLEROCKET_INSTANCE_STORE_COMMAND] = {
            "commands": [
                ["apiclient", "ephemeral-storage", "init"],
                ["apiclient", "ephemeral-storage", "bind", "--dirs", *BOTTLEROCKET_EPHEMERAL_DIRS],
            ],
            "mode": "always",
            "essential": True,
        }
    return dump_toml(document) + "\n"


# Karpenter's Bottlerocket bootstrap command for instanceStorePolicy RAID0 (Bottlerocket v1.22.0+): the
# instance-store disks as one array, with containerd's, the kubelet's and the pods' logs directories on it.
BOTTLEROCKET_INSTANCE_STORE_COMMAND = "000-mount-instance-storage"
BOTTLEROCKET_EPHEMERAL_DIRS = ("/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")
WINDOWS_BOOTSTRAP_SCRIPT = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"


def _ps_quote(value: str) -> str:
    """A PowerShell single-quoted string (a quote inside is doubled, nothing else is special)."""
    return "'" + value.replace("'", "''") + "'"


def windows(spec: NodeBootstrap) -> str:
    """The EKS Windows AMIs' bootstrap, as Karpenter's Windows family writes it: the NodeClass's
    PowerShell, then ``Start-EKSBootstrap.ps1`` with the cluster name, endpoint and CA, the kubelet
    flags (node labels and taints quoted as AL2's; ``--max-pods`` of 110 unless the kubelet settings
    say otherwise, the pod density Windows nodes have) and the cluster DNS IP."""
    from nodewright.scheduling.instancetypes import WINDOWS_MAX_PODS

    cluster = spec.cluster
    flags = kubelet_flags(spec)
    if spec.kubelet.get("maxPods") is None:
        flags.append(f"--max-pods={WINDOWS_MAX_PODS}")
    lines = ["<powershell>"]
    if spec.custom_user_data and spec.custom_user_data.strip():
        lines.append(spec.custom_user_data.rstrip("\n"))
    lines.append(f'[string]$EKSBootstrapScriptFile = "{WINDOWS_BOOTSTRAP_SCRIPT}"')
    lines.append(
        f"& $EKSBootstrapScriptFile -EKSClusterName {_ps_quote(cluster.name)} "
        f"-APIServerEndpoint {_ps_quote(cluster.endpoint)} "
        f"-Base64ClusterCA {_ps_quote(cluster.certificate_authority)} "
        f"-KubeletExtraArgs {_ps_quote(' '.join(flags))} "
        f"-DNSClusterIP {_ps_quote(_cluster_dns(spec)[0])}"
    )
    lines.append("</powershell>")
    return "\n".join(lines)


def render(family: str, spec: NodeBootstrap) -> str:
    """The user data (plain text; the launch template base64-encodes it) for an AMI family."""
    if family == "AL2":
        return al2(spec)
    if family == "AL2023":
        return al2023(spec)
    if family == "Bottlerocket":
        return bottlerocket(spec)
    if family in WINDOWS_FAMILIES:
        return windows(spec)
    if family == "Custom":
        return spec.custom_user_data or ""
    raise InvalidNodeClassError(
        f"EC2NodeClass {spec.nodeclass_name!r}: AMI family {family!r} is not supported; use AL2, AL2023, "
        "Bottlerocket, Windows2019, Windows2022, Windows2025 or Custom"
    )
