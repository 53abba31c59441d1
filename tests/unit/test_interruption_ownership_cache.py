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
    processor._owned(spot_warning("i-0bbbbbbbbbbbbbbb2"))  # an instance the index does not know
    assert cluster.reads == 3


def test_a_slow_batch_of_owned_warnings_lists_the_cluster_once() -> None:
    """In an AZ-wide reclaim on a loaded machine each message of a batch took seconds (100 nodes:
    about 10 s each), longer than the index's TTL, and every message listed every NodeClaim and
    Node again. A NodeClaim's instance never changes and acting reads the objects again by name,
    so an instance the index knows needs no new list: only one it does not know, once the index
    is older than the TTL (launched since the read)."""
    clock, cluster = FakeClock(), Claims()
    cluster.instances = [f"i-0{n:016x}" for n in range(10)]
    ctx = SimpleNamespace(
        cluster=cluster, clock=clock, settings=Settings(cluster_name="c", region="us-east-1")
    )
    processor = InterruptionProcessor(ContainerContext(logger=None, metrics=None, context=ctx))  # type: ignore[arg-type]
    for instance in cluster.instances:
        assert processor._owned(spot_warning(instance))
        clock.moment += timedelta(seconds=OWNERSHIP_TTL_SECONDS * 5)  # each message's slow handling
    assert cluster.reads == 1

    cluster.instances.append(NEW)  # launched since the list: read again, the index being old
    assert processor._owned(spot_warning(NEW))
    assert cluster.reads == 2
    assert not processor._owned(spot_warning("i-0ffffffffffffffff"))  # not ours, within the TTL
    assert cluster.reads == 2
