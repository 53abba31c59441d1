"""The sandbox orchestrator: moto server + Kubernetes API emulator + cluster simulators, in one object.

    with Sandbox(cluster_name="demo") as sb:
        subprocess.run(["kubectl", "--kubeconfig", sb.kubeconfig_path, "get", "nodes"])
        os.environ.update(sb.env())
        load_function("provisioner").handler(event, context)  # as the provisioner's own role

AWS is moto behind IAM enforcement (sandbox.iam): every request a function makes is evaluated
against that function's own policy from the synthesized stack. ``env(function=NAME)`` carries a
function's role credentials; ``sandbox.runtime.lambdas.load_function`` binds each handler it loads to its
own role; the sandbox's own clients (``aws_client``) act as the account's owner.

``kubeconfig=PATH`` runs the same simulators against any API server (the emulator stays off), which
is how the sandbox's faithfulness is checked against a real kube-apiserver.
One Sandbox runs per process at a time: moto's backends (and the fault patch) are process-global.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from sandbox.apiserver import ApiServer
from sandbox.aws import faults as faults_module
from sandbox.aws import fleet_network
from sandbox.aws.prices import SpotHistory
from sandbox.aws.server import (
    ACCOUNT_ID,
    AwsSeed,
    MotoServer,
    aws_client,
    event_source_client,
    preload_moto_ec2,
    seed,
)
from sandbox.iam.enforcement import Enforcement
from sandbox.install import rbac_namespaces
from sandbox.shared_data import REPO_ROOT
from sandbox.simulators import ControllerManager, Kube, Kubelet, Scheduler, api_client_from_kubeconfig
from sandbox.simulators.garbage import GarbageCollector
from sandbox.simulators.kube import group

log = logging.getLogger("sandbox")
CRDS_DIR = REPO_ROOT / "crds"
RBAC_FILE = REPO_ROOT / "deploy" / "rbac.yaml"
# The functions' identity, as EKS maps their role through the access entry of the CDK stack:
# the group is infra/capabilities/cluster_access.py KUBERNETES_GROUP (a test holds them equal),
# the user name EKS's default for an assumed role.
AUTOSCALER_GROUP = "nodewright:autoscaler"
RBAC_PLURALS = {
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Role": "roles",
    "RoleBinding": "rolebindings",
}
AUTOSCALER_USER = "arn:aws:sts::123456789012:assumed-role/nodewright-functions/{{SessionName}}"
_running_lock = threading.Lock()
_running: list[Sandbox] = []  # at most one: moto's backends and the fault patch are process-global
# What warm_catalog fetched, per region, for the process: EC2's catalog is static (moto's answers
# to it are kept for the process too, sandbox.aws.front), so a later sandbox in the same test
# worker reuses the first one's pages instead of parsing 1,395 types again (about 1.5 CPU s).
_warm_catalogs: dict[str, Any] = {}


def running() -> Sandbox | None:
    """The sandbox running in this process, if any (at most one)."""
    with _running_lock:
        return _running[0] if _running else None


class SandboxError(RuntimeError):
    """The sandbox could not start or was used wrongly; the message says what to do."""


NOT_STARTED = "the sandbox is not started; call start() or use it in a with block"


class Sandbox:
    """Everything a cluster is, on 127.0.0.1; start with ``with`` or :meth:`start`, end with :meth:`stop`."""

    def __init__(
        self,
        cluster_name: str = "demo",
        *,
        region: str = "us-east-1",
        zones: tuple[str, ...] = ("us-east-1a", "us-east-1b", "us-east-1c"),
        boot_delay: float = 1.0,
        kubeconfig: str | Path | None = None,
        init_delay: float = 0.5,
        simulators: bool = True,
        state_dir: str | Path | None = None,
    ) -> None:
        if not zones or any(not z.startswith(region) for z in zones):
            raise SandboxError(f"zones {zones!r} must be zones of region {region!r}, e.g. {region}a")
        self.cluster_name = cluster_name
        self.region = region
        self.zones = tuple(zones)
        self.boot_delay = boot_delay
        self.init_delay = init_delay
        self.run_simulators = simulators
        self._external_kubeconfig = Path(kubeconfig) if kubeconfig else None
        self._state_dir = Path(state_dir) if state_dir else None
        self.faults = faults_module.FaultInjector()
        # The API server's answers to the functions' identity (the simulators are never faulted).
        self.api_faults = faults_module.ApiServerFaults()
        self.aws: AwsSeed | None = None
        self.aws_endpoint = ""
        self.kubeconfig_path = Path()  # the administrator's (kubectl, tests, simulators)
        self.functions_kubeconfig_path = Path()  # the functions' identity, held to deploy/rbac.yaml
        self.apiserver: Any = None
        self.loops: list[Any] = []
        self.startup_seconds = 0.0
        self._moto: MotoServer | None = None
        self._tmp: Path | None = None
        self._api_clients: list[Any] = []
        self._ec2: Any = None
        self.iam = Enforcement(cluster_name, region, ACCOUNT_ID)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> Sandbox:
        with _running_lock:
            if _running:
                raise SandboxError(
                    "a Sandbox is already running in this process; stop it first (moto is process-global)"
                )
            _running.append(self)
        began = time.monotonic()
        try:
            # The API server (its TLS key) starts while moto seeds: they overlap on I/O. Every import is
            # done by now: two threads importing the same modules at once see half-initialised modules.
            kubernetes_error: list[BaseException] = []
            kubernetes = threading.Thread(target=self._start_kubernetes_capturing, args=(kubernetes_error,))
            kubernetes.start()
            try:
                self._start_aws()
            finally:
                kubernetes.join()
            if kubernetes_error:
                raise kubernetes_error[0]
            self.apply_rbac()
            if self.run_simulators:
                self._start_simulators()
            else:
                self._start_service_accounts()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("sandbox %s up in %.2fs", self.cluster_name, self.startup_seconds)
        return self

    def _start_aws(self) -> None:
        preload_moto_ec2()
        self.iam.start()
        self._moto = MotoServer(enforcement=self.iam)
        self.aws_endpoint = self._moto.start()
        self._moto.reset()  # a clean account even if an earlier run in this process left state behind
        fleet_network.install()
        faults_module.install(self.faults)
        SpotHistory.install()
        self.aws = seed(
            self.aws_endpoint, self.cluster_name, self.region, self.zones, self.iam.node_role_name
        )
        self.iam.learn(self.env())  # the table, queue and node role the functions' variables name

    def _start_kubernetes_capturing(self, errors: list[BaseException]) -> None:
        try:
            self._start_kubernetes()
        except BaseException as exc:
            errors.append(exc)

    def _start_kubernetes(self) -> None:
        if self._state_dir is not None:
            if (self._state_dir / "sandbox.json").exists():
                raise SandboxError(
                    f"{self._state_dir} belongs to a running sandbox (or one that was killed): stop it, "
                    "or remove the folder if it is gone"
                )
            self._state_dir.mkdir(parents=True, exist_ok=True)
            self._tmp = self._state_dir
        else:
            self._tmp = Path(tempfile.mkdtemp(prefix=f"nodewright-sandbox-{self.cluster_name}-"))
        if self._external_kubeconfig is not None:
            from nodewright.cluster import ClusterConfigError, auth

            try:  # the layer's own check: a directory, binary or malformed YAML is named, not a traceback
                auth.kubeconfig_configuration(str(self._external_kubeconfig), setting="--kubeconfig")
            except ClusterConfigError as exc:
                raise SandboxError(str(exc)) from exc
            if not self._external_kubeconfig.is_file():
                raise SandboxError(
                    f"kubeconfig {self._external_kubeconfig} does not exist; pass an existing file"
                )
            # Against another API server the functions act as deploy/rbac.yaml's identity too: the
            # kubeconfig's credentials impersonating it, so that server checks their permissions.
            self.kubeconfig_path = self._external_kubeconfig
            self.functions_kubeconfig_path = impersonating_kubeconfig(
                self._external_kubeconfig,
                self._tmp / "functions-kubeconfig",
                AUTOSCALER_USER,
                AUTOSCALER_GROUP,
            )
            return
        try:  # a NODEWRIGHT_SANDBOX_API_CONCURRENCY that is not a positive integer: named, no traceback
            self.apiserver = ApiServer(host="127.0.0.1", port=0)
        except ValueError as exc:
            raise SandboxError(str(exc)) from exc
        self.apiserver.faults = self.api_faults
        self.apiserver.start()
        self.kubeconfig_path = Path(self.apiserver.write_kubeconfig(self._tmp / "kubeconfig"))
        token = self.apiserver.add_identity(AUTOSCALER_USER, (AUTOSCALER_GROUP,))
        self.api_faults.target_tokens = {token}
        self.functions_kubeconfig_path = Path(
            self.apiserver.write_kubeconfig(self._tmp / "functions-kubeconfig", token=token)
        )

    def _start_simulators(self) -> None:
        self._ec2 = aws_client("ec2", self.aws_endpoint, self.region)
        kubelet = Kubelet(
            Kube(self.api_client()),
            self._ec2,
            self.cluster_name,
            self.region,
            boot_delay=self.boot_delay,
            init_delay=self.init_delay,
        )
        self.scheduler = Scheduler(Kube(self.api_client()))
        self.kubelet = kubelet
        self.controllers = ControllerManager(Kube(self.api_client()))
        self.garbage_collector = GarbageCollector(Kube(self.api_client()), resync=2.0)
        self.loops = [self.scheduler, *kubelet.loops, self.controllers, self.garbage_collector]
        for loop in self.loops:
            loop.start()
        # Up means pods can be admitted: each namespace has its default ServiceAccount.
        if not self.controllers.wait_synced():
            raise SandboxError(
                f"no default ServiceAccounts from the controllers: {self.controllers.last_error}"
            )

    def _start_service_accounts(self) -> None:
        """Without the simulators, still kube-controller-manager's serviceaccounts controller: it
        runs beside every kube-apiserver, and without it no pod is admitted anywhere."""
        from sandbox.simulators import ServiceAccounts

        accounts = ServiceAccounts(Kube(self.api_client()))
        self.loops = [accounts]
        accounts.start()
        if not accounts.synced.wait(60):
            raise SandboxError(f"no default ServiceAccounts: {accounts.last_error}")

    def stop(self) -> None:
        """Stop everything this sandbox started; safe to call twice."""
        for loop in self.loops:
            loop.signal_stop()
        for loop in self.loops:
            loop.stop()
        self.loops = []
        for api_client in self._api_clients:
            with contextlib.suppress(Exception):
                api_client.close()
        self._api_clients = []
        if self._ec2 is not None:
            self._ec2.close()
            self._ec2 = None
        if self.apiserver is not None:
            self.apiserver.stop()
            self.apiserver = None
        if self._moto is not None:
            if self.aws_endpoint:
                self._moto.reset()
            self._moto.stop()
            self._moto = None
        self.iam.stop()
        if self.aws_endpoint:  # _start_aws got as far as the patches
            faults_module.uninstall(self.faults)
            fleet_network.uninstall()
            SpotHistory.uninstall()
            self.aws_endpoint = ""
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        with _running_lock:
            if self in _running:
                _running.remove(self)

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- what callers use ------------------------------------------------------------------

    def stop_aws(self) -> None:
        """Stop the moto server (its state stays: moto's backends live in this process), as an AWS
        endpoint outage; :meth:`start_aws` brings it back on the same port."""
        if self._moto is not None:
            self._moto.stop()
            self._moto = None

    def start_aws(self) -> None:
        if self._moto is None:
            port = int(self.aws_endpoint.rsplit(":", 1)[1])
            self._moto = MotoServer(port=port, enforcement=self.iam)
            self._moto.start()

    def env(self, function: str | None = None) -> dict[str, str]:
        """Environment for running the real functions (and kubectl) against this sandbox; with a
        ``function``, also its role's credentials (what Lambda sets). Without one it carries no AWS
        credentials: a handler run in this process signs as its own role (``load_function``), and
        an AWS call made with no function's keys is refused as AWS refuses an unknown key."""
        if self.aws is None:
            raise SandboxError(NOT_STARTED)
        return {
            "CLUSTER_NAME": self.cluster_name,
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.aws_endpoint,
            **(self.credentials(function) if function else {}),
            "AWS_EC2_METADATA_DISABLED": "true",
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
            "NODEWRIGHT_KUBECONFIG": str(self.functions_kubeconfig_path),
            "KUBECONFIG": str(self.kubeconfig_path),
            "STATE_TABLE": self.aws.state_table,
            "NODE_ROLE": self.aws.node_role_name,
            "INTERRUPTION_QUEUE_URL": self.aws.interruption_queue_url,
        }

    def credentials(self, function: str) -> dict[str, str]:
        """``function``'s role credentials as Lambda sets them (AWS_ACCESS_KEY_ID, ...)."""
        return self.iam.credentials(function)

    @staticmethod
    def owner_credentials() -> dict[str, str]:
        """The sandbox's own identity, the account's owner, as environment variables: for the
        sandbox's own looks through the layer's code (never for a function)."""
        from sandbox.iam.policies import ADMINISTRATOR_KEY, ADMINISTRATOR_SECRET

        return {"AWS_ACCESS_KEY_ID": ADMINISTRATOR_KEY, "AWS_SECRET_ACCESS_KEY": ADMINISTRATOR_SECRET}

    @property
    def seeded(self) -> AwsSeed:
        """The AWS account :meth:`start` seeded (its node role, queues, images, subnets)."""
        if self.aws is None:
            raise SandboxError(NOT_STARTED)
        return self.aws

    @property
    def state_dir(self) -> Path:
        """The folder of this sandbox's kubeconfigs and the functions' logs (removed at stop)."""
        if self._tmp is None:
            raise SandboxError(NOT_STARTED)
        return self._tmp

    def api_client(self) -> Any:
        """A kubernetes ``ApiClient`` on this sandbox's kubeconfig (closed when the sandbox stops)."""
        api_client = api_client_from_kubeconfig(self.kubeconfig_path)
        self._api_clients.append(api_client)
        return api_client

    def warm_catalog(self) -> None:
        """Put this sandbox's EC2 catalog in this process's catalog cache, as a warm Lambda container
        has it (5 minutes). Fetched once per process, through the production path
        (DescribeInstanceTypes and DescribeInstanceTypeOfferings on moto): moto answers in several
        seconds where EC2 takes about one, which would otherwise eat the budget of a short
        invocation under test."""
        from nodewright.cloud.catalog import fetch_catalog, prime_catalog

        if self.region not in _warm_catalogs:
            ec2 = self.aws_client("ec2")
            try:
                _warm_catalogs[self.region] = fetch_catalog(ec2)
            finally:
                ec2.close()
        prime_catalog((self.region, self.aws_endpoint), _warm_catalogs[self.region])

    def admin_cluster(self) -> Any:
        """The layer's ``Cluster`` with the administrator's kubeconfig (the user's side of a scenario)."""
        from nodewright.cluster import Cluster

        return Cluster(self.api_client())

    def aws_client(self, service: str) -> Any:
        """A boto3 client for the moto server (the caller closes it)."""
        return aws_client(service, self.aws_endpoint, self.region)

    def event_source_client(self) -> Any:
        """EventBridge as AWS's own services put on it: each event once (``event_source_client``)."""
        return event_source_client(self.aws_endpoint, self.region)

    def apply_rbac(self, path: Path = RBAC_FILE) -> list[str]:
        """Apply ``deploy/rbac.yaml`` as it is; see :func:`apply_rbac`."""
        return apply_rbac(Kube(self.api_client()), path)

    def apply_crds(self, directory: Path = CRDS_DIR, timeout: float = 10.0) -> list[str]:
        """Create or update every CRD in ``directory`` and wait until the API server serves it.

        A malformed file is reported in the log and skipped; the others are still applied.
        """
        kube = Kube(self.api_client())
        path = group("apiextensions.k8s.io/v1", "customresourcedefinitions")
        applied: list[dict[str, Any]] = []
        for file in sorted(directory.glob("*.yaml")):
            try:
                documents = [d for d in yaml.safe_load_all(file.read_text()) if d]
            except yaml.YAMLError as exc:
                log.error("skipping %s: not valid YAML (%s)", file, exc)
                continue
            for document in documents:
                crd = document
                if crd.get("kind") != "CustomResourceDefinition":
                    log.error(
                        "skipping a %s in %s: only CustomResourceDefinitions belong in crds/",
                        crd.get("kind"),
                        file,
                    )
                    continue
                try:
                    kube.create(path, crd)
                except ApiException as exc:
                    if exc.status != 409:
                        log.error(
                            "CRD %s from %s rejected: %s %s",
                            crd["metadata"]["name"],
                            file,
                            exc.status,
                            exc.body,
                        )
                        continue
                    current = kube.get(f"{path}/{crd['metadata']['name']}")
                    crd = {
                        **crd,
                        "metadata": {
                            **crd["metadata"],
                            "resourceVersion": current["metadata"]["resourceVersion"],
                        },
                    }
                    kube.replace(f"{path}/{crd['metadata']['name']}", crd)
                applied.append(crd)
        self._wait_served(kube, applied, timeout)
        return [crd["metadata"]["name"] for crd in applied]

    def _wait_served(self, kube: Any, crds: list[dict[str, Any]], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for crd in crds:
            spec = crd["spec"]
            version = next(v["name"] for v in spec["versions"] if v.get("served", True))
            while True:
                try:
                    resources = kube.get(f"/apis/{spec['group']}/{version}").get("resources") or []
                    if any(r.get("name") == spec["names"]["plural"] for r in resources):
                        break
                except ApiException:
                    pass
                if time.monotonic() > deadline:
                    raise SandboxError(f"CRD {crd['metadata']['name']} not served after {timeout:.0f}s")
                time.sleep(0.05)


# A kubeconfig's fields that name files, relative to the kubeconfig's own folder.
_KUBECONFIG_FILES = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def impersonating_kubeconfig(source: Path, target: Path, user: str, group: str) -> Path:
    """A copy of ``source`` whose current context's user impersonates ``user`` in ``group``
    (``as``/``as-groups``, which kubectl and the layer's client honour); relative file paths are
    made absolute, since the copy lives elsewhere."""
    config = yaml.safe_load(source.read_text())
    context_name = config.get("current-context")
    context = next(c["context"] for c in config.get("contexts") or [] if c["name"] == context_name)
    for kind, fields in _KUBECONFIG_FILES.items():
        for entry in config.get(f"{kind}s") or []:
            values = entry.get(kind) or {}
            for field in fields:
                if values.get(field) and not Path(values[field]).is_absolute():
                    values[field] = str((source.parent / values[field]).resolve())
    for entry in config.get("users") or []:
        if entry["name"] == context["user"]:
            entry["user"] = {**(entry.get("user") or {}), "as": user, "as-groups": [group]}
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    target.chmod(0o600)
    return target


def apply_rbac(kube: Kube, path: Path = RBAC_FILE) -> list[str]:
    """Apply an RBAC manifest as it is (as ``kubectl apply -f`` would), creating every namespace it
    names first; returns ``Kind/name`` of what was applied."""
    documents = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") != "Namespace"]
    applied = []
    declared = {n["metadata"]["name"]: n for n in rbac_namespaces(path)}
    named = {ns for d in documents if (ns := (d.get("metadata") or {}).get("namespace")) is not None}
    for namespace in sorted(set(declared) | named):
        if kube.get_or_none(f"/api/v1/namespaces/{namespace}") is None:
            kube.create("/api/v1/namespaces", declared.get(namespace) or {"metadata": {"name": namespace}})
        if namespace in declared:
            applied.append(f"Namespace/{namespace}")
    for document in documents:
        kind, meta = document["kind"], document["metadata"]
        plural = RBAC_PLURALS[kind]
        collection = group(document["apiVersion"], plural, meta.get("namespace"))
        current = kube.get_or_none(f"{collection}/{meta['name']}")
        if current is None:
            kube.create(collection, document)
        else:
            body = {
                **document,
                "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            kube.replace(f"{collection}/{meta['name']}", body)
        applied.append(f"{kind}/{meta['name']}")
    return applied
