"""The small chaos run of the suite: ``nodewright chaos --steps 6 --seed 5 --json``, as a user runs it.

The seeded run draws workload changes, interruptions and faults (``sandbox/scenarios/chaos.py``); it must end
converged with no invariant violated (no leaked instance, no NodeClaim with two instances, NodeClaims,
instances and nodes consistent, limits held, no pod pending over 60 s while capacity exists, the
cluster's $/h not above 1.2x a fresh plan for longer than the consolidation window) and print only
JSON on stdout; ``--save`` keeps the figures for ``nodewright bench report``. The large run is in
docs/reliability.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NODEWRIGHT = str(Path(sys.executable).with_name("nodewright"))


def test_a_small_seeded_chaos_run_converges_with_no_invariant_violated(tmp_path: Path) -> None:
    done = subprocess.run(
        [NODEWRIGHT, "chaos", "--steps", "6", "--seed", "5", "--json", "--save", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    figures = json.loads(done.stdout)  # only JSON on stdout
    assert figures["steps"] == 6
    assert sum(figures["disturbances"].values()) >= 1
    assert figures["violations"] == {}, figures["violationExamples"]
    # The service invariants were looked at after every round, and enforced (a violation is in
    # "violations" above and makes the exit status 1).
    assert figures["looks"] >= figures["steps"]
    assert figures["pendingWithCapacity"]["violations"] == 0
    assert figures["pendingWithCapacity"]["maxSeconds"] <= figures["pendingWithCapacity"]["limitSeconds"]
    assert figures["costVersusFreshPlan"]["violations"] == 0
    assert figures["costVersusFreshPlan"]["maxRatio"] > 0  # the fresh plan priced the pods
    assert figures["leakedInstances"] == 0
    assert figures["duplicateNodeClaims"] == 0
    assert figures["converged"], figures
    assert figures["podsScheduled"] > 0
    # The longest wait is the slowest bind, with what each look (or settling round) said meanwhile
    # (none when the scheduler bound it between the round's end and the look).
    if figures["podPendingToBoundSeconds"]["max"] > 0:
        longest = figures["longestWait"]
        assert longest["seconds"] == pytest.approx(figures["podPendingToBoundSeconds"]["max"], abs=0.1)
        said = ("held by", "no place:", "placeable", "nowhere", "settling")
        assert all(what.startswith(said) and count >= 1 for what, count in longest["looks"].items()), longest
    assert figures["invocationErrors"] == 0, figures["invocationErrorKinds"]
    assert done.returncode == 0, done.stderr[-2000:]
    # --save kept the same figures with what `nodewright bench report` reads and the command line.
    from bench.report import READS

    (saved,) = json.loads((tmp_path / "chaos.json").read_text())["runs"]
    assert saved["command"] == "nodewright chaos --steps 6 --seed 5"
    assert saved["figures"] == figures
    assert READS["chaos"] <= set(saved["figures"])
