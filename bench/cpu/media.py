"""Figure 2: the 12 default images, cold and warm, vs the seed's one-after-the-other fetch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cpu.common import (
    PYTHON,
    WORKERS,
    LatencyServer,
    bench_env,
    last_json_line,
    median,
    run_child,
)


def run(
    server: LatencyServer, cold_reps: int, warm_reps: int, first_reps: int, tmp: Path
) -> dict[str, Any]:
    folder = tmp / "media-fig"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.json"
    config.write_text(
        json.dumps(
            {
                "base_url": server.url,
                "cold_reps": cold_reps,
                "warm_reps": warm_reps,
                "tmp": str(folder),
            }
        )
    )

    def worker(mode: str) -> dict[str, Any]:
        child = run_child(
            [PYTHON, str(WORKERS / "media_worker.py"), str(config), mode], env=bench_env()
        )
        if child.returncode != 0:
            raise RuntimeError(f"media worker ({mode}) failed:\n{child.stderr[-3000:]}")
        return last_json_line(child.stdout)

    raw = worker("suite")
    first: dict[str, list[float]] = {"first-baseline": [], "first-mmrun": []}
    for _ in range(first_reps):
        for mode in first:
            first[mode].append(worker(mode)["s"])
    raw["first_in_process"] = {
        "baseline_s": first["first-baseline"],
        "mmrun_s": first["first-mmrun"],
        "median_baseline_s": median(first["first-baseline"]),
        "median_mmrun_s": median(first["first-mmrun"]),
    }
    raw["first_in_process"]["speedup"] = (
        raw["first_in_process"]["median_baseline_s"] / raw["first_in_process"]["median_mmrun_s"]
    )
    for key in ("baseline_s", "cold_s", "warm_s"):
        raw[f"median_{key}"] = median(raw[key])
    raw["speedup_cold"] = raw["median_baseline_s"] / raw["median_cold_s"]
    raw["what_if"] = {
        name: {"median_s": median(values), "speedup": raw["median_baseline_s"] / median(values)}
        for name, values in raw["what_if_cold_s"].items()
    }
    raw["latency_s"] = server.latency_s
    return raw
