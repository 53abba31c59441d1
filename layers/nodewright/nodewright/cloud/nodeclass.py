"""A defensive read-only view of an EC2NodeClass (karpenter.k8s.aws/v1), given as a dict or a model.

The provider accepts the v1 object as the API server returns it (camelCase dict, with or
without ``metadata``) or an ``nodewright.api`` model that can dump itself to that dict, and
reads only the fields it needs, with Karpenter's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodewright.api import labels
from nodewright.api.models import MetadataOptions
from nodewright.cloud.errors import InvalidNodeClassError

FAMILY_BY_ALIAS = {**labels.ALIAS_FAMILIES, **labels.WINDOWS_ALIAS_FAMILIES}


def _as_dict(nodeclass: Any) -> dict[str, Any]:
    if isinstance(nodeclass, Mapping):
        return dict(nodeclass)
    for method in ("to_dict", "as_dict", "model_dump"):
        dump = getattr(nodeclass, method, None)
        if callable(dump):
            try:
                return dict(dump(by_alias=True)) if method == "model_dump" else dict(dump())
            except TypeError:
                return dict(dump())
    raise InvalidNodeClassError(
        f"cannot read an EC2NodeClass from {type(nodeclass).__name__}; pass the karpenter.k8s.aws/v1 dict"
    )


class NodeClass:
    """What the provider needs from an EC2NodeClass."""

    def __init__(self, nodeclass: Any) -> None:
        document = _as_dict(nodeclass)
        self.raw = document
        metadata = document.get("metadata") or {}
        self.spec: dict[str, Any] = dict(document.get("spec") or ({} if "metadata" in document else document))
        self.name: str = str(metadata.get("name") or document.get("name") or "default")
        self.uid: str = str(metadata.get("uid") or "")

    @property
    def ami_selector_terms(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.spec.get("amiSelectorTerms") or []]

    @property
    def alias(self) -> str | None:
        for term in self.ami_selector_terms:
            if term.get("alias"):
                return str(term["alias"])
        return None

    @property
    def ami_family(self) -> str:
        """AL2/AL2023/Bottlerocket/Windows20xx/Custom: from the alias (v1) or the explicit amiFamily."""
        alias = self.alias
        if alias:
            family = FAMILY_BY_ALIAS.get(alias.split("@", 1)[0].lower())
            if family is None:
                raise InvalidNodeClassError(
                    f"EC2NodeClass {self.name!r}: unknown AMI alias {alias!r}; use al2, al2023 or "
                    "bottlerocket followed by @latest or @<version>, or windows2019, windows2022 or "
                    "windows2025 followed by @latest"
                )
            return family
        family = self.spec.get("amiFamily") or ("Custom" if self.ami_selector_terms else "AL2023")
        return str(family)

    @property
    def subnet_selector_terms(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.spec.get("subnetSelectorTerms") or []]

    @property
    def security_group_selector_terms(self) -> list[dict[str, Any]]:
        return [dict(t) for t in self.spec.get("securityGroupSelectorTerms") or []]

    @property
    def capacity_reservation_selector_terms(self) -> list[dict[str, Any]]:
        """``spec.capacityReservationSelectorTerms`` (id, tags, ownerID, instanceMatchCriteria)."""
        return list(self.spec.get("capacityReservationSelectorTerms") or [])

    @property
    def role(self) -> str | None:
        return self.spec.get("role") or None

    @property
    def instance_profile(self) -> str | None:
        return self.spec.get("instanceProfile") or None

    @property
    def user_data(self) -> str | None:
        return self.spec.get("userData") or None

    @property
    def tags(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self.spec.get("tags") or {}).items()}

    @property
    def kubelet(self) -> dict[str, Any]:
        return dict(self.spec.get("kubelet") or {})

    @property
    def block_device_mappings(self) -> list[dict[str, Any]]:
        return [dict(b) for b in self.spec.get("blockDeviceMappings") or []]

    @property
    def instance_store_policy(self) -> str | None:
        """``instanceStorePolicy`` (``RAID0``), or None: instance-store disks are left alone."""
        return self.spec.get("instanceStorePolicy") or None

    @property
    def metadata_options(self) -> dict[str, Any]:
        return {**MetadataOptions().to_dict(), **(self.spec.get("metadataOptions") or {})}

    @property
    def associate_public_ip(self) -> bool | None:
        value = self.spec.get("associatePublicIPAddress")
        return None if value is None else bool(value)

    @property
    def detailed_monitoring(self) -> bool:
        return bool(self.spec.get("detailedMonitoring", False))

    @property
    def network_interfaces(self) -> list[dict[str, Any]]:
        """``networkInterfaces`` ({networkCardIndex, deviceIndex, interfaceType}), card then device order."""
        found = [dict(n) for n in self.spec.get("networkInterfaces") or [] if isinstance(n, Mapping)]
        return sorted(found, key=lambda n: (int(n.get("networkCardIndex", 0)), int(n.get("deviceIndex", 0))))

    @property
    def ip_prefix_count(self) -> int | None:
        value = self.spec.get("ipPrefixCount")
        return None if value is None else int(value)

    @property
    def connection_tracking(self) -> dict[str, int]:
        """``connectionTracking`` as EC2's ConnectionTrackingSpecification (only the timeouts set)."""
        names = {
            "tcpEstablishedTimeout": "TcpEstablishedTimeout",
            "udpStreamTimeout": "UdpStreamTimeout",
            "udpTimeout": "UdpTimeout",
        }
        given = self.spec.get("connectionTracking") or {}
        return {ec2: int(given[key]) for key, ec2 in names.items() if given.get(key) is not None}

    @property
    def placement_group_selector(self) -> dict[str, str] | None:
        """``placementGroupSelector``: ``{"name": ...}`` or ``{"id": "pg-..."}``, or None."""
        selector = self.spec.get("placementGroupSelector")
        if not isinstance(selector, Mapping) or not (selector.get("name") or selector.get("id")):
            return None
        return {k: str(v) for k, v in selector.items() if k in ("name", "id") and v}

    @property
    def nested_virtualization(self) -> str | None:
        """``cpuOptions.nestedVirtualization`` (enabled | disabled), or None."""
        value = (self.spec.get("cpuOptions") or {}).get("nestedVirtualization")
        return str(value) if value else None

    @property
    def enclaves_enabled(self) -> bool | None:
        value = (self.spec.get("enclaveOptions") or {}).get("enabled")
        return None if value is None else bool(value)

    @property
    def context(self) -> str | None:
        """``context``: the reserved EC2 field CreateFleet takes as ``Context``."""
        return self.spec.get("context") or None

    def hash(self) -> str:
        """The static-drift hash (``karpenter.k8s.aws/ec2nodeclass-hash``; ``api.hashing``)."""
        from nodewright.api.hashing import nodeclass_hash

        return nodeclass_hash({"spec": self.spec})
