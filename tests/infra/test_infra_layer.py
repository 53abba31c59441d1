"""The Lambda layer build: what goes in, what is dropped, its size, and the real app's synth.

The slow test builds the real layer (pip for manylinux aarch64; PyPI the first time,
then the cache under build/layer/) and synthesizes the app exactly as `cdk synth` does.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from infra_synth import synth_app

from infra import layer_build
from sandbox.shared_data import REPO_ROOT

ELF_MACHINE_AARCH64 = 183


def test_requirements_come_from_pyproject_with_the_pinned_sdk() -> None:
    requirements = layer_build.runtime_requirements()
    names = [r.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() for r in requirements]
    assert "boto3" in names  # the layer ships the SDK version the tests ran ...
    pins = dict(
        line.split("==") for line in (REPO_ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert pins["boto3"] == pins["botocore"]  # ... pinned exactly by constraints.txt
    assert "kubernetes==37.0.1" in requirements
    assert "python-dateutil>=2.8,<3" in requirements  # dateutil 3+ would shadow the runtime's botocore's
    assert any(r.startswith("aws-lambda-powertools[parser,tracer]") for r in requirements)


def test_cache_key_changes_with_the_architecture_and_is_stable() -> None:
    assert layer_build.input_hash("arm64") == layer_build.input_hash("arm64")
    assert layer_build.input_hash("arm64") != layer_build.input_hash("x86_64")


def test_wheels_may_be_manylinux2014_or_manylinux_2_28_for_the_architecture() -> None:
    for arch, machine in (("arm64", "aarch64"), ("x86_64", "x86_64")):
        assert layer_build.PLATFORMS[arch] == (f"manylinux_2_28_{machine}", f"manylinux2014_{machine}")


def test_the_sdk_models_kept_are_exactly_the_services_the_layer_creates_clients_for() -> None:
    layer = REPO_ROOT / "layers" / "nodewright" / "nodewright"
    used = set()
    for source in layer.rglob("*.py"):
        if "cli" in source.relative_to(layer).parts:
            continue  # the CLI runs with the user's own SDK, outside the layer
        used.update(re.findall(r"\bclient\(\s*\"([a-z0-9-]+)\"", source.read_text()))
    assert used == layer_build.BOTO_SERVICES


def test_sdk_model_pruning_keeps_the_newest_version_of_the_used_services(tmp_path: Path) -> None:
    site = tmp_path / "python"
    data = site / "botocore" / "data"
    for relative in ("ec2/2015-10-01/service-2.json.gz", "ec2/2016-11-15/service-2.json.gz",
                     "ec2/2016-11-15/examples-1.json", "s3/2006-03-01/service-2.json.gz",
                     "endpoints.json", "_retry.json"):  # fmt: skip
        (data / relative).parent.mkdir(parents=True, exist_ok=True)
        (data / relative).write_text("{}")
    layer_build._prune_sdk_models(site)
    left = sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file())
    assert left == ["_retry.json", "ec2/2016-11-15/service-2.json.gz", "endpoints.json"]


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
    # dropped: the async client and its stack, tests, scripts, the CLI, unused SDK models
    for gone in ("aiohttp", "kubernetes/aio", "bin", "nodewright/cli", "botocore/data/s3"):
        assert not (site / gone).exists(), gone
    models = {p.name for p in (site / "botocore" / "data").iterdir() if p.is_dir()}
    assert models == layer_build.BOTO_SERVICES
    assert not [p for p in site.rglob("tests") if p.is_dir()]
    # kept, as bytecode for the runtime's Python
    for package in (
        "kubernetes/client",
        "aws_lambda_powertools",
        "yaml",
        "croniter",
        "dateutil",
        "pydantic",
        "boto3",
        "botocore",
    ):
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
    # the pinned SDK is the one in the layer, and it builds a client of every service kept
    probe = (
        "import boto3, botocore; print(boto3.__version__, botocore.__version__); "
        f"[boto3.client(s, region_name='us-east-1') for s in {sorted(layer_build.BOTO_SERVICES)}]"
    )
    versions = subprocess.run(
        [python313, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {probe}"],
        capture_output=True,
        text=True,
        check=True,
        env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    pins = dict(
        line.split("==") for line in (REPO_ROOT / "constraints.txt").read_text().splitlines() if "==" in line
    )
    assert versions == [pins["boto3"], pins["botocore"]]
    # every module nodewright imports is in the layer or the standard library
    stdlib = set(sys.stdlib_module_names)
    provided = {"nodewright"}
    shipped = {p.name.removesuffix(".pyc").removesuffix(".py") for p in site.iterdir()} | {"yaml", "dateutil"}
    missing = {}
    # the private wake-up's certificate function has cryptography in a layer of its own (below)
    elsewhere = {"nodewright/wakeup/certificate.py": set(layer_build.CERTIFICATE_REQUIREMENTS)}
    for source in (site / "nodewright").rglob("*.py"):
        own_layer = elsewhere.get(str(source.relative_to(site)), set())
        unknown = _imports(source) - stdlib - provided - shipped - own_layer - {"__future__"}
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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_certificate_functions_own_layer_makes_a_certificate_on_the_runtimes_python() -> None:
    """``cryptography`` for the private wake-up's certificate function alone, built by pip for the
    function's platform: arm64's is aarch64 code; x86_64's, loaded by the runtime's Python 3.13 with
    the layer's package, makes the certificate the function imports into ACM."""
    arm = layer_build.build_dependency_layer("cryptography", "arm64", layer_build.CERTIFICATE_REQUIREMENTS)
    (rust,) = (arm.root / "python" / "cryptography" / "hazmat" / "bindings").glob("_rust*.so")
    assert int.from_bytes(rust.read_bytes()[18:20], "little") == ELF_MACHINE_AARCH64
    x86 = layer_build.build_dependency_layer("cryptography", "x86_64", layer_build.CERTIFICATE_REQUIREMENTS)
    probe = (
        "from nodewright.wakeup.certificate import self_signed; "
        "print(self_signed('internal-x.eu-west-1.elb.amazonaws.com', 'demo').certificate.splitlines()[0])"
    )
    paths = [str(x86.root / "python"), str(REPO_ROOT / "layers" / "nodewright")]
    made = subprocess.run(
        [layer_build.find_runtime_python(), "-I", "-c", f"import sys; sys.path[:0] = {paths!r}; {probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert made.stdout.strip() == "-----BEGIN CERTIFICATE-----"
