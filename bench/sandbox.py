"""Sandbox start and stop times (the whole sandbox: API emulator, moto server seeded, simulators)."""

from __future__ import annotations

import argparse
import json
import statistics
import time

from bench._report import save


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="start/stop cycles (default 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    from sandbox import Sandbox

    starts: list[float] = []
    stops: list[float] = []
    for index in range(args.runs):
        sandbox = Sandbox(cluster_name=f"bench-{index}")
        sandbox.start()
        starts.append(sandbox.startup_seconds)
        began = time.monotonic()
        sandbox.stop()
        stops.append(time.monotonic() - began)
    figures = {
        "runs": args.runs,
        "start_median_seconds": round(statistics.median(starts), 3),
        "start_max_seconds": round(max(starts), 3),
        "stop_median_seconds": round(statistics.median(stops), 3),
        "stop_max_seconds": round(max(stops), 3),
    }
    save(args, figures)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:22} {value}")
    return 0
