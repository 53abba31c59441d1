"""The layer's dependency direction, checked on its imports (every import, lazy ones included).

* the scheduling core imports nothing of Nodewright but itself and ``api`` (and of the kubernetes
  package only its quantity parser; never boto3): it stays a pure simulation;
* a flow (provisioning, disruption, interruption) never imports another flow — what two flows
  share lives in ``state`` or ``termination`` — except the two entry points of provisioning:
  ``replace_for_displaced`` that interruption calls and ``launch_replacements`` that disruption calls;
* ``state`` and ``termination``, which the flows share, import no flow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

LAYER = Path(__file__).resolve().parents[2] / "layers" / "nodewright" / "nodewright"
FLOWS = ("provisioning", "disruption", "interruption")
SHARED = ("state", "termination")
# (importing flow, imported module, imported name): the explicit exceptions.
ALLOWED = {
    ("interruption", "nodewright.provisioning", "replace_for_displaced"),
    ("disruption", "nodewright.provisioning", "launch_replacements"),
}
SCHEDULING_THIRD_PARTY = ("kubernetes.utils.quantity",)


def imports(source: str, module: str, *, is_package: bool = False) -> Iterator[tuple[str, str | None]]:
    """(imported module, imported name or None) for every import in ``source`` (``module``'s)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                yield base, alias.name


def part_of(module: str) -> str | None:
    """The top-level package of the layer a module belongs to (``nodewright.state.pods`` → state)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "nodewright" else None


def violations(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """What ``module`` (its ``source``) imports against the rules of this file's docstring."""
    owner = part_of(module)
    found = []
    for imported, name in imports(source, module, is_package=is_package):
        # ``from nodewright import provisioning`` imports the package ``nodewright.provisioning``.
        target = f"{imported}.{name}" if imported == "nodewright" and name else imported
        target_part = part_of(target)
        if owner == "scheduling":
            if target.startswith("nodewright.") and target_part not in ("scheduling", "api"):
                found.append(f"{module} imports {target}: the scheduling core imports only itself and api")
            top = target.split(".")[0]
            if top in ("boto3", "botocore") or (
                top == "kubernetes" and not target.startswith(SCHEDULING_THIRD_PARTY)
            ):
                found.append(f"{module} imports {target}: the scheduling core does no I/O")
        crossing = owner in FLOWS + SHARED and target_part in FLOWS and target_part != owner
        if crossing and (owner, imported, name) not in ALLOWED:
            found.append(f"{module} imports {target}{'.' + name if name else ''}: flows share via state")
    return found


def layer_modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(LAYER.rglob("*.py")):
        relative = path.relative_to(LAYER.parent).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        yield ".".join(parts), path


def test_the_layer_keeps_its_dependency_direction() -> None:
    modules = list(layer_modules())
    assert any(m.startswith("nodewright.scheduling.") for m, _ in modules), "did the layer move?"
    problems = [
        v
        for module, path in modules
        for v in violations(path.read_text(), module, is_package=path.name == "__init__.py")
    ]
    assert problems == []


def test_interruption_reaches_provisioning_only_through_replace_for_displaced() -> None:
    source = (LAYER / "interruption" / "flow.py").read_text()
    assert ("nodewright.provisioning", "replace_for_displaced") in set(
        imports(source, "nodewright.interruption.flow")
    ), "the one allowed crossing is still where this test expects it"


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("nodewright.scheduling.model", "from nodewright.state import pods", "imports only itself and api"),
        ("nodewright.scheduling.model", "def f():\n    import boto3\n", "does no I/O"),
        ("nodewright.scheduling.model", "from kubernetes import client", "does no I/O"),
        ("nodewright.scheduling.model", "from ..cluster import objects", "imports only itself and api"),
        ("nodewright.disruption.flow", "from nodewright.provisioning import planning", "share via state"),
        ("nodewright.disruption.flow", "from nodewright import provisioning", "share via state"),
        ("nodewright.provisioning.flow", "import nodewright.interruption.events", "share via state"),
        ("nodewright.state.world", "from nodewright.disruption import decide", "share via state"),
        (
            "nodewright.disruption.flow",
            "from nodewright.provisioning import replace_for_displaced",
            "share via state",
        ),
    ],
)
def test_the_check_catches_a_crossing(module: str, source: str, expected: str) -> None:
    found = violations(source, module)
    assert len(found) == 1
    assert expected in found[0]


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("nodewright.scheduling.model", "from nodewright.api.tolerations import Toleration"),
        ("nodewright.scheduling.resources", "from kubernetes.utils.quantity import parse_quantity"),
        ("nodewright.scheduling.scheduler", "from .model import Pod"),
        ("nodewright.interruption.flow", "from nodewright.provisioning import replace_for_displaced"),
        ("nodewright.disruption.flow", "from nodewright.state import pods"),
        ("nodewright.disruption.execute", "from nodewright.provisioning import launch_replacements"),
        ("nodewright.disruption.flow", "from nodewright import termination"),
    ],
)
def test_the_check_lets_the_allowed_imports_pass(module: str, source: str) -> None:
    assert violations(source, module) == []


