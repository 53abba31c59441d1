"""The CloudFormation resource behind a construct, for what only the L1 resource can say.

A property or ``DependsOn`` override, a logical id, template metadata: each needs the L1
resource an L2 construct wraps (its ``node.default_child``), which the CDK types only as an
optional ``IConstruct``. Looking it up here checks it, so a construct without one fails synth
with its path instead of an ``AttributeError`` on ``None``.
"""

from __future__ import annotations

from aws_cdk import CfnResource
from constructs import IConstruct


def resource_of(construct: IConstruct) -> CfnResource:
    """``construct`` itself when it is a CloudFormation resource, else its default child."""
    cfn = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if not isinstance(cfn, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource behind it")
    return cfn
