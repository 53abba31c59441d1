"""``resource_of``: the L1 resource behind a construct, checked (the CDK types it as optional)."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.capabilities.cfn import resource_of


def test_resource_of_an_l2_construct_is_its_cloudformation_resource() -> None:
    stack = Stack(App(), "Stack")
    queue = sqs.Queue(stack, "Queue")

    resource = resource_of(queue)

    assert isinstance(resource, sqs.CfnQueue)
    assert resource_of(resource) is resource


def test_resource_of_a_construct_without_one_names_its_path() -> None:
    stack = Stack(App(), "Stack")
    group = Construct(stack, "Group")

    with pytest.raises(TypeError, match="Stack/Group has no CloudFormation resource"):
        resource_of(group)
