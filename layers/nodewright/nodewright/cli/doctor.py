"""``nodewright doctor --cluster NAME [--region R] [--kubeconfig PATH] [--json]``: is everything in place?

Read only, with your own credentials: it changes nothing. It checks, and prints for every problem
what is missing and the command that fixes it:

- AWS: the EKS cluster and its authentication mode; the Nodewright stack; whether the functions
  can reach the cluster endpoint from where they run (public access for Lambda, or their subnets
  and security groups in the cluster's VPC) and the AWS APIs (NAT or VPC endpoints); the
  functions' and the node role's access entries; the node role itself; each function's role,
  simulated (``iam:SimulatePrincipalPolicy``: its policies, permissions boundary and the
  organization's SCPs) against every action ``nodewright.spec.iam`` says it uses; which way the
  wake-up is served (``-c wakeup=`` public, private or off) and whether the API server can reach
  it (the function URL answers; or the internal load balancer is in the cluster's VPC, admits the
  control plane's security groups on 443 and serves the stack's certificate for its name); the
  spot service-linked role; the interruption queue; who the alarms notify.
- Kubernetes: the API answers; the CRDs are installed at this release's version with no
  conversion webhook pointing nowhere; deploy/rbac.yaml is applied; the writers' Lease namespace
  exists; no admission webhook for Karpenter's groups points at a missing service; the wake-up's
  webhook configuration is installed (none left with the wake-up off), watches kube-scheduler's
  Events (not the old pods/status write), calls this stack's URL and trusts its certificate, and
  the CRDs serving v1beta1 convert through that same URL (a stale one fails v1beta1 requests, and v1 reads of
  objects still stored as v1beta1); every
  EC2NodeClass names the node role and its subnet and security-group selectors match something;
  no Karpenter controller still runs (a Deployment with the Helm chart's
  ``app.kubernetes.io/name=karpenter`` or the Karpenter controller image): both would reconcile the
  same NodeClaims.

A check that cannot run (your identity gets 401/403, the API server or AWS cannot be reached) is
reported with the command that fixes it, and every other check still runs.

Exit status 1 when any check fails (warnings alone exit 0).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
AUTH_MODES_WITH_ACCESS_ENTRIES = ("API", "API_AND_CONFIG_MAP")
KUBERNETES_GROUP = "nodewright:autoscaler"  # infra/capabilities/cluster_access.py
NODE_POLICIES = (  # infra/capabilities/node_role.py NODE_MANAGED_POLICIES
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)
# What the functions in a VPC call, and the endpoint service that serves each without a NAT.
FUNCTION_ENDPOINTS = {
    "ec2": "EC2 (instances, launch templates, subnets, AMIs)",
    "eks": "EKS (DescribeCluster)",
    "ssm": "SSM (EKS-optimized AMI aliases)",
    "dynamodb": "DynamoDB (state table; a gateway endpoint)",
}
CRD_NAMES = ("nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws")
KARPENTER_GROUPS = ("karpenter.sh", "karpenter.k8s.aws")
REPO_RBAC = Path(__file__).resolve().parents[4] / "deploy" / "rbac.yaml"


@dataclass
class Finding:
    check: str
    status: str
    detail: str
    fix: str = ""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check, read-only, that the cluster, the stack and the cluster's objects are ready",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", required=True, help="the EKS cluster name (the stack's clusterName)")
    parser.add_argument("--region", default=None, help="AWS region (default: AWS_REGION / your profile's)")
    parser.add_argument("--stack", default=None, help="stack name (default: Nodewright-<cluster>)")
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig for the Kubernetes checks (default: $KUBECONFIG or ~/.kube/config, else an EKS "
        "token from your AWS credentials)",
    )
    parser.add_argument(
        "--rbac", default=None, help=f"the RBAC manifest to compare with (default: {REPO_RBAC})"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(func=run)


class Doctor:
    """Gathers facts through ``nodewright.cloud.readiness`` and ``nodewright.cluster.readiness``
    and judges them; every finding carries its fix."""

    def __init__(
        self,
        cluster_name: str,
        region: str,
        stack_name: str,
        clients: Any,
        kube: Any,
        *,
        probe: Callable[[str], int | str] | None = None,
    ) -> None:
        from nodewright.cloud.readiness import probe_url

        self.probe = probe or probe_url  # GET a URL: its status, or why it did not answer
        self.cluster_name = cluster_name
        self.region = region
        self.stack_name = stack_name
        self.clients = clients
        self.kube = kube  # a nodewright.cluster.Cluster, or an exception saying why there is none
        self.findings: list[Finding] = []
        self._caller: str | None = None

    def add(self, check: str, status: str, detail: str, fix: str = "") -> None:
        self.findings.append(Finding(check, status, detail, fix))

    def run(self, rbac_manifest: Path | None) -> list[Finding]:
        """Every check, in order; one that cannot run (AWS or the API server refusing, unreachable)
        is a finding with its fix and the others still run."""
        cluster, outputs = self._aws()
        self._kubernetes(rbac_manifest, outputs, cluster)
        return self.findings

    def _check(self, check: str, run: Callable[[], Any], severity: str = FAIL) -> None:
        """Run one check; what stops it (an AWS error, a 401/403, an unreachable API server)
        becomes its finding, with the command that fixes it, instead of ending the doctor."""
        from nodewright.cli import _errors

        try:
            run()
        except _errors.stopping_errors() as exc:
            problem, fix = self._describe(exc)
            self.add(check, severity, f"could not run: {problem}", fix)

    def _guard(self, check: str, read: Callable[[], Any]) -> Any:
        """Run one AWS read; what stops it becomes a finding (and ``_FAILED``) instead of a traceback."""
        from nodewright.cli import _errors

        try:
            return read()
        except _errors.stopping_errors() as exc:
            problem, fix = self._describe(exc)
            self.add(check, FAIL, f"could not read it: {problem}", fix)
            return _FAILED

    def _describe(self, exc: BaseException) -> tuple[str, str]:
        from nodewright.cli import _errors
        from nodewright.cluster import ApiError

        principal = _errors.PRINCIPAL_PLACEHOLDER
        if isinstance(exc, ApiError) and exc.status in (401, 403):
            principal = self._principal()
        host = self.kube.host if not isinstance(self.kube, Exception) else ""
        return _errors.describe(exc, self.cluster_name, principal=principal, host=host)

    def _principal(self) -> str:
        """Your AWS identity as an access entry names it (for the fix of a 401/403), once."""
        if self._caller is None:
            from nodewright.cli import _errors
            from nodewright.cloud import readiness as aws

            try:
                self._caller = aws.caller_principal_arn(self.clients)
            except _errors.stopping_errors():
                self._caller = _errors.PRINCIPAL_PLACEHOLDER
        return self._caller

    # ------------------------------------------------------------------ AWS
    def _aws(self) -> tuple[dict[str, Any], dict[str, str] | None]:
        """The AWS checks; the cluster as DescribeCluster has it ({} when unknown) and the stack's
        outputs (None when unknown: no stack, or it could not be read)."""
        cluster, outputs = self._cluster_and_stack()
        self._check("spot service-linked role", self._spot_service_linked_role)
        return cluster, outputs

    def _cluster_and_stack(self) -> tuple[dict[str, Any], dict[str, str] | None]:
        from nodewright.cloud import readiness as aws

        cluster = self._guard("EKS cluster", lambda: aws.describe_cluster(self.clients, self.cluster_name))
        if cluster is None:
            self.add(
                "EKS cluster",
                FAIL,
                f"no cluster {self.cluster_name!r} in {self.region}",
                "check --cluster and --region (aws eks list-clusters)",
            )
        if not isinstance(cluster, dict):
            return {}, None  # the stack's checks compare it with the cluster
        status = OK if cluster.get("status") == "ACTIVE" else WARN
        self.add("EKS cluster", status, f"{cluster.get('status')}, Kubernetes {cluster.get('version')}")
        self._authentication_mode(cluster)
        outputs = self._guard("Nodewright stack", lambda: aws.stack_outputs(self.clients, self.stack_name))
        entries = self._guard("access entries", lambda: aws.access_entries(self.clients, self.cluster_name))
        if outputs is None:
            self.add(
                "Nodewright stack",
                FAIL,
                f"no stack {self.stack_name} in {self.region}",
                f"npx cdk deploy -c clusterName={self.cluster_name} (docs/deploy.md)",
            )
        if not isinstance(outputs, dict):
            return cluster, None
        missing = [k for k in aws.STACK_OUTPUTS if k not in outputs]
        if missing:
            self.add(
                "Nodewright stack",
                WARN,
                f"{self.stack_name} lacks outputs {missing} (an older release?)",
                "redeploy: npx cdk deploy",
            )
        else:
            self.add("Nodewright stack", OK, self.stack_name)
        self._check(
            "endpoint reachable from the functions", lambda: self._endpoint_reachable(cluster, outputs)
        )
        self._check("AWS APIs from the functions' subnets", lambda: self._function_network(cluster, outputs))
        if entries is not _FAILED:
            self._function_access_entries(outputs, entries)
            self._check("node role", lambda: self._node_role(outputs, entries))
        self._check("function roles", lambda: self._function_roles(cluster, outputs))
        self._check("wake-up endpoint", lambda: self._wakeup_endpoint(cluster, outputs))
        self._check("interruption queue", lambda: self._interruption_queue(outputs))
        self._check("alarm notifications", lambda: self._alarm_target(outputs))
        return cluster, outputs

    def _authentication_mode(self, cluster: dict[str, Any]) -> None:
        mode = (cluster.get("accessConfig") or {}).get("authenticationMode")
        if mode in AUTH_MODES_WITH_ACCESS_ENTRIES:
            self.add("authentication mode", OK, mode)
        elif mode is None:
            self.add(
                "authentication mode",
                WARN,
                "DescribeCluster did not say (access entries need API or API_AND_CONFIG_MAP)",
            )
        else:
            self.add(
                "authentication mode",
                FAIL,
                f"{mode}: access entries (how the functions and nodes get in) need API or API_AND_CONFIG_MAP",
                f"aws eks update-cluster-config --name {self.cluster_name} "
                "--access-config authenticationMode=API_AND_CONFIG_MAP",
            )

    def _endpoint_reachable(self, cluster: dict[str, Any], outputs: dict[str, str]) -> None:
        from nodewright.cloud import readiness as aws

        vpc = cluster.get("resourcesVpcConfig") or {}
        public = bool(vpc.get("endpointPublicAccess", True))
        private = bool(vpc.get("endpointPrivateAccess", False))
        cidrs = vpc.get("publicAccessCidrs") or ["0.0.0.0/0"]
        subnets = _listed(outputs.get(aws.OUTPUT_FUNCTION_SUBNETS))
        groups = _listed(outputs.get(aws.OUTPUT_FUNCTION_SECURITY_GROUPS))
        place = (
            f"-c vpcId={vpc.get('vpcId')} -c subnetIds={','.join(vpc.get('subnetIds') or [])} "
            f"-c securityGroupIds={vpc.get('clusterSecurityGroupId')}"
        )
        check = "endpoint reachable from the functions"
        if not subnets:
            if public and "0.0.0.0/0" in cidrs:
                self.add(check, OK, "the functions run outside any VPC and the endpoint is public to all")
            else:
                why = "private only" if not public else f"public only to {', '.join(cidrs)}"
                self.add(
                    check,
                    FAIL,
                    f"the functions run outside any VPC, but the endpoint is {why}; Lambda's addresses are "
                    "not predictable",
                    "redeploy in the cluster's VPC (private subnets with a NAT or VPC endpoints): "
                    "npx cdk deploy "
                    f"-c clusterName={self.cluster_name} {place}",
                )
            return
        described = aws.subnets(self.clients, subnets)
        vpcs = {s["VpcId"] for s in described}
        if vpcs != {vpc.get("vpcId")}:
            detail = f"the functions' subnets are in {sorted(vpcs)}, the cluster in {vpc.get('vpcId')}"
            self.add(check, FAIL, detail, f"redeploy with the cluster's subnets: {place}")
            return
        if not private:
            self.add(
                check,
                WARN,
                "the functions run in the cluster's VPC but the endpoint has no private access: they reach "
                "the public endpoint through the VPC's NAT, whose addresses must be in publicAccessCidrs",
                f"aws eks update-cluster-config --name {self.cluster_name} "
                "--resources-vpc-config endpointPrivateAccess=true",
            )
            return
        cluster_group = vpc.get("clusterSecurityGroupId")
        allowed = cluster_group in groups
        if not allowed and cluster_group:
            found = aws.security_groups(self.clients, [cluster_group])
            allowed = any(aws.admits_https_from(group, set(groups)) for group in found)
        if allowed:
            self.add(check, OK, f"private endpoint; the functions' security groups {groups} may reach it")
        else:
            self.add(
                check,
                FAIL,
                f"the cluster security group {cluster_group} admits no HTTPS from the functions' {groups}",
                f"aws ec2 authorize-security-group-ingress --group-id {cluster_group} --protocol tcp "
                "--port 443 "
                f"--source-group {groups[0] if groups else 'sg-…'}",
            )

    def _function_network(self, cluster: dict[str, Any], outputs: dict[str, str]) -> None:
        from nodewright.cloud import readiness as aws

        subnets = _listed(outputs.get(aws.OUTPUT_FUNCTION_SUBNETS))
        if not subnets:
            return  # outside a VPC, Lambda reaches every AWS API itself
        vpc_id = (cluster.get("resourcesVpcConfig") or {}).get("vpcId", "")
        routes = aws.default_routes(self.clients, subnets, vpc_id)
        endpoints = aws.vpc_endpoint_services(self.clients, vpc_id)
        without_nat = [
            s for s, target in routes.items() if not (target or "").startswith(("nat-", "tgw-", "eni-"))
        ]
        missing = [svc for svc in FUNCTION_ENDPOINTS if svc not in endpoints]
        check = "AWS APIs from the functions' subnets"
        if not without_nat:
            self.add(check, OK, "every function subnet routes 0.0.0.0/0 through a NAT or transit gateway")
        elif not missing:
            detail = f"no NAT on {without_nat}; VPC endpoints for {sorted(FUNCTION_ENDPOINTS)} exist"
            if "iam" in endpoints:
                self.add(check, OK, detail)
            else:
                no_iam = "; IAM has no endpoint here, so instance profiles for spec.role cannot be made"
                fix = "give your EC2NodeClasses spec.instanceProfile (a profile you made), or add a NAT"
                self.add(check, WARN, detail + no_iam, fix)
        else:
            needed = ", ".join(f"{svc} ({FUNCTION_ENDPOINTS[svc]})" for svc in missing)
            self.add(
                check,
                FAIL,
                f"subnets {without_nat} have no NAT route and the VPC lacks endpoints for {needed}",
                f"add a NAT gateway route, or: aws ec2 create-vpc-endpoint --vpc-id {vpc_id} --service-name "
                f"com.amazonaws.{self.region}.<service> (interface; dynamodb: --vpc-endpoint-type Gateway)",
            )

    def _function_access_entries(self, outputs: dict[str, str], entries: dict[str, Any]) -> None:
        from nodewright.cloud import readiness as aws

        roles = _listed(outputs.get(aws.OUTPUT_CLUSTER_ACCESS_ROLES))
        bad = []
        for arn in roles:
            entry = entries.get(arn)
            if (
                entry is None
                or entry.get("type") != "STANDARD"
                or KUBERNETES_GROUP not in entry.get("kubernetesGroups", [])
            ):
                bad.append(arn)
        if not roles:
            return
        if bad:
            self.add(
                "functions' access entries",
                FAIL,
                f"no STANDARD access entry in group {KUBERNETES_GROUP} for {bad}",
                "the stack creates them: redeploy (npx cdk deploy); check the cluster's authentication mode",
            )
        else:
            self.add("functions' access entries", OK, f"{len(roles)} roles in group {KUBERNETES_GROUP}")

    def _node_role(self, outputs: dict[str, str], entries: dict[str, Any]) -> None:
        from nodewright.cloud import readiness as aws

        name = outputs.get(aws.OUTPUT_NODE_ROLE_NAME)
        if not name:
            return
        facts = aws.role(self.clients, name)
        if facts is None:
            self.add(
                "node role",
                FAIL,
                f"no IAM role {name}",
                "create it, or redeploy without nodeRoleName/nodeRoleArn",
            )
            return
        problems, fixes = [], []
        if not facts.trusts_ec2:
            problems.append("its trust policy does not let ec2.amazonaws.com assume it")
            fixes.append(
                f"aws iam update-assume-role-policy --role-name {name} --policy-document <ec2 trust>"
            )
        for policy in sorted(set(NODE_POLICIES) - facts.policies):
            problems.append(f"{policy} is not attached")
            fixes.append(
                f"aws iam attach-role-policy --role-name {name} --policy-arn arn:aws:iam::aws:policy/{policy}"
            )
        entry = entries.get(facts.arn)
        if entry is None or entry.get("type") != "EC2_LINUX":
            problems.append("no EC2_LINUX access entry: its nodes cannot join")
            fixes.append(
                f"aws eks create-access-entry --cluster-name {self.cluster_name} --principal-arn {facts.arn} "
                "--type EC2_LINUX"
            )
        if problems:
            self.add("node role", FAIL, f"{name}: " + "; ".join(problems), " && ".join(fixes))
        else:
            self.add("node role", OK, f"{name}: EC2 trust, the node policies, an EC2_LINUX access entry")

    def _function_roles(self, cluster: dict[str, Any], outputs: dict[str, str]) -> None:
        """Ask IAM (``iam:SimulatePrincipalPolicy``) whether each function's role allows every action
        of ``nodewright.spec.iam.requirements``, the one definition the stack's policies are built
        from, with the request context the code sends: a permissions boundary, an SCP or a Deny
        added since the deploy shows here instead of as AccessDenied in a launch."""
        from nodewright.cloud import readiness as aws
        from nodewright.spec import iam as spec

        roles = aws.listed_pairs(outputs.get(aws.OUTPUT_FUNCTION_ROLES))
        if not roles:
            self.add(
                "function roles",
                WARN,
                f"{self.stack_name} does not name its functions' roles (an older release): not simulated",
                "redeploy: npx cdk deploy",
            )
            return
        in_vpc = bool(_listed(outputs.get(aws.OUTPUT_FUNCTION_SUBNETS)))
        for function, role_arn in roles.items():
            partition, account = _arn_field(role_arn, 1), _arn_field(role_arn, 4)
            names = spec.Names(
                partition=partition,
                region=self.region,
                account=account,
                cluster=self.cluster_name,
                cluster_arn=str(cluster.get("arn") or ""),
                node_role_arn=_known(outputs.get(aws.OUTPUT_NODE_ROLE_ARN)),
                table_arn=_known(outputs.get(aws.OUTPUT_STATE_TABLE)),
                interruption_queue_arn=aws.queue_arn(outputs.get(aws.OUTPUT_INTERRUPTION_QUEUE, "")),
                failure_queue_arn=_known(outputs.get(aws.OUTPUT_FAILURE_QUEUE)),
                webhook_secret_arn=_known(outputs.get(aws.OUTPUT_WEBHOOK_SECRET)),
                wakeup_alias_arn=_known(outputs.get(aws.OUTPUT_WAKEUP_ALIAS)),
            )
            self._check(
                f"role of {function}",
                functools.partial(self._simulate_role, function, role_arn, names, in_vpc),
            )

    def _simulate_role(self, function: str, role_arn: str, names: Any, in_vpc: bool) -> None:
        from nodewright.cloud import readiness as aws
        from nodewright.spec import iam as spec

        check = f"role of {function}"
        probes = spec.probes(spec.requirements(function, names, in_vpc=in_vpc), names.region, names.account)
        if not probes:
            self.add(
                check, SKIP, f"nothing known to simulate for {function!r} (a function of another release?)"
            )
            return
        denied: list[tuple[spec.Probe, aws.Denial]] = []
        for probe in probes:
            denials = aws.simulate(self.clients, role_arn, probe.actions, probe.resources, probe.context)
            denied.extend((probe, d) for d in denials)
        asked = sum(len(p.actions) for p in probes)
        if not denied:
            self.add(check, OK, f"{role_arn.rsplit('/', 1)[-1]}: the {asked} actions it uses are allowed")
            return
        # One line per (action, why), naming the first resource and how many more share it.
        grouped: dict[tuple[str, str], list[str]] = {}
        fixes: list[str] = []
        for probe, denial in denied:
            grouped.setdefault((denial.action, denial.reason), []).append(denial.resource)
            fix = _denial_fix(denial, probe.sid, role_arn, self.cluster_name)
            if fix not in fixes:
                fixes.append(fix)
        details = [
            f"{action} on {resources[0]}{f' and {len(resources) - 1} more' if len(resources) > 1 else ''}: "
            f"{_DENIAL_WORDS[reason]}"
            for (action, reason), resources in grouped.items()
        ]
        self.add(check, FAIL, f"{role_arn}: " + "; ".join(details), " && ".join(fixes))

    def _wakeup_endpoint(self, cluster: dict[str, Any], outputs: dict[str, str]) -> None:
        """Which way the API server reaches the wake-up and conversion (``-c wakeup=``), and whether it
        can: the function URL answers (404 without the secret); or the internal load balancer is active
        in the cluster's VPC, admits the cluster security group on 443 and serves the stack's
        certificate, issued for its name and not about to end."""
        from nodewright.cloud import readiness as aws

        check = "wake-up endpoint"
        mode = aws.wakeup_mode(outputs)
        url = outputs.get(aws.OUTPUT_WEBHOOK_URL, aws.NONE)
        if mode == aws.OFF:
            self.add(
                check, OK, "off (-c wakeup=false): pods get nodes on the minute schedule; no URL to reach"
            )
            return
        if mode == aws.PUBLIC:
            answer = self.probe(url.rstrip("/") + "/nodewright-doctor")
            if answer == 404:
                self.add(check, OK, f"public: the function URL {url} answers (404 without the secret)")
            elif answer == 403:
                self.add(
                    check,
                    FAIL,
                    "public: the function URL answers 403: its AuthType or resource policy changed (an SCP "
                    "or Config rule refusing public URLs?); the API server's wake-ups and conversions are "
                    "refused",
                    f"redeploy (npx cdk deploy -c clusterName={self.cluster_name}), or go private: "
                    f"{self._private_flags(cluster)}",
                )
            else:
                self.add(
                    check,
                    WARN,
                    f"public: the function URL {url} did not answer as expected from here ({answer}); the "
                    "API server calls it over the internet, from the control plane's own network",
                    "check that the stack's webhook function and its URL exist "
                    "(aws lambda get-function-url-config)",
                )
            return
        self._private_endpoint(check, cluster, outputs)

    def _private_endpoint(self, check: str, cluster: dict[str, Any], outputs: dict[str, str]) -> None:
        from datetime import UTC, datetime, timedelta

        from nodewright.cloud import readiness as aws

        vpc = cluster.get("resourcesVpcConfig") or {}
        arn = outputs.get(aws.OUTPUT_WAKEUP_LOAD_BALANCER, aws.NONE)
        facts = aws.load_balancer(self.clients, arn) if arn != aws.NONE else None
        redeploy = f"npx cdk deploy -c clusterName={self.cluster_name} {self._private_flags(cluster)}"
        if facts is None:
            self.add(check, FAIL, f"private: the load balancer {arn} does not exist", f"redeploy: {redeploy}")
            return
        problems, fixes = [], []
        if facts.scheme != "internal":
            problems.append(f"the load balancer is {facts.scheme}, not internal")
            fixes.append(f"redeploy: {redeploy}")
        if facts.state not in ("active", ""):
            problems.append(f"the load balancer is {facts.state}")
        if vpc.get("vpcId") and facts.vpc_id != vpc.get("vpcId"):
            problems.append(f"the load balancer is in {facts.vpc_id}, the cluster in {vpc.get('vpcId')}")
            fixes.append(f"redeploy in the cluster's VPC: {redeploy}")
        # kube-apiserver's calls into the VPC leave from the control plane's network interfaces, which
        # carry the cluster security group (and the cluster's additional groups).
        sources = {g for g in [vpc.get("clusterSecurityGroupId"), *(vpc.get("securityGroupIds") or [])] if g}
        groups = aws.security_groups(self.clients, list(facts.security_groups))
        if sources and not any(aws.admits_https_from(g, sources) for g in groups):
            problems.append(
                f"its security groups {list(facts.security_groups)} admit no HTTPS from the control plane's "
                f"{sorted(sources)}: the API server cannot connect"
            )
            group = facts.security_groups[0] if facts.security_groups else "sg-…"
            fixes.append(
                f"aws ec2 authorize-security-group-ingress --group-id {group} --protocol tcp --port 443 "
                f"--source-group {vpc.get('clusterSecurityGroupId')} (or redeploy: {redeploy})"
            )
        certificate_arn = outputs.get(aws.OUTPUT_WAKEUP_CERTIFICATE, aws.NONE)
        https = [certs for port, protocol, certs in facts.listeners if port == 443 and protocol == "HTTPS"]
        if not https or certificate_arn not in https[0]:
            problems.append("no HTTPS listener on 443 serves the stack's certificate")
            fixes.append(f"redeploy: {redeploy}")
        found = aws.certificate(self.clients, certificate_arn) if certificate_arn != aws.NONE else None
        if found is None:
            problems.append(f"the certificate {certificate_arn} is not in ACM")
            fixes.append(f"redeploy: {redeploy}")
        else:
            if facts.dns_name and facts.dns_name.lower() not in {n.lower() for n in found.names}:
                problems.append(
                    f"the certificate names {list(found.names)}, not the load balancer {facts.dns_name}"
                )
                fixes.append(f"redeploy: {redeploy}")
            if isinstance(found.not_after, datetime) and found.not_after - datetime.now(UTC) < timedelta(
                days=365
            ):
                problems.append(f"the certificate ends {found.not_after:%Y-%m-%d}")
                fixes.append(
                    "make a new one: redeploy with another load balancer (it is made for the load balancer's "
                    "name; docs/deploy.md), then nodewright install-webhooks --apply"
                )
        if problems:
            self.add(check, FAIL, "private: " + "; ".join(problems), " && ".join(dict.fromkeys(fixes)))
            return
        self.add(
            check,
            OK,
            f"private: the internal load balancer {facts.dns_name} in {facts.vpc_id} admits the control "
            "plane on 443 and serves the stack's certificate",
        )

    def _private_flags(self, cluster: dict[str, Any]) -> str:
        """The -c flags of -c wakeup=private for this cluster, from its own VPC configuration."""
        vpc = cluster.get("resourcesVpcConfig") or {}
        return (
            f"-c wakeup=private -c vpcId={vpc.get('vpcId')} -c clusterSecurityGroupId="
            f"{vpc.get('clusterSecurityGroupId')} -c subnetIds=<two or more private subnets of "
            f"{','.join(vpc.get('subnetIds') or [])}>"
        )

    def _interruption_queue(self, outputs: dict[str, str]) -> None:
        from nodewright.cloud import readiness as aws

        url = outputs.get(aws.OUTPUT_INTERRUPTION_QUEUE)
        if not url:
            return
        if aws.queue_exists(self.clients, url):
            self.add("interruption queue", OK, url)
        else:
            self.add(
                "interruption queue", FAIL, f"{url} does not exist", "redeploy the stack (npx cdk deploy)"
            )

    def _alarm_target(self, outputs: dict[str, str]) -> None:
        from nodewright.cloud import readiness as aws

        arn = outputs.get(aws.OUTPUT_ALARM_TOPIC, aws.NONE)
        if arn == aws.NONE:
            self.add(
                "alarm notifications",
                WARN,
                "the alarms notify nobody",
                "redeploy with -c alarmEmail=you@example.com or -c alarmTopicArn=arn:aws:sns:…",
            )
            return
        facts = aws.topic(self.clients, arn)
        if facts is None:
            self.add(
                "alarm notifications",
                FAIL,
                f"topic {arn} does not exist",
                "create it or redeploy with another",
            )
            return
        if not _allows_cloudwatch(facts.policy):
            self.add(
                "alarm notifications",
                FAIL,
                f"the policy of {arn} does not let cloudwatch.amazonaws.com publish: alarms cannot notify",
                "add to the topic policy: {Effect: Allow, Principal: {Service: cloudwatch.amazonaws.com}, "
                "Action: sns:Publish, Resource: <topic>, "
                "Condition: {StringEquals: {aws:SourceAccount: <account>}}}",
            )
        elif facts.confirmed == 0:
            self.add(
                "alarm notifications",
                WARN,
                f"{arn} has no confirmed subscription ({facts.pending} pending)",
                "confirm the subscription e-mail SNS sent",
            )
        else:
            self.add("alarm notifications", OK, f"{arn}: {facts.confirmed} confirmed subscription(s)")

    def _spot_service_linked_role(self) -> None:
        from nodewright.cloud import readiness as aws

        if aws.service_linked_role_exists(self.clients):
            self.add("spot service-linked role", OK, aws.SPOT_SERVICE_LINKED_ROLE)
        else:
            self.add(
                "spot service-linked role",
                WARN,
                f"{aws.SPOT_SERVICE_LINKED_ROLE} does not exist: spot launches fail until it does",
                "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com",
            )

    # ------------------------------------------------------------------ Kubernetes
    def _kubernetes(
        self, rbac_manifest: Path | None, outputs: dict[str, str] | None, cluster: dict[str, Any]
    ) -> None:
        from nodewright.cluster import ClusterError
        from nodewright.cluster import readiness as k8s

        if isinstance(self.kube, Exception):
            self.add("Kubernetes API", FAIL, f"no client: {self.kube}", "pass --kubeconfig PATH")
            return
        try:
            version = k8s.server_version(self.kube)
        except ClusterError as exc:
            problem, fix = self._describe(exc)
            # Nothing else can be read then: one finding, not the same one per check.
            self.add(
                "Kubernetes API",
                FAIL,
                f"{problem} (from where doctor runs; the functions' own path is checked above)",
                fix,
            )
            return
        self.add("Kubernetes API", OK, f"{version.get('gitVersion', '?')} at {self.kube.host}")
        self._check("CRDs", lambda: self._crds(k8s))
        self._check("RBAC", lambda: self._rbac(k8s, rbac_manifest))
        self._check("admission webhooks", lambda: self._webhooks(k8s))
        self._check("wake-up webhook", lambda: self._wakeup(k8s, outputs))
        self._check("conversion", lambda: self._conversion(k8s, outputs))
        self._check("EC2NodeClasses", lambda: self._nodeclasses(k8s, outputs, cluster))
        self._check("Karpenter controller", lambda: self._karpenter(k8s), severity=WARN)

    def _karpenter(self, k8s: Any) -> None:
        """A Karpenter controller that still runs reconciles the same NodeClaims as Nodewright:
        both would launch for the same pending pods and disrupt the same nodes."""
        found = [d for d in k8s.deployments(self.kube) if _is_karpenter(d)]
        running = [d for d in found if _replicas(d) > 0]
        if not running:
            stopped = ", ".join(_where(d) for d in found)
            detail = f"{stopped} is scaled to zero" if found else "no Karpenter controller Deployment"
            self.add("Karpenter controller", OK, detail)
            return
        where = ", ".join(
            f"{_where(d)} ({(d.get('status') or {}).get('readyReplicas') or 0} ready)" for d in running
        )
        self.add(
            "Karpenter controller",
            WARN,
            f"{where} still runs: Karpenter and Nodewright both reconcile the same NodeClaims (double "
            "launches, nodes disrupted twice)",
            " && ".join(
                f"kubectl scale deployment {name} -n {namespace} --replicas=0"
                for namespace, name in (_where(d).split("/", 1) for d in running)
            )
            + " (with Helm or GitOps, set its replicas to 0 there, or uninstall it)",
        )

    def _crds(self, k8s: Any) -> None:
        from nodewright.api.crds import build_crds

        expected = {crd["metadata"]["name"]: crd for crd in build_crds().values()}
        for name in CRD_NAMES:
            found = k8s.crd(self.kube, name)
            check = f"CRD {name}"
            if found is None:
                self.add(check, FAIL, "not installed", "kubectl apply -f crds/")
                continue
            versions = {v["name"]: v for v in found["spec"].get("versions", [])}
            v1 = versions.get("v1") or {}
            if not (v1.get("served") and v1.get("storage")):
                detail = f"v1 is not served and stored (versions: {sorted(versions)})"
                self.add(
                    check, FAIL, detail, "convert old objects (nodewright convert), kubectl apply -f crds/"
                )
                continue
            conversion = found["spec"].get("conversion") or {}
            service = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("service")
            where = f"{(service or {}).get('namespace')}/{(service or {}).get('name')}"
            if (
                conversion.get("strategy") == "Webhook"
                and service
                and k8s.service(self.kube, service.get("namespace", ""), service.get("name", "")) is None
            ):
                detail = f"converts through a webhook at service {where}, which does not exist"
                self.add(check, FAIL, detail, "kubectl apply -f crds/ (this release's CRDs)")
                continue
            want = next(v for v in expected[name]["spec"]["versions"] if v["name"] == "v1")
            if v1.get("schema") != want.get("schema"):
                self.add(check, WARN, "v1's schema differs from this release's", "kubectl apply -f crds/")
            else:
                self.add(check, OK, "v1 served and stored, schema of this release")

    def _rbac(self, k8s: Any, manifest: Path | None) -> None:
        if manifest is None or not manifest.is_file():
            self.add("RBAC", SKIP, "no deploy/rbac.yaml to compare with", "pass --rbac PATH")
            return
        documents = _rbac_documents(manifest)
        if isinstance(documents, str):
            self.add(
                "RBAC",
                FAIL,
                f"cannot read {manifest}: {documents}",
                "pass --rbac the deploy/rbac.yaml of this release",
            )
            return
        for doc in documents:
            kind, meta = doc["kind"], doc["metadata"]
            label = f"{kind} {meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta['name']}"
            if kind == "Namespace":
                found = k8s.namespace(self.kube, meta["name"])
                if found is not None and (found.get("metadata") or {}).get("deletionTimestamp"):
                    detail = "being deleted: the writers' Lease cannot be created there"
                    self.add(
                        f"RBAC: {label}",
                        FAIL,
                        detail,
                        f"wait until it is gone, then kubectl apply -f {manifest}",
                    )
                    continue
                self._present(
                    f"RBAC: {label}",
                    found,
                    "the writers' Lease lives there",
                    fix=f"kubectl apply -f {manifest}",
                )
                continue
            found = k8s.rbac_object(self.kube, kind, meta["name"], meta.get("namespace"))
            if found == k8s.NOT_SERVED:
                self.add(f"RBAC: {label}", SKIP, "the API server does not serve rbac.authorization.k8s.io/v1")
                continue
            if found is not None and "rules" in doc:
                have = {_rule_key(rule) for rule in found.get("rules") or []}
                lacking = [r for r in doc["rules"] if _rule_key(r) not in have]
                if lacking:
                    self.add(f"RBAC: {label}", FAIL, f"lacks rules {lacking}", f"kubectl apply -f {manifest}")
                    continue
            self._present(
                f"RBAC: {label}", found, "as deploy/rbac.yaml has it", fix=f"kubectl apply -f {manifest}"
            )

    def _present(
        self, check: str, found: Any, detail: str, fix: str = "kubectl apply -f deploy/rbac.yaml"
    ) -> None:
        if found is None:
            self.add(check, FAIL, "missing", fix)
        else:
            self.add(check, OK, detail)

    def _webhooks(self, k8s: Any) -> None:
        configurations = k8s.webhook_configurations(self.kube)
        if configurations == k8s.NOT_SERVED:
            self.add(
                "admission webhooks", SKIP, "the API server does not serve admissionregistration.k8s.io/v1"
            )
            return
        broken = []
        for configuration in configurations:
            for hook in configuration.get("webhooks") or []:
                groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
                if not groups & {*KARPENTER_GROUPS, "*"}:
                    continue
                service = (hook.get("clientConfig") or {}).get("service")
                if (
                    service
                    and k8s.service(self.kube, service.get("namespace", ""), service.get("name", "")) is None
                ):
                    broken.append(
                        f"{configuration['kind']} {configuration['metadata']['name']} ({hook.get('name')})"
                    )
        if broken:
            self.add(
                "admission webhooks",
                FAIL,
                f"webhooks on Karpenter's objects point at missing services: {broken} "
                "(a removed Karpenter?); "
                "writes to NodePools and NodeClaims fail",
                "kubectl delete validatingwebhookconfiguration/mutatingwebhookconfiguration <name>",
            )
        else:
            self.add("admission webhooks", OK, "none on Karpenter's objects points at a missing service")

    def _wakeup(self, k8s: Any, outputs: dict[str, str] | None) -> None:
        """The wake-up's configuration is installed, watches kube-scheduler's FailedScheduling Event
        (not the old pods/status write), calls this stack's URL and trusts its certificate; with the
        wake-up off, none is left behind."""
        from nodewright.api.webhooks import CONFIGURATION_NAME
        from nodewright.cloud import readiness as aws

        check = "wake-up webhook"
        if outputs is None:
            self.add(check, SKIP, UNKNOWN_STACK)
            return
        mode = aws.wakeup_mode(outputs)
        url = outputs.get(aws.OUTPUT_WEBHOOK_URL, aws.NONE)
        install = f"nodewright install-webhooks --cluster {self.cluster_name} --apply"
        found = k8s.validating_webhook_configuration(self.kube, CONFIGURATION_NAME)
        if mode == aws.OFF:
            if found is None:
                self.add(check, OK, "off (-c wakeup=false), and no configuration is installed")
            else:
                self.add(
                    check,
                    WARN,
                    f"the stack's wake-up is off but {CONFIGURATION_NAME} is still installed: every call "
                    "waits for a URL the stack no longer serves",
                    f"nodewright install-webhooks --cluster {self.cluster_name} --uninstall",
                )
            return
        if found is None:
            self.add(
                check,
                WARN,
                f"validatingwebhookconfiguration {CONFIGURATION_NAME} is not installed: an idle cluster's "
                "first pending pod waits for the minute tick",
                install,
            )
            return
        hooks = found.get("webhooks") or []
        resources = {r for h in hooks for rule in h.get("rules") or [] for r in rule.get("resources") or []}
        if "pods/status" in resources:
            self.add(
                check,
                WARN,
                f"{CONFIGURATION_NAME} is the old pods/status configuration: kube-scheduler waits for the "
                "URL on every pod it marks unschedulable (up to 2 s each when it does not answer)",
                install,
            )
            return
        configs = [h.get("clientConfig") or {} for h in hooks]
        if not any((c.get("url") or "").startswith(url.rstrip("/") + "/") for c in configs):
            self.add(
                check,
                WARN,
                f"{CONFIGURATION_NAME} calls another URL than this stack's {mode} wake-up (a redeployed "
                "stack, or one switched between public and private?): wake-ups go nowhere",
                install,
            )
            return
        trust = self._trust_problem(configs, outputs, mode)
        if trust:
            self.add(
                check,
                WARN,
                f"{CONFIGURATION_NAME}: {trust}: wake-ups are refused at the TLS handshake",
                install,
            )
            return
        self.add(
            check, OK, f"{CONFIGURATION_NAME} calls this stack's {mode} wake-up on kube-scheduler's Events"
        )

    def _trust_problem(self, configs: list[dict[str, Any]], outputs: dict[str, str], mode: str) -> str:
        """Why the API server would not trust the stack's endpoint with these clientConfigs ("" if it
        would): private, each caBundle must be the stack's certificate; public, none may be set (a
        caBundle replaces the public roots the function URL's certificate chains to)."""
        import base64

        from nodewright.cloud import readiness as aws

        bundles = {c.get("caBundle") or "" for c in configs}
        if mode == aws.PUBLIC:
            return (
                "its caBundle is set, so the function URL's public certificate is not trusted"
                if bundles - {""}
                else ""
            )
        arn = outputs.get(aws.OUTPUT_WAKEUP_CERTIFICATE, aws.NONE)
        found = aws.certificate(self.clients, arn) if arn != aws.NONE else None
        if found is None:
            return ""  # the wake-up endpoint check says the certificate is gone
        expected = base64.b64encode(found.pem.encode()).decode()

        def pem(bundle: str) -> str:
            try:
                return base64.b64decode(bundle).decode().strip()
            except (ValueError, UnicodeDecodeError):
                return bundle

        if any(pem(b) != found.pem.strip() for b in bundles) and expected not in bundles:
            return "its caBundle is not the stack's certificate"
        return ""

    def _conversion(self, k8s: Any, outputs: dict[str, str] | None) -> None:
        """The CRDs that serve v1beta1 convert through this stack's function URL.

        A conversion URL left by an earlier stack (redeployed, renamed, or ``-c wakeup=false``)
        fails every v1beta1 request; when objects are still stored as v1beta1
        (``status.storedVersions``) it fails v1 reads too, the functions' own included.
        """
        from nodewright.api.webhooks import CONVERTED_CRDS
        from nodewright.cloud import readiness as aws

        if outputs is None:
            self.add("conversion", SKIP, UNKNOWN_STACK)
            return
        stack_url = outputs.get(aws.OUTPUT_WEBHOOK_URL, aws.NONE)
        for name in CONVERTED_CRDS:
            found = k8s.crd(self.kube, name)
            if found is None:
                continue  # the CRD check said so
            check = f"conversion {name}"
            conversion = found["spec"].get("conversion") or {}
            url = ((conversion.get("webhook") or {}).get("clientConfig") or {}).get("url")
            if conversion.get("strategy") != "Webhook" or not url:
                self.add(check, OK, "v1 only: v1beta1 manifests go through `nodewright convert`")
                continue
            if stack_url != aws.NONE and url.startswith(stack_url.rstrip("/") + "/"):
                client_config = (conversion.get("webhook") or {}).get("clientConfig") or {}
                trust = self._trust_problem([client_config], outputs, aws.wakeup_mode(outputs))
                if trust:
                    fix = f"nodewright install-webhooks --cluster {self.cluster_name} --apply"
                    self.add(check, WARN, f"{trust}: v1beta1 requests fail", fix)
                else:
                    self.add(check, OK, "v1beta1 converted by this stack's wake-up URL")
                continue
            stored = (found.get("status") or {}).get("storedVersions") or []
            where = (
                "another URL than this stack's wake-up URL"
                if stack_url != aws.NONE
                else ("a URL, and this stack has no wake-up (-c wakeup=false)")
            )
            fix = (
                f"nodewright install-webhooks --cluster {self.cluster_name} --apply"
                if stack_url != aws.NONE
                else "kubectl apply -f crds/ (v1 only, no conversion webhook)"
            )
            if "v1beta1" in stored:
                detail = (
                    f"converts through {where}, and objects are stored as v1beta1: reads in v1 fail, "
                    "the functions' own included"
                )
                self.add(check, FAIL, detail, fix)
            else:
                self.add(check, WARN, f"converts through {where}: v1beta1 requests fail", fix)

    def _nodeclasses(self, k8s: Any, outputs: dict[str, str] | None, cluster: dict[str, Any]) -> None:
        from nodewright.cloud import readiness as aws
        from nodewright.cloud.errors import NoSubnetError, SelectorNoMatchError
        from nodewright.cloud.network import NetworkResolver

        nodeclasses = k8s.ec2nodeclasses(self.kube)
        if nodeclasses == k8s.NOT_SERVED:
            return  # the CRD check said so
        vpc_id = (cluster.get("resourcesVpcConfig") or {}).get("vpcId", "")
        if not nodeclasses:
            tagged = aws.tagged_subnets(self.clients, vpc_id, "karpenter.sh/discovery", self.cluster_name)
            self.add(
                "EC2NodeClasses",
                WARN,
                "none applied yet"
                + ("" if tagged else f"; no subnet of {vpc_id} is tagged karpenter.sh/discovery"),
                f"tag the node subnets and security groups (aws ec2 create-tags --resources … --tags "
                f"Key=karpenter.sh/discovery,Value={self.cluster_name}) and kubectl apply your EC2NodeClass",
            )
            return
        node_role = (outputs or {}).get(aws.OUTPUT_NODE_ROLE_NAME)
        resolver = NetworkResolver(self.clients("ec2"))
        for nodeclass in nodeclasses:
            name, spec = nodeclass["metadata"]["name"], nodeclass.get("spec") or {}
            problems, fixes = [], []
            role = spec.get("role")
            if role and node_role and role.rsplit("/", 1)[-1] != node_role:
                problems.append(
                    f"spec.role {role!r} is not the node role {node_role!r} (the only one PassRole allows)"
                )
                fixes.append(f"set spec.role: {node_role}")
            try:
                resolver.subnets(name, spec.get("subnetSelectorTerms") or [])
            except NoSubnetError:
                problems.append("its subnetSelectorTerms match no subnet")
                fixes.append(
                    "tag the node subnets as the selector says (aws ec2 create-tags --resources subnet-…)"
                )
            try:
                resolver.security_groups(name, spec.get("securityGroupSelectorTerms") or [])
            except SelectorNoMatchError:
                problems.append("its securityGroupSelectorTerms match no security group")
                fixes.append(
                    "tag the node security groups as the selector says (aws ec2 create-tags --resources sg-…)"
                )
            if problems:
                self.add(f"EC2NodeClass {name}", FAIL, "; ".join(problems), "; ".join(fixes))
            else:
                self.add(f"EC2NodeClass {name}", OK, "role, subnets and security groups resolve")


