"""The layer's AWS clients read a response's times as botocore does, ISO 8601 ones without dateutil.

``nodewright.cloud.aws.timestamp`` is the clients' timestamp parser: every value must come out the
instant botocore's own parser gives, whatever its form; only the ISO 8601 times with an offset (all
of EC2's) take the fast path.
"""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.utils import parse_timestamp
from moto import mock_aws
from nodewright.cloud import aws
from nodewright.settings import Settings

FORMS = [
    "2026-12-07T10:00:00.000Z",  # EC2's LaunchTime
    "2026-12-07T10:00:00Z",
    "2026-12-07T10:00:00.123456Z",
    "2026-12-07T10:00:00.1234567Z",  # more digits than a datetime keeps
    "2026-12-07T12:00:00+02:00",
    "2026-12-07T10:00:00",  # no offset: botocore decides its zone
    "20261207",  # a date fromisoformat reads as naive: botocore's too
    "Mon, 07 Dec 2026 10:00:00 GMT",  # RFC 822 (rest-xml headers)
    1796637600,  # epoch seconds (JSON protocols)
    1796637600.5,
    "1796637600",
]


@pytest.mark.parametrize("value", FORMS, ids=[str(v) for v in FORMS])
def test_every_form_of_time_is_the_instant_botocore_reads(value: object) -> None:
    ours, botocores = aws.timestamp(value), parse_timestamp(value)

    assert ours == botocores
    assert (ours.tzinfo is None) == (botocores.tzinfo is None)
    assert ours.utcoffset() == botocores.utcoffset()


def test_a_time_botocore_refuses_is_refused() -> None:
    with pytest.raises(ValueError, match="not a time"):
        parse_timestamp("not a time")
    with pytest.raises(ValueError, match="not a time"):
        aws.timestamp("not a time")


def test_the_layers_ec2_client_reads_launch_times_without_dateutil() -> None:
    settings = Settings(cluster_name="c1", region="us-east-1")
    aws.reset_clients()
    try:
        with mock_aws():
            plain = boto3.client("ec2", region_name="us-east-1")
            plain.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="t3.micro")

            def launch_time(client: object) -> datetime:
                reservations = client.describe_instances()["Reservations"]  # type: ignore[attr-defined]
                value: datetime = reservations[0]["Instances"][0]["LaunchTime"]
                return value

            ours, botocores = launch_time(aws.client("ec2", settings)), launch_time(plain)
    finally:
        aws.reset_clients()

    assert ours == botocores
    assert ours.tzinfo is UTC  # fromisoformat's UTC: the fast path read it (dateutil gives its own zone)
