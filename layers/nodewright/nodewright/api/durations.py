"""Go-style durations (``"720h"``, ``"30s"``, ``"1m30s"``, ``"Never"``) as Karpenter's API writes them.

``parse_duration`` gives seconds (``None`` for ``"Never"``); ``format_duration`` writes seconds back
in the shortest Go form (2592000 → ``"720h"``). Karpenter's CRDs accept only the units h, m and s
(``DURATION_UNITS_STRICT``); kubelet grace periods also take ms/us/ns, so ``parse_duration`` accepts
every Go unit and the validator decides which units a field allows.
"""

from __future__ import annotations

import re

NEVER = "Never"

_UNIT_SECONDS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
DURATION_UNITS_STRICT = re.compile(r"^([0-9]+(s|m|h))+$")
# Go's time.Duration is int64 nanoseconds: Karpenter (and every Kubernetes component) refuses a
# longer duration. Anything past it is an error here too, which also keeps ``now + duration``
# inside Python's datetime range (a 80000000h expireAfter used to raise OverflowError).
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
MAX_DURATION_TEXT = "2562047h47m16s"


class DurationError(ValueError):
    """The text is not a Go duration."""


def parse_duration(text: str | int | float | None, *, allow_never: bool = True) -> float | None:
    """Seconds in a Go duration; ``None`` for ``"Never"`` (when allowed).

    Raises ``DurationError`` with a message saying what form is expected.
    """
    if text is None:
        raise DurationError(
            "a duration is required, e.g. 30s, 5m, 1h30m" + (" or Never" if allow_never else "")
        )
    if isinstance(text, bool) or not isinstance(text, str):
        raise DurationError(f"{text!r} is not a duration: write it as a string with a unit, e.g. {text}s")
    if text == NEVER:
        if allow_never:
            return None
        raise DurationError("Never is not allowed here; give a duration such as 30s, 5m or 1h30m")
    position, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if position != len(text) or not text:
        hint = " or Never" if allow_never else ""
        raise DurationError(
            f"{text!r} is not a duration: use numbers with units h, m, s (e.g. 720h, 1m30s){hint}"
        )
    if total > MAX_DURATION_SECONDS:
        raise DurationError(
            f"{text!r} is longer than the longest duration Kubernetes accepts ({MAX_DURATION_TEXT}, about "
            f"292 years){'; use Never for no limit' if allow_never else ''}"
        )
    return total


def format_duration(seconds: float | None) -> str:
    """The shortest Go duration for ``seconds`` (``"Never"`` for ``None``); 0 → ``"0s"``."""
    if seconds is None:
        return NEVER
    whole = round(seconds)
    if whole == 0:
        return "0s"
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text
