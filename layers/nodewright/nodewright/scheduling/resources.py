"""Resource quantities as plain integers, parsed with the kubernetes client's quantity parser.

Canonical units: ``cpu`` in millicores, every other resource (memory, ephemeral-storage, pods,
extended resources such as ``nvidia.com/gpu``) in its base unit (bytes or a count), rounded up.
Integers keep the arithmetic exact and fast; the scheduler adds and compares millions of them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity as _client_parse_quantity

# The client's parser carries no annotations; this is its contract (the one import of it).
parse_quantity: Callable[[str | int | float], Decimal] = _client_parse_quantity

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
NODES = "nodes"  # a NodePool limit only: counts NodeClaims
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
NEURON = "aws.amazon.com/neuron"
HABANA_GAUDI = "habana.ai/gaudi"
EFA = "vpc.amazonaws.com/efa"

MIB = 1024 * 1024
GIB = 1024 * MIB

Resources = dict[str, int]


def parse_resource(name: str, value: str | int | float) -> int:
    """One quantity in canonical units; raises ValueError naming the resource when malformed.

    Remembered per (resource, value): a cluster's pods repeat a few request strings (50,000 pods of
    a handful of workloads hold a handful of distinct quantities), and every simulation parses each
    container of each pod; the client's parser goes through ``Decimal`` each time. Only plain
    strings and numbers are remembered (anything else, a malformed manifest's list say, is parsed
    as it comes and fails as it would); a failure is not remembered."""
    if type(value) in (str, int, float):
        return _parse_resource_remembered(name, value)
    return _parse_resource(name, value)


# Bounded: an adversarial cluster with a distinct quantity on every pod costs at most this many entries.
@functools.lru_cache(maxsize=4096)
def _parse_resource_remembered(name: str, value: str | int | float) -> int:
    return _parse_resource(name, value)


def _parse_resource(name: str, value: str | int | float) -> int:
    try:
        quantity = parse_quantity(value)
    except ValueError as err:
        raise ValueError(f"{name}: {value!r} is not a Kubernetes quantity ({err})") from None
    if name == CPU:
        quantity *= 1000
    return math.ceil(quantity)


def parse_resources(values: Mapping[str, str | int | float] | None) -> Resources:
    """A ``{"cpu": "500m", "memory": "1Gi"}`` mapping in canonical units."""
    return {name: parse_resource(name, value) for name, value in (values or {}).items()}


def add(total: Resources, other: Mapping[str, int]) -> Resources:
    """``total += other`` in place; returns total."""
    for name, value in other.items():
        total[name] = total.get(name, 0) + value
    return total


def subtract(left: Mapping[str, int], right: Mapping[str, int]) -> Resources:
    """``left - right`` as a new mapping (values may go negative: callers check ``fits``)."""
    result = dict(left)
    for name, value in right.items():
        result[name] = result.get(name, 0) - value
    return result


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """Whether every requested resource is available (a missing resource has zero capacity)."""
    return all(value <= 0 or free.get(name, 0) >= value for name, value in request.items())


def merge_max(items: Iterable[Mapping[str, int]]) -> Resources:
    """Per-resource maximum, as the scheduler takes it over init containers."""
    result: Resources = {}
    for item in items:
        for name, value in item.items():
            if value > result.get(name, 0):
                result[name] = value
    return result


def pod_requests(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[Mapping[str, int]] = (),
    overhead: Mapping[str, int] | None = None,
    sidecars: Iterable[Mapping[str, int]] = (),
) -> Resources:
    """Effective pod requests as kube-scheduler computes them.

    max(sum(containers) + sum(sidecars), max over init containers of (its request + the
    sidecars, counted as all started)) + pod overhead, plus one ``pods`` slot.
    Sidecars are init containers with ``restartPolicy: Always``; they keep running, so they
    count with the main containers.
    """
    total: Resources = {}
    for container in containers:
        add(total, container)
    running_sidecars: Resources = {}
    for sidecar in sidecars:
        add(running_sidecars, sidecar)
    # Conservative: every sidecar is counted as already running while each init container runs.
    init_peak = merge_max(add(dict(init), running_sidecars) for init in init_containers)
    add(total, running_sidecars)
    result = merge_max([total, init_peak])
    if overhead:
        add(result, overhead)
    result[PODS] = result.get(PODS, 0) + 1
    return {name: value for name, value in result.items() if value > 0}


def format_resource(name: str, value: int) -> str:
    """A readable quantity for messages (``cpu: 1500m``, ``memory: 2Gi``, ``nvidia.com/gpu: 2``)."""
    if name == CPU:
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    if name in (MEMORY, EPHEMERAL_STORAGE):
        for unit, size in (("Gi", GIB), ("Mi", MIB), ("Ki", 1024)):
            if value % size == 0:
                return f"{value // size}{unit}"
        return str(value)
    return str(value)
