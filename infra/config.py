"""Deploy-time settings, read from CDK context (``cdk deploy -c clusterName=NAME -c …``).

Everything is known at synth time: no lookups, so ``cdk synth`` works offline and
without credentials. (``nodewright doctor --cluster NAME`` reads the cluster's own VPC
configuration and prints the ``-c vpcId=… -c subnetIds=…`` flags to place the functions in it.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Each function container's API server request rate limit (Karpenter's KUBE_CLIENT_QPS/KUBE_CLIENT_BURST):
# the defaults are the layer's, where the numbers are reasoned (a plain module, as nodewright.spec),
# as is the wake-up webhook's secret reread interval's.
from nodewright.settings import KUBE_CLIENT_BURST, KUBE_CLIENT_QPS, WEBHOOK_SECRET_MAX_AGE_SECONDS

REBALANCE_MODES = ("replace", "event-only")
# How the API server reaches the wake-up and CRD conversion webhook (infra/capabilities/wakeup.py):
# a public Lambda function URL, an internal Application Load Balancer in the cluster's VPC, or
# none (the minute schedule only). ``-c wakeup=true`` is public, as before there were three.
WAKEUP_PUBLIC, WAKEUP_PRIVATE, WAKEUP_OFF = "public", "private", "off"
WAKEUP_MODES = (WAKEUP_PUBLIC, WAKEUP_PRIVATE, WAKEUP_OFF)
# Karpenter's --min-values-policy; the layer's settings.MIN_VALUES_POLICIES (infra imports no layer code).
MIN_VALUES_POLICIES = ("Strict", "BestEffort")
ARCHITECTURES = ("arm64", "x86_64")
# -c webhookSecretMaxAge at most an hour: a withdrawn secret (the rotation window closed early) stays
# accepted that long; below a second each request of a busy container would be a GetSecretValue.
MAX_WEBHOOK_SECRET_MAX_AGE_SECONDS = 3600
# EKS cluster names: 1-100 characters, alphanumerics, hyphens and underscores, starting alphanumeric.
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
_ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
# arn:<partition>:iam::<account>:role[/path/]<name>; a path is "/" or "/segments/".
_ROLE_ARN = re.compile(
    r"^arn:(?P<partition>aws|aws-cn|aws-us-gov|aws-iso[a-z-]*):iam::(?P<account>\d{12}):role"
    r"(?P<path>/(?:[\x21-\x7e]+/)?)(?P<name>[\w+=,.@-]{1,64})$"
)
_KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$")
_SNS_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8,17}$")
# Created node role: a readable, deterministic name when it fits IAM's 64 characters with the
# longest region name (the role is account-wide, so the region keeps two stacks apart).
NODE_ROLE_PREFIX = "NodewrightNode-"
LONGEST_REGION = len("ap-southeast-5")


def created_node_role_name(cluster_name: str) -> str | None:
    """The created node role's name without its region suffix, or None (CloudFormation names it)."""
    name = f"{NODE_ROLE_PREFIX}{cluster_name}-"
    return name if len(name) + LONGEST_REGION <= 64 else None


class ConfigError(ValueError):
    """A context value is missing or malformed; the message names the -c flag to fix."""


@dataclass(frozen=True)
class NodeRoleRef:
    """An existing node role: its name (what instance profiles and EC2NodeClass ``spec.role`` use)
    and, when given as an ARN, the ARN with its IAM path (what PassRole is granted on)."""

    name: str
    arn: str | None = None


def _split(value: Any) -> tuple[str, ...]:
    """A context list: ``a,b`` on the command line, or a JSON list in cdk.json."""
    if value is None or value == "":
        return ()
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(str(item).strip() for item in items if str(item).strip())


