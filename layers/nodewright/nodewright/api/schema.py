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

from nodewright.api.labels import AMI_FAMILIES, AWS_LABELS_ALLOWED_IN_NODEPOOLS, WINDOWS_FAMILIES

Schema = dict[str, Any]

# Go durations as Karpenter's CRDs accept them.
DURATION_PATTERN = r"^([0-9]+(s|m|h))+$"
DURATION_OR_NEVER_PATTERN = r"^(([0-9]+(s|m|h))+|Never)$"
BUDGET_DURATION_PATTERN = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"
BUDGET_NODES_PATTERN = r"^((100|[0-9]{1,2})%|[0-9]+)$"
BUDGET_SCHEDULE_PATTERN = (
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
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


def cel(rule: str, message: str) -> dict[str, str]:
    """One ``x-kubernetes-validations`` rule (kube-apiserver evaluates it at admission)."""
    return {"rule": rule, "message": message}


def validated(schema: Schema, *rules: dict[str, str]) -> Schema:
    """``schema`` with CEL rules (Karpenter v1.14's, with its messages)."""
    return {**schema, "x-kubernetes-validations": list(rules)}


# Karpenter v1.14's label rules for NodePool template labels and requirement keys (its CRDs'
# CEL, generated from ``hack/validation``): the karpenter.sh domain is Karpenter's own except
# capacity-type and nodepool, kubernetes.io/hostname is per node, and karpenter.k8s.aws keys are
# the provider's well-known labels only. Since v1.9 the kubernetes.io and k8s.io domains are not
# restricted (kubernetes-sigs/karpenter#2586): node-role.kubernetes.io/worker is a valid label.
_KARPENTER_SH_ALLOWED = '["karpenter.sh/capacity-type", "karpenter.sh/nodepool"]'
_AWS_ALLOWED = "[" + ", ".join(f'"{k}"' for k in AWS_LABELS_ALLOWED_IN_NODEPOOLS) + "]"


def _label_key_rules(subject: str, *, nodepool: bool) -> list[dict[str, str]]:
    """The CEL of one label key (``subject``: ``self`` for a requirement key, ``x`` inside
    ``self.all(x, ...)`` for a labels map)."""
    rules = [
        (
            f'{subject} in {_KARPENTER_SH_ALLOWED} || !{subject}.find("^([^/]+)").endsWith("karpenter.sh")',
            'label domain "karpenter.sh" is restricted',
        ),
        (f'{subject} != "kubernetes.io/hostname"', 'label "kubernetes.io/hostname" is restricted'),
        (
            f'{subject} in {_AWS_ALLOWED} || !{subject}.find("^([^/]+)").endsWith("karpenter.k8s.aws")',
            'label domain "karpenter.k8s.aws" is restricted',
        ),
    ]
    if nodepool:
        rules.insert(
            1, (f'{subject} != "karpenter.sh/nodepool"', 'label "karpenter.sh/nodepool" is restricted')
        )
    if subject == "self":
        return [cel(rule, message) for rule, message in rules]
    return [cel(f"self.all({subject}, {rule})", message) for rule, message in rules]


TAINT = obj(
    {
        "key": string(minLength=1, pattern=QUALIFIED_NAME_PATTERN),
        "value": string(pattern=QUALIFIED_NAME_PATTERN),
        "effect": string(enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "timeAdded": string(format="date-time"),
    },
    required=["key", "effect"],
)
TAINTS = array(TAINT, **{"x-kubernetes-list-type": "atomic"})

# Karpenter's operators: Kubernetes' six plus Gte and Lte (Karpenter v1.9, kubernetes-sigs/karpenter#2674).
REQUIREMENT_OPERATORS = ["Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


def requirement(*, nodepool: bool) -> Schema:
    return obj(
        {
            "key": validated(
                string(maxLength=316, pattern=QUALIFIED_NAME_PATTERN),
                *_label_key_rules("self", nodepool=nodepool),
            ),
            "operator": string(enum=REQUIREMENT_OPERATORS),
            "values": array(
                string(maxLength=63, pattern=LABEL_VALUE_PATTERN), **{"x-kubernetes-list-type": "atomic"}
            ),
            "minValues": integer(minimum=1, maximum=50),
        },
        required=["key", "operator"],
    )


def requirements(*, nodepool: bool) -> Schema:
    return validated(
        array(requirement(nodepool=nodepool), maxItems=100, **{"x-kubernetes-list-type": "atomic"}),
        cel(
            "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            "requirements with operator 'In' must have a value defined",
        ),
        cel(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || "
            "x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        ),
        cel(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            "requirements with 'minValues' must have at least that many values specified in the "
            "'values' field",
        ),
    )


REQUIREMENT = requirement(nodepool=False)

NODE_CLASS_REF = validated(
    obj(
        {
            "group": validated(string(pattern=r"^[^/]*$"), cel("self != ''", "group may not be empty")),
            "kind": validated(string(), cel("self != ''", "kind may not be empty")),
            "name": validated(string(), cel("self != ''", "name may not be empty")),
        },
        required=["group", "kind", "name"],
    ),
)


def condition(*, strict: bool) -> Schema:
    """A status condition as Karpenter's CRDs hold it: NodePool and EC2NodeClass conditions need a
    reason and a message (``strict``), a NodeClaim's only type, status and transition time."""
    return obj(
        {
            "type": string(
                maxLength=316,
                pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            ),
            "status": string(enum=["True", "False", "Unknown"]),
            "reason": (
                string(maxLength=1024, minLength=1, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
                if strict
                else string(maxLength=1024, pattern=r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$")
            ),
            "message": string(maxLength=32768),
            "lastTransitionTime": string(format="date-time"),
            "observedGeneration": integer(minimum=0, format="int64"),
        },
        required=(
            ["lastTransitionTime", "message", "reason", "status", "type"]
            if strict
            else ["lastTransitionTime", "status", "type"]
        ),
    )


def conditions(*, strict: bool) -> Schema:
    return array(
        condition(strict=strict), **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
    )


CONDITIONS = conditions(strict=True)
NODECLAIM_CONDITIONS = conditions(strict=False)

TERMINATION_GRACE_PERIOD = string(pattern=DURATION_PATTERN)
EXPIRE_AFTER = string(pattern=DURATION_OR_NEVER_PATTERN, default="720h")

NODECLAIM_SPEC = validated(
    obj(
        {
            "taints": TAINTS,
            "startupTaints": TAINTS,
            "requirements": requirements(nodepool=False),
            "resources": obj({"requests": resource_list()}),
            "nodeClassRef": NODE_CLASS_REF,
            "terminationGracePeriod": TERMINATION_GRACE_PERIOD,
            "expireAfter": EXPIRE_AFTER,
        },
        required=["nodeClassRef", "requirements"],
    ),
    cel("self == oldSelf", "spec is immutable"),
)

_TEMPLATE_LABEL_RULES = _label_key_rules("x", nodepool=True)

NODEPOOL_TEMPLATE = obj(
    {
        "metadata": obj(
            {
                "labels": validated(
                    {
                        "type": "object",
                        "additionalProperties": string(maxLength=63, pattern=LABEL_VALUE_PATTERN),
                        "maxProperties": 100,
                        "x-kubernetes-map-type": "atomic",
                    },
                    *_TEMPLATE_LABEL_RULES,
                ),
                "annotations": string_map(**{"x-kubernetes-map-type": "granular"}),
            }
        ),
        "spec": obj(
            {
                "taints": TAINTS,
                "startupTaints": TAINTS,
                "requirements": requirements(nodepool=True),
                "nodeClassRef": validated(
                    NODE_CLASS_REF,
                    cel("self.group == oldSelf.group", "nodeClassRef.group is immutable"),
                    cel("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable"),
                ),
                "terminationGracePeriod": TERMINATION_GRACE_PERIOD,
                "expireAfter": EXPIRE_AFTER,
            },
            required=["nodeClassRef", "requirements"],
        ),
    },
    required=["spec"],
)

BUDGET = obj(
    {
        "nodes": string(pattern=BUDGET_NODES_PATTERN, default="10%"),
        "schedule": string(pattern=BUDGET_SCHEDULE_PATTERN),
        "duration": string(pattern=BUDGET_DURATION_PATTERN),
        "reasons": array(
            string(enum=["Underutilized", "Empty", "Drifted"]),
            maxItems=50,
            **{"x-kubernetes-list-type": "set"},
        ),
    },
    required=["nodes"],
)

DISRUPTION = obj(
    {
        "consolidationPolicy": string(
            enum=["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"], default="WhenEmptyOrUnderutilized"
        ),
        # Karpenter v1.14 requires it inside a given ``disruption``; defaulting it instead (as Nodewright
        # did before) keeps every manifest Karpenter accepts, and the ones that only omit it.
        "consolidateAfter": string(pattern=DURATION_OR_NEVER_PATTERN, default="0s"),
        "budgets": validated(
            array(BUDGET, maxItems=50, default=[{"nodes": "10%"}], **{"x-kubernetes-list-type": "atomic"}),
            cel("self.all(x, has(x.schedule) == has(x.duration))", "'schedule' must be set with 'duration'"),
        ),
    },
    default={"consolidateAfter": "0s"},
)

NODEPOOL = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": validated(
            obj(
                {
                    "template": NODEPOOL_TEMPLATE,
                    "disruption": DISRUPTION,
                    "limits": resource_list(),
                    "weight": integer(minimum=1, maximum=100, format="int32"),
                    "replicas": integer(minimum=0, format="int64"),
                },
                required=["template"],
            ),
            cel(
                "has(self.replicas) == has(oldSelf.replicas)",
                "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                "provisioning modes",
            ),
            cel(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || "
                "(size(self.limits) == 1 && 'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools",
            ),
            cel("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools"),
        ),
        "status": obj(
            {
                "resources": resource_list(),
                "conditions": CONDITIONS,
                "nodeClassObservedGeneration": integer(format="int64"),
                "nodes": integer(format="int64", default=0),
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
                # Nodewright's own (Karpenter reads the instance id from providerID): kept so that a
                # NodeClaim launched by an older Nodewright stays readable.
                "instanceID": string(),
                "imageID": string(),
                "capacity": resource_list(),
                "allocatable": resource_list(),
                "conditions": NODECLAIM_CONDITIONS,
                "lastPodEventTime": string(format="date-time"),
            }
        ),
    },
    required=["spec"],
)

_NON_EMPTY_TAGS = cel("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported")
SELECTOR_TAGS = validated(string_map(maxProperties=20), _NON_EMPTY_TAGS)

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
_SIGNAL_LIST = "[" + ",".join(f"'{s}'" for s in EVICTION_SIGNALS) + "]"
_EVICTION_THRESHOLD = string(
    pattern=r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$"
)


def _eviction_map(name: str, value: Schema) -> Schema:
    return validated(
        {"type": "object", "additionalProperties": value},
        cel(f"self.all(x, x in {_SIGNAL_LIST})", f"valid keys for {name} are {_SIGNAL_LIST}"),
    )


def _reserved(name: str) -> Schema:
    return validated(
        {"type": "object", "additionalProperties": string(pattern=r"^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|Pi|Ei)?$")},
        cel(
            "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')",
            f"valid keys for {name} are ['cpu','memory','ephemeral-storage','pid']",
        ),
        cel("self.all(x, !self[x].startsWith('-'))", f"{name} value cannot be a negative resource quantity"),
    )


# The kubelet settings Nodewright reads and renders into user data. Karpenter v1.14 keeps any other
# field of the upstream KubeletConfiguration too (``x-kubernetes-preserve-unknown-fields``) and passes
# it through to user data; Nodewright accepts and stores one, and says it does not act on it.
KUBELET = validated(
    {
        **obj(
            {
                "clusterDNS": array(string()),
                "maxPods": integer(minimum=0, format="int32"),
                "podsPerCore": integer(minimum=0, format="int32"),
                "systemReserved": _reserved("systemReserved"),
                "kubeReserved": _reserved("kubeReserved"),
                "evictionHard": _eviction_map("evictionHard", _EVICTION_THRESHOLD),
                "evictionSoft": _eviction_map("evictionSoft", _EVICTION_THRESHOLD),
                "evictionSoftGracePeriod": _eviction_map("evictionSoftGracePeriod", string()),
                "evictionMaxPodGracePeriod": integer(format="int32"),
                "imageGCHighThresholdPercent": integer(minimum=0, maximum=100, format="int32"),
                "imageGCLowThresholdPercent": integer(minimum=0, maximum=100, format="int32"),
                "cpuCFSQuota": boolean(),
            }
        ),
        "x-kubernetes-preserve-unknown-fields": True,
    },
    cel(
        "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  "
        "self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
        "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
    ),
    cel(
        "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
        "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
    ),
    cel(
        "has(self.evictionSoftGracePeriod) ? "
        "self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
        "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
    ),
)

VOLUME_SIZE_PATTERN = (
    r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|"
    r"[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
)

EBS = validated(
    obj(
        {
            "deleteOnTermination": boolean(),
            "encrypted": boolean(),
            "iops": integer(format="int64"),
            "kmsKeyID": string(),
            "snapshotID": string(),
            "throughput": integer(format="int64"),
            "volumeInitializationRate": integer(minimum=100, maximum=300, format="int32"),
            "volumeSize": string(pattern=VOLUME_SIZE_PATTERN),
            "volumeType": string(enum=["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]),
        }
    ),
    cel("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"),
    cel(
        "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
        "snapshotID must be set when volumeInitializationRate is set",
    ),
)

_ALIAS_FAMILY_NAMES = "['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']"

AMI_SELECTOR_TERMS = validated(
    array(
        obj(
            {
                "alias": validated(
                    string(maxLength=30),
                    cel(
                        "self.matches('^[a-zA-Z0-9]+@.+$')",
                        "'alias' is improperly formatted, must match the format 'family@version'",
                    ),
                    cel(
                        f"self.split('@')[0] in {_ALIAS_FAMILY_NAMES}",
                        "family is not supported, must be one of the following: 'al2', 'al2023', "
                        "'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
                    ),
                    cel(
                        "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? "
                        "self.split('@')[1] == 'latest' : true",
                        "windows families may only specify version 'latest'",
                    ),
                ),
                "id": string(pattern=r"ami-[0-9a-z]+"),
                "name": string(),
                "owner": string(),
                "ssmParameter": string(),
                "tags": SELECTOR_TAGS,
            }
        ),
        minItems=1,
        maxItems=30,
    ),
    cel(
        "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
        "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
    ),
    cel(
        "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    ),
    cel(
        "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
        "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    ),
    cel(
        "!(self.exists(x, has(x.alias)) && self.size() != 1)",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
    ),
)

SUBNET_SELECTOR_TERMS = validated(
    array(obj({"id": string(pattern=r"subnet-[0-9a-z]+"), "tags": SELECTOR_TAGS}), minItems=1, maxItems=30),
    cel("self.size() != 0", "subnetSelectorTerms cannot be empty"),
    cel("self.all(x, has(x.tags) || has(x.id))", "expected at least one, got none, ['tags', 'id']"),
    cel(
        "!self.all(x, has(x.id) && has(x.tags))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet "
        "selector term",
    ),
)

SECURITY_GROUP_SELECTOR_TERMS = validated(
    array(
        obj({"id": string(pattern=r"sg-[0-9a-z]+"), "name": string(), "tags": SELECTOR_TAGS}),
        minItems=1,
        maxItems=30,
    ),
    cel("self.size() != 0", "securityGroupSelectorTerms cannot be empty"),
    cel(
        "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
        "expected at least one, got none, ['tags', 'id', 'name']",
    ),
    cel(
        "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group "
        "selector term",
    ),
    cel(
        "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
        "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group "
        "selector term",
    ),
)

CAPACITY_RESERVATION_SELECTOR_TERMS = validated(
    array(
        obj(
            {
                "id": string(pattern=r"^cr-[0-9a-z]+$"),
                "instanceMatchCriteria": string(enum=["open", "targeted"]),
                "ownerID": string(pattern=r"^[0-9]{12}$"),
                "tags": SELECTOR_TAGS,
            }
        ),
        maxItems=30,
    ),
    cel(
        "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
        "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
    ),
    cel(
        "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
        "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation "
        "selector term",
    ),
)

NETWORK_INTERFACES = validated(
    array(
        obj(
            {
                "deviceIndex": integer(minimum=0, format="int32"),
                "interfaceType": string(enum=["interface", "efa-only"]),
                "networkCardIndex": integer(minimum=0, format="int32"),
            },
            required=["deviceIndex", "interfaceType", "networkCardIndex"],
        ),
        maxItems=150,
    ),
    cel(
        "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && "
        "x.interfaceType == 'interface')",
        "networkInterfaces must include a primary interface with interfaceType='interface'",
    ),
    cel(
        "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == "
        "y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex "
        "== y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
        "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at "
        "most one efa device per network card",
    ),
)

CONNECTION_TRACKING = validated(
    obj(
        {
            "tcpEstablishedTimeout": integer(minimum=60, maximum=432000, format="int32"),
            "udpStreamTimeout": integer(minimum=60, maximum=180, format="int32"),
            "udpTimeout": integer(minimum=30, maximum=60, format="int32"),
        }
    ),
    cel(
        "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
        "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",
    ),
)

PLACEMENT_GROUP_SELECTOR = validated(
    obj({"id": string(pattern=r"^pg-[0-9a-z]+$"), "name": string(minLength=1)}),
    cel("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
    cel("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
)

_RESTRICTED_TAGS = (
    ("self.all(k, k !='eks:eks-cluster-name')", "eks:eks-cluster-name"),
    ("self.all(k, !k.startsWith('kubernetes.io/cluster') )", "kubernetes.io/cluster/"),
    ("self.all(k, k != 'karpenter.sh/nodepool')", "karpenter.sh/nodepool"),
    ("self.all(k, k !='karpenter.sh/nodeclaim')", "karpenter.sh/nodeclaim"),
    ("self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')", "karpenter.k8s.aws/ec2nodeclass"),
)


def _alias_family_rule(alias: str, family: str) -> dict[str, str]:
    article = "an" if family[0] in "AEIOU" else "a"
    return cel(
        f"!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && "
        f"x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == "
        f"'{family}') : true)",
        f"if set, amiFamily must be '{family}' or 'Custom' when using {article} {family} alias",
    )


EC2NODECLASS_AMI_FAMILIES = [*AMI_FAMILIES, *WINDOWS_FAMILIES]

EC2NODECLASS_SPEC = validated(
    obj(
        {
            "amiFamily": string(enum=EC2NODECLASS_AMI_FAMILIES),
            "amiSelectorTerms": AMI_SELECTOR_TERMS,
            "subnetSelectorTerms": SUBNET_SELECTOR_TERMS,
            "securityGroupSelectorTerms": SECURITY_GROUP_SELECTOR_TERMS,
            "capacityReservationSelectorTerms": CAPACITY_RESERVATION_SELECTOR_TERMS,
            "associatePublicIPAddress": boolean(),
            "ipPrefixCount": integer(minimum=0, format="int32"),
            "networkInterfaces": NETWORK_INTERFACES,
            "connectionTracking": CONNECTION_TRACKING,
            "placementGroupSelector": PLACEMENT_GROUP_SELECTOR,
            "cpuOptions": obj({"nestedVirtualization": string(enum=["enabled", "disabled"])}),
            "enclaveOptions": obj({"enabled": boolean()}),
            "role": validated(string(), cel("self != ''", "role cannot be empty")),
            "instanceProfile": validated(string(), cel("self != ''", "instanceProfile cannot be empty")),
            "userData": string(),
            "tags": validated(
                string_map(),
                cel("self.all(k, k != '')", "empty tag keys aren't supported"),
                *(
                    cel(rule, f"tag contains a restricted tag matching {tag}")
                    for rule, tag in _RESTRICTED_TAGS
                ),
            ),
            "blockDeviceMappings": validated(
                array(
                    obj({"deviceName": string(), "ebs": EBS, "rootVolume": boolean()}),
                    maxItems=50,
                ),
                cel(
                    "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
                    "must have only one blockDeviceMappings with rootVolume",
                ),
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
    ),
    cel(
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    *(
        _alias_family_rule(alias, family)
        for alias, family in (
            ("al2", "AL2"),
            ("al2023", "AL2023"),
            ("bottlerocket", "Bottlerocket"),
            ("windows2019", "Windows2019"),
            ("windows2022", "Windows2022"),
            ("windows2025", "Windows2025"),
        )
    ),
    cel(
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ),
)

EC2NODECLASS = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": EC2NODECLASS_SPEC,
        "status": obj(
            {
                "subnets": array(
                    obj({"id": string(), "zone": string(), "zoneID": string()}, required=["id", "zone"])
                ),
                "securityGroups": array(obj({"id": string(), "name": string()}, required=["id"])),
                "amis": array(
                    obj(
                        {
                            "id": string(),
                            "name": string(),
                            "deprecated": boolean(),
                            "requirements": array(
                                obj(
                                    {
                                        "key": string(),
                                        "operator": string(),
                                        "values": array(string(), **{"x-kubernetes-list-type": "atomic"}),
                                    },
                                    required=["key", "operator"],
                                )
                            ),
                        },
                        required=["id", "requirements"],
                    )
                ),
                "capacityReservations": array(
                    obj(
                        {
                            "availabilityZone": string(),
                            "endTime": string(format="date-time"),
                            "id": string(pattern=r"^cr-[0-9a-z]+$"),
                            "instanceMatchCriteria": string(enum=["open", "targeted"]),
                            "instanceType": string(),
                            "interruptible": boolean(),
                            "ownerID": string(pattern=r"^[0-9]{12}$"),
                            "reservationType": string(enum=["default", "capacity-block"], default="default"),
                            "state": string(enum=["active", "expiring"], default="active"),
                        },
                        required=[
                            "availabilityZone",
                            "id",
                            "instanceMatchCriteria",
                            "instanceType",
                            "ownerID",
                        ],
                    )
                ),
                "instanceProfile": string(),
                "conditions": CONDITIONS,
            }
        ),
    },
    required=["spec"],
)

# Karpenter v1.14's NodeOverlay (karpenter.sh/v1alpha1, ``pkg/apis/v1alpha1/nodeoverlay.go``): which
# instance types its requirements select, an absolute ``price`` or a ``priceAdjustment`` (signed
# absolute, +N% or -N% down to -100%), extended resources added to their capacity, a weight.
OVERLAY_PRICE_PATTERN = r"^\d+(\.\d+)?$"
OVERLAY_PRICE_ADJUSTMENT_PATTERN = (
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
)
# The resources an overlay's capacity may not name (it adds extended resources only).
OVERLAY_RESTRICTED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")

NODEOVERLAY_REQUIREMENT = obj(
    {
        "key": validated(
            string(maxLength=316, pattern=QUALIFIED_NAME_PATTERN),
            *_label_key_rules("self", nodepool=False)[:2],  # karpenter.sh and kubernetes.io/hostname
        ),
        "operator": string(enum=REQUIREMENT_OPERATORS),
        "values": array(
            string(maxLength=63, pattern=LABEL_VALUE_PATTERN), **{"x-kubernetes-list-type": "atomic"}
        ),
    },
    required=["key", "operator"],
)

NODEOVERLAY = obj(
    {
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": validated(
            obj(
                {
                    "requirements": validated(
                        array(NODEOVERLAY_REQUIREMENT, maxItems=100),
                        cel(
                            "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
                            "requirements with operator 'NotIn' must have a value defined",
                        ),
                        cel(
                            "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
                            "requirements with operator 'In' must have a value defined",
                        ),
                        cel(
                            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || "
                            "x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                            "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive "
                            "integer value",
                        ),
                    ),
                    "priceAdjustment": string(pattern=OVERLAY_PRICE_ADJUSTMENT_PATTERN),
                    "price": string(pattern=OVERLAY_PRICE_PATTERN),
                    "capacity": validated(
                        resource_list(),
                        cel(
                            "self.all(x, !(x in ["
                            + ", ".join(f"'{r}'" for r in OVERLAY_RESTRICTED_RESOURCES)
                            + "]))",
                            "invalid resource restricted",
                        ),
                    ),
                    "weight": integer(minimum=1, maximum=10000, format="int32"),
                },
                required=["requirements"],
            ),
            cel(
                "!has(self.price) || !has(self.priceAdjustment)",
                "cannot set both 'price' and 'priceAdjustment'",
            ),
        ),
        "status": obj({"conditions": CONDITIONS}),
    },
    required=["spec"],
)

SCHEMAS: dict[tuple[str, str], Schema] = {
    ("karpenter.sh", "NodePool"): NODEPOOL,
    ("karpenter.sh", "NodeClaim"): NODECLAIM,
    ("karpenter.k8s.aws", "EC2NodeClass"): EC2NODECLASS,
    ("karpenter.sh", "NodeOverlay"): NODEOVERLAY,
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

# v1beta1 had Kubernetes' six operators only (Gte and Lte came with Karpenter v1.9's v1).
V1BETA1_REQUIREMENT = obj(
    {
        **REQUIREMENT["properties"],
        "operator": string(enum=["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    },
    required=["key", "operator"],
)
# The EC2NodeClass fields v1beta1 had (the later v1 fields are not served through v1beta1).
V1BETA1_EC2NODECLASS_FIELDS = (
    "amiFamily",
    "amiSelectorTerms",
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "associatePublicIPAddress",
    "role",
    "instanceProfile",
    "userData",
    "tags",
    "blockDeviceMappings",
    "instanceStorePolicy",
    "detailedMonitoring",
    "metadataOptions",
    "context",
)

V1BETA1_NODECLAIM_SPEC = obj(
    {
        "taints": array(TAINT),
        "startupTaints": array(TAINT),
        "requirements": array(V1BETA1_REQUIREMENT, maxItems=100),
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
                **{k: EC2NODECLASS_SPEC["properties"][k] for k in V1BETA1_EC2NODECLASS_FIELDS},
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
