"""Settings every function reads from its environment, set by the CDK stack.

One frozen object so a flow receives its configuration explicitly instead of
reading ``os.environ`` deep inside the layer.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

SERVICE_ENDPOINT_PREFIX = "AWS_ENDPOINT_URL_"
# Karpenter's --min-values-policy (MIN_VALUES_POLICY): Strict refuses a NodeClaim whose candidate
# types cannot meet a requirement's minValues; BestEffort launches it with what there is.
MIN_VALUES_STRICT = "Strict"
MIN_VALUES_BEST_EFFORT = "BestEffort"
MIN_VALUES_POLICIES = (MIN_VALUES_STRICT, MIN_VALUES_BEST_EFFORT)
_TRUE = ("1", "true", "yes")
# The client-side request rate limit of each function container (nodewright.ratelimit), in
# Karpenter's variables (KUBE_CLIENT_QPS/KUBE_CLIENT_BURST, 200/300 for its one controller process).
# Here every warm container of every function has a bucket of its own, so the rate the API server
# sees is the containers at work times this: the provisioner and the disruption pass at 50/s, and
# the interruption functions' containers (up to 55 in an AZ-wide reclaim) at the stack's 5/s each
# (infra/capabilities/functions.py INTERRUPTION_KUBE_CLIENT_QPS). A burst of 100 covers one provisioning
# pass over a 5,000-node, 50,000-pod cluster (its ~120 list pages of 500) or one batch of ten spot
# warnings (cordon, replacement, evictions: ~15 requests a node) without waiting. The stack sets both
# (-c kubeClientQPS / -c kubeClientBurst, infra/config.py); these are its defaults.
KUBE_CLIENT_QPS = 50.0
KUBE_CLIENT_BURST = 100
# NodeClaims one pass creates and launches at once (``provisioning.parallel``; LAUNCH_CONCURRENCY).
# Karpenter launches a batch's NodeClaims all at once in goroutines; a function holds each launch in
# flight in a thread, with an EC2 connection (each CreateFleet takes seconds, waiting on EC2) and an
# API server connection, so they are bounded. 20 launches the nodes of a 100-pod burst in one wave;
# beyond it each wave waits for the last, and the writes (three to five a launch) still fit in
# KUBE_CLIENT_BURST, so the request rate limit does not hold them back. EC2 throttles CreateFleet per
# account and Region; botocore's adaptive retries back off when it does.
LAUNCH_CONCURRENCY = 20
# How often a warm wake-up webhook container rereads its URL's secret path (nodewright.wakeup.webhook):
# a rotation's new secret is also read on the first request for a path it does not know, so this
# bounds how long a container goes on accepting a version the operator withdrew (the AWSPREVIOUS
# label removed to close the rotation window early) and costs one GetSecretValue per container per
# interval. The stack sets it (-c webhookSecretMaxAge, infra/config.py); this is its default.
WEBHOOK_SECRET_MAX_AGE_SECONDS = 60.0


class SettingsError(ValueError):
    """A required setting is missing or malformed; the message names the variable."""


@dataclass(frozen=True)
class AwsCredentials:
    """The AWS credentials the environment gives (Lambda sets the execution role's session in
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``). Carried by the settings
    so every client a function builds signs as that function; the secret never appears in a repr."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AwsCredentials | None:
        key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
        if not key or not secret:
            return None  # botocore's own chain (profile, SSO, container or instance role) decides
        return cls(key, secret, env.get("AWS_SESSION_TOKEN") or None)


