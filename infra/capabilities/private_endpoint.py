"""The private wake-up (``-c wakeup=private``): the webhook served inside the cluster's VPC, reachable
from the EKS control plane's network interfaces and nothing outside the VPC, with no public endpoint.

* an **internal** Application Load Balancer in the given private subnets of the cluster's VPC (its
  DNS name resolves to private addresses only), with a security group of its own that admits HTTPS
  (443) from the cluster security group alone: the group EKS puts on the control plane's network
  interfaces in the cluster's subnets, where kube-apiserver's webhook calls into the VPC leave from.
  Its egress reaches nothing (a Lambda target is invoked by the service, not over the network);
* an HTTPS listener with ELB's TLS 1.2/1.3 policy and a certificate the stack makes at deploy time
  (``CertificateResource``): a self-signed certificate for exactly the load balancer's DNS name, its
  key made in the certificate function's memory and imported into ACM, never anywhere else.
  ``nodewright install-webhooks`` renders that certificate as the ``caBundle``. Why not ACM's own
  certificates: a public one needs a domain you own (the load balancer's name is AWS's), and AWS
  Private CA costs $400 a month ($50 in short-lived mode) for one certificate;
* one listener rule: ``POST`` on ``/<secret>/admit`` or ``/<secret>/convert`` (path patterns
  ``/*/admit``, ``/*/convert``) goes to the webhook function; anything else is 404 from the load
  balancer itself, without invoking anything;
* the function's target group, and the one Lambda permission it needs:
  ``elasticloadbalancing.amazonaws.com`` may invoke the webhook from that target group only (its
  ARN pattern: the group has a fixed name so the permission, which must exist before the group
  registers the function, can name it).

The secret path stays (the webhook checks it as on the function URL, rotation included): the cluster
security group is not the control plane's alone, EKS puts it on managed node groups' nodes too, so
any pod could otherwise reach the load balancer. No access logs: they would write every request's
path, the secret, to S3 (docs/deploy.md).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import AssetHashType, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities import acknowledge
from infra.capabilities.cfn import resource_of
from infra.capabilities.functions import function_asset_dir, function_log_group, function_role
from infra.capabilities.layer import ARCHITECTURES, RUNTIME, acknowledge_pinned_runtime
from infra.capabilities.permissions import CERTIFICATE, CERTIFICATE_GRANTS, PolicyInputs
from infra.config import NodewrightConfig
from infra.layer_build import CERTIFICATE_REQUIREMENTS, build_dependency_layer
from infra.metrics import NAMESPACE, service_name

HTTPS = 443
# ELB's policy with TLS 1.3 and 1.2 only (kube-apiserver speaks both).
SSL_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
ADMIT_AND_CONVERT = ("/*/admit", "/*/convert")  # nodewright.api.webhooks ADMIT_PATH, CONVERT_PATH
# The certificate function imports a key or deletes a certificate; a deletion waits while ACM still
# sees the removed listener use it (cloud/wakeup.py delete_certificate).
CERTIFICATE_TIMEOUT = Duration.minutes(5)
CERTIFICATE_MEMORY_MB = 256


def target_group_name(cluster_name: str) -> str:
    """Fixed (32 characters at most, unique per cluster in an account and region), so the Lambda
    permission can name the group before it exists."""
    return f"nodewright-wakeup-{hashlib.sha256(cluster_name.encode()).hexdigest()[:14]}"


class PrivateEndpoint(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: NodewrightConfig,
        webhook: lambda_.Function,
        layer: lambda_.ILayerVersion,
        policy_inputs: PolicyInputs,
        functions_dir: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        assert config.vpc_id, "NodewrightConfig requires vpcId in private mode"
        assert config.cluster_security_group_id, "NodewrightConfig requires clusterSecurityGroupId"
        self.security_group = ec2.CfnSecurityGroup(
            self,
            "SecurityGroup",
            vpc_id=config.vpc_id,
            group_description=f"Nodewright wake-up of cluster {config.cluster_name}: HTTPS from the "
            "cluster security group only",
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=HTTPS,
                    to_port=HTTPS,
                    source_security_group_id=config.cluster_security_group_id,
                    description="kube-apiserver's webhook calls (the control plane's network interfaces)",
                )
            ],
            # A Lambda target is invoked by Elastic Load Balancing, not over the VPC: no egress at all
            # (the rule CDK writes for allowAllOutbound=false: nothing matches it).
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="icmp",
                    from_port=252,
                    to_port=86,
                    cidr_ip="255.255.255.255/32",
                    description="no egress: the webhook is a Lambda target",
                )
            ],
        )
        self.load_balancer = elbv2.CfnLoadBalancer(
            self,
            "LoadBalancer",
            type="application",
            scheme="internal",
            subnets=list(config.load_balancer_subnets),
            security_groups=[self.security_group.attr_group_id],
            load_balancer_attributes=[
                elbv2.CfnLoadBalancer.LoadBalancerAttributeProperty(key=key, value=value)
                for key, value in (
                    ("routing.http.drop_invalid_header_fields.enabled", "true"),
                    ("deletion_protection.enabled", "false"),
                    ("access_logs.s3.enabled", "false"),
                )
            ],
        )
        self.certificate = CertificateResource(
            self,
            "Certificate",
            config=config,
            dns_name=self.load_balancer.attr_dns_name,
            layer=layer,
            policy_inputs=policy_inputs,
            functions_dir=functions_dir,
        )
        name = target_group_name(config.cluster_name)
        permission = lambda_.CfnPermission(
            self,
            "LoadBalancerInvokes",
            action="lambda:InvokeFunction",
            function_name=webhook.function_arn,
            principal="elasticloadbalancing.amazonaws.com",
            source_account=stack.account,
            source_arn=stack.format_arn(
                service="elasticloadbalancing", resource="targetgroup", resource_name=f"{name}/*"
            ),
        )
        self.target_group = elbv2.CfnTargetGroup(
            self,
            "Webhook",
            name=name,
            target_type="lambda",
            targets=[elbv2.CfnTargetGroup.TargetDescriptionProperty(id=webhook.function_arn)],
            health_check_enabled=False,
            target_group_attributes=[
                elbv2.CfnTargetGroup.TargetGroupAttributeProperty(
                    key="lambda.multi_value_headers.enabled", value="false"
                )
            ],
        )
        # Elastic Load Balancing checks the permission when the group registers the function.
        self.target_group.add_resource_dependency(permission)
        self.listener = elbv2.CfnListener(
            self,
            "Https",
            load_balancer_arn=self.load_balancer.ref,
            port=HTTPS,
            protocol="HTTPS",
            ssl_policy=SSL_POLICY,
            certificates=[elbv2.CfnListener.CertificateProperty(certificate_arn=self.certificate.arn)],
            default_actions=[
                elbv2.CfnListener.ActionProperty(
                    type="fixed-response",
                    fixed_response_config=elbv2.CfnListener.FixedResponseConfigProperty(
                        status_code="404", content_type="text/plain", message_body="Not Found"
                    ),
                )
            ],
        )
        elbv2.CfnListenerRule(
            self,
            "AdmitAndConvert",
            listener_arn=self.listener.ref,
            priority=1,
            conditions=[
                elbv2.CfnListenerRule.RuleConditionProperty(
                    field="http-request-method",
                    http_request_method_config=elbv2.CfnListenerRule.HttpRequestMethodConfigProperty(
                        values=["POST"]
                    ),
                ),
                elbv2.CfnListenerRule.RuleConditionProperty(
                    field="path-pattern",
                    path_pattern_config=elbv2.CfnListenerRule.PathPatternConfigProperty(
                        values=list(ADMIT_AND_CONVERT)
                    ),
                ),
            ],
            actions=[
                elbv2.CfnListenerRule.ActionProperty(type="forward", target_group_arn=self.target_group.ref)
            ],
        )
        self.url = f"https://{self.load_balancer.attr_dns_name}/"
        self._acknowledge()

    def _acknowledge(self) -> None:
        no_logs = (
            "access logs would write every request's path, which carries the webhook's secret, to S3; the "
            "webhook counts what it refuses (WebhookRefused{Reason}) and its own log never holds the path"
        )
        acknowledge.nag(self.load_balancer, "AwsSolutions-ELB2", no_logs)
        acknowledge.checkov(self.load_balancer, "CKV_AWS_91", no_logs)


class CertificateResource(Construct):
    """The load balancer's certificate: a custom resource whose function makes and imports it at
    deploy time (``functions/wakeup_certificate``) and deletes it with the stack. ``arn`` is its
    ACM ARN."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: NodewrightConfig,
        dns_name: str,
        layer: lambda_.ILayerVersion,
        policy_inputs: PolicyInputs,
        functions_dir: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role, policy = function_role(
            self,
            CERTIFICATE,
            f"Nodewright: the private wake-up's TLS certificate of cluster {config.cluster_name}",
            CERTIFICATE_GRANTS,
            policy_inputs,
        )
        log_group = function_log_group(self, CERTIFICATE, config.cluster_name)
        self.function = lambda_.Function(
            self,
            "Function",
            description=f"Nodewright ({config.cluster_name}): makes the private wake-up's TLS certificate",
            runtime=RUNTIME,
            architecture=ARCHITECTURES[config.architecture],
            handler="app.handler",
            code=lambda_.Code.from_asset(
                str(function_asset_dir(functions_dir, CERTIFICATE)), exclude=["__pycache__", "*.pyc"]
            ),
            layers=[layer, self._cryptography(config)],
            role=self.role,
            memory_size=CERTIFICATE_MEMORY_MB,
            timeout=CERTIFICATE_TIMEOUT,
            environment={
                "CLUSTER_NAME": config.cluster_name,
                "POWERTOOLS_SERVICE_NAME": service_name(config.cluster_name),
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            },
            log_group=log_group,
        )
        log_group.grant_write(self.role)
        stack = Stack.of(self)
        default_policy = resource_of(self.role.node.find_child("DefaultPolicy"))
        resource_of(self.function).add_override(
            "DependsOn", [stack.get_logical_id(p) for p in (default_policy, resource_of(policy))]
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            properties={"DnsName": dns_name},
        )
        self.arn = self.resource.get_att_string("CertificateArn")
        self._acknowledge()

    def _cryptography(self, config: NodewrightConfig) -> lambda_.ILayerVersion:
        """``cryptography`` for this function alone (``infra.layer_build.build_dependency_layer``); the
        prebuilt directory of ``layerAssetDir`` stands in for it in the fast tests, as for the layer."""
        if config.layer_asset_dir is not None:
            code = lambda_.Code.from_asset(str(config.layer_asset_dir))
        else:
            built = build_dependency_layer("cryptography", config.architecture, CERTIFICATE_REQUIREMENTS)
            code = lambda_.Code.from_asset(
                str(built.root), asset_hash=built.input_hash, asset_hash_type=AssetHashType.CUSTOM
            )
        return lambda_.LayerVersion(
            self,
            "Cryptography",
            code=code,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURES[config.architecture]],
            description="Nodewright: cryptography, for the private wake-up's certificate function",
            removal_policy=RemovalPolicy.DESTROY,
        )

    def _acknowledge(self) -> None:
        reason = (
            "runs at deploy and destroy only, for CloudFormation, and answers it itself (FAILED with the "
            "reason): a DLQ or a trace would hold nothing CloudFormation's events do not"
        )
        for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaTracing"):
            acknowledge.nag(self.function, rule, reason)
        acknowledge_pinned_runtime(self.function)
        for check in ("CKV_AWS_115", "CKV_AWS_116"):
            acknowledge.checkov(self.function, check, reason)
        acknowledge.checkov(
            self.function,
            "CKV_AWS_117",
            "it calls ACM only, through ACM's public endpoint; in a VPC it would need a NAT or an "
            "ACM endpoint for nothing",
        )
        acknowledge.checkov(self.function, "CKV_AWS_173", "the environment holds the cluster's name only")
