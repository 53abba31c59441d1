"""admissionregistration.k8s.io/v1: the scheme defaults and API validation of webhook configurations
(validating and mutating), ValidatingAdmissionPolicies and their bindings.

As kube-apiserver has them (pkg/apis/admissionregistration/v1/defaults.go and
pkg/apis/admissionregistration/validation/validation.go), with the messages it answers. CEL
expressions (matchConditions, validations) are parsed with cel-python, so a syntax error is
refused here as there; kube-apiserver's type checking of them against the matched kinds is not
reproduced. The emulator calls validating webhooks at admission (``webhooks.py``); it stores
mutating webhooks and admission policies without applying them (docs/architecture.md, Not done).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from .errors import FieldError

GROUP = "admissionregistration.k8s.io"
VALIDATING_WEBHOOKS = "validatingwebhookconfigurations"
MUTATING_WEBHOOKS = "mutatingwebhookconfigurations"
POLICIES = "validatingadmissionpolicies"
BINDINGS = "validatingadmissionpolicybindings"

FAILURE_POLICIES = ["Fail", "Ignore"]
MATCH_POLICIES = ["Equivalent", "Exact"]
NO_SIDE_EFFECTS = ["None", "NoneOnDryRun"]
REINVOCATION_POLICIES = ["IfNeeded", "Never"]
OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
SCOPES = ["*", "Cluster", "Namespaced"]
REVIEW_VERSIONS = ["v1", "v1beta1"]  # AcceptedAdmissionReviewVersions
VALIDATION_ACTIONS = ["Audit", "Deny", "Warn"]
VALIDATION_REASONS = ["Forbidden", "Invalid", "RequestEntityTooLarge"]
PARAM_NOT_FOUND_ACTIONS = ["Deny", "Allow"]
DEFAULT_TIMEOUT_SECONDS = 10
DEFAULT_SERVICE_PORT = 443
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character"
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


# ------------------------------------------------------------------------------------------ defaults


def default_webhook_configuration(obj: dict[str, Any], *, mutating: bool) -> None:
    """SetDefaults_ValidatingWebhook / _MutatingWebhook / _Rule / _ServiceReference."""
    for hook in obj.get("webhooks") or []:
        if isinstance(hook, dict):
            _default_webhook(hook, mutating=mutating)


def default_policy(obj: dict[str, Any]) -> None:
    """SetDefaults_ValidatingAdmissionPolicySpec / _MatchResources."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("failurePolicy", "Fail")
        _default_match_resources(spec.get("matchConstraints"))


