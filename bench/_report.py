"""How every benchmark prints its figures: one JSON document with ``--json``, else aligned lines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def print_figures(figures: Mapping[str, Any], as_json: bool, *, sort_keys: bool = True) -> None:
    if as_json:
        print(json.dumps(figures, sort_keys=sort_keys))
        return
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
