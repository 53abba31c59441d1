"""CloudFormation values of a synthesized template, resolved as a deployed stack would have them.

A role's statements in the template name its resources through ``Ref``, ``Fn::GetAtt``,
``Fn::Join``, ``Fn::Sub`` and the pseudo parameters. :class:`Template` resolves them for one
account, region and set of physical names (the ``Ref`` value of each resource: a table's name,
a queue's URL, a secret's ARN — what the sandbox created where CloudFormation would have), so
the statements are exactly what IAM would hold after ``cdk deploy``. A resource the caller gave
no physical name gets the one CloudFormation would generate (``<stack>-<logical id>``), and a
construct the resolver does not know raises instead of being guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PARTITION = "aws"
# The ARN of a resource of each type, from its Ref value (``{ref}``) or name (``{name}``).
_ARN_OF_TYPE = {
    "AWS::DynamoDB::Table": "arn:{p}:dynamodb:{r}:{a}:table/{ref}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{name}",
    "AWS::IAM::Role": "arn:{p}:iam::{a}:role{path}{ref}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{ref}:*",
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{ref}",
    "AWS::SNS::Topic": "{ref}",
    "AWS::SecretsManager::Secret": "{ref}",
    "AWS::Lambda::Alias": "{ref}",
}
# Properties that name a resource: its Ref is that name (TableName, RoleName, ...).
_NAME_PROPERTY = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::SecretsManager::Secret": "Name",
}
_SUB = re.compile(r"\$\{([^}!][^}]*)\}")


@dataclass
class Template:
    """One synthesized template, resolved for ``account``/``region`` and the ``physical`` names."""

    template: Mapping[str, Any]
    account: str
    region: str
    stack_name: str = "stack"
    physical: Mapping[str, str] = field(default_factory=dict)  # logical id -> its Ref value
    partition: str = PARTITION

    @property
    def resources(self) -> Mapping[str, Any]:
        return self.template["Resources"]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, str | int | float | bool) or value is None:
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict) and len(value) == 1:
            ((function, argument),) = value.items()
            if function == "Ref":
                return self.ref(argument)
            if function == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.get_att(logical_id, attribute)
            if function == "Fn::Join":
                separator, parts = argument
                return separator.join(str(self.resolve(p)) for p in self.resolve(parts))
            if function == "Fn::Sub":
                return self._sub(argument)
            if function == "Fn::Select":
                index, items = argument
                return self.resolve(items)[int(self.resolve(index))]
            if function == "Fn::Split":
                separator, text = argument
                return str(self.resolve(text)).split(separator)
            if function.startswith("Fn::"):
                raise NotImplementedError(f"CloudFormation function {function}")
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        raise NotImplementedError(f"cannot resolve {value!r}")

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name:
                logical_id, attribute = name.split(".", 1)
                return str(self.get_att(logical_id, attribute))
            return str(self.ref(name))

        return _SUB.sub(one, text)

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack_name,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.physical:
            return self.physical[name]
        resource = self.resources.get(name)
        if resource is None:
            raise NotImplementedError(f"Ref {name}: no such resource or pseudo parameter")
        kind = resource["Type"]
        properties = resource.get("Properties") or {}
        named = properties.get(_NAME_PROPERTY.get(kind, ""))
        generated = str(self.resolve(named)) if named is not None else f"{self.stack_name}-{name}"[:64]
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{generated}"
        if kind == "AWS::Lambda::Alias":
            return f"{self.get_att(properties['FunctionName']['Ref'], 'Arn')}:{properties['Name']}"
        if kind in ("AWS::SecretsManager::Secret", "AWS::SNS::Topic"):
            service = "secretsmanager" if kind.startswith("AWS::SecretsManager") else "sns"
            middle = "secret:" if service == "secretsmanager" else ""
            return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{middle}{generated}"
        return generated

    def get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.resources[logical_id]["Type"]
        if attribute != "Arn" or kind not in _ARN_OF_TYPE:
            raise NotImplementedError(f"GetAtt {logical_id}.{attribute} ({kind})")
        ref = self.ref(logical_id)
        properties = self.resources[logical_id].get("Properties") or {}
        return _ARN_OF_TYPE[kind].format(
            p=self.partition,
            r=self.region,
            a=self.account,
            ref=ref,
            name=ref.rstrip("/").rsplit("/", 1)[-1],
            path=properties.get("Path") or "/",
        )

    def role_policies(self, role_id: str) -> list[tuple[str, dict[str, Any]]]:
        """The identity policies attached to the role, resolved: (policy logical id, document)."""
        found = []
        for logical_id, resource in self.resources.items():
            if resource["Type"] != "AWS::IAM::Policy":
                continue
            if {"Ref": role_id} in resource["Properties"].get("Roles", []):
                found.append((logical_id, self.resolve(resource["Properties"]["PolicyDocument"])))
        role = self.resources[role_id]["Properties"]
        if role.get("Policies") or role.get("ManagedPolicyArns"):
            raise NotImplementedError(f"{role_id}: inline or managed policies on the role itself")
        return found

    def role_statements(self, role_id: str) -> list[dict[str, Any]]:
        """Every statement of the role's identity policies, resolved (one list)."""
        policies = self.role_policies(role_id)
        return [statement for _, document in policies for statement in document["Statement"]]
