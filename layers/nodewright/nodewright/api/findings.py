"""``Finding``: one problem in one document, in the API server's style ``path: message``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]
# A finding is one line a person reads: a value quoted in it (a list pasted where a string
# belongs, a 10 MB string) is cut, never printed whole.
MAX_MESSAGE = 400


@dataclass(frozen=True)
class Finding:
    """A validation or conversion finding; ``path`` is the field path (``spec.weight``), ``""`` = object."""

    path: str
    message: str
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[: MAX_MESSAGE - 40]}… ({len(message) - MAX_MESSAGE + 40} more characters)"


def error(path: str, message: str) -> Finding:
    return Finding(_bounded(path), _bounded(message), "error")


def warning(path: str, message: str) -> Finding:
    return Finding(_bounded(path), _bounded(message), "warning")
