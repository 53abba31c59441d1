"""The shared Lambda layer (package ``nodewright`` and its runtime dependencies).

Built by ``infra.layer_build`` (pip for the Lambda platform, no Docker) and cached by
a hash of its inputs, which is also the asset hash: an unchanged layer is not
re-uploaded nor re-published. A prebuilt directory (context ``layerAssetDir``, holding
``python/``) replaces the build, which keeps the infra unit tests fast.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import AssetHashType, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities import acknowledge
from infra.layer_build import RUNTIME_PYTHON, build_layer

ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
RUNTIME = lambda_.Runtime.PYTHON_3_13


def acknowledge_pinned_runtime(function: Construct) -> None:
    """Every function runs the one runtime the layer is built for: the two "latest runtime" rules."""
    reason = (
        f"{RUNTIME.name}: the layer's bytecode and pinned wheels are built and tested for this "
        "version; moving on means changing RUNTIME_PYTHON in infra/layer_build.py too"
    )
    acknowledge.nag(function, "AwsSolutions-L1", reason)
    acknowledge.nag(function, "Serverless-LambdaLatestVersion", reason)


assert RUNTIME.name == f"python{RUNTIME_PYTHON}", "the layer's bytecode must match the functions' runtime"


class NodewrightLayer(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, arch: str, asset_dir: Path | None) -> None:
        super().__init__(scope, construct_id)
        if asset_dir is not None:
            if not (asset_dir / "python").is_dir():
                raise FileNotFoundError(
                    f"layerAssetDir {asset_dir} has no python/ folder: point it at a built layer "
                    "(python -m infra.layer_build prints one) or drop the context to build it"
                )
            code = lambda_.Code.from_asset(str(asset_dir))
        else:
            built = build_layer(arch)
            code = lambda_.Code.from_asset(
                str(built.root), asset_hash=built.input_hash, asset_hash_type=AssetHashType.CUSTOM
            )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=code,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURES[arch]],
            description="Nodewright: the autoscaler's code and its runtime dependencies",
            # CloudFormation deletes the old version only after the functions moved to the
            # new one, and `cdk destroy` leaves no layer behind.
            removal_policy=RemovalPolicy.DESTROY,
        )
