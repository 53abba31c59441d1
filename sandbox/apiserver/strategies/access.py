"""Who may do what: RBAC (``pkg/registry/rbac/*``) and the admission configuration kinds
(``pkg/registry/admissionregistration/*``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import admissionregistration, printers, rbac, webhooks
from ..errors import FieldError
from ..resources import ResourceType
from .base import Strategy

if TYPE_CHECKING:
    from ..handlers import Target


class RoleStrategy(Strategy):
    """pkg/registry/rbac/role and clusterrole (a Role's rules cannot name non-resource URLs)."""

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + rbac.validate_role(obj, namespaced=rt.namespaced)


class RoleBindingStrategy(Strategy):
    """pkg/registry/rbac/rolebinding and clusterrolebinding (only a RoleBinding may name a Role);
    the roleRef cannot change."""

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + rbac.validate_binding(obj, namespaced=rt.namespaced)

    def validate_immutable(
        self, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> list[FieldError]:
        return rbac.validate_binding_update(new, old)


class MutatingWebhookConfigurationStrategy(Strategy):
    """pkg/registry/admissionregistration/mutatingwebhookconfiguration: stored and served, not
    called; it has no spec, so the generation follows its webhooks."""

    columns = printers.WEBHOOK_CONFIGURATIONS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_webhook_configuration(obj, mutating=True)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        problems = super().validate(rt, obj)
        return problems + admissionregistration.validate_webhook_configuration(obj, mutating=True)

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        return new.get("webhooks") != old.get("webhooks")


class ValidatingWebhookConfigurationStrategy(Strategy):
    """pkg/registry/admissionregistration/validatingwebhookconfiguration: the configurations the
    emulator calls (webhooks.py), validated as the mutating ones are, their matchConditions also
    compiled when written (as the emulator will evaluate them)."""

    columns = printers.WEBHOOK_CONFIGURATIONS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_webhook_configuration(obj, mutating=False)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        problems = super().validate(rt, obj)
        problems += admissionregistration.validate_webhook_configuration(obj, mutating=False)
        reported = {problem.field for problem in problems}
        return problems + [p for p in webhooks.validate_configuration(obj) if p.field not in reported]

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        return new.get("webhooks") != old.get("webhooks")


class ValidatingAdmissionPolicyStrategy(Strategy):
    """pkg/registry/admissionregistration/validatingadmissionpolicy: stored and served, not
    applied; its status (the type checking) is the controller's, so it starts empty."""

    columns = printers.VALIDATING_ADMISSION_POLICIES

    status_on_create: dict[str, Any] | None = {}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_policy(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admissionregistration.validate_policy(obj)


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    """pkg/registry/admissionregistration/validatingadmissionpolicybinding."""

    columns = printers.VALIDATING_ADMISSION_POLICY_BINDINGS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admissionregistration.default_binding(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admissionregistration.validate_binding(obj)


class SubjectAccessReviewStrategy(Strategy):
    """pkg/registry/authorization/{subject,selfsubject,localsubject}accessreview: whether the
    subject (the caller, for the self kind) may do the attributes' verb, answered from RBAC."""

    def review(
        self, authorizer: rbac.Authorizer, t: Target, body: dict[str, Any], identity: rbac.Identity
    ) -> dict[str, Any]:
        return rbac.access_review(authorizer, body, identity, t.rt.kind, t.namespace or "")


class SelfSubjectRulesReviewStrategy(Strategy):
    """pkg/registry/authorization/selfsubjectrulesreview: the caller's rules in a namespace."""

    def review(
        self, authorizer: rbac.Authorizer, t: Target, body: dict[str, Any], identity: rbac.Identity
    ) -> dict[str, Any]:
        return rbac.rules_review(authorizer, body, identity)


class SelfSubjectReviewStrategy(Strategy):
    """pkg/registry/authentication/selfsubjectreview: who the caller is."""

    def review(
        self, authorizer: rbac.Authorizer, t: Target, body: dict[str, Any], identity: rbac.Identity
    ) -> dict[str, Any]:
        return rbac.self_subject_review(identity)
