"""``nodewright top``'s row model: objects in, rows out. The state of a NodeClaim from its conditions,
requests summed as kube-scheduler sums them, $/h by the product's price rule, pending pods as the
provisioner counts them, the latest decisions first, and a frame that fits the screen it is given."""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodewright.cli import top
from nodewright.cloud.pricetable import PriceTable
from nodewright.state.world import World
from rich.console import Console

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
GIB = 1024**3
PRICES = PriceTable(
    on_demand={"m5.large": 0.096, "c6g.xlarge": 0.136}, spot={("m5.large", "us-east-1b"): 0.035}
)


class Cloud:
    """What a World asks of the cloud: only the price table matters to top's rows."""

    def instance_types(self, nodeclass: Mapping[str, Any]) -> list[Any]:
        return []

    def prices(self) -> PriceTable:
        return PRICES

    def node_price(self, nodeclass: Mapping[str, Any]) -> float:
        return 0.0


def stamp(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def placed(instance_type: str, zone: str, capacity_type: str, pool: str = "default") -> dict[str, str]:
    return {
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": capacity_type,
        "karpenter.sh/nodepool": pool,
    }


def node(
    name: str,
    instance: str,
    labels: dict[str, str],
    *,
    cpu: str = "1930m",
    memory: str = "7Gi",
    ready: bool = True,
    age: float = 10,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": labels,
            "creationTimestamp": stamp(age),
            **extra.get("meta", {}),
        },
        "spec": {"providerID": f"aws:///us-east-1a/{instance}", "taints": extra.get("taints", [])},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "29"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def claim(
    name: str, instance: str | None, labels: dict[str, str], conditions: dict[str, str], **meta: Any
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": kind, "status": value} for kind, value in conditions.items()],
        "allocatable": {"cpu": "3920m", "memory": "6Gi"},
    }
    if instance:
        status["providerID"] = f"aws:///us-east-1a/{instance}"
    return {
        "metadata": {"name": name, "labels": labels, "creationTimestamp": stamp(5), **meta},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": status,
    }


def pod(
    name: str, node_name: str | None = None, *, cpu: str = "500m", memory: str = "1Gi", **status: Any
) -> dict:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            **({"nodeName": node_name} if node_name else {}),
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": "Running" if node_name else "Pending", **status},
    }


UNSCHEDULABLE = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
I1, I2, I3 = "i-0000000000000000a", "i-0000000000000000b", "i-0000000000000000c"


def world(nodes: list[dict], claims: list[dict], pods: list[dict]) -> World:
    return World(
        taken_at=NOW, nodeclaims=claims, nodes=nodes, pods=pods, nodepools=[], nodeclasses=[], cloud=Cloud()
    )


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ({}, "launching"),
        ({"Launched": "False"}, "launching"),
        ({"Launched": "True"}, "launched"),
        ({"Launched": "True", "Registered": "True"}, "registered"),
        ({"Launched": "True", "Registered": "True", "Initialized": "True"}, "initialized"),
        ({"Initialized": "True", "Drifted": "True"}, "drifted"),
        ({"Initialized": "True", "Drifted": "True", "DisruptionReason": "True"}, "disrupting"),
    ],
)
def test_a_nodeclaims_state_is_the_furthest_of_its_conditions(
    conditions: dict[str, str], expected: str
) -> None:
    assert top.claim_state(claim("c", I1, {}, conditions), None) == expected


