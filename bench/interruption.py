"""Interruption: messages/s in batches of 10, and an AZ-wide spot reclaim through the stack as deployed.

* throughput: ``--messages`` messages in SQS batches of 10 through the real ``functions/interruption``
  handler (Powertools BatchProcessor, idempotency on the sandbox's DynamoDB table), the mix a shared
  interruption queue really carries — spot warnings and rebalance recommendations for instances of
  other clusters, state changes that need nothing, Auto Scaling test notifications, and malformed
  bodies; none of them changes the cluster, so every batch sees the same work;
* the storm (``bench/_storm.py``): ``--nodes`` spot nodes the provisioner launched, ``--pods`` pods
  each under a PodDisruptionBudget, all warned within about a second; the queue's event source
  mapping, the direct EventBridge path, the idempotency table, the provisioner and the spot market
  as the stack and AWS run them. Per node, warning → cordoned, → replacement capacity requested,
  → drained; events acted on twice; the functions' API requests per second; DynamoDB writes.

Goals (issues 7 and 30): ≥ 200 messages/s; every node cordoned and its replacement requested within
30 s of its warning, drained before the two-minute notice ends, nothing handled twice.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench._report import print_figures, save
from bench._storm import NOTICE_SECONDS, Storm
from sandbox.harness import environment, quiet_functions
from sandbox.runtime import events

# The storm's goals (issue 30).
CORDON_GOAL_SECONDS = 30.0
REPLACEMENT_GOAL_SECONDS = 30.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--messages", type=int, default=1000, help="messages for the throughput run (default 1000; 0: none)"
    )
    parser.add_argument("--nodes", type=int, default=20, help="spot nodes reclaimed at once (default 20)")
    parser.add_argument("--pods", type=int, default=5, help="pods per node (default 5)")
    parser.add_argument(
        "--verbose", action="store_true", help="say how the setup and the storm go, on stderr"
    )
    parser.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the functions' logs to DIR")
    parser.add_argument(
        "--setup-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="give up when the storm's nodes and pods are not all up after this long (default 900)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


class _Context:
    function_name = "nodewright-interruption-bench"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:nodewright-interruption-bench"
    aws_request_id = "bench"

    def __init__(self, seconds: float = 120.0) -> None:
        self._deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)


def _foreign_mix(count: int) -> list[str]:
    """Messages that are acknowledged without touching the cluster's objects."""
    makers = [
        lambda i: events.spot_warning(f"i-0f{i:015x}"),
        lambda i: events.rebalance_recommendation(f"i-0e{i:015x}"),
        lambda i: events.state_change(f"i-0d{i:015x}", "pending"),
        lambda i: {
            "Event": "autoscaling:TEST_NOTIFICATION",
            "RequestId": str(uuid.uuid4()),
            "AutoScalingGroupName": "x",
        },
        lambda i: "{malformed",
    ]
    return [m if isinstance(m := makers[i % len(makers)](i), str) else json.dumps(m) for i in range(count)]


def _throughput(messages: int) -> dict[str, Any]:
    """The foreign mix through the real handler in batches of 10 (a warm container: the first batch
    connects and builds the clients, then is measured again with the rest)."""
    from sandbox import Sandbox

    with (
        Sandbox(cluster_name="bench-interruption", boot_delay=0.1, init_delay=0.1) as sb,
        quiet_functions(),
        environment(sb.env()),
    ):
        sb.apply_crds()
        from nodewright.cluster import reset_connections

        from sandbox.runtime.lambdas import load_function

        app = load_function("interruption")
        try:
            # The handler logs and emits EMF on stdout, as in Lambda: keep that out of the figures.
            with contextlib.redirect_stdout(io.StringIO()):
                foreign = events.sqs_batches(_foreign_mix(messages))
                app.handler(foreign[0], _Context())
                failures = 0
                started = time.perf_counter()
                for batch in foreign:
                    failures += len(app.handler(batch, _Context())["batchItemFailures"])
                seconds = time.perf_counter() - started
        finally:
            reset_connections()
    return {
        "messages": messages,
        "batch": events.SQS_BATCH_SIZE,
        "messagesPerSecond": round(messages / seconds, 1),
        "failedMessages": failures,
    }


def run(args: argparse.Namespace) -> int:
    figures: dict[str, Any] = _throughput(args.messages) if args.messages else {}
    say = (lambda text: print(text, file=sys.stderr, flush=True)) if args.verbose else None
    storm = Storm(args.nodes, args.pods, say=say, keep_logs=args.keep_logs).run(
        setup_timeout=args.setup_timeout
    )
    figures.update(storm)
    samples = {k: figures.pop(k) for k in ("cordonedSeconds", "drainedSeconds")}
    print_figures(figures, args.json, sort_keys=False)
    save(args, {**figures, **samples})
    everyone = args.nodes
    ok = (
        figures.get("failedMessages", 0) == 0
        and storm["cordoned"] == everyone
        and storm["drained"] == everyone
        and storm["replacementRequested"] == everyone
        and storm["handledTwice"] == 0
        and storm["nodeClaimsUntouched"] == 0
        and (storm["cordonedMaxSeconds"] or 0) <= CORDON_GOAL_SECONDS
        and (storm["replacementRequestedMaxSeconds"] or 0) <= REPLACEMENT_GOAL_SECONDS
        and (storm["lastDrainedSeconds"] or 0) <= NOTICE_SECONDS
    )
    return 0 if ok else 1
