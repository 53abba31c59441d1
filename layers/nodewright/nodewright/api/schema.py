"""OpenAPI v3 schemas of the v1 kinds: the one source for the CRDs and for unknown-field checks.

``SCHEMAS[(group, kind)]`` is the structural schema of a whole object (``spec`` and
``status``), in the form the API server takes in a CRD. ``api.crds`` wraps them into
CustomResourceDefinitions (the files under ``crds/``), and ``api.validation`` walks a
document against them to report unknown fields, wrong types, enums and required fields.
Value rules that need a better message than a pattern gives (durations, cron, label
domains, ...) live in ``api.validation``; the patterns here are what the API server
enforces on its own when a manifest is applied with kubectl.
"""

from __future__ import annotations

from typing import Any

from nodewright.api.labels import AMI_FAMILIES

Schema = dict[str, Any]

# Go durations as Karpenter's CRDs accept them.
DURATION_PATTERN = r"^([0-9]+(s|m|h))+$"
DURATION_OR_NEVER_PATTERN = r"^(([0-9]+(s|m|h))+|Never)$"
BUDGET_DURATION_PATTERN = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
BUDGET_NODES_PATTERN = r"^((100|[0-9]{1,2})%|[0-9]+)$"
# What Kubernetes enforces on label keys (qualified names) and values; Karpenter's CRDs give taint
# keys the same key pattern. Taint values follow Kubernetes' own rule for them (a label value).
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def string(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def integer(**extra: Any) -> Schema:
    return {"type": "integer", **extra}


def boolean(**extra: Any) -> Schema:
    return {"type": "boolean", **extra}


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def obj(properties: dict[str, Schema], required: list[str] | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, **extra}
    if required:
        schema["required"] = required
    return schema


def string_map(**extra: Any) -> Schema:
    return {"type": "object", "additionalProperties": {"type": "string"}, **extra}


def quantity() -> Schema:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def resource_list() -> Schema:
    return {"type": "object", "additionalProperties": quantity()}


TAINT = obj(
    {
        "key": string(minLength=1, maxLength=316, pattern=QUALIFIED_NAME_PATTERN),
        "value": string(maxLength=63, pattern=LABEL_VALUE_PATTERN),
        "effect": string(enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "timeAdded": string(format="date-time"),
    },
    required=["key", "effect"],
)

REQUIREMENT = obj(
    {
        "key": string(maxLength=316),
        "operator": string(enum=["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
        "values": array(string(), **{"x-kubernetes-list-type": "atomic"}),
        "minValues": integer(minimum=1, maximum=50),
    },
    required=["key", "operator"],
)

NODE_CLASS_REF = obj(
    {"group": string(minLength=1), "kind": string(minLength=1), "name": string(minLength=1)},
    required=["group", "kind", "name"],
)

CONDITION = obj(
    {
        "type": string(maxLength=316),
        "status": string(enum=["True", "False", "Unknown"]),
        "reason": string(maxLength=1024),
        "message": string(maxLength=32768),
        "lastTransitionTime": string(format="date-time"),
        "observedGeneration": integer(minimum=0),
    },
    required=["type", "status"],
)

CONDITIONS = array(CONDITION)

NODECLAIM_SPEC = obj(
    {
        "taints": array(TAINT),
        "startupTaints": array(TAINT),
        "requirements": array(REQUIREMENT, maxItems=100),
        "resources": obj({"requests": resource_list()}),
        "nodeClassRef": NODE_CLASS_REF,
        "terminationGracePeriod": string(pattern=DURATION_PATTERN),
        "expireAfter": string(pattern=DURATION_OR_NEVER_PATTERN, default="720h"),
    },
    required=["nodeClassRef", "requirements"],
)

NODEPOOL_TEMPLATE = obj(
    {
        "metadata": obj(
            {
                "labels": {
                    "type": "object",
                    "additionalProperties": string(maxLength=63, pattern=LABEL_VALUE_PATTERN),
                    "maxProperties": 100,
                },
                "annotations": string_map(),
            }
        ),
        "spec": obj(
            {k: v for k, v in NODECLAIM_SPEC["properties"].items() if k != "resources"},
            required=["nodeClassRef", "requirements"],
        ),
    },
    required=["spec"],
)

BUDGET = obj(
    {
        "nodes": string(pattern=BUDGET_NODES_PATTERN, default="10%"),
        "schedule": string(),
        "duration": string(pattern=BUDGET_DURATION_PATTERN),
        "reasons": array(string(enum=["Underutilized", "Empty", "Drifted"])),
    },
    required=["nodes"],
)

DISRUPTION = obj(
    {
        "consolidationPolicy": string(
            enum=["WhenEmpty", "WhenEmptyOrUnderutilized"], default="WhenEmptyOrUnderutilized"
        ),
        "consolidateAfter": string(pattern=DURATION_OR_NEVER_PATTERN, default="0s"),
        "budgets": array(BUDGET, maxItems=50, default=[{"nodes": "10%"}]),
    },
    default={"consolidateAfter": "0s"},
)

NODEPOOL = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "template": NODEPOOL_TEMPLATE,
                "disruption": DISRUPTION,
                "limits": resource_list(),
                "weight": integer(minimum=1, maximum=100, format="int32"),
            },
            required=["template"],
        ),
        "status": obj(
            {
                "resources": resource_list(),
                "conditions": CONDITIONS,
                "nodeClassObservedGeneration": integer(format="int64"),
            }
        ),
    },
    required=["spec"],
)

