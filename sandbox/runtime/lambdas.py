"""Running the real Lambda handlers locally, as Lambda runs them.

The demo, the benchmarks, the tests and the sandbox's function workers all invoke
``functions/<name>/app.py`` with a Lambda-shaped context (events come from ``sandbox.runtime.events``);
this module is the one place that knows how.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from nodewright.spec import deployment

from sandbox.shared_data import REPO_ROOT


def load_function(name: str, path: str | Path | None = None) -> ModuleType:
    """Import ``functions/<name>/app.py`` (or ``path``) as Lambda would, without touching sys.path.

    With a sandbox running in this process, the handler's container signs its AWS calls as the
    function's own role, as in Lambda (several functions share this process; each one's
    ``ContainerContext`` reads its settings with its own credentials over the environment)."""
    path = Path(path) if path else REPO_ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"nodewright_function_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no Lambda handler at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # A sandbox runs in this process only if its module was imported here (not in a container the
    # runtime started, which need not import the emulator and moto to learn that).
    cluster = sys.modules.get("sandbox.cluster")
    sandbox = cluster.running() if cluster is not None else None
    container = getattr(module, "container", None)
    if sandbox is not None and container is not None:
        container.run_as(sandbox.credentials(name))
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


PROVISIONER_TIMEOUT_SECONDS = float(deployment.PROVISIONER_TIMEOUT_SECONDS)


@contextmanager
def provisioner_invocation(loop_seconds: float) -> Iterator[LambdaContext]:
    """A provisioner invocation whose loop starts passes for ``loop_seconds`` only.

    Demos and tests shorten the loop, never the invocation: the context keeps the deployed
    timeout, so a pass that starts late still has the time a real one has to write (a short
    context would stop its writes at its own deadline on a busy machine). Development only: it
    sets the loop's module-level budget for the duration of one invocation.
    """
    from nodewright.provisioning import loop

    saved, loop.LOOP_BUDGET_SECONDS = loop.LOOP_BUDGET_SECONDS, loop_seconds
    try:
        yield LambdaContext(PROVISIONER_TIMEOUT_SECONDS, "nodewright-provisioner")
    finally:
        loop.LOOP_BUDGET_SECONDS = saved
