"""What stops a command that talks to AWS or to the API server, in words: ``(what is wrong, what to do)``.

One definition for every subcommand: ``doctor`` turns each into a finding with its fix, the others
print it as one line and exit 1. An error of another kind is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import Any

# Read access to everything doctor looks at (CRDs, RBAC, webhook configurations, Deployments):
# EKS's cluster-wide read-only access policy.
EKS_READ_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
# Installing webhook configurations and replacing CRDs needs cluster administration.
EKS_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
PRINCIPAL_PLACEHOLDER = "<your IAM role ARN>"


def stopping_errors() -> tuple[type[BaseException], ...]:
    """The errors ``describe`` words: AWS's, the API server's and an unusable kubeconfig's."""
    from botocore.exceptions import BotoCoreError, ClientError

    from nodewright.cluster.errors import ClusterError

    return (ClusterError, ClientError, BotoCoreError)


def describe(
    exc: BaseException,
    cluster_name: str,
    *,
    needs: str = "read",
    principal: str = PRINCIPAL_PLACEHOLDER,
    host: str = "",
) -> tuple[str, str]:
    """``(problem, fix)`` for one of the ``stopping_errors``. ``needs``: "read" (doctor's
    checks) or "admin" (installing webhooks), which access policy the fix grants; ``host``: the
    API server's URL, named when it cannot be reached."""
    from botocore.exceptions import BotoCoreError, ClientError

    from nodewright.cluster.errors import ApiError, ApiUnavailable, ClusterConfigError

    if isinstance(exc, ClusterConfigError):
        return str(exc), ""  # its message already says which setting to correct
    if isinstance(exc, ApiError) and exc.status == 401:
        return (
            f"the API server does not accept your credentials (401 {exc.message})",
            f"renew them: aws eks update-kubeconfig --name {cluster_name} (an expired token, or a kubeconfig "
            "of another cluster); an IAM principal without an access entry also gets 401: "
            f"aws eks create-access-entry --cluster-name {cluster_name} --principal-arn {principal}",
        )
    if isinstance(exc, ApiError) and exc.status == 403:
        policy = EKS_ADMIN_POLICY if needs == "admin" else EKS_READ_POLICY
        return (
            f"not allowed: {exc.message}",
            f"aws eks associate-access-policy --cluster-name {cluster_name} --principal-arn {principal} "
            f"--access-scope type=cluster --policy-arn {policy} (or, outside EKS, bind your identity to a "
            f"ClusterRole that allows it)",
        )
    if isinstance(exc, ApiUnavailable) and not isinstance(exc, ApiError):
        return (
            f"cannot reach the API server {host or '(the kubeconfig server)'}: {_reason(exc)}",
            "check the kubeconfig's server and that this machine can reach it (a private endpoint: run "
            "from inside the cluster's VPC)",
        )
    if isinstance(exc, ApiError):
        return f"the API server answered {exc}", "retry; if it persists, check the API server's health"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        operation = getattr(exc, "operation_name", "") or "the call"
        return (
            f"AWS refused {operation}: {error.get('Code', '')}: {error.get('Message', exc)}",
            "check the region and that your AWS identity may make this read-only call",
        )
    if isinstance(exc, BotoCoreError):
        return _botocore(exc)
    raise TypeError(f"not an error this module describes: {exc!r}") from exc


def one_line(exc: BaseException, cluster_name: str, *, needs: str = "read", host: str = "") -> str:
    """``describe`` as one sentence: ``problem; fix``."""
    problem, fix = describe(exc, cluster_name, needs=needs, host=host)
    return f"{problem}; {fix}" if fix else problem


def _botocore(exc: Any) -> tuple[str, str]:
    from botocore.exceptions import (
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return (
            f"no AWS credentials ({exc})",
            "configure them: aws configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
        )
    if isinstance(exc, NoRegionError):
        return "no AWS region", "pass --region or set AWS_REGION"
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError):
        endpoint = str(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "")
        where = "/".join(endpoint.split("/", 3)[:3]) if endpoint else f"its endpoint ({exc})"
        return (
            f"cannot reach AWS at {where}",
            "check the network (a proxy, a VPC without NAT or endpoints) and AWS_ENDPOINT_URL if set",
        )
    return f"AWS: {exc}", "check your AWS credentials, region and network"


def _reason(exc: Any) -> str:
    """The socket's complaint, without urllib3's pool and retry wrapping around it."""
    text = str(exc)
    for known in (
        "Connection refused",
        "timed out",
        "Name or service not known",
        "certificate verify failed",
    ):
        if known in text:
            return known
    return text
