"""User data for Windows nodes and for instance-store RAID0, in the formats Karpenter v1.14's AWS
provider writes (``pkg/providers/amifamily/bootstrap``: ``windows.go``, ``eksbootstrap.go``
``--local-disks raid0``, ``nodeadm.go`` ``localStorage.strategy``, ``bottlerocket.go``
``bootstrap-commands``)."""

from __future__ import annotations

import email
import tomllib

import pytest
import yaml
from nodewright.cloud.eks import ClusterInfo
from nodewright.cloud.userdata import NodeBootstrap, UnsafeNodeValueError, render

CLUSTER = ClusterInfo(
    name="c1",
    endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com",
    certificate_authority="Q0VSVA==",
    version="1.31",
    service_cidr="10.100.0.0/16",
)
LABELS = {"karpenter.sh/nodepool": "win", "karpenter.sh/capacity-type": "on-demand"}
UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def spec(**fields: object) -> NodeBootstrap:
    values: dict[str, object] = {
        "cluster": CLUSTER,
        "labels": LABELS,
        "taints": [UNREGISTERED],
        "nodeclass_name": "win",
    }
    values.update(fields)
    return NodeBootstrap(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("family", ["Windows2019", "Windows2022", "Windows2025"])
def test_windows_runs_the_eks_bootstrap_script_in_a_powershell_block(family: str) -> None:
    script = render(family, spec())
    lines = script.splitlines()
    assert lines[0] == "<powershell>"
    assert lines[-1] == "</powershell>"
    assert (
        lines[1]
        == '[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1"'
    )
    assert lines[2] == (
        "& $EKSBootstrapScriptFile -EKSClusterName 'c1' "
        "-APIServerEndpoint 'https://ABC.gr7.us-east-1.eks.amazonaws.com' -Base64ClusterCA 'Q0VSVA==' "
        '-KubeletExtraArgs \'--node-labels="karpenter.sh/capacity-type=on-demand,karpenter.sh/nodepool=win" '
        '--register-with-taints="karpenter.sh/unregistered:NoExecute" --max-pods=110\' '
        "-DNSClusterIP '10.100.0.10'"
    )


def test_windows_puts_the_nodeclass_powershell_first_and_keeps_its_max_pods() -> None:
    script = render("Windows2022", spec(custom_user_data="Write-Host 'hello'\n", kubelet={"maxPods": 40}))
    lines = script.splitlines()
    assert lines[:2] == ["<powershell>", "Write-Host 'hello'"]
    assert "--max-pods=40'" in lines[3]
    assert "--max-pods=110" not in script


def test_windows_quotes_cluster_facts_as_powershell_strings() -> None:
    odd = ClusterInfo(
        name="it's",
        endpoint="https://x",
        certificate_authority="Q0E=",
        version="1.31",
        service_cidr="10.100.0.0/16",
    )
    assert "-EKSClusterName 'it''s'" in render("Windows2019", spec(cluster=odd))


def test_windows_refuses_a_label_that_would_break_out_of_the_quotes() -> None:
    with pytest.raises(UnsafeNodeValueError):
        render("Windows2022", spec(labels={"team": "a' ; Remove-Item C:\\ ; '"}))


def test_al2_raid0_asks_bootstrap_sh_for_local_disks() -> None:
    message = email.message_from_string(render("AL2", spec(instance_store_raid0=True)))
    (script,) = [p.get_payload() for p in message.walk() if not p.is_multipart()]
    assert script.rstrip().splitlines()[-1] == "--local-disks raid0"
    assert "--kubelet-extra-args" in script.rstrip().splitlines()[-2]
    assert script.rstrip().splitlines()[-2].endswith(" \\")
    assert "--local-disks" not in render("AL2", spec())


def test_al2023_raid0_sets_the_nodeconfig_local_storage_strategy() -> None:
    message = email.message_from_string(render("AL2023", spec(instance_store_raid0=True)))
    (payload,) = [p.get_payload() for p in message.walk() if not p.is_multipart()]
    config = yaml.safe_load(payload)
    assert config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    plain = email.message_from_string(render("AL2023", spec()))
    (payload,) = [p.get_payload() for p in plain.walk() if not p.is_multipart()]
    assert "instance" not in yaml.safe_load(payload)["spec"]


def test_bottlerocket_raid0_adds_the_ephemeral_storage_bootstrap_command() -> None:
    user = '[settings.bootstrap-commands.10-mine]\ncommands = [["echo", "hi"]]\nmode = "once"\n'
    settings = tomllib.loads(render("Bottlerocket", spec(instance_store_raid0=True, custom_user_data=user)))[
        "settings"
    ]
    assert settings["bootstrap-commands"]["000-mount-instance-storage"] == {
        "commands": [
            ["apiclient", "ephemeral-storage", "init"],
            [
                "apiclient",
                "ephemeral-storage",
                "bind",
                "--dirs",
                "/var/lib/containerd",
                "/var/lib/kubelet",
                "/var/log/pods",
            ],
        ],
        "mode": "always",
        "essential": True,
    }
    assert settings["bootstrap-commands"]["10-mine"]["commands"] == [["echo", "hi"]]
    assert "bootstrap-commands" not in tomllib.loads(render("Bottlerocket", spec()))["settings"]


def test_windows_and_custom_get_no_raid0_setup() -> None:
    assert "raid" not in render("Windows2022", spec(instance_store_raid0=True)).lower()
    assert (
        render("Custom", spec(instance_store_raid0=True, custom_user_data="#!/bin/bash\n")) == "#!/bin/bash\n"
    )