NODECLAIM = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": NODECLAIM_SPEC,
        "status": obj(
            {
                "nodeName": string(),
                "providerID": string(),
                "instanceID": string(),
                "imageID": string(),
                "capacity": resource_list(),
                "allocatable": resource_list(),
                "conditions": CONDITIONS,
                "lastPodEventTime": string(format="date-time"),
            }
        ),
    },
    required=["spec"],
)

SELECTOR_TAGS = string_map(maxProperties=20)

KUBELET = obj(
    {
        "clusterDNS": array(string()),
        "maxPods": integer(minimum=0, format="int32"),
        "podsPerCore": integer(minimum=0, format="int32"),
        "systemReserved": string_map(),
        "kubeReserved": string_map(),
        "evictionHard": string_map(),
        "evictionSoft": string_map(),
        "evictionSoftGracePeriod": string_map(),
        "evictionMaxPodGracePeriod": integer(format="int32"),
        "imageGCHighThresholdPercent": integer(minimum=0, maximum=100, format="int32"),
        "imageGCLowThresholdPercent": integer(minimum=0, maximum=100, format="int32"),
        "cpuCFSQuota": boolean(),
    }
)

EBS = obj(
    {
        "deleteOnTermination": boolean(),
        "encrypted": boolean(),
        "iops": integer(format="int64"),
        "kmsKeyID": string(),
        "snapshotID": string(),
        "throughput": integer(format="int64"),
        "volumeSize": quantity(),
        "volumeType": string(enum=["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]),
    }
)

EC2NODECLASS_SPEC = obj(
    {
        "amiFamily": string(enum=list(AMI_FAMILIES)),
        "amiSelectorTerms": array(
            obj(
                {
                    "alias": string(maxLength=30, pattern=r"^[a-zA-Z0-9]+@.+$"),
                    "id": string(pattern=r"^ami-[0-9a-z]+$"),
                    "name": string(),
                    "owner": string(),
                    "tags": SELECTOR_TAGS,
                    "ssmParameter": string(),
                }
            ),
            minItems=1,
            maxItems=30,
        ),
        "subnetSelectorTerms": array(
            obj({"id": string(pattern=r"^subnet-[0-9a-z]+$"), "tags": SELECTOR_TAGS}),
            minItems=1,
            maxItems=30,
        ),
        "securityGroupSelectorTerms": array(
            obj({"id": string(pattern=r"^sg-[0-9a-z]+$"), "name": string(), "tags": SELECTOR_TAGS}),
            minItems=1,
            maxItems=30,
        ),
        "associatePublicIPAddress": boolean(),
        "role": string(),
        "instanceProfile": string(),
        "userData": string(),
        "tags": string_map(),
        "blockDeviceMappings": array(
            obj({"deviceName": string(), "ebs": EBS, "rootVolume": boolean()}),
            maxItems=50,
        ),
        "instanceStorePolicy": string(enum=["RAID0"]),
        "detailedMonitoring": boolean(),
        "metadataOptions": obj(
            {
                "httpEndpoint": string(enum=["enabled", "disabled"], default="enabled"),
                "httpProtocolIPv6": string(enum=["enabled", "disabled"], default="disabled"),
                "httpPutResponseHopLimit": integer(minimum=1, maximum=64, default=1, format="int64"),
                "httpTokens": string(enum=["required", "optional"], default="required"),
            },
            default={
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
        ),
        "kubelet": KUBELET,
        "context": string(),
    },
    required=["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"],
)

EC2NODECLASS = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": EC2NODECLASS_SPEC,
        "status": obj(
            {
                "subnets": array(obj({"id": string(), "zone": string(), "zoneID": string()})),
                "securityGroups": array(obj({"id": string(), "name": string()})),
                "amis": array(
                    obj(
                        {
                            "id": string(),
                            "name": string(),
                            "deprecated": boolean(),
                            "requirements": array(REQUIREMENT),
                        }
                    )
                ),
                "instanceProfile": string(),
                "conditions": CONDITIONS,
            }
        ),
    },
    required=["spec"],
)

SCHEMAS: dict[tuple[str, str], Schema] = {
    ("karpenter.sh", "NodePool"): NODEPOOL,
    ("karpenter.sh", "NodeClaim"): NODECLAIM,
    ("karpenter.k8s.aws", "EC2NodeClass"): EC2NODECLASS,
}


# --------------------------------------------------------------------------- v1beta1
# The v1beta1 kinds as Karpenter v0.33 to v0.37 served them: what a CRD serving v1beta1 next to v1
# (through the conversion webhook, ``api.webhooks.with_conversion``) validates and prunes a
# v1beta1 request and a v1beta1 read against. What a v1 object holds that these cannot carry,
# ``api.conversion_review`` keeps in an annotation of the v1beta1 form, whatever the field.

V1BETA1_NODE_CLASS_REF = obj(
    {"apiVersion": string(), "kind": string(), "name": string(minLength=1)}, required=["name"]
)

V1BETA1_KUBELET = obj({**KUBELET["properties"], "containerRuntime": string(enum=["containerd", "dockerd"])})

V1BETA1_NODECLAIM_SPEC = obj(
    {
        "taints": array(TAINT),
        "startupTaints": array(TAINT),
        "requirements": array(REQUIREMENT, maxItems=100),
        "resources": obj({"requests": resource_list()}),
        "kubelet": V1BETA1_KUBELET,
        "nodeClassRef": V1BETA1_NODE_CLASS_REF,
    },
    required=["nodeClassRef", "requirements"],
)

V1BETA1_NODEPOOL = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "template": obj(
                    {
                        "metadata": NODEPOOL_TEMPLATE["properties"]["metadata"],
                        "spec": obj(
                            {
                                k: v
                                for k, v in V1BETA1_NODECLAIM_SPEC["properties"].items()
                                if k != "resources"
                            },
                            required=["nodeClassRef", "requirements"],
                        ),
                    },
                    required=["spec"],
                ),
                "disruption": obj(
                    {
                        "consolidationPolicy": string(enum=["WhenEmpty", "WhenUnderutilized"]),
                        "consolidateAfter": string(pattern=DURATION_OR_NEVER_PATTERN),
                        "expireAfter": string(pattern=DURATION_OR_NEVER_PATTERN),
                        "budgets": array(
                            obj(
                                {
                                    "nodes": string(pattern=BUDGET_NODES_PATTERN),
                                    "schedule": string(),
                                    "duration": string(pattern=BUDGET_DURATION_PATTERN),
                                },
                                required=["nodes"],
                            ),
                            maxItems=50,
                        ),
                    }
                ),
                "limits": resource_list(),
                "weight": integer(minimum=1, maximum=100, format="int32"),
            },
            required=["template"],
        ),
        "status": obj({"resources": resource_list(), "conditions": CONDITIONS}),
    },
    required=["spec"],
)

