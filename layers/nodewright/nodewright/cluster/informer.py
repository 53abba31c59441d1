"""List, then watch: an always-current, read-only copy of one resource's objects, kept as client-go's
reflector keeps an informer's store (``nodewright top`` draws from these).

The list (paginated, ``Cluster.list``'s paging) gives the objects and the resourceVersion they are a
snapshot at; a watch from that version delivers every change after it (ADDED, MODIFIED, DELETED) and,
with ``allowWatchBookmarks``, BOOKMARKs that move the version on without a change. Each watch request
ends after ``timeoutSeconds`` (the API server's choice otherwise) and the next resumes from the last
version seen, so nothing between two requests is missed and nothing is listed again. When the API
server no longer keeps that version (etcd compaction, the watch cache's window: a watch request
answered ``410 Gone``, or an ``ERROR`` event with code 410 in the stream), the copy is replaced by a
fresh list, as the reflector's relist does. An unreachable or busy API server is retried after a
backoff; a resource type the cluster does not serve (a CRD not installed: 404) is an empty copy, asked
again now and then.

The watch stream is read by the kubernetes client's ``watch.Watch`` (line framing, the version of every
event and bookmark, ERROR events raised as ``ApiException``); the request itself goes through the
``Cluster``'s ``ApiClient`` as every other call does (its TLS, token refresh and impersonation).
Only LIST and WATCH requests are made: the RBAC a reader needs is ``list`` and ``watch``.
"""

from __future__ import annotations

import http
import threading
from collections.abc import Callable
from typing import Any

from nodewright.cluster.client import Cluster, _decode
from nodewright.cluster.errors import ApiError, ApiUnavailable, ClusterError, NotFound, error_for
from nodewright.cluster.resources import Resource

# Seconds one watch request lasts before it is renewed from the last resourceVersion (client-go draws
# 5-10 minutes; shorter costs a request a minute and bounds how long a silently dead stream goes unseen).
WATCH_SECONDS = 60
# Extra read time past the server's timeoutSeconds before the client gives the stream up as dead.
READ_MARGIN_SECONDS = 15.0
# Waits after a failed list or watch: doubled per failure up to the cap, as client-go's backoff.
BACKOFF_SECONDS = 0.8
BACKOFF_CAP_SECONDS = 30.0
# How often a resource type the cluster does not serve (404: its CRD not installed) is asked again.
ABSENT_RETRY_SECONDS = 60.0

GONE = int(http.HTTPStatus.GONE)


