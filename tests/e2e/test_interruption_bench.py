"""``nodewright bench interruption`` at a small size, so the benchmark cannot rot: its throughput run
and a three-node storm through the stack as deployed, every figure the issue asks for present and
the correctness ones right. Its timing goals (the exit code also says whether they were met) are
the bench's business, not this test's."""

from __future__ import annotations

import argparse
import json

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STORM_KEYS = (
    "nodes",
    "cordonedP99Seconds",
    "replacementRequestedP99Seconds",
    "lastDrainedSeconds",
    "handledTwice",
    "apiRequestsPerSecondPeak",
    "dynamodbWrites",
)


def test_bench_interruption_small_run_acts_on_every_node_once_and_reports_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench import interruption

    parser = argparse.ArgumentParser()
    interruption.configure(parser)
    args = parser.parse_args(["--messages", "50", "--nodes", "3", "--pods", "2", "--json"])

    interruption.run(args)
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["failedMessages"] == 0, "the foreign mix is acknowledged, malformed bodies included"
    assert figures["messagesPerSecond"] > 0
    missing = [key for key in STORM_KEYS if key not in figures]
    assert not missing, f"figures without {missing}: {figures}"
    assert figures["nodes"] == 3
    assert figures["cordoned"] == 3
    assert figures["replacementRequested"] == 3
    assert figures["drained"] == 3
    assert figures["handledTwice"] == 0
    assert figures["nodeClaimsUntouched"] == 0
    assert 0 < figures["cordonedP50Seconds"] <= figures["cordonedP99Seconds"]
    assert figures["apiRequestsPerSecondPeak"] > 0
    # Where the time to cordon went: every node's warning was taken by one path or the other.
    assert sum(figures["stages"]["firstTakenBy"].values()) == 3, figures["stages"]
