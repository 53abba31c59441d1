"""What the interruption handler tests share: the owned instance and a counting replacement."""

from __future__ import annotations

from typing import Any

INSTANCE = "i-0aaaaaaaaaaaaaaa1"


class CountingReplacement:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.during: Any = None  # run while "in progress" (to deliver the same event on the other path)

    def __call__(self, ctx, node_names, *, guard=None):
        self.calls.append(list(node_names))
        if self.during:
            self.during()
        return self

    def summary(self) -> dict[str, Any]:
        return {"created": [f"replacement-{len(self.calls)}"]}
