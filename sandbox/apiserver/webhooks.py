"""Validating admission webhooks, called as kube-apiserver calls them (admissionregistration.k8s.io/v1).

For a write of a built-in or custom resource, every ``ValidatingWebhookConfiguration`` webhook whose
``rules`` match (API group, version, operation, resource with its subresource, scope) and whose
``namespaceSelector``/``objectSelector`` select the object is considered; its ``matchConditions``
(CEL, with ``object``, ``oldObject`` and ``request``) are evaluated with cel-python, and only when all
hold is the URL called: an ``AdmissionReview`` (admission.k8s.io/v1) POSTed over HTTPS, verified with
``clientConfig.caBundle`` (or the system's roots), within ``timeoutSeconds`` (default 10).

A failed call (refused, timed out, an answer that is not an AdmissionReview for this uid) or a
matchCondition that fails to evaluate is an error: with ``failurePolicy: Ignore`` the webhook is
skipped, with ``Fail`` (the default) the write is refused with 500 ``failed calling webhook``. A
webhook that answers ``allowed: false`` refuses the write with its status's code (400 when it gives
none) and ``admission webhook "<name>" denied the request: <message>``.

Not emulated: ``clientConfig.service`` (no in-cluster services here: such a webhook counts as
unreachable), ``matchPolicy: Equivalent`` conversions, the ``authorizer`` CEL variable, mutating
webhooks, and dry-run requests to webhooks with ``sideEffects`` other than None/NoneOnDryRun (they
are refused, as kube-apiserver does).
"""

from __future__ import annotations

import base64
import functools
import http.client
import io
import json
import logging
import ssl
import threading
import urllib.error
import urllib.parse
import uuid
from typing import Any

from . import errors
from .resources import ResourceType
from .selectors import match_selector_object

log = logging.getLogger(__name__)

CONFIGURATIONS = ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
REVIEW_VERSION = "admission.k8s.io/v1"
DEFAULT_TIMEOUT_SECONDS = 10


class WebhookFailure(Exception):
    """The call (or its matchConditions) failed: what ``failurePolicy`` decides about."""


def validate(
    configurations: list[dict[str, Any]],
    rt: ResourceType,
    subresource: str | None,
    operation: str,
    *,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None,
    namespace: dict[str, Any] | None,
    user: str,
    dry_run: bool,
    kind: dict[str, str] | None = None,
) -> None:
    """Call every matching webhook of ``configurations``; raise the ApiError a refusal becomes.
    ``kind``: the objects' own kind when it is not ``rt``'s (a /scale write's Scale)."""
    target = new if new is not None else old or {}
    for configuration in configurations:
        for webhook in configuration.get("webhooks") or []:
            if not _rules_match(webhook, rt, subresource, operation):
                continue
            if not _selectors_match(webhook, rt, target, old, namespace):
                continue
            name = webhook.get("name", "")
            fail_closed = webhook.get("failurePolicy", "Fail") == "Fail"
            request = _request(rt, subresource, operation, new, old, user=user, dry_run=dry_run, kind=kind)
            try:
                if not _conditions_hold(webhook, new, old, request):
                    continue
                if dry_run and webhook.get("sideEffects") not in ("None", "NoneOnDryRun"):
                    raise errors.bad_request(f'admission webhook "{name}" does not support dry run')
                answer = _call(webhook, request)
            except WebhookFailure as exc:
                if fail_closed:
                    raise errors.internal(f'failed calling webhook "{name}": {exc}') from exc
                log.info("webhook %s ignored (failurePolicy Ignore): %s", name, exc)
                continue
            if not answer.get("allowed"):
                status = answer.get("status") or {}
                message = status.get("message") or status.get("reason") or ""
                raise errors.ApiError(
                    int(status.get("code") or 400),
                    status.get("reason") or "BadRequest",
                    f'admission webhook "{name}" denied the request'
                    + (f": {message}" if message else " without explanation"),
                )


def _rules_match(webhook: dict[str, Any], rt: ResourceType, subresource: str | None, operation: str) -> bool:
    resource = f"{rt.plural}/{subresource}" if subresource else rt.plural
    for rule in webhook.get("rules") or []:
        operations = rule.get("operations") or []
        if "*" not in operations and operation not in operations:
            continue
        if not _listed(rule.get("apiGroups"), rt.group) or not _listed(rule.get("apiVersions"), rt.version):
            continue
        if not any(
            _resource_matches(pattern, resource, rt.plural, subresource)
            for pattern in rule.get("resources") or []
        ):
            continue
        scope = rule.get("scope", "*")
        if (scope == "Namespaced" and not rt.namespaced) or (scope == "Cluster" and rt.namespaced):
            continue
        return True
    return False


