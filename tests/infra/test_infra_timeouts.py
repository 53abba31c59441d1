"""Function timeouts fit what the code does with its remaining time, and the queue fits them.

The numbers live in ``nodewright/spec/deployment.py``; these tests hold the arithmetic between them
and the code's own budgets (loops, drains), so a change on either side that breaks it fails here.
"""

from __future__ import annotations

from infra_synth import Synth

from infra.capabilities import functions, interruption_queue

SPECS = {spec.name: spec for spec in functions.FUNCTION_SPECS}


def test_an_interruption_invocation_can_drive_a_drain_through_the_whole_spot_notice() -> None:
    from nodewright.interruption.events import SPOT_NOTICE
    from nodewright.termination.terminate import SAFETY_MARGIN_SECONDS

    for name in ("interruption", "spot_events"):
        timeout = SPECS[name].timeout_seconds
        # drive() gets the remaining time; the drain loop stops SAFETY_MARGIN_SECONDS before it.
        assert timeout - SAFETY_MARGIN_SECONDS >= SPOT_NOTICE.total_seconds(), name


def test_the_provisioner_loop_ends_inside_its_minute() -> None:
    from nodewright.provisioning.loop import LOOP_BUDGET_SECONDS, SAFETY_MARGIN_SECONDS

    timeout = SPECS["provisioner"].timeout_seconds
    last_pass_starts_by = min(LOOP_BUDGET_SECONDS, timeout - SAFETY_MARGIN_SECONDS)
    assert last_pass_starts_by >= 30, "the loop would leave most of the minute unpolled"
    # The last pass has SAFETY_MARGIN_SECONDS to finish, and the invocation ends at its timeout
    # at the latest: both before the next scheduled tick.
    assert last_pass_starts_by + SAFETY_MARGIN_SECONDS <= timeout < 60


def test_queue_visibility_covers_the_function_and_failures_reach_the_dlq_before_expiry(
    default_synth: Synth,
) -> None:
    retention = interruption_queue.MESSAGE_RETENTION.to_seconds()
    visibility = interruption_queue.VISIBILITY_TIMEOUT.to_seconds()
    assert retention == 300  # as the issue asks (Karpenter's value)
    assert visibility >= SPECS["interruption"].timeout_seconds
    assert interruption_queue.MAX_RECEIVE_COUNT * visibility < retention
    queues = default_synth.resources("AWS::SQS::Queue")
    (main,) = [q["Properties"] for k, q in queues.items() if k.startswith("AutoscalerInterruptionsQueue")]
    assert (main["VisibilityTimeout"], main["MessageRetentionPeriod"]) == (visibility, retention)
