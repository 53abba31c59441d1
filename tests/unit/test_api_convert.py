"""Conversion of v1beta1 and v1alpha5 manifests to v1: one test per mapping."""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api.convert import convert_document, convert_documents


def provisioner(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": "p"},
        "spec": {"providerRef": {"name": "nc"}, **spec},
    }


def nodepool_v1beta1(template_spec: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    tspec = {"nodeClassRef": {"name": "nc"}, "requirements": [], **(template_spec or {})}
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "np"},
        "spec": {"template": {"spec": tspec}, **spec},
    }


def messages(conversion: Any) -> list[str]:
    return [str(f) for f in conversion.findings]


def test_provisioner_labels_annotations_go_to_template_metadata() -> None:
    (pool,) = convert_document(provisioner(labels={"team": "a"}, annotations={"x/y": "z"})).documents
    assert pool["apiVersion"] == "karpenter.sh/v1"
    assert pool["kind"] == "NodePool"
    assert pool["spec"]["template"]["metadata"] == {"labels": {"team": "a"}, "annotations": {"x/y": "z"}}


def test_provisioner_requirements_taints_startup_taints_go_to_template_spec() -> None:
    req = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    taint = [{"key": "a", "effect": "NoSchedule"}]
    startup = [{"key": "b", "effect": "NoExecute"}]
    (pool,) = convert_document(provisioner(requirements=req, taints=taint, startupTaints=startup)).documents
    tspec = pool["spec"]["template"]["spec"]
    assert (tspec["requirements"], tspec["taints"], tspec["startupTaints"]) == (req, taint, startup)


def test_provider_ref_becomes_node_class_ref_with_group_and_kind() -> None:
    (pool,) = convert_document(provisioner()).documents
    assert pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "nc",
    }


def test_inline_provider_is_refused_with_what_to_do() -> None:
    conversion = convert_document(provisioner(provider={"subnetSelector": {"a": "b"}}))
    assert not conversion.ok
    assert any("spec.provider: inline AWS settings are not supported" in m for m in messages(conversion))


def test_ttl_seconds_after_empty_becomes_when_empty_and_consolidate_after() -> None:
    (pool,) = convert_document(provisioner(ttlSecondsAfterEmpty=90)).documents
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m30s"}


def test_consolidation_enabled_becomes_when_empty_or_underutilized() -> None:
    (pool,) = convert_document(provisioner(consolidation={"enabled": True})).documents
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }


def test_neither_consolidation_nor_ttl_means_never_scale_down() -> None:
    (pool,) = convert_document(provisioner()).documents
    assert pool["spec"]["disruption"]["consolidateAfter"] == "Never"


def test_consolidation_with_ttl_after_empty_converts_strictly_and_warns() -> None:
    conversion = convert_document(provisioner(consolidation={"enabled": True}, ttlSecondsAfterEmpty=30))
    (pool,) = conversion.documents
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}
    (finding,) = conversion.findings
    assert finding.severity == "warning"
    assert finding.path == "spec.consolidation.enabled"
    assert "Karpenter refuses consolidation.enabled together with ttlSecondsAfterEmpty" in finding.message
    assert "stricter reading" in finding.message
    assert "WhenEmptyOrUnderutilized" in finding.message


def test_ttl_seconds_until_expired_becomes_expire_after() -> None:
    (pool,) = convert_document(provisioner(ttlSecondsUntilExpired=2592000)).documents
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "720h"


def test_no_ttl_until_expired_keeps_nodes_forever() -> None:
    (pool,) = convert_document(provisioner()).documents
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "Never"


def test_bad_ttl_is_an_error() -> None:
    conversion = convert_document(provisioner(ttlSecondsUntilExpired="30d"))
    assert "spec.ttlSecondsUntilExpired: must be a whole number of seconds, got '30d'" in messages(conversion)


def test_limits_resources_become_limits_and_weight_is_kept() -> None:
    (pool,) = convert_document(provisioner(limits={"resources": {"cpu": "1000"}}, weight=10)).documents
    assert pool["spec"]["limits"] == {"cpu": "1000"}
    assert pool["spec"]["weight"] == 10


