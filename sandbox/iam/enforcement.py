"""IAM enforcement for one sandbox: who is calling, what AWS would authorize, and the answer.

:class:`Enforcement` holds the functions' identities and policies (``sandbox.iam.policies``), the
evaluator process (``sandbox.iam.evaluator``) and the decisions taken. :class:`IamMiddleware`
sits in front of moto's WSGI app: a request signed by a function's key is parsed
(``sandbox.iam.requests``), turned into the authorizations AWS makes for it
(``sandbox.iam.authorization``) and evaluated against that function's own policies; a denial
never reaches moto and is answered as the service answers it (:mod:`sandbox.iam.denials`).
The sandbox's own identity (seeding, simulators, the tests' assertions, the kubelet) is the
account's owner and is not restricted; a key the sandbox does not know is refused as AWS refuses
an unknown key.

Decisions are recorded (function, action, resource type, the statement that allowed it) and,
when ``NODEWRIGHT_IAM_RECORDS`` names a folder (``make demo``/``make test`` set it), written
there at stop; ``nodewright sandbox iam-report`` turns them into ``docs/iam.md``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.iam import authorization, denials
from sandbox.iam.authorization import Call, InstanceProfileView, LaunchTemplateView, UnknownCall
from sandbox.iam.evaluator import Decision, Evaluator, Request
from sandbox.iam.policies import ADMINISTRATOR_KEY, Identity, StackPolicies, synthesized
from sandbox.iam.requests import parse, signature

log = logging.getLogger("sandbox.iam")
RECORDS_VARIABLE = "NODEWRIGHT_IAM_RECORDS"
DECISION_CACHE_SIZE = 4096


@dataclass(frozen=True)
class Denial:
    function: str
    call: str  # "ec2:CreateFleet"
    action: str
    resource: str
    message: str
    expected: bool = False  # provoked by a test (expecting_denials)


@dataclass
class Verdict:
    allowed: bool
    requests: list[Request] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    denied: Request | None = None
    reason: str = ""  # "ImplicitlyDenied", "ExplicitlyDenied", "NoModel", "Error"
    detail: str = ""


class MotoWorld:
    """The account as moto's backends hold it (read at request time, in the moto server's process)."""

    def __init__(self, account: str) -> None:
        self.account = account

    def _backend(self, service: str, region: str) -> Any:
        from moto.backends import get_backend

        # get_backend is overloaded per literal service name; this one is whatever a request names.
        return get_backend(service)[self.account][region]  # type: ignore[call-overload]

    def ec2_tags(self, region: str, resource_id: str) -> Mapping[str, str]:
        return dict(self._backend("ec2", region).tags.get(resource_id, {}))

    def launch_template(self, region: str, id_or_name: str) -> LaunchTemplateView | None:
        backend = self._backend("ec2", region)
        template_id = backend.launch_template_name_to_ids.get(id_or_name, id_or_name)
        template = backend.launch_templates.get(template_id)
        if template is None:
            return None
        return LaunchTemplateView(
            template.id,
            template.name,
            dict(template.default_version().data),
            self.ec2_tags(region, template.id),
        )

    def instance_profile(self, name: str) -> InstanceProfileView | None:
        profile = self._backend("iam", "global").instance_profiles.get(name)
        if profile is None:
            return None
        tags = {t["Key"]: t["Value"] for t in profile.tags or []}
        return InstanceProfileView(
            profile.name, profile.path, tags, tuple(role.arn for role in profile.roles)
        )

    def role_arn(self, name: str) -> str | None:
        backend = self._backend("iam", "global")
        return next((role.arn for role in backend.roles.values() if role.name == name), None)

    def eks_cluster_tags(self, region: str, name: str) -> Mapping[str, str]:
        cluster = self._backend("eks", region).clusters.get(name)
        return dict(cluster.tags or {}) if cluster is not None else {}

    def secret(self, region: str, secret_id: str) -> tuple[str, Mapping[str, str]] | None:
        secrets = self._backend("secretsmanager", region).secrets
        found = secrets.get(secret_id) if secret_id in secrets else None
        if found is None:
            return None
        return found.arn, {t["Key"]: t["Value"] for t in found.tags or []}


class Enforcement:
    """See the module docstring; ``start``/``stop``."""

    def __init__(self, cluster_name: str, region: str, account: str) -> None:
        self.cluster_name = cluster_name
        self.region = region
        self.account = account
        self.policies: StackPolicies | None = None
        self.evaluator: Evaluator | None = None
        self.world: Any = MotoWorld(account)
        self.denials: list[Denial] = []
        self.allowed: set[tuple[str, str, str, str]] = set()  # function, action, resource type, statement
        # Calls allowed, by (function, "service:Operation"): what a benchmark counts (DynamoDB writes).
        self.calls: Counter[tuple[str, str]] = Counter()
        self._by_key: dict[str, Identity] = {}
        self._overrides: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._expecting = 0  # denials a test provokes on purpose: kept, not recorded
        self._unwritten: list[Denial] = []  # denials not yet in the records (a test's own never are)
        # Decisions by (principal, requests): IAM's answer is a function of them and the policies,
        # so a repeated call (every Describe*, every GetItem) costs no round trip to the evaluator.
        self._decided: OrderedDict[str, list[Decision]] = OrderedDict()

    # lifecycle
    def start(self) -> Enforcement:
        """Start the evaluator while the policies load (from the synth cache, or a synth now)."""
        self.evaluator = Evaluator(self.account).start()
        self.policies = StackPolicies(synthesized(), self.cluster_name, self.account, self.region)
        self._by_key = {i.access_key_id: i for i in self.policies.identities.values()}
        self.evaluator.wait_ready()
        self._register_all()
        return self

    def stop(self) -> None:
        self.write_records()
        if self.evaluator is not None:
            self.evaluator.stop()
            self.evaluator = None

    # identities
    def identity(self, function: str) -> Identity:
        assert self.policies is not None, "IAM enforcement is not started"
        if function not in self.policies.identities:
            raise KeyError(
                f"no function {function!r} in the stack; known: {', '.join(sorted(self.policies.identities))}"
            )
        return self.policies.identities[function]

    def credentials(self, function: str) -> dict[str, str]:
        """The variables Lambda would set for ``function``'s execution role."""
        return self.identity(function).env()

    @property
    def node_role_name(self) -> str:
        assert self.policies is not None, "IAM enforcement is not started"
        return self.policies.node_role_name

    def learn(self, env: Mapping[str, str], function: str | None = None) -> None:
        """Physical names from a function's environment (every function's when None): the state
        table, the queue, the node role from the sandbox's own variables; the wake-up's secret."""
        assert self.policies is not None
        with self._lock:
            names = [function] if function else list(self.policies.functions)
            learnt = [self.policies.learn(name, env) for name in names]
            if any(learnt):
                self._register_all()

    def _register_all(self) -> None:
        assert self.policies is not None
        assert self.evaluator is not None
        self._decided.clear()  # the policies change: every cached answer may too
        for name, identity in self.policies.identities.items():
            self.evaluator.set_policies(
                identity.principal, self._overrides.get(name) or self.policies.policies(name)
            )

    @contextlib.contextmanager
    def without_statement(self, function: str, sid: str) -> Iterator[None]:
        """``function``'s role without its statement ``sid`` for a while (proves the check bites)."""
        assert self.policies is not None
        with self._lock:
            self._overrides[function] = self.policies.without(function, sid)
            self._register_all()
        try:
            yield
        finally:
            with self._lock:
                self._overrides.pop(function, None)
                self._register_all()

    @contextlib.contextmanager
    def expecting_denials(self) -> Iterator[None]:
        """Denials in this block are a test's own doing: in ``denials``, not in the records."""
        with self._lock:
            self._expecting += 1
        try:
            yield
        finally:
            with self._lock:
                self._expecting -= 1

    # deciding
    def authorize(self, identity: Identity, call: Call) -> Verdict:
        assert self.evaluator is not None
        try:
            requests = authorization.authorizations(call, self.world)
        except UnknownCall as exc:
            verdict = Verdict(False, reason="NoModel", detail=str(exc))
            self._note_denial(identity, call, None, verdict)
            return verdict
        decisions = self._decide(identity.principal, requests)
        for request, decision in zip(requests, decisions, strict=True):
            if not decision.allowed:
                verdict = Verdict(
                    False,
                    requests,
                    decisions,
                    denied=request,
                    reason=decision.result,
                    detail=decision.error,
                )
                self._note_denial(identity, call, request, verdict)
                return verdict
        with self._lock:
            self.calls[(identity.function, call.label)] += 1
            for request, decision in zip(requests, decisions, strict=True):
                kind = _resource_type(request.resource)
                for grant in decision.grants:
                    self.allowed.add((identity.function, request.action, kind, grant.label))
        return Verdict(True, requests, decisions)

    def _decide(self, principal: str, requests: list[Request]) -> list[Decision]:
        assert self.evaluator is not None
        key = json.dumps([principal, [r.as_json("") for r in requests]], sort_keys=True, default=str)
        with self._lock:
            found = self._decided.get(key)
            if found is not None:
                self._decided.move_to_end(key)
                return found
        decisions = self.evaluator.decide(principal, requests)
        with self._lock:
            self._decided[key] = decisions
            while len(self._decided) > DECISION_CACHE_SIZE:
                self._decided.popitem(last=False)
        return decisions

    def _note_denial(self, identity: Identity, call: Call, request: Request | None, verdict: Verdict) -> None:
        message = denials.message(identity.principal, call, request, verdict.reason, verdict.detail)
        denial = Denial(
            identity.function,
            call.label,
            request.action if request else call.label,
            authorization.shown(request.resource) if request else "",
            message,
            expected=self._expecting > 0,
        )
        with self._lock:
            self.denials.append(denial)
            if not denial.expected:
                self._unwritten.append(denial)
        log.warning("IAM denied %s: %s", identity.function, message)

    def denials_of(self, function: str) -> list[Denial]:
        with self._lock:
            return [d for d in self.denials if d.function == function]

    def check(
        self,
        method: str,
        path: str,
        *,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
        environ: Mapping[str, Any] | None = None,
    ) -> denials.Answer | None:
        """One HTTP request to an AWS endpoint of the sandbox: None to let it through, else the
        service's error answer (status line, headers, body). The moto server's middleware and any
        other endpoint the sandbox serves (Lambda's Invoke API of the wake-up) ask this."""
        signed = signature(headers.get("Authorization", ""))
        if signed is not None and signed.access_key_id == ADMINISTRATOR_KEY:
            return None
        service = signed.service if signed else _service_of_unsigned(headers)
        identity = self._by_key.get(signed.access_key_id) if signed else None
        if identity is None or signed is None:
            return denials.unknown_identity(service, signed.access_key_id if signed else None)
        try:
            parsed = parse(service, method, path, query=query, headers=headers, body=body, environ=environ)
        except Exception as exc:  # a request the sandbox cannot read is denied, never passed
            call = Call(service, "?", {}, signed.region, self.account, identity.principal)
            verdict = Verdict(
                False, reason="NoModel", detail=f"the sandbox could not read the request ({exc})"
            )
            self._note_denial(identity, call, None, verdict)
            return denials.answer(service, "json", identity.principal, call, verdict)
        call = Call(service, parsed.operation, parsed.params, signed.region, self.account, identity.principal)
        verdict = self.authorize(identity, call)
        if verdict.allowed:
            return None
        return denials.answer(service, parsed.protocol, identity.principal, call, verdict)

    # records
    def write_records(self, directory: str | Path | None = None) -> Path | None:
        """Append what was decided since the last write to ``directory`` (or $NODEWRIGHT_IAM_RECORDS)."""
        target = directory or os.environ.get(RECORDS_VARIABLE)
        if not target or not (self.allowed or self._unwritten):
            return None
        folder = Path(target)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.cluster_name}-{os.getpid()}-{id(self):x}.jsonl"
        with self._lock, path.open("a") as out:
            for function, action, kind, statement in sorted(self.allowed):
                out.write(
                    json.dumps(
                        {"function": function, "action": action, "resource": kind, "statement": statement}
                    )
                    + "\n"
                )
            unwritten, self._unwritten = self._unwritten, []
            for denial in unwritten:
                out.write(
                    json.dumps(
                        {
                            "function": denial.function,
                            "action": denial.action,
                            "resource": denial.resource,
                            "denied": denial.message,
                        }
                    )
                    + "\n"
                )
            self.allowed.clear()
        return path


