"""What ``nodewright install-webhooks`` applies to a cluster: the wake-up webhook and CRD conversion.

* ``wakeup_configuration(url)``: a ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1)
  on the CREATE of Events, in both groups (kube-scheduler v1.30+ writes events.k8s.io/v1, the
  events library's fallback and older schedulers core/v1). Its CEL ``matchConditions`` (GA in
  Kubernetes 1.30) let the API server call out only for a ``FailedScheduling`` Event about a Pod
  that Nodewright did not write itself: every other Event, and the series updates that repeat a
  pod's Event, never leave the API server. kube-scheduler records that Event through its
  asynchronous broadcaster, so however long the call takes, its scheduling loop does not wait
  (docs/architecture.md, "The wake-up"); the pods/status UPDATE this configuration replaces is
  written in the loop, which a slow URL stalled. ``failurePolicy: Ignore`` and a 1 s timeout: an
  unreachable URL delays an Event's write by at most 1 s and changes nothing else (the schedule
  still provisions). ``install-webhooks --apply`` replaces a configuration of the same name whole,
  so an installed pods/status configuration is gone with it.
* ``conversion_crds(url)``: the NodePool and EC2NodeClass CRDs (``api.crds``: v1 served and
  stored) serving ``v1beta1`` too, converted by the ConversionReview webhook on the same function
  URL (``api.conversion_review``), so v1beta1 manifests can be applied unchanged and read back in
  both versions. v1 stays the storage version: a v1 request never calls the webhook, so when the
  URL is unreachable only v1beta1 requests fail. ``v1_only_crds()`` is the shipped form (what
  ``install-webhooks --uninstall`` puts back): without a webhook the CRDs serve v1 only, because
  serving v1beta1 with ``strategy: None`` would prune what v1 has no field for
  (docs/architecture.md). NodeClaims stay v1 only: Nodewright writes them, users do not.
"""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api.crds import build_crds
from nodewright.api.labels import EVENT_COMPONENT, FAILED_SCHEDULING
from nodewright.api.schema import SCHEMAS_V1BETA1

CONFIGURATION_NAME = "nodewright-wakeup"
WEBHOOK_NAME = "wakeup.nodewright.io"
ADMIT_PATH = "admit"
CONVERT_PATH = "convert"
# The API server waits this long for an answer before it writes the Event anyway. Nothing waits on
# that write but the Event itself; one second keeps what a black-holed URL holds on the API server
# small (at kube-scheduler's 50 Event writes a second: about 50 requests in flight).
TIMEOUT_SECONDS = 1
PART_OF = {"app.kubernetes.io/part-of": "nodewright"}
# The kinds users apply in v1beta1 (the seeds): their CRDs serve it through the webhook.
CONVERTED_CRDS = ("nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws")
# Both shapes of an Event: events.k8s.io/v1 (regarding, reportingController) and core/v1
# (involvedObject, reportingComponent). has() guards every optional field, because a CEL error with
# failurePolicy Ignore skips the webhook silently.
_REGARDS_A_POD = (
    "has(object.regarding) ? "
    "(has(object.regarding.kind) && object.regarding.kind == 'Pod') : "
    "(has(object.involvedObject) && has(object.involvedObject.kind) && object.involvedObject.kind == 'Pod')"
)
_REPORTED_BY_NODEWRIGHT = (
    f"(has(object.reportingController) && object.reportingController == '{EVENT_COMPONENT}') || "
    f"(has(object.reportingComponent) && object.reportingComponent == '{EVENT_COMPONENT}')"
)
MATCH_CONDITIONS: tuple[dict[str, str], ...] = (
    {
        "name": "failed-scheduling",
        "expression": f"has(object.reason) && object.reason == '{FAILED_SCHEDULING}'",
    },
    {"name": "regarding-a-pod", "expression": _REGARDS_A_POD},
    # Nodewright's own FailedScheduling Events (a pod no NodePool can hold) would wake it for
    # nothing: the provisioner already knows.
    {"name": "not-nodewrights-own", "expression": f"!({_REPORTED_BY_NODEWRIGHT})"},
)


