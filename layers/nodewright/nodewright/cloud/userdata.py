"""User data per AMI family, merged with the EC2NodeClass ``userData`` the way Karpenter does.

- AL2: a MIME multipart document; the NodeClass's script(s) first, then a part that runs
  ``/etc/eks/bootstrap.sh`` with the cluster facts and the kubelet settings as flags.
- AL2023: a MIME multipart document; the NodeClass's parts first (shell or NodeConfig),
  then nodeadm's ``NodeConfig`` (``application/node.eks.aws``) with the kubelet config.
- Bottlerocket: the NodeClass's TOML with ``[settings.kubernetes]`` laid over it.
- Custom: the NodeClass's ``userData`` as given, untouched.

Kubelet settings are only passed when the NodePool/NodeClass sets them; otherwise the AMI
computes its own defaults (max pods from the ENI limits, kube-reserved from the size), which
is what the scheduling core's allocatable model assumes.
"""

from __future__ import annotations

import email
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from email.policy import SMTP
from typing import Any

import yaml

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


def _taint(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint['key']}={value}:{taint['effect']}" if value else f"{taint['key']}:{taint['effect']}"


def _pairs(mapping: Mapping[str, Any], sep: str = "=") -> str:
    return ",".join(f"{k}{sep}{v}" for k, v in sorted(mapping.items()))


def _cluster_dns(spec: NodeBootstrap) -> list[str]:
    return [str(ip) for ip in spec.kubelet.get("clusterDNS") or []] or [spec.cluster.dns_ip]


def kubelet_flags(spec: NodeBootstrap) -> list[str]:
    """Kubelet command-line flags for labels, taints and the kubelet settings (AL2's format)."""
    kubelet = spec.kubelet
    flags: list[str] = []
    if spec.labels:
        flags.append(f'--node-labels="{_pairs(spec.labels)}"')
    if spec.taints:
        flags.append(f'--register-with-taints="{",".join(_taint(t) for t in spec.taints)}"')
    if kubelet.get("maxPods") is not None:
        flags.append(f"--max-pods={int(kubelet['maxPods'])}")
    if kubelet.get("podsPerCore") is not None:
        flags.append(f"--pods-per-core={int(kubelet['podsPerCore'])}")
    for key, flag in (("systemReserved", "system-reserved"), ("kubeReserved", "kube-reserved")):
        if kubelet.get(key):
            flags.append(f"--{flag}={_pairs(kubelet[key])}")
    for key, flag in (("evictionHard", "eviction-hard"), ("evictionSoft", "eviction-soft")):
        if kubelet.get(key):
            flags.append(f'--{flag}="{_pairs(kubelet[key], "<")}"')
    if kubelet.get("evictionSoftGracePeriod"):
        flags.append(f'--eviction-soft-grace-period="{_pairs(kubelet["evictionSoftGracePeriod"])}"')
    if kubelet.get("evictionMaxPodGracePeriod") is not None:
        flags.append(f"--eviction-max-pod-grace-period={int(kubelet['evictionMaxPodGracePeriod'])}")
    if kubelet.get("imageGCHighThresholdPercent") is not None:
        flags.append(f"--image-gc-high-threshold={int(kubelet['imageGCHighThresholdPercent'])}")
    if kubelet.get("imageGCLowThresholdPercent") is not None:
        flags.append(f"--image-gc-low-threshold={int(kubelet['imageGCLowThresholdPercent'])}")
    if kubelet.get("cpuCFSQuota") is not None:
        flags.append(f"--cpu-cfs-quota={str(bool(kubelet['cpuCFSQuota'])).lower()}")
    return flags


def _user_parts(user_data: str | None, default_type: str) -> list[MIMEText]:
    """The NodeClass's userData as MIME parts: its own parts if it is MIME, else one part."""
    if not user_data or not user_data.strip():
        return []
    if user_data.lstrip().startswith("MIME-Version"):
        message = email.message_from_string(user_data)
        parts = []
        for part in message.walk():
            if part.is_multipart():
                continue
            subtype = part.get_content_subtype()
            payload = part.get_payload(decode=True)
            text = payload.decode() if isinstance(payload, bytes) else ""
            parts.append(MIMEText(text, subtype, "us-ascii"))
            parts[-1].replace_header("Content-Type", part.get_content_type() + '; charset="us-ascii"')
        return parts
    if user_data.lstrip().startswith("#!"):
        content_type = "text/x-shellscript"
    elif "kind: NodeConfig" in user_data or "node.eks.aws/" in user_data:
        content_type = NODECONFIG_CONTENT_TYPE
    else:
        content_type = default_type
    part = MIMEText(user_data, "plain", "us-ascii")
    part.replace_header("Content-Type", f'{content_type}; charset="us-ascii"')
    return [part]


