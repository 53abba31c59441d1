"""``NodewrightAutoscaler``: everything one cluster needs, as one construct other CDK apps can use.

from infra.autoscaler import NodewrightAutoscaler
NodewrightAutoscaler(stack, "Autoscaler", cluster_name="prod", alarm_email="oncall@example.com")
"""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.capabilities import outputs as out
from infra.capabilities.cfn import resource_of
from infra.capabilities.cluster_access import ClusterAccess
from infra.capabilities.functions import DEFAULT_FUNCTIONS_DIR, NodewrightFunctions
from infra.capabilities.interruption_queue import InterruptionQueue, SpotEventsRoute
from infra.capabilities.layer import NodewrightLayer
from infra.capabilities.monitoring import Monitoring
from infra.capabilities.network import FunctionPlacement
from infra.capabilities.node_role import NodeRole
from infra.capabilities.permissions import CERTIFICATE, CLEANUP, TABLE_ACTIONS, WEBHOOK, PolicyInputs
from infra.capabilities.removal import Removal
from infra.capabilities.schedules import Schedules
from infra.capabilities.state_table import StateTable
from infra.capabilities.wakeup import Wakeup
from infra.config import NodewrightConfig
from infra.metrics import NAMESPACE, service_name


class NodewrightAutoscaler(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, **options: Any) -> None:
        """``options`` are the other fields of ``infra.config.NodewrightConfig``."""
        super().__init__(scope, construct_id)
        config = NodewrightConfig(cluster_name=cluster_name, **options)
        self.config = config
        stack = Stack.of(self)
        cluster_arn = stack.format_arn(
            service="eks",
            resource="cluster",
            resource_name=cluster_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        self.node_role = NodeRole(
            self, "NodeRole", cluster_name=cluster_name, existing=config.existing_node_role
        )
        policy_inputs = PolicyInputs(
            cluster_name=cluster_name,
            cluster_arn=cluster_arn,
            node_role_arn=self.node_role.role_arn,
            kms_key_arns=config.ebs_kms_key_arns,
            ami_ssm_parameters=config.ami_ssm_parameters,
        )
        self.state = StateTable(self, "State")
        self.interruptions = InterruptionQueue(self, "Interruptions")
        self.layer = NodewrightLayer(
            self, "Layer", arch=config.architecture, asset_dir=config.layer_asset_dir
        )
        self.placement = FunctionPlacement(self, "Placement", config=config) if config.in_vpc else None
        self.functions = NodewrightFunctions(
            self,
            "Functions",
            config=config,
            layer=self.layer.layer,
            environment={
                "STATE_TABLE": self.state.table.table_name,
                "NODE_ROLE": self.node_role.role_name,
                "INTERRUPTION_QUEUE_URL": self.interruptions.queue.queue_url,
            },
            policy_inputs=policy_inputs,
            security_group_ids=self.placement.security_group_ids if self.placement else None,
        )
        fns = self.functions.functions
        for name, role in self.functions.roles.items():
            self.state.table.grant(role, *TABLE_ACTIONS[name])
        self.interruptions.queue.grant_consume_messages(self.functions.roles["interruption"])
        failures = self.functions.failure_queue
        self.interruptions.add_consumer(fns["interruption"])
        self.spot_events = SpotEventsRoute(
            self, "SpotEvents", function=fns["spot_events"], dead_letter_queue=failures
        )
        self.schedules = Schedules(self, "Schedules", functions=dict(fns), dead_letter_queue=failures)
        self.wakeup = (
            Wakeup(
                self,
                "Wakeup",
                config=config,
                layer=self.layer.layer,
                provisioner=fns["provisioner"],
                environment={
                    "CLUSTER_NAME": cluster_name,
                    "NODE_ROLE": self.node_role.role_name,
                    "POWERTOOLS_SERVICE_NAME": service_name(cluster_name),
                    "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
                    "NODEWRIGHT_TRACING": "true" if config.tracing else "false",
                },
                functions_dir=config.functions_dir or DEFAULT_FUNCTIONS_DIR,
                policy_inputs=policy_inputs,
            )
            if config.wakeup_enabled
            else None
        )
        self.removal = Removal(
            self,
            "Removal",
            config=config,
            layer=self.layer.layer,
            policy_inputs=policy_inputs,
            functions_dir=config.functions_dir,
            security_group_ids=self.placement.security_group_ids if self.placement else None,
        )
        self.access = ClusterAccess(
            self,
            "ClusterAccess",
            cluster_name=cluster_name,
            roles=dict(self.functions.cluster_roles),
            cleanup_role=self.removal.role,
        )
        # CloudFormation deletes what depends on a resource before the resource: the functions and
        # every trigger go first, then the removal runs with nothing left to launch.
        self.functions.also_depend_on(resource_of(self.removal.resource))
        triggers = [*self.schedules.rules.values(), *self.interruptions.rules.values(), self.spot_events.rule]
        for rule in triggers:
            rule.node.add_dependency(self.removal.resource)
        # ... and what the removal needs only after it: its own access entry (it drains the nodes),
        # the nodes' access entry (a node without it goes NotReady while its pods still run) and the
        # created node role (a role still in an instance profile cannot be deleted).
        self.removal.resource.node.add_dependency(self.access.cleanup_entry)
        if self.node_role.created is not None:
            self.removal.resource.node.add_dependency(self.node_role.created)
        if self.node_role.access_entry is not None:
            self.removal.resource.node.add_dependency(self.node_role.access_entry)
        self._outputs()
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            cluster_name=cluster_name,
            functions={**fns, **({"webhook": self.wakeup.function} if self.wakeup else {})},
            interruption_queue=self.interruptions.queue,
            dead_letter_queues={
                "InterruptionDLQ": self.interruptions.dead_letter_queue,
                "FailedInvocations": failures,
            },
            alarm_email=config.alarm_email,
            alarm_topic_arn=config.alarm_topic_arn,
            wakeup=config.wakeup_enabled,
        )

    def _roles(self) -> dict[str, iam.IRole]:
        """Every function's role by the name ``nodewright.spec.iam`` gives the function."""
        roles: dict[str, iam.IRole] = {**self.functions.roles, CLEANUP: self.removal.role}
        if self.wakeup is not None:
            roles[WEBHOOK] = self.wakeup.role
        if self.wakeup is not None and self.wakeup.private is not None:
            roles[CERTIFICATE] = self.wakeup.private.certificate.role
        return roles

    def _outputs(self) -> None:
        """What the stack made, under fixed keys (``nodewright doctor`` reads them)."""
        cluster_roles = [role.role_arn for role in self.functions.cluster_roles.values()]
        placement = self.placement
        for key, value, description in (
            (
                out.NODE_ROLE_NAME,
                self.node_role.role_name,
                "the node IAM role: name it in EC2NodeClass spec.role",
            ),
            (
                out.NODE_ROLE_ARN,
                self.node_role.role_arn,
                "the node IAM role's ARN (the only role PassRole allows)",
            ),
            (
                out.CLUSTER_ACCESS_ROLES,
                out.joined(cluster_roles),
                "roles with an access entry in the cluster",
            ),
            (
                out.FUNCTION_SUBNETS,
                out.joined(list(self.config.subnet_ids)),
                "subnets of the functions that call the cluster (none: outside any VPC)",
            ),
            (
                out.FUNCTION_SECURITY_GROUPS,
                out.joined(placement.security_group_ids if placement else []),
                "their security groups",
            ),
            (out.INTERRUPTION_QUEUE, self.interruptions.queue.queue_url, "the interruption queue"),
            (
                out.WAKEUP_MODE,
                str(self.config.wakeup),
                "how the API server reaches the wake-up: public, private or off",
            ),
            (
                out.WEBHOOK_URL,
                self.wakeup.url if self.wakeup else out.NONE,
                "the wake-up's URL: the function URL, or the private load balancer's (none: "
                "-c wakeup=false); nodewright install-webhooks uses it",
            ),
            (
                out.WAKEUP_CERTIFICATE,
                (self.wakeup.certificate_arn if self.wakeup else None) or out.NONE,
                "private mode: the load balancer's certificate in ACM, the webhooks' caBundle (none: "
                "public or off)",
            ),
            (
                out.WAKEUP_LOAD_BALANCER,
                self.wakeup.private.load_balancer.ref if self.wakeup and self.wakeup.private else out.NONE,
                "private mode: the internal load balancer (none: public or off)",
            ),
            (
                out.WAKEUP_SECURITY_GROUP,
                self.wakeup.private.security_group.attr_group_id
                if self.wakeup and self.wakeup.private
                else out.NONE,
                "private mode: its security group, which admits 443 from the cluster security group only",
            ),
            (
                out.WEBHOOK_SECRET,
                self.wakeup.secret.secret_arn if self.wakeup else out.NONE,
                "the secret path of that URL (never printed by the stack)",
            ),
            (
                out.FUNCTION_ROLES,
                out.pairs({name: role.role_arn for name, role in self._roles().items()}),
                "each function's role (function=ARN): nodewright doctor simulates them",
            ),
            (out.STATE_TABLE, self.state.table.table_arn, "the state table"),
            (out.FAILURE_QUEUE, self.functions.failure_queue.queue_arn, "the failed-invocations queue"),
            (
                out.WAKEUP_ALIAS,
                self.wakeup.alias.function_arn if self.wakeup else out.NONE,
                "the provisioner alias the webhook invokes (none: -c wakeup=false)",
            ),
        ):
            out.output(self, key, value, description)
