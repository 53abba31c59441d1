"""``nodewright bench interruption`` at a small size, so the benchmark cannot rot."""

from __future__ import annotations

import argparse
import json

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_bench_interruption_small_run_acts_on_every_node_and_reports_figures(capsys) -> None:
    from bench import interruption

    parser = argparse.ArgumentParser()
    interruption.configure(parser)
    args = parser.parse_args(["--messages", "50", "--nodes", "3", "--pods", "2", "--json"])

    assert interruption.run(args) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["interruptionsActed"] == 3
    assert figures["nodeClaimsLeft"] == 0
    assert figures["nodeClaimsLeftForEc2"] == 3, "drained, each waits for EC2's reclaim (none here)"
    assert figures["failedMessages"] == 0
    assert figures["messagesPerSecond"] > 0
    assert 0 < figures["cordonAndEvictP50Seconds"] <= figures["cordonAndEvictP99Seconds"]
