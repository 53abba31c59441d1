"""The sandbox's patches to moto's serializer (``sandbox.aws.serializer_keys``) change its cost, never
its answers."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
import xmltodict
from moto import mock_aws
from moto.core.serialize import AttributePicker

from sandbox.aws import serializer_keys


def _described(ec2: Any) -> list[dict[str, Any]]:
    answer = ec2.describe_instances()
    return [instance for reservation in answer["Reservations"] for instance in reservation["Instances"]]


def test_moto_describes_instances_the_same_with_the_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        image = ec2.register_image(Name="node", RootDeviceName="/dev/xvda")["ImageId"]
        tags = [{"ResourceType": "instance", "Tags": [{"Key": "karpenter.sh/nodepool", "Value": "default"}]}]
        launched = ec2.run_instances(
            ImageId=image, MinCount=3, MaxCount=3, InstanceType="m5.large", TagSpecifications=tags
        )
        ec2.terminate_instances(InstanceIds=[launched["Instances"][0]["InstanceId"]])
        serializer_keys.install()
        patched = [_described(ec2), _described(ec2)]  # the second from the kept names
        monkeypatch.setattr(AttributePicker, "__call__", serializer_keys._moto_pick)
        monkeypatch.setattr(xmltodict, "_validate_name", serializer_keys._check_name)
        own = _described(ec2)

    assert len(own) == 3
    assert patched == [own, own]


def test_an_invalid_element_name_is_still_refused_every_time() -> None:
    serializer_keys.install()
    assert xmltodict.unparse({"Answer": {"Name": "x"}}) == xmltodict.unparse({"Answer": {"Name": "x"}})
    for _ in range(2):
        with pytest.raises(ValueError, match="whitespace"):
            xmltodict.unparse({"Answer": {"bad name": "x"}})