V1BETA1_NODECLAIM = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": V1BETA1_NODECLAIM_SPEC,
        "status": NODECLAIM["properties"]["status"],
    },
    required=["spec"],
)

# Karpenter's v1beta1 EC2NodeClass defaulted the hop limit to 2 (v1 to 1): a v1beta1 manifest without
# it is defaulted as v1beta1 before the webhook converts it, so it keeps 2 in v1, as under Karpenter.
V1BETA1_HOP_LIMIT_DEFAULT = 2
V1BETA1_METADATA_OPTIONS = obj(
    {
        **EC2NODECLASS_SPEC["properties"]["metadataOptions"]["properties"],
        "httpPutResponseHopLimit": integer(
            minimum=1, maximum=64, default=V1BETA1_HOP_LIMIT_DEFAULT, format="int64"
        ),
    },
    default={
        **EC2NODECLASS_SPEC["properties"]["metadataOptions"]["default"],
        "httpPutResponseHopLimit": V1BETA1_HOP_LIMIT_DEFAULT,
    },
)

V1BETA1_EC2NODECLASS = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": obj(
            {
                **{k: v for k, v in EC2NODECLASS_SPEC["properties"].items() if k != "kubelet"},
                "metadataOptions": V1BETA1_METADATA_OPTIONS,
                "amiFamily": string(enum=[*AMI_FAMILIES, "Ubuntu", "Windows2019", "Windows2022"]),
                "amiSelectorTerms": array(
                    obj(
                        {
                            "id": string(pattern=r"^ami-[0-9a-z]+$"),
                            "name": string(),
                            "owner": string(),
                            "tags": SELECTOR_TAGS,
                        }
                    ),
                    maxItems=30,
                ),
            },
            required=["securityGroupSelectorTerms", "subnetSelectorTerms"],
        ),
        "status": EC2NODECLASS["properties"]["status"],
    },
    required=["spec"],
)

SCHEMAS_V1BETA1: dict[tuple[str, str], Schema] = {
    ("karpenter.sh", "NodePool"): V1BETA1_NODEPOOL,
    ("karpenter.sh", "NodeClaim"): V1BETA1_NODECLAIM,
    ("karpenter.k8s.aws", "EC2NodeClass"): V1BETA1_EC2NODECLASS,
}
