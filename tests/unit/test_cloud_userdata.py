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
        "/etc/eks/bootstrap.sh c1 --apiserver-endpoint https://ABC.gr7.us-east-1.eks.amazonaws.com" in script
    )
    assert "--b64-cluster-ca Q0VSVA==" in script
    assert "--dns-cluster-ip 10.100.0.10" in script
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
    with pytest.raises(InvalidNodeClassError, match="Ubuntu"):
        render("Ubuntu", spec())


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


# --- hostile values: nothing that reaches user data may become code on the node ---------------

HOSTILE = [
    "x'; touch /tmp/pwned; echo '",
    'x"; touch /tmp/pwned; echo "',
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "a\nExecStartPre=/bin/touch /tmp/pwned",
    "a b",
    "a,b=c",
    "a:NoSchedule",
    "é",
]
FAMILIES = ["AL2", "AL2023", "Bottlerocket"]


def _hostile_specs(value: str) -> dict[str, NodeBootstrap]:
    base = {"cluster": CLUSTER, "nodeclass_name": "default", "kubelet": {}}
    return {
        "label key": NodeBootstrap(**base, labels={f"example.com/{value}": "v"}),
        "label value": NodeBootstrap(**base, labels={"example.com/team": value}),
        "taint key": NodeBootstrap(**base, taints=[{"key": value, "effect": "NoSchedule"}]),
        "taint value": NodeBootstrap(**base, taints=[{"key": "k", "value": value, "effect": "NoSchedule"}]),
        "taint effect": NodeBootstrap(**base, taints=[{"key": "k", "effect": value}]),
        "kubelet reserved value": NodeBootstrap(
            cluster=CLUSTER, nodeclass_name="default", kubelet={"systemReserved": {"cpu": value}}
        ),
        "kubelet eviction signal": NodeBootstrap(
            cluster=CLUSTER, nodeclass_name="default", kubelet={"evictionHard": {value: "5%"}}
        ),
    }


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_labels_and_taints_are_refused_before_they_reach_user_data(family: str, value: str) -> None:
    from nodewright.cloud.userdata import UnsafeNodeValueError

    for field_name, hostile in _hostile_specs(value).items():
        if family != "AL2" and field_name.startswith("kubelet"):
            continue  # AL2023 and Bottlerocket write kubelet settings as YAML/TOML values (tested below)
        with pytest.raises(UnsafeNodeValueError, match=r"not|cannot"):
            render(family, hostile)


def _bootstrap_arguments(document: str, tmp_path: Any) -> list[str]:
    """Run AL2's bootstrap line in bash with bootstrap.sh replaced by a printer of its arguments."""
    import subprocess

    script = parts(document)[-1][1]
    command = script.split("\n", 2)[2].replace("/etc/eks/bootstrap.sh", "printf '%s\\n'", 1)
    result = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=10
    )
    return result.stdout.splitlines()


@pytest.mark.parametrize("value", [v for v in HOSTILE if "\n" not in v])
def test_al2_bootstrap_arguments_reach_bootstrap_sh_intact_whatever_the_cluster_facts(
    value: str, tmp_path: Any
) -> None:
    canary = tmp_path / "pwned"
    hostile = value.replace("/tmp/pwned", str(canary))
    cluster = ClusterInfo(
        name=hostile,
        endpoint=hostile,
        certificate_authority=hostile,
        version="1.31",
        service_cidr="10.0.0.0/16",
    )
    document = render("AL2", NodeBootstrap(cluster=cluster, labels=LABELS, taints=TAINTS, kubelet=KUBELET))
    args = _bootstrap_arguments(document, tmp_path)
    assert args[:5] == [hostile, "--apiserver-endpoint", hostile, "--b64-cluster-ca", hostile]
    assert args[args.index("--kubelet-extra-args") + 1].startswith(
        '--node-labels="karpenter.sh/capacity-type=spot'
    )
    assert not canary.exists()


def test_al2023_and_bottlerocket_write_hostile_cluster_facts_and_kubelet_values_as_data() -> None:
    hostile = "x\n  injected: true\n[settings.host-containers.admin]\nenabled = true\n\"'"
    cluster = ClusterInfo(
        name=hostile,
        endpoint=hostile,
        certificate_authority="Q0E=",
        version="1.31",
        service_cidr="10.0.0.0/16",
    )
    kubelet = {"evictionHard": {"memory.available": hostile}}
    spec_ = NodeBootstrap(cluster=cluster, kubelet=kubelet, nodeclass_name="default")
    config = yaml.safe_load(parts(render("AL2023", spec_))[-1][1])
    assert config["spec"]["cluster"]["name"] == hostile
    assert config["spec"]["kubelet"]["config"]["evictionHard"] == {"memory.available": hostile}
    assert set(config["spec"]) == {"cluster", "kubelet"}
    settings = tomllib.loads(render("Bottlerocket", spec_))["settings"]
    assert settings["kubernetes"]["cluster-name"] == hostile
    assert settings["kubernetes"]["eviction-hard"] == {"memory.available": hostile}
    assert set(settings) == {"kubernetes"}


@pytest.mark.parametrize("family", FAMILIES)
def test_valid_labels_and_taints_still_render_for_every_family(family: str) -> None:
    rendered = render(family, spec(None, kubelet={}))
    assert "dedicated" in rendered
    assert "karpenter.sh/nodepool" in rendered


# --- user data is UTF-8 -----------------------------------------------------------------------


@pytest.mark.parametrize("family", ["AL2", "AL2023"])
def test_non_ascii_nodeclass_user_data_renders_as_a_utf8_part(family: str) -> None:
    script = "#!/bin/bash\n# setup — naïve café ✓\necho done\n"
    document = render(family, spec(script))
    message = email.message_from_bytes(document.encode("utf-8"))
    first = next(p for p in message.walk() if not p.is_multipart())
    assert first.get_content_charset() == "utf-8"
    assert first.get_payload(decode=True).decode("utf-8") == script
    bootstrap = [p for p in message.walk() if not p.is_multipart()][-1]
    assert bootstrap.get_content_charset() == "us-ascii"


def test_non_ascii_mime_user_data_keeps_its_text() -> None:
    mime = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\n'
        'Content-Type: text/x-shellscript; charset="utf-8"\n\n#!/bin/bash\necho "zürich — ok"\n--B--\n'
    )
    message = email.message_from_bytes(render("AL2", spec(mime)).encode("utf-8"))
    first = next(p for p in message.walk() if not p.is_multipart())
    assert first.get_payload(decode=True).decode("utf-8") == '#!/bin/bash\necho "zürich — ok"'


def test_non_ascii_bottlerocket_settings_round_trip() -> None:
    toml = '[settings.motd]\nmessage = "naïve — ✓ 😀"\n'
    assert tomllib.loads(render("Bottlerocket", spec(toml)))["settings"]["motd"] == {
        "message": "naïve — ✓ 😀"
    }
