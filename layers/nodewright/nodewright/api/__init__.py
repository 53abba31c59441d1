"""The Karpenter-compatible API: v1 models, conversion of older manifests, validation, CRDs.

Modules:

- ``api.models``: ``NodePool``, ``NodeClaim``, ``EC2NodeClass`` dataclasses with ``from_dict`` (applies
  Karpenter v1 defaults) and ``to_dict`` (camelCase); ``Requirement(key, operator, values, min_values)``,
  ``Taint``, ``Budget``, ``Condition``, ...; ``load_object(d)`` picks the model from apiVersion/kind.
- ``api.durations``: ``parse_duration("1m30s") -> 90.0`` (``None`` for ``"Never"``), ``format_duration``.
- ``api.labels``: well-known labels, restricted domains, reserved tags, legacy names.
- ``api.convert``: ``convert_document(doc) -> Conversion(documents, findings, partial)`` for v1beta1 and
  v1alpha5 manifests; ``convert_documents(docs)`` also joins moved kubelet settings to their EC2NodeClass.
- ``api.validation``: ``validate_document(doc) -> list[Finding]`` (any version; validates the v1 form),
  ``validate_v1(doc)``; ``api.findings.Finding(path, message, severity)``.
- ``api.manifests``: ``load_files(paths)`` and ``validate_files(paths) -> Report`` for CLIs and the demo.
- ``api.schema`` / ``api.crds``: the OpenAPI schemas and the CRDs under ``crds/`` built from them.

The main names are also reachable as ``nodewright.api.<name>`` (``api.validate_document``,
``api.NodePool``, ...); they are imported on first use so that importing ``nodewright.api.labels``
stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ("NodePool", "NodeClaim", "EC2NodeClass", "Requirement", "Taint", "Budget", "Condition"),
        "models",
    ),
    "load_object": "models",
    **dict.fromkeys(("parse_duration", "format_duration", "DurationError"), "durations"),
    **dict.fromkeys(("Conversion", "convert_document", "convert_documents"), "convert"),
    **dict.fromkeys(("validate_document", "validate_v1", "validate_conversion"), "validation"),
    **dict.fromkeys(("load_files", "validate_files"), "manifests"),
    "Finding": "findings",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
