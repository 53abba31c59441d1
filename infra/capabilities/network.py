"""Where the functions that talk to the cluster run: in the cluster's VPC when asked to.

A private or CIDR-restricted EKS endpoint cannot be reached from Lambda's own network (its
egress addresses are not predictable). With ``-c subnetIds=…`` the provisioner, disruption and
interruption functions run in those subnets, with either your security groups
(``-c securityGroupIds=…``, e.g. the cluster security group, which admits its own members) or one
created here that only allows HTTPS out. Those subnets then need a route to the AWS APIs the
functions call: a NAT gateway, or the VPC endpoints listed in docs/deploy.md. The removal at
``cdk destroy`` drains the nodes and runs there too; the pricing function never talks to the
cluster and stays outside.
"""

from __future__ import annotations

from aws_cdk import CfnOutput
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from infra.config import NodewrightConfig

HTTPS = 443


class FunctionPlacement(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: NodewrightConfig) -> None:
        super().__init__(scope, construct_id)
        self.security_group: ec2.CfnSecurityGroup | None = None
        if config.security_group_ids:
            self.security_group_ids = list(config.security_group_ids)
        else:
            assert config.vpc_id, "NodewrightConfig requires vpcId when no security group is given"
            self.security_group = ec2.CfnSecurityGroup(
                self,
                "SecurityGroup",
                vpc_id=config.vpc_id,
                group_description=f"Nodewright functions of cluster {config.cluster_name}: HTTPS out only",
                security_group_egress=[
                    ec2.CfnSecurityGroup.EgressProperty(
                        ip_protocol="tcp",
                        from_port=HTTPS,
                        to_port=HTTPS,
                        cidr_ip="0.0.0.0/0",
                        description="the EKS API endpoint and AWS APIs (VPC endpoints or a NAT gateway)",
                    )
                ],
            )
            self.security_group_ids = [self.security_group.attr_group_id]
            CfnOutput(
                self,
                "FunctionSecurityGroup",
                value=self.security_group.attr_group_id,
                description="allow HTTPS (443) from this group on the EKS cluster security group",
            )