@dataclass(frozen=True)
class NodewrightConfig:
    cluster_name: str
    # An existing node role (EC2NodeClass spec.role); None: the stack creates one with its
    # EC2_LINUX access entry. PassRole is allowed for this one role only.
    existing_node_role: NodeRoleRef | None = None
    rebalance_mode: str = "replace"
    poll_interval_seconds: float = 5.0
    alarm_email: str | None = None
    alarm_topic_arn: str | None = None
    architecture: str = "arm64"
    tracing: bool = False
    # The API server's wake-up (webhook, secret, provisioner alias; infra/capabilities/wakeup.py),
    # reached through a public function URL, a private (internal) load balancer, or off: pods wait
    # for the minute schedule. True/False (older callers of NodewrightAutoscaler): public/off.
    wakeup: str | bool = WAKEUP_PUBLIC
    # Private mode: the cluster security group (resourcesVpcConfig.clusterSecurityGroupId, on the
    # control plane's network interfaces), the only source the load balancer admits on 443; and its
    # subnets when not subnetIds (two or more, in the cluster's VPC: -c vpcId).
    cluster_security_group_id: str | None = None
    wakeup_subnet_ids: tuple[str, ...] = ()
    # Karpenter's --min-values-policy (MIN_VALUES_POLICY) and SpotToSpotConsolidation feature gate
    # (SPOT_TO_SPOT_CONSOLIDATION), read by the layer's settings.
    min_values_policy: str = "Strict"
    spot_to_spot_consolidation: bool = False
    # Karpenter's NodeOverlay feature gate (NODE_OVERLAY; off by default in v1.14, as there).
    node_overlay: bool = False
    # Static NodePools (spec.replicas) are run: Karpenter v1.14's StaticCapacity feature gate, off by
    # default there as here.
    static_capacity: bool = False
    # The request rate limit of each function container towards the API server (-c kubeClientQPS,
    # -c kubeClientBurst): tokens a second and bucket size. The API server sees the containers at
    # work times these.
    kube_client_qps: float = KUBE_CLIENT_QPS
    kube_client_burst: int = KUBE_CLIENT_BURST
    # How often a warm wake-up webhook container rereads its secret path (-c webhookSecretMaxAge,
    # seconds; WEBHOOK_SECRET_MAX_AGE_SECONDS): how long a withdrawn previous secret stays accepted.
    webhook_secret_max_age_seconds: float = WEBHOOK_SECRET_MAX_AGE_SECONDS
    # VPC placement of the functions that talk to the cluster (private or CIDR-restricted
    # endpoints); empty: outside any VPC (the cluster endpoint must be public to Lambda).
    vpc_id: str | None = None
    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    # Customer-managed KMS keys the EC2NodeClasses' blockDeviceMappings name (kmsKeyID).
    ebs_kms_key_arns: tuple[str, ...] = ()
    # SSM parameters (names, "/"-rooted, "*" allowed) the EC2NodeClasses' amiSelectorTerms[].ssmParameter
    # name, in this account and region; the public /aws/service/* ones are always readable.
    ami_ssm_parameters: tuple[str, ...] = ()
    # A prebuilt layer directory (containing python/): skips the pip build (fast tests).
    layer_asset_dir: Path | None = None
    # Where the functions' folders live (functions/<name>/app.py).
    functions_dir: Path | None = None

    def __post_init__(self) -> None:
        if isinstance(self.wakeup, bool):
            object.__setattr__(self, "wakeup", WAKEUP_PUBLIC if self.wakeup else WAKEUP_OFF)
        if self.wakeup not in WAKEUP_MODES:
            raise ConfigError(f"wakeup {self.wakeup!r}: use public, private or false")
        if not _CLUSTER_NAME.match(self.cluster_name):
            raise ConfigError(
                f"clusterName {self.cluster_name!r} is not an EKS cluster name: "
                "1-100 letters, digits, '-' or '_', starting with a letter or digit"
            )
        role = self.existing_node_role
        if role is not None:
            if not _ROLE_NAME.match(role.name):
                raise ConfigError(f"nodeRoleName {role.name!r} is not an IAM role name")
            if role.arn is not None and not _ROLE_ARN.match(role.arn):
                raise ConfigError(
                    f"nodeRoleArn {role.arn!r} is not an IAM role ARN "
                    "(arn:aws:iam::123456789012:role/[path/]Name)"
                )
        if self.rebalance_mode not in REBALANCE_MODES:
            raise ConfigError(
                f"interruptionMode {self.rebalance_mode!r}: use one of {', '.join(REBALANCE_MODES)}"
            )
        if self.min_values_policy not in MIN_VALUES_POLICIES:
            raise ConfigError(
                f"minValuesPolicy {self.min_values_policy!r}: use one of {', '.join(MIN_VALUES_POLICIES)}"
            )
        if not 1 <= self.poll_interval_seconds <= 30:
            raise ConfigError(f"pollInterval {self.poll_interval_seconds:g}: use 1-30 seconds")
        if not (0 < self.kube_client_qps < float("inf")):
            raise ConfigError(f"kubeClientQPS {self.kube_client_qps:g}: use requests a second above zero")
        if self.kube_client_burst < 1:
            raise ConfigError(
                f"kubeClientBurst {self.kube_client_burst}: use a whole number of requests, 1 or more"
            )
        if not 1 <= self.webhook_secret_max_age_seconds <= MAX_WEBHOOK_SECRET_MAX_AGE_SECONDS:
            raise ConfigError(
                f"webhookSecretMaxAge {self.webhook_secret_max_age_seconds:g}: use 1-"
                f"{MAX_WEBHOOK_SECRET_MAX_AGE_SECONDS} seconds"
            )
        if self.architecture not in ARCHITECTURES:
            raise ConfigError(f"architecture {self.architecture!r}: use one of {', '.join(ARCHITECTURES)}")
        if self.alarm_email and self.alarm_topic_arn:
            raise ConfigError("give alarmEmail or alarmTopicArn, not both")
        if self.alarm_email and not _EMAIL.match(self.alarm_email):
            raise ConfigError(f"alarmEmail {self.alarm_email!r} is not an e-mail address")
        if self.alarm_topic_arn and not _SNS_TOPIC_ARN.match(self.alarm_topic_arn):
            raise ConfigError(
                f"alarmTopicArn {self.alarm_topic_arn!r} is not an SNS topic ARN "
                "(arn:aws:sns:REGION:ACCOUNT:NAME)"
            )
        self._check_vpc()
        self._check_private_wakeup()
        for name in self.ami_ssm_parameters:
            if not name.startswith("/") or any(c.isspace() for c in name):
                raise ConfigError(
                    f"amiSsmParameters: {name!r} is not an SSM parameter name: give it with its leading '/' "
                    "(e.g. /platform/golden-ami or /platform/*), as the EC2NodeClass's ssmParameter names it"
                )
        for key in self.ebs_kms_key_arns:
            if not _KMS_KEY_ARN.match(key):
                raise ConfigError(
                    f"ebsKmsKeyArns: {key!r} is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/UUID; "
                    "an alias cannot be granted on)"
                )

    def _check_vpc(self) -> None:
        checks = (
            ("vpcId", (self.vpc_id,) if self.vpc_id else (), _VPC_ID),
            ("subnetIds", self.subnet_ids, _SUBNET_ID),
            ("securityGroupIds", self.security_group_ids, _SECURITY_GROUP_ID),
        )
        for flag, values, pattern in checks:
            for value in values:
                if not pattern.match(value):
                    raise ConfigError(f"{flag}: {value!r} is not a {flag.removesuffix('s')}")
        if (self.vpc_id or self.security_group_ids) and not self.subnet_ids and not self.wakeup_subnet_ids:
            raise ConfigError(
                "subnetIds is not set: a VPC placement needs the private subnets the functions run in "
                "(-c subnetIds=subnet-a,subnet-b; `nodewright doctor --cluster NAME` prints the cluster's)"
            )
        if self.subnet_ids and not (self.vpc_id or self.security_group_ids):
            raise ConfigError(
                "subnetIds needs vpcId (the stack creates a security group allowing HTTPS out) "
                "or securityGroupIds (yours)"
            )

    def _check_private_wakeup(self) -> None:
        for value in self.wakeup_subnet_ids:
            if not _SUBNET_ID.match(value):
                raise ConfigError(f"wakeupSubnetIds: {value!r} is not a subnetId")
        group = self.cluster_security_group_id
        if group and not _SECURITY_GROUP_ID.match(group):
            raise ConfigError(f"clusterSecurityGroupId: {group!r} is not a security group id")
        if self.wakeup != WAKEUP_PRIVATE:
            if group or self.wakeup_subnet_ids:
                raise ConfigError("clusterSecurityGroupId and wakeupSubnetIds are for -c wakeup=private only")
            return
        where = "(`aws eks describe-cluster --name NAME --query cluster.resourcesVpcConfig` shows them)"
        if not self.vpc_id:
            raise ConfigError(
                f"wakeup=private needs -c vpcId: the cluster's VPC, where its load balancer goes {where}"
            )
        if not group:
            raise ConfigError(
                "wakeup=private needs -c clusterSecurityGroupId: the cluster security group, the only "
                f"source its load balancer admits {where}"
            )
        if len(set(self.load_balancer_subnets)) < 2:
            raise ConfigError(
                "wakeup=private needs two or more private subnets of the cluster's VPC in different zones "
                f"for its load balancer: -c subnetIds (where the functions run) or -c wakeupSubnetIds {where}"
            )

    @property
    def in_vpc(self) -> bool:
        return bool(self.subnet_ids)

    @property
    def wakeup_enabled(self) -> bool:
        return self.wakeup != WAKEUP_OFF

    @property
    def load_balancer_subnets(self) -> tuple[str, ...]:
        """Private mode: the internal load balancer's subnets."""
        return self.wakeup_subnet_ids or self.subnet_ids

    @property
    def creates_node_role(self) -> bool:
        return self.existing_node_role is None

    @classmethod
    def from_context(cls, get: Any) -> NodewrightConfig:
        """Build from ``node.try_get_context``; ``clusterName`` is the only required value."""
        cluster_name = get("clusterName")
        if not cluster_name:
            raise ConfigError(
                "clusterName is not set: run `cdk deploy -c clusterName=<your EKS cluster>` "
                "(or `cdk synth -c clusterName=demo` to look at the template)"
            )
        cluster_name = str(cluster_name)
        try:
            poll = float(get("pollInterval") or 5.0)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"pollInterval {get('pollInterval')!r} is not a number of seconds") from exc
        kube_client_qps = _number(get("kubeClientQPS"), "kubeClientQPS", KUBE_CLIENT_QPS)
        kube_client_burst = _number(get("kubeClientBurst"), "kubeClientBurst", KUBE_CLIENT_BURST)
        if not kube_client_burst.is_integer():
            raise ConfigError(f"kubeClientBurst {get('kubeClientBurst')!r} is not a whole number of requests")
        secret_max_age = _number(
            get("webhookSecretMaxAge"), "webhookSecretMaxAge", WEBHOOK_SECRET_MAX_AGE_SECONDS
        )
        layer_dir = get("layerAssetDir")
        functions_dir = get("functionsDir")
        return cls(
            cluster_name=cluster_name,
            existing_node_role=node_role_from(get("nodeRoleName"), get("nodeRoleArn")),
            rebalance_mode=str(get("interruptionMode") or "replace"),
            poll_interval_seconds=poll,
            alarm_email=get("alarmEmail") or None,
            alarm_topic_arn=get("alarmTopicArn") or None,
            architecture=str(get("architecture") or "arm64"),
            tracing=str(get("tracing") or "false").lower() in ("1", "true", "yes"),
            wakeup=_wakeup_mode(get("wakeup")),
            cluster_security_group_id=get("clusterSecurityGroupId") or None,
            wakeup_subnet_ids=_split(get("wakeupSubnetIds")),
            min_values_policy=str(get("minValuesPolicy") or "Strict"),
            spot_to_spot_consolidation=_flag(get("spotToSpotConsolidation"), "spotToSpotConsolidation"),
            node_overlay=_flag(get("nodeOverlay"), "nodeOverlay"),
            static_capacity=_flag(get("staticCapacity"), "staticCapacity"),
            kube_client_qps=kube_client_qps,
            kube_client_burst=int(kube_client_burst),
            webhook_secret_max_age_seconds=secret_max_age,
            vpc_id=get("vpcId") or None,
            subnet_ids=_split(get("subnetIds")),
            security_group_ids=_split(get("securityGroupIds")),
            ebs_kms_key_arns=_split(get("ebsKmsKeyArns")),
            ami_ssm_parameters=_split(get("amiSsmParameters")),
            layer_asset_dir=Path(layer_dir) if layer_dir else None,
            functions_dir=Path(functions_dir) if functions_dir else None,
        )


