"""What a node's EBS volumes cost: the bundled table, the AMI families' defaults, the estimate mark."""

from __future__ import annotations

import pytest
from nodewright.cloud.ebs import HOURS_PER_MONTH, node_storage, volume_price_per_hour


def nodeclass(**spec: object) -> dict:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "n"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("ebs", "monthly"),
    [
        ({"volumeSize": "20Gi", "volumeType": "gp3"}, 20 * 0.08),
        (
            {"volumeSize": "100Gi", "volumeType": "gp3", "iops": 6000, "throughput": 250},
            8 + 3000 * 0.005 + 125 * 0.04,
        ),
        ({"volumeSize": "100Gi", "volumeType": "gp3", "iops": 3000, "throughput": 125}, 8.0),  # included
        ({"volumeSize": "50Gi", "volumeType": "gp2"}, 5.0),
        ({"volumeSize": "100Gi", "volumeType": "io2", "iops": 1000}, 12.5 + 65),
        ({"volumeSize": 30}, 30 * 0.08),  # an int is GiB; no type: Karpenter's default gp3
    ],
)
def test_volume_prices_follow_the_table(ebs: dict, monthly: float) -> None:
    price, estimated = volume_price_per_hour(ebs)
    assert price == pytest.approx(monthly / HOURS_PER_MONTH)
    assert estimated is False


def test_ami_family_defaults_when_the_nodeclass_names_no_volumes() -> None:
    al2023 = node_storage(nodeclass(amiSelectorTerms=[{"alias": "al2023@latest"}]), "us-east-1")
    assert al2023.volumes == ("20Gi gp3",)
    assert al2023.per_hour == pytest.approx(1.6 / HOURS_PER_MONTH)
    bottlerocket = node_storage(nodeclass(amiSelectorTerms=[{"alias": "bottlerocket@latest"}]), "us-west-2")
    assert bottlerocket.volumes == ("4Gi gp3", "20Gi gp3")
    assert bottlerocket.per_hour == pytest.approx(24 * 0.08 / HOURS_PER_MONTH)


def test_regions_and_types_the_table_does_not_price_are_marked_estimated() -> None:
    assert node_storage(nodeclass(), "eu-west-1").estimated is True
    assert node_storage(nodeclass(), "us-east-1").estimated is False
    price, estimated = volume_price_per_hour({"volumeSize": "10Gi", "volumeType": "future"})
    assert estimated is True
    assert price == pytest.approx(10 * 0.08 / HOURS_PER_MONTH)  # priced as gp3
