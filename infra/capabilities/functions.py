"""The Lambda functions, one role each, their named log groups and the failed-invocations queue.

Sizing (Graviton/arm64: ~20 % cheaper per GB-second than x86_64 for the same work; the
layer is built for aarch64). Lambda gives CPU in proportion to memory (1,769 MB = one
vCPU), and every function imports the same ~1.5 s of libraries on a cold start.

The provisioner runs every minute; while pods keep arriving it loops for most of the minute,
so its memory is the main running cost when busy (512 MB x 55 s x 43,200 runs ≈ 1.19 M
GB-s/month ≈ $15.85), while an idle cluster costs one short pass per tick (measured 0.073 s
warm: ≈ $0.03/month); see docs/deploy.md. The other functions run for seconds, or as long
as a drain they drive.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from constructs import Construct
from nodewright.spec import deployment
from nodewright.spec.deployment import FunctionSpec

from infra.capabilities import acknowledge
from infra.capabilities.cfn import resource_of
from infra.capabilities.layer import ARCHITECTURES, RUNTIME, acknowledge_pinned_runtime
from infra.capabilities.permissions import (
    CLUSTER_CLIENTS,
    PolicyInputs,
    grants_of,
    statements_for,
    wildcard_resources_for_nag,
)
from infra.capabilities.queues import encrypted_queue
from infra.config import NodewrightConfig
from infra.metrics import NAMESPACE, service_name

DEFAULT_FUNCTIONS_DIR = Path(__file__).resolve().parents[2] / "functions"


# Why a function placed in a VPC holds the network-interface calls on "*" (checkov CKV_AWS_111).
VPC_NETWORK_INTERFACES_REASON = (
    "the network-interface calls Lambda makes to attach a function to the VPC; Lambda checks "
    "them on '*' before attaching it (AWS Lambda Developer Guide), so they take no narrower "
    "resource or condition. Every other write of this policy is tag- or ARN-scoped"
)

# Names, memory, timeouts, reserved concurrency and why: one definition, nodewright/spec/deployment.py.
FUNCTION_SPECS: tuple[FunctionSpec, ...] = deployment.SCHEDULED_AND_EVENT_FUNCTIONS


def kube_client_environment(config: NodewrightConfig, function: str = "") -> dict[str, str]:
    """The API server request rate limit every function that calls Kubernetes reads (settings.py):
    the stack's for one container, never more than the interruption functions' share for theirs."""
    qps, burst = config.kube_client_qps, config.kube_client_burst
    if function in deployment.INTERRUPTION_FUNCTIONS:
        qps = min(qps, deployment.INTERRUPTION_KUBE_CLIENT_QPS)
        burst = min(burst, deployment.INTERRUPTION_KUBE_CLIENT_BURST)
    return {"KUBE_CLIENT_QPS": f"{qps:g}", "KUBE_CLIENT_BURST": str(burst)}


def function_asset_dir(functions_dir: Path, name: str) -> Path:
    """The folder of one function; a clear error if it is missing (synth would fail anyway)."""
    folder = functions_dir / name
    if not (folder / "app.py").is_file():
        raise FileNotFoundError(
            f"{folder / 'app.py'} is missing: the stack deploys one Lambda per folder "
            f"functions/<name>/ with app.py defining handler(event, context) ({name!r} is wired "
            "in infra/capabilities/functions.py FUNCTION_SPECS)"
        )
    return folder


class NodewrightFunctions(Construct):
    """The functions, each with a role of its own holding only the grants it uses
    (``infra.capabilities.permissions.FUNCTION_GRANTS``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: NodewrightConfig,
        layer: lambda_.ILayerVersion,
        environment: dict[str, str],
        policy_inputs: PolicyInputs,
        security_group_ids: list[str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        functions_dir = config.functions_dir or DEFAULT_FUNCTIONS_DIR
        # Where an asynchronous invocation (schedule, direct EventBridge rule) ends up when
        # it fails or cannot be delivered; alarmed on by the monitoring construct.
        self.failure_queue = encrypted_queue(self, "FailedInvocations", retention=Duration.days(14))
        for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
            acknowledge.nag(
                self.failure_queue,
                rule,
                "this queue is itself the dead-letter target (Lambda on-failure destination and "
                "EventBridge target DLQ); cdk-nag only recognises DLQs set by an SQS redrive policy",
            )
        base_environment = {
            **environment,
            "CLUSTER_NAME": config.cluster_name,
            "REBALANCE_MODE": config.rebalance_mode,
            "POLL_INTERVAL_SECONDS": f"{config.poll_interval_seconds:g}",
            "MIN_VALUES_POLICY": config.min_values_policy,
            "SPOT_TO_SPOT_CONSOLIDATION": "true" if config.spot_to_spot_consolidation else "false",
            "NODE_OVERLAY": "true" if config.node_overlay else "false",
            "POWERTOOLS_SERVICE_NAME": service_name(config.cluster_name),
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            "NODEWRIGHT_TRACING": "true" if config.tracing else "false",
            "STATIC_CAPACITY": "true" if config.static_capacity else "false",
            **kube_client_environment(config),
        }
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        self._policies: dict[str, iam.Policy] = {}
        self._extra_dependencies: list[CfnResource] = []
        for spec in FUNCTION_SPECS:
            in_vpc = config.in_vpc and spec.name in CLUSTER_CLIENTS
            grants = grants_of(spec.name, in_vpc=in_vpc)
            role, policy = function_role(
                self,
                spec.name,
                f"Nodewright {spec.name} function of cluster {config.cluster_name}",
                grants,
                policy_inputs,
            )
            if in_vpc:
                acknowledge.checkov(policy, "CKV_AWS_111", VPC_NETWORK_INTERFACES_REASON)
            log_group = function_log_group(self, spec.name, config.cluster_name)
            asynchronous = spec.name != "interruption"  # interruption is polled from SQS
            function = lambda_.Function(
                self,
                spec.name,
                description=f"Nodewright ({config.cluster_name}): {spec.description}",
                runtime=RUNTIME,
                architecture=ARCHITECTURES[config.architecture],
                handler="app.handler",
                code=lambda_.Code.from_asset(
                    str(function_asset_dir(functions_dir, spec.name)), exclude=["__pycache__", "*.pyc"]
                ),
                layers=[layer],
                role=role,
                memory_size=spec.memory_mb,
                timeout=Duration.seconds(spec.timeout_seconds),
                reserved_concurrent_executions=spec.reserved_concurrency,
                environment={**base_environment, **kube_client_environment(config, spec.name)},
                log_group=log_group,
                tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
                # A failed scheduled run is not retried: the next tick runs a minute later
                # with fresh state. The direct spot path retries twice (idempotent handling).
                retry_attempts=(2 if spec.name == "spot_events" else 0) if asynchronous else None,
                max_event_age=Duration.minutes(2) if asynchronous else None,
                on_failure=destinations.SqsDestination(self.failure_queue) if asynchronous else None,
            )
            log_group.grant_write(role)
            if in_vpc:
                resource_of(function).add_property_override(
                    "VpcConfig",
                    {
                        "SubnetIds": list(config.subnet_ids),
                        "SecurityGroupIds": list(security_group_ids or []),
                    },
                )
            self.functions[spec.name] = function
            self.roles[spec.name] = role
            self.log_groups[spec.name] = log_group
            self._policies[spec.name] = policy
            acknowledge.checkov(
                function,
                "CKV_AWS_173",
                "the environment holds names and URLs only, no secrets; the default AWS key encrypts it",
            )
            if not in_vpc:
                acknowledge.checkov(function, "CKV_AWS_117", _outside_vpc_reason(spec.name, config))
            if spec.reserved_concurrency is None:
                acknowledge.checkov(
                    function,
                    "CKV_AWS_115",
                    "event-driven and idempotent; the provisioner, the one that must never run "
                    "twice at once, has reserved concurrency 1, and the interruption queue's "
                    "consumers are bounded by its event source's maximum concurrency",
                )
            self._acknowledge_function(function, asynchronous, config)
        self._depend_on_policies_not_role()
        self._acknowledge_tracing(config)

    @property
    def cluster_roles(self) -> dict[str, iam.Role]:
        """The roles of the functions that call the Kubernetes API (each gets an access entry)."""
        return {name: role for name, role in self.roles.items() if name in CLUSTER_CLIENTS}

    def _depend_on_policies_not_role(self) -> None:
        """Functions must not start before their policies exist. CDK adds DependsOn on the role
        too, which its GetAtt already implies (cfn-lint W3005): keep only the policies (and what
        ``also_depend_on`` added)."""
        stack = Stack.of(self)
        extra = [stack.get_logical_id(resource) for resource in self._extra_dependencies]
        for name, function in self.functions.items():
            default_policy = resource_of(self.roles[name].node.find_child("DefaultPolicy"))
            policies = [stack.get_logical_id(p) for p in (default_policy, resource_of(self._policies[name]))]
            resource_of(function).add_override("DependsOn", [*policies, *extra])

    def also_depend_on(self, resource: CfnResource) -> None:
        """Every function depends on ``resource`` too (so CloudFormation deletes them before it)."""
        self._extra_dependencies.append(resource)
        self._depend_on_policies_not_role()

    @staticmethod
    def _acknowledge_function(
        function: lambda_.Function, asynchronous: bool, config: NodewrightConfig
    ) -> None:
        acknowledge_pinned_runtime(function)
        dlq_reason = (
            "failed asynchronous invocations go to the FailedInvocations queue through an on-failure "
            "destination, which carries the error (a DLQ does not)"
            if asynchronous
            else "invoked by an SQS event source mapping, whose failed messages go to the "
            "interruption queue's DLQ by its redrive policy; a function DLQ applies only to async invocations"
        )
        acknowledge.nag(function, "Serverless-LambdaDLQ", dlq_reason)
        acknowledge.checkov(function, "CKV_AWS_116", dlq_reason)
        if not config.tracing:
            acknowledge.nag(
                function,
                "Serverless-LambdaTracing",
                "X-Ray is opt-in (-c tracing=true): traces of a poll every minute cost more than they tell",
            )

    def _acknowledge_tracing(self, config: NodewrightConfig) -> None:
        """X-Ray's statements land on each role's default policy (added by Lambda's tracing)."""
        if not config.tracing:
            return
        for role in self.roles.values():
            acknowledge.nag(
                role,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray PutTraceSegments/PutTelemetryRecords have no resources",
            )


def log_group_name(cluster_name: str, function: str) -> str:
    """The function's log group: named, so docs and runbooks can point at it."""
    return f"/nodewright/{cluster_name}/{function}"


def function_log_group(scope: Construct, function: str, cluster_name: str) -> logs.LogGroup:
    """A function's named log group, kept 30 days, deleted with the stack."""
    log_group = logs.LogGroup(
        scope,
        f"{function}Logs",
        log_group_name=log_group_name(cluster_name, function),
        retention=logs.RetentionDays.ONE_MONTH,
        removal_policy=RemovalPolicy.DESTROY,
    )
    acknowledge.checkov(
        log_group,
        "CKV_AWS_158",
        "CloudWatch Logs encrypts at rest by default; a customer-managed KMS key adds cost "
        "and a key policy, and the logs hold no secrets",
    )
    return log_group


def function_role(
    scope: Construct, function: str, description: str, grants: tuple[str, ...], inputs: PolicyInputs
) -> tuple[iam.Role, iam.Policy]:
    """A role Lambda assumes, with one policy of ``grants``; each wildcard acknowledged with its reason."""
    role = iam.Role(
        scope,
        f"{function}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=description,
    )
    policy = iam.Policy(scope, f"{function}Policy", statements=statements_for(grants, inputs))
    policy.attach_to_role(role)
    nag = wildcard_resources_for_nag(grants, inputs.cluster_name, inputs.ami_ssm_parameters)
    for resource, reason in nag.items():
        acknowledge.nag(policy, f"AwsSolutions-IAM5[Resource::{resource}]", reason)
    return role, policy


def _outside_vpc_reason(function: str, config: NodewrightConfig) -> str:
    if function not in CLUSTER_CLIENTS:
        return (
            f"the {function} function never talks to the cluster; outside a VPC it reaches the Pricing "
            "API, which has no VPC endpoint in most regions, with no NAT to pay for"
        )
    return (
        "no VPC placement requested (-c subnetIds=...): the functions reach public AWS endpoints and "
        "an EKS endpoint whose public access must then admit Lambda (0.0.0.0/0, since Lambda's egress "
        "addresses are not predictable). A private or CIDR-restricted endpoint needs -c subnetIds, "
        "which puts these functions in the cluster's VPC (docs/deploy.md)"
    )
