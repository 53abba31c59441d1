"""The harness the demo and ``bench latency`` share: a started sandbox with the real handlers.

``SandboxRun`` starts a :class:`sandbox.Sandbox` on the seeds' cluster (``my-eks-cluster`` in
us-west-2, as the seeds' selectors and zones name it), points this process's environment at it
as the functions' environment (their restricted Kubernetes identity, moto; each handler signs
its AWS calls as its own role), keeps an administrator's
``Cluster`` for the user's side of a story, and can invoke the real provisioner handler back to
back as EventBridge would (every minute on AWS; here each invocation loops ``INVOCATION_SECONDS``).
``fleet_calls`` records every CreateFleet request (a botocore hook on the provider's own client).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from sandbox.shared_data import REPO_ROOT

SEEDS = REPO_ROOT / "events" / "manifests"
CLUSTER = "my-eks-cluster"  # the seeds' subnet/security-group selectors name this cluster
REGION = "us-west-2"  # the seeds' web-app NodePool pins us-west-2a
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
SEED_NODEPOOLS = ("default", "web-app", "gpu-workload", "batch-jobs")
INVOCATION_SECONDS = 10.0  # each harness invocation loops this long (the real schedule: every minute)


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` set in the process environment (a function reads its settings from there), and
    the environment as it was put back when the block ends: benches run inside test workers."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def quiet_functions(level: str = "WARNING") -> Iterator[None]:
    """The functions' JSON logs and EMF metrics would drown the story: keep ``level`` and above.

    A context manager that puts the environment and the shared logger back when it ends: a bench
    run inside a test worker (``tests/e2e/test_bench_scheduler_stall.py``) left
    ``POWERTOOLS_METRICS_DISABLED`` set, and every later test in that worker that reads a
    function's EMF line failed. The shared logger is made (and its level read) before the environment
    changes: made first inside it, by a function loaded there, it would keep the quiet level for the
    worker's life (a storm bench's setup once did, and a later test's warning line went missing)."""
    from nodewright.observability import logger

    previous = logger().log_level
    logger().setLevel(level)
    try:
        with environment({"POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": level}):
            yield
    finally:
        logger().setLevel(previous)


class WithoutMetricLines(io.TextIOBase):
    """stdout minus EMF metric lines, which would drown the story. The layer's own metrics honour
    ``POWERTOOLS_METRICS_DISABLED`` (``observability.emit_metric``); Powertools' ``single_metric``
    prints even then (3.37), so a library's use of it (a cold-start metric) is kept out too."""

    def __init__(self, out: Any) -> None:
        self.out = out
        self._partial = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            *lines, self._partial = (self._partial + text).split("\n")
            for line in lines:
                if not line.startswith('{"_aws":'):
                    self.out.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()


