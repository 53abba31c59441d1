"""Run a pass's independent pieces of work at once, bounded: the NodeClaims of one provisioning pass
are created and launched concurrently, as Karpenter launches a batch's NodeClaims in parallel.

``each(tasks, limit)`` runs every task in at most ``limit`` threads and returns their results in
the tasks' order. Each task runs in a copy of the caller's ``contextvars`` context (as
``asyncio.to_thread`` does), so what the invocation put there (the sandbox's crash hook knows its
invocation that way, ``nodewright.checkpoints``) is seen by its threads too.

When a task raises, the tasks not started yet are skipped (``Skipped``), those already running
finish (a thread cannot be stopped mid-CreateFleet, and its result must be recorded), and the first
exception raised is raised again once every running task is done: an API server outage ends the
pass as it did when the launches went one after another. One task alone (the usual pass) runs in
the caller's thread.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")


class Skipped:
    """The result of a task that never ran: an earlier one raised."""


SKIPPED = Skipped()


class _Run(Generic[T]):
    def __init__(self, tasks: Sequence[Callable[[], T]]) -> None:
        self.tasks = tasks
        self.results: list[T | Skipped] = [SKIPPED] * len(tasks)
        self.failure: BaseException | None = None
        self._lock = threading.Lock()

    def run(self, index: int) -> None:
        with self._lock:
            if self.failure is not None:
                return
        try:
            self.results[index] = self.tasks[index]()
        except BaseException as exc:  # re-raised by ``each`` in the caller's thread
            with self._lock:
                if self.failure is None:
                    self.failure = exc


def each(tasks: Sequence[Callable[[], T]], *, limit: int, name: str = "launch") -> list[T | Skipped]:
    """Run ``tasks`` in at most ``limit`` threads; their results in order (see the module docstring)."""
    if limit < 1:
        raise ValueError(f"a concurrency limit must be at least 1, not {limit}")
    run: _Run[T] = _Run(tasks)
    if len(tasks) <= 1 or limit == 1:
        for index in range(len(tasks)):
            run.run(index)
    else:
        with ThreadPoolExecutor(max_workers=min(limit, len(tasks)), thread_name_prefix=name) as pool:
            for index in range(len(tasks)):
                pool.submit(contextvars.copy_context().run, run.run, index)
    if run.failure is not None:
        raise run.failure
    return run.results
