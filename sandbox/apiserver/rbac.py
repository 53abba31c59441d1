"""Authentication and RBAC authorization, as kube-apiserver does them.

* Identities come from bearer tokens (kube-apiserver's static token file: token → user, uid,
  groups); every authenticated identity also has ``system:authenticated``. ``Impersonate-User`` /
  ``Impersonate-Group`` headers (kubectl ``--as``/``--as-group``) switch identity when the caller
  may ``impersonate`` those users and groups.
* Every request is turned into authorizer attributes (k8s.io/apiserver's RequestInfoFactory: verb
  from the method and path, API group, resource, subresource, namespace, name; or a non-resource
  path) and allowed when the ``system:masters`` group asks, or when a rule of a Role/ClusterRole
  bound to the user or one of its groups matches (rbac/v1 semantics: ``*``, ``*/subresource``,
  ``resourceNames``, ``nonResourceURLs`` with a trailing ``*``; ClusterRoles with an
  ``aggregationRule`` hold the rules of the ClusterRoles their selectors match).
* A denial is the real 403: ``<resource> "<name>" is forbidden: User "<u>" cannot <verb> resource
  "<resource[/sub]>" in API group "<g>" in the namespace "<ns>"`` (or ``at the cluster scope``).
* The bootstrap policy every cluster has: ``cluster-admin``, ``system:discovery``,
  ``system:public-info-viewer`` and ``system:basic-user`` (self reviews) with their bindings.

Not emulated (listed in docs/architecture.md): escalation prevention on Role/Binding writes
(``escalate``/``bind``), and the aggregation controller writing aggregated rules into the object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import admission, errors
from .selectors import match_selector_object

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = (RBAC_GROUP, "roles")
ROLEBINDINGS = (RBAC_GROUP, "rolebindings")
CLUSTERROLES = (RBAC_GROUP, "clusterroles")
CLUSTERROLEBINDINGS = (RBAC_GROUP, "clusterrolebindings")
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
SERVICE_ACCOUNT_PREFIX = (
    "system:serviceaccount:"  # a service account's user name: system:serviceaccount:<ns>:<name>
)
NODES_GROUP = "system:nodes"
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""

    def as_user_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"username": self.user, "groups": list(self.groups)}
        if self.uid:
            info["uid"] = self.uid
        return info


@dataclass
class Attributes:
    """What the authorizer decides on (k8s.io/apiserver authorizer.Attributes)."""

    identity: Identity
    verb: str
    resource_request: bool
    path: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


_VERBS = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "GET": "get",
    "HEAD": "get",
    "DELETE": "delete",
}


def request_attributes(identity: Identity, method: str, path: str, query: dict[str, str]) -> Attributes:
    """RequestInfoFactory.NewRequestInfo: resource requests live under /api/v1 and /apis/<g>/<v>."""
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Attributes(identity, verb, False, path="/" + "/".join(parts))
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]  # for /namespaces/{name} too: a namespace is in itself
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    verb = _VERBS.get(method, verb)
    if method in ("GET", "HEAD"):
        if query.get("watch") in ("true", "1"):
            verb = "watch"
        elif not name:
            verb = "list"
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    return Attributes(
        identity,
        verb,
        True,
        path="/" + "/".join(parts),
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=sub,
        namespace=namespace,
        name=name,
    )


# ------------------------------------------------------------------------------ rule matching


def _has(values: list[str] | None, wanted: str) -> bool:
    return values is not None and ("*" in values or wanted in values)


def _resource_matches(rule: dict[str, Any], attrs: Attributes) -> bool:
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if attrs.subresource and resource == f"*/{attrs.subresource}":
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url in ("*", attrs.path) or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    if not _has(rule.get("apiGroups"), attrs.api_group) or not _resource_matches(rule, attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: dict[str, Any], identity: Identity, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return name == identity.user
    if kind == "Group":
        return name in identity.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return identity.user == f"system:serviceaccount:{namespace}:{name}"
    return False


class Authorizer:
    """RBAC over the objects in ``store`` (read under its lock, at request time: no cache to go stale)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _cluster_role_rules(self, name: str) -> list[dict[str, Any]]:
        role = self.store.peek(CLUSTERROLES, "", name)
        if role is None:
            return []
        rules = list(role.get("rules") or [])
        selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        if selectors:
            others, _ = self.store.list(CLUSTERROLES)
            for other in others:
                labels = other["metadata"].get("labels") or {}
                if other["metadata"]["name"] != name and any(
                    match_selector_object(s, labels) for s in selectors
                ):
                    rules += other.get("rules") or []
        return rules

    def _role_rules(self, ref: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        if ref.get("kind") == "ClusterRole":
            return self._cluster_role_rules(ref.get("name", ""))
        role = self.store.peek(ROLES, namespace, ref.get("name", ""))
        return list((role or {}).get("rules") or [])

    def grants(self, identity: Identity, namespace: str) -> list[tuple[str, dict[str, Any]]]:
        """(why, rule) for every rule bound to ``identity`` cluster-wide and in ``namespace``."""
        found: list[tuple[str, dict[str, Any]]] = []
        with self.store.lock:
            bindings, _ = self.store.list(CLUSTERROLEBINDINGS)
            for binding in bindings:
                for subject in binding.get("subjects") or []:
                    if _subject_matches(subject, identity, ""):
                        ref = binding.get("roleRef") or {}
                        why = (
                            f'ClusterRoleBinding "{binding["metadata"]["name"]}" of ClusterRole '
                            f'"{ref.get("name")}" to {subject.get("kind")} "{subject.get("name")}"'
                        )
                        found += [(why, r) for r in self._cluster_role_rules(ref.get("name", ""))]
                        break
            if namespace:
                bindings, _ = self.store.list(ROLEBINDINGS, namespace)
                for binding in bindings:
                    for subject in binding.get("subjects") or []:
                        if _subject_matches(subject, identity, namespace):
                            ref = binding.get("roleRef") or {}
                            name = binding["metadata"]["name"]
                            why = (
                                f'RoleBinding "{name}/{namespace}" of {ref.get("kind")} "{ref.get("name")}" '
                                f'to {subject.get("kind")} "{subject.get("name")}"'
                            )
                            found += [(why, r) for r in self._role_rules(ref, namespace)]
                            break
        return found

    def decide(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason) as a SubjectAccessReview reports them."""
        if MASTERS in attrs.identity.groups:
            return True, ""
        for why, rule in self.grants(attrs.identity, attrs.namespace if attrs.resource_request else ""):
            if rule_allows(rule, attrs):
                return True, f"RBAC: allowed by {why}"
        return False, ""

    def authorize(self, attrs: Attributes) -> None:
        """Raise the API server's 403 when ``attrs`` is not allowed."""
        allowed, _ = self.decide(attrs)
        if not allowed:
            raise forbidden(attrs)


def forbidden_message(attrs: Attributes) -> str:
    """responsewriters.forbiddenMessage."""
    user = attrs.identity.user
    if not attrs.resource_request:
        return f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    return f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" {where}'


def forbidden(attrs: Attributes) -> errors.ApiError:
    message = forbidden_message(attrs)
    if not attrs.resource_request:
        return errors.ApiError(403, "Forbidden", f"forbidden: {message}", {})
    qualified = errors.qualified(attrs.resource, attrs.api_group)
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return errors.ApiError(403, "Forbidden", f"{subject} is forbidden: {message}", details)


# ------------------------------------------------------------------------------ reviews


def _review_attributes(identity: Identity, spec: dict[str, Any]) -> Attributes:
    resource = spec.get("resourceAttributes")
    if resource:
        return Attributes(
            identity,
            resource.get("verb") or "",
            True,
            api_group=resource.get("group") or "",
            api_version=resource.get("version") or "",
            resource=resource.get("resource") or "",
            subresource=resource.get("subresource") or "",
            namespace=resource.get("namespace") or "",
            name=resource.get("name") or "",
        )
    non_resource = spec.get("nonResourceAttributes") or {}
    return Attributes(identity, non_resource.get("verb") or "", False, path=non_resource.get("path") or "")


def access_review(
    authorizer: Authorizer, body: dict[str, Any], identity: Identity, kind: str, namespace: str = ""
) -> dict[str, Any]:
    """SelfSubjectAccessReview / SubjectAccessReview / LocalSubjectAccessReview: the status filled in."""
    spec = body.get("spec") or {}
    if not spec.get("resourceAttributes") and not spec.get("nonResourceAttributes"):
        raise errors.invalid(
            kind,
            "authorization.k8s.io",
            "",
            [
                errors.FieldError.invalid(
                    "spec.resourceAttributes",
                    None,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            ],
        )
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        if not spec.get("user") and not spec.get("groups"):
            raise errors.invalid(
                kind,
                "authorization.k8s.io",
                "",
                [
                    errors.FieldError.invalid(
                        "spec.user", "", "at least one of user or group must be specified"
                    )
                ],
            )
        identity = Identity(spec.get("user") or "", tuple(spec.get("groups") or ()), spec.get("uid") or "")
    if kind == "LocalSubjectAccessReview":
        spec.setdefault("resourceAttributes", {})["namespace"] = namespace
    attrs = _review_attributes(identity, spec)
    allowed, reason = authorizer.decide(attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return {
        "kind": kind,
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
        "spec": spec,
        "status": status,
    }


def rules_review(authorizer: Authorizer, body: dict[str, Any], identity: Identity) -> dict[str, Any]:
    """SelfSubjectRulesReview (``kubectl auth can-i --list``)."""
    spec = body.get("spec") or {}
    namespace = spec.get("namespace") or ""
    if MASTERS in identity.groups:
        rules = [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["*"], "nonResourceURLs": ["*"]},
        ]
    else:
        rules = [rule for _, rule in authorizer.grants(identity, namespace)]
    resource_rules = [
        {k: rule[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if rule.get(k)}
        for rule in rules
        if rule.get("resources")
    ]
    non_resource_rules = [
        {"verbs": rule["verbs"], "nonResourceURLs": rule["nonResourceURLs"]}
        for rule in rules
        if rule.get("nonResourceURLs")
    ]
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        },
    }


def self_subject_review(identity: Identity) -> dict[str, Any]:
    """authentication.k8s.io/v1 SelfSubjectReview (``kubectl auth whoami``)."""
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "status": {"userInfo": identity.as_user_info()},
    }


