"""CRD conversion webhook: karpenter.sh and karpenter.k8s.aws ``v1beta1`` ⇄ ``v1``, losslessly.

The API server stores v1. When a client writes or reads ``v1beta1`` (a seed manifest applied
unconverted, ``kubectl get nodepools.v1beta1.karpenter.sh``), it sends a ``ConversionReview``
(apiextensions.k8s.io/v1) and ``review`` answers it. v1beta1 → v1 is ``api.convert`` (the same
conversion ``nodewright convert`` does), with two differences a webhook needs: nothing may become a
second object, and nothing may be lost, because the object is read back in the old version:

- a v1beta1 NodePool's (or NodeClaim's) ``kubelet`` has no place in v1 (it lives in the
  EC2NodeClass): it travels in ``KUBELET_ANNOTATION`` as JSON, as Karpenter v1.0's webhook wrote it,
  and the provisioner applies it over the EC2NodeClass's kubelet at launch (``kubelet_overrides``);
- the v1beta1 ``nodeClassRef`` as written travels in ``NODECLASS_REF_ANNOTATION``;
- v1 fields that v1beta1 lacks (an EC2NodeClass's ``kubelet``, a pinned AMI alias, a NodeClaim's
  ``expireAfter``) travel in ``V1_FIELDS_ANNOTATION`` when read as v1beta1 and come back on write;
- an EC2NodeClass with neither ``role`` nor ``instanceProfile`` (the seeds have none) gets the
  stack's node role, marked by ``ROLE_DEFAULTED_ANNOTATION`` so that reading it back as v1beta1 gives
  the manifest as it was applied.

So v1beta1 → v1 → v1beta1 and v1 → v1beta1 → v1 give back what went in. A ConversionReview
response has no ``warnings`` field (apiextensions.k8s.io/v1 ConversionResponse: uid,
convertedObjects, result), unlike an AdmissionReview's, so nothing reaches the client: a node role
filled in is recorded on the object (``ROLE_DEFAULTED_ANNOTATION``) and ``review`` collects a
warning for the caller to log.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from nodewright.api import labels
from nodewright.api.convert import convert_document, fill_node_role
from nodewright.api.models import KARPENTER_V1
from nodewright.api.shapes import as_dict, as_list

Doc = dict[str, Any]

KARPENTER_V1BETA1 = "karpenter.sh/v1beta1"
AWS_V1BETA1 = "karpenter.k8s.aws/v1beta1"
KUBELET_ANNOTATION = "compatibility.karpenter.sh/v1beta1-kubelet-conversion"
NODECLASS_REF_ANNOTATION = "compatibility.karpenter.sh/v1beta1-nodeclass-reference"
V1_FIELDS_ANNOTATION = "compatibility.nodewright.io/v1-fields"
ROLE_DEFAULTED_ANNOTATION = "compatibility.nodewright.io/v1beta1-role-defaulted"
REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
SUPPORTED = {
    (labels.KARPENTER_GROUP, "NodePool"),
    (labels.KARPENTER_GROUP, "NodeClaim"),
    (labels.AWS_GROUP, labels.EC2NODECLASS_KIND),
}


class ConversionError(ValueError):
    """An object this webhook cannot convert (the message is what the API server shows the client)."""


def review(body: Any, *, node_role: str | None = None, warnings: list[str] | None = None) -> Doc:
    """The ConversionReview answer for ``body`` (always a well-formed review, never an exception).

    A request this webhook cannot answer at all (not a ConversionReview) gets a Failure result; so
    does one with any object it cannot convert: the API server then refuses the client's request
    with the message, as it would for a real conversion failure. ``warnings`` collects what the
    client cannot be told (the node role filled in).
    """
    request = body.get("request") if isinstance(body, dict) else None
    uid = request.get("uid", "") if isinstance(request, dict) else ""
    if not isinstance(request, dict) or not isinstance(request.get("desiredAPIVersion"), str):
        return _answer(uid, [], "not a ConversionReview request with desiredAPIVersion")
    desired = request["desiredAPIVersion"]
    objects = as_list(request.get("objects"))
    try:
        converted = [convert(obj, desired, node_role=node_role, warnings=warnings) for obj in objects]
    except ConversionError as exc:
        return _answer(uid, [], str(exc))
    return _answer(uid, converted, None)


def _answer(uid: str, objects: list[Doc], failure: str | None) -> Doc:
    result: Doc = {"status": "Success"} if failure is None else {"status": "Failure", "message": failure}
    response: Doc = {"uid": uid, "result": result}
    if failure is None:
        response["convertedObjects"] = objects
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}


def convert(
    obj: Any, desired_api_version: str, *, node_role: str | None = None, warnings: list[str] | None = None
) -> Doc:
    """One object in ``desired_api_version`` (its group's v1 or v1beta1)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str):
        raise ConversionError("an object to convert has no apiVersion")
    group, _, version = obj["apiVersion"].partition("/")
    kind = obj.get("kind")
    desired_group, _, desired_version = desired_api_version.partition("/")
    if (group, kind) not in SUPPORTED or desired_group != group:
        raise ConversionError(f"cannot convert {obj['apiVersion']} {kind} to {desired_api_version}")
    if version == desired_version:
        return copy.deepcopy(obj)
    if (version, desired_version) == ("v1beta1", "v1"):
        return _to_v1(obj, node_role, warnings)
    if (version, desired_version) == ("v1", "v1beta1"):
        return _to_v1beta1(obj)
    raise ConversionError(f"cannot convert {obj['apiVersion']} {kind} to {desired_api_version}")


# --------------------------------------------------------------------------- v1beta1 → v1


def _to_v1(obj: Doc, node_role: str | None, warnings: list[str] | None) -> Doc:
    original = copy.deepcopy(obj)
    saved_fields = _pop_annotation(original, V1_FIELDS_ANNOTATION)
    if obj["kind"] == "NodeClaim":
        out = _nodeclaim_to_v1(original)
    else:
        conversion = convert_document(original)
        out = conversion.documents[0]
    out["status"] = copy.deepcopy(obj["status"]) if "status" in obj else out.get("status")
    if out.get("status") is None:
        out.pop("status", None)
    if obj["kind"] == "NodePool":
        _carry_nodepool_extras(obj, out)
    if obj["kind"] == labels.EC2NODECLASS_KIND:
        _default_role(out, node_role, warnings)
    if saved_fields:
        _restore_fields(out, json.loads(saved_fields))
    return out


def _carry_nodepool_extras(v1beta1: Doc, out: Doc) -> None:
    tspec = _dig(v1beta1, "spec", "template", "spec") or {}
    if "kubelet" in tspec:
        _annotate(out, KUBELET_ANNOTATION, json.dumps(tspec["kubelet"], sort_keys=True))
    _keep_written_ref(out, tspec.get("nodeClassRef"))


def _nodeclaim_to_v1(v1beta1: Doc) -> Doc:
    out = copy.deepcopy(v1beta1)
    out["apiVersion"] = KARPENTER_V1
    spec = as_dict(out.get("spec"))
    if "kubelet" in spec:
        _annotate(out, KUBELET_ANNOTATION, json.dumps(spec.pop("kubelet"), sort_keys=True))
    ref = spec.get("nodeClassRef")
    if isinstance(ref, dict):
        _keep_written_ref(out, ref)
        spec["nodeClassRef"] = _ref_to_v1(ref)
    return out


def _keep_written_ref(out: Doc, ref: Any) -> None:
    """Remember a v1beta1 nodeClassRef that reading back would not write the same way."""
    if isinstance(ref, dict) and ref != _canonical_v1beta1_ref(_ref_to_v1(ref)):
        _annotate(out, NODECLASS_REF_ANNOTATION, json.dumps(ref, sort_keys=True))


def _canonical_v1beta1_ref(ref: Doc) -> Doc:
    group = ref.get("group") or labels.AWS_GROUP
    return {"apiVersion": f"{group}/v1beta1", "kind": ref.get("kind"), "name": ref.get("name")}


def _ref_to_v1(ref: Doc) -> Doc:
    api_version = ref.get("apiVersion")
    group = api_version.split("/", 1)[0] if isinstance(api_version, str) and api_version else labels.AWS_GROUP
    return {"group": group, "kind": ref.get("kind") or labels.EC2NODECLASS_KIND, "name": ref.get("name")}


def _default_role(out: Doc, node_role: str | None, warnings: list[str] | None) -> None:
    if fill_node_role(out, node_role) and node_role:
        _annotate(out, ROLE_DEFAULTED_ANNOTATION, node_role)
        if warnings is not None:
            name = (out.get("metadata") or {}).get("name")
            warnings.append(
                f"EC2NodeClass {name}: neither role nor instanceProfile is set; filled in the stack's node "
                f"role {node_role} (annotation {ROLE_DEFAULTED_ANNOTATION})"
            )


# --------------------------------------------------------------------------- v1 → v1beta1


def _to_v1beta1(obj: Doc) -> Doc:
    out = copy.deepcopy(obj)
    kind = obj["kind"]
    out["apiVersion"] = AWS_V1BETA1 if kind == labels.EC2NODECLASS_KIND else KARPENTER_V1BETA1
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else None
    if spec is None:
        return out
    v1_only: Doc = {}
    if kind == "NodePool":
        _nodepool_to_v1beta1(out, spec)
    elif kind == "NodeClaim":
        _nodeclaim_to_v1beta1(out, spec, v1_only)
    else:
        _nodeclass_to_v1beta1(out, spec, v1_only)
    if v1_only:
        _annotate(out, V1_FIELDS_ANNOTATION, json.dumps(v1_only, sort_keys=True))
    return out


def _nodepool_to_v1beta1(out: Doc, spec: Doc) -> None:
    template = as_dict(spec.get("template"))
    tspec = template.get("spec") if isinstance(template.get("spec"), dict) else None
    disruption = spec.get("disruption") if isinstance(spec.get("disruption"), dict) else None
    if tspec is not None:
        if "expireAfter" in tspec:
            expire = tspec.pop("expireAfter")
            if disruption is None:
                disruption = spec["disruption"] = {}
            disruption["expireAfter"] = expire
        if isinstance(tspec.get("nodeClassRef"), dict):
            tspec["nodeClassRef"] = _ref_to_v1beta1(out, tspec["nodeClassRef"])
        kubelet = _pop_annotation(out, KUBELET_ANNOTATION)
        if kubelet is not None:
            tspec["kubelet"] = json.loads(kubelet)
    if disruption is not None and disruption.get("consolidationPolicy") == "WhenEmptyOrUnderutilized":
        disruption["consolidationPolicy"] = "WhenUnderutilized"
        if disruption.get("consolidateAfter") == "0s":
            del disruption["consolidateAfter"]  # v1beta1 takes no consolidateAfter with WhenUnderutilized


def _nodeclaim_to_v1beta1(out: Doc, spec: Doc, v1_only: Doc) -> None:
    if isinstance(spec.get("nodeClassRef"), dict):
        spec["nodeClassRef"] = _ref_to_v1beta1(out, spec["nodeClassRef"])
    for key in ("expireAfter", "terminationGracePeriod"):
        if key in spec:
            v1_only[f"spec.{key}"] = spec.pop(key)
    kubelet = _pop_annotation(out, KUBELET_ANNOTATION)
    if kubelet is not None:
        spec["kubelet"] = json.loads(kubelet)


def _nodeclass_to_v1beta1(out: Doc, spec: Doc, v1_only: Doc) -> None:
    if "kubelet" in spec:
        v1_only["spec.kubelet"] = spec.pop("kubelet")
    terms = spec.get("amiSelectorTerms")
    aliases = [t.get("alias") for t in terms if isinstance(t, dict) and t.get("alias")] if terms else []
    if aliases:
        family, _, version = str(aliases[0]).partition("@")
        family_name = labels.ALIAS_FAMILIES.get(family.lower())
        if version != "latest" or not family_name:
            v1_only["spec.amiSelectorTerms"] = spec["amiSelectorTerms"]
        if not spec.get("amiFamily") and family_name:
            spec["amiFamily"] = family_name
            v1_only["spec.amiFamily"] = None  # v1 had none: drop it again on the way back
        del spec["amiSelectorTerms"]  # v1beta1 has no alias: its amiFamily picks the latest AMI
    defaulted = _pop_annotation(out, ROLE_DEFAULTED_ANNOTATION)
    if defaulted is not None and spec.get("role") == defaulted:
        del spec["role"]


def _ref_to_v1beta1(out: Doc, ref: Doc) -> Doc:
    written = _pop_annotation(out, NODECLASS_REF_ANNOTATION)
    if written is not None:
        original = json.loads(written)
        if isinstance(original, dict) and original.get("name") == ref.get("name"):
            return original  # as the v1beta1 manifest wrote it
    return _canonical_v1beta1_ref(ref)


# --------------------------------------------------------------------------- helpers


def kubelet_overrides(obj: Doc) -> Doc:
    """The kubelet settings a converted v1beta1 NodePool/NodeClaim carries in its annotation ({} if none)."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(KUBELET_ANNOTATION)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _restore_fields(out: Doc, fields: Any) -> None:
    if not isinstance(fields, dict):
        return
    for path, value in fields.items():
        *parents, leaf = str(path).split(".")
        target = out
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value


def _annotate(obj: Doc, key: str, value: str) -> None:
    metadata = obj.setdefault("metadata", {})
    metadata.setdefault("annotations", {})[key] = value


def _pop_annotation(obj: Doc, key: str) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict) or key not in annotations:
        return None
    value = annotations.pop(key)
    if not annotations:
        del obj["metadata"]["annotations"]
    return str(value)


def _dig(obj: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


__all__ = [
    "KUBELET_ANNOTATION",
    "NODECLASS_REF_ANNOTATION",
    "ROLE_DEFAULTED_ANNOTATION",
    "V1_FIELDS_ANNOTATION",
    "ConversionError",
    "convert",
    "kubelet_overrides",
    "review",
]
