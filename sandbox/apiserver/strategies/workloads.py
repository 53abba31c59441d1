"""The workload controllers' kinds: apps/v1 (``pkg/registry/apps/*``), batch/v1
(``pkg/registry/batch/*``) and the PodDisruptionBudgets that guard them (``pkg/registry/policy``).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from .. import admission, printers, selectors
from ..errors import FieldError
from ..resources import ResourceType
from .base import Strategy

if TYPE_CHECKING:
    from ..handlers import Context, ResourceHandlers, Response, Target


class WorkloadStrategy(Strategy):
    """pkg/registry/apps/*: a pod template under an immutable selector; status starts empty."""

    status_on_create: dict[str, Any] | None = {}

    def scale(self, handlers: ResourceHandlers, t: Target, ctx: Context) -> Response:
        from .. import scale  # serves HTTP, so it imports handlers.py, which imports this module

        return scale.workload_scale(handlers, t, ctx)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_workload(obj.get("spec") or {})

    def validate_immutable(
        self, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> list[FieldError]:
        return admission.validate_selector_immutable(new, old)


class DeploymentStrategy(WorkloadStrategy):
    """pkg/registry/apps/deployment."""

    columns = printers.DEPLOYMENTS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_deployment(obj)

    def prepare_for_status_update(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any]
    ) -> dict[str, Any]:
        """deploymentStatusStrategy keeps the labels too (its reset fields: spec and
        metadata.labels); other metadata, annotations included, a /status write may change."""
        result = super().prepare_for_status_update(rt, new, old)
        labels = old["metadata"].get("labels")
        if labels is None:
            result["metadata"].pop("labels", None)
        else:
            result["metadata"]["labels"] = copy.deepcopy(labels)
        return result

    def spec_changed(
        self, rt: ResourceType, new: dict[str, Any], old: dict[str, Any], subresource: str | None
    ) -> bool:
        """An update of the deployment bumps the generation for its annotations too (they are
        copied to its ReplicaSets); a /status write never does."""
        if subresource is not None:
            return False
        annotations = (new["metadata"].get("annotations") or {}) != (old["metadata"].get("annotations") or {})
        return annotations or super().spec_changed(rt, new, old, subresource)


class ReplicaSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/replicaset."""

    columns = printers.REPLICASETS
    field_labels = selectors.REPLICASET_FIELDS

    zero_status_fields = ("replicas",)

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_replica_set(obj)


class StatefulSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/statefulset."""

    zero_status_fields = ("replicas", "availableReplicas")

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_stateful_set(obj)


class DaemonSetStrategy(WorkloadStrategy):
    """pkg/registry/apps/daemonset."""

    columns = printers.DAEMONSETS

    zero_status_fields = (
        "currentNumberScheduled",
        "desiredNumberScheduled",
        "numberMisscheduled",
        "numberReady",
    )

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_daemon_set(obj)


class JobStrategy(Strategy):
    """pkg/registry/batch/job: defaults with the generated selector (which names the uid)."""

    status_on_create: dict[str, Any] | None = {}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_job(obj)


class CronJobStrategy(Strategy):
    """pkg/registry/batch/cronjob."""

    status_on_create: dict[str, Any] | None = {}

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_cron_job(obj)


class PodDisruptionBudgetStrategy(Strategy):
    """pkg/registry/policy/poddisruptionbudget."""

    columns = printers.PODDISRUPTIONBUDGETS

    status_on_create: dict[str, Any] | None = {}
    zero_status_fields = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_pod_disruption_budget(obj)
