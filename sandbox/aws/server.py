"""The AWS side of the sandbox: a moto server on 127.0.0.1 and the resources an EKS cluster has.

Seeded for one cluster: an EKS cluster, a VPC with one subnet per zone and a security group
(tagged ``karpenter.sh/discovery: <cluster>``), EKS-optimized AMIs and their public SSM
parameters, the node IAM role with its instance profile, the DynamoDB state table
(``pk``/``sk`` strings, TTL on ``expires_at``, made and filled by the layer's own
``nodewright.cloud.state`` code) with the sandbox's price table, and an SQS interruption queue.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import boto3
from botocore.config import Config
from nodewright.cloud.state import DynamoDBStateStore, create_state_table
from nodewright.settings import Settings
from nodewright.spec import deployment

from sandbox.aws import eks_amis
from sandbox.aws.catalog import bundled_catalog
from sandbox.aws.prices import price_table

ACCOUNT_ID = "123456789012"  # moto's default account
DISCOVERY_TAG = "karpenter.sh/discovery"
KUBERNETES_VERSION = "1.31"
# SSM parameters are published for these versions so a NodeClass pinned to a neighbour version resolves too.
AMI_KUBERNETES_VERSIONS = ("1.29", "1.30", "1.31", "1.32")
AMI_RELEASE = "v20250101"  # the release the versioned AL2023 parameters name
# DescribeInstances: "Recently terminated instances might appear in the returned results. This
# interval is usually less than one hour." moto keeps them for ever.
TERMINATED_VISIBLE_FOR = timedelta(hours=1)
_TERMINATED_AT = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:UTC|GMT)\)")


def preload_moto_ec2() -> None:
    """Import moto's EC2 models about 1 s faster than a plain import.

    At import, moto builds three fresh ``boto3.Session()`` objects just to list regions, and each
    one parses botocore's endpoint data again; one shared session for that moment parses it once.
    """
    if "moto.ec2.models" in sys.modules:
        return
    original = boto3.Session
    shared = original()

    def session(*args: Any, **kwargs: Any) -> boto3.session.Session:
        return shared if not args and not kwargs else original(*args, **kwargs)

    boto3.Session = session
    try:
        import moto.ec2.models  # noqa: F401 (the point of this function)
    finally:
        boto3.Session = original


def _enforcing_server(host: str, port: int, enforcement: Any) -> Any:
    """moto's ThreadedMotoServer whose WSGI app sits behind ``sandbox.aws.front`` and the IAM
    middleware (``enforcement``: a started ``sandbox.iam.Enforcement``; None: every request
    allowed)."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    from sandbox.aws.front import MotoFront

    class Server(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app: Any = MotoFront(DomainDispatcherApplication(create_backend_app))
            if enforcement is not None:
                from sandbox.iam.enforcement import IamMiddleware

                app = IamMiddleware(app, enforcement)
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return Server(ip_address=host, port=port, verbose=False)


class MotoServer:
    """moto's ThreadedMotoServer on a free port, stopped without leaving its socket open; with an
    ``enforcement`` every request a function signs is held to its IAM policy (sandbox.iam)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, enforcement: Any = None) -> None:
        from sandbox.aws import action_names, ec2_reservations, ec2_tags, serializer_keys, sqs_queues

        ec2_reservations.install()  # EC2's capacity reservations, before fleet_network wraps Fleet
        ec2_tags.install()  # a resource's tags read by its id, not by scanning every tag (O(n²))
        sqs_queues.install()  # a queue's receives and deletes under its lock: polled by many at once
        serializer_keys.install()  # each attribute's name found once per class, key and shape
        action_names.install()  # whether an action exists: one getattr, not a list of the class's methods
        self._server = _enforcing_server(host, port, enforcement)
        self.endpoint = ""

    def start(self) -> str:
        # werkzeug logs every request to stderr; the sandbox's callers want their own output readable.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self.endpoint

    def reset(self) -> None:
        """Drop every moto backend's state (moto's own reset endpoint); the next sandbox starts clean."""
        from sandbox.aws.front import forget_client_tokens

        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST", data=b"")
        with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=5):
            pass
        forget_client_tokens()

    def stop(self) -> None:
        server = self._server._server  # ThreadedMotoServer.stop() shuts down but never closes the socket
        self._server.stop()
        if server is not None:
            server.server_close()


def forget_terminated_instances(region: str, now: datetime) -> int:
    """Drop the instances terminated over an hour before ``now`` from moto's EC2, as EC2 does, with
    what went with them; how many instances.

    moto keeps every instance, every instant fleet and spot request, and the tags of every resource
    ever deleted (volumes, interfaces), and each tag filter scans all of them once per instance:
    the chaos run's steps slowed from 2 s to over 6 s as a result."""
    from moto.backends import get_backend

    backend = get_backend("ec2")[ACCOUNT_ID][region]
    forgotten = 0
    for reservation_id, reservation in list(backend.reservations.items()):
        kept = []
        for instance in reservation.instances:
            ended = _terminated_at(instance)
            if ended is not None and now - ended >= TERMINATED_VISIBLE_FOR:
                forgotten += 1
            else:
                kept.append(instance)
        if not kept:
            backend.reservations.pop(reservation_id, None)
        elif len(kept) < len(reservation.instances):
            reservation.instances = kept
    known = [i for r in backend.reservations.values() for i in r.instances]
    instance_ids = {i.id for i in known}
    # An instance's termination looks its fleet up: only fleets no known instance came from go.
    fleets_in_use = {i._fleet_id for i in known} | {i._spot_fleet_id for i in known}
    for fleet_id, fleet in list(backend.fleets.items()):
        created = fleet.valid_from if fleet.valid_from.tzinfo else fleet.valid_from.replace(tzinfo=UTC)
        if fleet_id not in fleets_in_use and now - created >= TERMINATED_VISIBLE_FOR:
            backend.fleets.pop(fleet_id, None)
    for request_id, request in list(backend.spot_instance_requests.items()):
        if request.instance is not None and request.instance.id not in instance_ids:
            backend.spot_instance_requests.pop(request_id, None)
    existing: dict[str, Any] = {
        "i-": instance_ids,
        "vol-": backend.volumes,
        "eni-": backend.enis,
        "fleet-": backend.fleets,
        "sir-": backend.spot_instance_requests,
    }
    for resource_id in list(backend.tags):
        prefix = resource_id.split("-", 1)[0] + "-"
        if prefix in existing and resource_id not in existing[prefix]:
            backend.tags.pop(resource_id, None)
    return forgotten


