"""CustomResourceDefinitions for NodePool, NodeClaim, EC2NodeClass and NodeOverlay, built from ``api.schema``.

They hold Karpenter v1.14's whole schema (its fields, defaults, CEL rules, printer columns and
subresources), so a manifest Karpenter v1.14 accepts applies unchanged; ``api.features`` says which
fields Nodewright acts on. NodeOverlay is Karpenter's alpha ``karpenter.sh/v1alpha1`` kind.

The files under ``crds/`` are the output of ``python -m nodewright.api.crds crds/``; a unit test
keeps them equal to what this module builds, so the schema has one source. Only ``v1`` is served
and stored: older manifests are converted before they are applied (``nodewright convert``),
because a CRD serving an old version unconverted silently prunes fields.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

from nodewright.api.schema import SCHEMAS, Schema

_READY = '.status.conditions[?(@.type=="Ready")].status'
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

_DEFINITIONS: list[dict[str, Any]] = [
    {
        "group": "karpenter.sh",
        "kind": "NodePool",
        "plural": "nodepools",
        "singular": "nodepool",
        "shortNames": [],
        "description": "NodePool describes the nodes Nodewright may launch and how it may disrupt them.",
        # Karpenter v1.14's static NodePools: ``kubectl scale nodepool`` writes spec.replicas.
        "subresources": {
            "status": {},
            "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"},
        },
        "columns": [
            {"name": "NodeClass", "type": "string", "jsonPath": ".spec.template.spec.nodeClassRef.name"},
            {"name": "Nodes", "type": "string", "jsonPath": ".status.nodes"},
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "Weight", "type": "integer", "jsonPath": ".spec.weight", "priority": 1},
            {"name": "CPU", "type": "string", "jsonPath": ".status.resources.cpu", "priority": 1},
            {"name": "Memory", "type": "string", "jsonPath": ".status.resources.memory", "priority": 1},
        ],
    },
    {
        "group": "karpenter.sh",
        "kind": "NodeClaim",
        "plural": "nodeclaims",
        "singular": "nodeclaim",
        "shortNames": [],
        "description": "NodeClaim is the request for, and the record of, one launched instance.",
        "columns": [
            {
                "name": "Type",
                "type": "string",
                "jsonPath": ".metadata.labels.node\\.kubernetes\\.io/instance-type",
            },
            {
                "name": "Capacity",
                "type": "string",
                "jsonPath": ".metadata.labels.karpenter\\.sh/capacity-type",
            },
            {
                "name": "Zone",
                "type": "string",
                "jsonPath": ".metadata.labels.topology\\.kubernetes\\.io/zone",
            },
            {"name": "Node", "type": "string", "jsonPath": ".status.nodeName"},
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "ImageID", "type": "string", "jsonPath": ".status.imageID", "priority": 1},
            {"name": "ID", "type": "string", "jsonPath": ".status.providerID", "priority": 1},
            {
                "name": "NodePool",
                "type": "string",
                "jsonPath": ".metadata.labels.karpenter\\.sh/nodepool",
                "priority": 1,
            },
            {"name": "NodeClass", "type": "string", "jsonPath": ".spec.nodeClassRef.name", "priority": 1},
            {
                "name": "Drifted",
                "type": "string",
                "jsonPath": '.status.conditions[?(@.type=="Drifted")].status',
                "priority": 1,
            },
        ],
    },
    {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "plural": "ec2nodeclasses",
        "singular": "ec2nodeclass",
        "shortNames": ["ec2nc", "ec2ncs"],
        "description": (
            "EC2NodeClass: the AWS side of NodePools (AMIs, subnets, security groups, IAM, kubelet)."
        ),
        "columns": [
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "Role", "type": "string", "jsonPath": ".spec.role", "priority": 1},
        ],
    },
    {
        # Karpenter v1.14's NodeOverlay, alpha as there (read only with the stack's nodeOverlay gate).
        "group": "karpenter.sh",
        "version": "v1alpha1",
        "kind": "NodeOverlay",
        "plural": "nodeoverlays",
        "singular": "nodeoverlay",
        "shortNames": ["overlays"],
        "description": (
            "NodeOverlay adjusts the prices and adds extended resources to the instance types the "
            "scheduling simulation sees (the stack's nodeOverlay setting)."
        ),
        "columns": [
            {"name": "Ready", "type": "string", "jsonPath": _READY},
            _AGE,
            {"name": "Weight", "type": "integer", "jsonPath": ".spec.weight", "priority": 1},
        ],
    },
]


def _with_description(schema: Schema, description: str) -> Schema:
    result = copy.deepcopy(schema)
    result["description"] = description
    return result


def build_crd(definition: dict[str, Any]) -> dict[str, Any]:
    """One apiextensions.k8s.io/v1 CRD: cluster-scoped, one version (v1 unless the definition names
    another) served and stored, status subresource."""
    names: dict[str, Any] = {
        "kind": definition["kind"],
        "listKind": f"{definition['kind']}List",
        "plural": definition["plural"],
        "singular": definition["singular"],
        "categories": ["karpenter"],
    }
    if definition["shortNames"]:
        names["shortNames"] = definition["shortNames"]
    schema = SCHEMAS[(definition["group"], definition["kind"])]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{definition['plural']}.{definition['group']}",
            "labels": {"app.kubernetes.io/part-of": "nodewright"},
        },
        "spec": {
            "group": definition["group"],
            "names": names,
            "scope": "Cluster",
            "versions": [
                {
                    "name": definition.get("version", "v1"),
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": definition["columns"],
                    "schema": {"openAPIV3Schema": _with_description(schema, definition["description"])},
                    "subresources": definition.get("subresources", {"status": {}}),
                }
            ],
        },
    }


def build_crds() -> dict[str, dict[str, Any]]:
    """File name (as under ``crds/``) → CRD document."""
    return {f"{d['group']}_{d['plural']}.yaml": build_crd(d) for d in _DEFINITIONS}


def render(crd: dict[str, Any]) -> str:
    return "---\n" + yaml.safe_dump(crd, sort_keys=False, default_flow_style=False, width=120)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m nodewright.api.crds OUTPUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for name, crd in build_crds().items():
        (out / name).write_text(render(crd))
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
