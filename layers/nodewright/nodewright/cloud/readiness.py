"""What ``nodewright doctor`` reads from AWS (with the operator's credentials). Read only.

Each function answers one question with plain data; the judging is in ``nodewright.cli.doctor``.
``Clients`` is how a function gets a botocore client for a service: ``aws.client`` by default,
anything with the same methods in tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud import aws
from nodewright.settings import Settings

Clients = Callable[[str], Any]

# The stack's outputs the doctor reads (infra/capabilities/outputs.py writes them; a test keeps
# the two lists equal). Values that may be absent are "none".
OUTPUT_NODE_ROLE_ARN = "NodewrightNodeRoleArn"
OUTPUT_NODE_ROLE_NAME = "NodewrightNodeRoleName"
OUTPUT_CLUSTER_ACCESS_ROLES = "NodewrightClusterAccessRoles"
OUTPUT_FUNCTION_SUBNETS = "NodewrightFunctionSubnets"
OUTPUT_FUNCTION_SECURITY_GROUPS = "NodewrightFunctionSecurityGroups"
OUTPUT_INTERRUPTION_QUEUE = "NodewrightInterruptionQueueUrl"
OUTPUT_ALARM_TOPIC = "NodewrightAlarmTopicArn"
OUTPUT_WEBHOOK_URL = "NodewrightWebhookUrl"
OUTPUT_WEBHOOK_SECRET = "NodewrightWebhookSecretArn"
OUTPUT_WAKEUP_MODE = "NodewrightWakeupMode"
OUTPUT_WAKEUP_CERTIFICATE = "NodewrightWakeupCertificateArn"
OUTPUT_WAKEUP_LOAD_BALANCER = "NodewrightWakeupLoadBalancerArn"
OUTPUT_WAKEUP_SECURITY_GROUP = "NodewrightWakeupSecurityGroup"
OUTPUT_FUNCTION_ROLES = "NodewrightFunctionRoles"
OUTPUT_STATE_TABLE = "NodewrightStateTableArn"
OUTPUT_FAILURE_QUEUE = "NodewrightFailedInvocationsQueueArn"
OUTPUT_WAKEUP_ALIAS = "NodewrightWakeupAliasArn"
STACK_OUTPUTS = (
    OUTPUT_NODE_ROLE_ARN,
    OUTPUT_NODE_ROLE_NAME,
    OUTPUT_CLUSTER_ACCESS_ROLES,
    OUTPUT_FUNCTION_SUBNETS,
    OUTPUT_FUNCTION_SECURITY_GROUPS,
    OUTPUT_INTERRUPTION_QUEUE,
    OUTPUT_ALARM_TOPIC,
    OUTPUT_WEBHOOK_URL,
    OUTPUT_WEBHOOK_SECRET,
    OUTPUT_WAKEUP_MODE,
    OUTPUT_WAKEUP_CERTIFICATE,
    OUTPUT_WAKEUP_LOAD_BALANCER,
    OUTPUT_WAKEUP_SECURITY_GROUP,
    OUTPUT_FUNCTION_ROLES,
    OUTPUT_STATE_TABLE,
    OUTPUT_FAILURE_QUEUE,
    OUTPUT_WAKEUP_ALIAS,
)
NONE = "none"
SPOT_SERVICE_LINKED_ROLE = "AWSServiceRoleForEC2Spot"
# How the API server reaches the wake-up (infra/config.py WAKEUP_MODES, the output's values).
PUBLIC, PRIVATE, OFF = "public", "private", "off"


def wakeup_mode(outputs: dict[str, str]) -> str:
    """``public``, ``private`` or ``off``; a stack from before the output: public when it has a URL."""
    mode = outputs.get(OUTPUT_WAKEUP_MODE)
    if mode in (PUBLIC, PRIVATE, OFF):
        return mode
    return OFF if outputs.get(OUTPUT_WEBHOOK_URL, NONE) == NONE else PUBLIC


def default_clients(settings: Settings) -> Clients:
    return lambda service: aws.client(service, settings)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def stack_outputs(clients: Clients, stack_name: str) -> dict[str, str] | None:
    """The stack's outputs by key; None when there is no such stack."""
    try:
        (stack,) = clients("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        if _code(exc) == "ValidationError":  # "Stack with id … does not exist"
            return None
        raise
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def caller_principal_arn(clients: Clients) -> str:
    """The caller's IAM principal as an EKS access entry names it: an assumed role's role ARN
    (``arn:aws:sts::1:assumed-role/R/session`` → ``arn:aws:iam::1:role/R``), else the ARN itself."""
    arn = str(clients("sts").get_caller_identity()["Arn"])
    assumed = re.fullmatch(r"arn:([\w-]+):sts::(\d+):assumed-role/([^/]+)/.*", arn)
    if assumed:
        partition, account, role_name = assumed.groups()
        return f"arn:{partition}:iam::{account}:role/{role_name}"
    return arn


def describe_cluster(clients: Clients, cluster_name: str) -> dict[str, Any] | None:
    try:
        return dict(clients("eks").describe_cluster(name=cluster_name)["cluster"])
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return None
        raise


def access_entries(clients: Clients, cluster_name: str) -> dict[str, dict[str, Any]]:
    """Principal ARN → its access entry (``type``, ``kubernetesGroups``)."""
    eks = clients("eks")
    entries: dict[str, dict[str, Any]] = {}
    for page in eks.get_paginator("list_access_entries").paginate(clusterName=cluster_name):
        for arn in page.get("accessEntries", []):
            entries[arn] = eks.describe_access_entry(clusterName=cluster_name, principalArn=arn)[
                "accessEntry"
            ]
    return entries


@dataclass(frozen=True)
class RoleFacts:
    arn: str
    trusts_ec2: bool
    policies: frozenset[str] = field(default_factory=frozenset)  # attached AWS-managed policies


def role(clients: Clients, name: str) -> RoleFacts | None:
    iam = clients("iam")
    try:
        found = iam.get_role(RoleName=name)["Role"]
    except ClientError as exc:
        if _code(exc) == "NoSuchEntity":
            return None
        raise
    trust = found.get("AssumeRolePolicyDocument") or {}
    if isinstance(trust, str):
        trust = json.loads(trust)
    principals: set[str] = set()
    for statement in trust.get("Statement", []):
        if statement.get("Effect") == "Allow":
            service = (statement.get("Principal") or {}).get("Service", [])
            principals.update([service] if isinstance(service, str) else service)
    policies = {  # AWS-managed ones only: a customer policy of the same name is not the same policy
        p["PolicyName"]
        for page in iam.get_paginator("list_attached_role_policies").paginate(RoleName=name)
        for p in page.get("AttachedPolicies", [])
        if ":iam::aws:policy/" in p["PolicyArn"]
    }
    return RoleFacts(
        arn=found["Arn"],
        trusts_ec2=bool(principals & {"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}),
        policies=frozenset(policies),
    )


def subnets(clients: Clients, subnet_ids: list[str]) -> list[dict[str, Any]]:
    if not subnet_ids:
        return []
    return list(clients("ec2").describe_subnets(SubnetIds=subnet_ids)["Subnets"])


def tagged_subnets(clients: Clients, vpc_id: str, key: str, value: str) -> list[str]:
    filters = [{"Name": "vpc-id", "Values": [vpc_id]}, {"Name": f"tag:{key}", "Values": [value]}]
    return [s["SubnetId"] for s in clients("ec2").describe_subnets(Filters=filters)["Subnets"]]


def security_groups(clients: Clients, group_ids: list[str]) -> list[dict[str, Any]]:
    if not group_ids:
        return []
    return list(clients("ec2").describe_security_groups(GroupIds=group_ids)["SecurityGroups"])


def default_routes(clients: Clients, subnet_ids: list[str], vpc_id: str) -> dict[str, str | None]:
    """Subnet → where its 0.0.0.0/0 route goes (``nat-…``, ``igw-…``, ``tgw-…``) or None."""
    tables = clients("ec2").describe_route_tables(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
        "RouteTables"
    ]
    main = next((t for t in tables if any(a.get("Main") for a in t.get("Associations", []))), None)
    by_subnet = {a["SubnetId"]: t for t in tables for a in t.get("Associations", []) if a.get("SubnetId")}
    found: dict[str, str | None] = {}
    for subnet_id in subnet_ids:
        table = by_subnet.get(subnet_id, main) or {}
        target = None
        for route in table.get("Routes", []):
            if route.get("DestinationCidrBlock") == "0.0.0.0/0" and route.get("State", "active") == "active":
                target = (
                    route.get("NatGatewayId")
                    or route.get("TransitGatewayId")
                    or route.get("GatewayId")
                    or route.get("NetworkInterfaceId")
                )
        found[subnet_id] = target
    return found


def vpc_endpoint_services(clients: Clients, vpc_id: str) -> set[str]:
    """The AWS services with an available endpoint in the VPC (``com.amazonaws.<region>.ec2`` → ``ec2``)."""
    found = set()
    filters = [{"Name": "vpc-id", "Values": [vpc_id]}]
    for endpoint in clients("ec2").describe_vpc_endpoints(Filters=filters)["VpcEndpoints"]:
        if endpoint.get("State", "available").lower() in ("available", "pendingacceptance", "pending"):
            found.add(endpoint["ServiceName"].rsplit(".", 1)[-1])
    return found


def queue_exists(clients: Clients, queue_url: str) -> bool:
    try:
        clients("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    except ClientError as exc:
        if "NonExistentQueue" in _code(exc) or _code(exc) == "QueueDoesNotExist":
            return False
        raise
    return True


@dataclass(frozen=True)
class TopicFacts:
    policy: dict[str, Any]
    confirmed: int
    pending: int


def topic(clients: Clients, topic_arn: str) -> TopicFacts | None:
    sns = clients("sns")
    try:
        attributes = sns.get_topic_attributes(TopicArn=topic_arn)["Attributes"]
    except ClientError as exc:
        if _code(exc) == "NotFound":
            return None
        raise
    confirmed = pending = 0
    for page in sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=topic_arn):
        for subscription in page.get("Subscriptions", []):
            if subscription.get("SubscriptionArn", "").startswith("arn:"):
                confirmed += 1
            else:
                pending += 1
    return TopicFacts(json.loads(attributes.get("Policy") or "{}"), confirmed, pending)


def service_linked_role_exists(clients: Clients, name: str = SPOT_SERVICE_LINKED_ROLE) -> bool:
    return role(clients, name) is not None


def listed_pairs(value: str | None) -> dict[str, str]:
    """An output of ``key=value`` pairs (``NodewrightFunctionRoles``) as a dict; {} for none."""
    if not value or value == NONE:
        return {}
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item)


def queue_arn(queue_url: str) -> str:
    """``https://sqs.<region>.amazonaws.com/<account>/<name>`` → ``arn:aws:sqs:<region>:<account>:<name>``
    ("" when the URL is not one)."""
    match = re.fullmatch(
        r"https://sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(\d{12})/([\w.-]+)", queue_url or ""
    )
    if match is None:
        return ""
    region, account, name = match.groups()
    partition = (
        "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    )
    return f"arn:{partition}:sqs:{region}:{account}:{name}"


# Why IAM refused a simulated request (SimulatePrincipalPolicy's answer, read in this order).
ORGANIZATIONS = "organizations"  # an SCP of the account's organization
BOUNDARY = "boundary"  # the role's permissions boundary does not allow it
EXPLICIT = "explicit"  # a Deny statement in a policy of the role
IMPLICIT = "implicit"  # no statement allows it


@dataclass(frozen=True)
class Denial:
    """One (action, resource) a role may not do, and why (``ORGANIZATIONS``, ``BOUNDARY``,
    ``EXPLICIT``, ``IMPLICIT``); ``policy``: the denying policy IAM names, if any."""

    action: str
    resource: str
    reason: str
    policy: str = ""
    missing_context: tuple[str, ...] = ()


def simulate(
    clients: Clients,
    role_arn: str,
    actions: tuple[str, ...],
    resources: tuple[str, ...],
    context: dict[str, str],
) -> list[Denial]:
    """Ask IAM (``iam:SimulatePrincipalPolicy``, read only) whether ``role_arn`` may do each action on
    each resource with ``context``: its identity policies, its permissions boundary and the
    organization's SCPs are evaluated, as for a real request. The denials; [] when all are allowed.
    ``resources`` ``("*",)``: the actions take no resource."""
    from nodewright.spec.iam import context_type

    params: dict[str, Any] = {
        "PolicySourceArn": role_arn,
        "ActionNames": list(actions),
        "ContextEntries": [
            {"ContextKeyName": key, "ContextKeyValues": [value], "ContextKeyType": context_type(value)}
            for key, value in sorted(context.items())
        ],
    }
    if resources != ("*",):
        params["ResourceArns"] = list(resources)
    denials = []
    for page in clients("iam").get_paginator("simulate_principal_policy").paginate(**params):
        for result in page.get("EvaluationResults", []):
            organizations = (result.get("OrganizationsDecisionDetail") or {}).get(
                "AllowedByOrganizations", True
            )
            per_resource = result.get("ResourceSpecificResults") or [
                {
                    "EvalResourceName": result.get("EvalResourceName", "*"),
                    "EvalResourceDecision": result.get("EvalDecision"),
                    "MatchedStatements": result.get("MatchedStatements", []),
                    "MissingContextValues": result.get("MissingContextValues", []),
                    "PermissionsBoundaryDecisionDetail": result.get("PermissionsBoundaryDecisionDetail"),
                }
            ]
            for answer in per_resource:
                decision = answer.get("EvalResourceDecision")
                if decision == "allowed":
                    continue
                boundary = (answer.get("PermissionsBoundaryDecisionDetail") or {}).get(
                    "AllowedByPermissionsBoundary", True
                )
                policies = [
                    str(s.get("SourcePolicyId") or s.get("SourcePolicyType") or "")
                    for s in answer.get("MatchedStatements") or []
                ]
                if not organizations:
                    reason = ORGANIZATIONS
                elif not boundary:
                    reason = BOUNDARY
                elif decision == "explicitDeny":
                    reason = EXPLICIT
                else:
                    reason = IMPLICIT
                denials.append(
                    Denial(
                        action=str(result.get("EvalActionName")),
                        resource=str(answer.get("EvalResourceName") or "*"),
                        reason=reason,
                        policy=next((p for p in policies if p), "") if reason == EXPLICIT else "",
                        missing_context=tuple(answer.get("MissingContextValues") or ()),
                    )
                )
    return denials


@dataclass(frozen=True)
class LoadBalancerFacts:
    """The private wake-up's load balancer as Elastic Load Balancing describes it."""

    scheme: str
    state: str
    vpc_id: str
    dns_name: str
    subnets: tuple[str, ...]
    security_groups: tuple[str, ...]
    # (port, protocol, certificate ARNs) per listener
    listeners: tuple[tuple[int, str, tuple[str, ...]], ...]


def load_balancer(clients: Clients, arn: str) -> LoadBalancerFacts | None:
    elbv2 = clients("elbv2")
    try:
        (found,) = elbv2.describe_load_balancers(LoadBalancerArns=[arn])["LoadBalancers"]
    except ClientError as exc:
        if _code(exc) in ("LoadBalancerNotFound", "LoadBalancerNotFoundException"):
            return None
        raise
    listeners = tuple(
        (
            int(listener.get("Port", 0)),
            str(listener.get("Protocol", "")),
            tuple(c["CertificateArn"] for c in listener.get("Certificates", []) if c.get("CertificateArn")),
        )
        for listener in elbv2.describe_listeners(LoadBalancerArn=arn).get("Listeners", [])
    )
    return LoadBalancerFacts(
        scheme=str(found.get("Scheme", "")),
        state=str((found.get("State") or {}).get("Code", "")),
        vpc_id=str(found.get("VpcId", "")),
        dns_name=str(found.get("DNSName", "")),
        subnets=tuple(z["SubnetId"] for z in found.get("AvailabilityZones", []) if z.get("SubnetId")),
        security_groups=tuple(found.get("SecurityGroups", [])),
        listeners=listeners,
    )


@dataclass(frozen=True)
class CertificateFacts:
    pem: str
    names: tuple[str, ...]  # DomainName and SubjectAlternativeNames
    not_after: Any  # datetime, as botocore parses it
    status: str


def certificate(clients: Clients, arn: str) -> CertificateFacts | None:
    acm = clients("acm")
    try:
        described = acm.describe_certificate(CertificateArn=arn)["Certificate"]
        pem = str(acm.get_certificate(CertificateArn=arn)["Certificate"])
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            return None
        raise
    names = {described.get("DomainName", ""), *described.get("SubjectAlternativeNames", [])} - {""}
    return CertificateFacts(
        pem, tuple(sorted(names)), described.get("NotAfter"), str(described.get("Status", ""))
    )


def admits_https_from(group: dict[str, Any], sources: set[str]) -> bool:
    """Whether a security group's ingress lets any of the ``sources`` groups in on 443."""
    for rule in group.get("IpPermissions", []):
        port_ok = rule.get("IpProtocol") == "-1" or rule.get("FromPort", 0) <= 443 <= rule.get("ToPort", 0)
        if port_ok and {p.get("GroupId") for p in rule.get("UserIdGroupPairs", [])} & sources:
            return True
    return False


def probe_url(url: str, timeout: float = 5.0) -> int | str:
    """The HTTP status ``url`` answers a GET with, or what kept it from answering (read only: a
    path without the webhook's secret is refused before anything is done)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError) as exc:
        return f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
