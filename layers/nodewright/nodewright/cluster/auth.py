"""How the functions authenticate to the API server: an EKS token made in-process, or a kubeconfig.

An EKS bearer token is a presigned STS ``GetCallerIdentity`` URL whose signature covers the header
``x-k8s-aws-id: <cluster>``; EKS accepts it for 15 minutes from its signing time (``X-Amz-Expires``
is 60 as aws-iam-authenticator sets it, but EKS applies its own 15-minute window). Presigning is
local (no network call), so a token costs microseconds; the client's ``refresh_api_key_hook`` runs
before every request and re-signs when the token is older than ``TOKEN_REFRESH_SECONDS``.

The token's age is measured on the wall clock: Lambda freezes a container between invocations and
``time.monotonic`` need not advance while it is frozen, so a provisioner idle for an hour would
otherwise keep sending a token EKS expired long ago. Should the API server still answer 401 (a clock
skew, a token revoked), ``Cluster.request`` calls ``reauthenticate`` and retries the request once
with a freshly signed token.

Endpoint and CA come from ``eks:DescribeCluster`` (through ``nodewright.cloud``, which owns every
AWS call). The resulting ``Configuration`` is cached per container and per cluster.
"""

from __future__ import annotations

import base64
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nodewright.cloud.cache import is_fresh
from nodewright.cluster.errors import ClusterConfigError

if TYPE_CHECKING:
    from kubernetes.client import Configuration

    from nodewright.settings import Settings

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_EXPIRES_SECONDS = 60
TOKEN_LIFETIME_SECONDS = 15 * 60
# Re-sign well before EKS's 15-minute window closes: a request in flight at 14:59 must not fail.
TOKEN_REFRESH_SECONDS = 10 * 60


@dataclass(frozen=True)
class ClusterEndpoint:
    """What ``eks:DescribeCluster`` tells us: the API server URL and its CA (base64 PEM, as EKS has it)."""

    endpoint: str
    certificate_authority_data: str


def eks_token(cluster_name: str, sts_client: Any) -> str:
    """A bearer token for ``cluster_name`` signed with ``sts_client``'s credentials (no network call)."""

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    event = "before-sign.sts.GetCallerIdentity"
    sts_client.meta.events.register(event, add_cluster_header)
    try:
        url = sts_client.generate_presigned_url(
            "get_caller_identity", Params={}, ExpiresIn=PRESIGN_EXPIRES_SECONDS, HttpMethod="GET"
        )
    finally:
        sts_client.meta.events.unregister(event, add_cluster_header)
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def sts_client_for(settings: Settings) -> Any:
    """The STS client of ``nodewright.cloud``: presigning calls nothing, but clients are built there."""
    from nodewright.cloud.aws import client

    return client("sts", settings)


