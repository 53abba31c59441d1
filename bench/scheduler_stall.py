"""Pods the simulated kube-scheduler marks unschedulable per second: no webhook, healthy, unreachable.

A burst of ``--pods`` pods that fit nowhere (the cluster has no node) is created while the
simulated scheduler is stopped; it then starts, and the figure is the pods divided by the time
from its start to its ``PodScheduled=False`` status write of the last of them. The simulated
scheduler makes kube-scheduler's writes with kube-scheduler's synchronicity (the status write in
its loop, the ``FailedScheduling`` Event through its recorder, never waited for; client rate limit
50/s, bursts of 100: ``sandbox/simulators/scheduler.py``) and runs in a process of its own, as
kube-scheduler does; the API emulator calls admission webhooks as kube-apiserver does (the caller
waits up to ``timeoutSeconds``, nobody else; connections kept alive).

Three runs against one sandbox:

* ``noWebhookPerSecond``: no ValidatingWebhookConfiguration;
* ``healthyPerSecond``: the wake-up's configuration as ``nodewright install-webhooks`` renders it,
  calling the real webhook function behind its function URL (its containers warm, as a deployed
  stack's are; the wake-ups it sends are accepted by Lambda's Invoke API and not run: the
  provisioner runs in Lambda, not on the control plane);
* ``unreachablePerSecond``: the same configuration pointing at a URL that accepts the connection
  and never answers.

Goal (issue 25): healthy and unreachable within 5 % of no webhook. ``--design pods-status``
measures the design before it (a webhook on ``pods/status`` UPDATE, kept here only to compare).
Progress and each run's details go to stderr; ``--json`` prints the three figures only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench._report import print_figures, save

PRODUCT = "product"
PODS_STATUS = "pods-status"
FIGURES = {"none": "noWebhookPerSecond", "healthy": "healthyPerSecond", "unreachable": "unreachablePerSecond"}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "spec": {"containers": [{"name": "work", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pods", type=int, default=300, help="pods in the burst (default 300)")
    parser.add_argument(
        "--design",
        choices=(PRODUCT, PODS_STATUS),
        default=PRODUCT,
        help="the webhook configuration measured: what install-webhooks renders (default), or the "
        "pods/status design it replaced",
    )
    parser.add_argument("--json", action="store_true", help="print the three figures as JSON")


def run(args: argparse.Namespace) -> int:
    """The figures on stdout; the functions' logs and the progress on stderr."""

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with contextlib.redirect_stdout(sys.stderr):
        result = measure(args.pods, args.design, say)
    figures = {FIGURES[name]: result[name].per_second for name in FIGURES}
    save(args, {**figures, "design": args.design, "pods": args.pods})
    if args.json:
        print(json.dumps(figures))
    else:
        none = figures["noWebhookPerSecond"]
        print_figures(
            {
                **figures,
                "healthyVsNone": f"{figures['healthyPerSecond'] / none:.1%}",
                "unreachableVsNone": f"{figures['unreachablePerSecond'] / none:.1%}",
            },
            False,
            sort_keys=False,
        )
    return 0


@dataclass
class Run:
    """One burst: how many pods the scheduler marked, in how long, and how the webhook was called."""

    pods: int
    marked: int
    seconds: float
    webhook_calls: int

    @property
    def per_second(self) -> float:
        return round(self.marked / self.seconds, 1) if self.seconds > 0 else 0.0


def measure(pods: int, design: str, say: Callable[[str], None]) -> dict[str, Run]:
    """The three runs (``none``, ``healthy``, ``unreachable``) of a ``pods``-pod burst."""
    from nodewright.api import webhooks
    from nodewright.cluster import install
    from nodewright.cluster.resources import VALIDATING_WEBHOOKS
    from nodewright.spec import deployment

    from sandbox import Sandbox
    from sandbox.harness import quiet_functions
    from sandbox.runtime.stack import Runtime
    from sandbox.runtime.wakeup import BlackHole, FunctionUrl
    from sandbox.simulators.kube import Kube

    results: dict[str, Run] = {}
    with quiet_functions(), Sandbox(cluster_name="bench-stall", simulators=False) as sb:
        admin = sb.admin_cluster()
        kube = Kube(sb.api_client())
        runtime = Runtime(sb, functions=("webhook",), schedules={}, wakeup=True).start()
        black_hole = BlackHole()
        black_hole.start()
        try:
            (url,) = [t for t in runtime.triggers if isinstance(t, FunctionUrl)]
            url.warm(deployment.WEBHOOK_CONCURRENCY)
            installed = admin.get(VALIDATING_WEBHOOKS, webhooks.CONFIGURATION_NAME)
            client_config = installed["webhooks"][0]["clientConfig"]
            healthy = configuration(design, client_config["url"], client_config["caBundle"])
            unreachable_url = black_hole.url + client_config["url"].split("/", 3)[3]
            unreachable = configuration(design, unreachable_url, client_config["caBundle"])

            def webhook_calls() -> int:
                return sum(1 for i in runtime.invocations if i.function == "webhook")

            kubeconfig = str(sb.kubeconfig_path)
            install.remove(admin, VALIDATING_WEBHOOKS, webhooks.CONFIGURATION_NAME)
            results["none"] = burst(kube, kubeconfig, pods, "none", webhook_calls=lambda: 0, say=say)
            install.apply(admin, VALIDATING_WEBHOOKS, healthy)
            results["healthy"] = burst(
                kube, kubeconfig, pods, "healthy", webhook_calls=webhook_calls, say=say
            )
            install.apply(admin, VALIDATING_WEBHOOKS, unreachable)
            results["unreachable"] = burst(
                kube, kubeconfig, pods, "unreachable", webhook_calls=lambda: black_hole.connections, say=say
            )
        finally:
            black_hole.stop()
            runtime.stop()
    return results


