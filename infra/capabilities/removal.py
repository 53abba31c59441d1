"""What ``cdk destroy`` must also remove, in the cluster and in AWS: a custom resource whose deletion
runs ``functions/cleanup`` (``nodewright.removal``).

Its role (``permissions.cleanup``) can read this cluster's endpoint, terminate only this cluster's
instances, delete only its launch templates and instance profiles, and write its report to one SSM
parameter (``REMOVAL_REPORT_PARAMETER``); its access entry (``cluster_access.CLEANUP_GROUP``) gets
the Kubernetes permissions of deploy/rbac.yaml's ``nodewright-cleanup``. With ``-c subnetIds`` it runs
in the cluster's VPC like the other functions that call the cluster.

The report outlives the stack in that parameter, not in the function's log group: a log group kept
with ``RETAIN`` and a fixed name would make the next ``cdk deploy`` of the same cluster fail
(CloudFormation cannot create a log group whose name exists), and one without a fixed name could not
be found by a runbook. The parameter is written at run time, so redeploying is never blocked; each
removal replaces the last one's report (SSM keeps the earlier versions).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct
from nodewright.spec import deployment

from infra.capabilities import acknowledge
from infra.capabilities.cfn import resource_of
from infra.capabilities.functions import (
    DEFAULT_FUNCTIONS_DIR,
    VPC_NETWORK_INTERFACES_REASON,
    function_asset_dir,
    function_log_group,
    function_role,
    kube_client_environment,
)
from infra.capabilities.layer import ARCHITECTURES, RUNTIME, acknowledge_pinned_runtime
from infra.capabilities.permissions import CLEANUP, PolicyInputs, grants_of, removal_report_parameter
from infra.config import NodewrightConfig
from infra.metrics import NAMESPACE, service_name

# Its sizing and why: nodewright/spec/deployment.py.
CLEANUP_TIMEOUT = Duration.seconds(deployment.CLEANUP.timeout_seconds)
CLEANUP_MEMORY_MB = deployment.CLEANUP.memory_mb
REPORT_PARAMETER_VARIABLE = "REMOVAL_REPORT_PARAMETER"


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
        security_group_ids: list[str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        in_vpc = config.in_vpc
        self.report_parameter = removal_report_parameter(config.cluster_name)
        self.role, policy = function_role(
            self,
            CLEANUP,
            f"Nodewright: removes what it made for cluster {config.cluster_name} at cdk destroy",
            grants_of(CLEANUP, in_vpc=in_vpc),
            policy_inputs,
        )
        log_group = function_log_group(self, CLEANUP, config.cluster_name)
        self.function = lambda_.Function(
            self,
            "Function",
            description=(
                f"Nodewright ({config.cluster_name}): removes its webhooks, nodes and run-time resources "
                "at cdk destroy"
            ),
            runtime=RUNTIME,
            architecture=ARCHITECTURES[config.architecture],
            handler="app.handler",
            code=lambda_.Code.from_asset(
                str(function_asset_dir(functions_dir or DEFAULT_FUNCTIONS_DIR, CLEANUP)),
                exclude=["__pycache__", "*.pyc"],
            ),
            layers=[layer],
            role=self.role,
            memory_size=CLEANUP_MEMORY_MB,
            timeout=CLEANUP_TIMEOUT,
            environment={
                "CLUSTER_NAME": config.cluster_name,
                REPORT_PARAMETER_VARIABLE: self.report_parameter,
                "POWERTOOLS_SERVICE_NAME": service_name(config.cluster_name),
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
                **kube_client_environment(config),
            },
            log_group=log_group,
        )
        log_group.grant_write(self.role)
        if in_vpc:
            resource_of(self.function).add_property_override(
                "VpcConfig",
                {"SubnetIds": list(config.subnet_ids), "SecurityGroupIds": list(security_group_ids or [])},
            )
            acknowledge.checkov(policy, "CKV_AWS_111", VPC_NETWORK_INTERFACES_REASON)
        # Start only once its policies exist; the role itself is implied by its GetAtt (cfn-lint W3005).
        stack = Stack.of(self)
        default_policy = resource_of(self.role.node.find_child("DefaultPolicy"))
        resource_of(self.function).add_override(
            "DependsOn", [stack.get_logical_id(p) for p in (default_policy, resource_of(policy))]
        )
        reason = (
            "runs once, when CloudFormation deletes the stack, and answers CloudFormation itself within its "
            "timeout; Lambda's own retries of a failed asynchronous invocation resume it, and a DLQ would "
            "only hold the stack's deletion"
        )
        for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaTracing"):
            acknowledge.nag(self.function, rule, reason)
        acknowledge_pinned_runtime(self.function)
        for check in ("CKV_AWS_115", "CKV_AWS_116"):
            acknowledge.checkov(self.function, check, reason)
        if not in_vpc:
            acknowledge.checkov(
                self.function,
                "CKV_AWS_117",
                "no VPC placement requested (-c subnetIds=...): like the functions that call the cluster, it "
                "reaches the public EKS endpoint and AWS APIs from Lambda's own network",
            )
        acknowledge.checkov(
            self.function, "CKV_AWS_173", "the environment holds the cluster's name and a parameter name only"
        )
        self.resource = CustomResource(self, "Resource", service_token=self.function.function_arn)
