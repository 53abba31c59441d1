"""The infra tests' questions to IAM, asked of the sandbox's evaluator (one evaluator for all).

A role's statements are resolved from the synthesized template by ``sandbox.iam.cloudformation``
(for ACCOUNT/REGION, every resource named as CloudFormation would generate it) and decided by
``sandbox.iam.evaluator`` (``@cloud-copilot/iam-simulate``, the same process the sandbox runs):
:func:`decide` registers the statements under a principal of their own and asks.
"""

from __future__ import annotations

import atexit
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from sandbox.iam.cloudformation import Template as _Template
from sandbox.iam.evaluator import Evaluator, Request

ACCOUNT = "111122223333"
REGION = "us-east-1"
PARTITION = "aws"
STACK = "Nodewright-demo"

__all__ = [
    "ACCOUNT",
    "REGION",
    "Request",
    "Template",
    "allowed",
    "decide",
    "decide_many",
    "ec2_arn",
    "tag_context",
]


def Template(template: Mapping[str, Any], account: str = ACCOUNT, region: str = REGION) -> _Template:
    """A synthesized template resolved for ``account``/``region`` (the sandbox's resolver)."""
    return _Template(template, account, region, STACK)


@cache
def evaluator() -> Evaluator:
    running = Evaluator(ACCOUNT).start()
    running.wait_ready()
    atexit.register(running.stop)
    return running


def decide(statements: Iterable[Mapping[str, Any]], request: Request) -> str:
    """``"Allowed"``, ``"ExplicitlyDenied"``, ``"ImplicitlyDenied"`` (or ``"Error"``: the request
    is not one IAM would make, e.g. a resource type the action does not take)."""
    return decide_many(statements, [request])[0]


def decide_many(
    statements: Iterable[Mapping[str, Any]], requests: Sequence[Request], account: str = ACCOUNT
) -> list[str]:
    """One answer per request, asked as a role of ``account`` holding ``statements``."""
    policy = {"Version": "2012-10-17", "Statement": list(statements)}
    text = json.dumps(policy, sort_keys=True)
    principal = f"arn:aws:sts::{account}:assumed-role/Test{hashlib.sha256(text.encode()).hexdigest()[:16]}/s"
    evaluator().set_policies(principal, [{"name": "policy", "policy": policy}])
    return [d.result for d in evaluator().decide(principal, requests)]


def allowed(statements: Iterable[Mapping[str, Any]], request: Request, account: str = ACCOUNT) -> bool:
    return decide_many(statements, [request], account)[0] == "Allowed"


def ec2_arn(kind: str, resource_id: str, region: str = REGION, account: str = ACCOUNT) -> str:
    if kind in ("image", "snapshot"):
        return f"arn:{PARTITION}:ec2:{region}::{kind}/{resource_id}"
    return f"arn:{PARTITION}:ec2:{region}:{account}:{kind}/{resource_id}"


def tag_context(prefix: str, tags: Mapping[str, str]) -> dict[str, str]:
    """``{"aws:RequestTag/K": V}`` (or ResourceTag) for each tag."""
    return {f"{prefix}/{key}": value for key, value in tags.items()}
