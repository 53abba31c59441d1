"""The fault injector's bookkeeping (the moto side is in tests/integration/test_sandbox_aws.py)."""

from __future__ import annotations

import pytest

from sandbox.aws.faults import FaultInjector, Offering


def test_throttle_answers_exactly_the_requested_number_of_calls() -> None:
    injector = FaultInjector()
    injector.throttle("CreateFleet", times=2)
    assert [injector.take_throttle("CreateFleet") for _ in range(3)] == [True, True, False]
    assert injector.throttled == 2


def test_capacity_faults_are_per_offering_and_cleared() -> None:
    injector = FaultInjector()
    injector.insufficient_capacity("m5.large", "us-east-1a", "spot")
    assert injector.is_unavailable(Offering("m5.large", "us-east-1a", "spot"))
    assert not injector.is_unavailable(Offering("m5.large", "us-east-1a", "on-demand"))
    injector.restore_capacity("m5.large", "us-east-1a", "spot")
    assert not injector.is_unavailable(Offering("m5.large", "us-east-1a", "spot"))
    injector.insufficient_capacity("c5.large", "us-east-1b")
    injector.throttle(times=1)
    injector.clear()
    assert not injector.is_unavailable(Offering("c5.large", "us-east-1b", "on-demand"))
    assert not injector.take_throttle("CreateFleet")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda i: i.insufficient_capacity("m5.large", "us-east-1a", "reserved"),
            "use 'spot' or 'on-demand'",
        ),
        (lambda i: i.throttle("RunInstances", 1), "cannot be throttled"),
        (lambda i: i.throttle("CreateFleet", -1), "give a count >= 0"),
    ],
)
def test_bad_fault_requests_are_refused_with_a_clear_message(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(FaultInjector())
