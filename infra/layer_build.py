"""Build the shared Lambda layer locally, without Docker, and cache it under build/layer/.

Why a build step and not Docker bundling: some machines people deploy from have no Docker
engine. pip can fetch wheels for another platform (``--platform … --only-binary=:all:``), so
the layer for the Lambda runtime is assembled on any host (Linux, macOS, x64 or ARM). Wheels
tagged ``manylinux2014`` (glibc 2.17) and ``manylinux_2_28`` (glibc 2.28) are both accepted:
the python3.13 runtime is Amazon Linux 2023 (glibc 2.34), and some projects publish only
``manylinux_2_28`` wheels for aarch64.

What goes in, and why (the layer must stay under ``MAX_UNZIPPED_BYTES``):

- the runtime dependencies from pyproject ``[project.dependencies]``, pinned by
  constraints.txt, **boto3 and botocore included**. The decision: the functions run the SDK
  version the tests ran (constraints.txt), not whatever the runtime carries that month. The
  runtime's copy is updated by AWS without notice and lags the pin by months; a retry-mode,
  endpoint or model change there would reach production untested. The cost is kept small:
  botocore's service models are pruned to the services the layer creates clients for
  (``BOTO_SERVICES``, ~3 of its 28 MB; tests/infra/test_infra_layer.py keeps the list equal to
  the code's ``client("…")`` calls), so the layer grows by ~7 MB rather than ~32.
- ``kubernetes/aio`` and the aiohttp stack it alone needs (68 MB; the functions use the
  sync client), tests, ``bin/`` and type stubs are removed.
- the ``nodewright`` package from layers/nodewright/ without ``nodewright/cli`` (the
  command-line tool is for people, not functions).
- bytecode compiled for Python 3.13 (the runtime's version) because the kubernetes
  client's cold import drops from ~1.4 s to ~0.5 s with it. Third-party code ships as
  sourceless ``.pyc`` (legacy layout, the interpreter imports it directly): sources plus
  bytecode would be ~64 MB. The generated ``kubernetes/client/{api,models}`` modules are
  ~80 % docstrings, so they are compiled with docstrings stripped (``-OO``; they hold no
  ``assert``, which is checked). ``nodewright`` keeps its sources next to its bytecode so
  tracebacks from our own code show their lines.

Bytecode uses ``unchecked-hash`` invalidation: no mtimes in the files, so the same
inputs give the same bytes, and the layer is immutable once published.

Run ``python -m infra.layer_build [--arch arm64|x86_64]`` to build (or warm the cache)
by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_SOURCE = REPO_ROOT / "layers" / "nodewright" / "nodewright"
CACHE_ROOT = REPO_ROOT / "build" / "layer"
RUNTIME_PYTHON = "3.13"
# Wheel platforms per architecture, most specific first (pip tries them in this order).
PLATFORMS = {
    "arm64": ("manylinux_2_28_aarch64", "manylinux2014_aarch64"),
    "x86_64": ("manylinux_2_28_x86_64", "manylinux2014_x86_64"),
}
# 34 MB of kubernetes, Powertools, pydantic and nodewright, plus ~7 MB of boto3/botocore.
MAX_UNZIPPED_BYTES = 48 * 1024 * 1024
CACHE_GENERATIONS_KEPT = 2
# The AWS services the layer creates clients for (nodewright/cloud: aws.client("…")); botocore
# keeps only these service models (plus its top-level endpoint, partition and retry data).
# lambda and secretsmanager: the wake-up webhook (cloud/wakeup.py).
# acm: the private wake-up's certificate (cloud/wakeup.py).
BOTO_SERVICES = frozenset(
    {"acm", "dynamodb", "ec2", "eks", "iam", "lambda", "pricing", "secretsmanager", "ssm", "sts"}
)
# The private wake-up's certificate function alone needs cryptography (nodewright/wakeup/certificate.py):
# it gets a layer of its own (build_dependency_layer) rather than 15 MB more in every function's.
CERTIFICATE_REQUIREMENTS = ("cryptography",)

# Distributions removed after pip: they only serve kubernetes.aio (dropped) and aiohttp.
DROPPED_DISTRIBUTIONS = frozenset(
    {
        "aiohttp",
        "aiohttp-retry",
        "aiohappyeyeballs",
        "aiosignal",
        "multidict",
        "yarl",
        "frozenlist",
        "propcache",
    }
)
DROPPED_PATHS = ("kubernetes/aio", "bin", "wrapt-stubs")
DROPPED_DIR_NAMES = frozenset({"tests", "test", "__pycache__"})
# Generated code, mostly docstrings: compiled with docstrings stripped.
DOCSTRING_STRIPPED = ("kubernetes/client/api", "kubernetes/client/models")
EXCLUDED_FROM_PACKAGE = ("cli",)


class LayerBuildError(RuntimeError):
    """The layer could not be built; the message says which step failed and what to do."""


@dataclass(frozen=True)
class BuiltLayer:
    root: Path  # the asset directory: contains python/
    input_hash: str
    unzipped_bytes: int
    file_count: int


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The layer's pip requirements: [project.dependencies] (pinned by constraints.txt at install)."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    name_of = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
    kept = []
    for dep in deps:
        match = name_of.match(dep)
        if match and _normalize(match.group(1)) not in DROPPED_DISTRIBUTIONS:
            kept.append(dep.strip())
    return kept


def _package_files() -> Iterator[Path]:
    for path in sorted(PACKAGE_SOURCE.rglob("*")):
        relative = path.relative_to(PACKAGE_SOURCE)
        if path.is_dir() or "__pycache__" in relative.parts or path.suffix == ".pyc":
            continue
        if relative.parts[0] in EXCLUDED_FROM_PACKAGE:
            continue
        yield path


def input_hash(arch: str) -> str:
    """A hash of everything the layer is built from: a change in any of them rebuilds it."""
    digest = hashlib.sha256()
    digest.update(f"{arch}|{RUNTIME_PYTHON}|{','.join(PLATFORMS[arch])}|{sorted(BOTO_SERVICES)}\n".encode())
    digest.update("\n".join(runtime_requirements()).encode())
    for fixed in (REPO_ROOT / "constraints.txt", Path(__file__)):
        digest.update(fixed.read_bytes())
    for path in _package_files():
        digest.update(str(path.relative_to(PACKAGE_SOURCE)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def find_runtime_python() -> str:
    """A Python 3.13 interpreter to compile bytecode the python3.13 runtime can load."""
    candidates = [
        os.environ.get("NODEWRIGHT_PYTHON313", ""),
        sys.executable if sys.version_info[:2] == (3, 13) else "",
        shutil.which("python3.13") or "",
        str(Path.home() / ".pyenv" / "versions" / "3.13.0" / "bin" / "python"),
    ]
    for candidate in candidates:
        if not candidate or not Path(candidate).exists():
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == "True":
            return candidate
    raise LayerBuildError(
        "no Python 3.13 found to compile the layer's bytecode for the python3.13 runtime: "
        "install one (e.g. `pyenv install 3.13`) or set NODEWRIGHT_PYTHON313=/path/to/python3.13"
    )


def directory_size(root: Path) -> tuple[int, int]:
    """(bytes, files) as Lambda counts them: the sum of the unzipped file sizes."""
    total = count = 0
    for path in root.rglob("*"):
        if path.is_file():
            total += path.stat().st_size
            count += 1
    return total, count


def _run(command: list[str], step: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr)[-3000:]
        raise LayerBuildError(f"layer build step '{step}' failed ({' '.join(command[:4])} …):\n{tail}")


def _pip_install(target: Path, arch: str, requirements: list[str] | None = None) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--target",
        str(target),
        *[flag for platform in PLATFORMS[arch] for flag in ("--platform", platform)],
        "--implementation",
        "cp",
        "--python-version",
        RUNTIME_PYTHON,
        "--only-binary=:all:",
        "-c",
        str(REPO_ROOT / "constraints.txt"),
        *(requirements if requirements is not None else runtime_requirements()),
    ]
    try:
        _run(command, "pip install (needs PyPI the first time; later builds reuse build/layer)")
    except LayerBuildError as exc:
        raise LayerBuildError(f"{exc}\nIs PyPI reachable? The cache under {CACHE_ROOT} is empty.") from exc


def _drop_distribution(site: Path, dist_info: Path) -> None:
    record = dist_info / "RECORD"
    if record.exists():
        for line in record.read_text().splitlines():
            relative = line.split(",", 1)[0]
            path = (site / relative).resolve()
            if path.is_relative_to(site) and path.is_file():
                path.unlink()
    shutil.rmtree(dist_info, ignore_errors=True)


def _prune(site: Path) -> None:
    for dist_info in site.glob("*.dist-info"):
        name = dist_info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        if _normalize(name) in DROPPED_DISTRIBUTIONS:
            _drop_distribution(site, dist_info)
    for relative in DROPPED_PATHS:
        shutil.rmtree(site / relative, ignore_errors=True)
    _prune_sdk_models(site)
    for path in sorted(site.rglob("*"), reverse=True):
        if path.is_dir() and (path.name in DROPPED_DIR_NAMES or not any(path.iterdir())):
            shutil.rmtree(path, ignore_errors=True)


def _prune_sdk_models(site: Path) -> None:
    """Keep botocore's and boto3's service data for ``BOTO_SERVICES`` only, newest API version,
    without the examples (botocore loads the latest version of a service's model)."""
    for data in (site / "botocore" / "data", site / "boto3" / "data"):
        if not data.is_dir():
            continue
        for service in data.iterdir():
            if not service.is_dir():
                continue  # endpoints.json, partitions.json, _retry.json, sdk-default-configuration.json
            if service.name not in BOTO_SERVICES:
                shutil.rmtree(service)
                continue
            versions = sorted(v for v in service.iterdir() if v.is_dir())
            for old in versions[:-1]:
                shutil.rmtree(old)
            for example in service.rglob("examples-*.json"):
                example.unlink()


def _compile_sourceless(python: str, directory: Path, optimize: int) -> None:
    """Compile every .py under directory to a sibling .pyc and delete the source."""
    _run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-b",
            "-j",
            "0",
            "-o",
            str(optimize),
            "--invalidation-mode",
            "unchecked-hash",
            "-x",
            r"/python/nodewright/",
            str(directory),
        ],
        f"compile {directory.name}",
    )
    for source in directory.rglob("*.py"):
        if "/python/nodewright/" in source.as_posix():
            continue
        if not source.with_suffix(".pyc").exists():
            raise LayerBuildError(f"{source} did not compile for Python {RUNTIME_PYTHON}")
        source.unlink()


