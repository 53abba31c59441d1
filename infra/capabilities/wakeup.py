"""The wake-up: the webhook the API server calls when kube-scheduler cannot place a pod, and that
converts v1beta1 NodePools and EC2NodeClasses (``-c wakeup=``):

* ``public`` (the default): a Lambda function URL, ``AuthType NONE`` (below);
* ``private``: an internal Application Load Balancer in the cluster's VPC that only the cluster
  security group may reach, with a certificate the stack makes (``private_endpoint.py``); no
  function URL and no permission for ``*``;
* ``false``: none of this module; pods wait for the minute schedule.

Public and private both have:

* a Secrets Manager secret (48 letters and digits, generated per stack): the URL's first path
  segment. kube-apiserver cannot sign requests (the function URL is ``AuthType NONE``; the private
  load balancer admits the cluster security group, which is on managed nodes too), so the secret
  path is what tells the API server from a stranger, who gets 404 (docs/deploy.md, threat model).
  It rotates without an outage: the webhook reads every version (no ``VersionStage`` condition on
  its grant) and accepts ``AWSPREVIOUS`` during a rotation window
  (``nodewright.wakeup.webhook``);
* the ``webhook`` function (``functions/webhook``): answers ``allowed: true`` at once and invokes
  the provisioner asynchronously. Its role can read that one secret and invoke the provisioner's
  ``wakeup`` alias, nothing else: no cluster access, no EC2;
* the provisioner's ``wakeup`` alias (on ``$LATEST``, so it always runs the deployed code) with its
  own asynchronous-invocation settings: **no retries** and a **60 s maximum event age**, and no
  failure destination. The provisioner's reserved concurrency of 1 is per function, aliases
  included, so a wake-up never runs beside a scheduled invocation: it is throttled, waits in
  Lambda's queue for at most a minute and is then dropped (the schedule is the safety net), and the
  provisioner drops at once one that arrives after its loop already saw the cluster
  (``nodewright.provisioning.loop.is_stale_wakeup``). Without a destination, a dropped wake-up does
  not land in the FailedInvocations queue, whose alarm is for real failures;
* the webhook's reserved concurrency (``WEBHOOK_CONCURRENCY``) bounds what a flood can cost and how
  many wake-ups can be in flight: each container sends at most one a second; a request beyond it
  gets 429, which the API server treats as ``failurePolicy: Ignore``;
* outputs: the URL (the function URL, or ``https://<load balancer>/``) and the secret's ARN, which
  ``nodewright install-webhooks`` reads, and in private mode the certificate's ARN (its caBundle).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from nodewright.spec import deployment

from infra.capabilities import acknowledge
from infra.capabilities.cfn import resource_of
from infra.capabilities.functions import function_asset_dir, function_log_group
from infra.capabilities.layer import ARCHITECTURES, RUNTIME, acknowledge_pinned_runtime
from infra.capabilities.permissions import WEBHOOK, PolicyInputs
from infra.capabilities.private_endpoint import PrivateEndpoint
from infra.config import WAKEUP_PRIVATE, NodewrightConfig

WAKEUP_ALIAS = "wakeup"
# Sizing, concurrency and the alias's event age, and why: nodewright/spec/deployment.py.
WEBHOOK_MEMORY_MB = deployment.WEBHOOK.memory_mb
WEBHOOK_TIMEOUT = Duration.seconds(deployment.WEBHOOK.timeout_seconds)
WEBHOOK_CONCURRENCY = deployment.WEBHOOK_CONCURRENCY
WAKEUP_MAX_EVENT_AGE = Duration.seconds(deployment.WAKEUP_MAX_EVENT_AGE_SECONDS)
SECRET_LENGTH = 48


class Wakeup(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: NodewrightConfig,
        layer: lambda_.ILayerVersion,
        provisioner: lambda_.Function,
        environment: dict[str, str],
        functions_dir: Path,
        policy_inputs: PolicyInputs,
    ) -> None:
        super().__init__(scope, construct_id)
        self.secret = secretsmanager.Secret(
            self,
            "PathSecret",
            description=f"Nodewright ({config.cluster_name}): the wake-up function URL's secret path",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=SECRET_LENGTH, exclude_punctuation=True, include_space=False
            ),
        )
        rotation_reason = (
            "the secret is part of the URL the API server's webhook configurations hold, which a "
            "rotation Lambda cannot rewrite: an operator rotates it with put-secret-value and then "
            "`nodewright install-webhooks --apply` (docs/deploy.md); the webhook accepts AWSCURRENT "
            "and AWSPREVIOUS meanwhile and rereads them every minute (-c webhookSecretMaxAge), so "
            "nothing is refused"
        )
        acknowledge.nag(self.secret, "AwsSolutions-SMG4", rotation_reason)
        acknowledge.checkov(
            self.secret,
            "CKV_AWS_149",
            "encrypted with the account's aws/secretsmanager key; only the webhook's role and the "
            "operator running install-webhooks read it",
        )
        self.alias = lambda_.Alias(
            self,
            "ProvisionerWakeupAlias",
            alias_name=WAKEUP_ALIAS,
            version=provisioner.latest_version,
            description="what the webhook invokes: no retries, 60 s maximum event age, no destination",
            retry_attempts=deployment.WAKEUP_RETRY_ATTEMPTS,
            max_event_age=WAKEUP_MAX_EVENT_AGE,
        )
        acknowledge.nag(
            self.alias,
            "Serverless-LambdaAsyncFailureDestination",
            "a wake-up that expires unsent is superseded by the schedule and the loop that throttled "
            "it; in the FailedInvocations queue it would page someone for a design decision",
        )
        self.role = iam.Role(
            self,
            "WebhookRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Nodewright webhook of cluster {config.cluster_name}: wakes the provisioner",
        )
        self.log_group = function_log_group(self, WEBHOOK, config.cluster_name)
        self.function = lambda_.Function(
            self,
            WEBHOOK,
            description=f"Nodewright ({config.cluster_name}): wakes the provisioner when a pod "
            "becomes unschedulable",
            runtime=RUNTIME,
            architecture=ARCHITECTURES[config.architecture],
            handler="app.handler",
            code=lambda_.Code.from_asset(
                str(function_asset_dir(functions_dir, WEBHOOK)), exclude=["__pycache__", "*.pyc"]
            ),
            layers=[layer],
            role=self.role,
            memory_size=WEBHOOK_MEMORY_MB,
            timeout=WEBHOOK_TIMEOUT,
            reserved_concurrent_executions=WEBHOOK_CONCURRENCY,
            environment={
                **environment,
                "WAKE_FUNCTION": self.alias.function_arn,
                "WEBHOOK_SECRET_ARN": self.secret.secret_arn,
                "WEBHOOK_SECRET_MAX_AGE_SECONDS": f"{config.webhook_secret_max_age_seconds:g}",
            },
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if config.tracing else lambda_.Tracing.DISABLED,
        )
        # Least privilege: invoke the one alias, read the one secret, write the one log group.
        self.alias.grant_invoke(self.role)
        self.secret.grant_read(self.role)
        self.log_group.grant_write(self.role)
        # Start after the grants exist; the role itself is implied by GetAtt (cfn-lint W3005).
        policy = resource_of(self.role.node.find_child("DefaultPolicy"))
        resource_of(self.function).add_override("DependsOn", [Stack.of(self).get_logical_id(policy)])
        # What the API server calls: the function URL, or the private load balancer.
        self.private: PrivateEndpoint | None = None
        self.certificate_arn: str | None = None
        if config.wakeup == WAKEUP_PRIVATE:
            self.private = PrivateEndpoint(
                self,
                "Private",
                config=config,
                webhook=self.function,
                layer=layer,
                policy_inputs=policy_inputs,
                functions_dir=functions_dir,
            )
            self.url = self.private.url
            self.certificate_arn = self.private.certificate.arn
        else:
            function_url = self.function.add_function_url(auth_type=lambda_.FunctionUrlAuthType.NONE)
            acknowledge.checkov(
                function_url,
                "CKV_AWS_258",
                "kube-apiserver calls webhooks without AWS signatures, so IAM auth is impossible; the "
                "path's per-stack secret, 404 otherwise, body and rate limits and a role that can only "
                "wake the provisioner bound what a caller can do (docs/deploy.md, threat model)",
            )
            self.url = function_url.url
        self._acknowledge(config)

    def _acknowledge(self, config: NodewrightConfig) -> None:
        function = self.function
        acknowledge_pinned_runtime(function)
        dlq_reason = (
            "invoked synchronously through its function URL by the API server, which ignores a "
            "failure (failurePolicy Ignore); a DLQ applies only to asynchronous invocations"
        )
        acknowledge.nag(function, "Serverless-LambdaDLQ", dlq_reason)
        acknowledge.checkov(function, "CKV_AWS_116", dlq_reason)
        acknowledge.checkov(
            function,
            "CKV_AWS_173",
            "the environment holds names and ARNs only; the secret itself is in Secrets Manager",
        )
        acknowledge.checkov(
            function,
            "CKV_AWS_117",
            "the webhook talks to no VPC resource: the API server reaches it through its function URL or "
            "the private load balancer (which invokes it as a Lambda target), and it calls the Lambda and "
            "Secrets Manager APIs; in a VPC it would need a NAT or endpoints to do that",
        )
        if not config.tracing:
            acknowledge.nag(
                function,
                "Serverless-LambdaTracing",
                "X-Ray is opt-in (-c tracing=true), as for the other functions",
            )
        else:
            acknowledge.nag(
                self.role,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray PutTraceSegments/PutTelemetryRecords have no resources",
            )
