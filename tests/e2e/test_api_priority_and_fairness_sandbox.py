"""The product against an API server whose API Priority and Fairness is deliberately small and busy:
the functions' priority level (global-default, where their IAM-mapped identity lands) gets one seat
and no queue, and another tenant of that level (a noisy neighbour listing pods every 50 ms) keeps
it busy, as do the functions' own concurrent requests, so some are answered 429 ``Too many requests`` with
``Retry-After`` as a saturated kube-apiserver answers them. The simulators (kube-scheduler, kubelets,
controllers) and the test's own client are system:masters: exempt, as on a real cluster.

Asserted: the functions met 429s, and still converged: every pod of a 10-replica Deployment runs on
capacity the provisioner launched, one instance per NodeClaim; then, once the Deployment is gone,
the provisioner and the disruption function remove the empty nodes and their instances. The figures
of the rejections are printed, not asserted.
"""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from handler_calls import disrupt, handlers_against, live_instances, next_pass, provision
from nodewright.api import labels
from nodewright.cluster.resources import (
    CLUSTER_ROLE_BINDINGS,
    EC2NODECLASSES,
    NODECLAIMS,
    NODEPOOLS,
    NODES,
    PODS,
)
from waiting import wait_for

from sandbox.apiserver.flowcontrol import DEFAULT_PRIORITY_LEVELS
from sandbox.cluster import AUTOSCALER_USER
from sandbox.scenarios.workloads import DEPLOYMENTS, inflate, nodeclass, nodepool

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

GENERAL = [
    {"key": labels.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
    {"key": labels.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m", "r"]},
    {"key": labels.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
]
REPLICAS = 10


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox import Sandbox

    with Sandbox(cluster_name="e2e-apf", boot_delay=0.2, init_delay=0.2) as sb:
        sb.apply_crds()
        small = next(lv for lv in DEFAULT_PRIORITY_LEVELS if lv.name == "global-default")
        sb.apiserver.flow_control.configure(
            concurrency=5,  # global-default: ceil(5 * 20 / 245) = 1 seat
            levels=[replace(small, queues=0, hand_size=0, queue_length_limit=0)],  # Reject: no queue
        )
        yield sb


class NoisyNeighbour:
    """Another global-default client (a CI job, a dashboard) listing pods on one keep-alive
    connection until stopped, PAUSE_SECONDS apart: a load generator, not a wait. Back to back, it
    held the level's one seat nearly all the time (a seat is held until the answer is written), and
    the functions took minutes to get their work through."""

    PAUSE_SECONDS = 0.05

    USER = "noisy-neighbour"

    def __init__(self, sb: Any) -> None:
        self.sb = sb
        self.token = sb.apiserver.add_identity(self.USER)
        sb.admin_cluster().create(
            CLUSTER_ROLE_BINDINGS,
            {
                "metadata": {"name": self.USER},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": self.USER}],
            },
        )
        self.stop = threading.Event()
        self.answers: Counter[int] = Counter()
        self.thread = threading.Thread(target=self._run, name="noisy-neighbour", daemon=True)

    def _run(self) -> None:
        conn = http.client.HTTPConnection(self.sb.apiserver.host, self.sb.apiserver.port, timeout=30)
        try:
            while not self.stop.is_set():
                conn.request("GET", "/api/v1/pods", headers={"Authorization": f"Bearer {self.token}"})
                response = conn.getresponse()
                response.read()
                self.answers[response.status] += 1
                self.stop.wait(self.PAUSE_SECONDS)
        finally:
            conn.close()

    def __enter__(self) -> NoisyNeighbour:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def running(kube: Any) -> int:
    return sum(
        1 for p in kube.list(PODS, namespace="default") if (p.get("status") or {}).get("phase") == "Running"
    )


def test_the_functions_meet_429s_and_still_converge(sandbox: Any) -> None:
    control = sandbox.apiserver.flow_control
    kube = sandbox.admin_cluster()
    with handlers_against(sandbox), NoisyNeighbour(sandbox) as neighbour:
        sandbox.warm_catalog()
        kube.create(EC2NODECLASSES, nodeclass(sandbox))
        kube.create(NODEPOOLS, nodepool("general", GENERAL))
        kube.create(DEPLOYMENTS, inflate(REPLICAS), namespace="default")
        wait_for(f"{REPLICAS} pending inflate pods", lambda: len(kube.list_pending_pods()) == REPLICAS)

        # The first pass pages moto's whole DescribeInstanceTypes before it may write: give it time.
        answers = [provision(seconds=15)]
        # How often a function's request finds the seat taken depends on how the threads interleave
        # (a loaded machine changes it): the provisioner runs until it has met a 429, then converges.
        wait_for(
            "the functions answered 429 Too many requests",
            lambda: control.stats("global-default").rejected_flows[AUTOSCALER_USER] > 0,
            step=lambda: answers.append(provision(seconds=1)),
        )
        wait_for(
            f"all {REPLICAS} inflate pods Running",
            lambda: running(kube) == REPLICAS,
            step=lambda: answers.append(provision(seconds=1)),
        )

        claims = kube.list(NODECLAIMS)
        launched = live_instances(sandbox)
        assert sorted(c["status"]["instanceID"] for c in claims) == sorted(i["InstanceId"] for i in launched)
        gave_up = sum(1 for a in answers if "error" in a)
        print(f"provisioner: {len(answers)} invocations, {gave_up} ended early by the busy API server")

        kube.delete(DEPLOYMENTS, "inflate", namespace="default")
        wait_for("the inflate pods gone", lambda: not kube.list(PODS, namespace="default"))
        wait_for(
            "the empty nodes removed and their instances terminated",
            lambda: not kube.list(NODECLAIMS) and not kube.list(NODES) and not live_instances(sandbox),
            timeout=180,
            step=lambda: (next_pass(), disrupt()),  # both run every minute: the provisioner initializes nodes
        )

    stats = control.stats("global-default")
    print(
        f"APF global-default: {stats.dispatched} served, rejected {dict(stats.rejected_flows)}; "
        f"the neighbour's answers {dict(neighbour.answers)}"
    )
