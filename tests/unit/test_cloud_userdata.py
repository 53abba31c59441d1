"""User data for each AMI family, merged with the NodeClass userData the way Karpenter does."""

from __future__ import annotations

import email
import tomllib
from typing import Any

import pytest
import yaml
from nodewright.cloud.eks import ClusterInfo
from nodewright.cloud.errors import InvalidNodeClassError
from nodewright.cloud.userdata import NodeBootstrap, dump_toml, kubelet_may_set, render

CLUSTER = ClusterInfo(
    name="c1",
    endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com",
    certificate_authority="Q0VSVA==",
    version="1.31",
    service_cidr="10.100.0.0/16",
)
KUBELET = {
    "maxPods": 58,
    "podsPerCore": 4,
    "systemReserved": {"cpu": "100m", "memory": "100Mi"},
    "kubeReserved": {"cpu": "200m"},
    "evictionHard": {"memory.available": "5%"},
    "evictionSoft": {"memory.available": "10%"},
    "evictionSoftGracePeriod": {"memory.available": "1m0s"},
    "evictionMaxPodGracePeriod": 60,
    "imageGCHighThresholdPercent": 85,
    "imageGCLowThresholdPercent": 80,
}
LABELS = {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot"}
TAINTS = [
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "boot", "effect": "NoExecute"},
]


def spec(user_data: str | None = None, kubelet: dict[str, Any] | None = None) -> NodeBootstrap:
    return NodeBootstrap(
        cluster=CLUSTER,
        labels=LABELS,
        taints=TAINTS,
        kubelet=KUBELET if kubelet is None else kubelet,
        custom_user_data=user_data,
        nodeclass_name="default",
    )


def parts(document: str) -> list[tuple[str, str]]:
    message = email.message_from_string(document)
    assert message.get_content_type() == "multipart/mixed"
    return [(p.get_content_type(), p.get_payload()) for p in message.walk() if not p.is_multipart()]


def test_al2_runs_bootstrap_with_kubelet_flags_after_the_nodeclass_script() -> None:
    rendered = parts(render("AL2", spec("#!/bin/bash\necho custom\n")))
    assert [t for t, _ in rendered] == ["text/x-shellscript", "text/x-shellscript"]
    assert "echo custom" in rendered[0][1]
    script = rendered[1][1]
    assert (
        "/etc/eks/bootstrap.sh 'c1' --apiserver-endpoint 'https://ABC.gr7.us-east-1.eks.amazonaws.com'"
        in script
    )
    assert "--b64-cluster-ca 'Q0VSVA=='" in script
    assert "--dns-cluster-ip '10.100.0.10'" in script
    assert "--use-max-pods false" in script
    for flag in (
        '--node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default"',
        '--register-with-taints="dedicated=gpu:NoSchedule,boot:NoExecute"',
        "--max-pods=58",
        "--pods-per-core=4",
        "--system-reserved=cpu=100m,memory=100Mi",
        "--kube-reserved=cpu=200m",
        '--eviction-hard="memory.available<5%"',
        '--eviction-soft="memory.available<10%"',
        '--eviction-soft-grace-period="memory.available=1m0s"',
        "--eviction-max-pod-grace-period=60",
        "--image-gc-high-threshold=85",
        "--image-gc-low-threshold=80",
    ):
        assert flag in script, flag


def test_al2_without_kubelet_settings_lets_the_ami_compute_max_pods() -> None:
    script = parts(render("AL2", spec(kubelet={})))[0][1]
    assert "--use-max-pods" not in script
    assert "--max-pods" not in script


def test_al2023_appends_a_nodeconfig_with_the_kubelet_config_after_the_nodeclass_parts() -> None:
    user = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
        "spec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n"
    )
    rendered = parts(render("AL2023", spec(user)))
    assert [t for t, _ in rendered] == ["application/node.eks.aws", "application/node.eks.aws"]
    assert "shutdownGracePeriod" in rendered[0][1]
    config = yaml.safe_load(rendered[1][1])
    assert config["kind"] == "NodeConfig"
    assert config["spec"]["cluster"] == {
        "name": "c1",
        "apiServerEndpoint": CLUSTER.endpoint,
        "certificateAuthority": "Q0VSVA==",
        "cidr": "10.100.0.0/16",
    }
    kubelet = config["spec"]["kubelet"]
    assert kubelet["config"]["clusterDNS"] == ["10.100.0.10"]
    assert kubelet["config"]["maxPods"] == 58
    assert kubelet["config"]["evictionHard"] == {"memory.available": "5%"}
    assert kubelet["config"]["imageGCLowThresholdPercent"] == 80
    assert "--node-labels=karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default" in kubelet["flags"]
    assert "--register-with-taints=dedicated=gpu:NoSchedule,boot:NoExecute" in kubelet["flags"]


