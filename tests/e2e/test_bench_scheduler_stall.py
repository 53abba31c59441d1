"""``nodewright bench scheduler-stall`` at a small size, so the benchmark cannot rot: it produces its
three figures (run as a user runs it: ``--json --save`` in a subprocess, only JSON on stdout), and
every run (the black-holed URL's included) marks every pod and exercises the configuration it
measures. No timing is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest
from json_commands import run_json_command

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_bench_scheduler_stall_small_run_marks_every_pod_in_every_run(tmp_path: Path) -> None:
    from bench import scheduler_stall

    runs = scheduler_stall.measure(8, scheduler_stall.PRODUCT, lambda line: None)

    assert set(runs) == {"none", "healthy", "unreachable"}
    assert all(run.marked == 8 for run in runs.values())
    assert runs["none"].webhook_calls == 0
    assert runs["healthy"].webhook_calls >= 1  # the real webhook function answered
    assert runs["unreachable"].webhook_calls >= 1  # the black hole was connected to

    code, (figures,) = run_json_command("bench scheduler-stall", ["--pods", "4"], tmp_path)
    assert code == 0
    assert set(figures) == {"noWebhookPerSecond", "healthyPerSecond", "unreachablePerSecond"}
    assert all(value > 0 for value in figures.values())
