"""``NodewrightAutoscaler``: everything one cluster needs, as one construct other CDK apps can use.

from infra.autoscaler import NodewrightAutoscaler
NodewrightAutoscaler(stack, "Autoscaler", cluster_name="prod", node_role_name="NodeRole")
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Stack
from constructs import Construct

from infra.capabilities.cluster_access import ClusterAccess
from infra.capabilities.functions import NodewrightFunctions
from infra.capabilities.interruption_queue import InterruptionQueue, SpotEventsRoute
from infra.capabilities.layer import NodewrightLayer
from infra.capabilities.monitoring import Monitoring
from infra.capabilities.permissions import autoscaler_statements
from infra.capabilities.schedules import Schedules
from infra.capabilities.state_table import StateTable
from infra.config import NodewrightConfig, default_node_role_name


class NodewrightAutoscaler(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        node_role_name: str | None = None,
        **options: Any,
    ) -> None:
        """``options`` are the other fields of ``infra.config.NodewrightConfig``."""
        super().__init__(scope, construct_id)
        config = NodewrightConfig(
            cluster_name=cluster_name,
            node_role_name=node_role_name or default_node_role_name(cluster_name),
            **options,
        )
        self.config = config
        stack = Stack.of(self)
        cluster_arn = stack.format_arn(
            service="eks",
            resource="cluster",
            resource_name=cluster_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        node_role_arn = stack.format_arn(
            service="iam", region="", resource="role", resource_name=config.node_role_name
        )

        self.state = StateTable(self, "State")
        self.interruptions = InterruptionQueue(self, "Interruptions")
        self.layer = NodewrightLayer(
            self, "Layer", arch=config.architecture, asset_dir=config.layer_asset_dir
        )
        self.functions = NodewrightFunctions(
            self,
            "Functions",
            config=config,
            layer=self.layer.layer,
            environment={
                "STATE_TABLE": self.state.table.table_name,
                "NODE_ROLE": config.node_role_name,
                "INTERRUPTION_QUEUE_URL": self.interruptions.queue.queue_url,
            },
            policy_statements=autoscaler_statements(
                cluster_name=cluster_name, cluster_arn=cluster_arn, node_role_arn=node_role_arn
            ),
        )
        role = self.functions.role
        self.state.table.grant_read_write_data(role)
        self.interruptions.queue.grant_consume_messages(role)
        fns = self.functions.functions
        failures = self.functions.failure_queue
        self.interruptions.add_consumer(fns["interruption"])
        self.spot_events = SpotEventsRoute(
            self, "SpotEvents", function=fns["spot_events"], dead_letter_queue=failures
        )
        self.schedules = Schedules(self, "Schedules", functions=dict(fns), dead_letter_queue=failures)
        self.access = ClusterAccess(self, "ClusterAccess", cluster_name=cluster_name, role=role)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            cluster_name=cluster_name,
            functions=dict(fns),
            interruption_queue=self.interruptions.queue,
            dead_letter_queues={
                "InterruptionDLQ": self.interruptions.dead_letter_queue,
                "FailedInvocations": failures,
            },
            alarm_email=config.alarm_email,
            alarm_topic_arn=config.alarm_topic_arn,
        )
