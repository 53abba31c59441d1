"""moto's request dispatch listing a response class's methods once per class, not once per request.

moto (5.2) decides whether a request's action exists by listing the response class's functions
(``method_names_from_class``: ``inspect.getmembers`` over the class and its bases, sorted) on every
request; in the fault matrix's stories that was about a fiftieth of the sandbox's CPU. A class's
functions do not change while the server runs, so the list is kept per class; the answer is moto's
own list.
"""

from __future__ import annotations

from typing import Any

from moto.core import responses
from moto.core.utils import method_names_from_class

_names: dict[type, list[str]] = {}


def _method_names(clazz: Any) -> list[str]:
    names = _names.get(clazz)
    if names is None:
        names = _names[clazz] = method_names_from_class(clazz)
    return names


def install() -> None:
    """Patch the name moto's ``BaseResponse.call_action`` reads (idempotent; stays for the process)."""
    responses.method_names_from_class = _method_names  # type: ignore[attr-defined]
