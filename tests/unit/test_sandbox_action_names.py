"""moto's dispatch behind the sandbox lists a response class's methods once (``sandbox.aws.action_names``):
the list is moto's own, and requests are answered as before."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core.utils import method_names_from_class
from moto.ec2.responses import EC2Response

from sandbox.aws import action_names


def test_a_response_class_s_methods_are_moto_s_own_list_kept_once() -> None:
    first = action_names._method_names(EC2Response)
    assert first == method_names_from_class(EC2Response)
    assert action_names._method_names(EC2Response) is first


def test_moto_answers_requests_and_their_errors_with_the_patch() -> None:
    action_names.install()
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        assert ec2.describe_regions()["Regions"]
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="q")["QueueUrl"]
        with pytest.raises(ClientError):
            sqs.get_queue_attributes(QueueUrl=url + "-absent", AttributeNames=["All"])
