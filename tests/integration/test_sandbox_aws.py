"""The sandbox's AWS side: seeded resources, CreateFleet fault injection and launch-template network
settings, over HTTP to the moto server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sandbox.aws import faults, fleet_network
from sandbox.aws.server import AwsSeed, MotoServer, aws_client, seed

CLUSTER = "faults"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


@pytest.fixture(scope="module")
def moto() -> Iterator[tuple[str, AwsSeed, faults.FaultInjector]]:
    server = MotoServer()
    endpoint = server.start()
    server.reset()
    injector = faults.FaultInjector()
    fleet_network.install()
    faults.install(injector)
    try:
        yield endpoint, seed(endpoint, CLUSTER, "us-east-1", ZONES), injector
    finally:
        faults.uninstall(injector)
        fleet_network.uninstall()
        server.reset()
        server.stop()


@pytest.fixture
def ec2(moto) -> Iterator[Any]:
    endpoint, _, injector = moto
    client = aws_client("ec2", endpoint, "us-east-1")
    yield client
    client.close()
    injector.clear()


@pytest.fixture(scope="module")
def launch_template(moto) -> str:
    endpoint, aws, _ = moto
    client = aws_client("ec2", endpoint, "us-east-1")
    try:
        return client.create_launch_template(
            LaunchTemplateName="faults-lt", LaunchTemplateData={"ImageId": aws.images["al2023/x86_64"]}
        )["LaunchTemplate"]["LaunchTemplateId"]
    finally:
        client.close()


def fleet(ec2: Any, template: str, overrides: list[dict[str, str]], capacity_type: str = "on-demand") -> dict:
    return ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        LaunchTemplateConfigs=[
            {
                "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "$Latest"},
                "Overrides": overrides,
            }
        ],
    )


def test_seeded_cluster_resources_are_discoverable_by_tag(moto, ec2) -> None:
    endpoint, aws, _ = moto
    tag = [{"Name": "tag:karpenter.sh/discovery", "Values": [CLUSTER]}]
    subnets = ec2.describe_subnets(Filters=tag)["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in subnets) == list(ZONES)
    assert [g["GroupId"] for g in ec2.describe_security_groups(Filters=tag)["SecurityGroups"]] == [
        aws.security_group_id
    ]
    eks = aws_client("eks", endpoint, "us-east-1")
    dynamodb = aws_client("dynamodb", endpoint, "us-east-1")
    try:
        assert eks.describe_cluster(name=CLUSTER)["cluster"]["version"] == aws.kubernetes_version
        table = dynamodb.describe_table(TableName=aws.state_table)["Table"]
        assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
        ttl = dynamodb.describe_time_to_live(TableName=aws.state_table)["TimeToLiveDescription"]
        assert ttl["AttributeName"] == "expires_at"
    finally:
        eks.close()
        dynamodb.close()


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
@pytest.mark.parametrize("where", ["SecurityGroupIds", "NetworkInterfaces", "none"])
def test_a_fleet_instance_gets_its_launch_templates_security_groups_as_on_ec2(
    moto, ec2, where: str, capacity_type: str
) -> None:
    """EC2 puts the template's groups on the primary interface (its VPC's default group when the
    template names none); unpatched moto gave every fleet instance a default group, some of another VPC."""
    aws = moto[1]
    data: dict[str, Any] = {"ImageId": aws.images["al2023/x86_64"]}
    if where == "SecurityGroupIds":
        data["SecurityGroupIds"] = [aws.security_group_id]
    elif where == "NetworkInterfaces":
        data["NetworkInterfaces"] = [
            {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": [aws.security_group_id]}
        ]
    name = f"groups-{where}-{capacity_type}"
    template = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)
    result = fleet(
        ec2,
        template["LaunchTemplate"]["LaunchTemplateId"],
        [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1b"]}],
        capacity_type,
    )
    instance_id = result["Instances"][0]["InstanceIds"][0]
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    if where == "none":
        vpc_default = ec2.describe_security_groups(
            Filters=[
                {"Name": "vpc-id", "Values": [aws.vpc_id]},
                {"Name": "group-name", "Values": ["default"]},
            ]
        )["SecurityGroups"][0]["GroupId"]
        expected = [vpc_default]
    else:
        expected = [aws.security_group_id]
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == expected
    [interface] = instance["NetworkInterfaces"]
    assert [g["GroupId"] for g in interface["Groups"]] == expected
    assert instance["SubnetId"] == aws.subnets["us-east-1b"]


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
def test_a_fleet_instance_gets_the_instance_profile_its_launch_template_names(
    moto, ec2, capacity_type: str
) -> None:
    """EC2 starts the instance with the template's profile (its role's credentials on the node);
    moto 5.2 started it with none, so no live instance ever "used" a profile."""
    aws = moto[1]
    iam = aws_client("iam", moto[0], "us-east-1")
    try:
        arn = iam.get_instance_profile(InstanceProfileName=aws.instance_profile_name)["InstanceProfile"][
            "Arn"
        ]
    finally:
        iam.close()
    data = {"ImageId": aws.images["al2023/x86_64"], "IamInstanceProfile": {"Name": aws.instance_profile_name}}
    template = ec2.create_launch_template(
        LaunchTemplateName=f"profile-{capacity_type}", LaunchTemplateData=data
    )
    result = fleet(
        ec2,
        template["LaunchTemplate"]["LaunchTemplateId"],
        [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]}],
        capacity_type,
    )
    instance_id = result["Instances"][0]["InstanceIds"][0]
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert instance["IamInstanceProfile"]["Arn"] == arn


def test_a_fleet_whose_launch_template_names_a_missing_instance_profile_launches_nothing(moto, ec2) -> None:
    """EC2 refuses each override with InvalidParameterValue (Karpenter logs it as a fleet error)
    rather than start an instance without a role; moto launched it."""
    aws = moto[1]
    data = {"ImageId": aws.images["al2023/x86_64"], "IamInstanceProfile": {"Name": "deleted-profile"}}
    template = ec2.create_launch_template(LaunchTemplateName="profile-missing", LaunchTemplateData=data)
    before = {i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    overrides = [
        {"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]},
        {"InstanceType": "c5.large", "SubnetId": aws.subnets["us-east-1b"]},
    ]
    result = fleet(ec2, template["LaunchTemplate"]["LaunchTemplateId"], overrides)
    assert not [i for entry in result.get("Instances", []) for i in entry.get("InstanceIds", [])]
    assert [(e["ErrorCode"], e["LaunchTemplateAndOverrides"]["Overrides"]) for e in result["Errors"]] == [
        ("InvalidParameterValue", overrides[0]),
        ("InvalidParameterValue", overrides[1]),
    ]
    assert result["Errors"][0]["ErrorMessage"] == (
        "Value (deleted-profile) for parameter iamInstanceProfile.name is invalid. "
        "Invalid IAM Instance Profile name"
    )
    after = {i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert after == before


@pytest.mark.parametrize(
    ("name", "arch"),
    [
        ("/aws/service/eks/optimized-ami/1.31/amazon-linux-2/recommended/image_id", "x86_64"),
        ("/aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/recommended/image_id", "arm64"),
        (
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id",
            "arm64",
        ),
        ("/aws/service/bottlerocket/aws-k8s-1.30/x86_64/latest/image_id", "x86_64"),
    ],
)
def test_eks_optimized_ami_parameters_resolve_to_registered_images(moto, ec2, name: str, arch: str) -> None:
    endpoint = moto[0]
    ssm = aws_client("ssm", endpoint, "us-east-1")
    try:
        image_id = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    finally:
        ssm.close()
    assert ec2.describe_images(ImageIds=[image_id])["Images"][0]["Architecture"] == arch


def test_ice_on_the_first_override_launches_the_second_and_reports_the_first(
    moto, ec2, launch_template
) -> None:
    aws, injector = moto[1], moto[2]
    injector.insufficient_capacity("m5.large", "us-east-1a", "on-demand")
    overrides = [
        {"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]},
        {"InstanceType": "c5.large", "SubnetId": aws.subnets["us-east-1b"]},
    ]
    result = fleet(ec2, launch_template, overrides)
    assert [i["InstanceType"] for i in result["Instances"]] == ["c5.large"]
    instance_id = result["Instances"][0]["InstanceIds"][0]
    placement = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0][
        "Placement"
    ]
    assert placement["AvailabilityZone"] == "us-east-1b"
    [error] = result["Errors"]
    assert error["ErrorCode"] == "InsufficientInstanceCapacity"
    assert error["Lifecycle"] == "on-demand"
    assert error["LaunchTemplateAndOverrides"]["Overrides"] == overrides[0]
    assert "m5.large" in error["ErrorMessage"]
    assert "us-east-1a" in error["ErrorMessage"]


def test_a_create_fleet_retried_with_its_client_token_launches_one_instance_as_on_ec2(
    moto, ec2, launch_template
) -> None:
    """botocore resends a CreateFleet whose answer it gave up reading with the same ClientToken; EC2
    launches once and answers the retry with the first fleet (moto alone launched a second)."""
    aws = moto[1]
    overrides = [{"InstanceType": "c5.large", "SubnetId": aws.subnets["us-east-1b"]}]

    spec = {"LaunchTemplateId": launch_template, "Version": "$Latest"}

    def create(token: str, instance_type: str = "c5.large") -> dict:
        return ec2.create_fleet(
            ClientToken=token,
            Type="instant",
            TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": spec,
                    "Overrides": [{**overrides[0], "InstanceType": instance_type}],
                }
            ],
        )

    first, again = create("claim-uid-0"), create("claim-uid-0")
    assert again["FleetId"] == first["FleetId"]
    assert again["Instances"] == first["Instances"]
    launched = ec2.describe_instances(Filters=[{"Name": "instance-type", "Values": ["c5.large"]}])
    ids = [i["InstanceId"] for r in launched["Reservations"] for i in r["Instances"]]
    assert first["Instances"][0]["InstanceIds"][0] in ids
    assert create("claim-uid-1")["FleetId"] != first["FleetId"]  # another token: another fleet
    with pytest.raises(ClientError) as refused:
        create("claim-uid-0", "c5.xlarge")
    assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatch"
    after = ec2.describe_instances(Filters=[{"Name": "instance-type", "Values": ["c5.large", "c5.xlarge"]}])
    assert len([i for r in after["Reservations"] for i in r["Instances"]]) == len(ids) + 1


def test_ice_is_per_capacity_type_and_zone(moto, ec2, launch_template) -> None:
    aws, injector = moto[1], moto[2]
    injector.insufficient_capacity("m5.large", "us-east-1a", "spot")
    on_demand = fleet(
        ec2, launch_template, [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]}]
    )
    assert "Errors" not in on_demand or not on_demand["Errors"]
    other_zone = fleet(
        ec2, launch_template, [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1b"]}], "spot"
    )
    assert other_zone["Instances"][0]["Lifecycle"] == "spot"


def test_every_override_out_of_capacity_launches_nothing(moto, ec2, launch_template) -> None:
    aws, injector = moto[1], moto[2]
    for zone in ("us-east-1a", "us-east-1b"):
        injector.insufficient_capacity("m5.large", zone, "spot")
    overrides = [
        {"InstanceType": "m5.large", "SubnetId": aws.subnets[z]} for z in ("us-east-1a", "us-east-1b")
    ]
    result = fleet(ec2, launch_template, overrides, "spot")
    assert result.get("Instances", []) == []
    assert [e["LaunchTemplateAndOverrides"]["Overrides"]["SubnetId"] for e in result["Errors"]] == [
        aws.subnets["us-east-1a"],
        aws.subnets["us-east-1b"],
    ]
    injector.clear()
    assert fleet(ec2, launch_template, overrides, "spot")["Instances"]


def test_throttling_is_retried_by_botocore_then_succeeds(moto, ec2, launch_template) -> None:
    aws, injector = moto[1], moto[2]
    injector.throttle("CreateFleet", times=1)
    result = fleet(
        ec2, launch_template, [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1c"]}]
    )
    assert result["ResponseMetadata"]["RetryAttempts"] == 1
    assert injector.throttled == 1
    assert result["Instances"]


@pytest.mark.parametrize("mode", ["legacy", "standard"])  # adaptive classifies errors as standard does
def test_throttling_answers_503_request_limit_exceeded_in_every_retry_mode(
    moto, launch_template, mode: str
) -> None:
    endpoint, aws, injector = moto
    injector.throttle("CreateFleet", times=10)
    client = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("ec2", endpoint_url=endpoint, config=Config(retries={"mode": mode, "max_attempts": 1}))
    try:
        with pytest.raises(ClientError) as raised:
            fleet(
                client, launch_template, [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]}]
            )
    finally:
        client.close()
        injector.clear()
    response = raised.value.response
    assert response["Error"]["Code"] == "RequestLimitExceeded"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert response["ResponseMetadata"]["RetryAttempts"] == 1  # botocore judged it retryable and retried once


def test_state_table_holds_the_sandbox_prices_in_the_layers_format(moto) -> None:
    from nodewright.cloud.state import DynamoDBStateStore
    from nodewright.settings import Settings

    endpoint, aws, _ = moto
    dynamodb = aws_client("dynamodb", endpoint, "us-east-1")
    try:
        settings = Settings(cluster_name=CLUSTER, region="us-east-1", state_table=aws.state_table)
        table = DynamoDBStateStore(settings, dynamodb=dynamodb).price_table()
    finally:
        dynamodb.close()
    assert table.source.startswith("sandbox: ")
    assert table.spot_price("m5.large", "us-east-1a") is not None  # the sandbox's spot market
    on_demand = table.on_demand_price("m5.large")
    if on_demand is not None:  # real prices (../shared/data); otherwise the catalog estimates them
        assert 0 < table.spot_price("m5.large", "us-east-1a") < on_demand


def test_an_instance_terminated_over_an_hour_ago_is_forgotten_as_ec2_forgets_it(moto, ec2) -> None:
    """EC2 lists a terminated instance for about an hour; moto kept every one, so a long chaos run's
    DescribeInstances scanned them all. Running and recently terminated instances stay listed."""
    from datetime import UTC, datetime, timedelta

    import time_machine

    from sandbox.aws.server import forget_terminated_instances

    aws = moto[1]
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "karpenter.sh/nodeclaim", "Value": "forgotten"}]}]
    ids = [
        ec2.run_instances(
            ImageId=aws.images["al2023/x86_64"],
            MinCount=1,
            MaxCount=1,
            InstanceType="m5.large",
            TagSpecifications=tags,
        )["Instances"][0]["InstanceId"]
        for _ in range(3)
    ]
    old, recent, running = ids
    start = datetime.now(UTC)
    ec2.terminate_instances(InstanceIds=[old])
    with time_machine.travel(start + timedelta(minutes=30), tick=False):
        ec2.terminate_instances(InstanceIds=[recent])
    forget_terminated_instances("us-east-1", start + timedelta(minutes=59))
    assert _listed(ec2, old)
    assert forget_terminated_instances("us-east-1", start + timedelta(minutes=61)) >= 1
    listed = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances(InstanceIds=[recent, running])["Reservations"]
        for i in r["Instances"]
    }
    assert listed == {recent: "terminated", running: "running"}
    with pytest.raises(ClientError) as gone:
        ec2.describe_instances(InstanceIds=[old])
    assert gone.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
    tagged = ec2.describe_tags(Filters=[{"Name": "value", "Values": ["forgotten"]}])["Tags"]
    assert {t["ResourceId"] for t in tagged} == {recent, running}
    ec2.terminate_instances(InstanceIds=[running])


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
def test_a_forgotten_fleet_instance_takes_its_fleet_and_every_tag_of_what_went_with_it(
    moto, ec2, capacity_type: str
) -> None:
    """moto kept each instant fleet, spot request and the tags of deleted volumes and interfaces, and
    every tag filter scanned them all; a fleet whose instance is still known stays (terminating that
    instance looks its fleet up)."""
    from datetime import UTC, datetime, timedelta

    from moto.backends import get_backend

    from sandbox.aws.server import forget_terminated_instances

    aws = moto[1]
    label = f"forgotten-{capacity_type}"
    tags = [{"Key": "karpenter.sh/nodeclaim", "Value": label}]
    template = ec2.create_launch_template(
        LaunchTemplateName=f"forget-{capacity_type}",
        LaunchTemplateData={
            "ImageId": aws.images["al2023/x86_64"],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume", "network-interface")
            ],
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    overrides = [{"InstanceType": "m5.large", "SubnetId": aws.subnets["us-east-1a"]}]
    launched = [fleet(ec2, template, overrides, capacity_type) for _ in range(2)]
    gone, kept = (f["Instances"][0]["InstanceIds"][0] for f in launched)
    start = datetime.now(UTC)
    ec2.terminate_instances(InstanceIds=[gone])

    assert forget_terminated_instances("us-east-1", start + timedelta(minutes=61)) >= 1

    assert not _listed(ec2, gone)
    assert _listed(ec2, kept)
    remaining = {
        t["ResourceId"] for t in ec2.describe_tags(Filters=[{"Name": "value", "Values": [label]}])["Tags"]
    }
    assert gone not in remaining
    assert kept in remaining
    ec2.terminate_instances(InstanceIds=[kept])  # its fleet was kept: terminating it still works
    assert forget_terminated_instances("us-east-1", start + timedelta(minutes=122)) >= 1
    assert not _listed(ec2, kept)
    assert not ec2.describe_tags(Filters=[{"Name": "value", "Values": [label]}])["Tags"]
    backend = get_backend("ec2")["123456789012"]["us-east-1"]
    assert not {f["FleetId"] for f in launched} & set(backend.fleets)


def _listed(ec2: Any, instance_id: str) -> bool:
    try:
        return bool(ec2.describe_instances(InstanceIds=[instance_id])["Reservations"])
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "InvalidInstanceID.NotFound":
            return False
        raise


def test_concurrent_fleets_into_one_subnet_each_get_an_instance_and_their_own_ip() -> None:
    """EC2 serves concurrent launches into one subnet; moto hands out a subnet's IPs from one Python
    generator, and a thread entering it while another is inside raises ``ValueError: generator
    already executing`` (a pass's parallel launches met it, in-process and so in the sandbox's
    server, which is moto in the same process). Threads switch as often as the interpreter allows,
    so without ``fleet_network``'s lock the interleaving comes within a few dozen fleets."""
    import sys
    import threading

    from moto import mock_aws

    threads, fleets_each = 12, 8
    start = threading.Barrier(threads, timeout=60.0)
    failures: list[str] = []
    instances: list[str] = []
    fleet_network.install()
    interval = sys.getswitchinterval()
    try:
        with mock_aws():
            ec2 = boto3.client("ec2", region_name="us-east-1")
            vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/20", AvailabilityZone="us-east-1a")
            template = ec2.create_launch_template(
                LaunchTemplateName="concurrent", LaunchTemplateData={"ImageId": "ami-12c6146b"}
            )["LaunchTemplate"]["LaunchTemplateId"]
            overrides = [{"InstanceType": "m5.large", "SubnetId": subnet["Subnet"]["SubnetId"]}]

            def launch() -> None:
                start.wait()
                for _ in range(fleets_each):
                    try:
                        result = fleet(ec2, template, overrides)
                    except Exception as error:  # kept, for the assertion to show
                        failures.append(repr(error))
                        continue
                    failures.extend(e["ErrorMessage"] for e in result.get("Errors") or [])
                    instances.extend(i for group in result["Instances"] for i in group["InstanceIds"])

            sys.setswitchinterval(1e-6)
            workers = [threading.Thread(target=launch) for _ in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            sys.setswitchinterval(interval)
            described = ec2.describe_instances(InstanceIds=instances)["Reservations"]
    finally:
        sys.setswitchinterval(interval)
        fleet_network.uninstall()

    assert failures == []
    assert len(set(instances)) == threads * fleets_each
    addresses = {i["PrivateIpAddress"] for r in described for i in r["Instances"]}
    assert len(addresses) == len(instances)  # no two instances share an address


def test_a_queue_polled_by_many_while_messages_arrive_hands_each_message_to_one_consumer_and_loses_none() -> (
    None
):
    """SQS: a received message is no one else's until its visibility timeout ends, and a message is
    gone only when deleted. moto's receive and delete ran outside the queue's lock: messages handed
    to two pollers at once, 500s, and messages sent during a delete lost (``sandbox.aws.sqs_queues``).
    Threads switch as often as the interpreter allows, as in the fleet test above."""
    import sys
    import threading
    from collections import Counter

    from moto import mock_aws

    from sandbox.aws import sqs_queues

    sqs_queues.install()
    senders, receivers, each = 3, 6, 100
    received: Counter[str] = Counter()
    failures: list[str] = []
    sent = threading.Event()
    interval = sys.getswitchinterval()
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="interruptions")["QueueUrl"]

        def send(sender: int) -> None:
            for index in range(each):
                sqs.send_message(QueueUrl=url, MessageBody=f"{sender}-{index}")

        def receive() -> None:
            while True:
                try:
                    got = sqs.receive_message(
                        QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, VisibilityTimeout=60
                    ).get("Messages", [])
                    for message in got:
                        received[message["Body"]] += 1
                        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                except Exception as error:  # kept, for the assertion to show
                    failures.append(repr(error))
                    continue
                if not got and sent.is_set():
                    return

        sending = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
        polling = [threading.Thread(target=receive) for _ in range(receivers)]
        sys.setswitchinterval(1e-6)
        try:
            for thread in sending + polling:
                thread.start()
            for thread in sending:
                thread.join()
            sent.set()
            for thread in polling:
                thread.join()
        finally:
            sys.setswitchinterval(interval)

    assert failures == []
    assert {body for body, times in received.items() if times > 1} == set()
    assert len(received) == senders * each
