"""What the fault matrix's modules share: the story's steps and the end every scenario must reach.

Each scenario starts from an empty cluster (``conftest.rig``), applies a NodePool and a workload,
injects its fault (EC2 through ``sandbox.aws.faults.FaultInjector``, the API server through
``ApiServerFaults``, the function killed at the layer's named checkpoints, the kubelet, the clock),
lets the functions run their scheduled rounds on simulated time (``sandbox.scenarios.reliability.Rig``), and
ends on the invariants (:func:`settle`): 0 leaked instances, 0 NodeClaims without an instance for
longer than the registration timeout, never two instances for one NodeClaim, limits never exceeded,
and every pod that can have a place has one. The invariants are also checked after every round.
"""

from __future__ import annotations

import json
from typing import Any

from nodewright.api import labels
from nodewright.cluster.resources import EC2NODECLASSES, NODEPOOLS

from sandbox.runtime import events
from sandbox.scenarios.reliability import Rig, running_pods
from sandbox.scenarios.workloads import DEPLOYMENTS, inflate, nodeclass, nodepool

APP = {"app": "inflate"}
SMALL_TYPES = ["t4g.small", "t3.small", "t3a.small"]  # each holds one 1 CPU / 1 GiB inflate pod
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def requirements(capacity_types: tuple[str, ...] = ("spot", "on-demand")) -> list[dict[str, Any]]:
    return [
        {"key": labels.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)},
        {"key": labels.INSTANCE_TYPE, "operator": "In", "values": SMALL_TYPES},
    ]


def start(
    rig: Rig, replicas: int, *, cpu: str = "1", node_selector: dict[str, str] | None = None, **pool: Any
) -> None:
    """The default NodePool (``pool``: its requirements and spec fields) and ``replicas`` inflate
    pods asking ``cpu`` each (with ``node_selector`` from their first version, when given)."""
    reqs = pool.pop("requirements", None) or requirements()
    rig.admin.create(EC2NODECLASSES, nodeclass(rig.sandbox))
    rig.admin.create(NODEPOOLS, nodepool("default", reqs, **pool))
    deployment = inflate(replicas, cpu)
    if node_selector:
        deployment["spec"]["template"]["spec"]["nodeSelector"] = node_selector
    rig.admin.create(DEPLOYMENTS, deployment, namespace="default")


def running(rig: Rig, count: int) -> bool:
    return len(running_pods(rig.observe(), APP)) == count


def scale(rig: Rig, replicas: int) -> None:
    rig.admin.patch(DEPLOYMENTS, "inflate", {"spec": {"replicas": replicas}}, namespace="default")


def settle(rig: Rig, replicas: int, *, rounds: int = 10) -> None:
    """Converge, then rounds for the leak GC and timeouts, then the settled invariants."""
    assert rig.converge(lambda: running(rig, replicas), rounds=rounds), (
        f"{replicas} pods running: got {rig.pods(APP)} (running, pending); violations {rig.violations}"
    )
    for _ in range(2):
        rig.round(advance=90)
    assert running(rig, replicas), rig.pods(APP)
    final = rig.check(settled=True)
    assert not rig.violations, [str(v) for v in rig.violations]
    assert not final, [str(v) for v in final]


def reports(rig: Rig, function: str = "disruption", *, last: int = 6) -> list[dict[str, Any]]:
    """What the last ``last`` invocations of ``function`` in this scenario said they did (its
    handler's answer: what it removed, held and why, the commands it started or followed), or how
    they ended: for a failure's message, so that it says what the function decided."""
    keys = ("disrupted", "held", "decisions", "commands", "leaseSkipped")
    said = []
    for o in [o for o in rig.functions.outcomes if o.function == function][-last:]:
        if o.killed_at or not o.ok:
            said.append({"killedAt": o.killed_at} if o.killed_at else {"error": o.error})
        else:
            result = o.result if isinstance(o.result, dict) else {"result": o.result}
            said.append({k: v for k, v in result.items() if k in keys and v} or {"did": "nothing"})
    return said


def instances(rig: Rig) -> list[dict[str, Any]]:
    return rig.observe().instances


def failed(rig: Rig) -> list[str]:
    """Invocations that raised (a killed one is not a failure: Lambda killed it)."""
    return [f"{o.function}: {o.error}" for o in rig.functions.outcomes if not o.ok and not o.killed_at]


def kill_each(rig: Rig, points: list[str], act: Any) -> None:
    """Kill the invocation at each point in turn; ``act(point)`` makes a flow reach it. A point's
    kills are counted from its arming: an earlier scenario of the same rig may have killed there."""
    for point in points:
        del rig.crashes.killed[point]
        rig.crashes.arm(point)
        act(point)
        assert rig.crashes.killed[point] == 1, f"no invocation reached {point}"
        rig.crashes.disarm()


def sqs(events_: list[dict[str, Any]]) -> dict[str, Any]:
    """One SQS batch of these events, message ids m-0, m-1, ..."""
    return events.sqs_event(
        [events.sqs_record(json.dumps(e), message_id=f"m-{i}") for i, e in enumerate(events_)]
    )