def endpoint(function_url: str, secret: str, path: str) -> str:
    """``https://<function URL>/<secret>/<path>`` (a function URL ends with ``/``)."""
    if not function_url.startswith("https://"):
        raise ValueError(f"{function_url!r} is not an https URL: the API server calls webhooks over TLS only")
    return f"{function_url.rstrip('/')}/{secret}/{path}"


def wakeup_configuration(url: str, ca_bundle: str | None = None) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration that rings ``url`` when a scheduler records that it could
    not place a pod.

    ``ca_bundle`` (base64 PEM): for a URL whose certificate no public CA signed: the private
    wake-up's load balancer (the stack's self-signed certificate), the sandbox's; a Lambda function
    URL's is publicly trusted."""
    client_config: dict[str, Any] = {"url": url}
    if ca_bundle:
        client_config["caBundle"] = ca_bundle
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME, "labels": dict(PART_OF)},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": ["events.k8s.io", ""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["events"],
                        "scope": "Namespaced",
                    }
                ],
                "matchConditions": [dict(c) for c in MATCH_CONDITIONS],
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": TIMEOUT_SECONDS,
                "admissionReviewVersions": ["v1"],
                "namespaceSelector": {},
                "objectSelector": {},
            }
        ],
    }


def install_documents(admit_url: str, convert_url: str, ca_bundle: str | None = None) -> list[dict[str, Any]]:
    """Everything ``install-webhooks`` applies: the wake-up's configuration, then the converting CRDs."""
    return [wakeup_configuration(admit_url, ca_bundle), *conversion_crds(convert_url, ca_bundle)]


def conversion_crds(url: str, ca_bundle: str | None = None) -> list[dict[str, Any]]:
    """The ``CONVERTED_CRDS`` serving v1beta1 through the conversion webhook at ``url``."""
    return [with_conversion(crd, url, ca_bundle) for crd in _converted()]


def v1_only_crds() -> list[dict[str, Any]]:
    """The ``CONVERTED_CRDS`` as shipped under ``crds/``: v1 only, no webhook."""
    return [without_conversion(crd) for crd in _converted()]


def _converted() -> list[dict[str, Any]]:
    crds = {crd["metadata"]["name"]: crd for crd in build_crds().values()}
    return [crds[name] for name in CONVERTED_CRDS]


def with_conversion(crd: dict[str, Any], url: str, ca_bundle: str | None = None) -> dict[str, Any]:
    """``crd`` (v1 served and stored) serving v1beta1 too, converted by the webhook at ``url``
    (``ca_bundle``: for a certificate no public CA signed: the private wake-up's, the sandbox's)."""
    out = copy.deepcopy(crd)
    spec = out["spec"]
    v1 = next(v for v in spec["versions"] if v["name"] == "v1")
    schema = SCHEMAS_V1BETA1[(spec["group"], spec["names"]["kind"])]
    v1beta1 = {
        "name": "v1beta1",
        "served": True,
        "storage": False,
        "deprecated": True,
        "deprecationWarning": (
            f"{spec['group']}/v1beta1 {spec['names']['kind']} is deprecated; it is converted to and "
            "stored as v1 (nodewright convert writes the v1 form)"
        ),
        "schema": {"openAPIV3Schema": schema},
        "subresources": copy.deepcopy(v1.get("subresources") or {}),
    }
    if v1.get("additionalPrinterColumns"):
        v1beta1["additionalPrinterColumns"] = copy.deepcopy(v1["additionalPrinterColumns"])
    spec["versions"] = [v1, v1beta1]
    client_config: dict[str, Any] = {"url": url}
    if ca_bundle:
        client_config["caBundle"] = ca_bundle
    spec["conversion"] = {
        "strategy": "Webhook",
        "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]},
    }
    return out


def without_conversion(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` back to v1 only, no webhook (what ``install-webhooks --uninstall`` applies)."""
    out = copy.deepcopy(crd)
    out["spec"]["versions"] = [v for v in out["spec"]["versions"] if v["name"] == "v1"]
    out["spec"]["conversion"] = {"strategy": "None"}
    return out
