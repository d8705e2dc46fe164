"""Figure 6: the engine loops a batch can use (one ``generate`` call, windows of ``generate``
calls, ``AsyncLLM`` with a bounded number in flight, mmrun's enqueue + step), on the same
256 prompts in one process (``workers/loops.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cpu import stream
from bench.cpu.common import PYTHON, WORKERS, bench_env, last_json_line, log, median, run_child
from bench.cpu.tiny import Tiny

ROUNDS = 3
# mmrun's default window (mmrun.runner.Runner.window: max(16, 2 * max_num_seqs)), and twice it.
DEFAULT_WINDOW = max(16, 2 * stream.MAX_NUM_SEQS)
WINDOWS = [DEFAULT_WINDOW, 2 * DEFAULT_WINDOW]
VARIED = "varied-"  # the worker's prefix for the runs with output lengths 1..31


def run(tiny: Tiny, tmp: Path, rounds: int = ROUNDS) -> dict[str, Any]:
    folder = tmp / "loops"
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        **stream.plan(tiny, folder),
        "prompts": stream.PROMPTS,
        "per_prompt": stream.PER_PROMPT,
        "rounds": rounds,
        "windows": WINDOWS,
        "seed": 1000,
    }
    config_file = folder / "config.json"
    config_file.write_text(json.dumps(config))
    child = run_child(
        [PYTHON, str(WORKERS / "loops.py"), str(config_file)], env=bench_env(), timeout_s=1800
    )
    if child.returncode != 0:
        raise RuntimeError(f"loops.py failed:\n{child.stderr[-3000:]}")
    raw = last_json_line(child.stdout)
    summary: dict[str, dict[str, float]] = {}
    for kind, runs in raw["runs"].items():
        one = VARIED + "one_call" if kind.startswith(VARIED) else "one_call"
        base = {r["round"]: r["s"] for r in raw["runs"][one]}
        s = median([r["s"] for r in runs])
        summary[kind] = {
            "s": s,
            "prompts_per_s": stream.PROMPTS / s,
            # one call's time / this loop's, within each round (run close together in time)
            "paired_ratio": median([base[r["round"]] / r["s"] for r in runs]),
            "first_s": median([r["first_s"] for r in runs]),
            "frontend_peak_mib": median([r["frontend_peak_mib"] for r in runs]),
            "frontend_growth_mib": median(
                [r["frontend_peak_mib"] - r["frontend_rss_start_mib"] for r in runs]
            ),
            "engine_peak_mib": median([r["engine_peak_mib"] for r in runs]),
            "frontend_cpu_s": median([r["frontend_cpu_s"] for r in runs]),
            "engine_cpu_s": median([r["engine_cpu_s"] for r in runs]),
            "max_in_flight": max(r["max_in_flight"] for r in runs),
        }
        log(
            f"loops {kind}: {s:.2f} s ({stream.PROMPTS / s:.0f} prompts/s), first result "
            f"{summary[kind]['first_s']:.2f} s"
        )
    return {
        "prompts": stream.PROMPTS,
        "images_per_prompt": stream.PER_PROMPT,
        "max_tokens": stream.MAX_TOKENS,
        "engine_args": config["engine_args"],
        "rounds": rounds,
        "windows": WINDOWS,
        "default_window": DEFAULT_WINDOW,
        "varied_prefix": VARIED,
        "wall_s": child.wall_s,
        "marks_s": raw["marks_s"],
        "kinds": raw["kinds"],
        "runs": raw["runs"],
        "median": summary,
    }