def test_kubelet_configuration_moves_to_an_ec2nodeclass() -> None:
    kubelet = {"maxPods": 20, "containerRuntime": "containerd", "evictionMaxPodGracePeriod": "3m"}
    conversion = convert_document(provisioner(kubeletConfiguration=kubelet))
    pool, carrier = conversion.documents
    assert "kubeletConfiguration" not in pool["spec"]
    assert carrier["apiVersion"] == "karpenter.k8s.aws/v1"
    assert carrier["kind"] == "EC2NodeClass"
    assert carrier["metadata"]["name"] == "nc"
    assert carrier["spec"] == {"kubelet": {"maxPods": 20, "evictionMaxPodGracePeriod": 180}}
    assert conversion.partial == [1]
    text = messages(conversion)
    assert any("containerRuntime: removed in v1" in m for m in text)
    assert any("converted '3m' to 180" in m for m in text)


def test_kubelet_joins_its_ec2nodeclass_when_converted_together() -> None:
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "nc"},
        "spec": {"instanceProfile": "ip", "subnetSelector": {"k": "v"}, "securityGroupSelector": {"k": "v"}},
    }
    conversion = convert_documents([provisioner(kubeletConfiguration={"maxPods": 20}), template])
    assert conversion.partial == []
    _pool, nodeclass = conversion.documents
    assert nodeclass["spec"]["kubelet"] == {"maxPods": 20}
    assert nodeclass["spec"]["instanceProfile"] == "ip"


def test_two_different_kubelets_for_one_class_warn() -> None:
    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "nc"}}
    conversion = convert_documents(
        [
            provisioner(kubeletConfiguration={"maxPods": 20}),
            provisioner(kubeletConfiguration={"maxPods": 30}),
            nodeclass,
        ]
    )
    assert any("different kubelet settings" in m for m in messages(conversion))


def test_old_label_and_annotation_names_become_v1_names() -> None:
    conversion = convert_document(
        provisioner(
            labels={"karpenter.sh/provisioner-name": "p"},
            annotations={"karpenter.sh/do-not-evict": "true", "karpenter.sh/do-not-consolidate": "true"},
            requirements=[{"key": "karpenter.sh/provisioner-name", "operator": "Exists"}],
        )
    )
    (pool,) = conversion.documents
    meta = pool["spec"]["template"]["metadata"]
    assert meta["labels"] == {"karpenter.sh/nodepool": "p"}
    assert meta["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert pool["spec"]["template"]["spec"]["requirements"][0]["key"] == "karpenter.sh/nodepool"
    assert any("renamed to karpenter.sh/do-not-disrupt in v1" in m for m in messages(conversion))


def test_unknown_provisioner_fields_stay_for_validation() -> None:
    (pool,) = convert_document(provisioner(bogus=1)).documents
    assert pool["spec"]["bogus"] == 1


def test_v1beta1_nodepool_when_underutilized_becomes_when_empty_or_underutilized() -> None:
    conversion = convert_document(nodepool_v1beta1(disruption={"consolidationPolicy": "WhenUnderutilized"}))
    (pool,) = conversion.documents
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
    }
    assert "WhenUnderutilized is WhenEmptyOrUnderutilized in v1" in messages(conversion)[0]


def test_v1beta1_nodepool_expire_after_moves_into_the_template() -> None:
    (pool,) = convert_document(nodepool_v1beta1(disruption={"expireAfter": "24h"})).documents
    assert pool["spec"]["template"]["spec"]["expireAfter"] == "24h"
    assert "expireAfter" not in pool["spec"]["disruption"]


def test_v1beta1_node_class_ref_api_version_becomes_group() -> None:
    ref = {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "nc"}
    (pool,) = convert_document(nodepool_v1beta1({"nodeClassRef": ref})).documents
    assert pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "nc",
    }


def test_v1beta1_nodepool_kubelet_moves_to_the_ec2nodeclass() -> None:
    conversion = convert_document(nodepool_v1beta1({"kubelet": {"maxPods": 50}}))
    pool, carrier = conversion.documents
    assert "kubelet" not in pool["spec"]["template"]["spec"]
    assert carrier["spec"] == {"kubelet": {"maxPods": 50}}
    assert carrier["metadata"]["name"] == "nc"


