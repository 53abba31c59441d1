"""Running the real Lambda handlers locally, as Lambda runs them.

The demo, the benchmarks and the tests all invoke ``functions/<name>/app.py``
with a Lambda-shaped context and real event payloads; this module is the one
place that knows how.
"""

from __future__ import annotations

import importlib.util
import time
import uuid
from types import ModuleType
from typing import Any

from sandbox.shared_data import REPO_ROOT

# AWS's example of what an EventBridge schedule delivers (EventBridge User Guide, "Creating a rule
# that runs on a schedule"); only ``id`` changes per invocation.
SCHEDULED_EVENT: dict[str, Any] = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "123456789012",
    "time": "2015-10-08T16:53:06Z",
    "region": "us-east-1",
    "resources": ["arn:aws:events:us-east-1:123456789012:rule/my-scheduled-rule"],
    "detail": {},
}


def scheduled_event(event_id: str | None = None) -> dict[str, Any]:
    """A schedule's event with a fresh id (the handlers use it as the correlation id)."""
    return {**SCHEDULED_EVENT, "id": event_id or str(uuid.uuid4())}


def load_function(name: str) -> ModuleType:
    """Import ``functions/<name>/app.py`` as Lambda would, without putting functions/ on sys.path."""
    path = REPO_ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"nodewright_function_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no Lambda handler at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LambdaContext:
    """What Lambda passes as ``context``; handlers size their loops from the remaining time."""

    memory_limit_in_mb = 512

    def __init__(self, seconds: float, function_name: str = "nodewright-provisioner") -> None:
        self.function_name = function_name
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)
