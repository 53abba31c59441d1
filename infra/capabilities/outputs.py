"""The stack's outputs ``nodewright doctor`` reads to know what the stack made.

The keys are fixed (not CDK-generated) and mirrored in ``nodewright.cloud.readiness``, which
reads them; tests/infra/test_infra_stack.py keeps the two lists equal. Absent values are "none"
(CloudFormation refuses an empty output).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Fn
from constructs import Construct

NODE_ROLE_ARN = "NodewrightNodeRoleArn"
NODE_ROLE_NAME = "NodewrightNodeRoleName"
CLUSTER_ACCESS_ROLES = "NodewrightClusterAccessRoles"
FUNCTION_SUBNETS = "NodewrightFunctionSubnets"
FUNCTION_SECURITY_GROUPS = "NodewrightFunctionSecurityGroups"
INTERRUPTION_QUEUE = "NodewrightInterruptionQueueUrl"
ALARM_TOPIC = "NodewrightAlarmTopicArn"
WEBHOOK_URL = "NodewrightWebhookUrl"
WEBHOOK_SECRET = "NodewrightWebhookSecretArn"
# How the API server reaches the wake-up (public, private, off), and in private mode what
# install-webhooks renders the caBundle from and the doctor checks: the certificate, the internal
# load balancer and its security group.
WAKEUP_MODE = "NodewrightWakeupMode"
WAKEUP_CERTIFICATE = "NodewrightWakeupCertificateArn"
WAKEUP_LOAD_BALANCER = "NodewrightWakeupLoadBalancerArn"
WAKEUP_SECURITY_GROUP = "NodewrightWakeupSecurityGroup"
# What nodewright doctor simulates each role against (nodewright.spec.iam): the roles by function,
# and the resources the stack grants them with CDK's grant helpers.
FUNCTION_ROLES = "NodewrightFunctionRoles"
STATE_TABLE = "NodewrightStateTableArn"
FAILURE_QUEUE = "NodewrightFailedInvocationsQueueArn"
WAKEUP_ALIAS = "NodewrightWakeupAliasArn"
NONE = "none"


def output(scope: Construct, key: str, value: str, description: str) -> CfnOutput:
    result = CfnOutput(scope, key, value=value, description=description)
    result.override_logical_id(key)
    return result


def joined(values: list[str]) -> str:
    return Fn.join(",", values) if values else NONE


def pairs(values: dict[str, str]) -> str:
    """``key=value,key=value`` (values may be tokens), or ``none``."""
    return joined([Fn.join("=", [key, value]) for key, value in values.items()])
