"""The Lambda layer build: what goes in, what is dropped, its size, and the real app's synth.

The slow test builds the real layer (pip for manylinux2014_aarch64; PyPI the first time,
then the cache under build/layer/) and synthesizes the app exactly as `cdk synth` does.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from infra_synth import synth_app

from infra import layer_build
from sandbox.shared_data import REPO_ROOT

ELF_MACHINE_AARCH64 = 183


def test_requirements_come_from_pyproject_without_what_the_runtime_ships() -> None:
    requirements = layer_build.runtime_requirements()
    names = [r.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() for r in requirements]
    assert "boto3" not in names
    assert "kubernetes==37.0.1" in requirements
    assert "python-dateutil>=2.8,<3" in requirements  # dateutil 3+ would shadow the runtime's botocore's
    assert any(r.startswith("aws-lambda-powertools[parser,tracer]") for r in requirements)


def test_cache_key_changes_with_the_architecture_and_is_stable() -> None:
    assert layer_build.input_hash("arm64") == layer_build.input_hash("arm64")
    assert layer_build.input_hash("arm64") != layer_build.input_hash("x86_64")


def test_unknown_architecture_is_refused() -> None:
    with pytest.raises(layer_build.LayerBuildError, match="use one of"):
        layer_build.build_layer("riscv64")


def test_prune_drops_runtime_provided_and_async_only_distributions_by_their_record(tmp_path: Path) -> None:
    site = tmp_path / "python"

    def install(dist: str, files: list[str]) -> None:
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir(parents=True)
        for name in files:
            (site / name).parent.mkdir(parents=True, exist_ok=True)
            (site / name).write_text("x = 1\n")
        (info / "RECORD").write_text("".join(f"{name},,\n" for name in files))

    install("botocore", ["botocore/__init__.py", "botocore/data/ec2.json"])
    install("aiohttp", ["aiohttp/__init__.py"])
    install("six", ["six.py"])
    (site / "kubernetes/aio/client").mkdir(parents=True)
    (site / "kubernetes/client").mkdir(parents=True)
    (site / "kubernetes/client/__init__.py").write_text("")
    (site / "croniter/tests").mkdir(parents=True)
    (site / "croniter/tests/test_x.py").write_text("")
    (site / "bin").mkdir()
    layer_build._prune(site)
    left = sorted(str(p.relative_to(site)) for p in site.rglob("*") if p.is_file())
    assert left == ["kubernetes/client/__init__.py", "six-1.0.dist-info/RECORD", "six.py"]


def _imports(source: Path) -> set[str]:
    tree = ast.parse(source.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_real_layer_is_small_complete_and_built_for_the_runtime(tmp_path: Path) -> None:
    built = layer_build.build_layer("arm64", log=False)
    site = built.root / "python"

    assert built.unzipped_bytes <= layer_build.MAX_UNZIPPED_BYTES
    assert layer_build.directory_size(built.root) == (built.unzipped_bytes, built.file_count)
    # dropped: what the runtime ships, the async client and its stack, tests, scripts, the CLI
    for gone in ("boto3", "botocore", "s3transfer", "aiohttp", "kubernetes/aio", "bin", "nodewright/cli"):
        assert not (site / gone).exists(), gone
    assert not [p for p in site.rglob("tests") if p.is_dir()]
    # kept, as bytecode for the runtime's Python
    for package in ("kubernetes/client", "aws_lambda_powertools", "yaml", "croniter", "dateutil", "pydantic"):
        needed = f"{package}/__init__.pyc"
        assert (site / needed).is_file(), needed
    assert not list((site / "kubernetes").rglob("*.py")), "third-party code ships as bytecode only"
    assert (site / "nodewright/__init__.py").is_file()
    assert list((site / "nodewright/__pycache__").glob("__init__.cpython-313.pyc"))
    python313 = layer_build.find_runtime_python()
    magic = subprocess.run(
        [python313, "-c", "import importlib.util,sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert (site / "kubernetes/client/__init__.pyc").read_bytes()[:4].hex() == magic
    # compiled extensions are for Graviton
    (pydantic_core,) = (site / "pydantic_core").glob("_pydantic_core*.so")
    header = pydantic_core.read_bytes()[:20]
    assert int.from_bytes(header[18:20], "little") == ELF_MACHINE_AARCH64
    # every module nodewright imports is in the layer, the standard library or the runtime
    stdlib = set(sys.stdlib_module_names)
    provided = {"boto3", "botocore", "nodewright"}
    shipped = {p.name.removesuffix(".pyc").removesuffix(".py") for p in site.iterdir()} | {"yaml", "dateutil"}
    missing = {}
    for source in (site / "nodewright").rglob("*.py"):
        unknown = _imports(source) - stdlib - provided - shipped - {"__future__"}
        if unknown:
            missing[str(source.relative_to(site))] = sorted(unknown)
    assert not missing, f"imported by the layer but not shipped: {missing}"

    # the real app (real functions/, real layer) synthesizes with cdk-nag and stages this layer
    for name in ("provisioner", "disruption", "interruption", "spot_events", "pricing"):
        assert (REPO_ROOT / "functions" / name / "app.py").is_file(), f"functions/{name}/app.py"
    synth = synth_app({"clusterName": "demo"}, tmp_path / "cdk.out")
    assert len(synth.resources("AWS::Lambda::LayerVersion")) == 1
    (staged,) = [p.parent for p in (tmp_path / "cdk.out").glob("asset.*/python")]
    assert (staged / "python/nodewright/__init__.py").is_file()
    assert layer_build.directory_size(staged)[0] <= layer_build.MAX_UNZIPPED_BYTES
