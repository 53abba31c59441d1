"""The product running as AWS runs it, against a started :class:`sandbox.Sandbox`.

* Each function runs in its own **worker**: a child process with the function's own environment
  (what the CDK stack sets, plus the sandbox's endpoints and the functions' RBAC identity) that
  imports ``functions/<name>/app.py`` once and then serves invocations one at a time, as a warm
  Lambda container does. A container is forked from a server that has made the libraries' imports
  and waits out their time in its Init phase (``preload.py`` says why). Its stdout/stderr (the
  Powertools JSON logs and EMF metrics) go to ``<logs>/<function>.log``, its CloudWatch log group. A
  handler that raises is logged and the container is kept; one that outlives its timeout is killed
  ("Task timed out") and the next invocation starts a fresh container; between invocations it is
  frozen (SIGSTOP), threads and all, as Lambda freezes an execution environment; one whose memory
  passes the function's memory size is killed as Lambda kills it ("Runtime exited with error:
  signal: killed", ``Runtime.OutOfMemory`` in its log); a crashed container is replaced on the next
  trigger.
* **Triggers**, one object each (``start``/``stop``), as the stack wires them (nodewright/spec/deployment.py):
  the EventBridge schedules (provisioner and disruption every minute, pricing every 12 hours; a
  tick while the previous invocation still runs is throttled, as reserved concurrency 1 does);
  the SQS event source mapping of the interruption queue (batches of up to 10, partial batch
  failures: only the failed records go back, after the visibility timeout; scaled out as Lambda
  scales it, each batch in a container of its own, up to the stack's maximum concurrency); the
  direct EventBridge rule to ``spot_events`` (asynchronous invocation with 2 retries and a
  2-minute maximum event age, up to its reserved concurrency at once). The EventBridge rules
  live in moto, which matches their patterns.
* EC2's **instance state-change notifications** (``state_changes=True``): one on the default bus
  for each of the cluster's instances that begins stopping or terminating, as EC2 sends them.
* The **spot market**: an instance that got a spot interruption warning through
  ``nodewright sandbox interrupt`` (tag ``sandbox:reclaim-at``) is terminated when its two
  minutes are up, as EC2 does, whether or not the product drained it first.

* The **wake-up** (sandbox/runtime/wakeup.py), when the ``webhook`` function runs: its function URL on
  127.0.0.1 (HTTPS), Lambda's Invoke API for the provisioner's ``wakeup`` alias, the secret, and the
  ValidatingWebhookConfiguration registered with the emulator, which calls it as kube-apiserver
  would when a pod becomes unschedulable.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodewright.spec import deployment

from sandbox.aws.server import aws_client, event_source_client
from sandbox.runtime import events

RECLAIM_TAG = "sandbox:reclaim-at"  # epoch seconds at which the spot market takes the instance back
# Lambda's Init phase (imports, the handler module's top level) has 10 s of its own on a cold start:
# https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtime-environment.html
INIT_SECONDS = 10
# Its Shutdown phase: the runtime has 500 ms to exit (no extensions) before SIGKILL.
SHUTDOWN_SECONDS = 0.5
# How often a container looks at its peak memory (VmHWM: a spike between two looks still counts).
MEMORY_CHECK_SECONDS = 0.05
# Lambda's SQS event source mapping on a standard queue (AWS Lambda developer guide, "Configuring
# scaling behavior for SQS event source mappings"): five batches at once when messages appear, then
# up to 300 more concurrent batches a minute while messages remain, never past the stack's maximum.
SQS_INITIAL_BATCHES = 5
SQS_SCALE_UP_PER_MINUTE = 300
# The worker's own environment: what a Lambda container has besides the function's variables.
INHERITED = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "NODEWRIGHT_SHARED_DATA",
)


@dataclass
class Invocation:
    function: str
    ok: bool
    seconds: float
    result: Any = None
    error: str = ""
    started: float = 0.0  # time.monotonic() when the container took it
    # Where its time went (the storm bench's stages): when the trigger handed it over (epoch
    # seconds), whether it started a container, and when the handler was given the event (the
    # container's Init phase over).
    taken_at: float = 0.0
    cold: bool = False
    handler_at: float = 0.0
    event: Any = None


def _peak_memory_mb() -> float:
    """This process's peak resident memory (VmHWM), MiB: what Lambda reports as Max Memory Used."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _enforce_memory(memory_mb: int) -> None:
    """Lambda's memory size is a hard limit: a container past it is killed, mid-invocation or in
    its Init phase, with ``Runtime.OutOfMemory`` in its log. Without this the sandbox let a function
    use what the machine had."""

    def watch() -> None:
        while True:
            used = _peak_memory_mb()
            if used > memory_mb:
                print(
                    f"Runtime.OutOfMemory: Runtime exited with error: signal: killed"
                    f" (Max Memory Used: {used:.0f} MB of {memory_mb} MB)",
                    file=sys.stderr,
                    flush=True,
                )
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(MEMORY_CHECK_SECONDS)

    threading.Thread(target=watch, name="lambda-memory-limit", daemon=True).start()


