"""What the interruption handler tests share: the owned instance, owned nodes, a counting replacement."""

from __future__ import annotations

from typing import Any

INSTANCE = "i-0aaaaaaaaaaaaaaa1"


def owned_nodes(world: Any, series: str, count: int, *, with_pods: bool = True) -> list[str]:
    """``count`` nodes this cluster owns, ``node-<i>`` with NodeClaim ``default-<i>`` on instance
    ``i-0aaaaaaaaaaaaa<series><i:02d>`` (a batch's warnings name them), each with a ``web-<i>`` pod
    unless ``with_pods`` is False; returns the instance ids."""
    instances = [f"i-0aaaaaaaaaaaaa{series}{i:02d}" for i in range(count)]
    for i, instance in enumerate(instances):
        world.node(f"node-{i}", instance)
        world.nodeclaim(f"default-{i}", instance, f"node-{i}")
        if with_pods:
            world.pod(f"web-{i}", f"node-{i}", labels={"app": "web"})
    return instances


class CountingReplacement:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.during: Any = None  # run while "in progress" (to deliver the same event on the other path)

    pending_keys: frozenset[str] = frozenset()

    def __call__(self, ctx, node_names, *, guard=None):
        self.calls.append(list(node_names))
        if self.during:
            self.during()
        return self

    def summary(self) -> dict[str, Any]:
        return {"created": [f"replacement-{len(self.calls)}"]}
