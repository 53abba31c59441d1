"""The consolidation benchmark at a small size, so it cannot rot: correctness, not timings."""

from __future__ import annotations

import argparse
import json

import pytest

from bench import consolidation


def test_small_consolidation_bench_only_ever_lowers_cost_and_stays_above_the_bound(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser()
    consolidation.configure(parser)
    assert (
        consolidation.run(parser.parse_args(["--nodes", "12", "--pods", "120", "--passes", "4", "--json"]))
        == 0
    )
    figures = json.loads(capsys.readouterr().out)
    assert figures["nodes"] == 12
    assert figures["first_pass_command"], "a fragmented cluster has something to consolidate"
    assert figures["passes_applied"] >= 1
    assert figures["after_per_hour"] < figures["before_per_hour"]
    assert figures["after_per_hour"] >= figures["lp_bound_per_hour"] - 1e-6  # a true lower bound
    assert figures["fresh_plan_per_hour"] >= figures["lp_bound_per_hour"] - 1e-6
