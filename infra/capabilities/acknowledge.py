"""Acknowledge a cdk-nag or checkov finding on one construct, with the reason next to it.

cdk-nag 3 runs as a CDK validation plugin: an unacknowledged finding fails synth.
checkov reads ``Metadata.checkov.skip`` on each CloudFormation resource, so its
acknowledgments live in the template too, each with a comment.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct

from infra.capabilities.cfn import resource_of


def nag(scope: IConstruct, rule: str, reason: str) -> None:
    """Acknowledge cdk-nag rule ``rule`` (e.g. ``AwsSolutions-IAM5``) on scope and its children."""
    pack = rule.split("-", 1)[0]
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{pack}::{rule}", reason=reason))


def checkov(resource: IConstruct, check_id: str, reason: str) -> None:
    """Acknowledge checkov check ``check_id`` on the CloudFormation resource behind ``resource``."""
    cfn = resource_of(resource)
    metadata = cfn.get_metadata("checkov") or {"skip": []}
    metadata["skip"].append({"id": check_id, "comment": reason})
    cfn.add_metadata("checkov", metadata)
