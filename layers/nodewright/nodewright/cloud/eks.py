"""The cluster's own facts from eks:DescribeCluster, cached per warm container.

Both the Kubernetes client (endpoint + CA for the EKS token path) and the launch path
(user data: endpoint, CA, Kubernetes version for AMI aliases, service CIDR for cluster DNS)
read them; one DescribeCluster an hour serves both.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud.aws import client, identity
from nodewright.cloud.cache import TTLCache
from nodewright.cloud.errors import CloudError
from nodewright.settings import Settings

CLUSTER_CACHE_SECONDS = 3600.0
DEFAULT_SERVICE_CIDR = "10.100.0.0/16"  # EKS's default when the cluster does not say

_described: TTLCache[dict[str, Any]] = TTLCache(CLUSTER_CACHE_SECONDS)


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    endpoint: str
    certificate_authority: str
    version: str
    service_cidr: str

    @property
    def dns_ip(self) -> str:
        """kube-dns's address: the 10th address of the service CIDR (what EKS's CoreDNS uses)."""
        return str(ipaddress.ip_network(self.service_cidr, strict=False).network_address + 10)


def describe_cluster(settings: Settings) -> dict[str, Any]:
    """The ``cluster`` object of eks:DescribeCluster (``endpoint``, ``certificateAuthority.data``, ...)."""

    def load() -> dict[str, Any]:
        try:
            return dict(client("eks", settings).describe_cluster(name=settings.cluster_name)["cluster"])
        except ClientError as exc:
            raise CloudError(
                f"eks:DescribeCluster {settings.cluster_name!r} failed ({exc.response['Error']['Code']}); "
                "check CLUSTER_NAME and the function role's eks:DescribeCluster permission"
            ) from exc

    key = (settings.cluster_name, settings.region, settings.aws_endpoint_url, identity(settings))
    return _described.get_or_load(key, load)


def cluster_info(settings: Settings) -> ClusterInfo:
    raw = describe_cluster(settings)
    network = raw.get("kubernetesNetworkConfig") or {}
    return ClusterInfo(
        name=str(raw.get("name") or settings.cluster_name),
        endpoint=str(raw.get("endpoint", "")),
        certificate_authority=str((raw.get("certificateAuthority") or {}).get("data", "")),
        version=str(raw.get("version", "")),
        service_cidr=str(network.get("serviceIpv4Cidr") or DEFAULT_SERVICE_CIDR),
    )


def clear_cache() -> None:
    _described.clear()