# ------------------------------------------------------------------------------ bootstrap policy

DISCOVERY_URLS = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
]


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "ClusterRole",
        "apiVersion": f"{RBAC_GROUP}/v1",
        "metadata": {
            "name": name,
            "labels": dict(BOOTSTRAP_LABEL),
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    }


def _binding(name: str, role: str, *groups: str) -> dict[str, Any]:
    return {
        "kind": "ClusterRoleBinding",
        "apiVersion": f"{RBAC_GROUP}/v1",
        "metadata": {
            "name": name,
            "labels": dict(BOOTSTRAP_LABEL),
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group} for group in groups],
    }


def bootstrap_policy() -> list[tuple[tuple[str, str], dict[str, Any]]]:
    """The ClusterRoles and bindings kube-apiserver creates at start (plugin/pkg/auth/.../bootstrappolicy)."""
    roles = [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _cluster_role("system:discovery", [{"nonResourceURLs": DISCOVERY_URLS, "verbs": ["get"]}]),
        _cluster_role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
    ]
    bindings = [
        _binding("cluster-admin", "cluster-admin", MASTERS),
        _binding("system:discovery", "system:discovery", AUTHENTICATED),
        _binding("system:public-info-viewer", "system:public-info-viewer", AUTHENTICATED, UNAUTHENTICATED),
        _binding("system:basic-user", "system:basic-user", AUTHENTICATED),
    ]
    stamp = admission.now()
    out: list[tuple[tuple[str, str], dict[str, Any]]] = []
    for key, objects in ((CLUSTERROLES, roles), (CLUSTERROLEBINDINGS, bindings)):
        for obj in objects:
            obj["metadata"]["creationTimestamp"] = stamp
            out.append((key, obj))
    return out