_FAILED = object()
UNKNOWN_STACK = (
    "not judged: the stack's outputs are unknown (see the Nodewright stack and EKS cluster checks), "
    "so which function URL it should call is too"
)


_DENIAL_WORDS = {
    "organizations": "denied by a service control policy of the organization",
    "boundary": "not allowed by the role's permissions boundary",
    "explicit": "denied by an explicit Deny",
    "implicit": "no statement allows it",
}


def _denial_fix(denial: Any, sid: str, role_arn: str, cluster_name: str) -> str:
    """The command (or the person) that lifts one denial."""
    role = role_arn.rsplit("/", 1)[-1]
    if denial.reason == "organizations":
        return f"ask your organization's administrators to let {role} do {denial.action} (an SCP denies it)"
    if denial.reason == "boundary":
        return (
            f"add {denial.action} to the permissions boundary of {role} "
            f"(aws iam get-role --role-name {role} --query Role.PermissionsBoundary)"
        )
    if denial.reason == "explicit":
        where = f" {denial.policy}" if denial.policy else ""
        return f"remove or narrow the Deny of {denial.action} in the policy{where} of {role}"
    missing = f" (IAM lacked context {', '.join(denial.missing_context)})" if denial.missing_context else ""
    redeploy = f"npx cdk deploy -c clusterName={cluster_name}"
    return f"redeploy to restore statement {sid} of {role}{missing}: {redeploy}"