def _listed(values: list[str] | None, value: str) -> bool:
    return values is not None and ("*" in values or value in values)


def _resource_matches(pattern: str, resource: str, plural: str, subresource: str | None) -> bool:
    """``pods``, ``pods/status``, ``pods/*``, ``*``, ``*/status``, ``*/*`` (admissionregistration v1)."""
    if pattern in ("*/*", resource):
        return True
    if pattern == "*":
        return subresource is None
    head, _, tail = pattern.partition("/")
    if not tail:
        return False
    return (head in ("*", plural)) and ((tail == "*" and subresource is not None) or tail == subresource)


def _selectors_match(
    webhook: dict[str, Any],
    rt: ResourceType,
    obj: dict[str, Any],
    old: dict[str, Any] | None,
    namespace: dict[str, Any] | None,
) -> bool:
    object_selector = webhook.get("objectSelector")
    if object_selector:
        labels = [(o.get("metadata") or {}).get("labels") for o in (obj, old) if o is not None]
        if not any(match_selector_object(object_selector, ls) for ls in labels):
            return False
    namespace_selector = webhook.get("namespaceSelector")
    if namespace_selector and rt.namespaced:
        namespace_labels = ((namespace or {}).get("metadata") or {}).get("labels")
        if not match_selector_object(namespace_selector, namespace_labels):
            return False
    return True


def _request(
    rt: ResourceType,
    subresource: str | None,
    operation: str,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None,
    *,
    user: str,
    dry_run: bool,
    kind: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta = (new or old or {}).get("metadata") or {}
    kind = kind or {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": meta.get("name", ""),
        "operation": operation,
        "userInfo": {"username": user},
        "object": new,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"kind": f"{operation.capitalize()}Options", "apiVersion": "meta.k8s.io/v1"},
    }
    if subresource:
        request["subResource"] = request["requestSubResource"] = subresource
    if rt.namespaced:
        request["namespace"] = meta.get("namespace", "")
    return request


VARIABLES = ("object", "oldObject", "request")


def validate_configuration(configuration: dict[str, Any]) -> list[errors.FieldError]:
    """Every matchCondition compiles, as kube-apiserver checks when a configuration is written (and
    compiles it then: the first request it matters to does not pay for it)."""
    problems = []
    for i, webhook in enumerate(configuration.get("webhooks") or []):
        for j, condition in enumerate(webhook.get("matchConditions") or []):
            expression = condition.get("expression") if isinstance(condition, dict) else None
            field = f"webhooks[{i}].matchConditions[{j}].expression"
            if not isinstance(expression, str) or not expression:
                problems.append(errors.FieldError.required(field))
                continue
            try:
                _program(expression)
            except Exception as exc:  # celpy's parse and compile errors
                problems.append(errors.FieldError.invalid(field, expression, f"compilation failed: {exc}"))
    return problems


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> tuple[Any, tuple[tuple[str, tuple[str, ...]], ...]]:
    """The compiled condition, and what it reads: ``("value", ("object", "reason"))`` for a field
    it uses, ``("has", path)`` for one it only tests the presence of."""
    import celpy

    environment = celpy.Environment()
    ast = environment.compile(expression)
    return environment.program(ast), tuple(sorted(set(_reads(ast))))


def _reads(tree: Any) -> list[tuple[str, tuple[str, ...]]]:
    """The variables' fields an expression reads: each ``a.b.c`` chain rooted at object, oldObject
    or request (a method call, an index or a macro on it reads the whole value at the chain's end;
    ``has(a.b.c)`` only whether each step is there); a variable used any other way is read whole."""
    from lark import Token, Tree

    chain = _chain(tree)
    if chain is not None:
        return [("value", chain)] if chain[0] in VARIABLES else []
    if isinstance(tree, Tree) and tree.data == "ident_arg" and tree.children:
        head = tree.children[0]
        tested = _only_chain(tree.children[1]) if len(tree.children) == 2 else None
        if isinstance(head, Token) and str(head) == "has" and tested is not None and tested[0] in VARIABLES:
            return [("has", tested)]
    found: list[tuple[str, tuple[str, ...]]] = []
    for child in tree.children if isinstance(tree, Tree) else []:
        if isinstance(child, Token):
            if child.type == "IDENT" and str(child) in VARIABLES:
                found.append(("value", (str(child),)))
        else:
            found += _reads(child)
    return found


