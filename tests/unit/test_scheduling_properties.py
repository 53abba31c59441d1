"""Property tests: every placed pod fits, limits hold, plans are deterministic, capacity only helps."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from nodewright.api import labels as wk
from nodewright.scheduling import Plan, Pod, Snapshot, plan
from nodewright.scheduling.model import HostPort, untolerated
from test_scheduling_support import ZONES, catalog, node, nodepool, pods, spec, spread, term

KINDS = (
    "plain",
    "zone-spread",
    "hostname-anti",
    "hostname-spread",
    "arm",
    "gpu",
    "zone-anti",
    "zone-affinity",
    "ports",
    "follow",
)
CATALOG = {t.name: t for t in catalog()}


def _spec(kind: str, index: int, cpu: int, memory: int):
    labels = {"app": f"{kind}-{index}"}
    if kind == "zone-spread":
        return spec(cpu, memory, labels, spreads=(spread(wk.ZONE, **labels),))
    if kind == "hostname-anti":
        return spec(cpu, memory, labels, affinity=(term(wk.HOSTNAME, anti=True, **labels),))
    if kind == "hostname-spread":
        return spec(cpu, memory, labels, spreads=(spread(wk.HOSTNAME, **labels),))
    if kind == "zone-anti":
        return spec(cpu, memory, labels, affinity=(term(wk.ZONE, anti=True, **labels),))
    if kind == "zone-affinity":
        return spec(cpu, memory, labels, affinity=(term(wk.ZONE, **labels),))
    if kind == "follow":  # hostname affinity to the pods of group 0, whatever they are
        return spec(cpu, memory, labels, affinity=(term(wk.HOSTNAME, role="leader"),))
    if kind == "ports":
        return spec(cpu, memory, labels, host_ports=(HostPort(9000 + index),))
    if kind == "arm":
        return spec(cpu, memory, labels, node_selector=((wk.ARCH, "arm64"),))
    if kind == "gpu":
        return spec(cpu, memory, labels, extra={"nvidia.com/gpu": 1})
    return spec(cpu, memory, labels)


groups = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from((100, 250, 500, 1000, 1500, 3000)),
        st.sampled_from((100, 256, 512, 1024, 2048, 4096, 12000)),
        st.integers(1, 8),
    ),
    min_size=1,
    max_size=5,
)
nodes = st.lists(st.tuples(st.sampled_from(ZONES), st.sampled_from((1000, 2000, 4000))), max_size=3)
limits = st.one_of(st.none(), st.integers(2, 24).map(lambda c: c * 1000))


def build(group_rows, node_rows, cpu_limit) -> Snapshot:
    pending: list[Pod] = []
    for index, (kind, cpu, memory, count) in enumerate(group_rows):
        pod_spec = _spec(kind, index, cpu, memory)
        if index == 0:
            pod_spec = replace(
                pod_spec, labels=tuple(sorted({**pod_spec.label_map, "role": "leader"}.items()))
            )
        pending += pods(count, pod_spec, prefix=f"g{index}")
    existing = [node(f"n{i}", zone, cpu) for i, (zone, cpu) in enumerate(node_rows)]
    pool = nodepool(limits={"cpu": cpu_limit} if cpu_limit else {})
    return Snapshot(pending, [pool], existing)


def canonical(result: Plan) -> tuple:
    return (
        sorted(result.placements.items()),
        [
            (c.nodepool, c.pods, [t.name for t in c.instance_types], c.requirements.to_k8s())
            for c in result.new_claims
        ],
        sorted(result.unschedulable.items()),
    )


def check_fits(snapshot: Snapshot, result: Plan, cpu_limit: int | None) -> None:
    by_key = {p.key: p for p in snapshot.pods}
    accounted = (
        list(result.placements) + [p for c in result.new_claims for p in c.pods] + list(result.unschedulable)
    )
    assert sorted(accounted) == sorted(by_key), "every pod exactly once"
    nodes_by_name = {n.name: n for n in snapshot.nodes}
    used: dict[str, Counter] = {}
    for key, name in result.placements.items():
        pod, target = by_key[key], nodes_by_name[name]
        used.setdefault(name, Counter()).update(pod.spec.request_map)
        assert all(target.labels.get(k) == v for k, v in pod.spec.node_selector)
        assert untolerated(target.taints, pod.spec.tolerations) is None
    for name, total in used.items():
        assert all(total[r] <= nodes_by_name[name].allocatable.get(r, 0) for r in total), name
    charged = 0
    for claim in result.new_claims:
        members = [by_key[p] for p in claim.pods]
        total = Counter()
        for pod in members:
            total.update(pod.spec.request_map)
        assert claim.instance_types, "a claim without candidates"
        assert len(claim.instance_types) <= 60
        for candidate in claim.instance_types:
            instance_type = CATALOG[candidate.name]
            assert all(total[r] <= instance_type.allocatable.get(r, 0) for r in total), candidate.name
            assert candidate.offerings
            for pod in members:
                assert all(instance_type.labels.get(k) == v for k, v in pod.spec.node_selector)
        apps = Counter(dict(p.spec.labels)["app"] for p in members)
        for pod in members:
            app = dict(pod.spec.labels)["app"]
            if app.startswith(("hostname-", "ports-")):
                assert apps[app] <= 1, f"{app} twice on one node"
        charged += max(CATALOG[c.name].capacity["cpu"] for c in claim.instance_types)
    check_zone_affinity(snapshot, result)
    check_followers(snapshot, result)
    if cpu_limit:
        assert charged <= cpu_limit
    else:
        zones: dict[str, Counter] = {}
        for claim in result.new_claims:
            zone = claim.requirements.get(wk.ZONE)
            for key in claim.pods:
                pod = by_key[key]
                if pod.spec.spreads and pod.spec.spreads[0].topology_key == wk.ZONE:
                    assert zone is not None
                    assert len(zone.values) == 1
                    zones.setdefault(key.split("-")[0], Counter())[next(iter(zone.values))] += 1
        for key, name in result.placements.items():
            pod = by_key[key]
            if pod.spec.spreads and pod.spec.spreads[0].topology_key == wk.ZONE:
                zones.setdefault(key.split("-")[0], Counter())[nodes_by_name[name].labels[wk.ZONE]] += 1
        for counts in zones.values():
            assert max(counts[z] for z in ZONES) - min(counts[z] for z in ZONES) <= 1, counts


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(groups, nodes, limits)
def test_every_placed_pod_fits_and_limits_hold(group_rows, node_rows, cpu_limit) -> None:
    snapshot = build(group_rows, node_rows, cpu_limit)
    check_fits(snapshot, plan(snapshot), cpu_limit)


@PROPERTY
@given(groups, nodes, limits)
def test_plan_is_deterministic_and_independent_of_pod_order(group_rows, node_rows, cpu_limit) -> None:
    first = plan(build(group_rows, node_rows, cpu_limit))
    again = plan(build(group_rows, node_rows, cpu_limit))
    assert canonical(first) == canonical(again)
    reordered = build(group_rows, node_rows, cpu_limit)
    reordered.pods = list(reversed(reordered.pods))
    assert canonical(plan(reordered)) == canonical(first)


@PROPERTY
@given(groups, nodes, limits, st.sampled_from(ZONES))
def test_adding_capacity_never_makes_a_pod_unschedulable(group_rows, node_rows, cpu_limit, zone) -> None:
    # Not a theorem with hostname affinity: the new node can attract the leaders and leave
    # their followers no room beside them (Kubernetes would refuse them the same way).
    assume(all(kind != "follow" for kind, *_ in group_rows))
    before = plan(build(group_rows, node_rows, cpu_limit))
    bigger = build(group_rows, node_rows, cpu_limit)
    bigger.nodes = [*bigger.nodes, node("extra", zone, 16000, 64000)]
    after = plan(bigger)
    if cpu_limit is None:
        assert set(after.unschedulable) <= set(before.unschedulable)
    else:
        # Under a NodePool limit, which of two competing pods gets the last slot may change;
        # the number of pods left out must not grow.
        assert len(after.unschedulable) <= len(before.unschedulable)


def check_zone_affinity(snapshot: Snapshot, result: Plan) -> None:
    """zone-anti apps: at most one pod per zone; zone-affinity apps: a single zone."""
    nodes_by_name = {n.name: n for n in snapshot.nodes}
    zones: dict[str, list[str]] = {}
    for claim in result.new_claims:
        zone = claim.requirements.get(wk.ZONE)
        for key in claim.pods:
            app = key.split("/")[1].split("-")[0]
            if zone is not None and len(zone.values) == 1:
                zones.setdefault(app, []).append(next(iter(zone.values)))
            else:
                zones.setdefault(app, []).append("?")
    for key, name in result.placements.items():
        zones.setdefault(key.split("/")[1].split("-")[0], []).append(nodes_by_name[name].labels[wk.ZONE])
    kinds = {f"g{i}": p.spec.label_map["app"].rsplit("-", 1)[0] for i, p in enumerate(_firsts(snapshot))}
    for app, found in zones.items():
        if kinds.get(app) == "zone-anti":
            assert "?" not in found
            assert len(found) == len(set(found)), found
        if kinds.get(app) == "zone-affinity":
            assert len(set(found)) == 1, found
            assert "?" not in found


def _firsts(snapshot: Snapshot) -> list[Pod]:
    seen: dict[str, Pod] = {}
    for pod in snapshot.pods:
        seen.setdefault(pod.name.split("-")[0], pod)
    return [seen[k] for k in sorted(seen, key=lambda k: int(k[1:]))]


def check_followers(snapshot: Snapshot, result: Plan) -> None:
    """A pod with hostname affinity to the leaders (group 0) shares its node with one of them."""
    for claim in result.new_claims:
        names = [p.split("/")[1] for p in claim.pods]
        if any(n.split("-")[0] != "g0" and _is_follower(snapshot, n) for n in names):
            assert any(n.startswith("g0-") for n in names), names
    for key, node_name in result.placements.items():
        if _is_follower(snapshot, key.split("/")[1]):
            assert any(
                k.split("/")[1].startswith("g0-") and n == node_name for k, n in result.placements.items()
            )


def _is_follower(snapshot: Snapshot, name: str) -> bool:
    pod = next(p for p in snapshot.pods if p.name == name)
    return pod.spec.label_map["app"].startswith("follow-")
