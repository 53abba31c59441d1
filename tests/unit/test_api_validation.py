"""Validation: one bad input per rule, asserting the message names the path and what to do."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nodewright.api.convert import convert_documents
from nodewright.api.validation import validate_document, validate_v1


def nodepool(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "np"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                }
            }
        },
    }
    for dotted, value in changes.items():
        target = doc
        *parents, last = dotted.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        target[last] = value
    return doc


def nodeclass(**spec: Any) -> dict[str, Any]:
    base = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "KarpenterNodeRole",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": {k: v for k, v in base.items() if v is not None},
    }


def errors(doc: dict[str, Any]) -> list[str]:
    return [str(f) for f in validate_document(doc) if f.severity == "error"]


def warnings(doc: dict[str, Any]) -> list[str]:
    return [str(f) for f in validate_document(doc) if f.severity == "warning"]


def req(**fields: Any) -> list[dict[str, Any]]:
    return [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], **fields}]


def test_valid_nodepool_and_nodeclass_have_no_findings() -> None:
    assert validate_document(nodepool()) == []
    assert validate_document(nodeclass()) == []


def test_unknown_field_names_the_path_and_suggests_the_close_name() -> None:
    assert errors(nodepool(spec__wieght=5)) == ["spec.wieght: unknown field; did you mean weight?"]


def test_weight_inside_a_requirement_points_to_nodepool_weight() -> None:
    doc = nodepool(spec__template__spec__requirements=req(weight=10))
    (message,) = errors(doc)
    assert message.startswith(
        "spec.template.spec.requirements[0].weight: unknown field; weight is a NodePool field (spec.weight)"
    )


def test_kubelet_in_a_v1_nodepool_points_to_the_ec2nodeclass() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 10}
    assert errors(doc) == [
        "spec.template.spec.kubelet: unknown field; v1 keeps kubelet settings in the EC2NodeClass "
        "(spec.kubelet of the class named by nodeClassRef)"
    ]


def test_wrong_type_is_reported() -> None:
    assert errors(nodepool(spec__weight="high")) == [
        "spec.weight: Invalid value: 'high': must be integer, not string"
    ]


def test_weight_bounds() -> None:
    assert errors(nodepool(spec__weight=0)) == [
        "spec.weight: Invalid value: 0: must be greater than or equal to 1"
    ]
    assert errors(nodepool(spec__weight=101)) == [
        "spec.weight: Invalid value: 101: must be less than or equal to 100"
    ]


def test_missing_node_class_ref_is_required() -> None:
    doc = nodepool()
    del doc["spec"]["template"]["spec"]["nodeClassRef"]
    assert errors(doc) == [
        "spec.template.spec.nodeClassRef: Required value: name the EC2NodeClass: "
        "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: <name>}"
    ]


def test_missing_selector_terms_say_what_to_give() -> None:
    doc = nodeclass(subnetSelectorTerms=None, amiSelectorTerms=None, amiFamily="AL2023")
    assert errors(doc) == [
        "spec.amiSelectorTerms: Required value: give [{alias: al2023@latest}] (or bottlerocket@latest, "
        "al2@latest), or AMI ids/tags",
        "spec.subnetSelectorTerms: Required value: select the subnets, e.g. "
        "[{tags: {karpenter.sh/discovery: <cluster name>}}]",
    ]


def test_node_class_ref_must_name_an_ec2nodeclass() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = "AKSNodeClass"
    assert errors(doc) == [
        "spec.template.spec.nodeClassRef.kind: Unsupported value: 'AKSNodeClass': use EC2NodeClass"
    ]


def test_missing_name_is_required() -> None:
    doc = nodepool()
    doc["metadata"] = {}
    assert "metadata.name: Required value: give the object a name" in errors(doc)


def test_unsupported_operator() -> None:
    (message,) = errors(nodepool(spec__template__spec__requirements=req(operator="Equals")))
    assert message.startswith('spec.template.spec.requirements[0].operator: Unsupported value: "Equals"')


def test_in_needs_values() -> None:
    assert errors(nodepool(spec__template__spec__requirements=req(values=[]))) == [
        "spec.template.spec.requirements[0].values: Required value: operator In needs at least one value"
    ]


@pytest.mark.parametrize("operator", ["Exists", "DoesNotExist"])
def test_exists_takes_no_values(operator: str) -> None:
    assert errors(nodepool(spec__template__spec__requirements=req(operator=operator))) == [
        f"spec.template.spec.requirements[0].values: Forbidden: operator {operator} takes no values; "
        "remove them"
    ]


@pytest.mark.parametrize("values", [["1", "2"], ["x"], ["1.5"]])
def test_gt_lt_take_one_integer(values: list[str]) -> None:
    doc = nodepool(
        spec__template__spec__requirements=[
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": values}
        ]
    )
    (message,) = errors(doc)
    assert "operator Gt takes exactly one non-negative integer" in message
    assert message.startswith("spec.template.spec.requirements[0].values:")


def test_min_values_above_the_values_listed() -> None:
    assert errors(nodepool(spec__template__spec__requirements=req(minValues=3))) == [
        "spec.template.spec.requirements[0].minValues: Invalid value: 3: more than the 1 value(s) listed; "
        "list at least 3 values or lower minValues"
    ]


def test_min_values_range() -> None:
    (message,) = errors(nodepool(spec__template__spec__requirements=req(minValues=51, values=["spot"] * 51)))
    assert (
        message
        == "spec.template.spec.requirements[0].minValues: Invalid value: 51: must be less than or equal to 50"
    )


def test_at_most_100_requirements() -> None:
    many = [{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(101)]
    assert errors(nodepool(spec__template__spec__requirements=many)) == [
        "spec.template.spec.requirements: Too many: 101: must have at most 100 items"
    ]


@pytest.mark.parametrize("key", ["karpenter.sh/custom", "karpenter.k8s.aws/custom", "kubernetes.io/hostname"])
def test_restricted_label_domains_in_requirements(key: str) -> None:
    (message,) = errors(nodepool(spec__template__spec__requirements=[{"key": key, "operator": "Exists"}]))
    assert message.startswith("spec.template.spec.requirements[0].key: Invalid value: label")
    assert "restricted" in message


@pytest.mark.parametrize(
    "key", ["node-role.kubernetes.io/worker", "kubernetes.io/role", "example.k8s.io/team", "kops.k8s.io/ig"]
)
def test_kubernetes_io_and_k8s_io_labels_are_allowed_since_karpenter_1_9(key: str) -> None:
    doc = nodepool(
        spec__template__metadata={"labels": {key: "x"}},
        spec__template__spec__requirements=[{"key": key, "operator": "In", "values": ["x"]}],
    )
    assert errors(doc) == []


def test_nodepool_label_cannot_be_set() -> None:
    (message,) = errors(nodepool(spec__template__metadata={"labels": {"karpenter.sh/nodepool": "x"}}))
    assert message.startswith("spec.template.metadata.labels[karpenter.sh/nodepool]: Invalid value: label ")
    assert "Nodewright sets it to the NodePool's name" in message


def test_nodepool_requirement_is_refused_in_a_nodepool_but_fine_in_a_nodeclaim() -> None:
    key = {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["np"]}
    (message,) = errors(nodepool(spec__template__spec__requirements=[key]))
    assert "label karpenter.sh/nodepool is restricted" in message
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c"},
        "spec": {
            "requirements": [key],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "nc"},
        },
    }
    assert validate_document(claim) == []


def test_hostname_cannot_be_required() -> None:
    doc = nodepool(
        spec__template__spec__requirements=[
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}
        ]
    )
    (message,) = errors(doc)
    assert message == (
        "spec.template.spec.requirements[0].key: Invalid value: label kubernetes.io/hostname is restricted: "
        "each node gets its own value, so a NodePool cannot choose it"
    )


def test_allowed_subdomain_and_custom_labels_pass() -> None:
    labels = {"node.kubernetes.io/role": "x", "team": "a", "example.com/owner": "me"}
    assert errors(nodepool(spec__template__metadata={"labels": labels})) == []


def test_invalid_label_value() -> None:
    (message,) = errors(nodepool(spec__template__metadata={"labels": {"team": "has space"}}))
    assert message.startswith(
        "spec.template.metadata.labels[team]: Invalid value: 'has space' is not a valid label"
    )


def test_misspelt_well_known_label_warns_with_the_intended_key() -> None:
    doc = nodepool(
        spec__template__spec__requirements=[
            {"key": "node.kubernetes.io/instance-type47", "operator": "In", "values": ["t3.large"]}
        ]
    )
    assert errors(doc) == []
    assert warnings(doc) == [
        "spec.template.spec.requirements[0].key: node.kubernetes.io/instance-type47 is not a "
        "well-known label: "
        "no instance type will carry it, so no node can satisfy this requirement; "
        "did you mean node.kubernetes.io/instance-type?"
    ]


def test_typo_of_well_known_label_is_a_warning_naming_the_intended_key() -> None:
    doc = nodepool(
        spec__template__spec__requirements=[{"key": "topology.kubernetes.io/zon", "operator": "Exists"}]
    )
    assert errors(doc) == []  # the kubernetes.io domain is a user's since Karpenter v1.9
    (message,) = warnings(doc)
    assert message.endswith("did you mean topology.kubernetes.io/zone?")


def test_custom_requirement_key_matching_a_template_label_does_not_warn() -> None:
    doc = nodepool(
        spec__template__metadata={"labels": {"workload": "gpu"}},
        spec__template__spec__requirements=[{"key": "workload", "operator": "In", "values": ["gpu"]}],
    )
    assert validate_document(doc) == []


def test_taint_effect() -> None:
    doc = nodepool(spec__template__spec__taints=[{"key": "a", "effect": "NoWay"}])
    (message,) = errors(doc)
    assert message == (
        'spec.template.spec.taints[0].effect: Unsupported value: "NoWay": supported values: '
        '"NoSchedule", "PreferNoSchedule", "NoExecute"'
    )


def test_duplicate_taint() -> None:
    taint = {"key": "a", "effect": "NoSchedule"}
    assert errors(nodepool(spec__template__spec__startupTaints=[taint, dict(taint)])) == [
        "spec.template.spec.startupTaints[1]: Duplicate value: taint a:NoSchedule is listed twice"
    ]


@pytest.mark.parametrize(
    ("field", "value", "never"),
    [
        ("spec__template__spec__expireAfter", "30d", True),
        ("spec__template__spec__terminationGracePeriod", "Never", False),
        ("spec__disruption__consolidateAfter", "5 minutes", True),
    ],
)
def test_duration_syntax(field: str, value: str, never: bool) -> None:
    (message,) = errors(nodepool(**{field: value}))
    path = field.replace("__", ".")
    hint = " or Never" if never else ""
    assert (
        message
        == f"{path}: Invalid value: {value!r}: give a duration with units h, m, s (e.g. 720h, 1m30s){hint}"
    )


def test_never_is_accepted_where_allowed() -> None:
    doc = nodepool(spec__template__spec__expireAfter="Never", spec__disruption__consolidateAfter="Never")
    assert validate_document(doc) == []


def test_consolidation_policy_enum() -> None:
    (message,) = errors(nodepool(spec__disruption__consolidationPolicy="WhenUnderutilized"))
    assert message.startswith('spec.disruption.consolidationPolicy: Unsupported value: "WhenUnderutilized"')


def test_budget_cron_syntax() -> None:
    doc = nodepool(spec__disruption__budgets=[{"nodes": "0", "schedule": "every day", "duration": "8h"}])
    (message,) = errors(doc)
    assert message.startswith(
        "spec.disruption.budgets[0].schedule: Invalid value: 'every day': give a cron schedule"
    )


def test_budget_schedule_needs_duration() -> None:
    doc = nodepool(spec__disruption__budgets=[{"nodes": "0", "schedule": "@daily"}])
    (message,) = errors(doc)
    assert message.startswith(
        "spec.disruption.budgets[0].duration: Required value: schedule and duration go together"
    )


def test_budget_nodes_and_duration_forms() -> None:
    doc = nodepool(
        spec__disruption__budgets=[{"nodes": "150%", "schedule": "0 9 * * mon-fri", "duration": "30s"}],
    )
    assert errors(doc) == [
        "spec.disruption.budgets[0].nodes: Invalid value: '150%': give a node count (5) or a "
        "percentage 0-100% (10%)",
        "spec.disruption.budgets[0].duration: Invalid value: '30s': give hours and/or minutes (e.g. "
        "8h, 1h30m)",
    ]


def test_budget_reasons() -> None:
    (message,) = errors(nodepool(spec__disruption__budgets=[{"nodes": "1", "reasons": ["Expired"]}]))
    assert message.startswith('spec.disruption.budgets[0].reasons[0]: Unsupported value: "Expired"')


def test_valid_budgets_pass() -> None:
    budgets = [
        {"nodes": "10%"},
        {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Drifted"]},
    ]
    assert validate_document(nodepool(spec__disruption__budgets=budgets)) == []


def test_limits_quantities() -> None:
    doc = nodepool(spec__limits={"cpu": "lots", "memory": "1000Gi", "nodes": "2.5"})
    assert errors(doc) == [
        "spec.limits[cpu]: Invalid value: 'lots' is not a quantity (e.g. 1000, 500m, 100Gi)",
        "spec.limits[nodes]: Invalid value: '2.5': nodes is a whole number of nodes",
    ]


def test_role_xor_instance_profile() -> None:
    assert errors(nodeclass(instanceProfile="ip")) == [
        "spec: Forbidden: role and instanceProfile are mutually exclusive; keep one"
    ]
    (message,) = errors(nodeclass(role=None))
    assert message.startswith("spec.role: Required value: v1 needs exactly one of spec.role")
    assert "spec.instanceProfile" in message


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("al2023", "write it as family@version, e.g. al2023@latest"),
        ("ubuntu@latest", "Unsupported value: 'ubuntu': alias families are al2, al2023, bottlerocket"),
        ("al2@yesterday", "Invalid value: 'yesterday': the version is 'latest' or a release"),
    ],
)
def test_alias_rules(alias: str, expected: str) -> None:
    (message,) = errors(nodeclass(amiSelectorTerms=[{"alias": alias}]))
    assert message.startswith("spec.amiSelectorTerms[0].alias:")
    assert expected in message


def test_alias_must_be_alone() -> None:
    assert errors(nodeclass(amiSelectorTerms=[{"alias": "al2@latest", "tags": {"a": "b"}}])) == [
        "spec.amiSelectorTerms[0]: Forbidden: alias cannot be combined with other fields in the same term"
    ]
    assert errors(
        nodeclass(amiSelectorTerms=[{"alias": "al2@latest"}, {"id": "ami-1"}], amiFamily="AL2")
    ) == ["spec.amiSelectorTerms[0]: Forbidden: an alias term must be the only amiSelectorTerm"]


def test_ami_family_must_match_the_alias() -> None:
    (message,) = errors(nodeclass(amiFamily="Bottlerocket"))
    assert message.startswith(
        "spec.amiFamily: Invalid value: 'Bottlerocket': with an alias it must be AL2023"
    )


def test_ami_family_required_without_alias() -> None:
    (message,) = errors(nodeclass(amiSelectorTerms=[{"id": "ami-0123456789abcdef0"}]))
    assert message.startswith("spec.amiFamily: Required value: amiSelectorTerms has no alias")


def test_ami_id_term_is_exclusive_and_owner_alone_is_not_a_selector() -> None:
    doc = nodeclass(amiFamily="Custom", amiSelectorTerms=[{"id": "ami-1", "name": "x"}, {"owner": "self"}])
    assert errors(doc) == [
        "spec.amiSelectorTerms[0]: Forbidden: id cannot be combined with other fields in the same term",
        "spec.amiSelectorTerms[1]: Required value: give one of alias, id, name, tags or ssmParameter",
    ]


def test_selector_terms_need_a_selector() -> None:
    assert errors(nodeclass(subnetSelectorTerms=[{}])) == [
        "spec.subnetSelectorTerms[0]: Required value: give one of id, tags"
    ]
    assert errors(nodeclass(securityGroupSelectorTerms=[])) == [
        "spec.securityGroupSelectorTerms: Required value: give at least 1 item(s)"
    ]


def test_reserved_tags_are_refused() -> None:
    (message,) = errors(nodeclass(tags={"karpenter.sh/nodepool": "x", "team": "a"}))
    assert message.startswith(
        "spec.tags[karpenter.sh/nodepool]: Forbidden: karpenter.sh/nodepool is a tag Nodewright"
    )
    (message,) = errors(nodeclass(tags={"kubernetes.io/cluster/c": "owned"}))
    assert message.startswith("spec.tags[kubernetes.io/cluster/c]: Forbidden")


def test_metadata_options_enums_and_bounds() -> None:
    doc = nodeclass(metadataOptions={"httpTokens": "maybe", "httpPutResponseHopLimit": 0})
    assert errors(doc) == [
        'spec.metadataOptions.httpTokens: Unsupported value: "maybe": supported values: "required", '
        '"optional"',
        "spec.metadataOptions.httpPutResponseHopLimit: Invalid value: 0: must be greater than or equal to 1",
    ]


def test_ami_family_enum() -> None:
    (message,) = errors(nodeclass(amiFamily="Ubuntu", amiSelectorTerms=[{"id": "ami-1"}]))
    assert message == (
        'spec.amiFamily: Unsupported value: "Ubuntu": supported values: "AL2", "AL2023", '
        '"Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"'
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"amiFamily": "Windows2022", "amiSelectorTerms": [{"id": "ami-1"}]},
        {"amiSelectorTerms": [{"alias": "windows2025@latest"}]},
        {"amiFamily": "Windows2019", "amiSelectorTerms": [{"alias": "windows2019@latest"}]},
    ],
)
def test_windows_families_and_aliases_are_acted_on(spec: dict[str, object]) -> None:
    doc = nodeclass(**spec)
    assert errors(doc) == []
    assert warnings(doc) == []


def test_a_pinned_windows_alias_is_refused_as_karpenter_refuses_it() -> None:
    (message,) = errors(nodeclass(amiSelectorTerms=[{"alias": "windows2022@v20250101"}]))
    assert message.endswith("windows families may only specify version 'latest'")


def test_kubelet_rules() -> None:
    kubelet = {
        "clusterDNS": ["10.0.0.300"],
        "systemReserved": {"gpu": "1", "cpu": "lots"},
        "evictionHard": {"memory.free": "5%", "nodefs.available": "150%"},
        "evictionSoft": {"memory.available": "500Mi"},
        "evictionSoftGracePeriod": {"nodefs.available": "1x"},
        "imageGCHighThresholdPercent": 50,
        "imageGCLowThresholdPercent": 60,
    }
    assert errors(nodeclass(kubelet=kubelet)) == [
        "spec.kubelet.clusterDNS[0]: Invalid value: '10.0.0.300': give an IP address",
        "spec.kubelet.systemReserved[gpu]: Unsupported value: 'gpu': reserve cpu, ephemeral-storage, "
        "memory, pid",
        "spec.kubelet.systemReserved[cpu]: Invalid value: 'lots' is not a quantity (e.g. 1000, 500m, 100Gi)",
        "spec.kubelet.evictionHard[memory.free]: Unsupported value: 'memory.free': eviction signals are "
        "imagefs.available, imagefs.inodesFree, memory.available, nodefs.available, "
        "nodefs.inodesFree, pid.available",
        "spec.kubelet.evictionHard[nodefs.available]: Invalid value: '150%': a percentage 0-100%",
        "spec.kubelet.evictionSoftGracePeriod[nodefs.available]: Invalid value: '1x' is not a "
        "duration: use numbers "
        "with units h, m, s (e.g. 720h, 1m30s)",
        "spec.kubelet.evictionSoftGracePeriod[nodefs.available]: Invalid value: no evictionSoft "
        "threshold for it",
        "spec.kubelet.evictionSoft[memory.available]: Required value: give evictionSoftGracePeriod "
        "for this signal "
        "(the kubelet refuses a soft threshold without one)",
        "spec.kubelet.imageGCLowThresholdPercent: Invalid value: 60: must be lower than "
        "imageGCHighThresholdPercent (50)",
    ]


def test_block_device_mappings() -> None:
    mappings = [
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "big"}},
        {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}},
    ]
    assert errors(nodeclass(blockDeviceMappings=mappings)) == [
        "spec.blockDeviceMappings: Invalid value: at most one mapping may be the rootVolume",
        "spec.blockDeviceMappings[0].ebs.volumeSize: Invalid value: 'big' is not a quantity (e.g. "
        "1000, 500m, 100Gi)",
    ]


def test_nodeclaim_rules() -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c"},
        "spec": {
            "requirements": [{"key": "kubernetes.io/arch", "operator": "Exists", "values": ["amd64"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "nc"},
            "resources": {"requests": {"cpu": "one"}},
        },
    }
    assert errors(claim) == [
        "spec.requirements[0].values: Forbidden: operator Exists takes no values; remove them",
        "spec.resources.requests[cpu]: Invalid value: 'one' is not a quantity (e.g. 1000, 500m, 100Gi)",
    ]


def test_every_error_is_reported_not_just_the_first() -> None:
    doc = nodepool(spec__weight=0, spec__limits={"cpu": "x"})
    doc["spec"]["template"]["spec"]["taints"] = [{"key": "a", "effect": "Bad"}]
    assert len(errors(doc)) == 3


def test_v1beta1_default_ec2nodeclass_without_role_fails_saying_what_v1_needs() -> None:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "amiFamily": "AL2",
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        },
    }
    (message,) = errors(doc)
    assert message.startswith("spec.role: Required value: v1 needs exactly one of spec.role")


def test_kubelet_only_piece_is_checked_for_kubelet_only() -> None:
    piece = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "nc"},
        "spec": {"kubelet": {"maxPods": 20}},
    }
    assert validate_v1(piece, partial=True) == []
    assert validate_v1(copy.deepcopy(piece)) != []


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
_FIELD_PATHS = [
    ("spec",),
    ("spec", "template"),
    ("spec", "template", "spec"),
    ("spec", "template", "spec", "requirements"),
    ("spec", "template", "spec", "taints"),
    ("spec", "template", "metadata", "labels"),
    ("spec", "disruption"),
    ("spec", "disruption", "budgets"),
    ("spec", "limits"),
    ("spec", "kubelet"),
    ("spec", "kubelet", "clusterDNS"),
    ("spec", "kubelet", "evictionSoft"),
    ("spec", "amiSelectorTerms"),
    ("spec", "subnetSelectorTerms"),
    ("spec", "tags"),
    ("spec", "blockDeviceMappings"),
    ("metadata",),
]


@settings(max_examples=150, deadline=None)
@given(
    base=st.sampled_from(["nodepool", "nodeclass", "v1beta1", "provisioner"]),
    path=st.sampled_from(_FIELD_PATHS),
    value=_json_values,
)
def test_validation_never_crashes_on_malformed_input(base: str, path: tuple[str, ...], value: Any) -> None:
    doc = {
        "nodepool": nodepool,
        "nodeclass": nodeclass,
        "v1beta1": lambda: {**nodepool(), "apiVersion": "karpenter.sh/v1beta1"},
        "provisioner": lambda: {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "spec": {}},
    }[base]()
    target = doc
    for part in path[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[path[-1]] = value
    findings = validate_document(doc)
    assert all(f.severity in ("error", "warning") for f in findings)
    # A kubelet piece merging into a malformed EC2NodeClass of the same name must not raise either.
    doc.setdefault("metadata", {"name": "nc"})
    carrier = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "p"}}
    carrier["spec"] = {"providerRef": {"name": "nc"}, "kubeletConfiguration": {"maxPods": 1}}
    assert convert_documents([carrier, doc]).documents


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.template.spec.expireAfter", "80000000h"),
        ("spec.template.spec.terminationGracePeriod", "80000000h"),
        ("spec.disruption.consolidateAfter", "99999999999s"),
    ],
)
def test_a_duration_longer_than_kubernetes_accepts_is_rejected(path: str, value: str) -> None:
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    "requirements": [],
                }
            },
            "disruption": {},
        },
    }
    *parents, leaf = path.split(".")
    target = pool
    for part in parents:
        target = target.setdefault(part, {})
    target[leaf] = value
    messages = [str(f) for f in validate_v1(pool) if f.is_error]
    assert any(m.startswith(path) and "longest duration Kubernetes accepts" in m for m in messages), messages


def test_the_longest_duration_kubernetes_accepts_is_valid() -> None:
    from nodewright.api.durations import parse_duration

    assert parse_duration("2562047h") == 2562047 * 3600


def test_a_static_nodepool_is_valid_with_its_replicas_and_a_nodes_limit() -> None:
    doc = nodepool(spec__replicas=3, spec__limits={"nodes": "5"})
    assert errors(doc) == []
    assert warnings(doc) == []


def test_a_static_nodepool_takes_no_other_limit_and_no_weight() -> None:
    doc = nodepool(spec__replicas=3, spec__limits={"nodes": "5", "cpu": "100"}, spec__weight=10)
    assert errors(doc) == [
        "spec.limits: Invalid value: only 'limits.nodes' is supported on static NodePools; remove cpu",
        "spec.weight: Forbidden: 'weight' is not supported on static NodePools; remove it",
    ]