def _only_chain(tree: Any) -> tuple[str, ...] | None:
    """The chain a tree is, through the wrapping one-child nodes of CEL's grammar (expr, relation,
    ...), else None."""
    from lark import Tree

    while isinstance(tree, Tree):
        chain = _chain(tree)
        if chain is not None:
            return chain
        if len(tree.children) != 1:
            return None
        tree = tree.children[0]
    return None


def _chain(tree: Any) -> tuple[str, ...] | None:
    """``a.b.c`` for a ``member`` tree that is only field selections on an identifier, else None."""
    from lark import Token, Tree

    if not isinstance(tree, Tree) or tree.data != "member" or len(tree.children) != 1:
        return None
    (node,) = tree.children
    if isinstance(node, Tree) and node.data == "primary" and len(node.children) == 1:
        ident = node.children[0]
        if isinstance(ident, Tree) and ident.data == "ident" and len(ident.children) == 1:
            return (str(ident.children[0]),)
        return None
    if isinstance(node, Tree) and node.data == "member_dot" and len(node.children) == 2:
        inner, name = node.children
        head = _chain(inner)
        return (*head, str(name)) if head is not None and isinstance(name, Token) else None
    return None


_ABSENT = object()


def _read(root: Any, mode: str, path: tuple[str, ...]) -> str:
    """What reading ``path`` from ``root`` depends on, as a key: the value (``has``: only that it is
    there), or where the chain stops and on what type (a missing field or a field of a non-map is
    the same error, or has() answer, whatever else the value holds)."""
    value = root
    for depth, name in enumerate(path):
        if not isinstance(value, dict) or name not in value:
            return json.dumps(["stops", depth, type(value).__name__])
        value = value[name]
    return json.dumps(["there"] if mode == "has" else ["value", value], sort_keys=True, default=str)


# (expression, what it reads) -> its result: CEL is deterministic and side-effect free, so a
# condition over the same fields has the same result. kube-apiserver evaluates compiled cel-go in
# microseconds; cel-python's interpreter takes milliseconds, which the emulator's one process then
# takes from every other request (a burst of Events made the scheduler's status writes wait).
_RESULTS: dict[tuple[str, tuple[str, ...]], Any] = {}
_RESULTS_LIMIT = 4096
_RESULTS_LOCK = threading.Lock()


def _conditions_hold(
    webhook: dict[str, Any], new: dict[str, Any] | None, old: dict[str, Any] | None, request: dict[str, Any]
) -> bool:
    """All matchConditions true; False at the first false one; WebhookFailure on an error."""
    from celpy.adapter import json_to_cel
    from celpy.evaluation import CELEvalError

    conditions = webhook.get("matchConditions") or []
    if not conditions:
        return True
    review = {k: v for k, v in request.items() if k not in ("object", "oldObject")}
    roots = {"object": new, "oldObject": old, "request": review}
    activation: dict[str, Any] | None = None
    for condition in conditions:
        expression = condition["expression"]
        try:
            program, reads = _program(expression)
            key = (expression, tuple(_read(roots[path[0]], mode, path[1:]) for mode, path in reads))
            with _RESULTS_LOCK:
                result = _RESULTS.get(key, _ABSENT)
            if result is _ABSENT:
                if activation is None:
                    activation = {name: json_to_cel(value) for name, value in roots.items()}
                result = program.evaluate(activation)
                with _RESULTS_LOCK:
                    if len(_RESULTS) >= _RESULTS_LIMIT:
                        _RESULTS.clear()
                    _RESULTS[key] = result
        except Exception as exc:  # celpy raises its own compile and evaluation errors
            raise WebhookFailure(f"matchCondition {condition.get('name')!r}: {exc}") from exc
        if isinstance(result, CELEvalError):
            raise WebhookFailure(f"matchCondition {condition.get('name')!r}: {result}")
        if not bool(result):
            return False
    return True


