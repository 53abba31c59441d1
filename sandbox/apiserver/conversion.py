"""Custom resources read or written through a version other than the CRD's storage version.

As kube-apiserver (apiextensions-apiserver ``pkg/apiserver/conversion``):

- ``conversion.strategy: None`` (the default): only ``apiVersion`` changes;
- ``Webhook``: a ``ConversionReview`` (apiextensions.k8s.io/v1, the first of
  ``conversionReviewVersions`` this server speaks: ``v1``) is POSTed to ``clientConfig.url`` over
  HTTPS, verified with ``clientConfig.caBundle`` (or the system's roots), with the API server's 30 s
  timeout (``?timeout=30s``), **one object per review**: kube-apiserver converts an object as its
  storage codec decodes it, one at a time, a list's items included (etcd3 ``GetList`` decodes each
  stored object of the kind, before the selectors filter them, and fails the list when one cannot
  be decoded). Objects already in the desired version are not sent. The answer is
  checked as ``webhook_converter.go`` checks it: a v1 ConversionReview, the request's uid, result
  ``Success`` (else its message is the error), one object back per object sent, each in the desired
  apiVersion with the same kind, name, namespace and uid. Of ``metadata`` only ``labels`` and
  ``annotations`` are taken from the answer (string maps); everything else is the original's.

Any failure is :class:`ConversionFailed`, whose message is kube-apiserver's
``conversion webhook for <group/version, Kind=...> failed: ...``; the handlers answer it as the
API server does, a 500 ``Status`` with no reason (kubectl: ``Error from server: conversion webhook
for ...``); a watch ends with an ERROR event.

Where the emulator differs: kube-apiserver also converts as it fills each served version's watch
cache (so a webhook is called on every write for every served version, whether or not anyone reads
it); here an object is converted when a request reads or writes it through another version. Reads
and writes in the storage version never call the webhook, in both.
"""

from __future__ import annotations

import copy
import urllib.error
import uuid
from typing import Any

from .resources import ResourceType
from .webhooks import post_json

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
TIMEOUT_SECONDS = 30  # kube-apiserver's conversion webhook client timeout


class ConversionFailed(Exception):
    """The objects could not be converted; ``str()`` is what the API server tells the client."""


