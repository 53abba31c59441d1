"""Read-side conversion of older Karpenter manifests to ``karpenter.sh/v1`` and ``karpenter.k8s.aws/v1``.

``convert_document(doc) -> Conversion`` converts one document:

- ``karpenter.sh/v1beta1`` NodePool and ``karpenter.k8s.aws/v1beta1`` EC2NodeClass, as Karpenter v1's
  conversion does (expireAfter moves into the template, WhenUnderutilized → WhenEmptyOrUnderutilized,
  nodeClassRef.apiVersion → group, kubelet moves to the EC2NodeClass, amiFamily without terms →
  alias ``family@latest``);
- ``karpenter.sh/v1alpha5`` Provisioner → NodePool (+ an EC2NodeClass carrying the kubelet settings)
  and ``karpenter.k8s.aws/v1alpha1`` AWSNodeTemplate → EC2NodeClass, as the v1beta1 migration guide
  maps them, including old label/annotation names → v1 names;
- v1 objects and non-Karpenter documents (Pods, Deployments, ...) pass through unchanged (old
  annotation names on them are reported as warnings, not rewritten).

Fields the converter does not know stay where they were, so validation reports them. A kubelet moved
out of a NodePool lands in an EC2NodeClass named after its nodeClassRef that holds only ``spec.kubelet``
(its index is in ``Conversion.partial``); ``convert_documents(docs)`` merges such pieces into the full
EC2NodeClass of that name when it is among the inputs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels
from nodewright.api.durations import DurationError, format_duration, parse_duration
from nodewright.api.findings import Finding, error, warning
from nodewright.api.models import AWS_V1, KARPENTER_V1
from nodewright.api.overlays import API_VERSION as OVERLAY_V1ALPHA1
from nodewright.api.shapes import as_dict, dig, kind_of

Doc = dict[str, Any]


@dataclass
class Conversion:
    """The v1 documents for one (or several) input documents, and what the conversion noticed.

    ``partial`` lists indices into ``documents`` of EC2NodeClasses made only to carry kubelet
    settings: they must be merged into the full EC2NodeClass of the same name before they are applied.
    """

    documents: list[Doc] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    partial: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.is_error for f in self.findings)


def _rename_keys(mapping: dict[str, Any] | None, path: str, findings: list[Finding]) -> dict[str, Any]:
    """Old karpenter.sh label/annotation keys → v1 keys, with a warning per rename."""
    out: dict[str, Any] = {}
    for key, value in as_dict(mapping).items():
        new = labels.LEGACY_RENAMES.get(key)
        if new:
            findings.append(warning(f"{path}.{key}", f"renamed to {new} in v1; converted"))
        out[new or key] = value
    return out


def _rename_requirements(requirements: Any, path: str, findings: list[Finding]) -> Any:
    if not isinstance(requirements, list):
        return requirements
    out = []
    for i, original in enumerate(requirements):
        requirement = copy.deepcopy(original)
        key = requirement.get("key") if isinstance(requirement, dict) else None
        if isinstance(key, str) and key in labels.LEGACY_RENAMES:
            new = labels.LEGACY_RENAMES[requirement["key"]]
            findings.append(warning(f"{path}[{i}].key", f"{requirement['key']} is {new} in v1; converted"))
            requirement["key"] = new
        out.append(requirement)
    return out


def _kubelet_carrier(class_name: str, kubelet: Doc) -> Doc:
    return {
        "apiVersion": AWS_V1,
        "kind": labels.EC2NODECLASS_KIND,
        "metadata": {"name": class_name},
        "spec": {"kubelet": kubelet},
    }


def convert_kubelet(kubelet: Any, path: str, findings: list[Finding]) -> Any:
    """v1alpha5/v1beta1 kubelet settings → v1 EC2NodeClass ``kubelet``."""
    if not isinstance(kubelet, dict):
        return kubelet
    kubelet = copy.deepcopy(kubelet)
    if "containerRuntime" in kubelet:
        runtime = kubelet.pop("containerRuntime")
        findings.append(
            warning(
                f"{path}.containerRuntime",
                f"removed in v1 (containerd is the only runtime); dropped {runtime!r}",
            )
        )
    grace = kubelet.get("evictionMaxPodGracePeriod")
    if isinstance(grace, str):
        try:
            seconds = parse_duration(grace, allow_never=False)
        except DurationError:
            pass  # left as written: validation reports it
        else:
            kubelet["evictionMaxPodGracePeriod"] = int(seconds or 0)
            findings.append(
                warning(
                    f"{path}.evictionMaxPodGracePeriod",
                    f"is a number of seconds, not a duration; converted {grace!r} to {int(seconds or 0)}",
                )
            )
    return kubelet


def class_ref_from_v1beta1(ref: Any) -> Any:
    """A v1beta1 ``nodeClassRef`` (apiVersion, kind, name) → v1's (group, kind, name).

    The group is everything before the last ``/`` of apiVersion (a version never holds one), the
    AWS provider's when apiVersion is absent; the kind is EC2NodeClass when absent."""
    if not isinstance(ref, dict):
        return ref
    rest = copy.deepcopy(ref)
    api_version = rest.pop("apiVersion", None)
    group = labels.AWS_GROUP
    if isinstance(api_version, str) and api_version:
        head, slash, _version = api_version.rpartition("/")
        group = head if slash else api_version
    kind = rest.pop("kind", labels.EC2NODECLASS_KIND)
    return {"group": group, "kind": kind, "name": rest.pop("name", None), **rest}