def test_the_disrupted_taint_deletion_and_no_claim_show_as_such() -> None:
    initialized = claim("c", I1, {}, {"Initialized": "True"})
    tainted = node("n", I1, {}, taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
    assert top.claim_state(initialized, tainted) == "disrupting"
    deleting = claim("c", I1, {}, {"Initialized": "True"}, deletionTimestamp=stamp(0))
    assert top.claim_state(deleting, node("n", I1, {})) == "deleting"
    assert top.claim_state(None, node("n", I1, {})) == "unmanaged"


def test_rows_carry_placement_price_requests_and_state_of_each_node_then_each_unregistered_claim() -> None:
    on_demand = placed("m5.large", "us-east-1a", "on-demand")
    spot = placed("m5.large", "us-east-1b", "spot", pool="batch")
    nodes = [
        node("spot-node", I2, spot, age=1),
        node("od-node", I1, on_demand, age=20, cpu="1930m", memory="7Gi"),
        node("mng-node", "i-00000000000000099", placed("c6g.xlarge", "us-east-1c", "on-demand"), ready=False),
    ]
    claims = [
        claim("od-claim", I1, on_demand, {"Launched": "True", "Registered": "True", "Initialized": "True"}),
        claim("spot-claim", I2, spot, {"Launched": "True", "Registered": "True"}),
        claim("new-claim", None, {"karpenter.sh/nodepool": "default"}, {}),
    ]
    pods = [
        pod("a", "od-node", cpu="500m", memory="1Gi"),
        pod("b", "od-node", cpu="1", memory="512Mi"),
        pod("done", "od-node", cpu="4", memory="8Gi", phase="Succeeded"),  # holds nothing any more
        {  # an init container bigger than the app: kube-scheduler takes the larger
            **pod("init", "spot-node", cpu="100m", memory="100Mi"),
            "spec": {
                "nodeName": "spot-node",
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}],
            },
        },
        pod("waiting", None, **UNSCHEDULABLE),
    ]
    by_name = {r.name: r for r in top.rows(world(nodes, claims, pods))}

    assert [r.name for r in top.rows(world(nodes, claims, pods))] == [
        "od-node",  # oldest node first
        "mng-node",
        "spot-node",
        "new-claim",  # then NodeClaims that have no node yet
    ]
    od = by_name["od-node"]
    assert (od.nodeclaim, od.nodepool, od.instance_type, od.capacity_type, od.zone) == (
        "od-claim",
        "default",
        "m5.large",
        "on-demand",
        "us-east-1a",
    )
    assert od.price == pytest.approx(0.096)
    assert (od.cpu_requested, od.cpu_allocatable) == (1500, 1930)
    assert (od.memory_requested, od.memory_allocatable) == (GIB + 512 * 1024**2, 7 * GIB)
    assert (od.pods, od.state, od.ready) == (2, "initialized", True)

    spot_row = by_name["spot-node"]
    assert spot_row.price == pytest.approx(0.035)  # the spot price of its zone
    assert (spot_row.cpu_requested, spot_row.memory_requested) == (2000, GIB)
    assert (spot_row.state, spot_row.nodepool) == ("registered", "batch")

    unmanaged = by_name["mng-node"]
    assert (unmanaged.state, unmanaged.ready, unmanaged.nodeclaim) == ("unmanaged", False, "")
    assert unmanaged.price == pytest.approx(0.136)

    launching = by_name["new-claim"]
    assert (launching.state, launching.instance_type, launching.price, launching.pods) == (
        "launching",
        "",
        None,
        0,
    )
    assert launching.cpu_allocatable == 3920  # what the NodeClaim was launched for


def test_the_frame_sums_known_prices_and_counts_pods_bound_and_waiting_for_capacity() -> None:
    nodes = [
        node("a", I1, placed("m5.large", "us-east-1a", "on-demand")),
        node("b", I2, placed("x9.huge", "z", "on-demand")),
    ]
    pods = [
        pod("bound", "a"),
        pod("unschedulable", None, **UNSCHEDULABLE),
        pod("not-yet-looked-at", None),  # the scheduler has not said Unschedulable: not waiting for capacity
        pod("finished", "a", phase="Succeeded"),
    ]
    frame = top.build_frame(world(nodes, [], pods), [])
    assert frame.price_per_hour == pytest.approx(0.096)
    assert frame.unpriced == 1  # x9.huge: no price, shown as such rather than guessed
    assert (frame.pods_bound, frame.pods_pending) == (1, 1)


def event(reason: str, minutes_ago: float, *, kind: str = "NodeClaim", name: str = "c", **extra: Any) -> dict:
    return {
        "metadata": {"name": f"{name}.{reason}", "namespace": "default"},
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "message": f"{reason}   happened\nhere",
        "type": "Normal",
        "lastTimestamp": stamp(minutes_ago),
        **extra,
    }


def test_decisions_are_the_latest_events_newest_first_on_one_line_each() -> None:
    events = [event(f"R{i}", minutes_ago=i) for i in range(12)]
    events.append(event("Old", 0, lastTimestamp=None, eventTime=stamp(60)))
    shown = top.decisions(events, limit=3)
    assert [d.reason for d in shown] == ["R0", "R1", "R2"]
    assert shown[0].regarding == "NodeClaim/c"
    assert shown[0].message == "R0 happened here"
    assert top.decisions([event("Old", 0, lastTimestamp=None, eventTime=stamp(60))])[0].at == NOW - timedelta(
        hours=1
    )


def text_of(renderable: Any, width: int = 170) -> str:
    console = Console(file=io.StringIO(), width=width)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_frame_taller_than_the_screen_shows_what_fits_and_how_many_it_left_out() -> None:
    nodes = [
        node(f"node-{i:02d}", f"i-{i:017x}", placed("m5.large", "us-east-1a", "on-demand"), age=100 - i)
        for i in range(40)
    ]
    frame = top.build_frame(world(nodes, [], []), [event("Launched", 1)])
    shown = text_of(top.render(frame, source="test", height=24, live=True))
    assert len(shown.splitlines()) <= 24
    assert "node-00" in shown
    assert "node-39" not in shown
    listed = sum(1 for line in shown.splitlines() if line.strip().startswith("node-"))
    assert f"… and {40 - listed} more" in shown
    assert "q or Ctrl-C to quit" in shown
    everything = text_of(top.render(frame, source="test"))
    assert "node-39" in everything
    assert "40 nodes  " in everything
    assert "$3.8400/h" in everything  # 40 x 0.096
