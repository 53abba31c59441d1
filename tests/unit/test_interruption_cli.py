"""``nodewright event``: the same parsing as the functions, printed for a person or as JSON."""

from __future__ import annotations

import json

from nodewright.cli import main

from sandbox.shared_data import REPO_ROOT

SAMPLES = REPO_ROOT / "events" / "payloads"


def test_event_json_shows_kind_instances_action(capsys) -> None:
    assert main(["event", "--json", str(SAMPLES / "health-scheduled-change-arns.json")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["kind"] == "ScheduledChange"
    assert shown["action"] == "replace-and-drain"
    assert shown["instanceIds"] == ["i-0f1e2d3c4b5a69788", "i-0a1b2c3d4e5f60718"]
    assert shown["deadline"] == "2026-01-27T12:00:00Z"


def test_event_text_says_why_a_message_is_ignored(capsys) -> None:
    assert main(["event", str(SAMPLES / "autoscaling-test-notification.sqs.json")]) == 0
    out = capsys.readouterr().out
    assert "action:    ignore" in out
    assert "Auto Scaling test notification" in out


def test_rebalance_mode_flag(capsys) -> None:
    path = str(SAMPLES / "rebalance-recommendation.json")
    assert main(["event", "--json", "--rebalance-mode", "event-only", path]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "record-only"


def test_malformed_and_missing_files_fail_with_a_reason(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["event", str(bad), str(tmp_path / "absent.json")]) == 1
    captured = capsys.readouterr()
    assert "malformed: message is not JSON" in captured.out
    assert "cannot read" in captured.err


def test_a_file_that_is_not_utf8_is_named_in_one_line_without_a_traceback(tmp_path, capsys) -> None:
    binary = tmp_path / "capture.bin"
    binary.write_bytes(b"\xff\xfe{\x00\x00garbage")
    good = str(SAMPLES / "rebalance-recommendation.json")

    assert main(["event", str(binary), good]) == 1

    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"{binary}: cannot read: not UTF-8 text")
    assert "byte 0xff at offset 0" in line
    assert f"{good}:" in captured.out  # the other file is still explained