def _containers() -> Any:
    """Where containers come from: a fork server that has made the imports every container makes
    (``sandbox/runtime/preload.py`` says why and what stays as on AWS). Set on every start, as the
    fork server reads the list when it starts (the first container of the process)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["sandbox.runtime.preload"])
    return context


def _wait_out_the_imports_a_fork_skipped() -> None:
    """A container forked with the imports made keeps the Init phase they would have taken it."""
    preload = sys.modules.get("sandbox.runtime.preload")
    if preload is not None:
        time.sleep(preload.IMPORT_SECONDS)


def _worker_main(
    name: str,
    function_name: str,
    env: dict[str, str],
    log_path: str,
    conn: Any,
    *app_path: str,
    memory_mb: int,
) -> None:
    """A Lambda container: the function's environment, memory size and log file, app.py imported once."""
    os.environ.clear()
    os.environ.update(env)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's own stdout)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    _enforce_memory(memory_mb)
    from sandbox.runtime.lambdas import LambdaContext, load_function

    _wait_out_the_imports_a_fork_skipped()
    app = load_function(name, app_path[0] if app_path else None)
    conn.send(("ready", None))  # the Init phase is over
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        event, seconds, memory_mb = message
        context = LambdaContext(seconds, function_name)
        context.memory_limit_in_mb = memory_mb
        try:
            conn.send(("ok", app.handler(event, context)))
        except Exception as exc:  # Lambda logs the error and keeps the container
            traceback.print_exc()
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Worker:
    """One function's container; ``invoke`` runs one invocation at a time."""

    def __init__(
        self,
        spec: deployment.FunctionSpec,
        env: dict[str, str],
        log_path: Path,
        function_name: str,
        app_path: Path | None = None,
    ) -> None:
        self.spec = spec
        self.app_path = app_path
        self.env = env
        self.log_path = log_path
        self.function_name = function_name
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Any = None
        self.cold_starts = 0
        self._deleted = False  # the function deleted with its stack: nothing starts a container again
        # Told (when taken, cold or not, when the handler got it, the event) as each invocation's
        # handler starts: the storm bench's stages, known before a two-minute invocation ends.
        self.on_handler: Callable[[float, bool, float, Any], None] | None = None

    @property
    def busy(self) -> bool:
        return self._lock.locked()

    def _start(self) -> None:
        context = _containers()
        parent, child = context.Pipe()
        process = context.Process(
            target=_worker_main,
            args=(
                self.spec.name,
                self.function_name,
                self.env,
                str(self.log_path),
                child,
                *([str(self.app_path)] if self.app_path else []),
            ),
            kwargs={"memory_mb": self.spec.memory_mb},
            name=f"lambda-{self.spec.name}",
            daemon=True,
        )
        process.start()
        child.close()
        # Only a started container is this worker's: a shutdown that comes during the spawn (Ctrl-C,
        # a test's runtime.stop()) joins or kills what it finds, and joining a Process whose start()
        # has not returned fails ("can only join a started process", seen in the stack removal e2e).
        self._process, self._conn = process, parent
        self.cold_starts += 1

    def _discard(self) -> None:
        # stop() and a throttled-then-failed invocation may both discard: work on this one's objects.
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is not None:
            with contextlib.suppress(Exception):
                conn.close()
            if process.is_alive():
                process.kill()
            process.join(timeout=5)

    @staticmethod
    def _initialized(conn: Any, timeout: float) -> float:
        """Wait out a cold start's Init phase; the seconds the invocation has left. Lambda gives the
        Init phase up to ``INIT_SECONDS`` of its own; past that it retries the init inside the
        invocation, where it counts against the function's timeout."""
        if conn.poll(INIT_SECONDS):
            conn.recv()
            return float(timeout)
        late = time.monotonic()
        if not conn.poll(timeout):
            return 0.0
        conn.recv()
        return timeout - (time.monotonic() - late)

    def invoke(self, event: dict[str, Any], *, blocking: bool = True) -> Invocation | None:
        """Run one invocation (None when ``blocking`` is false and the container is busy: throttled)."""
        if not self._lock.acquire(blocking=blocking):
            return None
        started, taken_at = time.monotonic(), time.time()
        handler_at = 0.0
        try:
            if self._deleted:  # a trigger still delivering when the runtime stopped: Lambda refuses it
                return Invocation(self.spec.name, False, 0.0, error="Function not found", started=started)
            cold = self._process is None or not self._process.is_alive()
            if cold:
                self._discard()
                self._start()
            timeout = self.spec.timeout_seconds
            conn = self._conn  # stop() may discard the container meanwhile: keep this one's pipe
            payload: Any  # the handler's result ("ok") or its error's text ("error")
            try:
                if conn is None:  # stop() abandoned the invocation before it reached its container
                    raise EOFError
                budget = self._initialized(conn, timeout) if cold else float(timeout)
                if budget > 0:
                    handler_at = time.time()
                    if self.on_handler is not None:
                        self.on_handler(taken_at, cold, handler_at, event)
                    if not cold:
                        self._signal(signal.SIGCONT)  # thawed for this invocation
                    conn.send((event, budget, self.spec.memory_mb))
                    answered = conn.poll(budget + 2)  # a little slack for the pipe on a loaded machine
                    status, payload = conn.recv() if answered else ("timeout", None)
                    if status in {"ok", "error"}:
                        self._signal(signal.SIGSTOP)  # frozen until the next one
                else:
                    status, payload = "timeout", None
            except (EOFError, OSError):  # the container crashed (or the sandbox is stopping)
                process = self._process
                if process is not None:
                    process.join(timeout=0.2)  # a container that died: reaped, its exit code known
                self._discard()
                killed = process is not None and process.exitcode == -signal.SIGKILL
                status = "crashed"
                payload = (
                    "Runtime exited with error: signal: killed"
                    if killed
                    else "Runtime exited without providing a reason"
                )
            if status == "timeout":
                self._discard()
                payload = f"Task timed out after {timeout} seconds"
            return Invocation(
                self.spec.name,
                status == "ok",
                time.monotonic() - started,
                result=payload if status == "ok" else None,
                error="" if status == "ok" else str(payload),
                started=started,
                taken_at=taken_at,
                cold=cold,
                handler_at=handler_at,
                event=event,
            )
        finally:
            self._lock.release()

    def _signal(self, sent: signal.Signals) -> None:
        """Freeze (SIGSTOP) or thaw (SIGCONT) the container, as Lambda freezes an execution
        environment between invocations: the threads a handler left running (a pool, a renewal, a
        watch) stop with it, and a flow that counted on them between invocations fails here as it
        would in an account."""
        process = self._process
        if process is not None and process.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sent)

    def stop(self) -> None:
        self.shut_down()
        self.finish_shutdown(time.monotonic() + SHUTDOWN_SECONDS)

    def delete(self) -> None:
        """The function deleted (the runtime stopping): its containers shut down and none starts
        again. Without this a trigger whose invocation the shutdown abandoned took the next event
        it held and cold-started a container for it, and the runtime's stop waited out that whole
        invocation (a provisioner's: about 50 s, seen in the stack removal e2e's setup)."""
        self._deleted = True
        self.shut_down()

    def shut_down(self) -> None:
        """Lambda's Shutdown phase, begun: an idle container is asked to exit; a busy one is killed
        and its invocation abandoned, as Lambda abandons one when its environment goes (so Ctrl-C
        never waits out an invocation: the provisioner's runs for most of a minute)."""
        if self.busy:
            self._discard()
        elif self._conn is not None:
            self._signal(signal.SIGCONT)  # thawed to be told, as Lambda's Shutdown event is
            with contextlib.suppress(Exception):
                self._conn.send(None)

    def finish_shutdown(self, deadline: float) -> None:
        """Past ``deadline`` the container is killed, as Lambda sends SIGKILL after the grace."""
        process = self._process
        if process is not None:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        self._discard()