def test_v1beta1_ec2nodeclass_family_without_terms_becomes_alias() -> None:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "d"},
        "spec": {"amiFamily": "AL2023", "role": "r"},
    }
    conversion = convert_document(doc)
    (nodeclass,) = conversion.documents
    assert nodeclass["apiVersion"] == "karpenter.k8s.aws/v1"
    assert nodeclass["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert any("httpPutResponseHopLimit: defaults to 1 in v1" in m for m in messages(conversion))


def test_v1alpha1_awsnodetemplate_selectors_become_terms() -> None:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "subnetSelector": {"aws-ids": "subnet-1,subnet-2"},
            "securityGroupSelector": {"karpenter.sh/discovery": "c"},
            "amiSelector": {"aws::name": "my-ami-*", "aws::owners": "self", "team": "a"},
            "amiFamily": "Custom",
            "instanceProfile": "KarpenterNodeInstanceProfile",
            "userData": "echo hi",
        },
    }
    (nodeclass,) = convert_document(doc).documents
    spec = nodeclass["spec"]
    assert nodeclass["kind"] == "EC2NodeClass"
    assert nodeclass["apiVersion"] == "karpenter.k8s.aws/v1"
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-1"}, {"id": "subnet-2"}]
    assert spec["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "c"}}]
    assert spec["amiSelectorTerms"] == [{"name": "my-ami-*", "owner": "self", "tags": {"team": "a"}}]
    assert spec["instanceProfile"] == "KarpenterNodeInstanceProfile"
    assert spec["userData"] == "echo hi"


def test_v1alpha1_awsnodetemplate_without_ami_selector_uses_alias_of_default_family() -> None:
    doc = {"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "metadata": {"name": "t"}}
    conversion = convert_document(doc)
    (nodeclass,) = conversion.documents
    assert nodeclass["spec"]["amiFamily"] == "AL2"
    assert nodeclass["spec"]["amiSelectorTerms"] == [{"alias": "al2@latest"}]
    assert any(
        "v1alpha1 fell back to the controller's default instance profile" in m for m in messages(conversion)
    )


def test_v1beta1_ec2nodeclass_without_role_notes_it_was_incomplete_already() -> None:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1beta1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "d"},
        "spec": {"amiFamily": "AL2"},
    }
    assert "spec: neither role nor instanceProfile is set: v1beta1 required one too" in "\n".join(
        messages(convert_document(doc))
    )


def test_launch_template_is_refused() -> None:
    doc = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "t"},
        "spec": {"launchTemplate": "lt"},
    }
    assert any(
        "spec.launchTemplate: launch templates you manage" in m for m in messages(convert_document(doc))
    )


def test_v1_objects_pass_through_unchanged() -> None:
    doc = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "x"},
        "spec": {"weight": 5},
    }
    conversion = convert_document(copy.deepcopy(doc))
    assert conversion.documents == [doc]
    assert conversion.findings == []


def test_other_documents_pass_through_untouched_with_a_warning_for_old_names() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"karpenter.sh/do-not-evict": "true"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]},
    }
    conversion = convert_document(copy.deepcopy(pod))
    assert conversion.documents == [pod]
    assert messages(conversion) == [
        "metadata.annotations.karpenter.sh/do-not-evict: renamed karpenter.sh/do-not-disrupt in v1; "
        "Nodewright honours only the v1 name"
    ]


def test_unknown_karpenter_version_is_an_error() -> None:
    conversion = convert_document({"apiVersion": "karpenter.sh/v1alpha1", "kind": "Machine"})
    assert not conversion.ok
    assert "is not a kind Nodewright reads" in messages(conversion)[0]


def test_document_without_api_version_or_kind_is_an_error() -> None:
    assert messages(convert_document({"kind": "NodePool"})) == [
        "apiVersion: Required value: every manifest names its apiVersion and kind"
    ]
    assert messages(convert_document({"apiVersion": "v1"})) == [
        "kind: Required value: every manifest names its apiVersion and kind"
    ]


def test_non_mapping_document_is_an_error() -> None:
    conversion = convert_document(["not", "a", "mapping"])  # type: ignore[arg-type]
    assert conversion.documents == []
    assert not conversion.ok