def _arn_field(arn: str, index: int) -> str:
    parts = arn.split(":")
    return parts[index] if len(parts) > index else ""


def _known(value: str | None) -> str:
    from nodewright.cloud.readiness import NONE

    return "" if not value or value == NONE else value


def _listed(value: str | None) -> list[str]:
    from nodewright.cloud.readiness import NONE

    if not value or value == NONE:
        return []
    return [v for v in value.split(",") if v]


# How an operator recognises a Karpenter controller: the selector label of Karpenter's Helm chart
# (charts/karpenter/templates/_helpers.tpl, karpenter.selectorLabels), or its controller image
# (values.yaml controller.image.repository public.ecr.aws/karpenter/controller; mirrors keep the path).
KARPENTER_NAME_LABEL = ("app.kubernetes.io/name", "karpenter")
KARPENTER_IMAGE_PATH = "karpenter/controller"


def _is_karpenter(deployment: dict[str, Any]) -> bool:
    template = (deployment.get("spec") or {}).get("template") or {}
    key, value = KARPENTER_NAME_LABEL
    for meta in (deployment.get("metadata") or {}, template.get("metadata") or {}):
        if (meta.get("labels") or {}).get(key) == value:
            return True
    containers = (template.get("spec") or {}).get("containers") or []
    return any(_image_repository(c.get("image") or "").endswith(KARPENTER_IMAGE_PATH) for c in containers)