def _nodepool_v1beta1(doc: Doc) -> Conversion:
    result = Conversion()
    findings = result.findings
    out = copy.deepcopy(doc)
    out["apiVersion"] = KARPENTER_V1
    out.pop("status", None)
    spec = out.get("spec")
    if not isinstance(spec, dict):
        result.documents.append(out)
        return result
    template = spec.get("template") if isinstance(spec.get("template"), dict) else None
    tspec = template.get("spec") if template and isinstance(template.get("spec"), dict) else None
    if template is not None and isinstance(template.get("metadata"), dict):
        meta = template["metadata"]
        for part in ("labels", "annotations"):
            if part in meta:
                meta[part] = _rename_keys(meta[part], f"spec.template.metadata.{part}", findings)
    kubelet = None
    if tspec is not None:
        tspec["requirements"] = _rename_requirements(
            tspec.get("requirements"), "spec.template.spec.requirements", findings
        )
        if tspec["requirements"] is None:
            del tspec["requirements"]
        if "nodeClassRef" in tspec:
            tspec["nodeClassRef"] = class_ref_from_v1beta1(tspec["nodeClassRef"])
        if "kubelet" in tspec:
            kubelet = convert_kubelet(tspec.pop("kubelet"), "spec.template.spec.kubelet", findings)
    disruption = spec.get("disruption")
    if isinstance(disruption, dict):
        if "expireAfter" in disruption:
            expire = disruption.pop("expireAfter")
            if tspec is not None:
                tspec["expireAfter"] = expire
        if disruption.get("consolidationPolicy") == "WhenUnderutilized":
            disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
            findings.append(
                warning(
                    "spec.disruption.consolidationPolicy",
                    "WhenUnderutilized is WhenEmptyOrUnderutilized in v1; converted",
                )
            )
            disruption.setdefault("consolidateAfter", "0s")
    result.documents.append(out)
    if kubelet is not None:
        _add_kubelet_carrier(result, out, kubelet, "spec.template.spec.kubelet")
    return result


def _add_kubelet_carrier(result: Conversion, nodepool: Doc, kubelet: Any, path: str) -> None:
    ref = dig(nodepool, "spec", "template", "spec", "nodeClassRef")
    class_name = ref.get("name") if isinstance(ref, dict) else None
    if not class_name:
        result.findings.append(
            error(
                path,
                "v1 keeps kubelet settings in the EC2NodeClass, but this NodePool names none (nodeClassRef)",
            )
        )
        return
    result.partial.append(len(result.documents))
    result.documents.append(_kubelet_carrier(class_name, kubelet))
    result.findings.append(
        warning(
            path,
            f"v1 keeps kubelet settings in the EC2NodeClass: moved to EC2NodeClass {class_name!r} "
            f"spec.kubelet; convert it together with that EC2NodeClass (or merge them) before applying",
        )
    )


def _seconds(value: Any, path: str, findings: list[Finding]) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        findings.append(error(path, f"must be a whole number of seconds, got {value!r}"))
        return None
    return format_duration(value)


