"""The sandbox runs functions as Lambda does: one container per function, killed at its timeout,
kept after a handler error, replaced after a crash; the SQS event source mapping deletes only the
records a partial batch response does not return."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws
from nodewright.spec.deployment import FunctionSpec
from waiting import wait_for

from sandbox.runtime import events
from sandbox.runtime.stack import Invocation, QueueSource, Worker

APP = textwrap.dedent(
    """
    import os, time

    time.sleep(float(os.environ.get("INIT_SLEEP", "0")))  # a slow module top level: the Init phase

    def handler(event, context):
        if event.get("sleep"):
            time.sleep(event["sleep"])
        if event.get("raise"):
            raise ValueError("bad input")
        if event.get("crash"):
            os._exit(3)
        if event.get("allocate_mb"):
            held = bytearray(event["allocate_mb"] * 1024 * 1024)  # touched: resident, not just reserved
            time.sleep(event.get("hold", 0))
        return {"env": os.environ.get("ONLY_HERE"), "pid": os.getpid(),
                "remaining": context.get_remaining_time_in_millis(), "memory": context.memory_limit_in_mb}
    """
)


@pytest.fixture
def worker(tmp_path: Path) -> Any:
    app = tmp_path / "app.py"
    app.write_text(APP)
    spec = FunctionSpec("probe", memory_mb=256, timeout_seconds=2)
    made = Worker(
        spec, {"ONLY_HERE": "yes", "PATH": "/usr/bin"}, tmp_path / "probe.log", "probe", app_path=app
    )
    yield made
    made.stop()


def test_a_worker_is_one_warm_container_with_its_own_environment(worker: Worker) -> None:
    first = worker.invoke({})
    second = worker.invoke({})
    assert first.ok, first
    assert second.ok, second
    assert first.result["env"] == "yes"
    assert first.result["memory"] == 256
    assert 0 < first.result["remaining"] <= 2000
    assert first.result["pid"] == second.result["pid"]  # warm: the same container
    assert worker.cold_starts == 1


def test_each_invocation_says_when_its_handler_started_and_whether_it_started_a_container(
    worker: Worker,
) -> None:
    """What the storm bench splits a node's time to cordon with: told before the handler runs (a
    two-minute invocation's start is known while it runs), cold only for the container's first."""
    told: list[tuple[float, bool, float, Any]] = []
    worker.on_handler = lambda *started: told.append(started)
    first = worker.invoke({"n": 1})
    second = worker.invoke({"n": 2})
    assert first is not None
    assert second is not None
    assert [(cold, event) for _, cold, _, event in told] == [(True, {"n": 1}), (False, {"n": 2})]
    assert all(taken <= handler for taken, _, handler, _ in told)
    assert (first.cold, second.cold) == (True, False)
    assert first.handler_at == told[0][2]


def test_a_handler_error_is_logged_and_the_container_kept(worker: Worker) -> None:
    failed = worker.invoke({"raise": True})
    assert not failed.ok
    assert failed.error == "ValueError: bad input"
    assert "ValueError: bad input" in worker.log_path.read_text()  # the traceback, as in CloudWatch
    assert worker.invoke({}).ok
    assert worker.cold_starts == 1


def test_a_timeout_kills_the_container_and_the_next_invocation_starts_a_fresh_one(worker: Worker) -> None:
    first = worker.invoke({})
    timed_out = worker.invoke({"sleep": 10})
    assert not timed_out.ok
    assert timed_out.error == "Task timed out after 2 seconds"
    again = worker.invoke({})
    assert again.ok
    assert again.result["pid"] != first.result["pid"]
    assert worker.cold_starts == 2


def test_a_crashed_container_is_replaced_on_the_next_trigger(worker: Worker) -> None:
    crashed = worker.invoke({"crash": True})
    assert not crashed.ok
    assert "Runtime exited" in crashed.error
    assert worker.invoke({}).ok
    assert worker.cold_starts == 2


def _state(pid: int) -> str:
    """A process's state letter from /proc (T: stopped by a signal)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_container_is_frozen_between_invocations_and_thawed_for_the_next(worker: Worker) -> None:
    """Lambda freezes an execution environment between invocations, the threads a handler left
    running included: a product that counted on them (a renewal, a watch) between invocations would
    work in a sandbox that let them run and fail in an account."""
    first = worker.invoke({})
    assert first.ok, first
    pid = first.result["pid"]
    # A signal is delivered after kill() returns: frozen once the kernel has stopped it.
    wait_for("the container frozen", lambda: _state(pid) == "T", timeout=10, every=0.01)
    second = worker.invoke({})
    assert second.ok, second  # thawed: a stopped process could not have answered
    assert second.result["pid"] == pid
    wait_for("the container frozen again", lambda: _state(pid) == "T", timeout=10, every=0.01)


