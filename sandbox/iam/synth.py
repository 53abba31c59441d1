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
    from infra.app import build_app
    from infra.capabilities.cfn import resource_of
    from infra.stack import NodewrightStack, stack_name

    with tempfile.TemporaryDirectory(prefix="nodewright-iam-synth-") as tmp:
        root = Path(tmp)
        write_stubs(root)
        app = build_app(synth_context(root), outdir=str(root / "cdk.out"))
        assembly = app.synth()
        name = stack_name(PLACEHOLDER_CLUSTER)
        template = json.loads(Path(assembly.get_stack_by_name(name).template_full_path).read_text())
        stack = app.node.find_child(name)
        assert isinstance(stack, NodewrightStack)
        autoscaler = stack.autoscaler
        functions = dict(autoscaler.functions.functions)
        if autoscaler.wakeup is not None:
            functions["webhook"] = autoscaler.wakeup.function
        functions["cleanup"] = autoscaler.removal.function
        found = {}
        for function_name, function in functions.items():
            assert function.role is not None, f"{function_name}: every function is built with its own role"
            found[function_name] = {
                "function": stack.get_logical_id(resource_of(function)),
                "role": stack.get_logical_id(resource_of(function.role)),
            }
        created = autoscaler.node_role.created
        assert created is not None, "the synth's default settings create the node role"
        node_role = stack.get_logical_id(resource_of(created))
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
