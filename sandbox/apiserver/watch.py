"""Watch: a chunked stream of JSON lines ``{"type": ..., "object": ...}``.

Without a resourceVersion (or "0") the watch starts with a synthetic ADDED for every current object;
with one, it replays the changes after it (410 Expired in an ERROR event when history is too short).
Selector watches behave as the API server's cacher: an object that stops matching is sent as DELETED,
one that starts matching as ADDED. The stream ends at ``timeoutSeconds`` or when the server stops.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from . import errors, tables
from .encoding import kept_as
from .handlers import Request, ResourceHandlers, Response, Target
from .storage import Change, TooOld

DEFAULT_TIMEOUT = 1800.0
BOOKMARK_EVERY = 10.0


def _line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode() + b"\n"


def watch(handlers: ResourceHandlers, t: Target, request: Request, stopping: Callable[[], bool]) -> Response:
    query = request.query
    labels, fields = handlers.parse_selectors(t.rt, query)
    rv_text = query.get("resourceVersion") or ""
    try:
        timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    except ValueError as exc:
        raise errors.bad_request(f"timeoutSeconds must be a number: {exc}") from exc
    bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
    if rv_text and not rv_text.isdigit():
        raise errors.bad_request(
            f'resourceVersion: Invalid value: "{rv_text}": must be a non-negative integer'
        )
    store = handlers.store
    rt = t.rt
    as_table = tables.wants_table(request)
    sent_columns = False

    def present(obj: dict[str, Any]) -> dict[str, Any]:
        """The event's object: as read through ``rt``, or a one-row Table for ``kubectl get -w``."""
        nonlocal sent_columns
        shown = handlers._present(rt, obj)
        if not as_table:
            return shown
        table = tables.to_table(
            rt, [shown], {"resourceVersion": shown["metadata"].get("resourceVersion", "")}
        )
        if sent_columns:
            table["columnDefinitions"] = []
        sent_columns = True
        return table

    resource = None if as_table else kept_as(rt)

    def line(event_type: str, obj: dict[str, Any]) -> bytes:
        """The event of the object as stored: its encoding kept for every watcher (encoding.py)."""
        if resource is None:
            return _line(event_type, present(obj))
        return handlers.encoded.watch_line(resource, event_type, handlers._present(rt, obj))

    def matches(obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if t.namespace and obj["metadata"].get("namespace") != t.namespace:
            return False
        if t.name and obj["metadata"]["name"] != t.name:
            return False
        return labels.matches(obj["metadata"].get("labels")) and fields.matches(obj)

    initial: list[bytes] = []
    if not rv_text or rv_text == "0":
        items, start = store.list(rt.key, t.namespace)
        initial = [line("ADDED", o) for o in items if matches(o)]
    else:
        start = int(rv_text)

    def translate(change: Change) -> bytes | None:
        if change.key != rt.key:
            return None
        now_match = matches(change.obj)
        was_match = matches(change.old)
        if change.type == "ADDED":
            kind = "ADDED" if now_match else None
        elif change.type == "DELETED":
            kind = "DELETED" if was_match else None
        elif now_match and was_match:
            kind = "MODIFIED"
        elif now_match:
            kind = "ADDED"
        elif was_match:
            # The cacher sends the object as it was when it last matched, with this event's
            # resourceVersion (cacheWatcher.convertToWatchEvent).
            assert change.old is not None
            previous = {
                **change.old,
                "metadata": {**change.old["metadata"], "resourceVersion": str(change.rv)},
            }
            return _line("DELETED", present(previous))
        else:
            kind = None
        return line(kind, change.obj) if kind else None

    def stream() -> Iterator[bytes]:
        yield from initial
        deadline = time.monotonic() + timeout
        last = start
        last_sent = time.monotonic()
        while not stopping() and not store.closed:
            try:
                changes, through = store.progress(last, rt.key)
            except TooOld as exc:
                yield _line("ERROR", errors.gone(str(exc)).status())
                return
            for change in changes:
                last = change.rv
                try:
                    line = translate(change)
                except errors.ApiError as exc:  # a failed conversion: etcd's watcher ends with an error
                    yield _line("ERROR", errors.internal(exc.message).status())
                    return
                if line:
                    last_sent = time.monotonic()
                    yield line
            last = max(last, through)  # complete through here, whichever resources wrote since
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if handlers.registry.lookup(rt.group, rt.version, rt.plural) is None:
                return  # no longer served (its CRD is gone): the API server ends its watches
            if bookmarks and time.monotonic() - last_sent >= BOOKMARK_EVERY:
                last_sent = time.monotonic()
                bookmark = {
                    "kind": rt.kind,
                    "apiVersion": rt.api_version,
                    "metadata": {"resourceVersion": str(last)},
                }
                yield _line("BOOKMARK", bookmark)
            store.wait_for_change(last, min(remaining, 0.5), rt.key)

    return Response(200, stream=stream())
