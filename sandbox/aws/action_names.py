"""moto's request dispatch asking the class for the action, not listing the class's methods per request.

moto (5.2) decides whether a request's action exists with ``action in
method_names_from_class(type(self))``: ``inspect.getmembers`` over the class and its bases, sorted,
on every request; in the fault matrix's stories that was about a fiftieth of the sandbox's CPU. The
list holds the names whose attribute on the class is a function, so the same question is one
``getattr``: :class:`_FunctionNames` answers ``in`` that way, read live (the sandbox's own moto
patches add and remove actions, ``ec2_placement``), and lists the names only if iterated.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from moto.core import responses
from moto.core.utils import method_names_from_class


class _FunctionNames:
    """``method_names_from_class(clazz)`` as a container: membership asked of the class itself."""

    def __init__(self, clazz: Any) -> None:
        self.clazz = clazz

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and inspect.isfunction(getattr(self.clazz, name, None))

    def __iter__(self) -> Iterator[str]:
        return iter(method_names_from_class(self.clazz))


def install() -> None:
    """Patch the name moto's ``BaseResponse.call_action`` reads (idempotent; stays for the process)."""
    responses.method_names_from_class = _FunctionNames  # type: ignore[attr-defined,assignment]
