"""moto's SQS queues made safe for concurrent requests, as SQS's are.

SQS hands a received message to one consumer until its visibility timeout ends, and never loses a
message a consumer did not delete. moto (5.x) keeps a queue's messages in a list that
``SendMessage`` appends to under the queue's lock, while ``ReceiveMessage`` (check visible, then mark
received) and ``DeleteMessage`` (build the list without the message, then assign it) run without it.
The sandbox's interruption queue is polled as Lambda polls it, by up to the function's concurrency
at once, while EventBridge sends the storm's warnings: with threads switching often, 300 messages
sent by 3 threads and received by 6 came out with messages handed to two consumers at once,
``RuntimeError: Set changed size during iteration`` answered as a 500, ``ReceiptHandleIsInvalid``
for a message just received, and messages sent while another was deleted gone for good.

Here ``ReceiveMessage``, ``DeleteMessage`` and ``ChangeMessageVisibility`` take the queue's own lock
(the one ``SendMessage`` takes). A long poll does not hold it while it waits: each look for messages
is moto's own with no wait, under the lock, and between looks the poll waits on the queue's condition
as moto's does. The answers are moto's; the patch stays for the process (:func:`install` is
idempotent).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
_PATCHED = "_sandbox_serialised"


def _receive(original: Callable[..., Any]) -> Callable[..., Any]:
    def receive_message(  # noqa: PLR0917 - moto's signature
        self: Any,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> Any:
        queue = self.get_queue(queue_name)
        deadline = time.monotonic() + (wait_seconds_timeout or 0)
        while True:
            with queue._messages_lock:
                got = original(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
            remaining = deadline - time.monotonic()
            if got or remaining <= 0:
                return got
            queue.wait_for_messages(min(1.0, remaining))

    return receive_message


def _under_queue_lock(original: Callable[..., Any], queue_of: Callable[..., Any]) -> Callable[..., Any]:
    def serialised(self: Any, *args: Any, **kwargs: Any) -> Any:
        with queue_of(self, *args, **kwargs)._messages_lock:
            return original(self, *args, **kwargs)

    return serialised


def install() -> None:
    """Patch moto's SQS (idempotent: patched once a process)."""
    from moto.sqs.models import Queue, SQSBackend

    with _lock:
        if getattr(SQSBackend, _PATCHED, False):
            return
        SQSBackend.receive_message = _receive(SQSBackend.receive_message)  # type: ignore[method-assign]
        SQSBackend.change_message_visibility = _under_queue_lock(  # type: ignore[method-assign]
            SQSBackend.change_message_visibility,
            lambda backend, queue_name, *_, **__: backend.get_queue(queue_name),
        )
        Queue.delete_message = _under_queue_lock(Queue.delete_message, lambda queue, *_, **__: queue)  # type: ignore[method-assign]
        setattr(SQSBackend, _PATCHED, True)
