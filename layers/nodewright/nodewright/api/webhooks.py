"""What ``nodewright install-webhooks`` applies to a cluster: the wake-up webhook and CRD conversion.

* ``wakeup_configuration(url)``: a ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1)
  on ``pods/status`` UPDATE. Its CEL ``matchConditions`` (GA in Kubernetes 1.30) let the API server
  call out only when a pod's ``PodScheduled`` condition *becomes* False/Unschedulable: a status
  update that keeps it so (the scheduler rewriting its message), a pod that binds, a kubelet's
  Running update, never leave the API server. ``failurePolicy: Ignore`` and a 2 s timeout: an
  unreachable URL costs a pod status write at most 2 s and changes nothing else (the schedule still
  provisions).
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
from nodewright.api.schema import SCHEMAS_V1BETA1

CONFIGURATION_NAME = "nodewright-wakeup"
WEBHOOK_NAME = "wakeup.nodewright.io"
ADMIT_PATH = "admit"
CONVERT_PATH = "convert"
TIMEOUT_SECONDS = 2
PART_OF = {"app.kubernetes.io/part-of": "nodewright"}
# The kinds users apply in v1beta1 (the seeds): their CRDs serve it through the webhook.
CONVERTED_CRDS = ("nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws")

# A PodScheduled condition the scheduler set because no node fits. The request's object and
# oldObject are the whole Pod (a pods/status update); has() guards every optional field, because a
# CEL error with failurePolicy Ignore skips the webhook silently.
_UNSCHEDULABLE = (
    "{o}.status.conditions.exists(c, c.type == 'PodScheduled' && c.status == 'False' && "
    "has(c.reason) && c.reason == 'Unschedulable')"
)
MATCH_CONDITIONS: tuple[dict[str, str], ...] = (
    {
        "name": "becomes-unschedulable",
        "expression": "has(object.status) && has(object.status.conditions) && "
        + _UNSCHEDULABLE.format(o="object"),
    },
    {
        "name": "was-not-unschedulable",
        "expression": "!(has(oldObject.status) && has(oldObject.status.conditions) && "
        + _UNSCHEDULABLE.format(o="oldObject")
        + ")",
    },
)


def endpoint(function_url: str, secret: str, path: str) -> str:
    """``https://<function URL>/<secret>/<path>`` (a function URL ends with ``/``)."""
    if not function_url.startswith("https://"):
        raise ValueError(f"{function_url!r} is not an https URL: the API server calls webhooks over TLS only")
    return f"{function_url.rstrip('/')}/{secret}/{path}"


def wakeup_configuration(url: str, ca_bundle: str | None = None) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration that rings ``url`` when a pod becomes unschedulable.

    ``ca_bundle`` (base64 PEM): only for a URL whose certificate no public CA signed (the sandbox's);
    a Lambda function URL's is publicly trusted."""
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
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["pods/status"],
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
    (``ca_bundle``: only for a certificate no public CA signed, the sandbox's)."""
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
