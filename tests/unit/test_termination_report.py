"""What a termination reconcile counts as progress: the provisioner's loop stays awake for it."""

from __future__ import annotations

import pytest
from nodewright.termination.controller import TerminationReport
from nodewright.termination.drain import DrainPass
from nodewright.termination.terminate import Termination


def _term(*, done: bool = False, last_pass: DrainPass | None = None) -> Termination:
    return Termination(nodeclaim="claim", node="node", instance_id="i-1", done=done, last_pass=last_pass)


@pytest.mark.parametrize(
    ("term", "progressed"),
    [
        pytest.param(_term(last_pass=DrainPass(remaining=1, evicted=["a/p"])), True, id="evicted a pod"),
        pytest.param(
            _term(last_pass=DrainPass(remaining=1, deleted=["a/p"])), True, id="deleted a pod at its deadline"
        ),
        pytest.param(_term(done=True), True, id="finished"),
        pytest.param(_term(last_pass=DrainPass(remaining=1, blocked=["a/p"])), False, id="blocked by a PDB"),
        pytest.param(_term(last_pass=DrainPass(remaining=1)), False, id="waiting for a pod's grace period"),
        pytest.param(_term(), False, id="waiting for EC2 to take the instance"),
    ],
)
def test_only_a_termination_that_moved_counts_as_progress(term: Termination, progressed: bool) -> None:
    report = TerminationReport(terminations=(term,))

    assert (report.progressed == [term]) is progressed
    assert report.terminations == (term,), "every one is still reported"
