"""moto's dispatch behind the sandbox asks the response class for an action (``sandbox.aws.action_names``)
instead of listing its methods per request: the same answer, read live."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.utils import method_names_from_class
from moto.ec2.responses import EC2Response

from sandbox.aws import action_names


def test_membership_is_moto_s_list_s_for_every_name_and_follows_methods_added_and_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed = method_names_from_class(EC2Response)
    names = action_names._FunctionNames(EC2Response)
    attributes = [*dir(EC2Response), "no_such_action"]
    assert [name for name in attributes if name in names] == [name for name in attributes if name in listed]
    assert list(names) == listed

    assert "an_action_added_later" not in names
    monkeypatch.setattr(EC2Response, "an_action_added_later", lambda self: "", raising=False)
    assert "an_action_added_later" in names  # as the sandbox's ec2_placement adds its actions
    monkeypatch.delattr(EC2Response, "an_action_added_later")
    assert "an_action_added_later" not in names


def test_moto_answers_requests_and_their_errors_with_the_patch() -> None:
    action_names.install()
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        assert ec2.describe_regions()["Regions"]
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        with pytest.raises(ClientError):
            sqs.get_queue_attributes(QueueUrl=url + "-absent", AttributeNames=["All"])
