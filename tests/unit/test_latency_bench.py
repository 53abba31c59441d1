"""``bench latency``'s arguments: its idle figures need a cold invocation and a warm one.

The bench itself runs in the sandbox (tests/e2e/test_json_output_hygiene.py runs it at its
smallest size); what is checked here is what a command line can ask of it."""

from __future__ import annotations

import argparse

import pytest

from bench import latency


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    latency.configure(parser)
    return parser


def test_idle_runs_default_to_the_six_the_published_figures_come_from() -> None:
    assert _parser().parse_args([]).idle_runs == 6
    assert _parser().parse_args(["--idle-runs", "2"]).idle_runs == 2


@pytest.mark.parametrize("runs", ["1", "0"])
def test_fewer_than_two_idle_runs_are_refused_by_name(runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--idle-runs", runs])
    err = capsys.readouterr().err
    assert "--idle-runs" in err
    assert "at least one warm one" in err
