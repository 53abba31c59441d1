"""Interruption queue consumer: spot warnings, rebalance, state changes, AWS Health, capacity reservations.

Triggered by SQS in batches of up to 10 with ``ReportBatchItemFailures``: a message that fails for a
transient reason (API server unreachable, throttling, the same event in progress in ``spot_events``)
is the only one returned to the queue (an unreachable API server or AWS is said in one log line and
one metric, not a traceback per message); malformed or foreign messages are logged, counted and
acknowledged (see ``nodewright.interruption.processing``). A batch's messages are handled at once,
each in a thread of its own (``InterruptionProcessor.handle_batch``). After the batch, the drains it started —
and any an earlier invocation left half-done — run until done or the invocation's time is nearly up.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from nodewright.context import ContainerContext, is_outage, remaining_seconds, report_outage
from nodewright.interruption.processing import InterruptionProcessor
from nodewright.observability import logger, metrics, trace

log = logger()
emf = metrics()
container = ContainerContext(logger=log, metrics=emf)
processor = InterruptionProcessor(container)
# Return every failed message as an item failure, even when all failed, instead of erroring the invocation.
batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@log.inject_lambda_context(clear_state=True)
@emf.log_metrics
@trace
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    container.start_invocation(context)
    # Each message is parsed once, here; what it is goes on to the cordon and to its handling.
    records = [SQSRecord(r) for r in event.get("Records") or []]
    parsed = processor.parse_batch((r.message_id, r.body or "", _sent(r)) for r in records)
    # Every node the batch's warnings name is cordoned before the first message is handled, and
    # their replacement begins (beside the messages' handling and then the drains).
    cordoned = processor.cordon_first(message for _, message in parsed)
    processor.replace_ahead(cordoned, lambda_context=context)
    try:
        # The batch's messages are handled at once; the batch processor then reports each one's result
        # (or its failure, which alone goes back to the queue).
        handled = processor.handle_batch(parsed, lambda_context=context)

        def handle_record(record: SQSRecord) -> dict[str, Any]:
            return handled.result(record.message_id).as_dict()

        response = process_partial_response(
            event=event, record_handler=handle_record, processor=batch, context=context
        )
        # Records that failed because the API server or AWS is unreachable go back to the queue (SQS
        # redelivery is their retry). The drains of the acknowledged ones still run: a spot warning's
        # two minutes do not wait for the next invocation. The outage is said once.
        outage = next((e for _, e, _ in batch.exceptions if e is not None and is_outage(e)), None)
        try:
            processor.drive(budget_seconds=remaining_seconds(context))
        except Exception as exc:  # the batch's answer stands: acknowledged messages stay acknowledged
            if not is_outage(exc):
                raise
            outage = outage or exc
        if outage is not None:
            report_outage(log, emf, outage)
        return dict(response)
    finally:
        processor.end_replacement()  # when the drive did not end it: nothing outlives the invocation


def _sent(record: SQSRecord) -> datetime | None:
    """When the message entered the queue (SentTimestamp, epoch milliseconds), if SQS said."""
    try:
        return datetime.fromtimestamp(int(record.attributes.sent_timestamp) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, KeyError):
        return None