def _provisioner_v1alpha5(doc: Doc) -> Conversion:
    result = Conversion()
    findings = result.findings
    spec = copy.deepcopy(doc.get("spec") or {})
    if not isinstance(spec, dict):
        findings.append(error("spec", "must be an object"))
        return result
    meta = {}
    for part in ("labels", "annotations"):
        if part in spec:
            meta[part] = _rename_keys(spec.pop(part), f"spec.{part}", findings)
    tspec: Doc = {}
    if "requirements" in spec:
        tspec["requirements"] = _rename_requirements(spec.pop("requirements"), "spec.requirements", findings)
    else:
        tspec["requirements"] = []
    if "provider" in spec:
        spec.pop("provider")
        findings.append(
            error(
                "spec.provider",
                "inline AWS settings are not supported in v1: move them into an EC2NodeClass "
                "(an AWSNodeTemplate before conversion) and reference it with spec.providerRef",
            )
        )
    if "providerRef" in spec:
        ref = spec.pop("providerRef") or {}
        tspec["nodeClassRef"] = {
            "group": labels.AWS_GROUP,
            "kind": labels.EC2NODECLASS_KIND,
            "name": ref.get("name") if isinstance(ref, dict) else None,
        }
    for key in ("taints", "startupTaints"):
        if key in spec:
            tspec[key] = spec.pop(key)

    disruption: Doc = {}
    consolidation = spec.pop("consolidation", None)
    enabled = isinstance(consolidation, dict) and consolidation.get("enabled") is True
    empty_ttl = spec.pop("ttlSecondsAfterEmpty", None)
    if empty_ttl is not None:
        after = _seconds(empty_ttl, "spec.ttlSecondsAfterEmpty", findings)
        disruption = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": after or "0s"}
        if enabled:
            findings.append(
                warning(
                    "spec.consolidation.enabled",
                    "Karpenter refuses consolidation.enabled together with ttlSecondsAfterEmpty (they are "
                    "mutually exclusive); converted with the stricter reading: "
                    "consolidationPolicy WhenEmpty, "
                    f"consolidateAfter {after} (only empty nodes are removed). To also replace underutilized "
                    "nodes, set spec.disruption.consolidationPolicy: WhenEmptyOrUnderutilized",
                )
            )
    elif enabled:
        disruption = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    else:
        # v1alpha5 without either never scaled down; v1 spells that consolidateAfter: Never.
        disruption = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
    if "ttlSecondsUntilExpired" in spec:
        expire = _seconds(spec.pop("ttlSecondsUntilExpired"), "spec.ttlSecondsUntilExpired", findings)
        if expire:
            tspec["expireAfter"] = expire
    else:
        tspec["expireAfter"] = "Never"  # v1alpha5 nodes never expired unless asked; v1's default is 720h
    kubelet = spec.pop("kubeletConfiguration", None)

    nodepool_spec: Doc = {"template": {"spec": tspec}, "disruption": disruption}
    if meta:
        nodepool_spec["template"] = {"metadata": meta, "spec": tspec}
    limits = spec.pop("limits", None)
    if isinstance(limits, dict):
        nodepool_spec["limits"] = dict(as_dict(limits.get("resources")))
        for extra in set(limits) - {"resources"}:
            nodepool_spec["limits"][extra] = limits[extra]
    if "weight" in spec:
        nodepool_spec["weight"] = spec.pop("weight")
    nodepool_spec.update(spec)  # anything left is unknown to v1: kept so validation reports it

    nodepool = {
        "apiVersion": KARPENTER_V1,
        "kind": "NodePool",
        "metadata": copy.deepcopy(doc.get("metadata") or {}),
        "spec": nodepool_spec,
    }
    result.documents.append(nodepool)
    if kubelet is not None:
        _add_kubelet_carrier(
            result,
            nodepool,
            convert_kubelet(kubelet, "spec.kubeletConfiguration", findings),
            "spec.kubeletConfiguration",
        )
    return result


def _selector_terms(selector: Any) -> Any:
    """A v1alpha1 selector map → v1 selector terms (``aws-ids`` become id terms)."""
    if not isinstance(selector, dict):
        return selector
    terms: list[Doc] = []
    tags = {}
    for key, value in selector.items():
        if key == "aws-ids":
            terms.extend({"id": item.strip()} for item in str(value).split(",") if item.strip())
        else:
            tags[key] = value
    if tags:
        terms.append({"tags": tags})
    return terms


def _ami_terms(selector: Doc) -> list[Doc]:
    terms: list[Doc] = []
    term: Doc = {}
    tags = {}
    for key, value in selector.items():
        if key == "aws-ids":
            terms.extend({"id": item.strip()} for item in str(value).split(",") if item.strip())
        elif key == "aws::name":
            term["name"] = value
        elif key == "aws::owners":
            term["owner"] = value
        elif key == "aws::ids":
            terms.extend({"id": item.strip()} for item in str(value).split(",") if item.strip())
        else:
            tags[key] = value
    if tags:
        term["tags"] = tags
    if term:
        terms.append(term)
    return terms


def _alias_for(family: Any) -> str | None:
    for alias, name in labels.ALIAS_FAMILIES.items():
        if name == family:
            return f"{alias}@latest"
    return None


