"""``Cluster``: every Kubernetes call of the project, answering plain dicts.

Requests go through the kubernetes client's ``ApiClient`` (its auth, TLS and token-refresh hook) at
the raw level — ``call_api`` with unparsed bodies decoded by ``json`` — because the client's
pydantic models validate every field of every object, which costs seconds on thousands of pods and
fails on fields a newer API server adds. The typed API classes are not used.

Listed pods and nodes are slimmed as each page is decoded (``SLIMMED``): what no flow reads —
managedFields, a pod's container statuses, env, commands, probes, conditions other than
``PodScheduled`` and ``Ready`` and volumes other than claims (the service-account token every pod
gets is a projected volume of a dozen nested objects), a node's image list — is dropped, and the
strings a workload's pods repeat (labels, owner, images, quantities) are interned, so a 50,000-pod
cluster fits the provisioner's 512 MB (``nodewright bench pass``). A ``get`` answers the whole object.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from nodewright.api.labels import EVENT_COMPONENT
from nodewright.cluster import auth, objects
from nodewright.cluster.errors import ApiError, ApiUnavailable, Conflict, NotFound, ServerBusy, error_for
from nodewright.cluster.lease import DEFAULT_DURATION_SECONDS, WriterLease
from nodewright.cluster.resources import (
    DAEMONSETS,
    EC2NODECLASSES,
    EVENTS,
    NODECLAIMS,
    NODEOVERLAYS,
    NODEPOOLS,
    NODES,
    PDBS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
    Resource,
)
from nodewright.context import Clock, SystemClock
from nodewright.observability import logger
from nodewright.ratelimit import TokenBucket

PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
# (connect, read) seconds: a Lambda must fail fast and leave the message for a retry, not hang.
DEFAULT_TIMEOUT = (5.0, 30.0)
LIST_PAGE_SIZE = 500
PENDING_PODS = "status.phase=Pending"
CONFLICT_ATTEMPTS = 5


class EvictionOutcome(StrEnum):
    EVICTED = "evicted"  # 200/201: the pod is being deleted gracefully
    BLOCKED = "blocked"  # 429: a PodDisruptionBudget (or the server) says not now; retry after retry_after
    GONE = "gone"  # 404: the pod no longer exists
    FAILED = "failed"  # anything else (e.g. 500 for a pod matched by two PDBs, 403)


@dataclass(frozen=True)
class EvictionResult:
    outcome: EvictionOutcome
    status: int
    message: str = ""
    retry_after_seconds: float | None = None


# urllib3 retries of one call: one quick retry of a connection that failed (a pooled keep-alive
# connection the server closed meanwhile), never more: a down API server must fail fast, within
# the invocation's time, not after urllib3's default three retries of (5 s, 30 s) timeouts each.
CALL_RETRIES: dict[str, Any] = {
    "total": 1,
    "connect": 1,
    "read": 1,
    "status": 0,
    "redirect": 0,
    "backoff_factor": 0.1,
    # A 429/503 with Retry-After is this client's to handle (``request``), within the call deadline:
    # urllib3 would sleep it unbounded, then report the busy server as unreachable.
    "respect_retry_after_header": False,
}
ATTEMPTS_PER_CALL = 2
# Below this, a call is not started: it could not finish, and the caller must report instead.
MIN_CALL_SECONDS = 0.5
# A GET answered 429 or 5xx is asked again (reads are idempotent), as client-go retries on
# Retry-After: after the server's whole Retry-After (client-go does not shorten it: a throttled
# server that is asked again early only sheds more), else a short backoff, never past the call
# deadline — a wait that cannot fit is not started, and the caller reports the busy server.
# Any request API Priority and Fairness turned away (``ServerBusy.turned_away``: it never ran) is
# sent again the same way, whatever its verb, as client-go does. Other failed writes are not
# repeated here: their callers know whether repeating is safe (a 429 on an eviction is a
# PodDisruptionBudget's answer, not throttling).
READ_RETRIES = 2
READ_RETRY_BACKOFF_SECONDS = 0.2


class Cluster:
    """One API server. Thread-safe (urllib3 pools); build it with ``nodewright.cluster.connect``.

    ``set_call_deadline`` bounds every later call by the invocation's remaining time: each
    attempt's connect and read timeouts shrink to fit, and a call that cannot fit is refused at
    once with ``ApiUnavailable`` (transient), so a black-holed API server costs seconds, not the
    whole invocation.

    ``limiter``: the container's request rate limit (``ratelimit.TokenBucket``, shared by every
    ``Cluster`` on the same connection); every request takes a token first (``throttle``), within
    the call deadline. None: unlimited (the sandbox's own simulators, which are not the product).
    """

    def __init__(
        self,
        api_client: Any,
        *,
        timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        limiter: TokenBucket | None = None,
    ) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self.limiter = limiter
        # The limiter's clock (tests inject one), so its waits and the call deadline agree.
        self.clock: Clock = limiter.clock if limiter is not None else SystemClock()
        self._deadline: float | None = None
        # The resourceVersion of the last list_pending_pods: wait_for_pending_pods watches from it.
        self._pending_version: str | None = None

    def set_call_deadline(self, deadline: float | None) -> None:
        self._deadline = deadline

    def _call_timeout(self, method: str, path: str) -> tuple[float, float]:
        if self._deadline is None:
            return self.timeout
        left = self._deadline - self.clock.monotonic()
        if left < MIN_CALL_SECONDS:
            raise ApiUnavailable(f"{method} {path}: not started, the invocation has {max(left, 0):.1f}s left")
        per_attempt = left / ATTEMPTS_PER_CALL
        return (min(self.timeout[0], per_attempt), min(self.timeout[1], per_attempt))

    def throttle(self, method: str, path: str) -> None:
        """Wait for the rate limiter's token before a request (every one: list pages, writes,
        evictions, watches); ``ClientThrottled`` at once when the wait would leave the call less
        than ``MIN_CALL_SECONDS`` before the deadline."""
        if self.limiter is None:
            return
        deadline = None if self._deadline is None else self._deadline - MIN_CALL_SECONDS
        self.limiter.wait(f"{method} {path}", deadline=deadline)

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    # ------------------------------------------------------------------ raw transport
    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        """One call; the decoded JSON answer. Raises ``ApiError`` subclasses or ``ApiUnavailable``.

        A 401 is answered once by re-signing the EKS token and repeating the request (``auth``);
        a GET answered 429 or 5xx, or any request API Priority and Fairness turned away, is repeated up
        to ``READ_RETRIES`` times within the call deadline.
        """
        for attempt in range(READ_RETRIES + 1):
            try:
                return self._request_authenticated(method, path, query, body, content_type)
            except ServerBusy as exc:
                wait = self._read_retry_wait(method, exc, attempt)
                if wait is None:
                    raise
                logger().info(
                    "API server busy; asking again",
                    extra={"path": path, "status": exc.status, "waitSeconds": round(wait, 2)},
                )
                self.clock.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _read_retry_wait(self, method: str, error: ServerBusy, attempt: int) -> float | None:
        """Seconds to wait before repeating a busy GET or a turned-away request; None when it must
        not be repeated."""
        if attempt >= READ_RETRIES or not (method == "GET" or error.turned_away):
            return None
        wait = error.retry_after_seconds or READ_RETRY_BACKOFF_SECONDS * 2**attempt
        if self._deadline is not None and self._deadline - self.clock.monotonic() - wait < MIN_CALL_SECONDS:
            return None
        return wait

    def _request_authenticated(
        self, method: str, path: str, query: dict[str, Any] | None, body: Any, content_type: str
    ) -> dict[str, Any]:
        try:
            return self._request_once(method, path, query, body, content_type)
        except ApiError as exc:
            if exc.status != 401 or not auth.reauthenticate(self.api_client.configuration):
                raise
            logger().warning("API server answered 401; re-signing the EKS token and retrying once")
            return self._request_once(method, path, query, body, content_type)

    def _impersonating(self, headers: dict[str, str]) -> Any:
        """``headers`` plus the kubeconfig's impersonation (``auth.impersonation_headers``): a
        header dict that repeats ``Impersonate-Group`` once per group, as the API server reads it."""
        extra = auth.impersonation_headers(self.api_client.configuration)
        if not extra:
            return headers
        from urllib3 import HTTPHeaderDict

        combined = HTTPHeaderDict(headers)
        for name, value in extra:
            combined.add(name, value)
        return combined

    def _request_once(
        self, method: str, path: str, query: dict[str, Any] | None, body: Any, content_type: str
    ) -> dict[str, Any]:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        self.throttle(method, path)
        query_params = [(k, v) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        method_, url, header_params, body_, _ = self.api_client.param_serialize(
            method,
            path,
            query_params=query_params or None,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(
                method_,
                url,
                self._impersonating(header_params),
                body_,
                _request_timeout=self._call_timeout(method, path),
            )
            try:
                raw = response.read()
            finally:
                # Unpreloaded responses keep their connection checked out: hand it back to the pool
                # so the next call reuses it (no new TCP/TLS handshake) and close() can shut it.
                response.response.release_conn()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiUnavailable(f"{method} {path}: API server unreachable at {self.host}: {exc}") from exc
        except ApiException as exc:  # TLS failures arrive as status 0
            if exc.status == 0:
                raise ApiUnavailable(f"{method} {path}: {exc.reason}") from exc
            raise
        decoded = _decode(raw)
        if not 200 <= response.status <= 299:
            error = error_for(response.status, decoded, f"{method} {path}: {raw[:200]!r}")
            retry_after = response.headers.get("Retry-After")
            if retry_after and "details" not in error.body:
                error.body["details"] = {"retryAfterSeconds": _to_number(retry_after)}
            raise error
        return decoded

    # ------------------------------------------------------------------ generic verbs
    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """Every object, following ``continue`` tokens; each item gets its apiVersion/kind back."""
        return self._list(resource, namespace, label_selector, field_selector)[0]

    def _list(
        self,
        resource: Resource,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
    ) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """The objects and the list's resourceVersion (the first page's: the snapshot every page is of)."""
        items: builtins.list[dict[str, Any]] = []
        token: str | None = None
        version: str | None = None
        while True:
            answer = self.request(
                "GET",
                resource.path(namespace),
                query={
                    "labelSelector": label_selector,
                    "fieldSelector": field_selector,
                    "limit": LIST_PAGE_SIZE,
                    "continue": token,
                },
            )
            slimming = SLIMMED.get(resource.plural)
            for item in answer.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                if slimming is not None:
                    slimming(item)
                items.append(item)
            metadata = answer.get("metadata") or {}
            version = version or metadata.get("resourceVersion")
            token = metadata.get("continue")
            if not token:
                return items, version

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", resource.path(namespace, name))

    def find(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """Like ``get`` but None when the object does not exist."""
        try:
            return self.get(resource, name, namespace)
        except NotFound:
            return None

    def create(
        self, resource: Resource, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **body}
        namespace = namespace or (body.get("metadata") or {}).get("namespace")
        return self.request("POST", resource.path(namespace), body=body)

    def replace(
        self, resource: Resource, body: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        """PUT; ``body.metadata.resourceVersion`` makes it conditional (409 ``Conflict`` when stale)."""
        meta = body.get("metadata") or {}
        return self.request("PUT", resource.path(meta.get("namespace"), meta["name"], subresource), body=body)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: str = "merge",
    ) -> dict[str, Any]:
        """PATCH (merge by default; custom objects take merge or json, not strategic)."""
        return self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
        )

    def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any] | None:
        """Delete; None when it was already gone. An object with finalizers only gets a deletionTimestamp."""
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        try:
            return self.request("DELETE", resource.path(namespace, name), body=options)
        except NotFound:
            return None

    def update_with_retry(
        self,
        resource: Resource,
        name: str,
        mutate: Callable[[dict[str, Any]], dict[str, Any] | None],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any] | None:
        """Read-modify-write guarded by resourceVersion, retried on 409.

        ``mutate(obj)`` returns a merge patch (without resourceVersion) or None when nothing needs to
        change. The patch carries the read resourceVersion so a concurrent writer makes it fail with
        409 instead of being overwritten. Returns the updated object (or the unchanged one).
        """
        for attempt in range(CONFLICT_ATTEMPTS):
            current = self.get(resource, name, namespace)
            patch = mutate(current)
            if patch is None:
                return current
            metadata = {
                **patch.get("metadata", {}),
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
            try:
                return self.patch(
                    resource,
                    name,
                    {**patch, "metadata": metadata},
                    namespace=namespace,
                    subresource=subresource,
                )
            except Conflict:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise
                self.clock.sleep(0.05 * (attempt + 1))
        return None  # unreachable

    # ------------------------------------------------------------------ reads
    def list_pods(
        self,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[dict[str, Any]]:
        return self.list(
            PODS, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )

    def list_pending_pods(self) -> builtins.list[dict[str, Any]]:
        """Pods in phase Pending (filtered by the API server); which of them need capacity is
        ``state.pods.is_provisionable``."""
        items, self._pending_version = self._list(PODS, None, None, PENDING_PODS)
        return items

    def wait_for_pending_pods(self, timeout_seconds: float, wanted: Callable[[dict[str, Any]], bool]) -> None:
        """Return as soon as a Pending pod for which ``wanted`` is true is added or changed after the
        last ``list_pending_pods``, or after about ``timeout_seconds``.

        A watch from that list's resourceVersion, as an informer watches: the provisioner's loop
        sees a new pod the moment the API server stores it, where a poll would see it up to a poll
        interval later and list every pending pod each time. The caller lists again afterwards
        (the watch only says when). Without a list before, or when the API server answers that
        the version is too old (410), it returns at once.
        """
        version = self._pending_version
        if version is None or timeout_seconds <= 0:
            return
        seconds = max(1, math.ceil(timeout_seconds))  # the API server takes whole seconds
        if self._deadline is not None:
            left = self._deadline - self.clock.monotonic() - MIN_CALL_SECONDS
            if left < 1:
                return
            seconds = min(seconds, int(left))
        query = {
            "watch": "true",
            "fieldSelector": PENDING_PODS,
            "resourceVersion": version,
            "timeoutSeconds": seconds,
            "allowWatchBookmarks": "true",
        }
        with contextlib.closing(self._watch(PODS.path(None), query, read_timeout=seconds + 2.0)) as events:
            for event in events:
                kind = event.get("type")
                if kind == "ERROR":
                    return  # 410 Expired: the version is older than the watch cache keeps
                if kind in ("ADDED", "MODIFIED") and wanted(event.get("object") or {}):
                    return

    def _watch(
        self, path: str, query: dict[str, Any], *, read_timeout: float
    ) -> Generator[dict[str, Any], None, None]:
        """The events of one watch request until the server ends it; nothing when it is refused
        (the caller's next list says why). Read timeouts and dropped streams end it quietly."""
        import urllib3

        self.throttle("GET", path)
        method_, url, header_params, body_, _ = self.api_client.param_serialize(
            "GET",
            path,
            query_params=list(query.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(
                method_,
                url,
                self._impersonating(header_params),
                body_,
                _request_timeout=(self.timeout[0], read_timeout),
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiUnavailable(f"watch {path}: API server unreachable at {self.host}: {exc}") from exc
        stream = response.response
        try:
            if response.status != 200:
                return
            pending = b""
            for chunk in stream.stream(4096, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError):
            return  # a read timeout or a dropped stream: time is up either way
        finally:
            # Closed, not handed back to the pool: a stream left mid-way cannot carry another call.
            with contextlib.suppress(Exception):
                stream.close()

    def list_pods_on_node(self, node_name: str) -> builtins.list[dict[str, Any]]:
        return self.list(PODS, field_selector=f"spec.nodeName={node_name}")

    def list_nodes(self, label_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.list(NODES, label_selector=label_selector)

    def list_daemonsets(self) -> builtins.list[dict[str, Any]]:
        return self.list(DAEMONSETS)

    def list_pdbs(self) -> builtins.list[dict[str, Any]]:
        return self.list(PDBS)

    def list_persistent_volumes(self) -> builtins.list[dict[str, Any]]:
        return self.list(PERSISTENT_VOLUMES)

    def list_persistent_volume_claims(self) -> builtins.list[dict[str, Any]]:
        return self.list(PERSISTENT_VOLUME_CLAIMS)

    def list_storage_classes(self) -> builtins.list[dict[str, Any]]:
        return self.list(STORAGE_CLASSES)

    def list_volume_attachments(self) -> builtins.list[dict[str, Any]]:
        """Every VolumeAttachment (kube-apiserver serves no field selector on ``spec.nodeName``:
        the caller filters by node, as Karpenter's cache index does)."""
        return self.list(VOLUME_ATTACHMENTS)

    def list_nodepools(self) -> builtins.list[dict[str, Any]]:
        return self.list(NODEPOOLS)

    def list_ec2nodeclasses(self) -> builtins.list[dict[str, Any]]:
        return self.list(EC2NODECLASSES)

    def list_nodeoverlays(self) -> builtins.list[dict[str, Any]]:
        """The NodeOverlays; none, with a warning, when the API server does not serve the kind (the
        NodeOverlay CRD of ``crds/`` not applied): the gate's pass goes on without overlays."""
        try:
            return self.list(NODEOVERLAYS)
        except NotFound:
            logger().warning(
                "NodeOverlays not read: the API server does not serve nodeoverlays.karpenter.sh "
                "(kubectl apply -f crds/karpenter.sh_nodeoverlays.yaml)"
            )
            return []

    def list_nodeclaims(self, label_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        return self.list(NODECLAIMS, label_selector=label_selector)

    # ------------------------------------------------------------------ nodes
    def get_node(self, name: str) -> dict[str, Any]:
        return self.get(NODES, name)

    def find_node(self, name: str) -> dict[str, Any] | None:
        return self.find(NODES, name)

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge patch (labels, annotations, spec.unschedulable); for taints use ``taint_node``."""
        return self.patch(NODES, name, patch)

    def taint_node(
        self, name: str, taints: Iterable[dict[str, Any]], *, cordon: bool = False
    ) -> dict[str, Any]:
        """Add taints (idempotent by key+effect), optionally cordon; a concurrent writer's taints survive."""
        wanted = list(taints)

        def mutate(node: dict[str, Any]) -> dict[str, Any] | None:
            spec = node.get("spec") or {}
            current = list(spec.get("taints") or [])
            missing = [t for t in wanted if not objects.has_taint(node, t["key"], t.get("effect"))]
            if not missing and (not cordon or spec.get("unschedulable")):
                return None
            patch_spec: dict[str, Any] = {
                "taints": current + [{**t, "timeAdded": objects.now_rfc3339()} for t in missing]
            }
            if cordon:
                patch_spec["unschedulable"] = True
            return {"spec": patch_spec}

        return self.update_with_retry(NODES, name, mutate) or {}

    def update_node(
        self, name: str, mutate: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        """Read-modify-write of a Node guarded by its resourceVersion (``update_with_retry``)."""
        return self.update_with_retry(NODES, name, mutate)

    def delete_node(self, name: str) -> dict[str, Any] | None:
        return self.delete(NODES, name)

    # ------------------------------------------------------------------ NodeClaims and other custom objects
    def get_nodeclaim(self, name: str) -> dict[str, Any]:
        return self.get(NODECLAIMS, name)

    def find_nodeclaim(self, name: str) -> dict[str, Any] | None:
        return self.find(NODECLAIMS, name)

    def create_nodeclaim(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.create(NODECLAIMS, body)

    def patch_nodeclaim(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self.patch(NODECLAIMS, name, patch)

    def patch_nodeclaim_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge ``status`` into the NodeClaim's status subresource (a merge patch replaces lists:
        send the whole ``conditions``, built with ``objects.set_condition``)."""
        return self.patch(NODECLAIMS, name, {"status": status}, subresource="status")

    def delete_nodeclaim(self, name: str) -> dict[str, Any] | None:
        return self.delete(NODECLAIMS, name)

    def patch_nodepool_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge ``status`` into the NodePool's status subresource (its conditions, as a whole list)."""
        return self.patch(NODEPOOLS, name, {"status": status}, subresource="status")

    def patch_ec2nodeclass_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge ``status`` into the EC2NodeClass's status subresource (lists as wholes)."""
        return self.patch(EC2NODECLASSES, name, {"status": status}, subresource="status")

    def patch_nodeoverlay_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge ``status`` into the NodeOverlay's status subresource (its conditions, as a whole list)."""
        return self.patch(NODEOVERLAYS, name, {"status": status}, subresource="status")

    def add_finalizer(
        self, resource: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """Idempotent; None when the object is gone. 422 ``Invalid`` if the object is being deleted."""

        def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
            finalizers = list(obj["metadata"].get("finalizers") or [])
            return None if finalizer in finalizers else {"metadata": {"finalizers": [*finalizers, finalizer]}}

        try:
            return self.update_with_retry(resource, name, mutate, namespace=namespace)
        except NotFound:
            return None

    def remove_finalizer(
        self, resource: Resource, name: str, finalizer: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """Idempotent; None when gone. Removing the last finalizer of a deleted object deletes it."""

        def mutate(obj: dict[str, Any]) -> dict[str, Any] | None:
            finalizers = list(obj["metadata"].get("finalizers") or [])
            if finalizer not in finalizers:
                return None
            return {"metadata": {"finalizers": [f for f in finalizers if f != finalizer]}}

        try:
            return self.update_with_retry(resource, name, mutate, namespace=namespace)
        except NotFound:
            return None

    # ------------------------------------------------------------------ pods
    def evict(self, pod: dict[str, Any], *, grace_period_seconds: int | None = None) -> EvictionResult:
        """POST the Eviction subresource, so PodDisruptionBudgets are honoured by the API server."""
        meta = pod["metadata"]
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        }
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        if meta.get("uid"):  # never evict a namesake that replaced the pod we decided about
            body.setdefault("deleteOptions", {})["preconditions"] = {"uid": meta["uid"]}
        try:
            self.request("POST", PODS.path(meta["namespace"], meta["name"], "eviction"), body=body)
        except NotFound as exc:
            return EvictionResult(EvictionOutcome.GONE, 404, exc.message)
        except ApiError as exc:
            if exc.status == 429:
                return EvictionResult(EvictionOutcome.BLOCKED, 429, exc.message, exc.retry_after_seconds)
            if exc.status == 409 and "precondition" in exc.message.lower():
                return EvictionResult(EvictionOutcome.GONE, 409, exc.message)
            return EvictionResult(EvictionOutcome.FAILED, exc.status, exc.message)
        return EvictionResult(EvictionOutcome.EVICTED, 201)

    def delete_pod(
        self, namespace: str, name: str, *, grace_period_seconds: int | None = None
    ) -> dict[str, Any] | None:
        """Delete without the Eviction API (PDBs ignored): only past a deadline. None when already gone."""
        return self.delete(PODS, name, namespace=namespace, grace_period_seconds=grace_period_seconds)

    # ------------------------------------------------------------------ events
    def record_event(
        self,
        involved: dict[str, Any],
        reason: str,
        message: str,
        *,
        event_type: str = "Normal",
    ) -> dict[str, Any] | None:
        """A core/v1 Event on ``involved`` (``kubectl describe`` shows it); best effort, never raises."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"  # cluster-scoped objects' events live in default
        now = objects.now_rfc3339()
        event = {
            "metadata": {"name": f"{meta.get('name', 'unknown')}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": {
                k: v
                for k, v in {
                    "apiVersion": involved.get("apiVersion"),
                    "kind": involved.get("kind"),
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion"),
                }.items()
                if v
            },
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": EVENT_COMPONENT},
            "reportingComponent": EVENT_COMPONENT,
            "reportingInstance": os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or socket.gethostname(),
        }
        try:
            return self.create(EVENTS, event, namespace=namespace)
        except (ApiError, ApiUnavailable) as exc:
            logger().warning("could not record event", extra={"reason": reason, "error": str(exc)})
            return None

    # ------------------------------------------------------------------ writers' lease
    def writer_lease(
        self,
        identity: str,
        *,
        duration_seconds: int = DEFAULT_DURATION_SECONDS,
        wait_seconds: float = 0.0,
        **kwargs: Any,
    ) -> WriterLease:
        """A ``WriterLease`` on this cluster (see ``nodewright.cluster.lease``)."""
        return WriterLease(
            self, identity, duration_seconds=duration_seconds, wait_seconds=wait_seconds, **kwargs
        )


# What no flow reads of a listed object (see the module docstring); the lists keep everything else,
# so a field the product starts to read is never silently missing: remove it from here first.
POD_CONTAINER_UNREAD = (
    "env",
    "envFrom",
    "command",
    "args",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "volumeMounts",
    "volumeDevices",
    "securityContext",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "workingDir",
)
POD_STATUS_UNREAD = (
    "containerStatuses",
    "initContainerStatuses",
    "ephemeralContainerStatuses",
    "podIP",
    "podIPs",
    "hostIPs",
)
NODE_STATUS_UNREAD = ("images", "nodeInfo", "volumesInUse", "daemonEndpoints")
# The pod volumes a flow reads (the scheduler's and the drain's PersistentVolumeClaims, generic
# ephemeral volumes' claims); every other volume (the service-account token's projected volume
# kube-apiserver adds to every pod, configMaps, secrets, emptyDirs) is dropped from listed pods.
POD_VOLUMES_READ = ("persistentVolumeClaim", "ephemeral")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


# The pod conditions a flow reads (``state.pods``: scheduling failures; ``state.pdbs``: readiness).
POD_CONDITIONS_READ = frozenset({"PodScheduled", "Ready"})


def _interned(values: dict[str, Any] | None) -> None:
    """The string values of a flat dict, interned in place: the pods of one workload repeat their
    labels, owner, images and quantities, and each page's decoding makes new strings of them."""
    if values:
        for key, value in values.items():
            if type(value) is str:
                values[key] = sys.intern(value)


def _slim_metadata(item: dict[str, Any]) -> dict[str, Any]:
    meta = item.get("metadata") or {}
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if annotations:
        annotations.pop(LAST_APPLIED, None)
    _interned(meta.get("labels"))
    for owner in meta.get("ownerReferences") or ():
        _interned(owner)
    if "namespace" in meta:
        meta["namespace"] = sys.intern(meta["namespace"])
    return meta


def _slim_pod(pod: dict[str, Any]) -> None:
    _slim_metadata(pod)
    spec = pod.get("spec") or {}
    _interned(spec)  # nodeName, schedulerName, restartPolicy, serviceAccountName, ...
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(kind) or ():
            for key in POD_CONTAINER_UNREAD:
                container.pop(key, None)
            _interned(container)
            resources = container.get("resources") or {}
            _interned(resources.get("requests"))
            _interned(resources.get("limits"))
    for toleration in spec.get("tolerations") or ():
        _interned(toleration)
    if spec.get("volumes"):
        spec["volumes"] = [v for v in spec["volumes"] if any(k in v for k in POD_VOLUMES_READ)]
    status = pod.get("status") or {}
    for key in POD_STATUS_UNREAD:
        status.pop(key, None)
    if "conditions" in status:
        status["conditions"] = [c for c in status["conditions"] or () if c.get("type") in POD_CONDITIONS_READ]
        for condition in status["conditions"]:
            _interned(condition)
    _interned(status)


def _slim_node(node: dict[str, Any]) -> None:
    _slim_metadata(node)
    status = node.get("status") or {}
    for key in NODE_STATUS_UNREAD:
        status.pop(key, None)


SLIMMED: dict[str, Callable[[dict[str, Any]], None]] = {"pods": _slim_pod, "nodes": _slim_node}


def _decode(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {"message": raw[:500].decode("utf-8", "replace")}
    return decoded if isinstance(decoded, dict) else {"items": decoded}


def _to_number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None