def test_a_container_past_its_memory_size_is_killed_as_lambda_kills_it_and_replaced(worker: Worker) -> None:
    """Lambda's memory size is a hard limit (the probe's is 256 MB): past it the container is killed
    mid-invocation and the next invocation starts a fresh one; under it nothing happens."""
    within = worker.invoke({"allocate_mb": 64})
    assert within.ok, within
    over = worker.invoke({"allocate_mb": 300, "hold": 1})
    assert not over.ok
    assert over.error == "Runtime exited with error: signal: killed"
    assert "Runtime.OutOfMemory" in worker.log_path.read_text()
    again = worker.invoke({})
    assert again.ok, again
    assert again.result["pid"] != within.result["pid"]
    assert worker.cold_starts == 2


def test_a_busy_container_throttles_an_asynchronous_tick(worker: Worker) -> None:
    import threading

    running = threading.Thread(target=worker.invoke, args=({"sleep": 1},))
    running.start()
    try:
        import time

        deadline = time.monotonic() + 30
        while not worker.busy and time.monotonic() < deadline:  # the condition, not a fixed pause
            time.sleep(0.01)
        assert worker.busy
        assert worker.invoke({}, blocking=False) is None
    finally:
        running.join()


def _worker(tmp_path: Path, timeout_seconds: int, **env: str) -> Worker:
    app = tmp_path / "app.py"
    app.write_text(APP)
    spec = FunctionSpec("probe", memory_mb=256, timeout_seconds=timeout_seconds)
    return Worker(spec, {"PATH": "/usr/bin", **env}, tmp_path / "probe.log", "probe", app_path=app)


PRELOAD_PROBE = textwrap.dedent(
    """
    import sys

    def handler(event, context):
        preload = sys.modules.get("sandbox.runtime.preload")
        return {"importSeconds": preload.IMPORT_SECONDS if preload else None}
    """
)


def test_a_cold_start_forks_with_the_imports_made_and_still_spends_their_time_in_its_init_phase(
    tmp_path: Path,
) -> None:
    """Containers come from a fork server that has imported what every container imports
    (``sandbox/runtime/preload.py``): no container competes for the cores with its own copy of the
    imports, and none starts faster than one that made them itself."""
    app = tmp_path / "app.py"
    app.write_text(PRELOAD_PROBE)
    spec = FunctionSpec("probe", memory_mb=256, timeout_seconds=5)
    cold = Worker(spec, {"PATH": "/usr/bin"}, tmp_path / "probe.log", "probe", app_path=app)
    try:
        done = cold.invoke({})
    finally:
        cold.stop()
    assert done.ok, done
    assert done.cold
    imported = done.result["importSeconds"]
    assert imported is not None, "the container was not forked from the preloaded server"
    assert done.handler_at - done.taken_at >= imported


def test_the_fork_server_imports_only_product_modules_that_read_no_environment() -> None:
    """The product's modules are a container's to import after it takes its function's environment;
    the fork server imports only the few the sandbox's container code names, which read none when
    imported. A new one here must be checked for that before it is added to the list."""
    import subprocess
    import sys

    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, sandbox.runtime.preload; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'nodewright')))",
        ],
        capture_output=True,
        check=True,
        text=True,
    )
    assert json.loads(listed.stdout) == [
        "nodewright",
        "nodewright.cloud",
        "nodewright.cloud.aws",
        "nodewright.cloud.cache",
        "nodewright.cloud.catalog",
        "nodewright.cloud.pricetable",
        "nodewright.cloud.state",
        "nodewright.observability",
        "nodewright.settings",
        "nodewright.spec",
        "nodewright.spec.deployment",
    ]


