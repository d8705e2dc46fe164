"""Figure 4: one batched ``generate`` call vs one call per prompt, and mmrun's own batch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.cpu.assets import write_png_set
from bench.cpu.common import PYTHON, WORKERS, bench_env, last_json_line, log, run_child
from bench.cpu.tiny import Tiny

PROMPTS = 32
PER_PROMPT = 2
MAX_TOKENS = 16
EXTRA_ROUNDS = 2  # after the first: the figures are medians of 3 rounds
# Batching needs room for the batch: the checkpoint's max_num_seqs=2 would run 2 at a time.
# vLLM's multimodal processor cache is off, so no image is processed faster the second time.
OVERRIDES = {"max_num_seqs": PROMPTS, "mm_processor_cache_gb": 0}


def _pairs(paths: list[Path]) -> list[list[str]]:
    return [[str(p) for p in paths[i : i + PER_PROMPT]] for i in range(0, len(paths), PER_PROMPT)]


def run(tiny: Tiny, tmp: Path) -> dict[str, Any]:
    folder = tmp / "batching"
    n = PROMPTS * PER_PROMPT
    warmup = write_png_set(folder, "w", 2 * PER_PROMPT, seed=100)
    separate = write_png_set(folder, "s", n, seed=101)
    batched = write_png_set(folder, "b", n, seed=102)
    again = write_png_set(folder, "c", n, seed=103)
    rounds = [
        (
            write_png_set(folder, f"s{r}", n, seed=110 + 2 * r),
            write_png_set(folder, f"c{r}", n, seed=111 + 2 * r),
        )
        for r in range(EXTRA_ROUNDS)
    ]

    args = [a for p in batched for a in ("-i", str(p))]
    args += [
        "--per-prompt",
        str(PER_PROMPT),
        "--num-prompts",
        str(PROMPTS),
        "--max-tokens",
        str(MAX_TOKENS),
        "--sampling-arg",
        "ignore_eos=true",
        "--json",
    ]
    env = bench_env(MMRUN_CACHE_DIR=str(folder / "cache"))
    dry = run_child(tiny.mmrun(*args, "--dry-run", **OVERRIDES), env=env)
    if dry.returncode != 0:
        raise RuntimeError(f"mmrun --dry-run failed:\n{dry.stderr[-3000:]}")
    plan = json.loads(dry.stdout)
    config = {
        "engine_args": plan["request"]["engine_args"],
        "prompt": plan["prompt"],
        "sampling": {"temperature": 0.0, "max_tokens": MAX_TOKENS, "ignore_eos": True},
        "warmup": _pairs(warmup),
        "separate": _pairs(separate),
        "batched": _pairs(batched),
        "batched_again": _pairs(again),
        "rounds": [[_pairs(s), _pairs(b)] for s, b in rounds],
    }
    config_file = folder / "config.json"
    config_file.write_text(json.dumps(config))
    child = run_child([PYTHON, str(WORKERS / "batch.py"), str(config_file)], env=bench_env())
    if child.returncode != 0:
        raise RuntimeError(f"batch.py failed:\n{child.stderr[-3000:]}")
    raw = last_json_line(child.stdout)
    log(
        f"batching in-process: one call {raw['batched']['s']:.2f} s, "
        f"{PROMPTS} calls {raw['separate']['s']:.2f} s"
    )

    # mmrun's CLI, unchanged, through a wrapper that notes each call it makes into vLLM's LLM
    # (LLM.enqueue one prompt at a time since the batch-mode engine loop) and its engine steps.
    calls_file = folder / "calls.json"
    command = tiny.mmrun(*args, "--warmup", str(PER_PROMPT), **OVERRIDES)
    mm = run_child(
        [PYTHON, str(WORKERS / "count_calls.py"), str(calls_file), *command[1:]], env=env
    )
    if mm.returncode != 0:
        raise RuntimeError(f"mmrun --num-prompts {PROMPTS} failed:\n{mm.stderr[-3000:]}")
    out = json.loads(mm.stdout)
    record = json.loads(calls_file.read_text())
    mmrun = {
        "wall_s": mm.wall_s,
        "timings": out["timings"],
        "prompts": len(out["outputs"]),
        "llm_calls": record["calls"],
        "engine_steps": record["steps"],
        "warmup_prompts": PER_PROMPT,
        "prompt_tokens": sum(o["prompt_tokens"] for o in out["outputs"]),
        "completion_tokens": sum(o["completion_tokens"] for o in out["outputs"]),
        "command": "mmrun image -m qwen2_5_vl --model <tiny> -i <64 PNG files> "
        + " ".join(a for a in args[2 * n :])
        + f" --warmup {PER_PROMPT} "
        + " ".join(tiny.flags(**OVERRIDES)),
    }
    log(f"batching mmrun: generate_s {out['timings'].get('generate_s')}")
    for part in (raw["separate"], raw["batched_first"], raw["batched"], mmrun):
        seconds = part["s"] if "s" in part else part["timings"]["generate_s"]
        part["prompts_per_s"] = part["prompts"] / seconds
        part["prompt_tokens_per_s"] = part["prompt_tokens"] / seconds
        part["completion_tokens_per_s"] = part["completion_tokens"] / seconds
    return {
        "prompts": PROMPTS,
        "images_per_prompt": PER_PROMPT,
        "max_tokens": MAX_TOKENS,
        "engine_args": config["engine_args"],
        "in_process": raw,
        "mmrun": mmrun,
        "speedup": raw["separate"]["s"] / raw["batched"]["s"],
        "mmrun_vs_one_call": out["timings"]["generate_s"] / raw["batched"]["s"],
        "mmrun_vs_first_one_call": out["timings"]["generate_s"] / raw["batched_first"]["s"],
        # Nearer the one-call time than the one-call-per-prompt time, on a log scale.
        "one_call_threshold_s": (raw["batched"]["s"] * raw["separate"]["s"]) ** 0.5,
    }