def _nodetemplate_v1alpha1(doc: Doc) -> Conversion:
    result = Conversion()
    spec = copy.deepcopy(as_dict(doc.get("spec")))
    out_spec: Doc = {}
    family = spec.pop("amiFamily", "AL2")  # v1alpha1's default
    out_spec["amiFamily"] = family
    if "amiSelector" in spec:
        out_spec["amiSelectorTerms"] = _ami_terms(as_dict(spec.pop("amiSelector")))
    elif _alias_for(family):
        out_spec["amiSelectorTerms"] = [{"alias": _alias_for(family)}]
    if "subnetSelector" in spec:
        out_spec["subnetSelectorTerms"] = _selector_terms(spec.pop("subnetSelector"))
    if "securityGroupSelector" in spec:
        out_spec["securityGroupSelectorTerms"] = _selector_terms(spec.pop("securityGroupSelector"))
    if "launchTemplate" in spec:
        spec.pop("launchTemplate")
        result.findings.append(
            error(
                "spec.launchTemplate",
                "launch templates you manage are not supported in v1: describe the instance with "
                "EC2NodeClass fields (amiSelectorTerms, userData, blockDeviceMappings, metadataOptions) "
                "instead",
            )
        )
    out_spec.update(spec)
    if not out_spec.get("instanceProfile") and not out_spec.get("role"):
        result.findings.append(
            warning(
                "spec.instanceProfile",
                "v1alpha1 fell back to the controller's default instance profile; v1 has no such default",
            )
        )
    result.documents.append(
        {
            "apiVersion": AWS_V1,
            "kind": labels.EC2NODECLASS_KIND,
            "metadata": copy.deepcopy(doc.get("metadata") or {}),
            "spec": out_spec,
        }
    )
    _hop_limit_note(out_spec, result.findings)
    return result


NODECLASS_KINDS = {
    (AWS_V1, labels.EC2NODECLASS_KIND),
    ("karpenter.k8s.aws/v1beta1", labels.EC2NODECLASS_KIND),
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"),
}


def fill_node_role(doc: Any, role: str | None) -> bool:
    """Give a node class with neither ``role`` nor ``instanceProfile`` the node role ``role``.

    The seeds' EC2NodeClasses name neither (v1beta1 clusters set a default elsewhere); v1 needs
    one. The webhook fills in the stack's node role, ``nodewright convert --role`` the one given;
    each says so. Returns whether it filled it in.
    """
    if not role or not isinstance(doc, dict) or kind_of(doc) not in NODECLASS_KINDS:
        return False
    spec = doc.get("spec")
    if not isinstance(spec, dict) or spec.get("role") or spec.get("instanceProfile"):
        return False
    spec["role"] = role
    return True


def _hop_limit_note(spec: Doc, findings: list[Finding]) -> None:
    options = spec.get("metadataOptions")
    if not isinstance(options, dict) or "httpPutResponseHopLimit" not in options:
        findings.append(
            warning(
                "spec.metadataOptions.httpPutResponseHopLimit",
                "defaults to 1 in v1 (it was 2): pods without host networking can no longer reach the "
                "instance metadata service; set it to 2 if they need to",
            )
        )


def _nodeclass_v1beta1(doc: Doc) -> Conversion:
    result = Conversion()
    out = copy.deepcopy(doc)
    out["apiVersion"] = AWS_V1
    out.pop("status", None)
    spec = out.get("spec")
    if isinstance(spec, dict):
        if not spec.get("amiSelectorTerms"):
            alias = _alias_for(spec.get("amiFamily"))
            if alias:
                spec["amiSelectorTerms"] = [{"alias": alias}]
                result.findings.append(
                    warning(
                        "spec.amiSelectorTerms",
                        f"v1 requires amiSelectorTerms; set to [{{alias: {alias}}}] from amiFamily "
                        f"{spec.get('amiFamily')} (the latest EKS-optimized AMI, as v1beta1 chose)",
                    )
                )
        _hop_limit_note(spec, result.findings)
        if not spec.get("role") and not spec.get("instanceProfile"):
            result.findings.append(
                warning(
                    "spec",
                    "neither role nor instanceProfile is set: v1beta1 required one too, so Karpenter "
                    "would have refused this EC2NodeClass already (see the error below for what v1 needs)",
                )
            )
    result.documents.append(out)
    return result


