"""Kubernetes behind one small interface: every Kubernetes call of the project lives in this package.

Nothing outside ``nodewright.cluster`` imports the ``kubernetes`` client. Objects go in and come out
as plain dicts shaped exactly like the API's JSON (``obj["metadata"]["name"]``, ``pod["spec"]["nodeName"]``).

Connecting::

    from nodewright.cluster import connect
    cluster = connect(settings)          # cached per container; kubeconfig if settings.kubeconfig, else EKS

Auth (``nodewright.cluster.auth``): with ``settings.kubeconfig`` the kubeconfig's server/token; otherwise
endpoint + CA from ``eks:DescribeCluster`` (via ``nodewright.cloud.eks.describe_cluster``) and an EKS
token (presigned STS GetCallerIdentity, ``x-k8s-aws-id`` header, ``k8s-aws-v1.`` prefix) re-signed by the
client's ``refresh_api_key_hook`` every 10 minutes by the wall clock (a frozen container's monotonic
clock may not advance), well inside EKS's 15-minute window, and once more after a 401.

``Cluster`` methods (``nodewright.cluster.client``):

* reads — ``list_pods(namespace=None, label_selector=, field_selector=)``, ``list_pending_pods()``
  (phase Pending), ``list_pods_on_node(node)``, ``list_nodes()``, ``list_daemonsets()``,
  ``list_pdbs()``, ``list_persistent_volumes()``, ``list_persistent_volume_claims()``,
  ``list_storage_classes()``, ``list_nodepools()``, ``list_ec2nodeclasses()``, ``list_nodeclaims()``
  (``state.world.observe`` reads them into one ``World``, capacity before pods);
* nodes — ``get_node``/``find_node`` (None if absent), ``patch_node(name, merge_patch)``,
  ``update_node(name, mutate)`` and ``taint_node(name, taints, cordon=False)`` (idempotent,
  resourceVersion-guarded), ``delete_node``;
* NodeClaims and NodePools — ``create_nodeclaim(body)``, ``get_nodeclaim``/``find_nodeclaim``,
  ``patch_nodeclaim``, ``patch_nodeclaim_status(name, status_dict)``, ``delete_nodeclaim``,
  ``patch_nodepool_status(name, status_dict)``; any custom object —
  ``add_finalizer(resource, name, f)``, ``remove_finalizer(...)``;
* pods — ``evict(pod) -> EvictionResult`` (``outcome``: EVICTED / BLOCKED (429, ``retry_after_seconds``)
  / GONE (404) / FAILED), ``delete_pod(namespace, name, grace_period_seconds=None)``;
* ``record_event(involved_obj, reason, message, event_type="Normal")`` — best effort, never raises;
* ``writer_lease(identity, name=, namespace=, duration_seconds=, wait_seconds=) -> WriterLease``
  (``with`` raises ``LeaseUnavailable``; ``renew()`` raises ``LeaseLost``);
* generic verbs for anything else — ``list/get/find/create/replace/patch/delete(resource, ...)`` and
  ``update_with_retry(resource, name, mutate)`` with the ``Resource`` constants of
  ``nodewright.cluster.resources`` (PODS, NODES, NODECLAIMS, NODEPOOLS, EC2NODECLASSES, LEASES, ...).

Errors (``nodewright.cluster.errors``): ``NotFound``, ``Conflict`` (``already_exists``), ``Invalid``,
``ApiError`` (``status``, ``reason``, ``message``), ``ApiUnavailable``, ``ServerBusy`` (429/5xx: both
of those), ``ClientThrottled`` (an ``ApiUnavailable``: the client's own request rate limit,
``nodewright.ratelimit``, would hold a call past the invocation's deadline);
``err.transient`` says whether waiting and retrying can help (5xx, 429, unreachable, lease held by
another writer).

Pure helpers on the dicts (``nodewright.cluster.objects``): ``instance_id_from_provider_id``,
``nodeclaim_instance_id``, ``node_instance_id``, ``condition``, ``set_condition`` (the one condition
upsert), ``has_taint``, ``is_deleting``, ...
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from nodewright.cluster import auth
from nodewright.cluster.client import Cluster, EvictionOutcome, EvictionResult
from nodewright.cluster.errors import (
    ApiError,
    ApiUnavailable,
    ClientThrottled,
    ClusterConfigError,
    ClusterError,
    Conflict,
    Invalid,
    NotFound,
    ServerBusy,
)
from nodewright.cluster.lease import LeaseLost, LeaseUnavailable, WriterLease
from nodewright.ratelimit import TokenBucket

if TYPE_CHECKING:
    from nodewright.settings import Settings

__all__ = [
    "ApiError",
    "ApiUnavailable",
    "ClientThrottled",
    "Cluster",
    "ClusterConfigError",
    "ClusterError",
    "Conflict",
    "EvictionOutcome",
    "EvictionResult",
    "Invalid",
    "LeaseLost",
    "LeaseUnavailable",
    "NotFound",
    "ServerBusy",
    "TokenBucket",
    "WriterLease",
    "connect",
    "reset_connections",
]

# settings → the kubernetes ApiClient and the request rate limiter every Cluster on it shares
_connections: dict[tuple[Any, ...], tuple[Any, TokenBucket]] = {}
_lock = threading.Lock()


def connect(settings: Settings, *, kubeconfig_setting: str = "NODEWRIGHT_KUBECONFIG") -> Cluster:
    """A ``Cluster`` for ``settings``. Its client (endpoint and CA from DescribeCluster, the EKS token,
    the connection pool) and its request rate limiter (``settings.kube_client_qps`` and
    ``kube_client_burst``: one token bucket for every thread of the container) are built once per
    container and shared; each caller gets a ``Cluster`` of its own, so the call deadline one
    invocation sets (``set_call_deadline``) binds only the Context that set it, not another holder
    of the same connection (a test, the CLI).
    ``kubeconfig_setting`` names where ``settings.kubeconfig`` came from in a load error (the CLI:
    ``--kubeconfig``)."""
    key = (
        settings.cluster_name,
        settings.kubeconfig or "",
        settings.region,
        settings.aws_endpoint_url or "",
        settings.kube_client_qps,
        settings.kube_client_burst,
    )
    with _lock:
        connection = _connections.get(key)
        if connection is None:
            from kubernetes.client import ApiClient
            from urllib3 import Retry

            from nodewright.cluster.client import CALL_RETRIES

            if settings.kubeconfig:
                configuration = auth.kubeconfig_configuration(settings.kubeconfig, setting=kubeconfig_setting)
            else:
                configuration = auth.eks_configuration(settings)
            configuration.retries = Retry(**CALL_RETRIES)
            limiter = TokenBucket(settings.kube_client_qps, settings.kube_client_burst)
            connection = _connections[key] = (ApiClient(configuration), limiter)
        api_client, limiter = connection
        return Cluster(api_client, limiter=limiter)


def reset_connections() -> None:
    """Forget cached clients (tests, or after the sandbox restarts on a new port)."""
    with _lock:
        for api_client, _ in _connections.values():
            api_client.close()
        _connections.clear()
