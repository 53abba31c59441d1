"""Dict-level access to any Kubernetes API server through the kubernetes client's ``ApiClient``.

The simulators must run unchanged against the emulator or a real kube-apiserver, so they use the
official client (its kubeconfig loading, auth and HTTP pool) and nothing else. They work on plain
JSON dicts instead of the generated pydantic models: a simulator reads and writes a few fields of
many kinds (including custom objects), and the models would validate and copy every object twice.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("sandbox.simulators")
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def api_client_from_kubeconfig(path: str | Path) -> client.ApiClient:
    """A fresh ApiClient for the kubeconfig at ``path`` (current context)."""
    return config.new_client_from_config(config_file=str(path))


def core(resource: str, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
    """Path of a core/v1 resource: ``core("pods", "default", "x", "status")``."""
    return _path("/api/v1", resource, namespace, name, sub)


def group(
    group_version: str,
    resource: str,
    namespace: str | None = None,
    name: str | None = None,
    sub: str | None = None,
) -> str:
    """Path of a grouped resource: ``group("apps/v1", "replicasets", "default")``."""
    return _path(f"/apis/{group_version}", resource, namespace, name, sub)


def _path(prefix: str, resource: str, namespace: str | None, name: str | None, sub: str | None) -> str:
    parts = [prefix]
    if namespace:
        parts += ["namespaces", namespace]
    parts.append(resource)
    if name:
        parts.append(name)
    if sub:
        parts.append(sub)
    return "/".join(parts)


class Kube:
    """GET/LIST/WATCH/POST/PATCH/DELETE of JSON objects; errors raise ``ApiException`` as the client does."""

    def __init__(self, api_client: client.ApiClient, request_timeout: float = 10.0) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout
        # Told (method, path, answer) after each successful write: a ReconcileLoop's informer
        # waits for its own writes to come back through its watch (loop.ReconcileLoop.view).
        self.write_listeners: list[Callable[[str, str, dict[str, Any]], None]] = []

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str | None = None,
        timeout: float | None = None,
        stream: bool = False,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        serialized = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api_client.call_api(*serialized, _request_timeout=timeout or self.request_timeout)
        if stream:
            if not 200 <= response.status <= 299:
                response.read()
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            return response.response
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(
                http_resp=response, body=data.decode(errors="replace"), data=None
            )
        answer = json.loads(data) if data else {}
        if method != "GET" and isinstance(answer, dict):
            for listener in self.write_listeners:
                listener(method, path, answer)
        return answer

    def get(self, path: str, **query: Any) -> dict[str, Any]:
        return self._call("GET", path, query=query)

    def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return self.get(path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, path: str, **query: Any) -> tuple[list[dict[str, Any]], str]:
        """Items and the list's resourceVersion (to start a watch from)."""
        result = self._call("GET", path, query=query)
        return result.get("items") or [], result.get("metadata", {}).get("resourceVersion", "")

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", path, body=body)

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("PUT", path, body=body)

    def patch(self, path: str, body: Any, content_type: str = MERGE_PATCH) -> dict[str, Any]:
        return self._call("PATCH", path, body=body, content_type=content_type)

    def delete(
        self,
        path: str,
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid:
            options["preconditions"] = {"uid": uid}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        return self._call("DELETE", path, body=options)

    def delete_ignoring_missing(self, path: str, **kwargs: Any) -> None:
        try:
            self.delete(path, **kwargs)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def watch(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = 30,
        on_open: Callable[[Any], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events after ``resource_version``; ends when the server closes the stream.

        ``on_open`` receives the urllib3 response, whose ``shutdown()`` ends the watch from another thread.
        """
        query = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": timeout_seconds}
        response = self._call("GET", path, query=query, timeout=timeout_seconds + 5, stream=True)
        if on_open is not None:
            on_open(response)
        try:
            buffer = b""
            for chunk in response.stream(4096, decode_content=False):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        finally:
            response.release_conn()


def owner_reference(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The controller ownerReference pointing at ``obj`` (list items carry no apiVersion/kind)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: dict[str, Any]) -> str | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def record_event(
    kube: Kube,
    involved: dict[str, Any],
    reason: str,
    message: str,
    *,
    component: str,
    event_type: str = "Normal",
    host: str = "",
) -> None:
    """A core/v1 Event as client-go's event recorder writes it (``<object>.<hex nanoseconds>``).

    Best effort, as in the real components: an event that cannot be written is dropped."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    stamp = time.time_ns()
    moment = dt.datetime.fromtimestamp(stamp / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    reference = {
        "kind": involved.get("kind"),
        "name": meta["name"],
        "uid": meta.get("uid"),
        "apiVersion": involved.get("apiVersion"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    if meta.get("namespace"):
        reference["namespace"] = meta["namespace"]
    source = {"component": component, **({"host": host} if host else {})}
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{stamp:x}", "namespace": namespace},
        "involvedObject": reference,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": moment,
        "lastTimestamp": moment,
        "count": 1,
        "type": event_type,
        "reportingComponent": component,
        "reportingInstance": host,
    }
    try:
        kube.create(core("events", namespace), body)
    except ApiException as exc:
        log.debug("event %s on %s dropped: %s", reason, meta["name"], exc.status)
