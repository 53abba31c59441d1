"""``nodewright plan --consolidate``: the disruption flow's consolidation choice over manifests, unwritten."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.cli import main

ZONE = "us-west-2a"


def cluster(tmp_path: Path, *, budget: str | None = None, do_not_disrupt: str = "") -> Path:
    """Two m5.xlarge NodeClaims of a WhenEmptyOrUnderutilized NodePool, each running one 500m pod."""
    disruption: dict[str, Any] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"}
    if budget:
        disruption["budgets"] = [{"nodes": budget}]
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    selector = [{"tags": {"karpenter.sh/discovery": "demo"}}]
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "NodeRole",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": selector,
                "securityGroupSelectorTerms": selector,
            },
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": ref,
                        "requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {
                                "key": "karpenter.k8s.aws/instance-category",
                                "operator": "In",
                                "values": ["c", "m"],
                            },
                        ],
                    }
                },
                "disruption": disruption,
            },
        },
    ]
    for index, name in enumerate(("a", "b"), start=1):
        instance = f"i-{index:017d}"
        labels = {
            "karpenter.sh/nodepool": "default",
            "node.kubernetes.io/instance-type": "m5.xlarge",
            "karpenter.sh/capacity-type": "on-demand",
            "topology.kubernetes.io/zone": ZONE,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
        }
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}
            for kind in ("Launched", "Registered", "Initialized")
        ]
        annotations = {"karpenter.sh/do-not-disrupt": "true"} if name == do_not_disrupt else {}
        docs += [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": f"default-{name}", "labels": labels},
                "spec": {"nodeClassRef": ref, "requirements": []},
                "status": {
                    "instanceID": instance,
                    "providerID": f"aws:///{ZONE}/{instance}",
                    "nodeName": f"node-{name}",
                    "conditions": conditions,
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{name}",
                    "labels": {**labels, "kubernetes.io/hostname": f"node-{name}"},
                    "annotations": annotations,
                },
                "spec": {"providerID": f"aws:///{ZONE}/{instance}"},
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"},
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"web-{name}", "namespace": "default", "labels": {"app": "web"}},
                "spec": {
                    "nodeName": f"node-{name}",
                    "containers": [
                        {
                            "name": "app",
                            "image": "nginx",
                            "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                        }
                    ],
                },
                "status": {"phase": "Running"},
            },
        ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    return tmp_path


def plan(path: Path, *extra: str) -> dict[str, Any]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert (
            main(
                ["plan", "--manifests", str(path), "--region", "us-west-2", "--consolidate", "--json", *extra]
            )
            == 0
        )
    return json.loads(printed.getvalue())


def test_within_the_default_budget_one_node_whose_pod_fits_elsewhere_is_deleted(tmp_path: Path) -> None:
    result = plan(cluster(tmp_path))

    command = result["command"]
    assert (command["method"], command["action"]) == ("single", "delete")
    assert len(command["removes"]) == 1
    assert command["launches"] == []
    assert command["savingsPerHour"] == pytest.approx(command["removes"][0]["pricePerHour"])
    assert command["savingsPerHour"] > 0
    assert result["unpriced"] == []
    assert result["costPerHour"] == pytest.approx(2 * command["removes"][0]["pricePerHour"])


def test_with_room_in_the_budget_both_nodes_are_replaced_by_one_strictly_cheaper_node(tmp_path: Path) -> None:
    result = plan(cluster(tmp_path, budget="100%"))

    command = result["command"]
    assert (command["method"], command["action"]) == ("multi", "replace")
    assert sorted(r["nodeClaim"] for r in command["removes"]) == ["default-a", "default-b"]
    [launch] = command["launches"]
    assert launch["worstPricePerHour"] == command["pricePerHourAfter"] < command["pricePerHourBefore"]
    assert "m5.xlarge" not in launch["instanceTypes"]


def test_a_do_not_disrupt_node_stays_and_the_plan_says_why_in_text_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster(tmp_path, budget="100%", do_not_disrupt="b")

    result = plan(path)
    assert [r["nodeClaim"] for r in result["command"]["removes"]] == ["default-a"]
    assert "karpenter.sh/do-not-disrupt" in result["notConsolidated"]["default-b"]

    assert main(["plan", "--manifests", str(path), "--region", "us-west-2", "--consolidate"]) == 0
    text = capsys.readouterr().out
    assert "nothing is written" in text
    assert "removes NodeClaim default-a" in text
    assert "default-b: node node-b has karpenter.sh/do-not-disrupt" in text
