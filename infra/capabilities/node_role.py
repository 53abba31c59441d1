"""The IAM role the nodes run with: created with its EKS access entry, or an existing one referenced.

Created (the default, when neither ``nodeRoleName`` nor ``nodeRoleArn`` is given): a role EC2 can
assume, with the four AWS-managed policies EKS documents for nodes (the same as Karpenter's
``KarpenterNodeRole``), and an ``EC2_LINUX`` access entry so its nodes can join. Its name is
``NodewrightNode-<cluster>-<region>`` (account-wide names: the region keeps two stacks apart),
or left to CloudFormation when that would pass IAM's 64 characters; the stack output
``NodewrightNodeRoleName`` says which, for the EC2NodeClasses' ``spec.role``.

Existing: by name (path ``/``) or by ARN (any IAM path). The stack creates nothing for it; its
access entry is the operator's (``nodewright doctor`` checks it), as with Karpenter.
"""

from __future__ import annotations

from aws_cdk import Fn, Stack
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.capabilities import acknowledge
from infra.config import NodeRoleRef, created_node_role_name

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)


class NodeRole(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, cluster_name: str, existing: NodeRoleRef | None
    ) -> None:
        super().__init__(scope, construct_id)
        self.created: iam.Role | None = None
        self.access_entry: eks.CfnAccessEntry | None = None
        if existing is not None:
            self.role_name = existing.name
            self.role_arn = existing.arn or Stack.of(self).format_arn(
                service="iam", region="", resource="role", resource_name=existing.name
            )
        else:
            prefix = created_node_role_name(cluster_name)
            role = iam.Role(
                self,
                "Role",
                role_name=Fn.join("", [prefix, Stack.of(self).region]) if prefix else None,
                assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                description=f"Nodes launched by Nodewright for EKS cluster {cluster_name}",
                managed_policies=[
                    iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in NODE_MANAGED_POLICIES
                ],
            )
            for policy in NODE_MANAGED_POLICIES:
                acknowledge.nag(
                    role,
                    f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{policy}]",
                    "one of the AWS-managed policies EKS documents for worker nodes (kubelet, VPC CNI, "
                    "image pulls, SSM), as Karpenter's node role has; AWS keeps them current",
                )
            self.access_entry = eks.CfnAccessEntry(
                self, "AccessEntry", cluster_name=cluster_name, principal_arn=role.role_arn, type="EC2_LINUX"
            )
            self.created = role
            self.role_name = role.role_name
            self.role_arn = role.role_arn