def _mime(parts: Sequence[MIMEText]) -> str:
    message = MIMEMultipart("mixed", boundary=MIME_BOUNDARY)
    for part in parts:
        del part["MIME-Version"]
        del part["Content-Transfer-Encoding"]
        part.add_header("Content-Transfer-Encoding", "7bit")
        message.attach(part)
    return message.as_string(policy=SMTP.clone(linesep="\n"))


def al2(spec: NodeBootstrap) -> str:
    cluster = spec.cluster
    lines = [
        "#!/bin/bash -xe",
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
        f"/etc/eks/bootstrap.sh '{cluster.name}' --apiserver-endpoint '{cluster.endpoint}' "
        f"--b64-cluster-ca '{cluster.certificate_authority}' \\",
        f"--dns-cluster-ip '{_cluster_dns(spec)[0]}' \\",
    ]
    if spec.kubelet.get("maxPods") is not None:
        lines.append("--use-max-pods false \\")
    lines.append(f"--kubelet-extra-args '{' '.join(kubelet_flags(spec))}'")
    bootstrap = MIMEText("\n".join(lines) + "\n", "x-shellscript", "us-ascii")
    return _mime([*_user_parts(spec.custom_user_data, "text/x-shellscript"), bootstrap])


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
    if spec.labels:
        flags.append(f"--node-labels={_pairs(spec.labels)}")
    if spec.taints:
        flags.append(f"--register-with-taints={','.join(_taint(t) for t in spec.taints)}")
    body: dict[str, Any] = {"config": config}
    if flags:
        body["flags"] = flags
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {
            "cluster": {
                "name": spec.cluster.name,
                "apiServerEndpoint": spec.cluster.endpoint,
                "certificateAuthority": spec.cluster.certificate_authority,
                "cidr": spec.cluster.service_cidr,
            },
            "kubelet": body,
        },
    }


def al2023(spec: NodeBootstrap) -> str:
    part = MIMEText(yaml.safe_dump(nodeconfig(spec), sort_keys=False), "plain", "us-ascii")
    part.replace_header("Content-Type", f'{NODECONFIG_CONTENT_TYPE}; charset="us-ascii"')
    return _mime([*_user_parts(spec.custom_user_data, NODECONFIG_CONTENT_TYPE), part])


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def dump_toml(document: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> str:
    """A TOML writer for Bottlerocket settings (tables, strings, numbers, booleans, lists)."""
    scalars = [(k, v) for k, v in document.items() if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in document.items() if isinstance(v, Mapping)]
    out: list[str] = []
    if prefix and (scalars or not tables):
        out.append("[" + ".".join(_toml_key(p) for p in prefix) + "]")
    out.extend(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars)
    text = "\n".join(out)
    for key, table in tables:
        child = dump_toml(table, (*prefix, key))
        text = f"{text}\n\n{child}" if text else child
    return text


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
    if spec.labels:
        k8s["node-labels"] = {**k8s.get("node-labels", {}), **dict(spec.labels)}
    if spec.taints:
        taints: dict[str, list[str]] = {key: list(v) for key, v in k8s.get("node-taints", {}).items()}
        for taint in spec.taints:
            entry = f"{taint.get('value') or ''}:{taint['effect']}"
            taints.setdefault(str(taint["key"]), [])
            if entry not in taints[str(taint["key"])]:
                taints[str(taint["key"])].append(entry)
        k8s["node-taints"] = taints
    return dump_toml(document) + "\n"


def render(family: str, spec: NodeBootstrap) -> str:
    """The user data (plain text; the launch template base64-encodes it) for an AMI family."""
    if family == "AL2":
        return al2(spec)
    if family == "AL2023":
        return al2023(spec)
    if family == "Bottlerocket":
        return bottlerocket(spec)
    if family == "Custom":
        return spec.custom_user_data or ""
    raise InvalidNodeClassError(
        f"EC2NodeClass {spec.nodeclass_name!r}: AMI family {family!r} is not supported; use AL2, AL2023, "
        "Bottlerocket or Custom"
    )