def _resource_type(arn: str) -> str:
    """``table``, ``instance``, ``parameter``... of an ARN (``*``: none)."""
    if arn == "*":
        return "*"
    resource = arn.split(":", 5)[-1]
    for separator in ("/", ":"):
        if separator in resource:
            return resource.split(separator, 1)[0]
    service = arn.split(":")[2]  # a queue's or topic's ARN ends with its name
    return {"sqs": "queue", "sns": "topic"}.get(service, service)


class IamMiddleware:
    """WSGI middleware in front of moto's app (see the module docstring)."""

    def __init__(self, app: Any, enforcement: Enforcement) -> None:
        self.app = app
        self.enforcement = enforcement

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO", "").startswith("/moto-api"):  # the sandbox's own control of moto
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        environ["wsgi.input"] = io.BytesIO(body)
        answer = self.enforcement.check(
            environ.get("REQUEST_METHOD", "GET"),
            environ.get("PATH_INFO", ""),
            query=environ.get("QUERY_STRING", ""),
            headers=headers,
            body=body,
            environ=environ,
        )
        if answer is not None:
            status, answer_headers, payload = answer
            start_response(status, answer_headers)
            return [payload]
        environ["wsgi.input"] = io.BytesIO(body)
        return self.app(environ, start_response)


def _service_of_unsigned(headers: Mapping[str, str]) -> str:
    target = headers.get("X-Amz-Target", "")
    return "dynamodb" if target.startswith("DynamoDB") else "ec2"
