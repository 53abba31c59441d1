"""Every interruption payload shape → the typed event: the reference payloads, our samples, and variants."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nodewright.interruption.events import Action, EventKind, MalformedMessage, parse_message

from sandbox.shared_data import REPO_ROOT, event_payloads_dir

SAMPLES = REPO_ROOT / "events" / "payloads"

# What each reference payload must become, by file-name prefix (the folder may grow: unknown prefixes fail).
EXPECTED = {
    "spot-interruption-warning": (EventKind.SPOT_INTERRUPTION, Action.REPLACE_AND_DRAIN),
    "rebalance-recommendation": (EventKind.REBALANCE_RECOMMENDATION, Action.REPLACE_AND_DRAIN),
    "ec2-state-change-pending": (EventKind.STATE_CHANGE, Action.IGNORE),
    "ec2-state-change-stopping": (EventKind.STATE_CHANGE, Action.REPLACE_AND_DRAIN),
    "ec2-state-change-stopped": (EventKind.STATE_CHANGE, Action.REPLACE_AND_DRAIN),
    "ec2-state-change-shutting-down": (EventKind.STATE_CHANGE, Action.REPLACE_AND_DRAIN),
    "ec2-state-change-terminated": (EventKind.STATE_CHANGE, Action.REPLACE_AND_DRAIN),
    "aws-health-scheduled-change": (EventKind.SCHEDULED_CHANGE, Action.REPLACE_AND_DRAIN),
    "capacity-reservation-interruption-warning": (
        EventKind.CAPACITY_RESERVATION_INTERRUPTION,
        Action.REPLACE_AND_DRAIN,
    ),
    "asg-lifecycle": (EventKind.AUTOSCALING_LIFECYCLE, Action.IGNORE),
}


def _reference_files() -> list[Path]:
    folder = event_payloads_dir()
    return sorted(folder.glob("*.json")) if folder else []


def _expected_for(name: str) -> tuple[EventKind, Action]:
    for prefix, expected in EXPECTED.items():
        if name.startswith(prefix):
            return expected
    raise AssertionError(f"{name}: a new reference payload; add what it must become to EXPECTED")


@pytest.mark.shared_data
@pytest.mark.parametrize("path", _reference_files(), ids=lambda p: p.name)
def test_every_reference_payload_is_understood(shared_data, path: Path) -> None:
    event = parse_message(path.read_text())
    kind, action = _expected_for(path.name)
    assert (event.kind, event.action) == (kind, action)
    assert event.event_id
    if action is Action.REPLACE_AND_DRAIN:
        assert event.instance_ids, "an acting event names its instances"
        assert all(i.startswith("i-") for i in event.instance_ids)
    else:
        assert event.reason


def test_reference_folder_is_covered_or_skipped(shared_data) -> None:
    assert _reference_files(), "../shared/data/events exists but holds no payloads"


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_our_samples_parse(path: Path) -> None:
    event = parse_message(path.read_text())
    assert event.event_id.startswith("9b1f6c1e")


def _spot(**overrides) -> dict:
    event = {
        "version": "0",
        "id": "11111111-2222-3333-4444-555555555555",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "111122223333",
        "time": "2026-01-20T12:00:00Z",
        "region": "us-west-2",
        "resources": ["arn:aws:ec2:us-west-2:111122223333:instance/i-0f1e2d3c4b5a69788"],
        "detail": {"instance-id": "i-0f1e2d3c4b5a69788", "instance-action": "terminate"},
    }
    event.update(overrides)
    return event


def test_spot_warning_deadline_is_two_minutes_after_the_notice() -> None:
    event = parse_message(json.dumps(_spot()))
    assert event.instance_ids == ("i-0f1e2d3c4b5a69788",)
    assert event.deadline == datetime(2026, 1, 20, 12, 2, tzinfo=UTC)
    assert event.instance_going


def test_field_order_and_extra_fields_do_not_matter() -> None:
    shuffled = dict(reversed(list(_spot(**{"replay-name": "x", "unexpected": {"a": 1}}).items())))
    shuffled["detail"] = {"instance-action": "terminate", "instance-id": "i-0f1e2d3c4b5a69788", "extra": True}
    assert parse_message(json.dumps(shuffled)).summary() == parse_message(json.dumps(_spot())).summary()


def test_missing_optional_fields() -> None:
    minimal = {
        k: v for k, v in _spot().items() if k not in ("account", "region", "version", "resources", "time")
    }
    minimal["detail"] = {"instance-id": "i-0f1e2d3c4b5a69788"}
    event = parse_message(minimal)
    assert event.kind is EventKind.SPOT_INTERRUPTION
    assert event.deadline is None, "no notice time: no deadline, the NodeClaim's grace period applies"
    assert event.state == "terminate"


def test_instance_id_from_resource_arn_when_detail_lacks_it() -> None:
    event = parse_message(_spot(detail={"instance-action": "stop"}))
    assert event.instance_ids == ("i-0f1e2d3c4b5a69788",)
    assert event.state == "stop"


def test_health_entities_may_be_ids_or_arns_and_start_time_rfc1123() -> None:
    event = parse_message(
        {
            "id": "h-1",
            "source": "aws.health",
            "detail-type": "AWS Health Event",
            "detail": {
                "service": "EC2",
                "eventTypeCategory": "scheduledChange",
                "startTime": "Tue, 27 Jan 2026 12:00:00 GMT",
                "affectedEntities": [
                    {"entityValue": "arn:aws:ec2:us-west-2:111122223333:instance/i-0f1e2d3c4b5a69788"},
                    {"entityValue": "i-0a1b2c3d4e5f60718"},
                    {"entityValue": "i-0a1b2c3d4e5f60718"},
                ],
            },
        }
    )
    assert event.instance_ids == ("i-0f1e2d3c4b5a69788", "i-0a1b2c3d4e5f60718")
    assert event.deadline == datetime(2026, 1, 27, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("service", "category"), [("EC2", "issue"), ("RDS", "scheduledChange"), ("EC2", "accountNotification")]
)
def test_health_events_other_than_ec2_scheduled_change_are_ignored(service, category) -> None:
    event = parse_message(
        {
            "id": "h-2",
            "source": "aws.health",
            "detail-type": "AWS Health Event",
            "detail": {"service": service, "eventTypeCategory": category, "affectedEntities": None},
        }
    )
    assert event.action is Action.IGNORE
    assert service in event.reason


def test_rebalance_event_only_mode_records_only() -> None:
    rebalance = _spot(**{"detail-type": "EC2 Instance Rebalance Recommendation"})
    assert parse_message(rebalance).action is Action.REPLACE_AND_DRAIN
    assert parse_message(rebalance, rebalance_mode="event-only").action is Action.RECORD_ONLY


@pytest.mark.parametrize("state", ["pending", "running", "rebooting", ""])
def test_state_changes_that_need_nothing_are_ignored(state) -> None:
    message = _spot(**{"detail-type": "EC2 Instance State-change Notification"}, detail={"state": state})
    event = parse_message(message)
    assert event.action is Action.IGNORE


def test_capacity_reservation_without_termination_time_gets_the_two_minute_notice() -> None:
    event = parse_message(_spot(**{"detail-type": "EC2 Capacity Reservation Instance Interruption Warning"}))
    assert event.deadline == datetime(2026, 1, 20, 12, 0, tzinfo=UTC) + timedelta(minutes=2)


def test_sns_wrapped_message_is_unwrapped() -> None:
    wrapped = {"Type": "Notification", "MessageId": "m", "Message": json.dumps(_spot())}
    assert parse_message(json.dumps(wrapped)).kind is EventKind.SPOT_INTERRUPTION


def test_autoscaling_direct_message_without_envelope_is_acknowledged() -> None:
    event = parse_message(
        {"Event": "autoscaling:TEST_NOTIFICATION", "RequestId": "r-1", "AutoScalingGroupName": "workers"}
    )
    assert event.action is Action.IGNORE
    assert event.event_id == "r-1"
    assert "test notification" in event.reason


@pytest.mark.parametrize(
    ("message", "complaint"),
    ids=lambda v: str(v)[:40],
    argvalues=[
        ("not json", "not JSON"),
        ("[1, 2]", "not an object"),
        (json.dumps({"hello": "world"}), "EventBridgeEnvelope"),
        (json.dumps(_spot(source="aws.s3")), "unknown event"),
        (json.dumps(_spot(resources=[], detail={})), "names no instance"),
        (json.dumps(_spot(resources="[instance arn]", detail="oops")), "names no instance"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            json.dumps(_spot(detail={})).replace('"detail": {}', '"detail": ' + "9" * 5000),
            "not JSON.*4300 digits",
        ),
    ],
)
def test_malformed_messages_say_what_is_wrong(message, complaint) -> None:
    with pytest.raises(MalformedMessage, match=complaint):
        parse_message(message)


# --- AWS's documented samples: placeholders must not lose a spot warning -------------------------

RECEIVED = datetime(2026, 1, 20, 12, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "placeholder", ["yyyy-mm-ddThh:mm:ssZ", "[Current time]", "", None, 17, "9999-12-31T23:59:59Z"]
)
def test_a_spot_warning_with_an_unusable_time_acts_from_the_time_it_was_received(placeholder) -> None:
    event = parse_message(_spot(time=placeholder), received=RECEIVED)
    assert event.action is Action.REPLACE_AND_DRAIN
    assert event.time == RECEIVED
    assert event.deadline == RECEIVED + timedelta(minutes=2)
    if placeholder not in ("", None):
        assert event.notes
        assert "used the time the message was received" in event.notes[0]


def test_awss_documented_spot_sample_with_placeholders_acts_on_the_detail_instance() -> None:
    sample = {
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "yyyy-mm-ddThh:mm:ssZ",
        "region": "us-east-2",
        "resources": "[instance arn]",
        "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": "action"},
    }
    event = parse_message(json.dumps(sample), received=RECEIVED)
    assert (event.action, event.instance_ids) == (Action.REPLACE_AND_DRAIN, ("i-1234567890abcdef0",))
    assert any("resources is a string" in note for note in event.notes)


def test_awss_documented_rebalance_and_capacity_samples_with_current_time_act() -> None:
    for detail_type, detail in (
        ("EC2 Instance Rebalance Recommendation", {"instance-id": "i-1234567890abcdef0"}),
        (
            "EC2 Capacity Reservation Instance Interruption Warning",
            {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"},
        ),
    ):
        message = _spot(
            **{"detail-type": detail_type, "time": "[Current time]", "resources": ["[instance arn]"]}
        )
        message["detail"] = detail
        event = parse_message(message, received=RECEIVED)
        assert event.action is Action.REPLACE_AND_DRAIN, detail_type
        assert event.instance_ids == ("i-1234567890abcdef0",)


def test_a_zone_less_time_is_read_as_utc() -> None:
    event = parse_message(_spot(time="2026-01-20T12:00:00"))
    assert event.time == datetime(2026, 1, 20, 12, 0, tzinfo=UTC)
    assert event.deadline is not None
    assert event.deadline.tzinfo is not None


def test_a_message_without_an_id_gets_one_derived_from_its_content() -> None:
    first = parse_message(_spot(id=None))
    again = parse_message(_spot(id=None))
    other = parse_message(_spot(id=None, region="eu-west-1"))
    assert first.event_id.startswith("derived-")
    assert first.event_id == again.event_id != other.event_id


def test_a_far_future_capacity_reservation_deadline_does_not_overflow() -> None:
    message = _spot(**{"detail-type": "EC2 Capacity Reservation Instance Interruption Warning"})
    message["detail"] = {
        "instance-id": "i-0f1e2d3c4b5a69788",
        "instance-termination-time": "9999-12-31T23:59:59Z",
    }
    event = parse_message(message, now=datetime(2026, 1, 20, 12, 1, tzinfo=UTC))
    assert event.action is Action.REPLACE_AND_DRAIN


# --- maximum age per kind ------------------------------------------------------------------------

NOTICE = datetime(2026, 1, 20, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("detail_type", "detail", "fresh_after", "stale_after"),
    [
        ("EC2 Spot Instance Interruption Warning", {}, timedelta(minutes=9), timedelta(minutes=11)),
        ("EC2 Instance Rebalance Recommendation", {}, timedelta(minutes=9), timedelta(days=3)),
        (
            "EC2 Instance State-change Notification",
            {"state": "terminated"},
            timedelta(minutes=50),
            timedelta(hours=2),
        ),
        (
            "EC2 Capacity Reservation Instance Interruption Warning",
            {"instance-termination-time": "2026-01-20T12:30:00Z"},
            timedelta(minutes=35),
            timedelta(minutes=45),
        ),
    ],
)
def test_each_kind_acts_until_its_maximum_age_then_is_acknowledged_as_stale(
    detail_type, detail, fresh_after, stale_after
) -> None:
    message = _spot(**{"detail-type": detail_type})
    message["detail"] = {"instance-id": "i-0f1e2d3c4b5a69788", **detail}
    assert parse_message(message, now=NOTICE + fresh_after).action is Action.REPLACE_AND_DRAIN
    stale = parse_message(message, now=NOTICE + stale_after)
    assert stale.action is Action.IGNORE
    assert stale.reason.startswith("stale")


def test_a_health_scheduled_change_acts_until_an_hour_after_its_start() -> None:
    health = {
        "id": "h-1",
        "source": "aws.health",
        "detail-type": "AWS Health Event",
        "time": "2026-01-01T00:00:00Z",
        "detail": {
            "service": "EC2",
            "eventTypeCategory": "scheduledChange",
            "startTime": "2026-01-20T12:00:00Z",
            "affectedEntities": [{"entityValue": "i-0f1e2d3c4b5a69788"}],
        },
    }
    assert parse_message(health, now=NOTICE - timedelta(days=5)).action is Action.REPLACE_AND_DRAIN
    assert parse_message(health, now=NOTICE + timedelta(minutes=30)).action is Action.REPLACE_AND_DRAIN
    assert parse_message(health, now=NOTICE + timedelta(hours=2)).action is Action.IGNORE
