"""EKS access entries: each function that calls the Kubernetes API is a member of one group.

The group's permissions come from deploy/rbac.yaml (a ClusterRole bound to each group), applied
once with kubectl. No access policy is associated, so the roles get exactly what those ClusterRoles
allow: no secrets, no cluster-admin. The cluster's authentication mode must be ``API`` or
``API_AND_CONFIG_MAP``.

- The functions (``KUBERNETES_GROUP``): what the flows do every minute.
- The removal at ``cdk destroy`` (``CLEANUP_GROUP``, its own ClusterRole ``nodewright-cleanup``):
  take the wake-up's webhook configuration and the CRDs' conversion out (by name) and drain the
  nodes. Its entry is deleted only after the removal ran (infra/autoscaler.py orders it).
"""

from __future__ import annotations

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

# Must match the subjects of the ClusterRoleBindings in deploy/rbac.yaml.
KUBERNETES_GROUP = "nodewright:autoscaler"
CLEANUP_GROUP = "nodewright:cleanup"


class ClusterAccess(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        roles: dict[str, iam.IRole],
        cleanup_role: iam.IRole,
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_entries = {
            name: self._entry(f"{name}AccessEntry", cluster_name, role, KUBERNETES_GROUP)
            for name, role in roles.items()
        }
        self.cleanup_entry = self._entry("cleanupAccessEntry", cluster_name, cleanup_role, CLEANUP_GROUP)

    def _entry(self, construct_id: str, cluster_name: str, role: iam.IRole, group: str) -> eks.CfnAccessEntry:
        return eks.CfnAccessEntry(
            self,
            construct_id,
            cluster_name=cluster_name,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=[group],
        )