def _terminated_at(instance: Any) -> datetime | None:
    """When moto terminated ``instance`` (its state-transition reason carries the time), else None."""
    if instance.state != "terminated":
        return None
    found = _TERMINATED_AT.search(instance.state_transition_reason or "")
    if found is None:
        return None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)


@cache
def _session(region: str) -> boto3.session.Session:
    """One session per region: its loader caches the endpoint and service models between clients.
    It signs as the sandbox's own identity, the account's owner (never held to a function's policy)."""
    from sandbox.iam.policies import ADMINISTRATOR_KEY, ADMINISTRATOR_SECRET

    return boto3.session.Session(
        aws_access_key_id=ADMINISTRATOR_KEY,
        aws_secret_access_key=ADMINISTRATOR_SECRET,
        region_name=region,
    )


# The sandbox's own clients: botocore's standard retries (three after the first attempt).
SANDBOX_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=30
)


def aws_client(
    service: str,
    endpoint: str,
    region: str,
    credentials: dict[str, str] | None = None,
    *,
    config: Config = SANDBOX_CLIENT_CONFIG,
) -> Any:
    """A boto3 client for the moto server as the sandbox's own identity (standard retries): seeding,
    the simulators, the tests' own look at AWS; with ``credentials`` (``Sandbox.credentials``), as
    that function's role instead (what Lambda does with it on the function's behalf)."""
    session = _session(region)
    if credentials is not None:
        session = boto3.session.Session(
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
            region_name=region,
        )
    return session.client(
        service,
        endpoint_url=endpoint,
        config=config,
    )


EVENT_SOURCE_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5, read_timeout=600
)


def event_source_client(endpoint: str, region: str) -> Any:
    """An EventBridge client for what AWS itself puts on the default bus (EC2's spot warnings and
    state changes, AWS Health): each happening put once. EC2 emits a warning once; a client that
    retries a PutEvents whose answer timed out puts it again under a new event id, which no
    idempotency record can tell from another warning (a 100-node storm on a loaded moto saw one
    call of ten warnings retried: 110 distinct warnings acted on). So no retry, and a read timeout
    longer than any load: a put that fails, fails loudly."""
    return aws_client("events", endpoint, region, config=EVENT_SOURCE_CONFIG)


@dataclass
class AwsSeed:
    """What was created, by name, for the environment of the functions and for tests."""

    cluster_name: str
    region: str
    kubernetes_version: str
    vpc_id: str
    subnets: dict[str, str]  # zone -> subnet id
    security_group_id: str
    node_role_name: str
    node_role_arn: str
    instance_profile_name: str
    state_table: str
    interruption_queue_url: str
    # The direct rule's target: stands for Lambda's own queue of asynchronous spot_events invocations.
    direct_queue_url: str = ""
    dead_letter_queue_url: str = ""
    images: dict[str, str] = field(default_factory=dict)  # "<family>/<arch>[/<variant>]" -> AMI id
    ssm_parameters: dict[str, str] = field(default_factory=dict)


