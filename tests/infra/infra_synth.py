"""Synthesis helpers shared by the infra tests (a module, so tests can import them)."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STACK = "Nodewright-demo"


@dataclass(frozen=True)
class Synth:
    """One synthesized stack: its template (dict and assertions object) and file path."""

    template: dict[str, Any]
    path: Path
    app: Any

    @property
    def assertions(self) -> Any:
        from aws_cdk.assertions import Template

        return Template.from_json(self.template)

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}

    def one(self, kind: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(kind)
        assert len(found) == 1, f"expected one {kind}, found {sorted(found)}"
        return next(iter(found.items()))


def synth_app(context: dict[str, Any], outdir: Path, stack: str = STACK) -> Synth:
    """Synthesize like `cdk synth` does (cdk-nag plugins included: a finding raises)."""
    from infra.app import build_app

    app = build_app(context, outdir=str(outdir))
    assembly = app.synth()
    path = Path(assembly.get_stack_by_name(stack).template_full_path)
    return Synth(json.loads(path.read_text()), path, app)


def cfn_tool(name: str) -> str:
    """A console script installed next to the interpreter (the venv's bin/)."""
    path = Path(sys.executable).parent / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} is not installed: run `make .venv/.installed`"
    return found
