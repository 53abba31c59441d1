"""The sandbox's EC2 honours client tokens as EC2 does (``sandbox.aws.front``): moto 5.2 ignores them,
so a CreateFleet botocore sent again after a read timeout launched a second instance."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from sandbox.aws import front

AUTH = "AWS4-HMAC-SHA256 Credential=AKID/20261207/us-west-2/ec2/aws4_request, SignedHeaders=host"


class FakeEc2:
    """A WSGI app standing for moto: counts the requests it answers, each with a new fleet id."""

    def __init__(self, status: str = "200 OK") -> None:
        self.status = status
        self.answered = 0
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.entered.set()
        self.release.wait(30)
        self.answered += 1
        body = (
            f"<CreateFleetResponse><requestId>r{self.answered}</requestId>"
            f"<fleetId>fleet-{self.answered}</fleetId></CreateFleetResponse>"
        )
        start_response(self.status, [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
        return [body.encode()]


@pytest.fixture(autouse=True)
def forget() -> Iterator[None]:
    front.forget_client_tokens()
    yield
    front.forget_client_tokens()


def _post(app: Any, body: bytes) -> tuple[str, bytes]:
    answered: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answered["status"] = status
        return lambda _data: None

    environ = {
        "REQUEST_METHOD": "POST",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "HTTP_AUTHORIZATION": AUTH,
    }
    payload = b"".join(app(environ, start_response))
    return answered["status"], payload


FLEET = (
    b"Action=CreateFleet&Version=2016-11-15&ClientToken=uid-0&Type=instant"
    b"&LaunchTemplateConfigs.1.Overrides.1.InstanceType=t3.small"
)


def test_a_create_fleet_sent_again_with_its_client_token_gets_the_first_answer_and_launches_nothing() -> None:
    ec2 = FakeEc2()
    app = front.MotoFront(ec2)
    first = _post(app, FLEET)
    again = _post(app, FLEET)
    assert ec2.answered == 1
    assert first[0] == again[0] == "200 OK"
    assert b"<fleetId>fleet-1</fleetId>" in again[1]
    assert b"<requestId>r1</requestId>" not in again[1]  # a fresh request id, as every answer has


def test_a_client_token_used_again_with_other_parameters_is_refused_as_a_parameter_mismatch() -> None:
    ec2 = FakeEc2()
    app = front.MotoFront(ec2)
    _post(app, FLEET)
    status, payload = _post(app, FLEET.replace(b"t3.small", b"t3.large"))
    assert status.startswith("400")
    assert b"<Code>IdempotentParameterMismatch</Code>" in payload
    assert ec2.answered == 1


def test_a_failed_request_is_not_kept_so_its_retry_is_tried_afresh() -> None:
    ec2 = FakeEc2("503 Service Unavailable")
    app = front.MotoFront(ec2)
    assert _post(app, FLEET)[0].startswith("503")
    ec2.status = "200 OK"
    assert _post(app, FLEET.replace(b"t3.small", b"t3.large"))[0] == "200 OK", "other parameters: tried"
    assert ec2.answered == 2


def test_a_retry_arriving_while_the_first_request_is_answered_waits_for_that_answer() -> None:
    """The case that launched twice: botocore gave up reading the first answer and sent it again."""
    ec2 = FakeEc2()
    ec2.release.clear()
    app = front.MotoFront(ec2)
    answers: list[tuple[str, bytes]] = []
    first = threading.Thread(target=lambda: answers.append(_post(app, FLEET)))
    first.start()
    assert ec2.entered.wait(30)
    retry = threading.Thread(target=lambda: answers.append(_post(app, FLEET)))
    retry.start()
    ec2.release.set()
    first.join(30)
    retry.join(30)
    assert ec2.answered == 1
    assert [a[0] for a in answers] == ["200 OK", "200 OK"]
    assert all(b"<fleetId>fleet-1</fleetId>" in a[1] for a in answers)


def test_tokens_are_forgotten_when_moto_is_reset() -> None:
    ec2 = FakeEc2()
    app = front.MotoFront(ec2)
    _post(app, FLEET)
    front.forget_client_tokens()
    _post(app, FLEET)
    assert ec2.answered == 2


def test_a_request_without_a_client_token_is_answered_every_time() -> None:
    ec2 = FakeEc2()
    app = front.MotoFront(ec2)
    body = FLEET.replace(b"&ClientToken=uid-0", b"")
    _post(app, body)
    _post(app, body)
    assert ec2.answered == 2