class TokenRefresher:
    """``refresh_api_key_hook`` for the kubernetes client: keeps ``api_key['authorization']`` fresh."""

    def __init__(
        self,
        cluster_name: str,
        make_token: Callable[[], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster_name = cluster_name
        self._make_token = make_token
        self._clock = clock
        self._signed_at: float | None = None
        self._lock = threading.Lock()

    def __call__(self, configuration: Configuration) -> None:
        with self._lock:
            now = self._clock()
            if self._signed_at is not None and is_fresh(self._signed_at, now, TOKEN_REFRESH_SECONDS):
                return
            configuration.api_key["authorization"] = self._make_token()
            configuration.api_key_prefix["authorization"] = "Bearer"
            self._signed_at = now

    def invalidate(self) -> None:
        """Forget the token's age: the next request signs a new one (after a 401)."""
        with self._lock:
            self._signed_at = None


def reauthenticate(configuration: Configuration) -> bool:
    """After a 401: make the next request carry a newly signed token. False when the credentials
    are not ours to renew (a kubeconfig's static token): retrying would only repeat the 401."""
    hook = getattr(configuration, "refresh_api_key_hook", None)
    if not isinstance(hook, TokenRefresher):
        return False
    hook.invalidate()
    return True


def _describe_cluster(settings: Settings) -> ClusterEndpoint:
    """Endpoint and CA through nodewright.cloud, the only package that calls AWS."""
    from nodewright.cloud import eks

    described = eks.describe_cluster(settings)
    if isinstance(described, ClusterEndpoint):
        return described
    return ClusterEndpoint(
        endpoint=described["endpoint"], certificate_authority_data=described["certificateAuthority"]["data"]
    )


def eks_configuration(
    settings: Settings,
    describe: Callable[[Settings], ClusterEndpoint] = _describe_cluster,
    sts_client: Any | None = None,
) -> Configuration:
    """A client configuration for EKS: endpoint + CA from DescribeCluster, a self-refreshing token."""
    from kubernetes.client import Configuration

    target = describe(settings)
    if not target.endpoint:
        raise ClusterConfigError(
            f"eks:DescribeCluster returned no endpoint for {settings.cluster_name!r}; is the cluster ACTIVE?"
        )
    configuration = Configuration(host=target.endpoint)
    # The CA must be a file for urllib3; /tmp is the only writable place in Lambda.
    with tempfile.NamedTemporaryFile("wb", prefix="eks-ca-", suffix=".pem", delete=False) as ca_file:
        ca_file.write(base64.b64decode(target.certificate_authority_data))
    configuration.ssl_ca_cert = ca_file.name
    sts = sts_client if sts_client is not None else sts_client_for(settings)
    refresher = TokenRefresher(settings.cluster_name, lambda: eks_token(settings.cluster_name, sts))
    # The client only consults the hook when a key is already present: sign the first token now.
    refresher(configuration)
    configuration.refresh_api_key_hook = refresher
    return configuration


def kubeconfig_configuration(path: str, *, setting: str = "NODEWRIGHT_KUBECONFIG") -> Configuration:
    """A client configuration from a kubeconfig file (the sandbox, or a user's own API server).

    ``path`` may list several files as KUBECONFIG does (``a:b``). A file that is not a kubeconfig
    (a directory, binary, malformed or list-shaped YAML, a scalar where a mapping belongs) raises
    ``ClusterConfigError`` naming the file, what is wrong and ``setting``, where the path came from.
    """
    from kubernetes import config
    from kubernetes.client import Configuration

    def unusable(why: str) -> ClusterConfigError:
        return ClusterConfigError(
            f"cannot load kubeconfig {path!r}: {why}; point {setting} at a kubeconfig file"
        )

    documents = _read_kubeconfigs(path, unusable)
    configuration = Configuration()
    try:
        config.load_kube_config(config_file=path, client_configuration=configuration, persist_config=False)
        _, context = config.list_kube_config_contexts(config_file=path)
    except config.ConfigException as exc:
        raise unusable(str(exc)) from exc
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        # The client's loader indexes the document as it expects it to be: a value of another
        # shape deeper than _read_kubeconfigs looks (a cluster that is a number) fails there.
        raise unusable(f"malformed: {type(exc).__name__}: {exc}") from exc
    user_name = (context.get("context") or {}).get("user")
    user = next(
        (
            entry.get("user") or {}
            for d in documents
            for entry in d.get("users") or []
            if entry["name"] == user_name
        ),
        {},
    )
    setattr(configuration, IMPERSONATION_ATTRIBUTE, _impersonation(user, unusable))
    return configuration


@dataclass(frozen=True)
class Impersonation:
    """A kubeconfig user's ``as`` and ``as-groups``: the identity every request asks to act as."""

    user: str
    groups: tuple[str, ...] = ()


# Where a Configuration made here carries its kubeconfig's impersonation (the kubernetes client's
# own loader ignores ``as``/``as-groups``; kubectl honours them).
IMPERSONATION_ATTRIBUTE = "nodewright_impersonation"


def _impersonation(
    user: dict[str, Any], unusable: Callable[[str], ClusterConfigError]
) -> Impersonation | None:
    """The user's impersonation as kubectl reads it (clientcmd AuthInfo ``as``, ``as-groups``).

    ``as-uid`` and ``as-user-extra`` are refused rather than dropped: a request sent without them
    would act with another identity than the kubeconfig says.
    """
    name, groups = user.get("as"), user.get("as-groups")
    for unsupported in ("as-uid", "as-user-extra"):
        if user.get(unsupported):
            raise unusable(f"{unsupported} is not supported here; impersonate with as and as-groups only")
    if groups is not None and (not isinstance(groups, list) or not all(isinstance(g, str) for g in groups)):
        raise unusable("as-groups must be a list of strings")
    if not name:
        if groups:
            raise unusable(
                "as-groups without as: a request may only impersonate groups of a user it impersonates"
            )
        return None
    if not isinstance(name, str):
        raise unusable("as must be a user name (a string)")
    return Impersonation(name, tuple(groups or ()))


def impersonation_headers(configuration: Any) -> list[tuple[str, str]]:
    """``Impersonate-User`` and one ``Impersonate-Group`` per group, as kubectl sends them (the
    API server reads each group from its own header); none without impersonation."""
    found = getattr(configuration, IMPERSONATION_ATTRIBUTE, None)
    if not isinstance(found, Impersonation):
        return []
    return [("Impersonate-User", found.user), *(("Impersonate-Group", g) for g in found.groups)]


# Each list of a kubeconfig, and the mapping each of its named entries holds.
KUBECONFIG_LISTS = {"clusters": "cluster", "contexts": "context", "users": "user"}


def _read_kubeconfigs(path: str, unusable: Callable[[str], ClusterConfigError]) -> list[dict[str, Any]]:
    """Each existing file of ``path`` (``os.pathsep``-separated, as KUBECONFIG) parsed and checked
    to have a kubeconfig's shape; missing files of a list are skipped as kubectl skips them."""
    import os

    import yaml

    from nodewright.textfiles import NotUtf8Error, decode_utf8

    names = [os.path.expanduser(p) for p in path.split(os.pathsep) if p]
    existing = [n for n in names if os.path.exists(n)]
    if not existing:
        raise unusable("no such file")
    documents = []
    for name in existing:
        where = "" if len(existing) == 1 else f"{name}: "
        if os.path.isdir(name):
            raise unusable(f"{where}it is a directory")
        try:
            with open(name, "rb") as handle:
                text = decode_utf8(handle.read())
        except OSError as exc:
            raise unusable(f"{where}{exc.strerror or exc}") from exc
        except NotUtf8Error as exc:
            raise unusable(f"{where}{exc}") from exc
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            raise unusable(f"{where}not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from exc
        if document is None:
            raise unusable(f"{where}the file is empty")
        if not isinstance(document, dict):
            raise unusable(
                f"{where}a kubeconfig is a YAML mapping (apiVersion, kind: Config, clusters, users, "
                f"contexts); this file holds a {type(document).__name__}"
            )
        for key, inner in KUBECONFIG_LISTS.items():
            entries = document.get(key) or []
            if not isinstance(entries, list):
                raise unusable(
                    f"{where}{key} must be a list of named entries, not a {type(entries).__name__}"
                )
            for i, entry in enumerate(entries):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise unusable(f"{where}{key}[{i}] must be a mapping with a name")
                if not isinstance(entry.get(inner) or {}, dict):
                    raise unusable(f"{where}{key}[{i}] ({entry['name']}): {inner} must be a mapping")
        documents.append(document)
    return documents