def _image_repository(image: str) -> str:
    """``registry/path/name`` of an image reference, without its tag or digest."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name[: len(name) - len(last)] + last.split(":", 1)[0]


def _replicas(deployment: dict[str, Any]) -> int:
    """The pods it runs or is about to: the most of what it asks for and what it has."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    return max(int(spec.get("replicas", 1) or 0), int(status.get("replicas") or 0))


def _where(deployment: dict[str, Any]) -> str:
    meta = deployment.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


RBAC_KINDS = ("Namespace", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def _rbac_documents(manifest: Path) -> list[dict[str, Any]] | str:
    """The manifest's documents, each a named object of an RBAC kind; or what is wrong with it."""
    import yaml

    try:
        documents = [d for d in yaml.safe_load_all(manifest.read_text(encoding="utf-8")) if d]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return f"{type(exc).__name__}: {exc}".replace("\n", " ")
    for i, doc in enumerate(documents):
        if (
            not isinstance(doc, dict)
            or doc.get("kind") not in RBAC_KINDS
            or not isinstance(doc.get("metadata"), dict)
            or not isinstance(doc["metadata"].get("name"), str)
        ):
            return f"document {i} is not a named {'/'.join(RBAC_KINDS)}"
    return documents


def _rule_key(rule: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        tuple(sorted(rule.get(k) or [])) for k in ("apiGroups", "resources", "resourceNames", "verbs")
    )


def _allows_cloudwatch(policy: dict[str, Any]) -> bool:
    for statement in policy.get("Statement", []):
        principal = statement.get("Principal") or {}
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        services = [services] if isinstance(services, str) else services
        actions = statement.get("Action", [])
        actions = [actions] if isinstance(actions, str) else actions
        if (
            statement.get("Effect") == "Allow"
            and "cloudwatch.amazonaws.com" in services
            and any(a in ("sns:Publish", "sns:*", "*") for a in actions)
        ):
            return True
    return False


def _kubernetes_client(args: argparse.Namespace, region: str) -> Any:
    from nodewright import cluster
    from nodewright.settings import Settings

    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG")
    default = Path.home() / ".kube" / "config"
    if not kubeconfig and default.is_file():
        kubeconfig = str(default)
    try:
        settings = Settings(cluster_name=args.cluster, region=region, kubeconfig=kubeconfig)
        return cluster.connect(settings, kubeconfig_setting="--kubeconfig (or KUBECONFIG)")
    except Exception as exc:  # any failure to build a client (bad kubeconfig, no credentials) is a finding
        return exc


def run(args: argparse.Namespace) -> int:
    from nodewright.cloud.readiness import default_clients
    from nodewright.observability import logger_level
    from nodewright.settings import Settings

    region = args.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        import boto3

        region = boto3.session.Session().region_name
    if not region:
        print("nodewright doctor: no region: pass --region or set AWS_REGION", file=sys.stderr)
        return 2
    stack = args.stack or f"Nodewright-{args.cluster}"
    settings = Settings(
        cluster_name=args.cluster, region=region, aws_endpoint_url=os.environ.get("AWS_ENDPOINT_URL")
    )
    with logger_level("ERROR"):
        doctor = Doctor(
            args.cluster, region, stack, default_clients(settings), _kubernetes_client(args, region)
        )
        rbac = Path(args.rbac) if args.rbac else REPO_RBAC
        findings = doctor.run(rbac)
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=2))
    else:
        print(f"nodewright doctor: cluster {args.cluster} in {region}, stack {stack}")
        for finding in findings:
            print(f"  {finding.status:<4}  {finding.check}: {finding.detail}")
            if finding.fix and finding.status in (FAIL, WARN, SKIP):
                print(f"        fix: {finding.fix}")
        failed = sum(f.status == FAIL for f in findings)
        warned = sum(f.status == WARN for f in findings)
        print(f"{failed} problem(s), {warned} warning(s)")
    return 1 if any(f.status == FAIL for f in findings) else 0
