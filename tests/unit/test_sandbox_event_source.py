"""The sandbox puts EC2's and AWS Health's events on the bus once each, as those services do."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from failing_endpoint import failing_endpoint

from sandbox.aws.server import aws_client, event_source_client

ENTRY = {"Source": "aws.ec2", "DetailType": "EC2 Spot Instance Interruption Warning", "Detail": "{}"}


def _put(client: Any) -> None:
    with pytest.raises(ClientError):
        client.put_events(Entries=[ENTRY])


def test_an_event_aws_emits_is_put_once_even_when_its_answer_fails() -> None:
    """A retried put is a second event under a new id: a storm's 10 retried warnings were acted on
    as 10 more warnings. EC2 emits each warning once."""
    with failing_endpoint() as bus:
        _put(event_source_client(bus.url, "us-east-1"))

    assert bus.requests == 1


def test_the_sandboxs_own_clients_still_retry() -> None:
    """The contrast: seeding and the simulators' reads keep botocore's standard retries, three
    after the first."""
    with failing_endpoint() as bus:
        _put(aws_client("events", bus.url, "us-east-1"))

    assert bus.requests == 4