def _call(webhook: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The webhook's ``response`` for ``request``; WebhookFailure when there is none to trust."""
    client = webhook.get("clientConfig") or {}
    url = client.get("url")
    if not url:
        raise WebhookFailure("clientConfig.service is not emulated (no in-cluster services): give a url")
    if not url.startswith("https://"):
        raise WebhookFailure(f"{url}: webhooks are called over https only")
    body = {"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "request": request}
    timeout = int(webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
    # kube-apiserver's REST client tells the webhook its deadline (?timeout=10s) and gives up then.
    called = f"{url}{'&' if '?' in url else '?'}timeout={timeout}s"
    try:
        review = post_json(called, client.get("caBundle"), body, timeout)
    except Exception as exc:  # refused, timed out, TLS, a non-2xx status, not JSON
        raise WebhookFailure(f"Post {url.split('://', 1)[0]}://...: {exc}") from exc
    response = review.get("response") if isinstance(review, dict) else None
    if (
        not isinstance(response, dict)
        or review.get("apiVersion") != REVIEW_VERSION
        or review.get("kind") != "AdmissionReview"
    ):
        raise WebhookFailure("the answer is not an admission.k8s.io/v1 AdmissionReview")
    if response.get("uid") != request["uid"]:
        raise WebhookFailure(f"expected response.uid={request['uid']!r}, got {response.get('uid')!r}")
    return response


def post_json(url: str, ca_bundle: str | None, body: Any, timeout: float) -> Any:
    """POST ``body`` as JSON over HTTPS, verified with ``ca_bundle`` (base64 PEM) or the system's
    roots, and the decoded JSON answer: how the API server calls admission and conversion webhooks.
    Raises ``urllib.error.HTTPError`` for a non-2xx status, an ``OSError`` when the call fails
    (refused, timed out, TLS), a ValueError when the answer is not JSON. ``timeout`` bounds each
    blocking step (connect, handshake, each read): a URL that never answers costs exactly it."""
    return json.loads(_CONNECTIONS.post(url, ca_bundle or None, json.dumps(body).encode(), timeout))


_Key = tuple[str, int, str | None]  # host, port, CA bundle


class _Connections:
    """Kept-alive HTTPS connections per webhook host and CA bundle, as kube-apiserver keeps a client
    per webhook whose connections it reuses: a TLS handshake per call cost the sandbox's CPU (the
    emulator's process also serves the scheduler it would slow), not the webhook's time."""

    def __init__(self) -> None:
        self._idle: dict[_Key, list[http.client.HTTPSConnection]] = {}
        self._lock = threading.Lock()

    def post(self, url: str, ca_bundle: str | None, data: bytes, timeout: float) -> bytes:
        parts = urllib.parse.urlsplit(url)
        key = (parts.hostname or "", parts.port or 443, ca_bundle)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        while True:
            connection, reused = self._take(key, timeout)
            try:
                connection.request("POST", target or "/", body=data, headers=headers)
                answer = connection.getresponse()
                payload = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                connection.close()
                if reused:  # the server closed an idle connection: a new one, as Go's client does
                    continue
                raise
            except BaseException:
                connection.close()
                raise
            if answer.will_close:
                connection.close()
            else:
                with self._lock:
                    self._idle.setdefault(key, []).append(connection)
            if not 200 <= answer.status < 300:
                raise urllib.error.HTTPError(
                    url, answer.status, answer.reason, answer.headers, io.BytesIO(payload)
                )
            return payload

    def _take(
        self, key: tuple[str, int, str | None], timeout: float
    ) -> tuple[http.client.HTTPSConnection, bool]:
        with self._lock:
            idle = self._idle.get(key) or []
            connection = idle.pop() if idle else None
        if connection is not None:
            connection.timeout = timeout
            if connection.sock is not None:
                connection.sock.settimeout(timeout)
            return connection, True
        host, port, ca_bundle = key
        return http.client.HTTPSConnection(
            host, port, timeout=timeout, context=_tls_context(ca_bundle)
        ), False


_CONNECTIONS = _Connections()


@functools.lru_cache(maxsize=32)
def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """One verifying context per CA bundle, kept as kube-apiserver keeps a client per webhook: making
    it per call loaded the system's roots each time (5 % of a 500-pod burst's CPU in the sandbox)."""
    if ca_bundle:
        return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    return ssl.create_default_context()
