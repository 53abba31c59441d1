"""``Finding``: one problem in one document, in the API server's style ``path: message``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


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


def error(path: str, message: str) -> Finding:
    return Finding(path, message, "error")


def warning(path: str, message: str) -> Finding:
    return Finding(path, message, "warning")
