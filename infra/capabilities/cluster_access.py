"""EKS access entries: each function that calls the Kubernetes API is a member of one group.

The group's permissions come from deploy/rbac.yaml (a ClusterRole bound to
``KUBERNETES_GROUP``), applied once with kubectl. No access policy is associated,
so the roles get exactly what that ClusterRole allows: no secrets, no cluster-admin.
The cluster's authentication mode must be ``API`` or ``API_AND_CONFIG_MAP``.
"""

from __future__ import annotations

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

# Must match the subjects of the ClusterRoleBinding in deploy/rbac.yaml.
KUBERNETES_GROUP = "nodewright:autoscaler"


class ClusterAccess(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, cluster_name: str, roles: dict[str, iam.IRole]
    ) -> None:
        super().__init__(scope, construct_id)
        self.access_entries = {
            name: eks.CfnAccessEntry(
                self,
                f"{name}AccessEntry",
                cluster_name=cluster_name,
                principal_arn=role.role_arn,
                type="STANDARD",
                kubernetes_groups=[KUBERNETES_GROUP],
            )
            for name, role in roles.items()
        }
