"""The pass bench's index of moto's EC2 tags (``bench.pass_._index_moto_tags``): every answer the
same as moto's own."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.ec2.models.core import TaggedEC2Resource

from bench import pass_


@pytest.fixture
def restore_moto() -> Any:
    original = TaggedEC2Resource.get_tags
    yield
    TaggedEC2Resource.get_tags = original  # type: ignore[method-assign]


@mock_aws
def test_indexed_tags_give_describe_instances_the_same_answers(restore_moto: Any) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = "ami-12c6146b"  # moto accepts any well-formed image id
    for i in range(4):
        tags = [{"Key": "cluster", "Value": "a" if i % 2 else "b"}, {"Key": f"only-{i}", "Value": str(i)}]
        ec2.run_instances(
            ImageId=image,
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )

    def answers() -> list[Any]:
        return [
            ec2.describe_instances(Filters=filters)["Reservations"]
            for filters in (
                [],
                [{"Name": "tag:cluster", "Values": ["a"]}],
                [{"Name": "tag-key", "Values": ["only-2"]}],
            )
        ]

    before = answers()
    pass_._index_moto_tags()
    after = answers()
    assert after == before
    assert len(after[1]) == 2, "the tag filter still filters"
