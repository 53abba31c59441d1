"""``nodewright sandbox up``'s live log: one short line per thing a function did.

It tails the functions' own log files (their Powertools JSON lines, as CloudWatch Logs would hold
them) and turns the lines that say what happened into a compact line: a launch with its type,
zone, capacity type and $/h; a node registered; a node being drained or removed and what that
saves; an interruption handled; a pod that cannot be placed (once per reason); warnings and errors.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Price = Callable[[str, str, str], float | None]


def render(function: str, line: dict[str, Any], price: Price) -> str | None:
    """The compact text of one JSON log line, or None when it is not news."""
    message = line.get("message")
    level = line.get("level", "INFO")
    if message == "provisioning pass":
        launched = []
        for item in line.get("launched") or []:
            claim, _, offering = str(item).partition("=")
            kind, zone, capacity = ([*offering.split("/"), "", "", ""])[:3]
            cost = price(kind, zone, capacity)
            money = f", ${cost:.4f}/h" if cost is not None else ""
            launched.append(f"launched NodeClaim {claim}: {kind} {capacity} in {zone}{money}")
        failures = [f"launch failed: {f}" for f in line.get("failures") or []]
        return "\n".join(launched + failures) or None
    if message == "NodeClaim registered":
        return f"NodeClaim {line.get('nodeclaim')} registered as node {line.get('node')}"
    if message == "NodeClaim finalized":
        return f"NodeClaim {line.get('nodeclaim')} finalized (instance terminated: {line.get('terminated')})"
    if message == "disrupting a node":
        saved = line.get("pricePerHour")
        money = f", saves ${saved:.4f}/h" if isinstance(saved, int | float) else ""
        return (
            f"removing node {line.get('node')} ({line.get('reason')}, NodePool {line.get('nodepool')}{money})"
        )
    if message == "interruption handled":
        parts = [f"interruption handled: {line.get('disposition')}"]
        if line.get("markedUnavailable"):
            parts.append(f"offering {', '.join(line['markedUnavailable'])} marked unavailable")
        created = (line.get("replacement") or {}).get("nodeClaimsCreated") or []
        if created:
            parts.append(f"replacement NodeClaim {', '.join(created)}")
        draining = [
            t.get("node") or t.get("nodeclaim") for t in line.get("terminating") or [] if isinstance(t, dict)
        ]
        if draining:
            parts.append(f"cordon and drain {', '.join(str(d) for d in draining)}")
        if line.get("recorded"):
            parts.append("recorded as an event")
        return "; ".join(parts)
    if message == "event already handled; nothing done again":
        return f"event {line.get('eventId')} already handled: nothing done again"
    if message == "price table refreshed":
        counts = f"{line.get('on_demand')} on-demand, {line.get('spot')} spot"
        return f"price table refreshed ({counts}; {line.get('source')})"
    if message == "deadline reached: pod deleted without the Eviction API":
        return f"drain deadline: pod {line.get('pod')} deleted"
    if level in ("WARNING", "ERROR", "CRITICAL") and message:
        return f"{level}: {message}"
    return None


class LiveLog:
    """Tails ``<logs>/<function>.log`` files and prints what they say, compactly."""

    def __init__(self, logs_dir: Path, say: Callable[[str, str], None], price: Price) -> None:
        self.logs_dir = logs_dir
        self.say = say
        self.price = price
        self._offsets: dict[Path, int] = {}
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LiveLog:
        self._thread = threading.Thread(target=self._run, name="live-log", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.poll()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self.poll()

    def poll(self) -> None:
        for path in sorted(self.logs_dir.glob("*.log")):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            complete = chunk.rfind(b"\n") + 1
            self._offsets[path] = offset + complete
            for raw in chunk[:complete].splitlines():
                self._line(path.stem, raw)

    def _line(self, function: str, raw: bytes) -> None:
        try:
            line = json.loads(raw)
        except ValueError:
            text = raw.decode(errors="replace").strip()
            if text.startswith("Traceback") or "Error" in text[:60]:
                self.say(function, text[:200])
            return
        if not isinstance(line, dict) or "_aws" in line:  # EMF metric lines
            return
        if line.get("message") == "pod cannot be placed":
            key = f"{line.get('pod')}:{line.get('reason')}"
            if key not in self._seen:
                self._seen.add(key)
                self.say(function, f"pod {line.get('pod')} cannot be placed: {line.get('reason')}")
            return
        rendered = render(function, line, self.price)
        for part in (rendered or "").splitlines():
            self.say(function, part)


def printer(out: Any = None) -> Callable[[str, str], None]:
    """``say(source, text)`` printing ``HH:MM:SS source  text`` lines."""
    lock = threading.Lock()

    def say(source: str, text: str) -> None:
        with lock:
            print(f"{time.strftime('%H:%M:%S')} {source:<13} {text}", file=out, flush=True)

    return say
