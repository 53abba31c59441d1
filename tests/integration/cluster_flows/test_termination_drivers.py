"""One driver per termination at a time, across containers, against the API emulator.

The 100-node storm: after the reclaim, every interruption container's resume scan took every
termination older than ``DRIVEN_ELSEWHERE_SECONDS`` and drove it for its whole invocation — about 50
containers stepping the same terminations (315 "instance already gone" finishes for 100 nodes) while
the API emulator timed requests out. Karpenter's termination controller has one worker per
NodeClaim; here a container drives a termination only once it has claimed the NodeClaim (a
conditional write), and the others leave it alone until that claim expires.
"""

from __future__ import annotations

from typing import Any

from nodewright.interruption.processing import DRIVEN_ELSEWHERE_SECONDS
from nodewright.termination.drivers import DRIVER_ANNOTATION

from .interruption_support import INSTANCE


def _left_behind_termination(world: Any, clock: Any) -> None:
    """A NodeClaim deleted (``kubectl delete nodeclaim``) whose drain a PDB holds, older than any
    invocation that asked for it: what every resume scan finds."""
    world.node("node-a", INSTANCE)
    world.nodeclaim("default-a", INSTANCE, "node-a")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)
    world.cluster.delete_nodeclaim("default-a")
    clock.advance(DRIVEN_ELSEWHERE_SECONDS + 5)


def test_several_containers_resuming_the_same_termination_leave_it_to_one_driver(
    world: Any, clock: Any, make_processor: Any
) -> None:
    _left_behind_termination(world, clock)
    first, *others = [make_processor(None, state=False) for _ in range(3)]
    theirs: list[list[dict[str, Any]]] = []

    held_by: list[str] = []

    def the_others_scan_meanwhile() -> None:  # while the first drives it (between its passes)
        if not theirs:
            theirs.append([])  # once: the others' own drives sleep on this clock too
            theirs.extend(other.drive(budget_seconds=60) for other in others)
            claim = world.cluster.get_nodeclaim("default-a")
            held_by.append(claim["metadata"]["annotations"][DRIVER_ANNOTATION])

    clock.ticks.append(the_others_scan_meanwhile)

    driven = first.drive(budget_seconds=60)

    assert [t["nodeclaim"] for t in driven] == ["default-a"]
    assert theirs[1:] == [[], []], "the others skipped the termination the first one drives"
    assert held_by[0].startswith(first.driver_identity)


def test_a_termination_whose_driver_died_is_taken_over_once_its_claim_expires(
    world: Any, clock: Any, make_processor: Any, monkeypatch: Any
) -> None:
    from nodewright.interruption import processing

    _left_behind_termination(world, clock)
    died, before, after = (make_processor(None, state=False) for _ in range(3))
    with monkeypatch.context() as killed:  # killed (a Lambda timeout) before it gave its claim back
        killed.setattr(processing.drivers, "release", lambda ctx, names: None)
        assert [t["nodeclaim"] for t in died.drive(budget_seconds=20)] == ["default-a"]

    assert before.drive(budget_seconds=20) == [], "claimed until the dead invocation's end"
    clock.advance(30)
    assert [t["nodeclaim"] for t in after.drive(budget_seconds=20)] == ["default-a"], "taken over"


def test_a_state_change_notice_for_a_claimed_termination_steps_it_once_and_leaves_the_drive(
    world: Any, clock: Any, cloud: Any, make_processor: Any
) -> None:
    """An AZ-wide reclaim: the warning for an instance is handled by one container, which drains
    the node; EC2's state-change notice for the same instance reaches another container while that
    drain's claim lasts. The notice is news the driver may not see before its drive ends: one step
    here finishes the gone instance's node, and the drive stays the driver's."""
    from fakes import FakeLambdaContext

    from sandbox.runtime import events

    from .interruption_support import CountingReplacement

    world.node("node-a", INSTANCE)
    world.nodeclaim("default-a", INSTANCE, "node-a")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)
    warned, noticed = make_processor(CountingReplacement(), state=False), make_processor(None, state=False)

    acted = warned.handle(events.spot_warning(INSTANCE, "us-west-2"), lambda_context=FakeLambdaContext())
    claim = world.cluster.get_nodeclaim("default-a")
    assert claim["metadata"]["annotations"][DRIVER_ANNOTATION].startswith(warned.driver_identity)

    clock.advance(20)
    cloud.gone.add(INSTANCE)  # EC2 reclaimed it: the notice says so
    left = noticed.handle(
        events.state_change(INSTANCE, "shutting-down", "us-west-2"), lambda_context=FakeLambdaContext()
    )

    assert acted.disposition.value == left.disposition.value == "acted"
    assert left.detail["drivenElsewhere"] == [INSTANCE]
    assert left.detail["resumed"] == []
    assert world.cluster.find_node("node-a") is None, "its one step finished the gone instance's node"
    assert noticed.drive(budget_seconds=20) == [], "not driven further: the warned container drives it"


def test_a_drive_that_ends_gives_its_claims_back(world: Any, clock: Any, make_processor: Any) -> None:
    """A warning's drive that ended (its termination unfinished, or left for EC2) must not keep
    the next look waiting for its claim to expire: the provisioner's pass after EC2's reclaim, a
    state-change notice (the sandbox's interruption e2e caught the NodeClaim still claimed)."""
    from fakes import FakeLambdaContext

    from sandbox.runtime import events

    from .interruption_support import CountingReplacement

    world.node("node-a", INSTANCE)
    world.nodeclaim("default-a", INSTANCE, "node-a")
    world.pod("web-1", "node-a", labels={"app": "web"})
    world.pdb("web", {"app": "web"}, allowed=0)
    warned = make_processor(CountingReplacement(), state=False)
    warned.handle(events.spot_warning(INSTANCE, "us-west-2"), lambda_context=FakeLambdaContext())
    assert DRIVER_ANNOTATION in world.cluster.get_nodeclaim("default-a")["metadata"]["annotations"]

    [unfinished] = warned.drive(budget_seconds=10)

    assert not unfinished["done"]
    assert DRIVER_ANNOTATION not in world.cluster.get_nodeclaim("default-a")["metadata"].get(
        "annotations", {}
    )