def _check_no_asserts(directory: Path) -> None:
    """-OO also drops asserts and ``if __debug__`` blocks: refuse if the code has any."""
    pattern = re.compile(r"^\s*assert\b|__debug__", re.MULTILINE)
    for source in directory.rglob("*.py"):
        if pattern.search(source.read_text(encoding="utf-8", errors="replace")):
            raise LayerBuildError(f"{source} uses assert/__debug__: it cannot be compiled with -OO")


def _assemble(work: Path, arch: str) -> None:
    site = work / "python"
    _pip_install(site, arch)
    _prune(site)
    shutil.copytree(
        PACKAGE_SOURCE,
        site / "nodewright",
        ignore=lambda folder, names: [
            n
            for n in names
            if n in ("__pycache__",)
            or n.endswith(".pyc")
            or (Path(folder) == PACKAGE_SOURCE and n in EXCLUDED_FROM_PACKAGE)
        ],
    )
    python = find_runtime_python()
    for relative in DOCSTRING_STRIPPED:
        _check_no_asserts(site / relative)
        _compile_sourceless(python, site / relative, optimize=2)
    _compile_sourceless(python, site, optimize=0)
    _run(
        [python, "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", str(site / "nodewright")],
        "compile nodewright",
    )
    size, _ = directory_size(work)
    if size > MAX_UNZIPPED_BYTES:
        raise LayerBuildError(
            f"the layer is {size / 2**20:.1f} MiB unzipped, over the {MAX_UNZIPPED_BYTES / 2**20:.0f} MiB "
            "budget: a new dependency? Drop what the functions do not import (see DROPPED_* in "
            "infra/layer_build.py) or reconsider the dependency."
        )


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """Two pytest workers (or a test and `cdk synth`) must not build the same layer at once."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with (CACHE_ROOT / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_manifest(root: Path, key: str) -> BuiltLayer | None:
    manifest = root / "manifest.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    return BuiltLayer(root / "asset", key, data["unzipped_bytes"], data["file_count"])


def build_layer(arch: str = "arm64", *, log: bool = True) -> BuiltLayer:
    """Return the cached layer for the current inputs, building it first when needed."""
    if arch not in PLATFORMS:
        raise LayerBuildError(f"architecture {arch!r} is not supported: use one of {sorted(PLATFORMS)}")
    key = input_hash(arch)
    root = CACHE_ROOT / f"{arch}-{key}"
    cached = _read_manifest(root, key)
    if cached:
        return cached
    with _cache_lock():
        cached = _read_manifest(root, key)  # another process may have built it meanwhile
        if cached:
            return cached
        started = time.monotonic()
        if log:
            print(f"Building the Nodewright layer for {arch} (cache miss {key})…", file=sys.stderr)
        work = CACHE_ROOT / f".work-{arch}-{key}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            _assemble(work / "asset", arch)
            size, count = directory_size(work / "asset")
            seconds = round(time.monotonic() - started, 1)
            (work / "manifest.json").write_text(
                json.dumps({"unzipped_bytes": size, "file_count": count, "build_seconds": seconds})
            )
            shutil.rmtree(root, ignore_errors=True)
            work.rename(root)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _prune_old_generations(arch, keep=root)
        if log:
            print(f"Layer built in {seconds} s: {size / 2**20:.1f} MiB, {count} files", file=sys.stderr)
        built = _read_manifest(root, key)
        assert built is not None
        return built


def build_dependency_layer(name: str, arch: str, requirements: tuple[str, ...]) -> BuiltLayer:
    """A layer of ``requirements`` alone (pinned by constraints.txt), for one function that needs
    what the others do not: pip for the Lambda platform, cached under build/layer/ like the layer."""
    if arch not in PLATFORMS:
        raise LayerBuildError(f"architecture {arch!r} is not supported: use one of {sorted(PLATFORMS)}")
    digest = hashlib.sha256()
    digest.update(f"{name}|{arch}|{RUNTIME_PYTHON}|{','.join(PLATFORMS[arch])}|{requirements}\n".encode())
    for fixed in (REPO_ROOT / "constraints.txt", Path(__file__)):
        digest.update(fixed.read_bytes())
    key = digest.hexdigest()[:20]
    root = CACHE_ROOT / f"{name}-{arch}-{key}"
    with _cache_lock():
        cached = _read_manifest(root, key)
        if cached:
            return cached
        work = CACHE_ROOT / f".work-{name}-{arch}-{key}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            _pip_install(work / "asset" / "python", arch, list(requirements))
            size, count = directory_size(work / "asset")
            (work / "manifest.json").write_text(json.dumps({"unzipped_bytes": size, "file_count": count}))
            shutil.rmtree(root, ignore_errors=True)
            work.rename(root)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    built = _read_manifest(root, key)
    assert built is not None
    return built


def _prune_old_generations(arch: str, keep: Path) -> None:
    generations = sorted(
        (p for p in CACHE_ROOT.glob(f"{arch}-*") if p != keep), key=lambda p: p.stat().st_mtime, reverse=True
    )
    for stale in generations[CACHE_GENERATIONS_KEPT - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build (or reuse) the Nodewright Lambda layer.")
    parser.add_argument("--arch", choices=sorted(PLATFORMS), default="arm64")
    args = parser.parse_args(argv)
    built = build_layer(args.arch)
    print(f"{built.root}  {built.unzipped_bytes / 2**20:.1f} MiB  {built.file_count} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