def test_a_cold_starts_init_phase_does_not_count_against_the_functions_timeout(tmp_path: Path) -> None:
    # Lambda gives the Init phase 10 s of its own: a 3 s import before a 1 s function still runs it.
    slow = _worker(tmp_path, 1, INIT_SLEEP="3")
    try:
        done = slow.invoke({})
        assert done.ok, done
        assert 0 < done.result["remaining"] <= 1000
    finally:
        slow.stop()


def _abandoned_by(worker: Worker, end: Callable[[], None]) -> Invocation:
    """A warm ``worker``'s 250 s invocation, ended by ``end`` (a stop, a delete) while it runs: its answer."""
    import threading

    assert worker.invoke({}).ok  # warm
    ended: list[Invocation | None] = []
    running = threading.Thread(target=lambda: ended.append(worker.invoke({"sleep": 250})))
    running.start()
    while not worker.busy:  # the invocation holds the container from its first instruction
        running.join(0.01)
    end()
    running.join(60)
    assert not running.is_alive()
    assert ended
    assert ended[0] is not None
    return ended[0]


def test_stopping_a_busy_container_abandons_its_invocation(tmp_path: Path) -> None:
    long = _worker(tmp_path, 300)
    try:
        ended = _abandoned_by(long, long.stop)
        # Ended by the stop (its container killed), not by the 300 s timeout nor the 250 s sleep.
        assert not ended.ok
        assert ended.error == "Runtime exited without providing a reason"
    finally:
        long.stop()


def test_a_deleted_function_abandons_its_invocation_and_starts_no_container_for_the_next(
    tmp_path: Path,
) -> None:
    """The runtime's stop deletes its functions: the invocation in flight is abandoned and a trigger
    still holding an event (the wake-up's queue) is refused at once, instead of cold-starting a
    container whose whole invocation the stop then waited out."""
    long = _worker(tmp_path, 300)
    try:
        assert not _abandoned_by(long, long.delete).ok
        cold_starts = long.cold_starts
        refused = long.invoke({"sleep": 250})
        assert refused is not None
        assert not refused.ok
        assert refused.error == "Function not found"
        assert long.cold_starts == cold_starts, "no container started for the refused event"
    finally:
        long.stop()


