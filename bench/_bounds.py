"""Yardsticks for a plan's cost: the assignment-LP lower bound, the exact single-shape optimum,
and a first-fit-decreasing baseline on one fixed instance type.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

RESOURCES = ("cpu", "memory", "pods")


@dataclass(frozen=True, slots=True)
class Shape:
    """``count`` pods requesting ``cpu`` millicores and ``memory`` bytes (one ``pods`` slot each)."""

    cpu: int
    memory: int
    count: int


@dataclass(frozen=True, slots=True)
class Bin:
    """A purchasable node: its price and allocatable (cpu millicores, memory bytes, pods)."""

    name: str
    price: float
    cpu: int
    memory: int
    pods: int

    def holds(self, shape: Shape) -> int:
        """How many pods of the shape one node holds."""
        limits = [self.pods]
        if shape.cpu:
            limits.append(self.cpu // shape.cpu)
        if shape.memory:
            limits.append(self.memory // shape.memory)
        return min(limits)


def assignment_lp_bound(shapes: Sequence[Shape], bins: Sequence[Bin]) -> float:
    """The assignment-LP lower bound on the $/h of any plan that uses only ``bins``' types.

    Variables: x_t ≥ 0 (nodes of type t, real) and z_st ≥ 0 (pods of shape s on type t, real).
    Minimise Σ_t price_t·x_t subject to
      (cover)    Σ_t z_st ≥ count_s                          for every shape s,
      (capacity) Σ_s request_s,r·z_st ≤ allocatable_t,r·x_t   for every type t and r ∈ {cpu, memory, pods},
      (fit)      z_st = 0 when one pod of s does not fit on an empty t.

    Proof that it is a lower bound. Take any integral plan: n_t nodes of type t, and m_st pods of
    shape s placed on nodes of type t, every pod placed, every node within its allocatable. Set
    x_t = n_t and z_st = m_st. Cover holds because every pod is placed. Capacity holds because it
    is the sum, over the n_t nodes of type t, of each node's own allocatable inequality. Fit holds
    because a pod only sits on a node it fits. So (x, z) is feasible and its objective equals the
    plan's cost Σ_t price_t·n_t; the LP minimum is therefore ≤ the cost of every plan. Plans with
    further constraints (topology, caps) are a subset of these plans, so the bound still holds for
    them; plans restricted to a NodePool's types are bounded by the LP over those types (``bins``).
    Unlike the plain resource LP, z_st ties each pod to one type, so the LP cannot buy cpu on one
    type and memory on another for the same pod.

    Dominated types are left out first (``_undominated``): that leaves the minimum unchanged and
    makes the LP about seven times smaller (a 1,049-type catalog keeps about 150), seconds less
    for HiGHS on every run.
    """
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    bins = [b for b in _undominated(bins) if any(b.holds(s) > 0 for s in shapes)]
    n_types = len(bins)
    variables: list[tuple[int, int]] = []  # (shape, type) for z
    for s, shape in enumerate(shapes):
        for t, node in enumerate(bins):
            if node.holds(shape) > 0:
                variables.append((s, t))
    n_vars = n_types + len(variables)
    cost = np.zeros(n_vars)
    cost[:n_types] = [b.price for b in bins]
    rows, cols, vals = [], [], []
    n_shapes = len(shapes)
    scales = {r: float(max(getattr(b, r) for b in bins) or 1) for r in RESOURCES}

    # Rows 0..S-1 cover (-Σ_t z_st ≤ -count_s); then one capacity row per (resource, type):
    # Σ_s req·z_st - alloc·x_t ≤ 0, scaled per resource to keep HiGHS well conditioned.
    def capacity_row(r_index: int, t: int) -> int:
        return n_shapes + r_index * n_types + t

    for k, (s, t) in enumerate(variables):
        rows.append(s)
        cols.append(n_types + k)
        vals.append(-1.0)
        shape = shapes[s]
        for r_index, r in enumerate(RESOURCES):
            request = 1 if r == "pods" else getattr(shape, r)
            if request:
                rows.append(capacity_row(r_index, t))
                cols.append(n_types + k)
                vals.append(request / scales[r])
    for r_index, r in enumerate(RESOURCES):
        for t, node in enumerate(bins):
            rows.append(capacity_row(r_index, t))
            cols.append(t)
            vals.append(-getattr(node, r) / scales[r])
    row = n_shapes + len(RESOURCES) * n_types
    rhs = [-float(shape.count) for shape in shapes] + [0.0] * (len(RESOURCES) * n_types)
    matrix = coo_matrix((vals, (rows, cols)), shape=(row, n_vars)).tocsr()
    result = linprog(cost, A_ub=matrix, b_ub=np.array(rhs), bounds=(0, None), method="highs")
    if result.status != 0:
        raise RuntimeError(f"assignment LP failed: {result.message}")
    return float(result.fun)


def _undominated(bins: Sequence[Bin]) -> list[Bin]:
    """The types no other type dominates (at most its price, at least its cpu, memory and pods).

    Dropping a dominated type t keeps the LP minimum: given t's dominator d, any feasible (x, z)
    moves to one without t by adding x_t to x_d and z_st to z_sd. Cover is unchanged; d's capacity
    rows gain at most what t's lost, since d's allocatable is at least t's in every resource; fit
    holds, since a pod that fits on an empty t fits on an empty d; and the cost does not rise,
    since d's price is at most t's. Of equal types the first by name stays.
    """
    kept: list[Bin] = []
    for candidate in sorted(bins, key=lambda b: (b.price, -b.cpu, -b.memory, -b.pods, b.name)):
        if not any(
            k.cpu >= candidate.cpu and k.memory >= candidate.memory and k.pods >= candidate.pods for k in kept
        ):
            kept.append(candidate)
    return kept


def single_shape_optimum(shape: Shape, bins: Sequence[Bin]) -> tuple[float, dict[str, int]]:
    """The exact integral optimum for one pod shape: a covering knapsack solved by DP over pods.

    dp[k] = the cheapest set of nodes holding at least k pods; each type holds ``holds(shape)``.
    Dominated types (no more pods for no less money) are dropped first.
    """
    options: list[tuple[float, int, str]] = []
    for node in sorted(bins, key=lambda b: (b.price, -b.holds(shape), b.name)):
        capacity = node.holds(shape)
        if capacity > 0 and all(capacity > c for _, c, _ in options):
            options.append((node.price, capacity, node.name))
    n = shape.count
    best = [0.0] + [math.inf] * n
    choice = [-1] * (n + 1)
    for k in range(1, n + 1):
        for index, (price, capacity, _) in enumerate(options):
            candidate = best[max(0, k - capacity)] + price
            if candidate < best[k] - 1e-12:
                best[k] = candidate
                choice[k] = index
    nodes: dict[str, int] = {}
    k = n
    while k > 0:
        _, capacity, name = options[choice[k]]
        nodes[name] = nodes.get(name, 0) + 1
        k = max(0, k - capacity)
    return best[n], nodes


def ffd_cost(shapes: Sequence[tuple[Shape, str | None, int]], node: Bin) -> float | None:
    """First-fit decreasing onto one fixed type, as a Cluster Autoscaler node group would.

    ``shapes`` carry a cap group and per-node cap (hostname spread / anti-affinity); None when
    some pod does not fit the type at all.
    """
    loads: list[list[int]] = []  # cpu, memory, pods used
    capped: list[dict[str, int]] = []
    ordered = sorted(shapes, key=lambda item: (-item[0].cpu, -item[0].memory))
    for shape, group, cap in ordered:
        if node.holds(shape) < 1:
            return None
        left = shape.count
        index = 0
        while left:
            if index == len(loads):
                loads.append([0, 0, 0])
                capped.append({})
            load = loads[index]
            fit = min(
                node.pods - load[2],
                (node.cpu - load[0]) // shape.cpu if shape.cpu else left,
                (node.memory - load[1]) // shape.memory if shape.memory else left,
                left,
            )
            if group is not None:
                fit = min(fit, cap - capped[index].get(group, 0))
            if fit > 0:
                load[0] += shape.cpu * fit
                load[1] += shape.memory * fit
                load[2] += fit
                if group is not None:
                    capped[index][group] = capped[index].get(group, 0) + fit
                left -= fit
            index += 1
    return len(loads) * node.price