def _legacy_names_on_workload(doc: Doc) -> list[Finding]:
    """Warnings for old karpenter.sh names on Pods and pod templates (left unchanged)."""
    findings: list[Finding] = []
    spots = [("metadata", doc.get("metadata")), ("spec", doc.get("spec"))]
    template = (doc.get("spec") or {}).get("template") if isinstance(doc.get("spec"), dict) else None
    if isinstance(template, dict):
        spots += [
            ("spec.template.metadata", template.get("metadata")),
            ("spec.template.spec", template.get("spec")),
        ]
    for path, part in spots:
        if not isinstance(part, dict):
            continue
        for field_name in ("annotations", "labels", "nodeSelector"):
            values = part.get(field_name)
            if not isinstance(values, dict):
                continue
            for key in values:
                if key in labels.LEGACY_RENAMES:
                    findings.append(
                        warning(
                            f"{path}.{field_name}.{key}",
                            f"renamed {labels.LEGACY_RENAMES[key]} in v1; "
                            "Nodewright honours only the v1 name",
                        )
                    )
    return findings


_CONVERTERS = {
    ("karpenter.sh/v1beta1", "NodePool"): _nodepool_v1beta1,
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"): _nodeclass_v1beta1,
    ("karpenter.sh/v1alpha5", "Provisioner"): _provisioner_v1alpha5,
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"): _nodetemplate_v1alpha1,
}
_KARPENTER_GROUPS = (labels.KARPENTER_GROUP, labels.AWS_GROUP)


def convert_document(doc: Doc) -> Conversion:
    """The v1 form of one document, with warnings/errors about what changed or cannot convert."""
    if not isinstance(doc, dict):
        return Conversion(findings=[error("", "a manifest must be a YAML mapping with apiVersion and kind")])
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        missing = "apiVersion" if not isinstance(api_version, str) or not api_version else "kind"
        return Conversion(
            documents=[copy.deepcopy(doc)],
            findings=[error(missing, "Required value: every manifest names its apiVersion and kind")],
        )
    converter = _CONVERTERS.get((api_version, kind))
    if converter:
        return converter(doc)
    group = api_version.split("/", 1)[0] if isinstance(api_version, str) and "/" in api_version else ""
    if group in _KARPENTER_GROUPS and (api_version, kind) not in {
        (KARPENTER_V1, "NodePool"),
        (KARPENTER_V1, "NodeClaim"),
        (AWS_V1, "EC2NodeClass"),
        (OVERLAY_V1ALPHA1, "NodeOverlay"),
    }:
        return Conversion(
            documents=[copy.deepcopy(doc)],
            findings=[
                error(
                    "apiVersion",
                    f"{api_version} {kind} is not a kind Nodewright reads; use karpenter.sh/v1 "
                    "NodePool/NodeClaim, karpenter.k8s.aws/v1 EC2NodeClass or karpenter.sh/v1alpha1 "
                    "NodeOverlay (v1beta1 and v1alpha5 forms are converted)",
                )
            ],
        )
    return Conversion(documents=[copy.deepcopy(doc)], findings=_legacy_names_on_workload(doc))


def merge_kubelet_pieces(conversion: Conversion) -> Conversion:
    """Fold kubelet-only EC2NodeClasses into the full EC2NodeClass of the same name when present."""
    full = {
        dig(d, "metadata", "name"): d
        for i, d in enumerate(conversion.documents)
        if i not in conversion.partial
        and kind_of(d) == (AWS_V1, labels.EC2NODECLASS_KIND)
        and isinstance(dig(d, "metadata", "name"), str)
    }
    documents: list[Doc] = []
    partial: list[int] = []
    findings = list(conversion.findings)
    for i, doc in enumerate(conversion.documents):
        if i not in conversion.partial:
            documents.append(doc)
            continue
        name = doc["metadata"]["name"]
        target = full.get(name)
        if target is None or not isinstance(target.get("spec", {}), dict):
            partial.append(len(documents))
            documents.append(doc)
            continue
        target_spec = target.setdefault("spec", {})
        existing = target_spec.get("kubelet")
        if existing is not None and existing != doc["spec"]["kubelet"]:
            findings.append(
                warning(
                    "spec.kubelet",
                    f"two NodePools give EC2NodeClass {name!r} different kubelet settings; kept the first. "
                    "v1 holds kubelet per EC2NodeClass: copy the EC2NodeClass under a new name for the other "
                    "NodePool",
                )
            )
            continue
        target_spec["kubelet"] = doc["spec"]["kubelet"]
    return Conversion(documents=documents, findings=findings, partial=partial)


def convert_documents(docs: list[Doc]) -> Conversion:
    """Convert several documents together (kubelet settings join their EC2NodeClass when it is present)."""
    combined = Conversion()
    for doc in docs:
        one = convert_document(doc)
        offset = len(combined.documents)
        combined.documents.extend(one.documents)
        combined.findings.extend(one.findings)
        combined.partial.extend(offset + i for i in one.partial)
    return merge_kubelet_pieces(combined)