# Termination owns every finish of a node: no module outside ``termination`` deletes a Node, removes
# the ``karpenter.sh/termination`` finalizer (the only finalizer the layer removes) or terminates an
# instance; the others ask (``termination.request``, or deleting the NodeClaim). ``cloud`` and
# ``cluster`` define those calls and are not controllers.
FINISHING_CALLS = {
    "delete_node": "deletes a Node",
    "remove_finalizer": "removes a finalizer",
    "delete_by_nodeclaim": "terminates instances",
    "terminate_instances": "terminates instances",
}
FINISH_OWNERS = ("termination", "cloud", "cluster")
FUNCTIONS = LAYER.parents[2] / "functions"


def _receiver(node: ast.expr) -> str:
    """The last name of a call's receiver: ``ctx.cloud.delete`` → ``cloud``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def finishes(source: str, module: str) -> list[str]:
    """Where ``module`` (its ``source``) finishes a node itself instead of asking termination."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, receiver = node.func.attr, _receiver(node.func.value)
        first = node.args[0] if node.args else None
        if name in FINISHING_CALLS:
            what = FINISHING_CALLS[name]
        elif name == "delete" and receiver in ("cloud", "provider"):
            what = "terminates an instance"
        elif name == "delete" and isinstance(first, ast.Name) and first.id == "NODES":
            what = "deletes a Node"
        else:
            continue
        found.append(f"{module}:{node.lineno} {what} ({receiver}.{name}): ask termination instead")
    return found


def test_only_termination_finishes_a_node() -> None:
    sources = [(m, p) for m, p in layer_modules() if part_of(m) not in FINISH_OWNERS]
    sources += [(f"functions.{p.parent.name}.app", p) for p in sorted(FUNCTIONS.glob("*/app.py"))]
    assert any(m == "nodewright.provisioning.lifecycle" for m, _ in sources), "did the layer move?"
    assert any(m.startswith("functions.") for m, _ in sources), "did the functions move?"
    assert [f for module, path in sources for f in finishes(path.read_text(), module)] == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("ctx.cluster.delete_node(name)", "deletes a Node"),
        ("ctx.cluster.remove_finalizer(NODECLAIMS, name, TERMINATION_FINALIZER)", "removes a finalizer"),
        ("ctx.cloud.delete(instance_id)", "terminates an instance"),
        ("cloud.delete_by_nodeclaim(name)", "terminates instances"),
        ("ctx.cluster.delete(NODES, name)", "deletes a Node"),
    ],
)
def test_the_finish_check_catches_a_controller_finishing_a_node(source: str, expected: str) -> None:
    [found] = finishes(source, "nodewright.provisioning.lifecycle")
    assert expected in found


def test_the_finish_check_lets_asking_pass() -> None:
    source = (
        "ctx.cluster.delete_nodeclaim(name)\n"
        "termination.request(ctx, nodeclaim=c, node=n, instance_id=i, asked=asked)\n"
        "ctx.cluster.delete(PODS, name, namespace='default')\n"
    )
    assert finishes(source, "nodewright.disruption.flow") == []


def test_the_webhooks_module_imports_neither_the_kubernetes_client_nor_boto3() -> None:
    """The webhook function's cold start is on kube-apiserver's path (a CRD conversion, the wake-up):
    its module, token bucket included (``nodewright.ratelimit``), must not pull in the kubernetes
    client, boto3 or ``nodewright.cluster``. Checked in a fresh interpreter, where nothing is
    imported already."""
    import subprocess
    import sys

    probe = (
        "import sys, nodewright.wakeup.webhook; "
        "print(sorted({m.split('.')[0] if not m.startswith('nodewright') else m for m in sys.modules "
        "if m.startswith(('kubernetes', 'boto3', 'botocore', 'nodewright.cluster'))}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=LAYER.parent
    ).stdout
    assert out.strip() == "[]"
