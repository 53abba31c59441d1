"""Validation of NodePool, NodeClaim and EC2NodeClass manifests, with messages in the API server's style.

``validate_document(doc) -> list[Finding]`` takes any manifest: older Karpenter versions are converted
first (``api.convert``) and the v1 form is validated, so the findings name v1 field paths; non-Karpenter
documents give no findings beyond old-annotation warnings. ``validate_v1(doc)`` validates a document
already in v1 form; ``validate_conversion(conversion)`` the output of ``api.convert``. Each ``Finding``
names the field path and says what to do, e.g.
``spec.template.spec.requirements[1].weight: unknown field; weight is a NodePool field (spec.weight)``.
Every problem is reported, not just the first. Severity ``error`` means the object must not be used;
``warning`` means it works but probably not as meant (a misspelt well-known label, say).
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from typing import Any

from croniter import croniter

from nodewright.api import labels, overlays
from nodewright.api.convert import Conversion, convert_document
from nodewright.api.durations import DURATION_UNITS_STRICT, DurationError, parse_duration
from nodewright.api.features import not_acted_on
from nodewright.api.findings import Finding, error, warning
from nodewright.api.schema import (
    BUDGET_DURATION_PATTERN,
    BUDGET_NODES_PATTERN,
    EVICTION_SIGNALS,
    OVERLAY_RESTRICTED_RESOURCES,
    SCHEMAS,
    Schema,
)
from nodewright.api.shapes import as_dict, as_list, dig, kind_of
from nodewright.scheduling.resources import parse_quantity

_V1 = {
    ("karpenter.sh/v1", "NodePool"),
    ("karpenter.sh/v1", "NodeClaim"),
    ("karpenter.k8s.aws/v1", "EC2NodeClass"),
    (overlays.API_VERSION, overlays.KIND),  # current too: Karpenter v1.14 serves only v1alpha1
}

# Unknown fields with a known explanation (paths with list indices written as []).
_UNKNOWN_FIELD_HINTS: dict[str, str] = {
    "spec.template.spec.requirements[].weight": (
        "weight is a NodePool field (spec.weight): set it once on the NodePool, or split these requirements "
        "into NodePools with different weights"
    ),
    "spec.template.spec.kubelet": (
        "v1 keeps kubelet settings in the EC2NodeClass (spec.kubelet of the class named by nodeClassRef)"
    ),
    "spec.disruption.expireAfter": "v1 moved it to spec.template.spec.expireAfter",
    "spec.template.spec.resources": "a NodePool cannot request resources; only NodeClaims carry them",
    "spec.subnetSelector": "use subnetSelectorTerms: [{tags: {...}}]",
    "spec.securityGroupSelector": "use securityGroupSelectorTerms: [{tags: {...}}]",
    "spec.amiSelector": "use amiSelectorTerms: [{alias: ...}] or [{id: ...}]",
}

# What to give when a required field is missing (paths with list indices written as []).
_NODE_CLASS_REF_HINT = "name the EC2NodeClass: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: <name>}"
_REQUIREMENTS_HINT = "give a list of requirements (it may be empty: [])"
_REQUIRED_HINTS: dict[str, str] = {
    "spec.template.spec.nodeClassRef": _NODE_CLASS_REF_HINT,
    "spec.nodeClassRef": _NODE_CLASS_REF_HINT,
    "spec.template.spec.requirements": _REQUIREMENTS_HINT,
    "spec.requirements": _REQUIREMENTS_HINT,
    "spec.amiSelectorTerms": (
        "give [{alias: al2023@latest}] (or bottlerocket@latest, al2@latest), or AMI ids/tags"
    ),
    "spec.subnetSelectorTerms": "select the subnets, e.g. [{tags: {karpenter.sh/discovery: <cluster name>}}]",
    "spec.securityGroupSelectorTerms": "select the security groups, e.g. "
    "[{tags: {karpenter.sh/discovery: <cluster name>}}]",
    "spec.template": "give the node template: {spec: {requirements: [...], nodeClassRef: {...}}}",
    "spec": "give the spec",
}

_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ALIAS = re.compile(r"^(?P<family>[a-zA-Z0-9]+)@(?P<version>.+)$")
_ALIAS_VERSION = re.compile(r"^(latest|v?\d+(\.\d+)*)$")
_EVICTION_SIGNALS = frozenset(EVICTION_SIGNALS)
_RESERVED_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pid"})


def _quantity_error(value: Any) -> str | None:
    """Why ``value`` is not a Kubernetes quantity, or None."""
    if isinstance(value, bool):
        return f"{value!r} is not a quantity"
    try:
        parse_quantity(value)
    except (ValueError, TypeError):
        return f"{value!r} is not a quantity (e.g. 1000, 500m, 100Gi)"
    return None


# --- structural checks -------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _generic_path(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _walk(schema: Schema, value: Any, path: str, out: list[Finding], partial: bool) -> None:
    """Check ``value`` against a structural schema: types, unknown fields, enums, bounds, required."""
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            out.append(error(path, f"Invalid value: {value!r}: must be an integer or a string"))
        return
    expected = str(schema.get("type") or "")
    ok = {
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }.get(expected, True)
    if not ok:
        out.append(error(path, f"Invalid value: {value!r}: must be {expected}, not {_type_name(value)}"))
        return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(f'"{v}"' for v in schema["enum"])
        out.append(error(path, f'Unsupported value: "{value}": supported values: {supported}'))
    if "minimum" in schema and value < schema["minimum"]:
        out.append(
            error(path, f"Invalid value: {value}: must be greater than or equal to {schema['minimum']}")
        )
    if "maximum" in schema and value > schema["maximum"]:
        out.append(error(path, f"Invalid value: {value}: must be less than or equal to {schema['maximum']}"))
    if expected == "array":
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(error(path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items"))
        if "minItems" in schema and len(value) < schema["minItems"] and not partial:
            out.append(error(path, f"Required value: give at least {schema['minItems']} item(s)"))
        for i, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{i}]", out, partial)
    if expected == "object":
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            out.append(
                error(path, f"Too many: {len(value)}: must have at most {schema['maxProperties']} entries")
            )
        if "additionalProperties" in schema:
            for key, item in value.items():
                _walk(schema["additionalProperties"], item, f"{path}[{key}]", out, partial)
        properties = schema.get("properties")
        if properties is None:
            return
        keeps_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if key not in properties:
                if not keeps_unknown:  # kept fields are reported as not acted on (``api.features``)
                    out.append(error(child, _unknown_field_message(child, key, properties)))
            elif item is not None:
                _walk(properties[key], item, child, out, partial)
        if not partial:
            for key in schema.get("required", []):
                if value.get(key) is None:
                    child = f"{path}.{key}" if path else key
                    hint = _REQUIRED_HINTS.get(_generic_path(child))
                    out.append(error(child, f"Required value: {hint}" if hint else "Required value"))


def _unknown_field_message(path: str, key: str, properties: dict[str, Any]) -> str:
    hint = _UNKNOWN_FIELD_HINTS.get(_generic_path(path))
    if hint is None:
        close = difflib.get_close_matches(key, list(properties), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}?" if close else f"known fields here: {', '.join(properties)}"
    return f"unknown field; {hint}"


# --- value checks ------------------------------------------------------------------------------


def _label_key_error(key: str) -> str | None:
    """Why ``key`` is not a valid label key (prefix/name), or None."""
    if not isinstance(key, str) or not key:
        return "label key must be a non-empty string"
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"{key!r}: the prefix must be a DNS subdomain (lower case, e.g. example.com/)"
    if len(name) > 63 or not _LABEL_NAME.match(name):
        return f"{key!r}: the name must be 63 characters or fewer: letters, digits, '-', '_', '.'"
    return None


def _label_value_error(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"{value!r} is not a valid label value (63 characters or fewer: letters, digits, '-', '_', '.')"
        )
    return None


def _check_duration(value: Any, path: str, out: list[Finding], *, allow_never: bool) -> None:
    if value is None:
        return
    never = " or Never" if allow_never else ""
    if value == "Never" and allow_never:
        return
    if not isinstance(value, str) or not DURATION_UNITS_STRICT.match(value):
        out.append(
            error(
                path,
                f"Invalid value: {value!r}: give a duration with units h, m, s (e.g. 720h, 1m30s){never}",
            )
        )
        return
    try:
        parse_duration(value, allow_never=allow_never)
    except DurationError as exc:
        out.append(error(path, f"Invalid value: {exc}"))


def _restricted_key_error(key: str, where: str | None) -> str | None:
    """Why a NodePool may not use ``key`` (``where`` None: a NodeClaim, which carries its NodePool's name)."""
    if key == labels.NODEPOOL and where is not None:
        return f"label {key} is restricted: Nodewright sets it to the NodePool's name; remove it from {where}"
    if key in labels.RESTRICTED_LABELS:
        return f"label {key} is restricted: each node gets its own value, so a NodePool cannot choose it"
    if labels.is_restricted_label(key):
        domain = labels.label_domain(key) or key
        intended = _looks_misspelt(key)
        meant = f"; did you mean {intended}?" if intended else ""
        return (
            f"label domain {domain!r} is restricted: use a well-known label (e.g. {labels.INSTANCE_TYPE}) "
            f"or a key in your own domain (e.g. example.com/{key.rpartition('/')[2]}){meant}"
        )
    return None


def _looks_misspelt(key: str) -> str | None:
    """The well-known label ``key`` was probably meant to be, if any."""
    if key in labels.WELL_KNOWN_LABELS or key in labels.DEPRECATED_LABEL_ALIASES:
        return None
    close = difflib.get_close_matches(key, sorted(labels.WELL_KNOWN_LABELS), n=1, cutoff=0.8)
    return close[0] if close else None


def _in_well_known_domain(key: str) -> bool:
    domain = labels.label_domain(key)
    return any(domain == d or domain.endswith("." + d) for d in labels.RESTRICTED_LABEL_DOMAINS)


def _check_requirements(
    requirements: Any, path: str, out: list[Finding], template_labels: dict[str, Any], *, in_nodepool: bool
) -> None:
    """Operator/value rules, minValues, restricted domains and likely misspellings of each requirement."""
    if not isinstance(requirements, list):
        return
    for i, requirement in enumerate(requirements):
        here = f"{path}[{i}]"
        if not isinstance(requirement, dict):
            continue
        key, operator = requirement.get("key"), requirement.get("operator")
        values = requirement.get("values") or []
        if isinstance(key, str):
            problem = _label_key_error(key) or _restricted_key_error(
                key, "the requirements" if in_nodepool else None
            )
            if problem:
                out.append(error(f"{here}.key", f"Invalid value: {problem}"))
            elif key not in labels.WELL_KNOWN_LABELS and key not in labels.DEPRECATED_LABEL_ALIASES:
                intended = _looks_misspelt(key)
                if _in_well_known_domain(key) or (intended and key not in template_labels):
                    meant = f"; did you mean {intended}?" if intended else ""
                    out.append(
                        warning(
                            f"{here}.key",
                            f"{key} is not a well-known label: no instance type will carry it, so no node "
                            f"can satisfy this requirement{meant}",
                        )
                    )
        if not isinstance(values, list):
            continue
        if operator == "In" and not values:
            out.append(error(f"{here}.values", "Required value: operator In needs at least one value"))
        if operator in ("Exists", "DoesNotExist") and values:
            out.append(
                error(f"{here}.values", f"Forbidden: operator {operator} takes no values; remove them")
            )
        if operator in ("Gt", "Lt", "Gte", "Lte") and (len(values) != 1 or not str(values[0]).isdigit()):
            out.append(
                error(
                    f"{here}.values",
                    f"Invalid value: {values!r}: operator {operator} takes exactly one non-negative integer",
                )
            )
        for j, value in enumerate(values):
            problem = _label_value_error(value)
            if problem:
                out.append(error(f"{here}.values[{j}]", f"Invalid value: {problem}"))
        min_values = requirement.get("minValues")
        if isinstance(min_values, int) and operator == "In" and min_values > len(values):
            out.append(
                error(
                    f"{here}.minValues",
                    f"Invalid value: {min_values}: more than the {len(values)} value(s) listed; "
                    f"list at least {min_values} values or lower minValues",
                )
            )


def _check_taints(taints: Any, path: str, out: list[Finding]) -> None:
    if not isinstance(taints, list):
        return
    seen: set[tuple[Any, Any]] = set()
    for i, taint in enumerate(taints):
        if not isinstance(taint, dict):
            continue
        key = taint.get("key")
        if isinstance(key, str) and key:
            problem = _label_key_error(key)
            if problem:
                out.append(error(f"{path}[{i}].key", f"Invalid value: {problem}"))
        if "value" in taint and taint["value"] is not None:
            problem = _label_value_error(taint["value"])
            if problem:
                out.append(error(f"{path}[{i}].value", f"Invalid value: {problem}"))
        identity = (key, taint.get("effect"))
        if identity in seen:
            out.append(
                error(f"{path}[{i}]", f"Duplicate value: taint {key}:{taint.get('effect')} is listed twice")
            )
        seen.add(identity)


def _check_node_class_ref(ref: Any, path: str, out: list[Finding]) -> None:
    if not isinstance(ref, dict):
        return
    if ref.get("group") not in (None, labels.AWS_GROUP):
        out.append(error(f"{path}.group", f"Unsupported value: {ref.get('group')!r}: use {labels.AWS_GROUP}"))
    if ref.get("kind") not in (None, labels.EC2NODECLASS_KIND):
        out.append(
            error(f"{path}.kind", f"Unsupported value: {ref.get('kind')!r}: use {labels.EC2NODECLASS_KIND}")
        )


def _check_resources(resources: Any, path: str, out: list[Finding]) -> None:
    if not isinstance(resources, dict):
        return
    for name, value in resources.items():
        problem = _quantity_error(value)
        if problem:
            out.append(error(f"{path}[{name}]", f"Invalid value: {problem}"))
        elif name == "nodes" and not re.fullmatch(r"\d+", str(value)):
            out.append(
                error(f"{path}[{name}]", f"Invalid value: {value!r}: nodes is a whole number of nodes")
            )


def _check_cron(schedule: str, path: str, out: list[Finding]) -> None:
    if not croniter.is_valid(schedule) or len(schedule.split()) not in (1, 5):
        out.append(
            error(
                path,
                f"Invalid value: {schedule!r}: give a cron schedule of 5 fields "
                "(minute hour day month weekday, "
                "e.g. '0 9 * * mon-fri') or a macro such as @daily; times are UTC",
            )
        )


def _check_budgets(budgets: Any, path: str, out: list[Finding]) -> None:
    if not isinstance(budgets, list):
        return
    for i, budget in enumerate(budgets):
        here = f"{path}[{i}]"
        if not isinstance(budget, dict):
            continue
        nodes = budget.get("nodes", "10%")
        if isinstance(nodes, str) and not re.match(BUDGET_NODES_PATTERN, nodes):
            out.append(
                error(
                    f"{here}.nodes",
                    f"Invalid value: {nodes!r}: give a node count (5) or a percentage 0-100% (10%)",
                )
            )
        schedule, duration = budget.get("schedule"), budget.get("duration")
        if (schedule is None) != (duration is None):
            missing = "duration" if duration is None else "schedule"
            out.append(
                error(
                    f"{here}.{missing}",
                    "Required value: schedule and duration go together (the budget is active for duration "
                    "from each schedule time); set both or neither",
                )
            )
        if isinstance(schedule, str):
            _check_cron(schedule, f"{here}.schedule", out)
        if isinstance(duration, str) and not re.match(BUDGET_DURATION_PATTERN, duration):
            out.append(
                error(
                    f"{here}.duration",
                    f"Invalid value: {duration!r}: give hours and/or minutes (e.g. 8h, 1h30m)",
                )
            )


def _check_labels(
    mapping: Any, path: str, out: list[Finding], where: str | None = "the template labels"
) -> None:
    """Key and value syntax, and restricted domains (``where`` None: a NodeClaim's own labels)."""
    if not isinstance(mapping, dict):
        return
    for key, value in mapping.items():
        problem = _label_key_error(key) or _restricted_key_error(key, where)
        if problem:
            out.append(error(f"{path}[{key}]", f"Invalid value: {problem}"))
        value_problem = _label_value_error(value)
        if value_problem:
            out.append(error(f"{path}[{key}]", f"Invalid value: {value_problem}"))


def _nodepool_rules(doc: dict[str, Any], out: list[Finding]) -> None:
    spec = as_dict(doc.get("spec"))
    template = as_dict(spec.get("template"))
    meta = as_dict(template.get("metadata"))
    tspec = as_dict(template.get("spec"))
    template_labels = as_dict(meta.get("labels"))
    _check_labels(template_labels, "spec.template.metadata.labels", out)
    _check_requirements(
        tspec.get("requirements"), "spec.template.spec.requirements", out, template_labels, in_nodepool=True
    )
    _check_taints(tspec.get("taints"), "spec.template.spec.taints", out)
    _check_taints(tspec.get("startupTaints"), "spec.template.spec.startupTaints", out)
    _check_node_class_ref(tspec.get("nodeClassRef"), "spec.template.spec.nodeClassRef", out)
    _check_duration(tspec.get("expireAfter"), "spec.template.spec.expireAfter", out, allow_never=True)
    _check_duration(
        tspec.get("terminationGracePeriod"),
        "spec.template.spec.terminationGracePeriod",
        out,
        allow_never=False,
    )
    disruption = as_dict(spec.get("disruption"))
    _check_duration(
        disruption.get("consolidateAfter"), "spec.disruption.consolidateAfter", out, allow_never=True
    )
    _check_budgets(disruption.get("budgets"), "spec.disruption.budgets", out)
    _check_resources(spec.get("limits"), "spec.limits", out)
    _check_static(spec, out)


def _check_static(spec: dict[str, Any], out: list[Finding]) -> None:
    """Karpenter v1.14's rules for a static NodePool (``replicas`` set; its CRD's CEL rules): only
    ``limits.nodes``, no ``weight``."""
    if spec.get("replicas") is None:
        return
    limits = as_dict(spec.get("limits"))
    if limits and set(limits) != {"nodes"}:
        out.append(
            error(
                "spec.limits",
                "Invalid value: only 'limits.nodes' is supported on static NodePools; remove "
                + ", ".join(sorted(k for k in limits if k != "nodes")),
            )
        )
    if spec.get("weight") is not None:
        out.append(
            error("spec.weight", "Forbidden: 'weight' is not supported on static NodePools; remove it")
        )


def _nodeclaim_rules(doc: dict[str, Any], out: list[Finding]) -> None:
    """A NodePool template's rules, applied to a NodeClaim: its labels, requirements and taints."""
    spec = as_dict(doc.get("spec"))
    meta = as_dict(doc.get("metadata"))
    _check_labels(meta.get("labels"), "metadata.labels", out, where=None)
    _check_requirements(spec.get("requirements"), "spec.requirements", out, {}, in_nodepool=False)
    _check_taints(spec.get("taints"), "spec.taints", out)
    _check_taints(spec.get("startupTaints"), "spec.startupTaints", out)
    _check_node_class_ref(spec.get("nodeClassRef"), "spec.nodeClassRef", out)
    _check_duration(spec.get("expireAfter"), "spec.expireAfter", out, allow_never=True)
    _check_duration(spec.get("terminationGracePeriod"), "spec.terminationGracePeriod", out, allow_never=False)
    resources = as_dict(spec.get("resources"))
    _check_resources(resources.get("requests"), "spec.resources.requests", out)


def _check_ami_terms(spec: dict[str, Any], out: list[Finding], partial: bool) -> None:
    terms = spec.get("amiSelectorTerms")
    family = spec.get("amiFamily")
    alias_family = None
    if isinstance(terms, list):
        for i, term in enumerate(terms):
            here = f"spec.amiSelectorTerms[{i}]"
            if not isinstance(term, dict):
                continue
            set_fields = [k for k in ("alias", "id", "name", "tags", "ssmParameter", "owner") if term.get(k)]
            if not set(set_fields) - {"owner"}:
                out.append(error(here, "Required value: give one of alias, id, name, tags or ssmParameter"))
            if term.get("id") and len(set_fields) > 1:
                out.append(error(here, "Forbidden: id cannot be combined with other fields in the same term"))
            if term.get("alias"):
                if len(set_fields) > 1:
                    out.append(
                        error(here, "Forbidden: alias cannot be combined with other fields in the same term")
                    )
                if len(terms) > 1:
                    out.append(error(here, "Forbidden: an alias term must be the only amiSelectorTerm"))
                alias_family = _check_alias(term["alias"], f"{here}.alias", out)
    has_alias = isinstance(terms, list) and any(isinstance(t, dict) and t.get("alias") for t in terms)
    if not partial and family is None and not has_alias:
        out.append(
            error(
                "spec.amiFamily",
                "Required value: amiSelectorTerms has no alias, so give amiFamily "
                f"({', '.join(labels.AMI_FAMILIES)}) to choose the user-data format",
            )
        )
    if family and alias_family and family not in (alias_family, "Custom"):
        out.append(
            error(
                "spec.amiFamily",
                f"Invalid value: {family!r}: with an alias it must be {alias_family} (the alias' family) "
                "or Custom; or remove it, it is inferred from the alias",
            )
        )


def _check_alias(alias: Any, path: str, out: list[Finding]) -> str | None:
    match = _ALIAS.match(alias) if isinstance(alias, str) else None
    if not match:
        out.append(error(path, f"Invalid value: {alias!r}: write it as family@version, e.g. al2023@latest"))
        return None
    family = labels.ALIAS_FAMILIES.get(match["family"].lower())
    if match["family"].lower() in labels.WINDOWS_ALIAS_FAMILIES:
        if match["version"] != "latest":
            out.append(error(path, "Invalid value: windows families may only specify version 'latest'"))
        return labels.WINDOWS_ALIAS_FAMILIES[match["family"].lower()]
    if family is None:
        known = ", ".join([*labels.ALIAS_FAMILIES, *labels.WINDOWS_ALIAS_FAMILIES])
        out.append(error(path, f"Unsupported value: {match['family']!r}: alias families are {known}"))
    if not _ALIAS_VERSION.match(match["version"]):
        out.append(
            error(
                path,
                f"Invalid value: {match['version']!r}: the version is 'latest' or a release "
                "(v20240807 for AL2/AL2023, v1.20.3 for Bottlerocket)",
            )
        )
    return family


def _check_selector_terms(terms: Any, path: str, allowed: tuple[str, ...], out: list[Finding]) -> None:
    if not isinstance(terms, list):
        return
    for i, term in enumerate(terms):
        here = f"{path}[{i}]"
        if not isinstance(term, dict):
            continue
        set_fields = [k for k in allowed if term.get(k)]
        if not set_fields:
            out.append(error(here, f"Required value: give one of {', '.join(allowed)}"))
        if term.get("id") and len(set_fields) > 1:
            out.append(error(here, "Forbidden: id cannot be combined with other fields in the same term"))
        tags = term.get("tags")
        if isinstance(tags, dict):
            for key, value in tags.items():
                if not key or not value:
                    out.append(
                        error(f"{here}.tags[{key}]", "Invalid value: tag keys and values must not be empty")
                    )


def _check_tags(tags: Any, out: list[Finding]) -> None:
    if not isinstance(tags, dict):
        return
    for key in tags:
        if not key:
            out.append(error("spec.tags", "Invalid value: empty tag keys are not supported"))
        elif key in labels.RESERVED_TAG_KEYS or key.startswith(labels.RESERVED_TAG_PREFIXES):
            out.append(
                error(
                    f"spec.tags[{key}]",
                    f"Forbidden: {key} is a tag Nodewright sets itself (it scopes what it may manage); "
                    "remove it",
                )
            )


def _check_kubelet(kubelet: Any, out: list[Finding]) -> None:
    if not isinstance(kubelet, dict):
        return
    path = "spec.kubelet"
    for i, address in enumerate(as_list(kubelet.get("clusterDNS"))):
        try:
            ipaddress.ip_address(address)
        except ValueError:
            out.append(error(f"{path}.clusterDNS[{i}]", f"Invalid value: {address!r}: give an IP address"))
    for field_name in ("systemReserved", "kubeReserved"):
        for name, value in as_dict(kubelet.get(field_name)).items():
            if name not in _RESERVED_RESOURCES:
                out.append(
                    error(
                        f"{path}.{field_name}[{name}]",
                        f"Unsupported value: {name!r}: reserve {', '.join(sorted(_RESERVED_RESOURCES))}",
                    )
                )
            problem = _quantity_error(value)
            if problem:
                out.append(error(f"{path}.{field_name}[{name}]", f"Invalid value: {problem}"))
    for field_name in ("evictionHard", "evictionSoft"):
        for signal, value in as_dict(kubelet.get(field_name)).items():
            if signal not in _EVICTION_SIGNALS:
                out.append(
                    error(
                        f"{path}.{field_name}[{signal}]",
                        f"Unsupported value: {signal!r}: eviction signals are "
                        + ", ".join(sorted(_EVICTION_SIGNALS)),
                    )
                )
            text = str(value)
            if text.endswith("%"):
                if not re.fullmatch(r"\d+(\.\d+)?", text[:-1]) or float(text[:-1]) > 100:
                    out.append(
                        error(
                            f"{path}.{field_name}[{signal}]", f"Invalid value: {text!r}: a percentage 0-100%"
                        )
                    )
            else:
                problem = _quantity_error(value)
                if problem:
                    out.append(
                        error(f"{path}.{field_name}[{signal}]", f"Invalid value: {problem} or a percentage")
                    )
    soft = as_dict(kubelet.get("evictionSoft"))
    grace = as_dict(kubelet.get("evictionSoftGracePeriod"))
    for signal, value in grace.items():
        try:
            parse_duration(value, allow_never=False)
        except DurationError as exc:
            out.append(error(f"{path}.evictionSoftGracePeriod[{signal}]", f"Invalid value: {exc}"))
        if signal not in soft:
            out.append(
                error(
                    f"{path}.evictionSoftGracePeriod[{signal}]",
                    "Invalid value: no evictionSoft threshold for it",
                )
            )
    for signal in soft:
        if signal not in grace:
            out.append(
                error(
                    f"{path}.evictionSoft[{signal}]",
                    "Required value: give evictionSoftGracePeriod for this signal "
                    "(the kubelet refuses a soft "
                    "threshold without one)",
                )
            )
    high, low = kubelet.get("imageGCHighThresholdPercent"), kubelet.get("imageGCLowThresholdPercent")
    if isinstance(high, int) and isinstance(low, int) and low >= high:
        out.append(
            error(
                f"{path}.imageGCLowThresholdPercent",
                f"Invalid value: {low}: must be lower than imageGCHighThresholdPercent ({high})",
            )
        )


def _ec2nodeclass_rules(doc: dict[str, Any], out: list[Finding], partial: bool) -> None:
    spec = as_dict(doc.get("spec"))
    _check_kubelet(spec.get("kubelet"), out)
    if partial:
        return
    role, profile = spec.get("role"), spec.get("instanceProfile")
    if role and profile:
        out.append(error("spec", "Forbidden: role and instanceProfile are mutually exclusive; keep one"))
    elif not role and not profile:
        out.append(
            error(
                "spec.role",
                "Required value: v1 needs exactly one of spec.role (the IAM role name for the nodes; "
                "Nodewright "
                "creates the instance profile) or spec.instanceProfile (an existing instance profile name)",
            )
        )
    _check_ami_terms(spec, out, partial)
    _check_selector_terms(spec.get("subnetSelectorTerms"), "spec.subnetSelectorTerms", ("id", "tags"), out)
    _check_selector_terms(
        spec.get("securityGroupSelectorTerms"), "spec.securityGroupSelectorTerms", ("id", "name", "tags"), out
    )
    _check_tags(spec.get("tags"), out)
    mappings = spec.get("blockDeviceMappings")
    if isinstance(mappings, list):
        roots = [i for i, m in enumerate(mappings) if isinstance(m, dict) and m.get("rootVolume")]
        if len(roots) > 1:
            out.append(
                error("spec.blockDeviceMappings", "Invalid value: at most one mapping may be the rootVolume")
            )
        for i, mapping in enumerate(mappings):
            size = dig(mapping, "ebs", "volumeSize")
            problem = _quantity_error(size) if size is not None else None
            if problem:
                out.append(
                    error(f"spec.blockDeviceMappings[{i}].ebs.volumeSize", f"Invalid value: {problem}")
                )


def _nodeoverlay_rules(doc: dict[str, Any], out: list[Finding]) -> None:
    """What the CRD's CEL rules refuse (both prices, a restricted capacity resource) and the requirement
    rules a NodePool's requirements also follow; the rest of Karpenter's runtime validation is the
    overlay's ``ValidationSucceeded`` condition (``api.overlays.runtime_errors``)."""
    spec = as_dict(doc.get("spec"))
    if "price" in spec and "priceAdjustment" in spec:
        out.append(error("spec", "Invalid value: cannot set both 'price' and 'priceAdjustment'; keep one"))
    for name in as_dict(spec.get("capacity")):
        if name in OVERLAY_RESTRICTED_RESOURCES:
            out.append(
                error(
                    f"spec.capacity.{name}",
                    "Invalid value: invalid resource restricted: an overlay adds extended resources only",
                )
            )
    _check_requirements(spec.get("requirements"), "spec.requirements", out, {}, in_nodepool=False)


def validate_v1(doc: dict[str, Any], *, partial: bool = False) -> list[Finding]:
    """Every problem of a v1 NodePool/NodeClaim/EC2NodeClass (``partial``: a kubelet-only EC2NodeClass)
    or a NodeOverlay."""
    key = kind_of(doc)
    if key is None or key not in _V1:
        return [
            error("apiVersion", f"{doc.get('apiVersion')!r} {doc.get('kind')!r} is not a v1 Nodewright kind")
        ]
    out: list[Finding] = []
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        out.append(error("metadata.name", "Required value: give the object a name"))
    group = key[0].split("/", 1)[0]
    _walk(SCHEMAS[(group, key[1])], doc, "", out, partial)
    if key[1] == "NodePool":
        _nodepool_rules(doc, out)
    elif key[1] == "NodeClaim":
        _nodeclaim_rules(doc, out)
    elif key[1] == overlays.KIND:
        _nodeoverlay_rules(doc, out)
    else:
        _ec2nodeclass_rules(doc, out, partial)
    out.extend(warning(path, f"not acted on: {note}") for path, note in not_acted_on(doc))
    return out


def is_v1_kind(doc: Any) -> bool:
    return kind_of(doc) in _V1


def validate_conversion(conversion: Conversion) -> list[Finding]:
    """The conversion's own findings plus the problems of each v1 document it produced."""
    findings = list(conversion.findings)
    for i, converted in enumerate(conversion.documents):
        if is_v1_kind(converted):
            findings.extend(validate_v1(converted, partial=i in conversion.partial))
    return findings


def validate_document(doc: Any) -> list[Finding]:
    """Findings for any manifest: conversion notes plus the problems of its v1 form."""
    return validate_conversion(convert_document(doc))


def nodeclaim_launch_problems(claim: dict[str, Any]) -> list[Finding]:
    """Why a NodeClaim must not be launched: the errors a NodePool template's rules find in it.

    Run on every NodeClaim before its launch, whoever wrote it: its labels, taints and kubelet
    settings reach the node's user data, so a hand-made NodeClaim gets the same checks as a
    NodePool (the CRD's patterns, and the value rules above). Status and server-set metadata
    are not the launch's business and are left out.
    """
    meta = as_dict(claim.get("metadata"))
    document = {
        "apiVersion": claim.get("apiVersion") or "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": meta.get("name"), "labels": meta.get("labels") or {}},
        "spec": claim.get("spec"),
    }
    return [finding for finding in validate_v1(document) if finding.is_error]