class SandboxRun:
    """A started sandbox with the real provisioner handler running back to back in a thread.

    Also used by ``bench latency``: ``fleet_calls`` holds (monotonic time, NodeClaim name) of every
    CreateFleet request, taken from a botocore hook on the provider's own EC2 client.
    """

    def __init__(
        self, *, kubeconfig: str | None = None, boot_delay: float = 1.0, quiet: bool = False
    ) -> None:
        self.kubeconfig = kubeconfig
        self.boot_delay = boot_delay
        self.quiet = quiet
        self.started = time.monotonic()
        self.fleet_calls: list[tuple[float, str]] = []
        self.invocations: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reclaims: list[threading.Timer] = []
        self.sandbox: Any = None
        self.cluster: Any = None
        self.settings: Any = None

    def say(self, message: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.started:6.1f}s] {message}", flush=True)

    def __enter__(self) -> SandboxRun:
        from sandbox import Sandbox

        self.say(
            f"starting the sandbox (cluster {CLUSTER}, {REGION}, instances boot in {self.boot_delay:g}s)"
        )
        self.sandbox = Sandbox(
            cluster_name=CLUSTER,
            region=REGION,
            zones=ZONES,
            boot_delay=self.boot_delay,
            kubeconfig=self.kubeconfig,
        ).start()
        os.environ.update(self.sandbox.env())
        crds = self.sandbox.apply_crds()
        where = self.kubeconfig or "the built-in API emulator"
        self.say(
            f"sandbox up in {self.sandbox.startup_seconds:.1f}s; API server: {where}; CRDs: {', '.join(crds)}"
        )
        from nodewright.cloud.provider import CloudProvider
        from nodewright.settings import Settings

        # The provisioner's settings as its container reads them (its role's credentials over this
        # environment: load_function binds the handler to the same), so its Context reuses this
        # provider and the CreateFleet hook below.
        self.settings = Settings.from_env({**os.environ, **self.sandbox.credentials("provisioner")})
        # The story's user acts with the administrator's kubeconfig; the handlers, invoked in this
        # process, connect with the functions' own (restricted) identity from the environment.
        self.cluster = self.sandbox.admin_cluster()
        provider = CloudProvider.shared(self.settings)  # the handler's Context reuses this one
        provider.ec2.meta.events.register("before-parameter-build.ec2.CreateFleet", self._record_fleet)
        return self

    def _record_fleet(self, params: dict[str, Any], **_: Any) -> None:
        tags = {
            t["Key"]: t["Value"] for spec in params.get("TagSpecifications", []) for t in spec.get("Tags", [])
        }
        self.fleet_calls.append((time.monotonic(), tags.get("karpenter.sh/nodeclaim", "")))

    def start_provisioner(self) -> None:
        """Invoke the real handler back to back (each invocation loops INVOCATION_SECONDS)."""
        self._thread = threading.Thread(target=self._invoke_forever, name="provisioner", daemon=True)
        self._thread.start()

    def _invoke_forever(self) -> None:
        from sandbox.runtime.events import scheduled_event
        from sandbox.runtime.lambdas import load_function, provisioner_invocation

        app = load_function("provisioner")
        while not self._stop.is_set():
            try:
                event = scheduled_event(str(len(self.invocations)), REGION)
                with provisioner_invocation(INVOCATION_SECONDS) as context:
                    self.invocations.append(app.handler(event, context))
            except Exception as exc:  # a failed invocation is retried by the next schedule, as in Lambda
                self.say(f"provisioner invocation failed: {exc}")
                time.sleep(1)

    def reclaim_spot_instance(self, instance_id: str, after_seconds: float) -> None:
        """EC2 takes a warned spot instance back when its notice is up, whether or not the product
        drained it first (``sandbox.runtime.stack.SpotMarket`` does the same for ``sandbox up``)."""

        def reclaim() -> None:
            ec2 = self.sandbox.aws_client("ec2")
            try:
                ec2.terminate_instances(InstanceIds=[instance_id])
            except Exception as exc:  # the story ended and took the sandbox with it
                self.say(f"EC2 could not reclaim {instance_id}: {exc}")
            finally:
                ec2.close()

        timer = threading.Timer(after_seconds, reclaim)
        timer.daemon = True
        timer.start()
        self._reclaims.append(timer)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for timer in self._reclaims:
            timer.cancel()
        if self._thread is not None:
            self._thread.join(timeout=INVOCATION_SECONDS + 30)
        from nodewright.cluster import reset_connections

        reset_connections()
        if self.sandbox is not None:
            self.sandbox.stop()

    def wait_for(self, what: str, check: Any, timeout: float = 120.0, on_tick: Any = None) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if on_tick:
                on_tick()
            if check():
                return True
            time.sleep(0.2)
        self.say(f"gave up waiting for {what} after {timeout:.0f}s")
        return False


def claims_of_pods(pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> dict[str, str]:
    """Each bound pod's name → the NodeClaim whose node it is bound to (the claim's
    ``status.nodeName``): which launch gave a pod its capacity, read from the scheduler's binding.
    Not from the ``Nominated`` events: they go out at Karpenter's rate (5/s, burst 10), and one held
    back for a pod that is bound before the next pass is never sent."""
    claim_of_node = {
        node: claim["metadata"]["name"]
        for claim in claims
        if (node := (claim.get("status") or {}).get("nodeName"))
    }
    return {
        pod["metadata"]["name"]: claim_of_node[node]
        for pod in pods
        if (node := (pod.get("spec") or {}).get("nodeName")) in claim_of_node
    }


def seed_objects(story: SandboxRun) -> tuple[list[dict[str, Any]], list[str]]:
    """The seeds' EC2NodeClass and NodePools in v1 form (``nodewright convert``), with the gaps filled."""
    from nodewright.api.convert import convert_document
    from nodewright.api.manifests import load_files

    notes: list[str] = []
    objects: list[dict[str, Any]] = []
    files = [SEEDS / "v1beta1-ec2nodeclass-default.yaml"]
    files += [SEEDS / f"v1beta1-nodepool-{name}.yaml" for name in SEED_NODEPOOLS]
    for loaded in load_files(files):
        for doc in convert_document(loaded.doc).documents:
            if doc.get("kind") == "EC2NodeClass":
                spec = doc.setdefault("spec", {})
                spec.setdefault("role", story.sandbox.aws.node_role_name)
                spec.setdefault("amiSelectorTerms", [{"alias": "al2@latest"}])
                notes.append(
                    "EC2NodeClass default: the seed has neither role nor amiSelectorTerms (v1 needs both); "
                    f"set role={spec['role']} and alias al2@latest (its amiFamily AL2)"
                )
            objects.append(doc)
    return objects, notes


def warm_catalog(story: SandboxRun, nodeclass: dict[str, Any]) -> None:
    """Load the instance catalog once, as a warm Lambda container has it cached (5 minutes).

    moto answers DescribeInstanceTypes in seconds where EC2 takes about one; without this the
    first launch's latency would measure moto, not the provisioner."""
    from nodewright.cloud.provider import CloudProvider

    started = time.monotonic()
    count = len(CloudProvider.shared(story.settings).instance_types(nodeclass))
    took = time.monotonic() - started
    story.say(f"instance catalog loaded: {count} types with prices ({took:.1f}s, once per warm container)")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]