class Trigger:
    """Something that invokes functions: started with the runtime, stopped with it."""

    def start(self, runtime: Runtime) -> None:
        raise NotImplementedError

    def halt(self) -> None:
        """Take no more work (the runtime stopping); ``stop`` then ends what is left."""

    def stop(self) -> None:
        raise NotImplementedError


class _Loop(Trigger):
    """A trigger that runs ``tick`` in a thread until stopped."""

    name = "trigger"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runtime: Runtime | None = None

    def start(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # a trigger never dies of one bad tick (moto busy, a race at stop)
                if not self._stop.is_set() and self.runtime is not None:
                    self.runtime.say("sandbox", f"{self.name}: {type(exc).__name__}: {exc}")
                self._stop.wait(1)

    def tick(self) -> None:
        raise NotImplementedError

    def halt(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


class Schedule(_Loop):
    """An EventBridge schedule rule. The stack has been deployed all along: the every-minute schedules
    tick at start; a longer one (pricing, 12 h) had its last run when the sandbox seeded its prices."""

    def __init__(self, function: str, every_seconds: float) -> None:
        super().__init__()
        self.function = function
        self.every = every_seconds
        self.name = f"schedule-{function}"

    def _run(self) -> None:
        if self.every > 60 and self._stop.wait(self.every):
            return
        super()._run()

    def tick(self) -> None:
        assert self.runtime is not None
        runtime = self.runtime
        rule = f"nodewright-{runtime.cluster_name}-{self.function}-schedule"
        event = events.scheduled_event(region=runtime.region, rule=rule)
        threading.Thread(target=runtime.invoke_async, args=(self.function, event), daemon=True).start()
        self._stop.wait(self.every)


class _Pollers(Trigger):
    """Pollers that each take work and run it in a container of their own: Lambda's concurrency.

    Poller 0 uses the function's first container (``Runtime.worker``); each further one starts a
    container of its own (``Runtime.container``), cold, as Lambda does when it scales out. ``scale``
    adds pollers up to ``limit``."""

    name = "pollers"
    function = ""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.runtime: Runtime | None = None
        self.busy: set[int] = set()  # pollers whose last look found work

    @property
    def limit(self) -> int:
        raise NotImplementedError

    def start(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.scale(1)

    def scale(self, count: int) -> int:
        """Grow to ``count`` pollers (at most ``limit``); how many there are."""
        with self._lock:
            while len(self._threads) < min(count, self.limit) and not self._stop.is_set():
                index = len(self._threads)
                thread = threading.Thread(
                    target=self._run, args=(index,), name=f"{self.name}-{index}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            return len(self._threads)

    def _run(self, index: int) -> None:
        assert self.runtime is not None
        worker = self.runtime.container(self.function, index)
        while not self._stop.is_set():
            try:
                self.poll(worker, lambda found: self._found(index, found))
            except Exception as exc:  # a poller never dies of one bad look (moto busy, a race at stop)
                self._found(index, False)
                if not self._stop.is_set():
                    self.runtime.say("sandbox", f"{self.name}: {type(exc).__name__}: {exc}")
                self._stop.wait(1)

    def _found(self, index: int, found: bool) -> None:
        with self._lock:
            (self.busy.add if found else self.busy.discard)(index)

    def poll(self, worker: Worker, found: Callable[[bool], None]) -> None:
        """Take work and run it in ``worker``; say ``found(True)`` as soon as there is some (the
        poller is busy from then on), ``found(False)`` when a look finds none."""
        raise NotImplementedError

    def halt(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(timeout=30)


class QueueSource(_Pollers):
    """The interruption queue's event source mapping: batches of 10, ReportBatchItemFailures, scaled
    as Lambda scales it (``SQS_INITIAL_BATCHES`` batches at once when messages appear, then
    ``SQS_SCALE_UP_PER_MINUTE`` more a minute while every poller finds messages, up to the stack's
    ``INTERRUPTION_MAX_CONCURRENCY``): each batch in a container of its own."""

    name = "sqs-interruption"
    function = "interruption"

    @property
    def limit(self) -> int:
        return deployment.INTERRUPTION_MAX_CONCURRENCY

    def start(self, runtime: Runtime) -> None:
        super().start(runtime)
        threading.Thread(target=self._scaler, name=f"{self.name}-scaler", daemon=True).start()

    def _scaler(self) -> None:
        """Five batches at once as soon as messages appear; then, each second every poller finds
        work, 300/60 more; back to one poller's worth of scaling when the queue is empty."""
        step = max(1, SQS_SCALE_UP_PER_MINUTE // 60)
        while not self._stop.wait(1.0):
            with self._lock:
                count, busy = len(self._threads), len(self.busy)
            if busy and count < SQS_INITIAL_BATCHES:
                self.scale(SQS_INITIAL_BATCHES)
            elif busy >= count:
                self.scale(count + step)

    def poll(self, worker: Worker, found: Callable[[bool], None]) -> None:
        assert self.runtime is not None
        runtime = self.runtime
        url = runtime.sandbox.aws.interruption_queue_url
        got = runtime.poller.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=deployment.QUEUE_BATCH_SIZE,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
        ).get("Messages", [])
        found(bool(got))
        if not got:
            return
        arn = events.queue_arn(url, runtime.region)
        records = [
            events.sqs_record(
                m["Body"],
                source_arn=arn,
                region=runtime.region,
                message_id=m["MessageId"],
                receipt_handle=m["ReceiptHandle"],
                receive_count=int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
                sent_ms=int(m.get("Attributes", {}).get("SentTimestamp", time.time() * 1000)),
            )
            for m in got
        ]
        done = runtime.invoke_in(worker, events.sqs_event(records))
        if not done.ok:
            return  # the whole batch becomes visible again after the visibility timeout
        failed = {f.get("itemIdentifier") for f in (done.result or {}).get("batchItemFailures", [])}
        finished = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(got)
            if m["MessageId"] not in failed
        ]
        if finished:
            runtime.poller.delete_message_batch(QueueUrl=url, Entries=finished)
        if failed:
            runtime.say(
                "interruption",
                f"{len(failed)} message(s) back to the queue (retried after the visibility timeout)",
            )


class DirectRoute(_Pollers):
    """The direct EventBridge rule to ``spot_events``: asynchronous invocation, 2 retries, 2 minutes,
    at most the function's reserved concurrency (``deployment.SPOT_EVENTS_CONCURRENCY``) at once, one
    event per invocation; Lambda's own event queue holds the rest (here: the direct queue)."""

    name = "eventbridge-spot-events"
    function = "spot_events"

    @property
    def limit(self) -> int:
        return deployment.SPOT_EVENTS_CONCURRENCY

    def start(self, runtime: Runtime) -> None:
        super().start(runtime)
        self.scale(self.limit)  # asynchronous invocations scale out at once (1,000 per 10 s)

    def poll(self, worker: Worker, found: Callable[[bool], None]) -> None:
        assert self.runtime is not None
        runtime = self.runtime
        url = runtime.sandbox.aws.direct_queue_url
        got = runtime.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=1,
            WaitTimeSeconds=1,
            AttributeNames=["All"],
            VisibilityTimeout=60,
        ).get("Messages", [])
        found(bool(got))
        for message in got:
            attempts = int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
            age = time.time() - int(message.get("Attributes", {}).get("SentTimestamp", "0")) / 1000
            event = json.loads(message["Body"])
            done = runtime.invoke_in(worker, event)
            if (
                done.ok
                or attempts > deployment.DIRECT_RETRY_ATTEMPTS
                or age > deployment.DIRECT_MAX_EVENT_AGE_SECONDS
            ):
                if not done.ok:
                    runtime.say(
                        "spot_events",
                        f"event {event.get('id')} dropped after {attempts} attempt(s) (failure queue)",
                    )
                runtime.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


class SpotMarket(_Loop):
    """EC2 takes a warned spot instance back two minutes after its interruption warning."""

    name = "spot-market"

    def tick(self) -> None:
        assert self.runtime is not None
        runtime = self.runtime
        reservations = runtime.ec2.describe_instances(
            Filters=[
                {"Name": "tag-key", "Values": [RECLAIM_TAG]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ]
        )["Reservations"]
        now = time.time()
        for instance in (i for r in reservations for i in r["Instances"]):
            tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
            if float(tags.get(RECLAIM_TAG, "inf")) <= now:
                runtime.ec2.terminate_instances(InstanceIds=[instance["InstanceId"]])
                runtime.say(
                    "ec2", f"spot instance {instance['InstanceId']} reclaimed (its two minutes are up)"
                )
        self._stop.wait(2)


class InstanceStateChanges(_Loop):
    """EC2 Instance State-change Notifications: EC2 puts one on the default bus for every instance
    that begins stopping or terminating, whoever caused it (the spot market's reclaim, the product's
    own TerminateInstances, an operator), and the stack's rules route them to the interruption
    queue. One for each of the cluster's instances, at the first going state seen (looked at every
    ``every`` seconds), as the fault matrix's rig does (``sandbox.scenarios.reliability``)."""

    name = "ec2-state-changes"

    def __init__(self, every_seconds: float = 2.0) -> None:
        super().__init__()
        self.every = every_seconds
        self._announced: set[str] = set()
        self._bus: Any = None

    def tick(self) -> None:
        from sandbox.simulators.kubelet import GONE_STATES

        assert self.runtime is not None
        runtime = self.runtime
        if self._bus is None:
            self._bus = runtime.sandbox.event_source_client()
        pages = runtime.ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "tag:eks:eks-cluster-name", "Values": [runtime.cluster_name]},
                {"Name": "instance-state-name", "Values": list(GONE_STATES)},
            ]
        )
        entries = []
        for page in pages:
            for instance in (i for r in page["Reservations"] for i in r["Instances"]):
                instance_id, state = instance["InstanceId"], instance["State"]["Name"]
                if instance_id not in self._announced:
                    self._announced.add(instance_id)
                    event = events.state_change(instance_id, state, runtime.region)
                    entries.append(events.put_events_entry(event))
        for start in range(0, len(entries), 10):  # PutEvents takes ten entries at most
            self._bus.put_events(Entries=entries[start : start + 10])
        self._stop.wait(self.every)

    def stop(self) -> None:
        super().stop()
        if self._bus is not None:
            self._bus.close()


class Runtime:
    """Workers for the functions and the triggers that invoke them; ``start``/``stop`` or ``with``."""

    def __init__(
        self,
        sandbox: Any,
        *,
        say: Callable[[str, str], None] | None = None,
        functions: Iterable[str] = tuple(deployment.FUNCTIONS),
        schedules: dict[str, int] | None = None,
        env: dict[str, str] | None = None,
        wakeup: bool = True,
        wakeup_mode: str = "public",
        state_changes: bool = False,
    ) -> None:
        self.sandbox = sandbox
        # EC2's state-change notifications (``InstanceStateChanges``). Off by default until every
        # story on the runtime is checked with them: without them the product only has its own
        # passes to see an instance gone (harsher than AWS, never kinder).
        self.state_changes = state_changes
        self.cluster_name = sandbox.cluster_name
        self.region = sandbox.region
        self.logs_dir = Path(sandbox.state_dir) / "logs"
        self._say = say or (lambda source, text: None)
        self.function_names = tuple(functions)
        self.schedules = dict(deployment.SCHEDULES if schedules is None else schedules)
        self.extra_env = dict(env or {})
        # Variables one function has besides the others' (the webhook's, set by sandbox/runtime/wakeup.py).
        self.function_envs: dict[str, dict[str, str]] = {}
        self.wakeup = wakeup and "webhook" in self.function_names
        self.wakeup_mode = wakeup_mode  # "public" (a function URL) or "private" (sandbox/runtime/wakeup.py)
        self.function_url = ""
        self.workers: dict[str, Worker] = {}  # each function's first container
        self.pools: dict[str, list[Worker]] = {}  # its further ones (``container``), as Lambda scales out
        self.triggers: list[Trigger] = []
        self.invocations: list[Invocation] = []
        # Each invocation as its handler starts (the function, when taken, cold, when the handler
        # got it, the event): ``Worker.on_handler``.
        self.handler_starts: list[tuple[str, float, bool, float, Any]] = []
        self.sqs: Any = None
        self.poller: Any = None  # the interruption queue's event source mapping (the function's role)
        self.ec2: Any = None
        self._lock = threading.Lock()
        self._stopping = False

    def say(self, source: str, text: str) -> None:
        self._say(source, text)

    def function_env(self, name: str) -> dict[str, str]:
        """What the stack sets (infra/capabilities/functions.py) plus the sandbox's endpoints and identity."""
        inherited = {k: os.environ[k] for k in INHERITED if k in os.environ}
        spec = deployment.FUNCTIONS[name]
        return {
            **inherited,
            **self.sandbox.env(function=name),  # its role's credentials, as Lambda sets them
            "REBALANCE_MODE": "replace",
            "POLL_INTERVAL_SECONDS": "5",
            "POWERTOOLS_SERVICE_NAME": f"nodewright-{self.cluster_name}",
            "POWERTOOLS_METRICS_NAMESPACE": "Nodewright",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "NODEWRIGHT_TRACING": "false",
            "AWS_LAMBDA_FUNCTION_NAME": f"nodewright-{name.replace('_', '-')}",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "PYTHONUNBUFFERED": "1",
            **_kube_client_rate(name),
            **self.extra_env,
            **self.function_envs.get(name, {}),
        }

    def worker(self, name: str) -> Worker:
        with self._lock:
            if name not in self.workers:
                self.logs_dir.mkdir(parents=True, exist_ok=True)
                env = self.function_env(name)
                self.sandbox.iam.learn(env, name)  # the physical names its variables give (Ref)
                self.workers[name] = self._told(
                    Worker(
                        deployment.FUNCTIONS[name],
                        env,
                        self.logs_dir / f"{name}.log",
                        f"nodewright-{name.replace('_', '-')}",
                    )
                )
            return self.workers[name]

    def _told(self, worker: Worker) -> Worker:
        name = worker.spec.name
        worker.on_handler = lambda *started: self.handler_starts.append((name, *started))
        return worker

    def container(self, name: str, index: int) -> Worker:
        """The function's container ``index``: 0 is ``worker(name)``, others start on first need."""
        first = self.worker(name)  # its environment learnt by the IAM enforcement once
        if index == 0:
            return first
        with self._lock:
            pool = self.pools.setdefault(name, [])
            while len(pool) < index:
                pool.append(
                    self._told(
                        Worker(
                            deployment.FUNCTIONS[name],
                            self.function_env(name),
                            self.logs_dir / f"{name}.log",
                            f"nodewright-{name.replace('_', '-')}",
                        )
                    )
                )
            return pool[index - 1]

    def invoke_in(self, worker: Worker, event: dict[str, Any]) -> Invocation:
        """A synchronous invocation in this container (waits while it is busy)."""
        done = worker.invoke(event)
        assert done is not None
        self.record(done)
        return done

    def invoke(self, name: str, event: dict[str, Any]) -> Invocation:
        """A synchronous invocation (waits while the container is busy)."""
        done = self.worker(name).invoke(event)
        assert done is not None
        self.record(done)
        return done

    def invoke_async(self, name: str, event: dict[str, Any]) -> Invocation | None:
        """An EventBridge-style invocation: throttled (None) while the function's container is busy."""
        done = self.worker(name).invoke(event, blocking=False)
        if done is None:
            self.say(name, "tick throttled: the previous invocation is still running")
            return None
        self.record(done)
        return done

    def record(self, done: Invocation) -> None:
        if self._stopping:
            return  # containers killed by the sandbox's own stop are not the function's failures
        self.invocations.append(done)
        if not done.ok:
            self.say(done.function, f"invocation failed after {done.seconds:.1f}s: {done.error}")

    def start(self) -> Runtime:
        self.sqs = self.sandbox.aws_client("sqs")
        # Lambda's event source mapping polls the queue with the function's own role.
        self.poller = aws_client(
            "sqs", self.sandbox.aws_endpoint, self.region, self.sandbox.credentials("interruption")
        )
        self.ec2 = self.sandbox.aws_client("ec2")
        wanted: list[Trigger] = [SpotMarket()]
        if self.state_changes:
            wanted.append(InstanceStateChanges())
        if "interruption" in self.function_names:
            wanted.append(QueueSource())
        if "spot_events" in self.function_names:
            wanted.append(DirectRoute())
        wanted += [
            Schedule(name, every) for name, every in self.schedules.items() if name in self.function_names
        ]
        for trigger in wanted:
            trigger.start(self)
            self.triggers.append(trigger)
        if self.wakeup:
            from sandbox.runtime import wakeup

            url, lambda_api = wakeup.install(self, self.wakeup_mode)
            self.triggers += [url, lambda_api]
            self.function_url = url.url
        return self

    def stop(self) -> None:
        self._stopping = True
        for trigger in self.triggers:
            trigger.halt()
        # Containers first, all at once: a trigger's thread blocked in an invocation returns when its
        # container goes, so joining the triggers after it waits for nothing.
        self._shut_down_workers(delete=True)
        for trigger in self.triggers:
            trigger.stop()
        self.triggers = []
        self._shut_down_workers()  # one a trigger started meanwhile (none, normally)
        for client in (self.sqs, self.poller, self.ec2):
            if client is not None:
                client.close()
        self.sqs = self.poller = self.ec2 = None

    def _shut_down_workers(self, *, delete: bool = False) -> None:
        workers = [*self.workers.values(), *(w for pool in self.pools.values() for w in pool)]
        for worker in workers:
            if delete:
                worker.delete()
            else:
                worker.shut_down()
        deadline = time.monotonic() + SHUTDOWN_SECONDS
        for worker in workers:
            worker.finish_shutdown(deadline)

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kube_client_rate(function: str) -> dict[str, str]:
    """The request rate limit the stack sets for ``function`` (the layer's defaults for most): the
    interruption functions' share (infra/capabilities/functions.py kube_client_environment)."""
    if function not in deployment.INTERRUPTION_FUNCTIONS:
        return {}
    qps, burst = deployment.INTERRUPTION_KUBE_CLIENT_QPS, deployment.INTERRUPTION_KUBE_CLIENT_BURST
    return {"KUBE_CLIENT_QPS": f"{qps:g}", "KUBE_CLIENT_BURST": str(burst)}


def interrupt(sandbox_env: dict[str, str], node: str, kind: str, kubeconfig: str) -> dict[str, Any]:
    """Put a real-shaped event about ``node``'s instance on the default event bus (what EC2 or AWS
    Health would emit); for a spot warning, mark the instance for the spot market to reclaim in two
    minutes. Returns the event."""
    from kubernetes.client.exceptions import ApiException

    from sandbox.aws.server import aws_client
    from sandbox.simulators.kube import Kube, api_client_from_kubeconfig, core

    api = api_client_from_kubeconfig(kubeconfig)
    try:
        found = Kube(api).get(core("nodes", name=node))
    except ApiException as exc:
        if exc.status == 404:
            raise LookupError(f"node {node!r} not found; kubectl get nodes lists them") from exc
        raise
    finally:
        api.close()
    provider_id = (found.get("spec") or {}).get("providerID") or ""
    instance_id = provider_id.rsplit("/", 1)[-1]
    if not instance_id.startswith("i-"):
        raise LookupError(
            f"node {node!r} has no EC2 providerID ({provider_id!r}): not an instance the sandbox runs"
        )
    endpoint, region = sandbox_env["AWS_ENDPOINT_URL"], sandbox_env["AWS_REGION"]
    event = events.interruption_event(kind, instance_id, region)
    bus = event_source_client(endpoint, region)
    ec2 = aws_client("ec2", endpoint, region)
    try:
        if kind == "spot":
            reclaim = str(time.time() + deployment.SPOT_NOTICE_SECONDS)
            ec2.create_tags(Resources=[instance_id], Tags=[{"Key": RECLAIM_TAG, "Value": reclaim}])
        elif kind == "state":
            ec2.stop_instances(InstanceIds=[instance_id])  # the notification follows a real state change
        answer = bus.put_events(Entries=[events.put_events_entry(event)])
        if answer.get("FailedEntryCount"):
            raise RuntimeError(f"EventBridge refused the event: {answer['Entries']}")
        event["id"] = answer["Entries"][0].get("EventId", event["id"])
    finally:
        bus.close()
        ec2.close()
    return event
