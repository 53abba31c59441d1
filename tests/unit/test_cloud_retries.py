"""The product's AWS clients make the number of attempts their configuration's reasoning counts on.

botocore's ``max_attempts`` counts retries after the first attempt; ``total_max_attempts`` counts
attempts. ``RETRY_CONFIG`` says a throttled call gives up within about 30 s, inside the 55 s
invocation; ``QUICK_CONFIG`` (the webhook, whose caller waits 2 s) says one retry.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from failing_endpoint import failing_endpoint
from nodewright.cloud.aws import QUICK_CONFIG, RETRY_CONFIG


@pytest.mark.parametrize(
    ("config", "attempts"), [(RETRY_CONFIG, 5), (QUICK_CONFIG, 2)], ids=["retry", "quick"]
)
def test_a_failing_call_is_attempted_as_often_as_the_configuration_says(
    config: Config, attempts: int
) -> None:
    with failing_endpoint() as ec2:
        client = boto3.session.Session(
            aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
        ).client("events", endpoint_url=ec2.url, config=config)
        with pytest.raises(ClientError):
            client.put_events(Entries=[{"Source": "nodewright", "DetailType": "x", "Detail": "{}"}])

    assert ec2.requests == attempts