def test_al2023_keeps_a_shell_script_and_the_parts_of_a_mime_userdata() -> None:
    shell = parts(render("AL2023", spec("#!/bin/bash\necho hi\n")))
    assert shell[0] == ("text/x-shellscript", "#!/bin/bash\necho hi\n")
    mime = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
        '--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\necho one\n\n'
        '--BOUNDARY\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\necho two\n\n'
        "--BOUNDARY--\n"
    )
    merged = parts(render("AL2023", spec(mime)))
    assert [t for t, _ in merged] == ["text/x-shellscript", "text/x-shellscript", "application/node.eks.aws"]
    assert "echo two" in merged[1][1]


def test_cluster_dns_from_the_kubelet_settings_wins_over_the_service_cidr() -> None:
    config = yaml.safe_load(parts(render("AL2023", spec(kubelet={"clusterDNS": ["169.254.20.10"]})))[0][1])
    assert config["spec"]["kubelet"]["config"]["clusterDNS"] == ["169.254.20.10"]


def test_bottlerocket_lays_kubernetes_settings_over_the_nodeclass_toml() -> None:
    user = (
        '[settings.host-containers.admin]\nenabled = true\n\n[settings.kubernetes]\ncluster-name = "wrong"\n'
    )
    document = tomllib.loads(render("Bottlerocket", spec(user)))
    assert document["settings"]["host-containers"]["admin"]["enabled"] is True
    k8s = document["settings"]["kubernetes"]
    assert k8s["cluster-name"] == "c1"
    assert k8s["api-server"] == CLUSTER.endpoint
    assert k8s["cluster-certificate"] == "Q0VSVA=="
    assert k8s["cluster-dns-ip"] == "10.100.0.10"
    assert k8s["max-pods"] == 58
    assert k8s["node-labels"] == LABELS
    assert k8s["node-taints"] == {"dedicated": ["gpu:NoSchedule"], "boot": [":NoExecute"]}
    assert k8s["system-reserved"] == {"cpu": "100m", "memory": "100Mi"}
    assert k8s["eviction-hard"] == {"memory.available": "5%"}
    assert k8s["image-gc-high-threshold-percent"] == 85
    assert k8s["eviction-max-pod-grace-period"] == 60


def test_bottlerocket_rejects_userdata_that_is_not_toml() -> None:
    with pytest.raises(InvalidNodeClassError, match="not valid TOML"):
        render("Bottlerocket", spec("#!/bin/bash\necho no\n"))


def test_custom_family_passes_userdata_through_untouched() -> None:
    assert render("Custom", spec("anything at all")) == "anything at all"
    assert render("Custom", spec(None)) == ""


def test_unsupported_family_is_named_in_the_error() -> None:
    with pytest.raises(InvalidNodeClassError, match="Windows2022"):
        render("Windows2022", spec())


def test_toml_writer_round_trips_nested_tables_and_quoted_keys() -> None:
    document = {"settings": {"a": 1, "b": {"x.y": "z", "list": ["1", "2"], "flag": False}, "c": {}}}
    assert tomllib.loads(dump_toml(document)) == document


@pytest.mark.parametrize(
    ("label", "allowed"),
    [
        ("team", True),
        ("example.com/team", True),
        ("karpenter.sh/nodepool", True),
        ("kubernetes.io/arch", True),
        ("topology.kubernetes.io/zone", True),
        ("node.kubernetes.io/instance-type", True),
        ("node.kubernetes.io/custom", True),
        ("kubelet.kubernetes.io/anything", True),
        ("node-role.kubernetes.io/worker", False),
        ("kubernetes.io/role", False),
        ("k8s.io/foo", False),
    ],
)
def test_only_labels_the_kubelet_may_set_go_into_node_labels(label: str, allowed: bool) -> None:
    assert kubelet_may_set(label) is allowed
