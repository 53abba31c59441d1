"""``nodewright event FILE... [--json]``: what the interruption functions would do with a message.

The file holds one message exactly as SQS or EventBridge delivers it (an EventBridge event, an
Auto Scaling lifecycle message, or either wrapped in an SNS notification); it is parsed by the
same code as the functions. Nothing is contacted: which instances this cluster owns is only known
in the cluster, so the output says what happens *if* it owns them. The functions also refuse
messages older than their kind's maximum age; ``--now`` judges that against the current time
(otherwise the message is taken as received the moment it was sent, so samples with old dates
still show what they would do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "event",
        help="show how an interruption message is understood and what it makes happen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="a message as delivered ('-' for stdin)")
    parser.add_argument("--json", action="store_true", help="one JSON object per file")
    parser.add_argument(
        "--rebalance-mode",
        choices=("replace", "event-only"),
        default=os.environ.get("REBALANCE_MODE", "replace"),
        help="the cluster's REBALANCE_MODE (default: $REBALANCE_MODE or replace)",
    )
    parser.add_argument(
        "--now",
        action="store_true",
        help="judge the message's age against the current time, as the functions do on arrival",
    )
    parser.set_defaults(func=run)


ACTION_TEXT = {
    "replace-and-drain": "launch a replacement, taint karpenter.sh/disrupted:NoSchedule and cordon, drain "
    "(PDB-aware), then delete the NodeClaim and node",
    "record-only": "record a Kubernetes event on the node; nothing else",
    "ignore": "acknowledge and log; nothing else",
}


def read_text(name: str) -> str:
    """The file's text (``-``: standard input), decoded as UTF-8 as SQS and EventBridge deliver it."""
    from nodewright.textfiles import decode_utf8

    return decode_utf8(sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes())


def unreadable(exc: OSError | ValueError) -> str:
    """Why a file could not be read, in words (no traceback for a wrong file)."""
    if isinstance(exc, OSError):
        return str(exc.strerror or exc)
    return f"{exc}; a message is the JSON text SQS or EventBridge delivers"


def run(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from nodewright.interruption.events import Action, MalformedMessage, parse_message

    failures = 0
    for name in args.files:
        try:
            text = read_text(name)
        except (OSError, ValueError) as exc:  # unreadable, or not UTF-8 (textfiles.NotUtf8Error)
            print(f"{name}: cannot read: {unreadable(exc)}", file=sys.stderr)
            failures += 1
            continue
        try:
            now = datetime.now(UTC) if args.now else None
            event = parse_message(text, rebalance_mode=args.rebalance_mode, received=now, now=now)
        except MalformedMessage as exc:
            failures += 1
            if args.json:
                print(json.dumps({"file": name, "malformed": str(exc)}))
            else:
                print(f"{name}: malformed: {exc}\n  the functions acknowledge it and count MalformedMessages")
            continue
        summary = event.summary()
        if args.json:
            print(json.dumps({"file": name, **summary}))
            continue
        print(f"{name}:")
        print(f"  kind:      {summary['kind']}")
        print(f"  event id:  {summary['eventId']}")
        print(f"  instances: {', '.join(summary['instanceIds']) or '(none)'}")
        if summary["deadline"]:
            print(f"  deadline:  {summary['deadline']}")
        print(f"  action:    {summary['action']}: {ACTION_TEXT[summary['action']]}")
        print(f"  why:       {summary['reason']}")
        for note in summary.get("notes", []):
            print(f"  tolerated: {note}")
        if event.action is not Action.IGNORE:
            print("  instances without a NodeClaim in the cluster are not ours: acknowledged and counted")
    return 1 if failures else 0