class Expired(ClusterError):
    """410 Gone: the watch's resourceVersion is older than the API server keeps; list again."""


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Reflector:
    """One resource's objects, listed then kept current by watches (see the module docstring).

    ``objects()`` is safe to call from any thread; ``on_change`` is called (from the reflector's
    thread) after every list and every event that changed the copy.
    """

    def __init__(
        self,
        cluster: Cluster,
        resource: Resource,
        *,
        field_selector: str | None = None,
        on_change: Callable[[], None] = lambda: None,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.cluster = cluster
        self.resource = resource
        self.field_selector = field_selector
        self.on_change = on_change
        self.watch_seconds = watch_seconds
        self.resource_version: str | None = None
        self.lists = 0  # every list, the first included: more than one means a 410 (or a lost copy)
        self.served = True  # False while the cluster answers 404 for the resource type (CRD absent)
        self.error: ClusterError | None = None  # the last failure, until a list or watch succeeds
        self.synced = threading.Event()  # set once the first list (or its 404) is in
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._watch: Any = None
        self._stopped = threading.Event()

    def objects(self) -> list[dict[str, Any]]:
        """The current objects (each as the API server last sent it; do not modify them)."""
        with self._lock:
            return list(self._objects.values())

    # -- the two requests ---------------------------------------------------------------------------
    def list(self) -> None:
        """Replace the copy with a fresh list and take its resourceVersion (the watch resumes there)."""
        try:
            items, version = self.cluster._list(self.resource, None, None, self.field_selector)
        except NotFound:
            items, version, self.served = [], None, False
        else:
            self.served = True
        with self._lock:
            self._objects = {_key(o): o for o in items}
            self.resource_version = version
            self.lists += 1
        self.error = None
        self.synced.set()
        self.on_change()

    def watch(self) -> None:
        """One watch request from ``resource_version``, applying its events until the server ends it.

        Raises ``Expired`` on 410 Gone (the caller lists again), ``ApiError``/``ApiUnavailable`` when
        the request fails otherwise; a stream that drops mid-way just ends (the next resumes).
        """
        import urllib3
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        self._watch = stream = watch.Watch(return_type="object")
        query: dict[str, Any] = {
            "resource_version": self.resource_version,
            "timeout_seconds": self.watch_seconds,
            "allow_watch_bookmarks": True,
        }
        if self.field_selector:
            query["field_selector"] = self.field_selector
        try:
            for event in stream.stream(self._open, **query):
                self._apply(event["type"], event["raw_object"])
                if stream.resource_version:
                    self.resource_version = stream.resource_version
                if self._stopped.is_set():
                    break
        except ApiException as exc:  # an ERROR event in the stream
            if exc.status == GONE:
                raise Expired(f"watch {self.resource.plural}: {exc.reason}") from exc
            raise error_for(exc.status or 500, {"message": str(exc.reason)}, str(exc.reason)) from exc
        except ApiError as exc:  # the watch request itself refused
            if exc.status == GONE:
                raise Expired(f"watch {self.resource.plural}: {exc.message}") from exc
            raise
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:  # dropped or garbled: resume
            self.error = ApiUnavailable(f"watch {self.resource.plural}: the stream broke: {exc}")
            return
        finally:
            self._watch = None
        self.error = None

    def _open(
        self,
        *,
        watch: bool,
        _preload_content: bool,
        resource_version: str | None,
        timeout_seconds: int,
        allow_watch_bookmarks: bool,
        field_selector: str | None = None,
    ) -> Any:
        """The watch request through the Cluster's ApiClient; the open urllib3 response to stream."""
        import urllib3

        del _preload_content  # always streamed
        query = [
            ("watch", "true" if watch else "false"),
            ("allowWatchBookmarks", "true" if allow_watch_bookmarks else "false"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        cluster = self.cluster
        method, url, headers, body, _ = cluster.api_client.param_serialize(
            "GET",
            self.resource.path(),
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            response = cluster.api_client.call_api(
                method,
                url,
                cluster._impersonating(headers),
                body,
                _request_timeout=(cluster.timeout[0], timeout_seconds + READ_MARGIN_SECONDS),
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiUnavailable(f"watch {self.resource.plural}: API server unreachable: {exc}") from exc
        raw = response.response
        if response.status != 200:
            try:
                answer = raw.read()
            finally:
                raw.release_conn()
            raise error_for(
                response.status, _decode(answer), f"watch {self.resource.plural}: {answer[:200]!r}"
            )
        return raw

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK: only its resourceVersion counts
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(_key(obj), None)
            else:
                self._objects[_key(obj)] = obj
        self.on_change()

    # -- the loop ---------------------------------------------------------------------------------
    def run(self) -> None:
        """List, then watch until ``stop()``: resume after each request, list again after a 410, back
        off after failures. Meant for its own (daemon) thread."""
        failures = 0
        listed = self.resource_version is not None  # listed before (``list``): watch on from there
        while not self._stopped.is_set():
            try:
                if not listed:
                    self.list()
                    listed = True
                if not self.served:
                    self._stopped.wait(ABSENT_RETRY_SECONDS)
                    listed = False
                    continue
                self.watch()
                failures = 0
            except Expired:
                listed = False  # at once: the copy may be missing changes
            except ClusterError as exc:
                self.error = exc
                self.synced.set()  # a reader waiting for the first list sees why there is none
                failures += 1
                self._stopped.wait(min(BACKOFF_CAP_SECONDS, BACKOFF_SECONDS * 2 ** (failures - 1)))

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"reflector-{self.resource.plural}", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """End the loop; an open watch stream is shut so its thread returns promptly."""
        self._stopped.set()
        current = self._watch
        if current is not None:
            current.stop()