def default_binding(obj: dict[str, Any]) -> None:
    """SetDefaults_MatchResources / _ParamRef of a binding."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _default_match_resources(spec.get("matchResources"))
        param_ref = spec.get("paramRef")
        if isinstance(param_ref, dict):
            param_ref.setdefault("parameterNotFoundAction", "Deny")


def _default_webhook(hook: dict[str, Any], *, mutating: bool) -> None:
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("namespaceSelector", {})
    hook.setdefault("objectSelector", {})
    hook.setdefault("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
    if mutating:
        hook.setdefault("reinvocationPolicy", "Never")
    _default_rules(hook.get("rules"))
    service = (hook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        service.setdefault("port", DEFAULT_SERVICE_PORT)


def _default_match_resources(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    _default_rules(match.get("resourceRules"))
    _default_rules(match.get("excludeResourceRules"))


def _default_rules(rules: Any) -> None:
    for rule in rules or []:
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")


# ---------------------------------------------------------------------------------------- validation


def validate_policy(obj: dict[str, Any]) -> list[FieldError]:
    return _validate_policy(obj.get("spec") or {})


def validate_binding(obj: dict[str, Any]) -> list[FieldError]:
    return _validate_binding(obj.get("spec") or {})


def validate_webhook_configuration(obj: dict[str, Any], *, mutating: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    names: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            errors.append(FieldError.invalid(path, hook, "must be an object"))
            continue
        errors += _validate_webhook(hook, path, mutating=mutating)
        errors += _validate_review_versions(
            hook.get("admissionReviewVersions") or [], f"{path}.admissionReviewVersions"
        )
        name = hook.get("name")
        if name:
            if name in names:
                errors.append(FieldError.duplicate(f"{path}.name", name))
            names.add(name)
    return errors


def _validate_webhook(hook: dict[str, Any], path: str, *, mutating: bool) -> list[FieldError]:
    errors = _fully_qualified_name(hook.get("name") or "", f"{path}.name")
    for j, rule in enumerate(hook.get("rules") or []):
        errors += _validate_rule_with_operations(rule, f"{path}.rules[{j}]")
    errors += _one_of(hook, "failurePolicy", FAILURE_POLICIES, path)
    errors += _one_of(hook, "matchPolicy", MATCH_POLICIES, path)
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        errors.append(
            FieldError.required(f"{path}.sideEffects", f"must specify one of {', '.join(NO_SIDE_EFFECTS)}")
        )
    elif side_effects not in NO_SIDE_EFFECTS:
        errors.append(FieldError.unsupported(f"{path}.sideEffects", side_effects, NO_SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if isinstance(timeout, int) and not 1 <= timeout <= 30:
        errors.append(
            FieldError.invalid(
                f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds"
            )
        )
    if mutating:
        errors += _one_of(hook, "reinvocationPolicy", REINVOCATION_POLICIES, path)
    errors += _validate_client_config(hook.get("clientConfig") or {}, f"{path}.clientConfig")
    errors += _validate_match_conditions(hook.get("matchConditions") or [], f"{path}.matchConditions")
    return errors


def _one_of(obj: dict[str, Any], key: str, allowed: list[str], path: str) -> list[FieldError]:
    value = obj.get(key)
    if value is not None and value not in allowed:
        return [FieldError.unsupported(f"{path}.{key}", value, allowed)]
    return []


def _fully_qualified_name(name: str, path: str) -> list[FieldError]:
    """utilvalidation.IsFullyQualifiedName."""
    if not name:
        return [FieldError.required(path, "")]
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return [
            FieldError.invalid(
                path,
                name,
                SUBDOMAIN_MESSAGE,
            )
        ]
    if name.count(".") < 2:
        return [
            FieldError.invalid(
                path, name, "should be a domain with at least three segments separated by dots"
            )
        ]
    return []


def _validate_review_versions(versions: list[Any], path: str) -> list[FieldError]:
    if not versions:
        return [FieldError.required(path, f"must specify one of {', '.join(REVIEW_VERSIONS)}")]
    errors: list[FieldError] = []
    seen: set[Any] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errors.append(FieldError.invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
    if not seen & set(REVIEW_VERSIONS):
        errors.append(
            FieldError.invalid(path, versions, f"must include at least one of {', '.join(REVIEW_VERSIONS)}")
        )
    return errors


def _validate_rule_with_operations(rule: Any, path: str) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [FieldError.invalid(path, rule, "must be an object")]
    errors: list[FieldError] = []
    operations = rule.get("operations") or []
    if not operations:
        errors.append(FieldError.required(f"{path}.operations", ""))
    if len(operations) > 1 and "*" in operations:
        errors.append(
            FieldError.invalid(
                f"{path}.operations", operations, "if '*' is present, must not specify other operations"
            )
        )
    for i, operation in enumerate(operations):
        if operation not in OPERATIONS:
            errors.append(FieldError.unsupported(f"{path}.operations[{i}]", operation, OPERATIONS))
    for key, what in (("apiGroups", "API groups"), ("apiVersions", "API versions")):
        values = rule.get(key) or []
        if not values:
            errors.append(FieldError.required(f"{path}.{key}", ""))
        if len(values) > 1 and "*" in values:
            errors.append(
                FieldError.invalid(
                    f"{path}.{key}", values, f"if '*' is present, must not specify other {what}"
                )
            )
    for i, version in enumerate(rule.get("apiVersions") or []):
        if version == "":
            errors.append(FieldError.required(f"{path}.apiVersions[{i}]", ""))
    errors += _validate_resources(rule.get("resources") or [], f"{path}.resources")
    errors += _one_of(rule, "scope", SCOPES, path)
    return errors


def _validate_resources(resources: list[Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if not resources:
        errors.append(FieldError.required(path, ""))
    with_wildcard_sub: set[str] = set()
    sub_with_wildcard: set[str] = set()
    single = double = plain = False
    for i, entry in enumerate(resources):
        if entry == "":
            errors.append(FieldError.required(f"{path}[{i}]", ""))
            continue
        double = double or entry == "*/*"
        single = single or entry == "*"
        resource, _, sub = str(entry).partition("/")
        if "/" not in str(entry):
            plain = entry != "*"
            continue
        if resource in with_wildcard_sub:
            errors.append(
                FieldError.invalid(
                    f"{path}[{i}]", entry, f"if '{resource}/*' is present, must not specify {entry}"
                )
            )
        if sub in sub_with_wildcard:
            errors.append(
                FieldError.invalid(
                    f"{path}[{i}]", entry, f"if '*/{sub}' is present, must not specify {entry}"
                )
            )
        if sub == "*":
            with_wildcard_sub.add(resource)
        if resource == "*":
            sub_with_wildcard.add(sub)
    if len(resources) > 1 and double:
        errors.append(
            FieldError.invalid(path, resources, "if '*/*' is present, must not specify other resources")
        )
    if single and plain:
        errors.append(
            FieldError.invalid(
                path, resources, "if '*' is present, must not specify other resources without subresources"
            )
        )
    return errors


def _validate_client_config(client: dict[str, Any], path: str) -> list[FieldError]:
    url, service = client.get("url"), client.get("service")
    if (url is None) == (service is None):
        return [FieldError.required(path, "exactly one of url or service is required")]
    if url is not None:
        return _validate_url(str(url), f"{path}.url")
    return _validate_service(service if isinstance(service, dict) else {}, f"{path}.service")


def _validate_url(url: str, path: str) -> list[FieldError]:
    """webhook.ValidateWebhookURL with forceHttps."""
    form = "; desired format: https://host[/path]"
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return [FieldError.required(path, f"url must be a valid URL: {exc}{form}")]
    errors: list[FieldError] = []
    if parts.scheme != "https":
        errors.append(FieldError.invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + form))
    if not parts.hostname:
        errors.append(FieldError.invalid(path, parts.hostname or "", "host must be provided" + form))
    if parts.username is not None:
        errors.append(
            FieldError.invalid(path, parts.username, "user information is not permitted in the URL")
        )
    if parts.fragment:
        errors.append(FieldError.invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        errors.append(FieldError.invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return errors


def _validate_service(service: dict[str, Any], path: str) -> list[FieldError]:
    """webhook.ValidateWebhookService."""
    errors: list[FieldError] = []
    for key in ("name", "namespace"):
        value = service.get(key) or ""
        if not value:
            errors.append(FieldError.required(f"{path}.{key}", f"service {key} is required"))
        elif not _DNS_LABEL.match(value) or len(value) > 63:
            errors.append(FieldError.invalid(f"{path}.{key}", value, "must be a valid DNS label"))
    port = service.get("port")
    if isinstance(port, int) and not 1 <= port <= 65535:
        errors.append(
            FieldError.invalid(
                f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive"
            )
        )
    return errors


def _validate_match_conditions(conditions: list[Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if len(conditions) > 64:
        errors.append(
            FieldError("FieldValueTooMany", path, f"Too many: {len(conditions)}: must have at most 64 items")
        )
    names: set[str] = set()
    for i, condition in enumerate(conditions):
        here = f"{path}[{i}]"
        if not isinstance(condition, dict):
            errors.append(FieldError.invalid(here, condition, "must be an object"))
            continue
        expression = str(condition.get("expression") or "").strip()
        if not expression:
            errors.append(FieldError.required(f"{here}.expression", ""))
        else:
            errors += _cel(expression, f"{here}.expression")
        name = condition.get("name") or ""
        if not name:
            errors.append(FieldError.required(f"{here}.name", ""))
        elif name in names:
            errors.append(FieldError.duplicate(f"{here}.name", name))
        names.add(name)
    return errors


def _cel(expression: str, path: str) -> list[FieldError]:
    """A CEL expression that does not parse is refused as kube-apiserver refuses it."""
    import celpy
    from celpy.celparser import CELParseError

    try:
        celpy.Environment().compile(expression)
    except CELParseError as exc:
        where = f"<input>:{getattr(exc, 'line', 1)}:{getattr(exc, 'column', 1)}"
        return [FieldError.invalid(path, expression, f"compilation failed: ERROR: {where}: Syntax error")]
    return []


def _validate_policy(spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    if spec.get("failurePolicy") is None:
        errors.append(FieldError.required("spec.failurePolicy", ""))
    errors += _one_of(spec, "failurePolicy", FAILURE_POLICIES, "spec")
    param_kind = spec.get("paramKind")
    if isinstance(param_kind, dict):
        for key in ("apiVersion", "kind"):
            if not param_kind.get(key):
                errors.append(FieldError.required(f"spec.paramKind.{key}", ""))
    constraints = spec.get("matchConstraints")
    if not isinstance(constraints, dict):
        errors.append(FieldError.required("spec.matchConstraints", ""))
    else:
        errors += _validate_match_resources(constraints, "spec.matchConstraints")
        if not constraints.get("resourceRules"):
            errors.append(FieldError.required("spec.matchConstraints.resourceRules", ""))
    errors += _validate_match_conditions(spec.get("matchConditions") or [], "spec.matchConditions")
    validations, audit = spec.get("validations") or [], spec.get("auditAnnotations") or []
    if not validations and not audit:
        why = "validations or auditAnnotations must contain at least one item"
        errors.append(FieldError.required("spec.validations", why))
        errors.append(FieldError.required("spec.auditAnnotations", why))
    for i, validation in enumerate(validations):
        here = f"spec.validations[{i}]"
        if not isinstance(validation, dict):
            errors.append(FieldError.invalid(here, validation, "must be an object"))
            continue
        expression = str(validation.get("expression") or "").strip()
        if not expression:
            errors.append(FieldError.required(f"{here}.expression", "expression is not specified"))
        else:
            errors += _cel(expression, f"{here}.expression")
        message = validation.get("message")
        if isinstance(message, str) and message and not message.strip():
            errors.append(
                FieldError.invalid(f"{here}.message", message, "message must be non-empty if specified")
            )
        elif isinstance(message, str) and re.search(r"[\n\r]", message.strip()):
            errors.append(
                FieldError.invalid(f"{here}.message", message, "message must not contain line breaks")
            )
        errors += _one_of(validation, "reason", VALIDATION_REASONS, here)
    keys: set[str] = set()
    for i, annotation in enumerate(audit):
        here = f"spec.auditAnnotations[{i}]"
        if not isinstance(annotation, dict):
            errors.append(FieldError.invalid(here, annotation, "must be an object"))
            continue
        if not str(annotation.get("valueExpression") or "").strip():
            errors.append(FieldError.required(f"{here}.valueExpression", "valueExpression is not specified"))
        key = annotation.get("key") or ""
        if key in keys:
            errors.append(FieldError.duplicate(f"{here}.key", key))
        keys.add(key)
    return errors


def _validate_match_resources(match: dict[str, Any], path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("matchPolicy", "namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            errors.append(FieldError.required(f"{path}.{key}", ""))
    errors += _one_of(match, "matchPolicy", MATCH_POLICIES, path)
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or []):
            here = f"{path}.{key}[{i}]"
            names = (rule.get("resourceNames") or []) if isinstance(rule, dict) else []
            seen: set[str] = set()
            for j, resource_name in enumerate(names):
                if resource_name in seen:
                    errors.append(FieldError.duplicate(f"{here}.resourceNames[{j}]", resource_name))
                seen.add(resource_name)
            errors += _validate_rule_with_operations(rule, here)
    return errors


def _validate_binding(spec: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    policy = spec.get("policyName") or ""
    if not policy:
        errors.append(FieldError.required("spec.policyName", ""))
    elif not _DNS_SUBDOMAIN.match(policy) or len(policy) > 253:
        errors.append(
            FieldError.invalid(
                "spec.policyName",
                policy,
                SUBDOMAIN_MESSAGE,
            )
        )
    param_ref = spec.get("paramRef")
    if isinstance(param_ref, dict):
        errors += _validate_param_ref(param_ref)
    match = spec.get("matchResources")
    if isinstance(match, dict):
        # sic: kube-apiserver names the field path "matchResouces"
        errors += _validate_match_resources(match, "spec.matchResouces")
    actions = spec.get("validationActions") or []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in VALIDATION_ACTIONS:
            errors.append(FieldError.unsupported(f"spec.validationActions[{i}]", action, VALIDATION_ACTIONS))
        if action in seen:
            errors.append(FieldError.duplicate(f"spec.validationActions[{i}]", action))
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        errors.append(
            FieldError.invalid(
                "spec.validationActions",
                actions,
                "must not contain both Deny and Warn (repeating the same validation failure information in "
                "the API response and headers serves no purpose)",
            )
        )
    if not seen:
        errors.append(
            FieldError.required("spec.validationActions", "at least one validation action is required")
        )
    return errors


def _validate_param_ref(param_ref: dict[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    name, selector = param_ref.get("name"), param_ref.get("selector")
    if name and selector is not None:
        errors.append(FieldError.forbidden("spec.paramRef.name", "name and selector are mutually exclusive"))
        errors.append(
            FieldError.forbidden("spec.paramRef.selector", "name and selector are mutually exclusive")
        )
    if not name and selector is None:
        errors.append(FieldError.required("spec.paramRef", "one of name or selector must be specified"))
    action = param_ref.get("parameterNotFoundAction")
    if not action:
        errors.append(FieldError.required("spec.paramRef.parameterNotFoundAction", ""))
    elif action not in PARAM_NOT_FOUND_ACTIONS:
        errors.append(
            FieldError.unsupported("spec.paramRef.parameterNotFoundAction", action, PARAM_NOT_FOUND_ACTIONS)
        )
    return errors