def _tags(cluster_name: str, name: str) -> list[dict[str, str]]:
    return [{"Key": DISCOVERY_TAG, "Value": cluster_name}, {"Key": "Name", "Value": name}]


def _register_images(ec2: Any, region: str) -> dict[str, str]:
    """One AMI per (family, architecture, variant), with the architecture set in moto's backend."""
    from moto.backends import get_backend

    backend = get_backend("ec2")[ACCOUNT_ID][region]
    images: dict[str, str] = {}
    for family in ("al2", "al2023", "bottlerocket"):
        for arch in ("x86_64", "arm64"):
            variants = ("standard", "nvidia") if arch == "x86_64" else ("standard",)
            for variant in variants:
                name = f"sandbox-eks-{family}-{arch}-{variant}-{AMI_RELEASE}"
                image_id = ec2.register_image(
                    Name=name, Description=f"EKS-optimized {family} ({arch}, {variant})"
                )["ImageId"]
                backend.amis[image_id].architecture = arch  # register_image ignores Architecture in moto
                images[f"{family}/{arch}" + ("" if variant == "standard" else f"/{variant}")] = image_id
    return images


def ssm_ami_parameters(
    images: dict[str, str], versions: tuple[str, ...] = AMI_KUBERNETES_VERSIONS
) -> dict[str, str]:
    """The public SSM parameter names EKS publishes, pointing at the sandbox's AMIs."""
    parameters: dict[str, str] = {}
    for version in versions:
        eks = f"/aws/service/eks/optimized-ami/{version}"
        parameters[f"{eks}/amazon-linux-2/recommended/image_id"] = images["al2/x86_64"]
        parameters[f"{eks}/amazon-linux-2-arm64/recommended/image_id"] = images["al2/arm64"]
        parameters[f"{eks}/amazon-linux-2-gpu/recommended/image_id"] = images["al2/x86_64/nvidia"]
        for arch in ("x86_64", "arm64"):
            al2023 = f"{eks}/amazon-linux-2023/{arch}/standard"
            parameters[f"{al2023}/recommended/image_id"] = images[f"al2023/{arch}"]
            release = f"amazon-eks-node-al2023-{arch}-standard-{version}-{AMI_RELEASE}"
            parameters[f"{al2023}/{release}/image_id"] = images[f"al2023/{arch}"]
            bottlerocket = f"/aws/service/bottlerocket/aws-k8s-{version}"
            parameters[f"{bottlerocket}/{arch}/latest/image_id"] = images[f"bottlerocket/{arch}"]
        parameters[f"{eks}/amazon-linux-2023/x86_64/nvidia/recommended/image_id"] = images[
            "al2023/x86_64/nvidia"
        ]
        parameters[f"/aws/service/bottlerocket/aws-k8s-{version}-nvidia/x86_64/latest/image_id"] = images[
            "bottlerocket/x86_64/nvidia"
        ]
    return parameters


def inject_ssm_parameters(region: str, parameters: dict[str, str]) -> None:
    """Write reserved ``/aws/...`` parameters into moto's SSM backend (its put_parameter refuses them)."""
    from moto.backends import get_backend
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter

    backend = get_backend("ssm")[ACCOUNT_ID][region]
    for name, value in parameters.items():
        backend._parameters[name].append(
            # moto's own backend builds Parameters the same way: the abstract CloudFormationModel
            # members it leaves unimplemented are never called for an SSM parameter.
            Parameter(  # type: ignore[abstract]
                account_id=ACCOUNT_ID,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=1,
                data_type="aws:ec2:image",
            )
        )


def seed_prices(dynamodb: Any, cluster_name: str, region: str, state_table: str) -> None:
    """Store the sandbox's prices (``aws.prices``) through the layer's own state store, as pricing would."""
    settings = Settings(cluster_name=cluster_name, region=region, state_table=state_table)
    DynamoDBStateStore(settings, dynamodb=dynamodb).put_price_table(price_table(bundled_catalog(region)))


