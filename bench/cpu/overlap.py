"""Figure 3: mmrun's time to result vs the seed's order (cold media) and vs minimal vLLM
(cached media), on the tiny checkpoint, 12 default images from the latency server."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench.cpu.common import (
    PYTHON,
    WORKERS,
    LatencyServer,
    bench_env,
    last_json_line,
    log,
    median,
    run_child,
)
from bench.cpu.tiny import Tiny

NUM_IMAGES = 12
MAX_TOKENS = 8


def _messages(count: int, question: str) -> list[dict[str, Any]]:
    """The messages of the Qwen2.5-VL loader (and of the seed): system, then images, question."""
    return [
        {"role": "system", "content": "You are a helpful assistant."},
        {
            "role": "user",
            "content": [
                *({"type": "image"} for _ in range(count)),
                {"type": "text", "text": question},
            ],
        },
    ]


def run(server: LatencyServer, tiny: Tiny, reps: int, tmp: Path) -> dict[str, Any]:
    folder = tmp / "overlap"
    folder.mkdir(parents=True, exist_ok=True)
    warm_cache = folder / "warm-cache"
    args = ["-n", str(NUM_IMAGES), "--max-tokens", str(MAX_TOKENS), "--json"]

    def env_for(cache: Path) -> dict[str, str]:
        return bench_env(MMRUN_ASSETS_BASE_URL=server.url, MMRUN_CACHE_DIR=str(cache))

    # The plan (and a populated cache for the warm runs): mmrun's own dry run.
    dry = run_child(tiny.mmrun(*args, "--dry-run"), env=env_for(warm_cache))
    if dry.returncode != 0:
        raise RuntimeError(f"mmrun --dry-run failed:\n{dry.stderr[-3000:]}")
    plan = json.loads(dry.stdout)
    request = plan["request"]
    config = {
        "engine_args": request["engine_args"],
        "prompt": plan["prompt"],
        "messages": _messages(NUM_IMAGES, plan["question"]),
        "sampling": {
            "temperature": request["sampling"]["temperature"],
            "max_tokens": request["sampling"]["max_tokens"],
            **({"stop_token_ids": request["stop_token_ids"]} if request["stop_token_ids"] else {}),
        },
        "resize": {"factor": 28, "min_pixels": 56 * 56, "max_pixels": 1024 * 28 * 28},
        "urls": [f"{server.url}/{Path(m['path']).name}" for m in plan["media"]],
        "files": [m["path"] for m in plan["media"]],
    }
    config_file = folder / "config.json"
    config_file.write_text(json.dumps(config))

    def mmrun_run(cache: Path) -> dict[str, Any]:
        child = run_child(tiny.mmrun(*args), env=env_for(cache), stamp=True)
        if child.returncode != 0:
            raise RuntimeError(f"mmrun failed:\n{child.stderr[-3000:]}")
        out = json.loads(child.stdout)
        return {
            "wall_s": child.wall_s,
            "result_s": child.result_s,
            "maxrss_mib": child.maxrss_mib,
            "timings": out["timings"],
            "prompt_tokens": out["outputs"][0]["prompt_tokens"],
            "completion_tokens": out["outputs"][0]["completion_tokens"],
        }

    def script_run(name: str) -> dict[str, Any]:
        child = run_child(
            [PYTHON, str(WORKERS / name), str(config_file)], env=bench_env(), stamp=True
        )
        if child.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{child.stderr[-3000:]}")
        out = last_json_line(child.stdout)
        return {
            "wall_s": child.wall_s,
            "result_s": child.result_s,
            "maxrss_mib": child.maxrss_mib,
            "phases_s": out["phases_s"],
            "prompt_matches_mmrun": out.get("prompt_matches_mmrun"),
            "prompt_tokens": out["outputs"][0]["prompt_tokens"],
            "completion_tokens": out["outputs"][0]["completion_tokens"],
        }

    kinds = {
        "seed_order": lambda i: script_run("seed_order.py"),
        "mmrun_cold": lambda i: mmrun_run(folder / f"cold-cache-{i}"),
        "min_vllm": lambda i: script_run("min_vllm.py"),
        "mmrun_warm": lambda i: mmrun_run(warm_cache),
    }
    order = list(kinds)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for i in range(reps):
        for kind in order[i % len(order) :] + order[: i % len(order)]:  # rotated each rep
            server.reset()
            result = kinds[kind](i)
            result["requests"] = server.count()
            result["load1"] = os.getloadavg()[0]
            runs[kind].append(result)
            log(
                f"overlap rep {i + 1}/{reps} {kind}: {result['wall_s']:.1f} s, "
                f"{result['requests']} requests"
            )
    medians = {k: median([r["wall_s"] for r in v]) for k, v in runs.items()}
    result_medians = {k: median([r["result_s"] for r in v]) for k, v in runs.items()}
    return {
        "num_images": NUM_IMAGES,
        "max_tokens": MAX_TOKENS,
        "reps": reps,
        "engine_args": request["engine_args"],
        "mmrun_command": " ".join(["mmrun", *tiny.mmrun(*args)[1:]]).replace(
            str(tiny.path), "<tiny>"
        ),
        "runs": runs,
        "median_wall_s": medians,
        "median_result_s": result_medians,
        "ratio_cold": medians["mmrun_cold"] / medians["seed_order"],
        "ratio_warm": medians["mmrun_warm"] / medians["min_vllm"],
    }