def _positive(env: Mapping[str, str], name: str, default: float, *, integer: bool = False) -> float:
    """A rate or interval setting: a number above zero (a whole one when ``integer``), ``default``
    when absent."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)) or (integer and not value.is_integer()):
        kind = "a whole number" if integer else "a number"
        raise SettingsError(f"{name}={raw!r}: use {kind} above zero, e.g. {name}={default:g}")
    return value


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise SettingsError(
            f"{name}={raw!r} is not a number; set it to seconds, e.g. {name}={default:g}"
        ) from exc


@dataclass(frozen=True)
class Settings:
    cluster_name: str
    region: str
    state_table: str | None = None
    # A kubeconfig path replaces EKS token auth (the sandbox, or a user's own API server).
    kubeconfig: str | None = None
    # Endpoint override for every AWS client (the sandbox's moto server).
    aws_endpoint_url: str | None = None
    node_role: str | None = None
    interruption_queue_url: str | None = None
    # "replace" (default) acts on rebalance recommendations; "event-only" only records them.
    rebalance_mode: str = "replace"
    poll_interval_seconds: float = 5.0
    batch_idle_seconds: float = 1.0
    batch_max_seconds: float = 10.0
    idle_after_seconds: float = 600.0
    tracing: bool = False
    # Static NodePools (``spec.replicas``) are run: Karpenter v1.14's StaticCapacity feature gate, off by
    # default (``-c staticCapacity=true``). Off, a static NodePool launches nothing and says so.
    static_capacity: bool = False
    # The wake-up webhook (functions/webhook): what it wakes (the provisioner's wake-up alias ARN)
    # and the Secrets Manager secret holding its URL's secret path.
    wake_function: str | None = None
    webhook_secret: str | None = None
    # How often a warm webhook container rereads that secret (see WEBHOOK_SECRET_MAX_AGE_SECONDS above).
    webhook_secret_max_age_seconds: float = WEBHOOK_SECRET_MAX_AGE_SECONDS
    # Karpenter's --min-values-policy (see MIN_VALUES_POLICIES), read by every plan through the World.
    min_values_policy: str = MIN_VALUES_STRICT
    # Karpenter's SpotToSpotConsolidation feature gate, off by default as there: a node whose
    # candidates are all spot is consolidated by deletion only, never replaced by another spot node.
    spot_to_spot_consolidation: bool = False
    # Karpenter's NodeOverlay feature gate (alpha, off by default in v1.14 as there): with it, the
    # NodeOverlays are read and change the prices and capacity every plan sees (``state.overlays``).
    node_overlay: bool = False
    # The API server request rate limit of this container: tokens a second and bucket size (see
    # KUBE_CLIENT_QPS above).
    kube_client_qps: float = KUBE_CLIENT_QPS
    kube_client_burst: int = KUBE_CLIENT_BURST
    # NodeClaims a pass launches at once (see LAUNCH_CONCURRENCY above).
    launch_concurrency: int = LAUNCH_CONCURRENCY
    # AWS_ENDPOINT_URL_<SERVICE>: one service elsewhere than the others (the sandbox's Lambda).
    service_endpoints: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, str] = field(default_factory=dict)
    # The credentials in the environment when the settings were read (None: botocore's chain).
    aws_credentials: AwsCredentials | None = None

    @property
    def relax_min_values(self) -> bool:
        """Whether the scheduling core may relax minValues (Karpenter's ``relaxMinValues``)."""
        return self.min_values_policy == MIN_VALUES_BEST_EFFORT

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        cluster = env.get("CLUSTER_NAME", "")
        if not cluster:
            raise SettingsError("CLUSTER_NAME is not set; the stack sets it to the EKS cluster's name")
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
        if not region:
            raise SettingsError("AWS_REGION is not set; Lambda sets it, locally export AWS_REGION=us-east-1")
        rebalance_mode = env.get("REBALANCE_MODE", "replace")
        if rebalance_mode not in ("replace", "event-only"):
            raise SettingsError(f"REBALANCE_MODE={rebalance_mode!r}: use 'replace' or 'event-only'")
        min_values_policy = env.get("MIN_VALUES_POLICY") or MIN_VALUES_STRICT
        if min_values_policy not in MIN_VALUES_POLICIES:
            raise SettingsError(
                f"MIN_VALUES_POLICY={min_values_policy!r}: use {' or '.join(map(repr, MIN_VALUES_POLICIES))}"
            )
        return cls(
            cluster_name=cluster,
            region=region,
            state_table=env.get("STATE_TABLE") or None,
            kubeconfig=env.get("NODEWRIGHT_KUBECONFIG") or None,
            aws_endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            node_role=env.get("NODE_ROLE") or None,
            interruption_queue_url=env.get("INTERRUPTION_QUEUE_URL") or None,
            rebalance_mode=rebalance_mode,
            poll_interval_seconds=_number(env, "POLL_INTERVAL_SECONDS", 5.0),
            batch_idle_seconds=_number(env, "BATCH_IDLE_SECONDS", 1.0),
            batch_max_seconds=_number(env, "BATCH_MAX_SECONDS", 10.0),
            idle_after_seconds=_number(env, "IDLE_AFTER_SECONDS", 600.0),
            kube_client_qps=_positive(env, "KUBE_CLIENT_QPS", KUBE_CLIENT_QPS),
            kube_client_burst=int(_positive(env, "KUBE_CLIENT_BURST", KUBE_CLIENT_BURST, integer=True)),
            launch_concurrency=int(_positive(env, "LAUNCH_CONCURRENCY", LAUNCH_CONCURRENCY, integer=True)),
            tracing=env.get("NODEWRIGHT_TRACING", "false").lower() in _TRUE,
            min_values_policy=min_values_policy,
            spot_to_spot_consolidation=_gate(env, "SPOT_TO_SPOT_CONSOLIDATION"),
            node_overlay=_gate(env, "NODE_OVERLAY"),
            static_capacity=_gate(env, "STATIC_CAPACITY"),
            wake_function=env.get("WAKE_FUNCTION") or None,
            webhook_secret=env.get("WEBHOOK_SECRET_ARN") or None,
            webhook_secret_max_age_seconds=_positive(
                env, "WEBHOOK_SECRET_MAX_AGE_SECONDS", WEBHOOK_SECRET_MAX_AGE_SECONDS
            ),
            service_endpoints={
                key.removeprefix(SERVICE_ENDPOINT_PREFIX).lower(): value
                for key, value in env.items()
                if key.startswith(SERVICE_ENDPOINT_PREFIX) and value
            },
            aws_credentials=AwsCredentials.from_env(env),
        )


def _gate(env: Mapping[str, str], name: str) -> bool:
    """A Karpenter feature gate the stack sets (``true``/``false``), off when absent."""
    value = env.get(name) or "false"
    if value.lower() not in (*_TRUE, "0", "false", "no"):
        raise SettingsError(f"{name}={value!r}: use 'true' or 'false'")
    return value.lower() in _TRUE
