"""What stands between the sandbox's HTTP server and moto's WSGI app (inside the IAM middleware, so
every request is still held to its caller's policy first):

* **The catalog's answers, serialised once.** DescribeInstanceTypes and
  DescribeInstanceTypeOfferings answer from EC2's static catalog: the same request gets the same
  document. moto builds and serialises the 1,395 types again for every call, about 4 CPU seconds
  (EC2 answers in about one), and every sandbox, every cold function container and the kubelet's
  first look at a type ask for it: across the e2e suite that was minutes of one core, taken from
  the scenarios running beside it. The first answer to a request is kept (per region and request
  body, for the process) and served again with a fresh request id; an error is never kept.
* **EC2's changes, announced.** The simulated kubelet watches EC2 as a real one cannot (it *is* the
  instances): every mutating EC2 call (anything not ``Describe*``/``Get*``) wakes the listeners of
  :data:`EC2_CHANGES`, so the kubelet reacts to a launch or a termination at once instead of
  listing every instance five times a second (each DescribeInstances costs moto its serialisation).
"""

from __future__ import annotations

import io
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

STATIC_ACTIONS = frozenset({"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"})
_ACTION = re.compile(rb"(?:^|&)Action=([A-Za-z]+)")
_REGION = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")
_REQUEST_ID = re.compile(rb"(?<=<(?:requestId|RequestId)>)[^<]*(?=</(?:requestId|RequestId)>)")
_REQUEST_ID_HEADERS = frozenset({"x-amzn-requestid", "x-amz-request-id"})


class Ec2Changes:
    """Callables woken after every mutating EC2 call this process's moto served. moto's backends are
    process-wide, so are the listeners: a listener woken by another sandbox's change only looks once
    more."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()


EC2_CHANGES = Ec2Changes()
# The kept answers, process-wide as moto's backends are: the catalog is the same for every sandbox.
_ANSWERS: dict[tuple[str, bytes], tuple[str, list[tuple[str, str]], bytes]] = {}
_ANSWERS_LOCK = threading.Lock()


class MotoFront:
    """WSGI middleware in front of moto's app (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST" or environ.get("HTTP_X_AMZ_TARGET"):
            return self.app(environ, start_response)  # not EC2's query protocol
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        found = _ACTION.search(body)
        action = found.group(1).decode() if found else ""
        if action in STATIC_ACTIONS:
            return self._static(environ, start_response, body)
        try:
            return self.app(environ, start_response)
        finally:
            if action and not action.startswith(("Describe", "Get")):
                EC2_CHANGES.notify()

    def _static(self, environ: dict[str, Any], start_response: Any, body: bytes) -> Iterable[bytes]:
        region = _REGION.search(environ.get("HTTP_AUTHORIZATION") or "")
        key = (region.group(1) if region else "", body)
        with _ANSWERS_LOCK:
            kept = _ANSWERS.get(key)
        if kept is None:
            answered: dict[str, Any] = {}

            def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
                answered["status"], answered["headers"] = status, list(headers)
                return lambda _data: None

            chunks = self.app(environ, capture)
            try:
                payload = b"".join(chunks)
            finally:
                if hasattr(chunks, "close"):
                    chunks.close()
            kept = (answered["status"], answered["headers"], payload)
            if not kept[0].startswith("200"):
                start_response(kept[0], kept[1])
                return [payload]
            with _ANSWERS_LOCK:
                _ANSWERS[key] = kept
        status, headers, payload = kept
        request_id = str(uuid.uuid4())
        fresh = _REQUEST_ID.sub(request_id.encode(), payload)
        start_response(
            status,
            [
                (name, request_id if name.lower() in _REQUEST_ID_HEADERS else value)
                for name, value in headers
                if name.lower() != "content-length"
            ]
            + [("Content-Length", str(len(fresh)))],
        )
        return [fresh]
