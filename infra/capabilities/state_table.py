"""The DynamoDB state table: unavailable offerings, the price table, idempotency records.

The key schema is shared with the cloud layer and the sandbox: ``pk`` (S) / ``sk`` (S),
items expire through the TTL attribute ``expires_at`` (epoch seconds).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.capabilities import acknowledge

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expires_at"


class StateTable(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=TTL_ATTRIBUTE,
            # On-demand: a few hundred small writes a day; provisioned capacity would idle.
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The AWS-managed KMS key (aws/dynamodb): encrypted at rest with no key to run;
            # the table holds prices and capacity hints, nothing secret.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # Everything in it is a cache or expires within hours: nothing to keep on removal.
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge.checkov(
            self.table,
            "CKV_AWS_119",
            "the AWS-managed KMS key is enough: the table holds prices and capacity hints, "
            "a customer-managed key would add $1/month and a key policy to run for no gain",
        )
