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
import json
import logging
import ssl
import urllib.request
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
) -> None:
    """Call every matching webhook of ``configurations``; raise the ApiError a refusal becomes."""
    target = new if new is not None else old or {}
    for configuration in configurations:
        for webhook in configuration.get("webhooks") or []:
            if not _rules_match(webhook, rt, subresource, operation):
                continue
            if not _selectors_match(webhook, rt, target, old, namespace):
                continue
            name = webhook.get("name", "")
            fail_closed = webhook.get("failurePolicy", "Fail") == "Fail"
            request = _request(rt, subresource, operation, new, old, user=user, dry_run=dry_run)
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
    return bool(values) and ("*" in values or value in values)


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
) -> dict[str, Any]:
    meta = (new or old or {}).get("metadata") or {}
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
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


@functools.lru_cache(maxsize=256)
def _program(expression: str) -> Any:
    import celpy

    environment = celpy.Environment()
    return environment.program(environment.compile(expression))


def _conditions_hold(
    webhook: dict[str, Any], new: dict[str, Any] | None, old: dict[str, Any] | None, request: dict[str, Any]
) -> bool:
    """All matchConditions true; False at the first false one; WebhookFailure on an error."""
    from celpy import CELEvalError, json_to_cel

    conditions = webhook.get("matchConditions") or []
    if not conditions:
        return True
    activation = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({k: v for k, v in request.items() if k not in ("object", "oldObject")}),
    }
    for condition in conditions:
        try:
            result = _program(condition["expression"]).evaluate(activation)
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
    Raises what urllib raises (refused, timed out, TLS, a non-2xx status) or a ValueError (not JSON)."""
    context = _tls_context(ca_bundle or None)
    call = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    with urllib.request.urlopen(call, timeout=timeout, context=context) as answer:
        return json.loads(answer.read())


@functools.lru_cache(maxsize=32)
def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """One verifying context per CA bundle, kept as kube-apiserver keeps a client per webhook: making
    it per call loaded the system's roots each time (5 % of a 500-pod burst's CPU in the sandbox)."""
    if ca_bundle:
        return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    return ssl.create_default_context()
