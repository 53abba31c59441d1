"""Typed errors of the cloud package, so flows can react by kind rather than by message."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# CreateFleet error codes that mean "this offering (type, zone, capacity type) cannot be had now".
# They mark the offering unavailable for a few minutes; the launch moves on to the next offering.
INSUFFICIENT_CAPACITY_CODES: frozenset[str] = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        # A targeted capacity reservation has no free slot: that reservation is marked unavailable.
        "ReservationCapacityExceeded",
    }
)


# Why a NodeClaim's launch failed, in the classes an operator acts on differently: one CloudWatch
# series per class (``LaunchFailures{Class}``), so an alarm can watch each without SEARCH.
INSUFFICIENT_CAPACITY = "InsufficientCapacity"  # EC2 has none now: wait, or widen the NodePools
QUOTA = "Quota"  # an account quota: ask for more (Service Quotas), or lower the NodePools' limits
PERMISSION = "Permission"  # IAM said no: an SCP, a permissions boundary, an edited role
INVALID_REQUEST = "InvalidRequest"  # the launch as configured cannot be made: fix the EC2NodeClass
OTHER = "Other"  # throttling, an EC2 fault, an unexpected error
# Most actionable first: a NodeClaim whose offerings failed for several reasons is counted under
# the one that needs a person (a quota, a denial) rather than the capacity EC2 may have later.
LAUNCH_FAILURE_CLASSES: tuple[str, ...] = (PERMISSION, INVALID_REQUEST, QUOTA, OTHER, INSUFFICIENT_CAPACITY)
# Account quotas, as EC2, EBS and IAM name them. VcpuLimitExceeded and MaxSpotInstanceCountExceeded
# also mark the offering unavailable (INSUFFICIENT_CAPACITY_CODES: the launch tries the next one,
# as Karpenter does), but what ends them is a quota increase, not time.
QUOTA_CODES: frozenset[str] = frozenset(
    {
        "VcpuLimitExceeded",  # running On-Demand vCPUs per instance family group
        "MaxSpotInstanceCountExceeded",  # Spot vCPUs
        "InstanceLimitExceeded",
        "MaxFleetCountExceeded",
        "LaunchTemplateLimitExceeded",  # launch templates per region
        "VolumeLimitExceeded",  # EBS storage per volume type
        "NetworkInterfaceLimitExceeded",
        "LimitExceeded",  # IAM: instance profiles per account
        "ResourceLimitExceeded",
    }
)
# EC2's throttling answer: a rate, not a quota (botocore retried it already).
THROTTLING_CODES: frozenset[str] = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException"}
)
PERMISSION_CODES: frozenset[str] = frozenset(
    {
        "UnauthorizedOperation",  # EC2's denial (an encoded authorization message)
        "AccessDenied",  # IAM, STS, SSM
        "AccessDeniedException",  # KMS, EKS, DynamoDB
        "AuthFailure",
        "Blocked",
        "OptInRequired",
        "InvalidClientTokenId",
        "ExpiredToken",
        "UnrecognizedClientException",
    }
)
# Our own reasons a launch cannot be made as configured (the EC2NodeClass or NodeClaim is at fault).
CONFIGURATION_CODES: frozenset[str] = frozenset(
    {
        "NoInstanceTypes",
        "SelectorNoMatchError",
        "NoSubnetError",
        "PlacementGroupError",
        "InvalidNodeClassError",
        "MissingParameter",
        "UnsupportedOperation",
        "NoSuchEntity",  # IAM: the EC2NodeClass's instanceProfile does not exist
        "ValidationError",
    }
)


def launch_failure_class(*codes: str) -> str:
    """The class (``LAUNCH_FAILURE_CLASSES``) of a failed launch whose offerings failed with
    ``codes`` (EC2's error codes, or our own): the most actionable of theirs. The one place launch
    errors are classified; ``tests/unit/test_cloud_errors.py`` holds the table."""
    found = {_code_class(code) for code in codes} or {OTHER}
    return next(kind for kind in LAUNCH_FAILURE_CLASSES if kind in found)


def _code_class(code: str) -> str:
    if code in PERMISSION_CODES:
        return PERMISSION
    if code in THROTTLING_CODES:
        return OTHER
    if code in QUOTA_CODES or code.endswith("LimitExceeded"):
        return QUOTA
    if code in INSUFFICIENT_CAPACITY_CODES or code.startswith("Insufficient"):
        return INSUFFICIENT_CAPACITY  # and our InsufficientCapacityError
    # EC2's InvalidParameter*, InvalidAMIID.*, InvalidSubnetID.NotFound, InvalidLaunchTemplate*, ...;
    # ours: InvalidNodeClaim, InvalidNodeClassError.
    if code in CONFIGURATION_CODES or code.startswith("Invalid"):
        return INVALID_REQUEST
    return OTHER


def error_code(error: BaseException) -> str:
    """The code an AWS answer carries (``AccessDenied``, ``InvalidParameterValue``, ...), else the
    exception's type name."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = (response.get("Error") or {}).get("Code")
        if code:
            return str(code)
    return type(error).__name__


@dataclass(frozen=True)
class FleetError:
    """One offering CreateFleet refused: the error code and the (type, zone, capacity type)."""

    code: str
    instance_type: str
    zone: str
    capacity_type: str
    message: str = ""

    @property
    def offering(self) -> tuple[str, str, str]:
        return (self.instance_type, self.zone, self.capacity_type)

    @property
    def insufficient_capacity(self) -> bool:
        """The offering cannot be had now: it is marked unavailable and the launch goes on."""
        return self.code in INSUFFICIENT_CAPACITY_CODES


class CloudError(Exception):
    """Base of every error the cloud package raises on purpose."""


def aws_unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or an error that caused it) says AWS cannot be reached at all: the endpoint
    refused or timed out the connection after botocore's retries, or there are no credentials to
    sign with. An invocation can do nothing more then; an AWS answer (throttling, a denial, a
    fault) is not this."""
    from botocore.exceptions import (
        ConnectTimeoutError,
        CredentialRetrievalError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    unreachable = (
        EndpointConnectionError,
        ConnectTimeoutError,
        NoCredentialsError,
        PartialCredentialsError,
        CredentialRetrievalError,
    )
    seen: BaseException | None = error
    for _ in range(10):  # a cause chain is short; never loop on a cycle
        if seen is None:
            return False
        if isinstance(seen, unreachable):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class SelectorNoMatchError(CloudError):
    """A NodeClass selector (subnets, security groups, AMIs) matched nothing; the message names it."""

    def __init__(self, kind: str, nodeclass: str, terms: object) -> None:
        self.kind = kind
        self.nodeclass = nodeclass
        self.terms = terms
        super().__init__(
            f"EC2NodeClass {nodeclass!r}: no {kind} matched {kind}SelectorTerms {terms!r}; "
            f"check the tags/ids/names in spec.{kind}SelectorTerms"
        )


class PlacementGroupError(CloudError):
    """The EC2NodeClass's placementGroupSelector names no available placement group."""

    def __init__(self, nodeclass: str, selector: object, reason: str) -> None:
        self.nodeclass = nodeclass
        self.selector = selector
        self.reason = reason
        super().__init__(
            f"EC2NodeClass {nodeclass!r}: placementGroupSelector {selector!r}: {reason}; create the "
            "placement group or fix spec.placementGroupSelector"
        )


