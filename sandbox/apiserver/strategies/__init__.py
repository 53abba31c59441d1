"""What each kind does differently on a read or a write, in one class per kind, as kube-apiserver's
registry keeps it in ``pkg/registry/<group>/<kind>/strategy.go`` and the store options beside it.

:class:`Strategy` (``base``) is the generic registry (``genericregistry.Store`` with a plain
strategy); a kind that differs overrides the hook that differs, named after kube-apiserver's: the
scheme's defaulting, ``PrepareForCreate``, ``PrepareForUpdate`` (and the status strategy's),
``Validate``/``ValidateUpdate``, ``Canonicalize``, ``CheckGracefulDelete``, ``ReturnDeletedObject``,
``ShouldDeleteDuringUpdate``, the store's ``BeginCreate``/``AfterCreate``/``AfterUpdate``/
``AfterDelete``, its ``TableConvertor``, ``GetAttrs`` (the selectable fields), the kind's
``ScaleREST``, and a REST ``Delete`` for the kind whose storage replaces the store's (namespaces);
custom resources and events.k8s.io Events also convert between the served and the stored version
here (``present``, ``to_storage``). The kinds live by group beside this module (``core``,
``storage``, ``workloads``, ``access``, ``apiextensions``); the functions they call (defaults,
validation, printer columns) stay where kube-apiserver keeps them apart too (admission.py,
printers.py, selectors.py...).

:func:`strategy_for` resolves a resource to its strategy; ``handlers.py`` runs the verbs and asks it
at each point where kinds differ, so neither it nor the modules around it has a per-kind case of its
own. Strategies hold no state: one instance serves every version of its kind.
"""

from __future__ import annotations

from .. import admissionregistration, eventsv1, rbac, webhooks
from ..resources import CRD_KEY, ResourceType
from .access import (
    MutatingWebhookConfigurationStrategy,
    RoleBindingStrategy,
    RoleStrategy,
    SelfSubjectReviewStrategy,
    SelfSubjectRulesReviewStrategy,
    SubjectAccessReviewStrategy,
    ValidatingAdmissionPolicyBindingStrategy,
    ValidatingAdmissionPolicyStrategy,
    ValidatingWebhookConfigurationStrategy,
)
from .apiextensions import CustomResourceDefinitionStrategy, CustomResourceStrategy
from .base import ReturnsDeletedObject, Strategy, gc_finalizers, validate_delete_options
from .core import (
    EventStrategy,
    EventsV1Strategy,
    LeaseStrategy,
    NamespaceStrategy,
    NodeStrategy,
    PodStrategy,
    ServiceStrategy,
)
from .storage import (
    PersistentVolumeClaimStrategy,
    PersistentVolumeStrategy,
    StorageClassStrategy,
    VolumeAttachmentStrategy,
)
from .workloads import (
    CronJobStrategy,
    DaemonSetStrategy,
    DeploymentStrategy,
    JobStrategy,
    PodDisruptionBudgetStrategy,
    ReplicaSetStrategy,
    StatefulSetStrategy,
)

__all__ = ["CRDS", "Strategy", "gc_finalizers", "strategy_for", "validate_delete_options"]

GENERIC = Strategy()
CRDS = CustomResourceDefinitionStrategy()
CUSTOM_RESOURCES = CustomResourceStrategy()
_ROLES = RoleStrategy()
_ROLE_BINDINGS = RoleBindingStrategy()
_ACCESS_REVIEWS = SubjectAccessReviewStrategy()
# By (group, plural); every kind not listed is the generic registry.
BY_KIND: dict[tuple[str, str], Strategy] = {
    ("", "pods"): PodStrategy(),
    ("", "nodes"): NodeStrategy(),
    ("", "namespaces"): NamespaceStrategy(),
    eventsv1.CORE_KEY: EventStrategy(),
    eventsv1.KEY: EventsV1Strategy(),
    ("", "persistentvolumes"): PersistentVolumeStrategy(),
    ("", "persistentvolumeclaims"): PersistentVolumeClaimStrategy(),
    ("", "services"): ServiceStrategy(),
    ("", "serviceaccounts"): ReturnsDeletedObject(),
    ("storage.k8s.io", "storageclasses"): StorageClassStrategy(),
    ("storage.k8s.io", "volumeattachments"): VolumeAttachmentStrategy(),
    ("apps", "deployments"): DeploymentStrategy(),
    ("apps", "replicasets"): ReplicaSetStrategy(),
    ("apps", "statefulsets"): StatefulSetStrategy(),
    ("apps", "daemonsets"): DaemonSetStrategy(),
    ("batch", "jobs"): JobStrategy(),
    ("batch", "cronjobs"): CronJobStrategy(),
    ("policy", "poddisruptionbudgets"): PodDisruptionBudgetStrategy(),
    ("coordination.k8s.io", "leases"): LeaseStrategy(),
    rbac.ROLES: _ROLES,
    rbac.CLUSTERROLES: _ROLES,
    rbac.ROLEBINDINGS: _ROLE_BINDINGS,
    rbac.CLUSTERROLEBINDINGS: _ROLE_BINDINGS,
    webhooks.CONFIGURATIONS: ValidatingWebhookConfigurationStrategy(),
    (
        admissionregistration.GROUP,
        admissionregistration.MUTATING_WEBHOOKS,
    ): MutatingWebhookConfigurationStrategy(),
    (admissionregistration.GROUP, admissionregistration.POLICIES): ValidatingAdmissionPolicyStrategy(),
    (admissionregistration.GROUP, admissionregistration.BINDINGS): ValidatingAdmissionPolicyBindingStrategy(),
    CRD_KEY: CRDS,
    **{
        ("authorization.k8s.io", plural): _ACCESS_REVIEWS
        for plural in ("subjectaccessreviews", "selfsubjectaccessreviews", "localsubjectaccessreviews")
    },
    ("authorization.k8s.io", "selfsubjectrulesreviews"): SelfSubjectRulesReviewStrategy(),
    ("authentication.k8s.io", "selfsubjectreviews"): SelfSubjectReviewStrategy(),
}


def strategy_for(rt: ResourceType) -> Strategy:
    """The strategy of ``rt``'s kind: the same for every version it is served in."""
    if rt.custom:
        return CUSTOM_RESOURCES
    return BY_KIND.get((rt.group, rt.plural), GENERIC)
