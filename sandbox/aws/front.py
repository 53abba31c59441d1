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
* **EC2's client tokens, honoured.** moto 5.2 ignores ``ClientToken``: a CreateFleet that botocore
  sent again after a read timeout (moto slow under load, the first request still running) launched a
  second instance, which EC2 never does ("Ensuring idempotency in Amazon EC2 API requests"): a retry
  with the same client token and the same parameters succeeds without doing anything more and
  answers what the first did; with other parameters it fails with ``IdempotentParameterMismatch``.
  Here the first successful answer to a token is kept (per region and token, until moto is reset) and
  served again with a fresh request id; a retry arriving while the first request is still being
  answered waits for that answer. An error is never kept: a retry after one is tried afresh, with
  whatever parameters it has.
"""

from __future__ import annotations

import io
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

STATIC_ACTIONS = frozenset({"DescribeInstanceTypes", "DescribeInstanceTypeOfferings"})
# The EC2 actions the product sends a client token with (``cloud.provider``'s CreateFleet), and
# RunInstances, which takes one too.
CLIENT_TOKEN_ACTIONS = frozenset({"CreateFleet", "RunInstances"})
_ACTION = re.compile(rb"(?:^|&)Action=([A-Za-z]+)")
_CLIENT_TOKEN = re.compile(rb"(?:^|&)ClientToken=([^&]*)")
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
Answer = tuple[str, list[tuple[str, str]], bytes]  # status, headers, body
_ANSWERS: dict[tuple[str, bytes], Answer] = {}
_ANSWERS_LOCK = threading.Lock()


class _Token:
    """One client token: once a request with it succeeded, that request and its answer."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # held while a request with the token is answered
        self.body = b""
        self.answer: Answer | None = None


# Client tokens by (region, action, token), process-wide as moto's backends are; forgotten on reset.
_TOKENS: dict[tuple[str, str, bytes], _Token] = {}
_TOKENS_LOCK = threading.Lock()


def forget_client_tokens() -> None:
    """Forget every kept client token (moto's state was reset: what they answered is gone)."""
    with _TOKENS_LOCK:
        _TOKENS.clear()


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
        token = _CLIENT_TOKEN.search(body) if action in CLIENT_TOKEN_ACTIONS else None
        if token is not None and token.group(1):
            return self._idempotent(environ, start_response, action, token.group(1), body)
        try:
            return self.app(environ, start_response)
        finally:
            if action and not action.startswith(("Describe", "Get")):
                EC2_CHANGES.notify()

    def _static(self, environ: dict[str, Any], start_response: Any, body: bytes) -> Iterable[bytes]:
        key = (_region(environ), body)
        with _ANSWERS_LOCK:
            kept = _ANSWERS.get(key)
        if kept is None:
            kept = self._answer(environ)
            if not kept[0].startswith("200"):
                start_response(kept[0], kept[1])
                return [kept[2]]
            with _ANSWERS_LOCK:
                _ANSWERS[key] = kept
        return _replay(start_response, kept)

    def _idempotent(
        self, environ: dict[str, Any], start_response: Any, action: str, token: bytes, body: bytes
    ) -> Iterable[bytes]:
        """A request with a client token: answered once, then the same answer (module docstring)."""
        with _TOKENS_LOCK:
            entry = _TOKENS.setdefault((_region(environ), action, token), _Token())
        with entry.lock:
            if entry.answer is not None:
                if entry.body != body:
                    return _mismatch(start_response, token)
                return _replay(start_response, entry.answer)
            try:
                answer = self._answer(environ)
            finally:
                EC2_CHANGES.notify()
            if answer[0].startswith("200"):
                entry.body, entry.answer = body, answer
        start_response(answer[0], answer[1])
        return [answer[2]]

    def _answer(self, environ: dict[str, Any]) -> Answer:
        """moto's whole answer to the request, read rather than streamed (to be kept)."""
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
        return answered["status"], answered["headers"], payload


def _region(environ: dict[str, Any]) -> str:
    found = _REGION.search(environ.get("HTTP_AUTHORIZATION") or "")
    return found.group(1) if found else ""


def _mismatch(start_response: Any, token: bytes) -> Iterable[bytes]:
    """EC2's answer to a client token reused with other parameters."""
    request_id = str(uuid.uuid4())
    payload = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        "<Code>IdempotentParameterMismatch</Code>"
        f"<Message>The client token {token.decode(errors='replace')} was already used with other "
        "parameters. Use a new client token, or send the earlier request unchanged.</Message>"
        f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
    ).encode()
    start_response(
        "400 Bad Request",
        [
            ("Content-Type", "text/xml"),
            ("x-amzn-RequestId", request_id),
            ("Content-Length", str(len(payload))),
        ],
    )
    return [payload]


def _replay(start_response: Any, kept: Answer) -> Iterable[bytes]:
    """A kept answer, served again under a fresh request id."""
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
