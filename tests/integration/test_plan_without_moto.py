"""``nodewright plan`` in a production install (no moto): the catalog comes from EC2's own read-only calls."""

from __future__ import annotations

import json

import pytest
from moto import mock_aws
from nodewright.cli import _offline, main

from sandbox.shared_data import REPO_ROOT

SEEDS = REPO_ROOT / "events" / "manifests"


def test_plan_asks_ec2_for_the_catalog_when_moto_data_is_absent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(region: str) -> None:
        raise _offline.NoOfflineCatalog("the offline instance catalog is moto's data files: pip install")

    monkeypatch.setattr(_offline, "catalog_data", missing)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    with mock_aws():  # stands for EC2 itself: DescribeInstanceTypes and DescribeInstanceTypeOfferings
        code = main(
            [
                "plan",
                "--manifests",
                str(SEEDS / "deployment-inflate.yaml"),
                str(SEEDS / "v1beta1-nodepool-default.yaml"),
                str(SEEDS / "v1beta1-ec2nodeclass-default.yaml"),
                "--region",
                "us-west-2",
                "--json",
            ]
        )
    out, err = capsys.readouterr()
    assert "asking EC2 for the catalog instead" in err
    plan = json.loads(out)
    assert code in (0, 1)
    assert plan["nodeClaims"], plan
    assert sum(len(c["pods"]) for c in plan["nodeClaims"]) == 10
