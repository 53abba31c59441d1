"""Fault matrix, EC2 and the API server: ICE, throttling storms, the API server's errors and outages,
the AWS endpoint restarting; each scenario converges (see ``faultmatrix``)."""

from __future__ import annotations

import pytest
from faultmatrix import SMALL_TYPES, ZONES, failed, instances, settle, sqs, start

from sandbox.aws.faults import ApiFault
from sandbox.runtime.events import spot_warning
from sandbox.scenarios.reliability import Rig

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


# --- EC2 -------------------------------------------------------------------------------------------


def test_ice_on_every_offering_of_a_type_in_a_zone_launches_elsewhere(rig: Rig) -> None:
    for capacity_type in ("spot", "on-demand"):
        rig.sandbox.faults.insufficient_capacity("t4g.small", "us-east-1a", capacity_type)
    start(rig, 3)
    settle(rig, 3)
    placed = {(i["InstanceType"], i["Placement"]["AvailabilityZone"]) for i in instances(rig)}
    assert ("t4g.small", "us-east-1a") not in placed
    assert rig.sandbox.faults.ice_reported > 0, "the plan asked for the faulted offering first"


def test_ice_on_all_spot_offerings_falls_back_to_on_demand(rig: Rig) -> None:
    for instance_type in SMALL_TYPES:
        for zone in ZONES:
            rig.sandbox.faults.insufficient_capacity(instance_type, zone, "spot")
    start(rig, 3)
    settle(rig, 3)
    assert {i.get("InstanceLifecycle", "on-demand") for i in instances(rig)} == {"on-demand"}
    assert rig.sandbox.faults.ice_reported >= len(SMALL_TYPES)


def test_create_fleet_throttling_storm_converges_with_adaptive_retries(rig: Rig) -> None:
    rig.sandbox.faults.throttle("CreateFleet", times=6)  # more than botocore's 5 attempts of one call
    start(rig, 3)
    settle(rig, 3, rounds=14)
    assert rig.sandbox.faults.throttled == 6
    assert not failed(rig), failed(rig)


# --- the API server ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        ApiFault("conflict", times=8),
        ApiFault("throttle", times=12, retry_after=1),
        ApiFault("error", times=10),
        ApiFault("slow", times=6, delay=3.0),
    ],
    ids=["409-conflict", "429-retry-after", "500-internal", "slow-answers"],
)
def test_api_server_faults_converge_without_tracebacks(rig: Rig, fault: ApiFault) -> None:
    start(rig, 3)
    rig.sandbox.api_faults.add(fault)
    settle(rig, 3, rounds=14)
    assert rig.sandbox.api_faults.hits.get(fault.kind, 0) > 0, "the fault was met"
    assert "Traceback" not in rig.log.getvalue()
    assert not failed(rig), failed(rig)


def test_api_server_down_for_a_whole_invocation_fails_cleanly_once(rig: Rig) -> None:
    start(rig, 2)
    rig.sandbox.api_faults.add(ApiFault("down"))
    rig.log.seek(0)
    rig.log.truncate()
    outcome = rig.invoke("provisioner", seconds=9.5)
    out = rig.log.getvalue()
    assert outcome.ok, outcome.error
    assert outcome.result["error"] == "ApiServerUnavailable"
    assert out.count("Kubernetes API server unavailable") == 1, out
    assert "Traceback" not in out
    assert '"ApiServerUnavailable":[1.0]' in out, "the alarm's metric is emitted"
    # The interruption queue: the batch is handed back, message by message, without a traceback.
    rig.log.seek(0)
    rig.log.truncate()
    event = spot_warning("i-0123456789abcdef0")  # whose it is cannot be known with the server down
    queue = rig.invoke("interruption", sqs([event]), seconds=20)
    assert queue.ok, queue.error
    assert [f["itemIdentifier"] for f in queue.result["batchItemFailures"]] == ["m-0"]
    assert "Traceback" not in rig.log.getvalue()
    rig.sandbox.api_faults.clear()
    settle(rig, 2)


# --- the AWS endpoint ------------------------------------------------------------------------------


def test_aws_endpoint_restart_mid_story_converges(rig: Rig) -> None:
    start(rig, 2)
    rig.log.seek(0)
    rig.log.truncate()
    rig.sandbox.stop_aws()
    try:
        outcome = rig.invoke("provisioner", seconds=9.5)
    finally:
        rig.sandbox.start_aws()
    # Unreachable AWS ends the invocation cleanly: one line, the AwsUnavailable metric (its alarm),
    # no traceback, at once rather than hanging; the next scheduled invocation carries on.
    assert outcome.ok, outcome.error
    assert outcome.result["error"] == "AwsUnavailable"
    assert rig.log.getvalue().count("AWS unreachable") == 1, rig.log.getvalue()[-2000:]
    assert "Traceback" not in rig.log.getvalue()
    assert outcome.seconds < 30
    assert not instances(rig)
    settle(rig, 2)