def _queue_arn(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _interruption_routes(sqs: Any, events: Any, cluster_name: str, region: str) -> tuple[str, str, str]:
    """The interruption queue (with the stack's visibility timeout, retention and redrive), its DLQ,
    and the EventBridge rules of ``nodewright.spec.deployment`` on the default bus; (queue, DLQ,
    direct) URLs."""
    prefix = f"nodewright-{cluster_name}"
    dlq_url = sqs.create_queue(QueueName=f"{prefix}-interruption-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(deployment.QUEUE_MAX_RECEIVE_COUNT)}
    queue_url = sqs.create_queue(
        QueueName=f"{prefix}-interruption",
        Attributes={
            "VisibilityTimeout": str(deployment.QUEUE_VISIBILITY_SECONDS),
            "MessageRetentionPeriod": str(deployment.QUEUE_RETENTION_SECONDS),
            "RedrivePolicy": json.dumps(redrive),
        },
    )["QueueUrl"]
    direct_url = sqs.create_queue(QueueName=f"{prefix}-spot-events-invocations")["QueueUrl"]
    for name, url, patterns in (
        ("interruption", queue_url, deployment.QUEUE_RULES),
        ("spot-events", direct_url, {"Direct": deployment.DIRECT_RULE}),
    ):
        arn = _queue_arn(sqs, url)
        for rule, pattern in patterns.items():
            rule_name = f"{prefix}-{name}-{rule}"
            events.put_rule(Name=rule_name, EventPattern=json.dumps(pattern), State="ENABLED")
            events.put_targets(Rule=rule_name, Targets=[{"Id": "target", "Arn": arn}])
    return queue_url, dlq_url, direct_url


def seed(
    endpoint: str, cluster_name: str, region: str, zones: tuple[str, ...], node_role_name: str | None = None
) -> AwsSeed:
    """Create the cluster's AWS resources in the moto server at ``endpoint``; the node role is named
    as the stack names it (``node_role_name``, from the synthesized template)."""
    ec2 = aws_client("ec2", endpoint, region)
    iam = aws_client("iam", endpoint, region)
    eks = aws_client("eks", endpoint, region)
    dynamodb = aws_client("dynamodb", endpoint, region)
    sqs = aws_client("sqs", endpoint, region)
    events = aws_client("events", endpoint, region)
    try:
        vpc_id = ec2.create_vpc(
            CidrBlock="10.0.0.0/16",
            TagSpecifications=[{"ResourceType": "vpc", "Tags": _tags(cluster_name, f"{cluster_name}-vpc")}],
        )["Vpc"]["VpcId"]
        subnets = {}
        for index, zone in enumerate(zones):
            subnets[zone] = ec2.create_subnet(
                VpcId=vpc_id,
                CidrBlock=f"10.0.{index * 32}.0/19",
                AvailabilityZone=zone,
                TagSpecifications=[
                    {"ResourceType": "subnet", "Tags": _tags(cluster_name, f"{cluster_name}-private-{zone}")}
                ],
            )["Subnet"]["SubnetId"]
        security_group_id = ec2.create_security_group(
            GroupName=f"{cluster_name}-node",
            Description=f"EKS nodes of {cluster_name}",
            VpcId=vpc_id,
            TagSpecifications=[
                {"ResourceType": "security-group", "Tags": _tags(cluster_name, f"{cluster_name}-node")}
            ],
        )["GroupId"]

        trust: dict[str, Any] = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
            ],
        }
        node_role_name = node_role_name or f"KarpenterNodeRole-{cluster_name}"
        node_role_arn = iam.create_role(RoleName=node_role_name, AssumeRolePolicyDocument=json.dumps(trust))[
            "Role"
        ]["Arn"]
        instance_profile_name = f"{cluster_name}-node"
        iam.create_instance_profile(InstanceProfileName=instance_profile_name)
        iam.add_role_to_instance_profile(InstanceProfileName=instance_profile_name, RoleName=node_role_name)
        cluster_trust = {
            **trust,
            "Statement": [{**trust["Statement"][0], "Principal": {"Service": "eks.amazonaws.com"}}],
        }
        cluster_role_arn = iam.create_role(
            RoleName=f"{cluster_name}-cluster", AssumeRolePolicyDocument=json.dumps(cluster_trust)
        )["Role"]["Arn"]
        eks.create_cluster(
            name=cluster_name,
            version=KUBERNETES_VERSION,
            roleArn=cluster_role_arn,
            resourcesVpcConfig={"subnetIds": list(subnets.values()), "securityGroupIds": [security_group_id]},
            tags={DISCOVERY_TAG: cluster_name},
        )

        images = _register_images(ec2, region)
        parameters = ssm_ami_parameters(images)
        inject_ssm_parameters(region, parameters)
        parameters.update(eks_amis.seed(ec2, region, images, AMI_KUBERNETES_VERSIONS))

        state_table = f"nodewright-{cluster_name}-state"
        create_state_table(dynamodb, state_table)
        seed_prices(dynamodb, cluster_name, region, state_table)
        queue_url, dlq_url, direct_url = _interruption_routes(sqs, events, cluster_name, region)
    finally:
        for client in (ec2, iam, eks, dynamodb, sqs, events):
            client.close()
    return AwsSeed(
        cluster_name=cluster_name,
        region=region,
        kubernetes_version=KUBERNETES_VERSION,
        vpc_id=vpc_id,
        subnets=subnets,
        security_group_id=security_group_id,
        node_role_name=node_role_name,
        node_role_arn=node_role_arn,
        instance_profile_name=instance_profile_name,
        state_table=state_table,
        interruption_queue_url=queue_url,
        direct_queue_url=direct_url,
        dead_letter_queue_url=dlq_url,
        images=images,
        ssm_parameters=parameters,
    )
