"""What ``cdk destroy`` must also remove: the launch templates and instance profiles the functions
made at run time. A custom resource whose deletion runs ``functions/cleanup`` with a role that
can delete only this cluster's templates and profiles (``permissions.cleanup``)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities import acknowledge
from infra.capabilities.functions import (
    DEFAULT_FUNCTIONS_DIR,
    function_asset_dir,
    function_log_group,
    function_role,
)
from infra.capabilities.layer import ARCHITECTURES, RUNTIME, acknowledge_pinned_runtime
from infra.capabilities.permissions import PolicyInputs
from infra.config import NodewrightConfig
from infra.metrics import NAMESPACE, service_name

CLEANUP = "cleanup"


class Removal(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: NodewrightConfig,
        layer: lambda_.ILayerVersion,
        policy_inputs: PolicyInputs,
        functions_dir: Path | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role, policy = function_role(
            self,
            CLEANUP,
            f"Nodewright: removes cluster {config.cluster_name}'s launch templates and profiles",
            (CLEANUP,),
            policy_inputs,
        )
        log_group = function_log_group(self, CLEANUP, config.cluster_name)
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"Nodewright ({config.cluster_name}): removes run-time resources at cdk destroy",
            runtime=RUNTIME,
            architecture=ARCHITECTURES[config.architecture],
            handler="app.handler",
            code=lambda_.Code.from_asset(
                str(function_asset_dir(functions_dir or DEFAULT_FUNCTIONS_DIR, CLEANUP)),
                exclude=["__pycache__", "*.pyc"],
            ),
            layers=[layer],
            role=self.role,
            memory_size=256,
            timeout=Duration.minutes(5),
            environment={
                "CLUSTER_NAME": config.cluster_name,
                "POWERTOOLS_SERVICE_NAME": service_name(config.cluster_name),
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            },
            log_group=log_group,
        )
        log_group.grant_write(self.role)
        # Start only once its policies exist; the role itself is implied by its GetAtt (cfn-lint W3005).
        stack = Stack.of(self)
        default_policy = self.role.node.find_child("DefaultPolicy").node.default_child
        self.function.node.default_child.add_override(
            "DependsOn", [stack.get_logical_id(p) for p in (default_policy, policy.node.default_child)]
        )
        reason = (
            "runs once, when CloudFormation deletes the stack, and answers CloudFormation itself; "
            "it calls only EC2 and IAM, so it needs no VPC, and a retry or DLQ would only delay the deletion"
        )
        for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaTracing"):
            acknowledge.nag(self.function, rule, reason)
        acknowledge_pinned_runtime(self.function)
        for check in ("CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"):
            acknowledge.checkov(self.function, check, reason)
        acknowledge.checkov(self.function, "CKV_AWS_173", "the environment holds the cluster name only")
        self.resource = CustomResource(self, "Resource", service_token=self.function.function_arn)
