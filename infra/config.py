"""Deploy-time settings, read from CDK context (``cdk deploy -c clusterName=NAME -c …``).

Everything is known at synth time: no lookups, so ``cdk synth`` works offline and
without credentials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REBALANCE_MODES = ("replace", "event-only")
ARCHITECTURES = ("arm64", "x86_64")
# EKS cluster names: 1-100 characters, alphanumerics, hyphens and underscores, starting alphanumeric.
_CLUSTER_NAME = re.compile(r"^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$")
_ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")


def default_node_role_name(cluster_name: str) -> str:
    """The node role name of Karpenter's getting-started guide, so existing setups just work."""
    return f"KarpenterNodeRole-{cluster_name}"


class ConfigError(ValueError):
    """A context value is missing or malformed; the message names the -c flag to fix."""


@dataclass(frozen=True)
class NodewrightConfig:
    cluster_name: str
    # The IAM role the nodes run with (EC2NodeClass spec.role); PassRole is allowed for it only.
    node_role_name: str
    rebalance_mode: str = "replace"
    poll_interval_seconds: float = 5.0
    alarm_email: str | None = None
    alarm_topic_arn: str | None = None
    architecture: str = "arm64"
    tracing: bool = False
    # A prebuilt layer directory (containing python/): skips the pip build (fast tests).
    layer_asset_dir: Path | None = None
    # Where the functions' folders live (functions/<name>/app.py).
    functions_dir: Path | None = None

    def __post_init__(self) -> None:
        if not _CLUSTER_NAME.match(self.cluster_name):
            raise ConfigError(
                f"clusterName {self.cluster_name!r} is not an EKS cluster name: "
                "1-100 letters, digits, '-' or '_', starting with a letter or digit"
            )
        if not _ROLE_NAME.match(self.node_role_name):
            raise ConfigError(f"nodeRoleName {self.node_role_name!r} is not an IAM role name")
        if self.rebalance_mode not in REBALANCE_MODES:
            raise ConfigError(
                f"interruptionMode {self.rebalance_mode!r}: use one of {', '.join(REBALANCE_MODES)}"
            )
        if not 1 <= self.poll_interval_seconds <= 30:
            raise ConfigError(f"pollInterval {self.poll_interval_seconds:g}: use 1-30 seconds")
        if self.architecture not in ARCHITECTURES:
            raise ConfigError(f"architecture {self.architecture!r}: use one of {', '.join(ARCHITECTURES)}")
        if self.alarm_email and self.alarm_topic_arn:
            raise ConfigError("give alarmEmail or alarmTopicArn, not both")
        if self.alarm_topic_arn and not self.alarm_topic_arn.startswith("arn:"):
            raise ConfigError(f"alarmTopicArn {self.alarm_topic_arn!r} is not an SNS topic ARN")

    @classmethod
    def from_context(cls, get: Any) -> NodewrightConfig:
        """Build from ``node.try_get_context``; ``clusterName`` is the only required value."""
        cluster_name = get("clusterName")
        if not cluster_name:
            raise ConfigError(
                "clusterName is not set: run `cdk deploy -c clusterName=<your EKS cluster>` "
                "(or `cdk synth -c clusterName=demo` to look at the template)"
            )
        cluster_name = str(cluster_name)
        try:
            poll = float(get("pollInterval") or 5.0)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"pollInterval {get('pollInterval')!r} is not a number of seconds") from exc
        layer_dir = get("layerAssetDir")
        functions_dir = get("functionsDir")
        return cls(
            cluster_name=cluster_name,
            node_role_name=str(get("nodeRoleName") or default_node_role_name(cluster_name)),
            rebalance_mode=str(get("interruptionMode") or "replace"),
            poll_interval_seconds=poll,
            alarm_email=get("alarmEmail") or None,
            alarm_topic_arn=get("alarmTopicArn") or None,
            architecture=str(get("architecture") or "arm64"),
            tracing=str(get("tracing") or "false").lower() in ("1", "true", "yes"),
            layer_asset_dir=Path(layer_dir) if layer_dir else None,
            functions_dir=Path(functions_dir) if functions_dir else None,
        )
