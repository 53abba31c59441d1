"""``nodewright plan`` offline over Windows nodes, node storage and a static NodePool: a Windows pod is
planned on Windows x86_64 types only (priced with their licence), a Linux pod never on them; a pod
asking 100 GiB of ephemeral-storage lands on the NodePool whose root volume holds it and stays pending
where it does not; a 300 GiB pod lands on instance-store types of a RAID0 EC2NodeClass; a static
NodePool's replicas are NodeClaims, and the ones beyond its replicas are named for deletion."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import yaml
from nodewright.cli import main
from nodewright.cli._offline import catalog_data

REGION = "us-east-1"
GIB = 1024**3


def nodeclass(name: str, alias: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": alias}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            **spec,
        },
    }


def nodepool(
    name: str, nodeclass_name: str, requirements: list[dict[str, Any]] = (), **spec: Any
) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.k8s.aws",
                        "kind": "EC2NodeClass",
                        "name": nodeclass_name,
                    },
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {
                            "key": "karpenter.k8s.aws/instance-category",
                            "operator": "In",
                            "values": ["c", "m", "r", "i"],
                        },
                        *requirements,
                    ],
                }
            },
            **spec,
        },
    }


def pod(name: str, selector: dict[str, str], **requests: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": selector,
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "500m", **requests}}}
            ],
        },
    }


def run_plan(tmp_path: Path, documents: list[dict[str, Any]]) -> dict[str, Any]:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["plan", "--manifests", str(manifest), "--region", REGION, "--json"]) == 0
    return json.loads(printed.getvalue())


def claims_on(result: dict[str, Any], pool: str) -> list[dict[str, Any]]:
    return [c for c in result["nodeClaims"] if c["nodePool"] == pool]


def test_plan_places_windows_storage_and_raid0_pods_where_their_nodes_hold_them(tmp_path: Path) -> None:
    root = [
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "200Gi", "volumeType": "gp3"}}
    ]
    result = run_plan(
        tmp_path,
        [
            nodeclass("big-root", "al2023@latest", blockDeviceMappings=root),
            nodeclass("raid", "al2023@latest", instanceStorePolicy="RAID0"),
            nodeclass("windows", "windows2022@latest"),
            nodepool("big-root", "big-root"),
            nodepool("raid", "raid"),
            nodepool(
                "windows", "windows", [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]
            ),
            pod("scratch-100", {"karpenter.sh/nodepool": "big-root"}, **{"ephemeral-storage": "100Gi"}),
            pod("scratch-300-root", {"karpenter.sh/nodepool": "big-root"}, **{"ephemeral-storage": "300Gi"}),
            pod("scratch-300-raid", {"karpenter.sh/nodepool": "raid"}, **{"ephemeral-storage": "300Gi"}),
            pod("iis", {"kubernetes.io/os": "windows"}),
            pod("nginx", {"kubernetes.io/os": "linux", "karpenter.sh/nodepool": "big-root"}),
        ],
    )
    assert set(result["pending"]) == {"default/scratch-300-root"}
    assert "ephemeral-storage" in result["pending"]["default/scratch-300-root"]

    (windows,) = claims_on(result, "windows")
    assert windows["pods"] == ["default/iis"]
    types = catalog_data(REGION).types
    for name in windows["instanceTypes"]:
        architectures = types[name]["ProcessorInfo"]["SupportedArchitectures"]
        assert "x86_64" in architectures
        assert "arm64" not in architectures
    assert windows["labels"]["kubernetes.io/os"] == "windows"

    big_root_pods = sorted(p for c in claims_on(result, "big-root") for p in c["pods"])
    assert big_root_pods == ["default/nginx", "default/scratch-100"]

    (raid,) = claims_on(result, "raid")
    assert raid["pods"] == ["default/scratch-300-raid"]
    for name in raid["instanceTypes"]:
        store = (types[name].get("InstanceStorageInfo") or {}).get("TotalSizeInGB") or 0
        allocatable = store * 1000**3 - GIB - store * 1000**3 // 10
        assert allocatable >= 300 * GIB, name


def test_plan_shows_a_static_nodepool_s_replicas_and_its_scale_down(tmp_path: Path) -> None:
    documents = [
        nodeclass("default", "al2023@latest"),
        nodepool("static", "default", replicas=3),
        pod("web", {"kubernetes.io/os": "linux"}),
    ]
    result = run_plan(tmp_path, documents)
    static = claims_on(result, "static")
    assert len(static) == 3
    assert all(c["static"] and c["pods"] == [] for c in static)
    assert result["pending"]["default/web"]  # no pod is planned onto a new static NodeClaim

    surplus = [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": f"static-{i}", "labels": {"karpenter.sh/nodepool": "static"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            },
        }
        for i in range(5)
    ]
    result = run_plan(tmp_path, [*documents, *surplus])
    assert claims_on(result, "static") == []
    assert sorted(result["staticScaleDown"]) == ["static-0", "static-1"]
