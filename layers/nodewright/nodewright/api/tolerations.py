"""Whether a toleration tolerates a taint: the Kubernetes rule, written once.

The scheduling core (placement) and the pod predicates (``state.pods``: does a pod tolerate the
``karpenter.sh/disrupted`` taint?) both ask it, so it lives here, beneath both. Pure and cheap to
import: no kubernetes client.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class TaintLike(Protocol):
    """Anything with a taint's three fields (the scheduling core's ``Taint``, for one)."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str: ...

    @property
    def effect(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    @classmethod
    def from_k8s(cls, d: Mapping[str, Any]) -> Toleration:
        """Raises ValueError for a field that is not a string (a file no API server has validated).

        Remembered per distinct toleration: the pods of a cluster repeat a few (every pod carries
        the two ``not-ready``/``unreachable`` ones the API server adds), and every simulation reads
        every pod's."""
        try:
            return _remembered(tuple(d.items()))
        except TypeError:  # a value that cannot be a dict key (a list, say): read it as it comes
            return cls._read(d)

    @classmethod
    def _read(cls, d: Mapping[str, Any]) -> Toleration:
        fields = {"key": "", "operator": "Equal", "value": "", "effect": ""}
        for name, default in fields.items():
            value = d.get(name) or default
            if not isinstance(value, str):
                raise ValueError(f"toleration {name} must be a string, not {type(value).__name__}")
            fields[name] = value
        return cls(**fields)

    def tolerates(self, taint: TaintLike) -> bool:
        return self.matches(taint.key, taint.value, taint.effect)

    def matches(self, key: str, value: str, effect: str) -> bool:
        """An empty effect matches every effect; an empty key with ``Exists`` matches every taint."""
        if self.effect and self.effect != effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != key:
            return False
        return self.operator == "Exists" or self.value == value


# Bounded: a cluster with a distinct toleration on every pod costs at most this many entries.
@functools.lru_cache(maxsize=4096)
def _remembered(items: tuple[tuple[str, Any], ...]) -> Toleration:
    return Toleration._read(dict(items))
