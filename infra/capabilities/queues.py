"""The one way this stack makes an SQS queue: SSE-SQS encrypted, TLS-only, deleted with the stack."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.capabilities import acknowledge


def encrypted_queue(scope: Construct, construct_id: str, *, retention: Duration, **options: Any) -> sqs.Queue:
    queue = sqs.Queue(
        scope,
        construct_id,
        # SSE-SQS: EventBridge and Lambda destinations can send to it without a KMS key policy.
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention,
        removal_policy=RemovalPolicy.DESTROY,
        **options,
    )
    acknowledge.checkov(
        queue,
        "CKV_AWS_27",
        "encrypted with SSE-SQS (SqsManagedSseEnabled); checkov only recognises a KMS key, which "
        "EventBridge could not use without a key policy",
    )
    return queue
