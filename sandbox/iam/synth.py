"""``python -m sandbox.iam.synth OUT.json``: synthesize the stack and write what the sandbox needs.

Run in a child process (the CDK starts a jsii runtime: kept out of the sandbox's own process) by
:func:`sandbox.iam.policies.synthesized`, which caches the result. The stack is built by
``infra.app.build_app`` exactly as ``cdk synth -c clusterName=…`` builds it (cdk-nag included), for
the placeholder cluster :data:`PLACEHOLDER_CLUSTER`, with stub handlers and an empty layer: IAM
depends on neither, and building the layer needs pip. Written: the template, and for each
function the logical ids of its Lambda function and its role, read from the construct tree.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# Synthesized once for this name; the policies are then resolved for any sandbox's cluster by
# replacing it (tests/infra/test_infra_iam_eval.py holds that equal to a synth with the real name).
PLACEHOLDER_CLUSTER = "nwsandboxplaceholder"
FUNCTION_NAMES = ("provisioner", "disruption", "interruption", "spot_events", "pricing", "webhook", "cleanup")


def synth_context(stubs: Path) -> dict[str, Any]:
    """The context of the synth: the placeholder cluster and stub handlers/layer, nothing else
    (every other setting at the default a user deploys with)."""
    return {
        "clusterName": PLACEHOLDER_CLUSTER,
        "layerAssetDir": str(stubs / "layer"),
        "functionsDir": str(stubs / "functions"),
    }


def write_stubs(root: Path) -> None:
    (root / "layer" / "python").mkdir(parents=True, exist_ok=True)
    for name in FUNCTION_NAMES:
        (root / "functions" / name).mkdir(parents=True, exist_ok=True)
        (root / "functions" / name / "app.py").write_text("def handler(event, context):\n    return None\n")


def synthesize(out: Path) -> None:
    from aws_cdk import Stack

    from infra.app import build_app
    from infra.stack import stack_name

    with tempfile.TemporaryDirectory(prefix="nodewright-iam-synth-") as tmp:
        root = Path(tmp)
        write_stubs(root)
        app = build_app(synth_context(root), outdir=str(root / "cdk.out"))
        assembly = app.synth()
        name = stack_name(PLACEHOLDER_CLUSTER)
        template = json.loads(Path(assembly.get_stack_by_name(name).template_full_path).read_text())
        stack = app.node.find_child(name)
        assert isinstance(stack, Stack)
        autoscaler = stack.autoscaler  # type: ignore[attr-defined]
        functions = dict(autoscaler.functions.functions)
        if autoscaler.wakeup is not None:
            functions["webhook"] = autoscaler.wakeup.function
        functions["cleanup"] = autoscaler.removal.function
        found = {
            function_name: {
                "function": stack.get_logical_id(function.node.default_child),
                "role": stack.get_logical_id(function.role.node.default_child),
            }
            for function_name, function in functions.items()
        }
        node_role = stack.get_logical_id(autoscaler.node_role.created.node.default_child)
    out.write_text(
        json.dumps(
            {
                "cluster": PLACEHOLDER_CLUSTER,
                "stack": name,
                "functions": found,
                "nodeRole": node_role,
                "template": template,
            }
        )
    )


if __name__ == "__main__":
    synthesize(Path(sys.argv[1]))