class NoSubnetError(SelectorNoMatchError):
    """No subnet matched the NodeClass's subnetSelectorTerms (or none in an allowed zone)."""

    def __init__(
        self, nodeclass: str, terms: object, zones: Iterable[str] | None = None, detail: str = ""
    ) -> None:
        super().__init__("subnet", nodeclass, terms)
        message = str(self.args[0])
        if zones:
            message += f" in the allowed zones {sorted(zones)!r}"
        self.args = (f"{message}{'; ' + detail if detail else ''}",)


class InvalidNodeClassError(CloudError):
    """The EC2NodeClass cannot be turned into a launch (e.g. Custom family without amiSelectorTerms)."""


class InsufficientCapacityError(CloudError):
    """Every candidate offering failed with a capacity error; ``errors`` says which and why."""

    def __init__(self, nodeclaim: str, errors: Sequence[FleetError]) -> None:
        self.nodeclaim = nodeclaim
        self.errors = list(errors)
        codes = sorted({e.code for e in errors}) or ["no offering left"]
        super().__init__(
            f"NodeClaim {nodeclaim!r}: insufficient capacity ({', '.join(codes)}) for every candidate "
            "offering; they are marked unavailable for 3 minutes and the next plan will choose others"
        )


class LaunchError(CloudError):
    """CreateFleet failed for a reason that is not a capacity error (code kept for metrics)."""

    def __init__(self, nodeclaim: str, code: str, message: str, retryable: bool = False) -> None:
        self.nodeclaim = nodeclaim
        self.code = code
        self.retryable = retryable
        super().__init__(f"NodeClaim {nodeclaim!r}: launch failed: {code}: {message}")


class InstanceNotFoundError(CloudError):
    """The instance does not exist (or is terminated); delete treats it as done."""
