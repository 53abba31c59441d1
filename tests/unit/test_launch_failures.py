"""Launch failures: one classification (``cloud.errors.launch_failure_class``) and one metric,
``LaunchFailures{Class}``, emitted by every launch path: a provisioning pass, an interruption's
replacements (``replace_for_displaced``) and a disruption command's (``launch_replacements``).
The alarms watch one series per class (tests/infra/test_infra_stack.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodewright.api import labels
from nodewright.cloud import errors
from nodewright.cloud.errors import (
    INSUFFICIENT_CAPACITY,
    INVALID_REQUEST,
    OTHER,
    PERMISSION,
    QUOTA,
    FleetError,
    launch_failure_class,
)
from nodewright.provisioning import flow, planning
from nodewright.provisioning.launch import LaunchFailure
from test_provisioning_flow import pending_pod, world  # noqa: F401 - the fixture

# EC2's, IAM's and KMS's answers and our own reasons → the class an operator acts on.
TABLE = [
    ("InsufficientInstanceCapacity", INSUFFICIENT_CAPACITY),
    ("InsufficientFreeAddressesInSubnet", INSUFFICIENT_CAPACITY),
    ("UnfulfillableCapacity", INSUFFICIENT_CAPACITY),
    ("Unsupported", INSUFFICIENT_CAPACITY),
    ("InsufficientHostCapacity", INSUFFICIENT_CAPACITY),
    ("InsufficientCapacityError", INSUFFICIENT_CAPACITY),
    ("VcpuLimitExceeded", QUOTA),
    ("MaxSpotInstanceCountExceeded", QUOTA),
    ("InstanceLimitExceeded", QUOTA),
    ("LaunchTemplateLimitExceeded", QUOTA),
    ("LimitExceeded", QUOTA),  # IAM: instance profiles per account
    ("VolumeLimitExceeded", QUOTA),
    ("SecurityGroupsPerInterfaceLimitExceeded", QUOTA),
    ("UnauthorizedOperation", PERMISSION),
    ("AccessDenied", PERMISSION),
    ("AccessDeniedException", PERMISSION),
    ("AuthFailure", PERMISSION),
    ("OptInRequired", PERMISSION),
    ("InvalidParameterValue", INVALID_REQUEST),
    ("InvalidParameterCombination", INVALID_REQUEST),
    ("InvalidAMIID.NotFound", INVALID_REQUEST),
    ("InvalidSubnetID.NotFound", INVALID_REQUEST),
    ("InvalidLaunchTemplateName.NotFoundException", INVALID_REQUEST),
    ("MissingParameter", INVALID_REQUEST),
    ("NoSuchEntity", INVALID_REQUEST),
    ("InvalidNodeClaim", INVALID_REQUEST),
    ("NoInstanceTypes", INVALID_REQUEST),
    ("NoSubnetError", INVALID_REQUEST),
    ("SelectorNoMatchError", INVALID_REQUEST),
    ("InvalidNodeClassError", INVALID_REQUEST),
    ("RequestLimitExceeded", OTHER),  # EC2's throttling: a rate, not a quota
    ("Throttling", OTHER),
    ("InternalError", OTHER),
    ("NoInstance", OTHER),
    ("IdempotentParameterMismatch", OTHER),
    ("UnicodeEncodeError", OTHER),
]


@pytest.mark.parametrize(("code", "expected"), TABLE)
def test_each_launch_error_code_has_the_class_an_operator_acts_on(code: str, expected: str) -> None:
    assert launch_failure_class(code) == expected


def test_every_ice_code_is_capacity_or_a_quota() -> None:
    assert {launch_failure_class(c) for c in errors.INSUFFICIENT_CAPACITY_CODES} == {
        INSUFFICIENT_CAPACITY,
        QUOTA,
    }


def test_a_launch_failed_for_several_reasons_counts_under_the_one_that_needs_a_person() -> None:
    assert launch_failure_class("InsufficientInstanceCapacity", "VcpuLimitExceeded") == QUOTA
    assert launch_failure_class("VcpuLimitExceeded", "UnauthorizedOperation") == PERMISSION
    assert launch_failure_class("InsufficientInstanceCapacity", "Unsupported") == INSUFFICIENT_CAPACITY
    assert launch_failure_class() == OTHER


def test_an_aws_answer_is_known_by_its_code_not_its_exception_type() -> None:
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "CreateInstanceProfile")
    assert errors.error_code(denied) == "AccessDenied"
    assert errors.error_code(ValueError("x")) == "ValueError"
    assert LaunchFailure("c", "p", "AccessDenied", "m").failure_class == PERMISSION


def _launch_failures(out: str) -> dict[str, float]:
    """Class → count, from the EMF lines Powertools printed."""
    found: dict[str, float] = {}
    for line in out.splitlines():
        if line.startswith('{"_aws"') and '"LaunchFailures"' in line:
            document = json.loads(line)
            found[document["Class"]] = found.get(document["Class"], 0) + sum(document["LaunchFailures"])
    return found


def _denied(cloud: Any) -> None:
    def create(request: Any) -> Any:
        raise errors.LaunchError(request.nodeclaim_name, "UnauthorizedOperation", "You are not authorized")

    cloud.create = create


def _short_of_capacity_and_quota(cloud: Any) -> None:
    def create(request: Any) -> Any:
        raise errors.InsufficientCapacityError(
            request.nodeclaim_name,
            [
                FleetError("InsufficientInstanceCapacity", "m5.large", "us-west-2a", "on-demand"),
                FleetError("VcpuLimitExceeded", "m5.xlarge", "us-west-2a", "on-demand"),
            ],
        )

    cloud.create = create


def test_a_provisioning_pass_counts_its_failed_launches_by_class(
    world: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    ctx, cluster, cloud = world
    cluster.add("Pod", pending_pod("inflate-1"))
    _short_of_capacity_and_quota(cloud)

    report = flow.provision(ctx)

    assert [(f.code, f.failure_class) for f in report.failures] == [("InsufficientInstanceCapacity", QUOTA)]
    assert _launch_failures(capsys.readouterr().out) == {QUOTA: 1}


def test_an_interruptions_replacement_that_is_denied_counts_as_permission(
    world: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    from nodewright.provisioning import replace_for_displaced

    ctx, cluster, cloud = world
    cluster.add(
        "Node",
        {"metadata": {"name": "doomed", "labels": {labels.NODEPOOL: "default"}}, "spec": {"providerID": "p"}},
    )
    app = pending_pod("app-1")
    app["spec"]["nodeName"] = "doomed"
    app["status"] = {"phase": "Running"}
    cluster.add("Pod", app)
    _denied(cloud)

    report = replace_for_displaced(ctx, ["doomed"], guard=None)

    assert [f.failure_class for f in report.failures] == [PERMISSION]
    assert _launch_failures(capsys.readouterr().out) == {PERMISSION: 1}
    # The pass's figures are the provisioner's alone: a replacement's zeros would skew them.
    assert {name for name, _ in ctx.metrics.values}.isdisjoint({"PendingPods", "ClusterCostPerHour"})


def test_a_disruption_commands_replacement_that_is_denied_counts_as_permission(
    world: Any,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nodewright.provisioning import launch_replacements
    from nodewright.state.world import observe

    ctx, _cluster, cloud = world
    requirements = [{"key": labels.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}]
    replacement = planning.ClaimPlan("default", requirements, {"cpu": "1"}, [])
    monkeypatch.setattr(planning, "claim_plan", lambda claim, pods: claim)  # already the NodeClaim's plan
    _denied(cloud)

    report = launch_replacements(ctx, observe(ctx), [replacement], guard=None)  # type: ignore[list-item]

    assert len(report.created) == 1
    assert [f.failure_class for f in report.failures] == [PERMISSION]
    assert _launch_failures(capsys.readouterr().out) == {PERMISSION: 1}
