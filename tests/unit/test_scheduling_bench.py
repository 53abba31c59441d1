"""The scheduling benchmark at a small size, so it cannot rot: correctness, not timings."""

from __future__ import annotations

import argparse
import json

import pytest

from bench import scheduling


def run_bench(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    parser = argparse.ArgumentParser()
    scheduling.configure(parser)
    assert scheduling.run(parser.parse_args([*argv, "--json"])) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("mix", ["generic", "diverse"])
def test_small_benchmark_places_every_pod_between_bound_and_baseline(capsys, mix: str) -> None:
    figures = run_bench(capsys, "--pods", "300", "--mix", mix)
    assert figures["pods"] == 300
    assert figures["unschedulable"] == 0
    assert figures["plan_per_hour"] >= figures["lp_bound_per_hour"] - 1e-6  # a true lower bound
    assert figures["plan_per_hour"] <= figures["ffd_per_hour"]
    assert figures["ratio"] < (1.15 if mix == "generic" else 1.6)


def test_single_shape_mix_reaches_the_exact_optimum(capsys) -> None:
    figures = run_bench(capsys, "--pods", "300", "--mix", "inflate")
    assert figures["plan_per_hour"] == pytest.approx(figures["optimum_per_hour"])
    assert figures["optimum_per_hour"] >= figures["lp_bound_per_hour"] - 1e-6


def test_dump_pods_writes_the_exact_workload(capsys, tmp_path) -> None:
    dump = tmp_path / "pods.json"
    run_bench(capsys, "--pods", "50", "--mix", "generic", "--dump-pods", str(dump), "--no-bound")
    rows = json.loads(dump.read_text())
    assert sum(r["count"] for r in rows) == 50
    assert all({"cpu", "memory", "count"} <= set(r) for r in rows)


def test_nodepool_file_restricts_the_types(capsys, tmp_path) -> None:
    pool = tmp_path / "pool.yaml"
    pool.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: arm}\nspec:\n  template:\n    spec:\n"
        "      requirements:\n        - {key: kubernetes.io/arch, operator: In, values: [arm64]}\n"
        "        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6g]}\n"
    )
    figures = run_bench(capsys, "--pods", "100", "--mix", "generic", "--nodepool", str(pool))
    assert figures["unschedulable"] == 0
    assert figures["plan_per_hour"] >= figures["lp_bound_per_hour"] - 1e-6
