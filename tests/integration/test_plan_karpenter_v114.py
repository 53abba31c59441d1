"""``nodewright plan`` offline over a cluster as Karpenter v1.14 leaves it: the adopted NodeClaim is
capacity, the NodePool's Gte requirement and kubernetes.io label act, and the JSON shows each
NodeClaim's taints, labels and the zone IDs its EC2NodeClass's status names."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml
from nodewright.cli import main

from sandbox.shared_data import REPO_ROOT

CLUSTER = REPO_ROOT / "events" / "manifests" / "karpenter-v1.14" / "cluster-as-karpenter-left-it.yaml"
GPU_TAINT = {"key": "example.com/dedicated", "value": "web", "effect": "NoSchedule"}


def plan(tmp_path: Path) -> dict[str, Any]:
    documents = list(yaml.safe_load_all(CLUSTER.read_text()))
    pool = next(d for d in documents if d["kind"] == "NodePool")
    pool["spec"]["template"]["spec"]["taints"] = [GPU_TAINT]
    documents.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 6,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "nodeSelector": {"node-role.kubernetes.io/worker": ""},
                        "tolerations": [{"key": "example.com/dedicated", "operator": "Exists"}],
                        "containers": [
                            {
                                "name": "web",
                                "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            }
                        ],
                    },
                },
            },
        }
    )
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["plan", "--manifests", str(manifest), "--region", "us-east-1", "--json"]) == 0
    return json.loads(printed.getvalue())


def test_plan_shows_taints_labels_and_zone_ids_of_each_nodeclaim(tmp_path: Path) -> None:
    result = plan(tmp_path)
    assert result["pending"] == {}
    assert result["skippedNodePools"] == {}
    (claim,) = result["nodeClaims"]
    assert claim["zones"] == ["us-east-1a"]
    assert claim["zoneIDs"] == ["use1-az1"]  # the EC2NodeClass's status.subnets[].zoneID
    assert claim["taints"] == [GPU_TAINT]
    assert claim["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert claim["labels"]["node-role.kubernetes.io/worker"] == ""
    generations = {
        r["values"][0] for r in claim["requirements"] if r["key"] == "karpenter.k8s.aws/instance-generation"
    }
    assert generations == {"2"}  # Gte 3, written as the equal Gt 2
    # The NodeClaim Karpenter launched is capacity: one pod goes there, the rest to the new claim.
    assert result["existingCapacity"] == {"default/web-0": "nodeclaim/default-x7k2p"}
    assert len(claim["pods"]) == 5