def validate_role(obj: dict[str, Any], *, namespaced: bool) -> list[errors.FieldError]:
    """The checks of pkg/apis/rbac/validation of a Role (``namespaced``) or ClusterRole that users
    meet in practice."""
    problems: list[errors.FieldError] = []
    for i, rule in enumerate(obj.get("rules") or []):
        if not rule.get("verbs"):
            problems.append(
                errors.FieldError.required(f"rules[{i}].verbs", "verbs must contain at least one value")
            )
        if rule.get("nonResourceURLs"):
            if namespaced:
                problems.append(
                    errors.FieldError.invalid(
                        f"rules[{i}].nonResourceURLs",
                        rule["nonResourceURLs"],
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                )
        elif "apiGroups" not in rule:
            problems.append(
                errors.FieldError.required(
                    f"rules[{i}].apiGroups", "resource rules must supply at least one api group"
                )
            )
    return problems


def validate_binding(obj: dict[str, Any], *, namespaced: bool) -> list[errors.FieldError]:
    """The checks of a RoleBinding (``namespaced``: it may name a Role) or ClusterRoleBinding."""
    problems: list[errors.FieldError] = []
    ref = obj.get("roleRef") or {}
    allowed = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind") not in allowed:
        problems.append(errors.FieldError.unsupported("roleRef.kind", ref.get("kind"), allowed))
    if ref.get("apiGroup") != RBAC_GROUP:
        problems.append(errors.FieldError.unsupported("roleRef.apiGroup", ref.get("apiGroup"), [RBAC_GROUP]))
    if not ref.get("name"):
        problems.append(errors.FieldError.required("roleRef.name"))
    for i, subject in enumerate(obj.get("subjects") or []):
        if subject.get("kind") not in ("User", "Group", "ServiceAccount"):
            problems.append(
                errors.FieldError.unsupported(
                    f"subjects[{i}].kind", subject.get("kind"), ["ServiceAccount", "User", "Group"]
                )
            )
        if not subject.get("name"):
            problems.append(errors.FieldError.required(f"subjects[{i}].name"))
    return problems


def validate_binding_update(new: dict[str, Any], old: dict[str, Any]) -> list[errors.FieldError]:
    if new.get("roleRef") != old.get("roleRef"):
        return [errors.FieldError.invalid("roleRef", new.get("roleRef"), "cannot change roleRef")]
    return []
