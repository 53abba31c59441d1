"""Node selector requirements algebra: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte and minValues.

A requirement is a set of allowed values for one label key, kept in one of two shapes:
an explicit set (``In``; ``DoesNotExist`` is the empty set) or a complement (everything except
``values``; ``NotIn``, ``Exists``, ``Gt`` and ``Lt`` are complements, the last two with integer
bounds). Intersection is closed over these shapes, which is what NodePool x pod x instance-type
compatibility needs. Semantics follow Karpenter's ``scheduling.Requirements``.

``Gte`` and ``Lte`` are Karpenter's own operators (v1.9, kubernetes-sigs/karpenter#2674; Kubernetes'
node affinity has only ``Gt``/``Lt``): ``Gte N`` allows integer values >= N, ``Lte N`` <= N. As
Karpenter, they and ``Gt``/``Lt`` are one bound each: ``Gte N`` is kept as ``Gt N-1`` and ``Lte N``
as ``Lt N+1`` (Karpenter keeps the other direction, ``Gt N`` as ``Gte N+1``: the same set of values),
so a NodeClaim Karpenter wrote with ``Gte`` reads as the NodePool's ``Gt`` it came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from nodewright.api.labels import WELL_KNOWN_LABELS, is_restricted_label, normalized_label

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
GTE = "Gte"
LTE = "Lte"
OPERATORS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE})


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """Allowed values of one label key."""

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    greater_than: int | None = None
    less_than: int | None = None
    min_values: int | None = None

    @classmethod
    def create(
        cls, key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None
    ) -> Requirement:
        """From the Kubernetes form; raises ValueError with the offending operator or value.

        Alias keys (``beta.kubernetes.io/arch``, ``topology.ebs.csi.aws.com/zone``...) become the
        well-known key, as Karpenter normalizes them.
        """
        key = normalized_label(key)
        values = [str(v) for v in values]
        if operator == IN:
            return cls(key, False, frozenset(values), min_values=min_values)
        if operator == NOT_IN:
            return cls(key, True, frozenset(values), min_values=min_values)
        if operator == EXISTS:
            return cls(key, True, min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False)
        if operator in (GT, LT, GTE, LTE):
            bound = _as_int(values[0]) if len(values) == 1 else None
            if bound is None:
                raise ValueError(
                    f"requirement {key} {operator} needs exactly one integer value, got {values}"
                )
            if operator in (GT, GTE):
                lower = bound if operator == GT else bound - 1
                return cls(key, True, greater_than=lower, min_values=min_values)
            upper = bound if operator == LT else bound + 1
            return cls(key, True, less_than=upper, min_values=min_values)
        raise ValueError(f"requirement {key}: unknown operator {operator!r} (use one of {sorted(OPERATORS)})")

    def _in_bounds(self, value: str) -> bool:
        if self.greater_than is None and self.less_than is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        if self.greater_than is not None and number <= self.greater_than:
            return False
        return self.less_than is None or number < self.less_than

    def has(self, value: str) -> bool:
        """Whether a node whose label ``key`` equals value satisfies this requirement."""
        if self.complement:
            return value not in self.values and self._in_bounds(value)
        return value in self.values and self._in_bounds(value)

    @property
    def allows_absent(self) -> bool:
        """Whether a node without the label satisfies it (NotIn and DoesNotExist do)."""
        return self.operator in (NOT_IN, DOES_NOT_EXIST)

    @property
    def operator(self) -> str:
        if self.complement:
            if self.greater_than is not None:
                return GT
            if self.less_than is not None:
                return LT
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def is_empty(self) -> bool:
        """No value satisfies it (DoesNotExist, or an intersection with nothing in common)."""
        if not self.complement:
            return not self.values
        lo, hi = self.greater_than, self.less_than
        return lo is not None and hi is not None and hi - lo <= 1

    def intersect(self, other: Requirement) -> Requirement:
        greater = max((b for b in (self.greater_than, other.greater_than) if b is not None), default=None)
        less = min((b for b in (self.less_than, other.less_than) if b is not None), default=None)
        min_values = max((m for m in (self.min_values, other.min_values) if m is not None), default=None)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, greater, less, min_values)
        if self.complement:
            values = frozenset(v for v in other.values if self.has(v))
        elif other.complement:
            values = frozenset(v for v in self.values if other.has(v))
        else:
            values = self.values & other.values
        bounded = Requirement(self.key, False, values, greater, less)
        return Requirement(
            self.key, False, frozenset(v for v in values if bounded.has(v)), None, None, min_values
        )

    def any_value(self) -> str | None:
        """One value that satisfies it, as Karpenter's ``Requirement.Any``: the smallest ``In`` value;
        for ``NotIn``, ``Exists``, ``Gt`` and ``Lt`` the smallest allowed non-negative integer (Karpenter
        draws a random one; determinism serves tests and repeatable plans); None when nothing does."""
        if not self.complement:
            return min(self.values) if self.values else None
        if self.is_empty():
            return None
        if self.greater_than is not None:
            start = self.greater_than + 1
        elif self.less_than is not None and self.less_than <= 0:
            start = self.less_than - 1 - len(self.values)
        else:
            start = 0
        for number in range(start, start + len(self.values) + 1):
            if self.has(str(number)):
                return str(number)
        return None

    def to_k8s(self) -> list[dict[str, object]]:
        """The NodeSelectorRequirement terms (plus ``minValues`` on the first), as a NodeClaim spec
        holds them: one term per part of the conjunction, so ``Gt 2`` and ``Lt 9`` on one key (a
        NodePool's lower bound met by a pod's upper one) are both kept, and so is ``NotIn`` beside them."""
        terms: list[dict[str, object]] = []
        if not self.complement:
            operator = IN if self.values else DOES_NOT_EXIST
            terms.append(
                {
                    "key": self.key,
                    "operator": operator,
                    **({"values": sorted(self.values)} if self.values else {}),
                }
            )
        else:
            if self.values:
                terms.append({"key": self.key, "operator": NOT_IN, "values": sorted(self.values)})
            if self.greater_than is not None:
                terms.append({"key": self.key, "operator": GT, "values": [str(self.greater_than)]})
            if self.less_than is not None:
                terms.append({"key": self.key, "operator": LT, "values": [str(self.less_than)]})
            if not terms:
                terms.append({"key": self.key, "operator": EXISTS})
        if self.min_values is not None:
            terms[0]["minValues"] = self.min_values
        return terms

    def __str__(self) -> str:
        operator = self.operator
        if operator in (IN, NOT_IN):
            return f"{self.key} {operator} [{', '.join(sorted(self.values))}]"
        if operator == GT:
            return f"{self.key} Gt {self.greater_than}"
        if operator == LT:
            return f"{self.key} Lt {self.less_than}"
        return f"{self.key} {operator}"


class Requirements(Mapping[str, Requirement]):
    """An immutable, hashable conjunction of requirements keyed by label."""

    __slots__ = ("_by_key", "_hash")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        by_key: dict[str, Requirement] = {}
        for requirement in requirements:
            existing = by_key.get(requirement.key)
            by_key[requirement.key] = existing.intersect(requirement) if existing else requirement
        self._by_key = by_key
        self._hash: int | None = None

    @classmethod
    def from_k8s(cls, terms: Iterable[Mapping[str, object]] | None) -> Requirements:
        """From a list of ``{key, operator, values, minValues}`` (NodeSelectorRequirement) dicts."""
        return cls(
            Requirement.create(
                str(t["key"]),
                str(t.get("operator", IN)),
                t.get("values") or (),  # type: ignore[arg-type]
                t.get("minValues"),  # type: ignore[arg-type]
            )
            for t in terms or ()
        )

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """Single-value ``In`` requirements (a nodeSelector, labels), alias keys normalized."""
        return cls(Requirement(normalized_label(k), False, frozenset({v})) for k, v in labels.items())

    def __getitem__(self, key: str) -> Requirement:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._by_key.values()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self._by_key == other._by_key

    def __repr__(self) -> str:
        return f"Requirements({'; '.join(str(r) for _, r in sorted(self._by_key.items()))})"

    def intersect(self, other: Requirements) -> Requirements:
        if not other:
            return self
        if not self:
            return other
        return Requirements([*self._by_key.values(), *other._by_key.values()])

    def with_requirement(self, requirement: Requirement) -> Requirements:
        return Requirements([*self._by_key.values(), requirement])

    def conflict(self, incoming: Requirements, allow_undefined: frozenset[str] = frozenset()) -> str | None:
        """Why ``incoming`` (a pod's) cannot be met by nodes with these requirements, or None.

        As Karpenter's ``Compatible``: keys both define must intersect (unless both only exclude
        values); a key only the pod requires to exist must be well-known (``allow_undefined``),
        since the node would otherwise not carry the label.
        """
        for key, wanted in incoming._by_key.items():
            have = self._by_key.get(key)
            if have is None:
                if not wanted.allows_absent and key not in allow_undefined:
                    return f"label {key} is not defined (requires {wanted})"
                continue
            if have.intersect(wanted).is_empty() and not (have.allows_absent and wanted.allows_absent):
                return f"{wanted} conflicts with {have}"
        return None

    def matches_labels(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with exactly these labels satisfies every requirement."""
        for key, requirement in self._by_key.items():
            value = labels.get(key)
            if value is None:
                if not requirement.allows_absent:
                    return False
            elif not requirement.has(value):
                return False
        return True

    def labels(self) -> dict[str, str]:
        """Labels a node gets from single-valued ``In`` requirements."""
        return {
            k: next(iter(r.values))
            for k, r in self._by_key.items()
            if not r.complement and len(r.values) == 1
        }

    def node_labels(self) -> dict[str, str]:
        """The labels a new NodeClaim takes from these requirements, as Karpenter's
        ``Requirements.Labels()``: ``labels()`` (single-valued ``In``, well-known keys included), plus
        ``any_value`` of every other requirement on a key that is neither well known nor restricted
        (``custom In [a, b]`` labels the node ``custom=a``). Requirement drift checks a NodeClaim's
        labels against its NodePool's requirements, so a node without them would drift at birth."""
        found = self.labels()
        for key, requirement in self._by_key.items():
            if key in found or key in WELL_KNOWN_LABELS or is_restricted_label(key):
                continue
            value = requirement.any_value()
            if value is not None:
                found[key] = value
        return found

    def to_k8s(self) -> list[dict[str, object]]:
        return [term for k in sorted(self._by_key) for term in self._by_key[k].to_k8s()]
