"""Volumes: PersistentVolumes and claims (``pkg/registry/core/persistentvolume*``) and the
storage.k8s.io kinds (``pkg/registry/storage/*``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import admission, selectors
from ..errors import FieldError
from ..resources import ResourceType
from .base import Strategy

if TYPE_CHECKING:
    from ..handlers import ResourceHandlers


class StorageProtectedStrategy(Strategy):
    """PersistentVolumes and claims: they start Pending, and the StorageObjectInUseProtection
    admission plugin gives each its protection finalizer, which its controller lets go."""

    status_on_create = {"phase": "Pending"}
    protection_finalizer = ""

    def admit_create(self, handlers: ResourceHandlers, rt: ResourceType, obj: dict[str, Any]) -> None:
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if self.protection_finalizer not in finalizers:
            finalizers.append(self.protection_finalizer)


class PersistentVolumeStrategy(StorageProtectedStrategy):
    """pkg/registry/core/persistentvolume."""

    protection_finalizer = "kubernetes.io/pv-protection"

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_persistent_volume(obj)


class PersistentVolumeClaimStrategy(StorageProtectedStrategy):
    """pkg/registry/core/persistentvolumeclaim."""

    protection_finalizer = "kubernetes.io/pvc-protection"
    field_labels = selectors.PHASE_FIELDS

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_persistent_volume_claim(obj)


class StorageClassStrategy(Strategy):
    """pkg/registry/storage/storageclass (its store returns the deleted object)."""

    return_deleted_object = True

    def apply_defaults(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        admission.default_storage_class(obj)

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_storage_class(obj)


class VolumeAttachmentStrategy(Strategy):
    """pkg/registry/storage/volumeattachment."""

    def validate(self, rt: ResourceType, obj: dict[str, Any]) -> list[FieldError]:
        return super().validate(rt, obj) + admission.validate_volume_attachment(obj)
