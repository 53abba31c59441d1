"""The Lambda layer's package never imports the development side (sandbox, bench) or moto.

Checked on the source, lazy imports (inside functions) included: the layer ships without those
packages, so such an import would only fail in Lambda. The development side reaches the
``nodewright`` command through entry points instead (pyproject.toml, group ``nodewright.cli``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from sandbox.shared_data import REPO_ROOT

LAYER = REPO_ROOT / "layers" / "nodewright" / "nodewright"
FORBIDDEN = ("sandbox", "bench", "moto")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import statement in ``path``, at any depth, plus importlib calls
    with a literal module name (locating a package's data files, ``find_spec``, is not importing it)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def test_no_layer_module_imports_the_development_side_or_moto() -> None:
    offending = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {module}"
        for path in sorted(LAYER.rglob("*.py"))
        for line, module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN
    ]
    assert not offending, "the layer must not import the development side:\n" + "\n".join(offending)


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def run():\n    from sandbox import Sandbox\n    import moto.ec2\n"
        "    importlib.import_module('bench.latency')\n"
    )
    assert [m for _, m in imported_modules(sample)] == ["sandbox", "moto.ec2", "bench.latency"]
