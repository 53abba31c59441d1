"""The interruption processor's ownership index expires by the wall clock, across a frozen container.

Lambda freezes a container between invocations and ``time.monotonic`` need not advance while it
is frozen: an index read just before an hour-long freeze must not answer for the instances
launched meanwhile (their interruption would be ignored as "not ours").
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from fakes import FakeClock
from nodewright.context import ContainerContext
from nodewright.interruption.events import Action, EventKind, InterruptionEvent
from nodewright.interruption.processing import OWNERSHIP_TTL_SECONDS, InterruptionProcessor
from nodewright.settings import Settings

NEW = "i-0aaaaaaaaaaaaaaa1"


class Claims:
    """A cluster whose NodeClaims a test changes, counting the reads."""

    def __init__(self) -> None:
        self.instances: list[str] = []
        self.reads = 0

    def list_nodeclaims(self) -> list[dict[str, Any]]:
        self.reads += 1
        return [{"status": {"providerID": f"aws:///us-east-1a/{i}"}} for i in self.instances]

    def list_nodes(self) -> list[dict[str, Any]]:
        return []


def spot_warning(instance: str) -> InterruptionEvent:
    return InterruptionEvent(
        event_id=f"e-{instance}", kind=EventKind.SPOT_INTERRUPTION, action=Action.REPLACE_AND_DRAIN,
        instance_ids=(instance,),
    )  # fmt: skip


def test_an_index_read_before_a_freeze_is_read_again_after_it() -> None:
    clock, cluster = FakeClock(), Claims()
    ctx = SimpleNamespace(
        cluster=cluster, clock=clock, settings=Settings(cluster_name="c", region="us-east-1")
    )
    processor = InterruptionProcessor(ContainerContext(logger=None, metrics=None, context=ctx))  # type: ignore[arg-type]
    assert not processor._owned(spot_warning(NEW))
    assert not processor._owned(spot_warning(NEW))
    assert cluster.reads == 1  # reused within the TTL

    cluster.instances.append(NEW)  # launched while the container was frozen
    clock.moment += timedelta(hours=1)  # the wall clock moved; the monotonic one did not
    assert processor._owned(spot_warning(NEW))
    assert cluster.reads == 2

    clock.moment -= timedelta(seconds=OWNERSHIP_TTL_SECONDS * 10)  # stepped back: not trusted either
    processor._owned(spot_warning(NEW))
    assert cluster.reads == 3