def _wakeup_mode(value: Any) -> str:
    """``-c wakeup=public|private|false``; absent or ``true``: public (what it was when it was a flag)."""
    text = str(value).strip().lower() if value is not None else WAKEUP_PUBLIC
    if text in ("1", "true", "yes", "on", WAKEUP_PUBLIC):
        return WAKEUP_PUBLIC
    if text in ("0", "false", "no", WAKEUP_OFF, ""):
        return WAKEUP_OFF
    if text == WAKEUP_PRIVATE:
        return WAKEUP_PRIVATE
    raise ConfigError(f"wakeup {value!r}: use public, private or false")


def _number(value: Any, flag: str, default: float) -> float:
    """A numeric context value (``-c flag=20``), ``default`` when absent; anything else is refused."""
    if value is None or value == "":
        return float(default)
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{flag} {value!r} is not a number") from exc


def _flag(value: Any, flag: str) -> bool:
    """A boolean context value (``-c flag=true``), false when absent; anything else is refused."""
    text = str(value).lower() if value is not None else "false"
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{flag} {value!r}: use true or false")


def node_role_from(name: Any, arn: Any) -> NodeRoleRef | None:
    """``nodeRoleArn`` (any IAM path) or ``nodeRoleName`` (path /), or None to create the role."""
    if name and arn:
        raise ConfigError("give nodeRoleName or nodeRoleArn, not both (the ARN carries the name)")
    if arn:
        match = _ROLE_ARN.match(str(arn))
        if not match:
            raise ConfigError(
                f"nodeRoleArn {arn!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/[path/]Name)"
            )
        return NodeRoleRef(name=match["name"], arn=str(arn))
    if name:
        return NodeRoleRef(name=str(name))
    return None