def configuration(design: str, url: str, ca_bundle: str) -> dict[str, Any]:
    from nodewright.api import webhooks

    if design == PODS_STATUS:
        return pods_status_configuration(url, ca_bundle)
    return webhooks.wakeup_configuration(url, ca_bundle)


def burst(
    kube: Any,
    kubeconfig: str,
    pods: int,
    name: str,
    *,
    webhook_calls: Callable[[], int],
    say: Callable[[str], None],
) -> Run:
    """Create the pods, start a scheduler in a process of its own (kube-scheduler is not the API
    server's process; in the sandbox's one process, the emulator's threads would take its
    interpreter lock), time its status writes; then wait until the webhook has been called at
    least once (a run whose webhook was never called measured nothing), stop it, delete the pods."""
    import multiprocessing

    from sandbox.simulators.kube import core

    calls_before = webhook_calls()
    prefix = f"{name}-{uuid.uuid4().hex[:4]}"
    for index in range(pods):
        kube.create(core("pods", "default"), {**POD, "metadata": {"name": f"{prefix}-{index}"}})
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(
        target=_scheduler, args=(kubeconfig, pods, child), name="scheduler", daemon=True
    )
    process.start()
    try:
        # Up to the webhook's timeout per pod when the scheduler waits for it, plus slack.
        if not parent.poll(pods * 3 + 120):
            raise RuntimeError(f"{name}: the scheduler did not mark every pod in time")
        marked, seconds = parent.recv()
        if name != "none":
            _wait(f"{name}: the webhook called", lambda: webhook_calls() > calls_before, 120)
        calls = webhook_calls() - calls_before
    finally:
        parent.send("stop")
        process.join(30)
        if process.is_alive():
            process.kill()
    run = Run(pods=pods, marked=marked, seconds=seconds, webhook_calls=calls)
    say(f"{name}: {run.marked} pods marked in {seconds:.2f}s ({run.per_second}/s), {calls} webhook calls")
    for index in range(pods):
        kube.delete_ignoring_missing(core("pods", "default", f"{prefix}-{index}"), grace_period_seconds=0)
    _wait(f"{name}: pods deleted", lambda: not kube.list(core("pods", "default"))[0], 120)
    return run


def _scheduler(kubeconfig: str, pods: int, conn: Any) -> None:
    """The simulated scheduler's process: start, report (pods marked, seconds from start to the last
    of ``pods`` status writes), keep running (its Events still being written) until told to stop."""
    from sandbox.simulators.kube import Kube, api_client_from_kubeconfig
    from sandbox.simulators.scheduler import Scheduler

    scheduler = Scheduler(Kube(api_client_from_kubeconfig(kubeconfig)))
    started = time.monotonic()
    scheduler.start()
    try:
        while len(scheduler.marked_unschedulable) < pods:
            time.sleep(0.01)
        conn.send((len(scheduler.marked_unschedulable), scheduler.marked_unschedulable[pods - 1] - started))
        conn.recv()
    finally:
        scheduler.stop()


def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def pods_status_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    """The wake-up as it was before issue 25, kept only to measure what it cost: a webhook on
    ``pods/status`` UPDATE whose matchConditions pass a pod's transition to
    ``PodScheduled=False/Unschedulable``, 2 s timeout, failurePolicy Ignore. kube-scheduler makes
    that write in its scheduling loop, so the loop waits for the webhook."""
    from nodewright.api import webhooks

    unschedulable = (
        "{o}.status.conditions.exists(c, c.type == 'PodScheduled' && c.status == 'False' && "
        "has(c.reason) && c.reason == 'Unschedulable')"
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": webhooks.CONFIGURATION_NAME, "labels": dict(webhooks.PART_OF)},
        "webhooks": [
            {
                "name": webhooks.WEBHOOK_NAME,
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["pods/status"],
                        "scope": "Namespaced",
                    }
                ],
                "matchConditions": [
                    {
                        "name": "becomes-unschedulable",
                        "expression": "has(object.status) && has(object.status.conditions) && "
                        + unschedulable.format(o="object"),
                    },
                    {
                        "name": "was-not-unschedulable",
                        "expression": "!(has(oldObject.status) && has(oldObject.status.conditions) && "
                        + unschedulable.format(o="oldObject")
                        + ")",
                    },
                ],
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": 2,
                "admissionReviewVersions": ["v1"],
                "namespaceSelector": {},
                "objectSelector": {},
            }
        ],
    }
