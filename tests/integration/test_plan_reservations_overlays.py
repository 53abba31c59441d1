"""``nodewright plan`` with a saved DescribeCapacityReservations answer and NodeOverlays among the
manifests: the reservations the EC2NodeClass selects are reserved offerings (their slots shared, the
rest falling back to on-demand), an overlay changes which type is cheapest and says so, a conflict
or an answer it cannot read is reported, and ``--json`` carries all of it."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodewright.cli import main

POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "general"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["reserved", "on-demand"],
                    },
                    {
                        "key": "karpenter.k8s.aws/instance-category",
                        "operator": "In",
                        "values": ["c", "m", "r"],
                    },
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                ],
            }
        }
    },
}
NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "NodeRole",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "capacityReservationSelectorTerms": [{"tags": {"team": "ml"}}],
    },
}
WEB = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "3"}}}]
            },
        },
    },
}


def overlay(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["r5.xlarge"]}
            ],
            **spec,
        },
    }


def reservation(rid: str, available: int, team: str = "ml", **fields: Any) -> dict[str, Any]:
    return {
        "CapacityReservationId": rid,
        "OwnerId": "123456789012",
        "InstanceType": "m5.xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-west-2a",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": available,
        "State": "active",
        "InstanceMatchCriteria": "targeted",
        "ReservationType": "default",
        "Tags": [{"Key": "team", "Value": team}],
        **fields,
    }


def plan(tmp_path: Path, *documents: Any, answer: Any = None) -> tuple[int, dict[str, Any]]:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(documents))
    if answer is not None:
        (tmp_path / "reservations.json").write_text(json.dumps(answer))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["plan", "--manifests", str(tmp_path), "--region", "us-west-2", "--json"])
    return status, json.loads(printed.getvalue())


def test_a_saved_reservation_the_nodeclass_selects_is_used_for_its_free_slots(tmp_path: Path) -> None:
    answer = {
        "CapacityReservations": [
            reservation("cr-0aaaaaaaaaaaaaaa1", 1),
            reservation("cr-0bbbbbbbbbbbbbbb2", 2, team="web"),  # not selected by the terms
            reservation("cr-0ccccccccccccccc3", 2, State="cancelled"),  # not active
        ]
    }
    status, result = plan(tmp_path, POOL, NODECLASS, WEB, answer=answer)
    assert status == 0
    held = [c for c in result["nodeClaims"] if c["capacityReservations"]]
    (claim,) = held
    assert claim["capacityReservations"] == ["cr-0aaaaaaaaaaaaaaa1"]
    assert claim["capacityTypes"] == ["reserved"]
    assert claim["instanceTypes"] == ["m5.xlarge"]
    others = [c for c in result["nodeClaims"] if not c["capacityReservations"]]
    assert len(others) == 2
    assert all(c["capacityTypes"] == ["on-demand"] for c in others)
    assert [r["id"] for r in result["capacityReservations"]] == [
        "cr-0aaaaaaaaaaaaaaa1",
        "cr-0bbbbbbbbbbbbbbb2",
        "cr-0ccccccccccccccc3",
    ]


def test_without_a_saved_answer_nothing_is_reserved(tmp_path: Path) -> None:
    status, result = plan(tmp_path, POOL, NODECLASS, WEB)
    assert status == 0
    assert all(not c["capacityReservations"] for c in result["nodeClaims"])


def test_an_overlay_makes_r5_the_cheapest_and_the_plan_says_why(tmp_path: Path) -> None:
    status, result = plan(tmp_path, POOL, NODECLASS, WEB, overlay("savings-plan", priceAdjustment="-50%"))
    assert status == 0
    for claim in result["nodeClaims"]:
        assert claim["instanceTypes"][0] == "r5.xlarge"
        assert claim["nodeOverlays"] == ["savings-plan"]
        assert claim["priceOverlayApplied"]
    assert result["nodeOverlays"]["savings-plan"]["applied"]


def test_a_conflicting_overlay_is_reported_and_does_not_apply(tmp_path: Path) -> None:
    status, result = plan(
        tmp_path,
        POOL,
        NODECLASS,
        WEB,
        overlay("zz-plan", priceAdjustment="+100%"),
        overlay("aa-plan", priceAdjustment="-50%"),
    )
    assert status == 0
    assert result["nodeOverlays"]["aa-plan"] == {
        "applied": False,
        "reason": "Conflict",
        "message": "conflict with another overlay",
    }
    assert all(c["instanceTypes"][0] != "r5.xlarge" for c in result["nodeClaims"])


def test_an_answer_it_cannot_read_is_one_problem_and_the_rest_is_planned(tmp_path: Path) -> None:
    status, result = plan(
        tmp_path, POOL, NODECLASS, WEB, answer={"CapacityReservations": [{"State": "active"}]}
    )
    assert status == 1
    assert any("lacks CapacityReservationId" in p for p in result["manifestProblems"])
    assert sum(len(c["pods"]) for c in result["nodeClaims"]) == 3


@pytest.mark.parametrize("bad", [{"price": "1", "priceAdjustment": "+1%"}, {"capacity": {"cpu": "2"}}])
def test_an_overlay_the_crd_would_refuse_is_a_manifest_problem(tmp_path: Path, bad: dict[str, Any]) -> None:
    status, result = plan(tmp_path, POOL, NODECLASS, WEB, overlay("bad", **bad))
    assert status == 1
    assert any("NodeOverlay/bad" in p for p in result["manifestProblems"])


def test_with_live_and_no_saved_answer_the_reservations_are_read_from_ec2(tmp_path: Path) -> None:
    """``--live`` without a saved answer: the EC2NodeClass's terms are asked of EC2 itself (here the
    sandbox's EC2 under moto), as the functions ask, and the reservation it selects holds a NodeClaim."""
    import boto3
    from moto import mock_aws
    from nodewright.cloud import aws, catalog, reservations

    from sandbox.aws import ec2_reservations

    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all([POOL, NODECLASS, WEB]))
    with mock_aws():
        aws.reset_clients()
        catalog.clear_caches()
        reservations.clear_caches()
        ec2_reservations.install()
        ec2 = boto3.client("ec2", region_name="us-west-2")

        def odcr(team: str) -> str:
            return ec2.create_capacity_reservation(
                InstanceType="m5.xlarge",
                InstancePlatform="Linux/UNIX",
                AvailabilityZone="us-west-2a",
                InstanceCount=1,
                InstanceMatchCriteria="targeted",
                TagSpecifications=[
                    {"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": team}]}
                ],
            )["CapacityReservation"]["CapacityReservationId"]

        selected, _other = odcr("ml"), odcr("web")
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                status = main(
                    ["plan", "--manifests", str(tmp_path), "--region", "us-west-2", "--live", "--json"]
                )
        finally:
            aws.reset_clients()
            catalog.clear_caches()
            reservations.clear_caches()
    result = json.loads(printed.getvalue())
    assert status == 0
    (held,) = [c for c in result["nodeClaims"] if c["capacityReservations"]]
    assert held["capacityReservations"] == [selected]
    assert held["capacityTypes"] == ["reserved"]
    assert sum(len(c["pods"]) for c in result["nodeClaims"]) == 3
