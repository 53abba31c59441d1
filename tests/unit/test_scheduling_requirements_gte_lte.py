"""Karpenter's Gte/Lte operators (v1.9+) through the requirements algebra, and requirement terms
written back without losing a bound."""

from __future__ import annotations

import pytest
from nodewright.scheduling.requirements import Requirement, Requirements


@pytest.mark.parametrize(
    ("operator", "bound", "allowed", "refused"),
    [
        ("Gte", "3", ["3", "4", "10"], ["2", "0", "x"]),
        ("Lte", "8", ["8", "0", "7"], ["9", "10", "x"]),
        ("Gt", "3", ["4"], ["3"]),
        ("Lt", "8", ["7"], ["8"]),
    ],
)
def test_gte_and_lte_include_their_bound_where_gt_and_lt_exclude_it(
    operator: str, bound: str, allowed: list[str], refused: list[str]
) -> None:
    requirement = Requirement.create("karpenter.k8s.aws/instance-generation", operator, [bound])
    assert [v for v in allowed if requirement.has(v)] == allowed
    assert [v for v in refused if requirement.has(v)] == []


def test_gte_is_the_same_set_as_gt_one_less() -> None:
    """As Karpenter canonicalises them: a NodeClaim it wrote with Gte 3 matches its NodePool's Gt 2."""
    assert Requirement.create("k", "Gte", ["3"]) == Requirement.create("k", "Gt", ["2"])
    assert Requirement.create("k", "Lte", ["8"]) == Requirement.create("k", "Lt", ["9"])


def test_a_pool_lower_bound_and_a_pod_upper_bound_keep_both_when_written_back() -> None:
    pool = Requirements.from_k8s(
        [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]}]
    )
    pod = Requirements.from_k8s(
        [{"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["16"]}]
    )
    both = pool.intersect(pod)
    terms = both.to_k8s()
    assert terms == [
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["3"]},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["16"]},
    ]
    assert Requirements.from_k8s(terms) == both  # read back unchanged
    assert both.matches_labels({"karpenter.k8s.aws/instance-cpu": "4"})
    assert not both.matches_labels({"karpenter.k8s.aws/instance-cpu": "16"})


def test_an_empty_range_is_empty() -> None:
    gte = Requirement.create("k", "Gte", ["5"])
    lte = Requirement.create("k", "Lte", ["4"])
    assert gte.intersect(lte).is_empty()
    assert not gte.intersect(Requirement.create("k", "Lte", ["5"])).is_empty()