def test_stopping_a_container_while_it_is_being_spawned_abandons_its_invocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shutdown (Ctrl-C, a test's ``runtime.stop()``) that comes while a cold invocation is still
    spawning its container: it finds no container to join (it used to join the Process whose
    ``start()`` had not returned: "can only join a started process"), and the invocation ends."""
    import multiprocessing
    import threading

    spawning, release = threading.Event(), threading.Event()
    process_class = type(multiprocessing.get_context("forkserver").Process())
    real_start = process_class.start

    def slow_start(self: Any) -> None:
        spawning.set()
        release.wait(30)
        real_start(self)

    monkeypatch.setattr(process_class, "start", slow_start)
    cold = _worker(tmp_path, 5)
    ended: list[Invocation | None] = []
    running = threading.Thread(target=lambda: ended.append(cold.invoke({})))
    running.start()
    try:
        assert spawning.wait(30)
        cold.stop()  # raised AssertionError while the spawn was in progress
        release.set()
        running.join(60)
        assert not running.is_alive()
        assert ended
        assert ended[0] is not None
    finally:
        release.set()
        cold.stop()
        running.join(1)


class _Runtime:
    """Just what QueueSource uses of the Runtime: moto's SQS (the poller, as the function's role in
    the sandbox), a region, and an invoke to stub."""

    def __init__(self, sqs: Any, url: str, answer: Any) -> None:
        self.poller = sqs
        self.region = "us-east-1"
        self.sandbox = SimpleNamespace(aws=SimpleNamespace(interruption_queue_url=url))
        self.answer = answer
        self.batches: list[dict[str, Any]] = []
        self.said: list[str] = []

    def invoke_in(self, worker: Any, event: dict[str, Any]) -> Invocation:
        assert worker == "a container of the interruption function"
        self.batches.append(event)
        return self.answer(event)

    def say(self, source: str, text: str) -> None:
        self.said.append(text)


@mock_aws
def test_the_event_source_mapping_deletes_all_but_the_failed_records() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(events.spot_warning(f"i-0{i}")))

    def fail_the_second(event: dict[str, Any]) -> Invocation:
        records = event["Records"]
        assert all(r["eventSource"] == "aws:sqs" and r["receiptHandle"] for r in records)
        return Invocation(
            "interruption", True, 0.1, {"batchItemFailures": [{"itemIdentifier": records[1]["messageId"]}]}
        )

    runtime = _Runtime(sqs, url, fail_the_second)
    source = QueueSource()
    source.runtime = runtime  # type: ignore[assignment]
    found: list[bool] = []
    source.poll("a container of the interruption function", found.append)  # type: ignore[arg-type]
    assert found == [True], "the poller is busy from the batch's receipt on (the mapping scales on it)"
    assert len(runtime.batches) == 1
    assert len(runtime.batches[0]["Records"]) == 3
    failed_body = runtime.batches[0]["Records"][1]["body"]
    # The failed record stays in flight (visible again after the visibility timeout); the rest are gone.
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert json.loads(failed_body)["detail"]["instance-id"] == "i-01"
    assert runtime.said == ["1 message(s) back to the queue (retried after the visibility timeout)"]


@mock_aws
def test_a_failed_invocation_returns_the_whole_batch() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    runtime = _Runtime(sqs, url, lambda event: Invocation("interruption", False, 1.0, error="Task timed out"))
    source = QueueSource()
    source.runtime = runtime  # type: ignore[assignment]
    source.poll("a container of the interruption function", lambda found: None)  # type: ignore[arg-type]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"


@mock_aws
def test_ec2_announces_each_of_the_clusters_instances_going_once_on_the_default_bus() -> None:
    """The storm's reclaimed instances reach the interruption queue as EC2 State-change
    Notifications, as in AWS; without them only the product's own passes saw them gone."""
    from sandbox.runtime.stack import InstanceStateChanges

    ec2 = boto3.client("ec2", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    bus = boto3.client("events", region_name="us-east-1")
    url = sqs.create_queue(QueueName="interruption")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    bus.put_rule(
        Name="state", EventPattern=json.dumps({"source": ["aws.ec2"], "detail-type": [events.STATE_CHANGE]})
    )
    bus.put_targets(Rule="state", Targets=[{"Id": "q", "Arn": arn}])
    image = ec2.register_image(Name="node", RootDeviceName="/dev/xvda")["ImageId"]

    def launch(cluster: str) -> str:
        tags = [{"ResourceType": "instance", "Tags": [{"Key": "eks:eks-cluster-name", "Value": cluster}]}]
        return str(
            ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=tags)["Instances"][0][
                "InstanceId"
            ]
        )

    reclaimed, running, foreign = launch("c1"), launch("c1"), launch("other")
    ec2.terminate_instances(InstanceIds=[reclaimed, foreign])
    runtime = SimpleNamespace(
        ec2=ec2,
        cluster_name="c1",
        region="us-east-1",
        sandbox=SimpleNamespace(event_source_client=lambda: bus),
    )
    trigger = InstanceStateChanges()
    trigger.runtime = runtime  # type: ignore[assignment]
    trigger._stop.set()  # one look per tick, no wait between
    trigger.tick()
    trigger.tick()  # announced once
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
    bodies = [json.loads(m["Body"]) for m in got]
    assert [(b["detail-type"], b["detail"]["instance-id"], b["detail"]["state"]) for b in bodies] == [
        (events.STATE_CHANGE, reclaimed, "terminated")
    ]
    assert running not in {b["detail"]["instance-id"] for b in bodies}
