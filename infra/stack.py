"""The per-cluster stack: it only composes ``NodewrightAutoscaler`` and switches cdk-nag on."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack, Validations
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import Construct

from infra.autoscaler import NodewrightAutoscaler
from infra.config import NodewrightConfig


def stack_name(cluster_name: str) -> str:
    return f"Nodewright-{cluster_name}"


class NodewrightStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: NodewrightConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"Nodewright autoscaler for EKS cluster {config.cluster_name}",
            **kwargs,
        )
        options = {k: v for k, v in vars(config).items() if k != "cluster_name"}
        self.autoscaler = NodewrightAutoscaler(
            self, "Autoscaler", cluster_name=config.cluster_name, **options
        )


def add_nag_checks(scope: Construct) -> None:
    """cdk-nag 3 runs at synth as a validation plugin: an unacknowledged finding fails synth."""
    Validations.of(scope).add_plugins(AwsSolutionsChecks(), ServerlessChecks())