def convert(rt: ResourceType, objects: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    """``objects`` (of ``rt``'s CRD) in ``version``: copies where they change, the same dicts where not.

    Through a webhook, one review per object, in order; the first that fails fails them all (as one
    object that cannot be decoded fails a list)."""
    desired = f"{rt.group}/{version}"
    todo = [i for i, obj in enumerate(objects) if obj.get("apiVersion") != desired]
    if not todo:
        return objects
    out = list(objects)
    for i in todo:
        original = objects[i]
        if rt.conversion_webhook is None:
            out[i] = {**original, "apiVersion": desired}
            continue
        gvk = _gvk(original)
        (answer,) = _call(rt.conversion_webhook, [original], desired, gvk)
        out[i] = _checked(original, answer, desired, gvk)
    return out


def _gvk(obj: dict[str, Any]) -> str:
    """Go's ``schema.GroupVersionKind.String()``: ``karpenter.sh/v1, Kind=NodePool``."""
    return f"{obj.get('apiVersion')}, Kind={obj.get('kind')}"


def _call(
    webhook: dict[str, Any], objects: list[dict[str, Any]], desired: str, gvk: str
) -> list[dict[str, Any]]:
    failed = f"conversion webhook for {gvk} failed"
    client = webhook.get("clientConfig") or {}
    url = client.get("url")
    if not url:
        raise ConversionFailed(
            f"{failed}: clientConfig.service is not emulated (no in-cluster services): give a url"
        )
    if "v1" not in (webhook.get("conversionReviewVersions") or []):
        raise ConversionFailed(f"{failed}: no supported conversion review versions")
    uid = str(uuid.uuid4())
    body = {
        "apiVersion": REVIEW_API_VERSION,
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    }
    target = f"{url}{'&' if '?' in url else '?'}timeout={TIMEOUT_SECONDS}s"
    try:
        review = post_json(target, client.get("caBundle"), body, TIMEOUT_SECONDS)
    except Exception as exc:  # refused, timed out, TLS, a non-2xx status, not JSON
        raise ConversionFailed(f'{failed}: Post "{target}": {_reason(exc)}') from exc
    try:
        return _converted_objects(review, uid, len(objects))
    except ValueError as exc:
        raise ConversionFailed(f"{failed}: {exc}") from exc


# What client-go says of a non-2xx answer without a Status body (errors.NewGenericServerResponse).
_GENERIC = {
    400: "the server rejected our request for an unknown reason",
    403: "the server does not allow access to the requested resource",
    404: "the server could not find the requested resource",
    413: "the server rejected our request because the request entity is too large",
    429: "the server has received too many requests and has asked us to try again later",
}


def _reason(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        if exc.code in _GENERIC:
            return _GENERIC[exc.code]
        body = exc.read().decode("utf-8", errors="replace")[:200]
        return f'an error on the server ("{body}") has prevented the request from succeeding'
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc)


def _converted_objects(review: Any, uid: str, count: int) -> list[dict[str, Any]]:
    """The answer's objects, checked as getConvertedObjectsFromResponse does (ValueError: why not)."""
    expected = f"{REVIEW_API_VERSION}, Kind=ConversionReview"
    got = f"{review.get('apiVersion')}, Kind={review.get('kind')}" if isinstance(review, dict) else "?"
    if got != expected:
        raise ValueError(f"expected webhook response of {expected}, got {got}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise ValueError("no response provided")
    if response.get("uid") != uid:
        raise ValueError(f'expected response.uid="{uid}", got "{response.get("uid") or ""}"')
    result = response.get("result") or {}
    if result.get("status") != "Success":
        status = result.get("status")
        raise ValueError(result.get("message") or f"response.result.status was '{status}', not 'Success'")
    objects = response.get("convertedObjects") or []
    if not isinstance(objects, list) or len(objects) != count:
        raise ValueError(
            f"returned {len(objects) if isinstance(objects, list) else 0} objects, expected {count}"
        )
    return objects


def _checked(original: dict[str, Any], converted: Any, desired: str, gvk: str) -> dict[str, Any]:
    """``converted`` with the original's metadata but its own labels and annotations
    (validateConvertedObject, restoreObjectMeta)."""
    invalid = f"conversion webhook for {gvk} returned invalid object"
    if not isinstance(converted, dict) or not isinstance(converted.get("metadata"), dict):
        raise ConversionFailed(f"{invalid}: missing metadata in converted object")
    if converted.get("apiVersion") != desired:
        received = converted.get("apiVersion")
        raise ConversionFailed(f"{invalid}: invalid groupVersion (expected {desired}, received {received})")
    meta, answered = original.get("metadata") or {}, converted["metadata"]
    pairs = [("kind", original.get("kind"), converted.get("kind"))]
    pairs += [
        (what, meta.get(key), answered.get(key))
        for what, key in (("name", "name"), ("namespace", "namespace"), ("UID", "uid"))
    ]
    for what, want, got in pairs:
        if (want or "") != (got or ""):
            raise ConversionFailed(f"{invalid}: must have the same {what}: {want} != {got}")
    out = copy.deepcopy(converted)
    restored = copy.deepcopy(meta)
    for field in ("labels", "annotations"):
        value = answered.get(field)
        if value is None:
            restored.pop(field, None)
        elif isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            restored[field] = copy.deepcopy(value)
        else:
            raise ConversionFailed(
                f"conversion webhook for {gvk} returned invalid metadata: metadata.{field} must be strings"
            )
    out["metadata"] = restored
    return out
