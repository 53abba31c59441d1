"""A small IAM policy evaluator for the statements the stack synthesizes (a test helper).

It decides one request (action, resource ARN, condition context) against a role's identity
policies the way IAM does for a single account with no SCPs, boundaries or resource policies:
an explicit Deny wins, else any Allow allows, else the request is implicitly denied.

What it understands is exactly what the templates use, and anything else raises instead of
being guessed at (so a new construct in a policy fails the tests rather than passing them):

- ``Action``/``Resource`` as a string or list, with ``*`` and ``?`` wildcards; actions match
  case-insensitively; an ARN matches segment by segment (partition, service, region, account,
  resource), ``*`` spanning ``/`` inside the resource segment as IAM's does;
- condition operators ``StringEquals``, ``StringNotEquals``, ``StringLike``, ``StringNotLike``,
  ``ArnLike``, ``ArnEquals``, ``Bool``, each optionally ``…IfExists``; keys are matched
  case-insensitively; several values for one key: any may match; several keys: all must;
  a key missing from the context fails the condition (``IfExists`` passes it);
- CloudFormation values: ``Ref`` of the pseudo parameters and of resources, ``Fn::Join``,
  ``Fn::GetAtt [id, Arn]``, resolved for one account and region.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

ACCOUNT = "111122223333"
REGION = "us-east-1"
PARTITION = "aws"

# GetAtt <id>.Arn of the resource types the policies name, as ARNs of this account and region.
ARN_OF_TYPE = {
    "AWS::DynamoDB::Table": "arn:{p}:dynamodb:{r}:{a}:table/{id}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{id}",
    "AWS::IAM::Role": "arn:{p}:iam::{a}:role/{id}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{id}:*",
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{id}",
    "AWS::SNS::Topic": "arn:{p}:sns:{r}:{a}:{id}",
}


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Template:
    """Resolves CloudFormation values of one synthesized template for ACCOUNT/REGION."""

    template: Mapping[str, Any]
    account: str = ACCOUNT
    region: str = REGION
    partition: str = PARTITION

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            if function == "Ref":
                return self._ref(argument)
            if function == "Fn::Join":
                separator, parts = argument
                return separator.join(str(self.resolve(p)) for p in parts)
            if function == "Fn::GetAtt":
                logical_id, attribute = argument
                if attribute != "Arn":
                    raise NotImplementedError(f"GetAtt {logical_id}.{attribute}")
                kind = self.template["Resources"][logical_id]["Type"]
                return ARN_OF_TYPE[kind].format(
                    p=self.partition, r=self.region, a=self.account, id=logical_id
                )
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        raise NotImplementedError(f"cannot resolve {value!r}")

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.template["Resources"]:
            return name  # a resource's Ref: its logical id stands for its physical name
        raise NotImplementedError(f"Ref {name}")

    def role_statements(self, role_id: str) -> list[dict[str, Any]]:
        """Every statement of the identity policies attached to the role (inline AWS::IAM::Policy)."""
        found = []
        for resource in self.template["Resources"].values():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            if {"Ref": role_id} in resource["Properties"].get("Roles", []):
                found.extend(self.resolve(resource["Properties"]["PolicyDocument"]["Statement"]))
        role = self.template["Resources"][role_id]["Properties"]
        if role.get("Policies") or role.get("ManagedPolicyArns"):
            raise NotImplementedError(f"{role_id}: inline or managed policies on the role itself")
        return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _arn_matches(pattern: str, arn: str) -> bool:
    if pattern == "*":
        return True
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    if len(wanted) != 6 or len(actual) != 6:
        return False
    return all(fnmatchcase(a, w) for w, a in zip(wanted, actual, strict=True))


def _string_like(pattern: str, value: str) -> bool:
    return fnmatchcase(value, pattern)


OPERATORS = {
    "StringEquals": lambda wanted, actual: wanted == actual,
    "StringNotEquals": lambda wanted, actual: wanted != actual,
    "StringLike": _string_like,
    "StringNotLike": lambda wanted, actual: not _string_like(wanted, actual),
    "ArnLike": _arn_matches,
    "ArnEquals": _arn_matches,
    "Bool": lambda wanted, actual: str(wanted).lower() == str(actual).lower(),
}
NEGATED = {"StringNotEquals", "StringNotLike"}


def _condition_holds(operator: str, key: str, wanted: Any, context: Mapping[str, str]) -> bool:
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    if base not in OPERATORS or ":" in base:
        raise NotImplementedError(f"condition operator {operator}")
    lowered = {k.lower(): v for k, v in context.items()}
    if key.lower() not in lowered:
        return if_exists
    actual = lowered[key.lower()]
    if isinstance(actual, list):
        raise NotImplementedError(f"multi-valued context key {key} without ForAnyValue/ForAllValues")
    check = OPERATORS[base]
    values = _as_list(wanted)
    if base in NEGATED:  # "not equal to any of them"
        return all(check(v, actual) for v in values)
    return any(check(v, actual) for v in values)


def _statement_matches(statement: Mapping[str, Any], request: Request) -> bool:
    for unsupported in ("NotAction", "NotResource", "NotPrincipal", "Principal"):
        if unsupported in statement:
            raise NotImplementedError(f"{unsupported} in an identity policy statement")
    if not any(fnmatchcase(request.action.lower(), a.lower()) for a in _as_list(statement["Action"])):
        return False
    if not any(_arn_matches(r, request.resource) for r in _as_list(statement["Resource"])):
        return False
    for operator, entries in (statement.get("Condition") or {}).items():
        for key, wanted in entries.items():
            if not _condition_holds(operator, key, wanted, request.context):
                return False
    return True


def decide(statements: Iterable[Mapping[str, Any]], request: Request) -> str:
    """``"Allow"``, ``"ExplicitDeny"`` or ``"ImplicitDeny"``."""
    allowed = False
    for statement in statements:
        if not _statement_matches(statement, request):
            continue
        if statement["Effect"] == "Deny":
            return "ExplicitDeny"
        if statement["Effect"] == "Allow":
            allowed = True
        else:
            raise NotImplementedError(f"Effect {statement['Effect']}")
    return "Allow" if allowed else "ImplicitDeny"


def allowed(statements: Iterable[Mapping[str, Any]], request: Request) -> bool:
    return decide(statements, request) == "Allow"


def ec2_arn(kind: str, resource_id: str, region: str = REGION, account: str = ACCOUNT) -> str:
    if kind in ("image", "snapshot"):
        return f"arn:{PARTITION}:ec2:{region}::{kind}/{resource_id}"
    return f"arn:{PARTITION}:ec2:{region}:{account}:{kind}/{resource_id}"


def tag_context(prefix: str, tags: Mapping[str, str]) -> dict[str, str]:
    """``{"aws:RequestTag/K": V}`` (or ResourceTag) for each tag."""
    return {f"{prefix}/{key}": value for key, value in tags.items()}
