"""What the interruption handler tests share: the owned instance, a Lambda context, a counting replacement."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INSTANCE = "i-0aaaaaaaaaaaaaaa1"


@dataclass
class FakeLambdaContext:
    function_name: str = "nodewright-interruption"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:111122223333:function:nodewright-interruption"
    aws_request_id: str = "request-1"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


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
