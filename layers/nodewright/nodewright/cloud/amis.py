"""AMI resolution for an EC2NodeClass.

Aliases (``al2023@latest``, ``al2@v20240807``, ``bottlerocket@v1.22.0``, ``windows2022@latest``, ...)
read the public SSM parameters for the cluster's Kubernetes version, once per architecture (and the
GPU variant where the family publishes one; Windows Server Core: x86_64 only, ``latest`` only).
Selector terms (id / tags / name / owner) go to
DescribeImages; an ``ssmParameter`` term (a parameter name or ARN) is read with SSM GetParameter
and its AMI id described like an id term. The newest image per architecture wins. ``Custom``
needs selector terms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api.labels import WINDOWS_BUILDS
from nodewright.cloud.cache import TTLCache
from nodewright.cloud.eks import ClusterInfo
from nodewright.cloud.errors import InvalidNodeClassError, SelectorNoMatchError
from nodewright.cloud.network import term_filters
from nodewright.cloud.nodeclass import NodeClass

AMI_CACHE_SECONDS = 300.0
ARCHES = ("amd64", "arm64")
EC2_ARCH = {"amd64": "x86_64", "arm64": "arm64"}
K8S_ARCH = {"x86_64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True)
class Image:
    id: str
    arch: str  # Kubernetes naming: amd64 | arm64
    gpu: bool = False  # an accelerated variant (NVIDIA drivers) meant for GPU instance types
    name: str = ""
    creation_date: str = ""
    windows_build: str = ""  # an EKS-optimized Windows Server AMI: its node.kubernetes.io/windows-build


def ssm_parameters(family: str, version: str, k8s: str, arch: str, gpu: bool) -> str | None:
    """The public SSM parameter holding the AMI id for an alias, or None when none is published."""
    ec2_arch = EC2_ARCH[arch]
    latest = version == "latest"
    date = version.lstrip("v")
    if family == "AL2023":
        variant = "nvidia" if gpu else "standard"
        if gpu and arch == "arm64":
            return None
        leaf = "recommended" if latest else f"amazon-eks-node-al2023-{ec2_arch}-{variant}-{k8s}-v{date}"
        return f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/{variant}/{leaf}/image_id"
    if family == "AL2":
        if gpu and arch == "arm64":
            return None
        folders = {"amd64": "amazon-linux-2", "arm64": "amazon-linux-2-arm64"}
        folder = "amazon-linux-2-gpu" if gpu else folders[arch]
        if latest:
            return f"/aws/service/eks/optimized-ami/{k8s}/{folder}/recommended/image_id"
        node = {"amazon-linux-2": "node", "amazon-linux-2-arm64": "arm64-node"}.get(folder, "gpu-node")
        return f"/aws/service/eks/optimized-ami/{k8s}/{folder}/amazon-eks-{node}-{k8s}-v{date}/image_id"
    if family == "Bottlerocket":
        flavour = f"aws-k8s-{k8s}-nvidia" if gpu else f"aws-k8s-{k8s}"
        return f"/aws/service/bottlerocket/{flavour}/{ec2_arch}/{'latest' if latest else date}/image_id"
    if family in WINDOWS_BUILDS:
        # The EKS-optimized Windows Server Core AMI: x86_64 only, no GPU variant, only the latest one.
        if gpu or arch != "amd64" or not latest:
            return None
        return windows_ssm_parameter(family, k8s)
    return None


def windows_ssm_parameter(family: str, k8s: str) -> str:
    """The public parameter of the latest EKS-optimized Windows Server Core AMI of a family (Amazon EKS
    user guide, "Retrieve recommended Microsoft Windows AMI IDs"): ``Windows2022`` on 1.32 →
    ``/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id``."""
    year = family.removeprefix("Windows")
    return f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"


class AmiResolver:
    """Resolves a NodeClass's AMIs (cached per warm container for 5 minutes)."""

    def __init__(self, ec2: Any, ssm: Any, cluster: Callable[[], ClusterInfo]) -> None:
        self._ec2 = ec2
        self._ssm = ssm
        self._cluster = cluster
        self._images: TTLCache[list[Image]] = TTLCache(AMI_CACHE_SECONDS)

    def images(self, nodeclass: NodeClass) -> list[Image]:
        """The AMIs a NodeClass launches: at most one per (architecture, GPU variant)."""
        key = (nodeclass.name, repr(nodeclass.ami_selector_terms), nodeclass.ami_family)
        return self._images.get_or_load(key, lambda: self._resolve(nodeclass))

    def _resolve(self, nodeclass: NodeClass) -> list[Image]:
        family = nodeclass.ami_family
        alias = nodeclass.alias
        if alias:
            images = self._from_alias(family, alias)
        else:
            terms = nodeclass.ami_selector_terms
            if not terms:
                raise InvalidNodeClassError(
                    f"EC2NodeClass {nodeclass.name!r}: amiFamily {family} needs spec.amiSelectorTerms "
                    "(an alias such as al2023@latest, or id/tags/name terms)"
                )
            images = self._from_terms(terms)
        if not images:
            raise SelectorNoMatchError("ami", nodeclass.name, nodeclass.ami_selector_terms)
        return images

    def _from_alias(self, family: str, alias: str) -> list[Image]:
        version = alias.split("@", 1)[1] if "@" in alias else "latest"
        k8s = self._cluster().version
        found: list[Image] = []
        for arch in ARCHES:
            for gpu in (False, True):
                name = ssm_parameters(family, version, k8s, arch, gpu)
                if not name:
                    continue
                try:
                    value = self._ssm.get_parameter(Name=name)["Parameter"]["Value"]
                except ClientError as exc:
                    if exc.response["Error"]["Code"] in ("ParameterNotFound", "ParameterVersionNotFound"):
                        continue  # no such variant for this version/arch: fine
                    raise
                build = WINDOWS_BUILDS.get(family, "")
                found.append(Image(id=value, arch=arch, gpu=gpu, name=name, windows_build=build))
        return found

    def _ssm_image_id(self, parameter: str) -> str | None:
        """The AMI id an ``ssmParameter`` term names (a parameter name or ARN; GetParameter takes both),
        or None when the parameter does not exist."""
        try:
            value = self._ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("ParameterNotFound", "ParameterVersionNotFound"):
                return None
            raise
        return str(value).strip() or None

    def _from_terms(self, terms: Iterable[dict[str, Any]]) -> list[Image]:
        candidates: dict[str, Image] = {}
        for given in terms:
            term = given
            if given.get("ssmParameter"):
                # Karpenter's ssmParameter term: the parameter holds an AMI id, described like an id term.
                image_id = self._ssm_image_id(str(given["ssmParameter"]))
                if image_id is None:
                    continue
                term = {"id": image_id}
            filters = term_filters(term, "image-id", "name")
            # A name without an owner searches our own and Amazon's images, as Karpenter does.
            default_owners = ["self", "amazon"] if term.get("name") else []
            owners = [str(term["owner"])] if term.get("owner") else default_owners
            if not filters and not owners:
                continue
            kwargs: dict[str, Any] = {"Filters": filters} if filters else {}
            if owners:
                kwargs["Owners"] = owners
            for raw in self._ec2.describe_images(**kwargs).get("Images", []):
                # DescribeImages always names the architecture; emulators may not: assume x86_64 then.
                arch = K8S_ARCH.get(raw.get("Architecture") or "x86_64")
                if arch and raw.get("State", "available") == "available":
                    candidates[raw["ImageId"]] = Image(
                        id=raw["ImageId"],
                        arch=arch,
                        name=raw.get("Name", ""),
                        creation_date=raw.get("CreationDate", ""),
                    )
        newest: dict[str, Image] = {}
        for image in sorted(candidates.values(), key=lambda i: (i.creation_date, i.id), reverse=True):
            newest.setdefault(image.arch, image)
        return sorted(newest.values(), key=lambda i: i.arch)
