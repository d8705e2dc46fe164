"""Figure 7: mmrun's streamed batch mode (``--input manifest.jsonl -o out.jsonl``) vs one
``LLM.generate`` call on the same 256 prompts, each in its own process; and what one bad item
(a prompt longer than max_model_len) costs the batch."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench.cpu.assets import write_png_set
from bench.cpu.common import PYTHON, WORKERS, bench_env, last_json_line, log, median, run_child
from bench.cpu.tiny import Tiny

PROMPTS = 256
PER_PROMPT = 2
MAX_TOKENS = 16
MAX_NUM_SEQS = 32
# max_num_seqs raised from the checkpoint's 2 so the engine can batch; vLLM's multimodal
# processor cache off, so no image is processed faster a second time.
OVERRIDES = {"max_num_seqs": MAX_NUM_SEQS, "mm_processor_cache_gb": 0}
BAD_INDEX = PROMPTS // 2  # the bad item sits mid-run
BAD_WORDS = 3000  # a question of this many words is longer than max_model_len (2048) tokens
ROUNDS = 3


def plan(tiny: Tiny, folder: Path) -> dict[str, Any]:
    """Engine arguments and the rendered prompt, from mmrun's own dry run (a named run of the
    same shape: PER_PROMPT images a prompt, the same overrides)."""
    files = write_png_set(folder / "plan", "p", PER_PROMPT, seed=99)
    args = [a for p in files for a in ("-i", str(p))]
    args += ["--per-prompt", str(PER_PROMPT), "--max-tokens", str(MAX_TOKENS), "--json"]
    env = bench_env(MMRUN_CACHE_DIR=str(folder / "plan-cache"))
    dry = run_child(tiny.mmrun(*args, "--dry-run", **OVERRIDES), env=env)
    if dry.returncode != 0:
        raise RuntimeError(f"mmrun --dry-run failed:\n{dry.stderr[-3000:]}")
    out = json.loads(dry.stdout)
    return {
        "engine_args": out["request"]["engine_args"],
        "prompt": out["prompt"],
        "sampling": {"temperature": 0.0, "max_tokens": MAX_TOKENS, "ignore_eos": True},
    }


def _manifest(path: Path, pairs: list[list[str]], bad: bool) -> None:
    with open(path, "w") as f:
        for i, pair in enumerate(pairs):
            row: dict[str, Any] = {"id": f"p{i:03d}", "image": pair}
            if bad and i == BAD_INDEX:
                row["question"] = " ".join(["describe"] * BAD_WORDS) + "?"
            f.write(json.dumps(row) + "\n")


def _read_output(path: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    ids = [r["id"] for r in rows]
    errors = [{"id": r["id"], **r["error"]} for r in rows if r.get("error") is not None]
    return {
        "lines": len(rows),
        "unique_ids": len(set(ids)),
        "ok": sum(1 for r in rows if r.get("error") is None),
        "errors": errors,
        "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in rows),
        "completion_tokens": sum(r.get("completion_tokens") or 0 for r in rows),
    }


def run(tiny: Tiny, tmp: Path, rounds: int = ROUNDS) -> dict[str, Any]:
    folder = tmp / "stream"
    images = write_png_set(folder / "img", "x", PROMPTS * PER_PROMPT, seed=200)
    pairs = [
        [f"img/{p.name}" for p in images[i : i + PER_PROMPT]]
        for i in range(0, len(images), PER_PROMPT)
    ]
    manifests = {"mmrun": folder / "manifest.jsonl", "mmrun_bad": folder / "manifest-bad.jsonl"}
    _manifest(manifests["mmrun"], pairs, bad=False)
    _manifest(manifests["mmrun_bad"], pairs, bad=True)
    config = plan(tiny, folder)
    config["files"] = [[str(folder / p) for p in pair] for pair in pairs]
    config_file = folder / "one-call.json"
    config_file.write_text(json.dumps(config))
    common = ["--max-tokens", str(MAX_TOKENS), "--sampling-arg", "ignore_eos=true"]

    def one_call(i: int) -> dict[str, Any]:
        child = run_child([PYTHON, str(WORKERS / "one_call.py"), str(config_file)], env=bench_env())
        if child.returncode != 0:
            raise RuntimeError(f"one_call.py failed:\n{child.stderr[-3000:]}")
        out = last_json_line(child.stdout)
        return {
            "wall_s": child.wall_s,
            "result_s": out["phases_s"]["generated"],
            "engine_ready_s": out["phases_s"]["engine_started"],
            "generate_s": out["generate_s"],
            "frontend_cpu_s": out["frontend_cpu_s"],
            "engine_cpu_s": out["engine_cpu_s"],
            "returned_after_start_s": out["returned_at"] - child.started,
            **{k: out[k] for k in ("phases_s", "prompts", "prompt_tokens", "completion_tokens")},
            "frontend_peak_mib": out["frontend_peak_mib"],
            "engine_peak_mib": out["engine_peak_mib"],
        }

    def mmrun(kind: str, i: int) -> dict[str, Any]:
        out_file = folder / f"out-{kind}-{i}.jsonl"
        record_file = folder / f"calls-{kind}-{i}.json"
        command = tiny.mmrun(
            "--input", str(manifests[kind]), "-o", str(out_file), *common, **OVERRIDES
        )
        env = bench_env(MMRUN_CACHE_DIR=str(folder / f"cache-{kind}-{i}"))
        child = run_child(
            [PYTHON, str(WORKERS / "count_calls.py"), str(record_file), *command[1:]],
            env=env,
            watch=out_file,
        )
        expected = 3 if kind == "mmrun_bad" else 0  # mmrun's exit code for "some items failed"
        if child.returncode != expected:
            raise RuntimeError(
                f"mmrun ({kind}) exited {child.returncode}, not {expected}:\n{child.stderr[-3000:]}"
            )
        record = json.loads(record_file.read_text())
        lines = child.lines_at or []
        ready = record["engine_ready"] - child.started
        first, last = lines[0][0], lines[-1][0]
        at_ready, at_end = record["cpu_at_ready"], record["cpu_at_end"]
        summary = [x for x in child.stderr.strip().splitlines() if " done, " in x]
        return {
            "wall_s": child.wall_s,
            "returncode": child.returncode,
            "engine_ready_s": ready,
            "first_line_s": first,
            "last_line_s": last,
            "generate_external_s": last - ready,
            "first_after_ready_s": first - ready,
            # CPU seconds from the engine's start to the batch's end (the call's, for one call)
            "frontend_cpu_s": at_end["frontend"] - at_ready["frontend"],
            "engine_cpu_s": at_end["engine"] - at_ready["engine"],
            "line_arrivals": len(lines),
            "timings": record.get("timings", {}),
            "calls": record["calls"],
            "steps": record["steps"],
            "frontend_peak_mib": record.get("frontend_peak_mib"),
            "engine_peak_mib": record.get("engine_peak_mib"),
            "output": _read_output(out_file),
            "summary_line": summary[-1].strip() if summary else None,
        }

    kinds = ["one_call", "mmrun", "mmrun_bad"]
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for i in range(rounds):
        for kind in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:
            load1 = os.getloadavg()[0]
            result = one_call(i) if kind == "one_call" else mmrun(kind, i)
            result["load1"] = load1
            result["load1_end"] = os.getloadavg()[0]
            result["round"] = i
            runs[kind].append(result)
            if kind == "one_call":
                log(
                    f"stream round {i + 1}/{rounds} one call: generate {result['generate_s']:.2f} s,"
                    f" result at {result['result_s']:.1f} s"
                )
            else:
                log(
                    f"stream round {i + 1}/{rounds} {kind}: engine ready {result['engine_ready_s']:.1f} s,"
                    f" first line {result['first_line_s']:.1f} s, last {result['last_line_s']:.1f} s"
                )

    def med(kind: str, key: str) -> float:
        return median([r[key] for r in runs[kind]])

    one = med("one_call", "generate_s")
    good = med("mmrun", "generate_external_s")
    bad = med("mmrun_bad", "generate_external_s")

    def cpu(run: dict[str, Any]) -> float:
        return float(run["frontend_cpu_s"] + run["engine_cpu_s"])

    def paired(kind: str, value: Any) -> float:
        """The median over the rounds of one call's figure / this kind's, within each round."""
        return median(
            [value(a) / value(b) for a, b in zip(runs["one_call"], runs[kind], strict=True)]
        )

    return {
        "prompts": PROMPTS,
        "images_per_prompt": PER_PROMPT,
        "max_tokens": MAX_TOKENS,
        "rounds": rounds,
        "bad_index": BAD_INDEX,
        "bad_words": BAD_WORDS,
        "engine_args": config["engine_args"],
        "mmrun_command": "mmrun image -m qwen2_5_vl --model <tiny> --input manifest.jsonl "
        "-o out.jsonl " + " ".join(common) + " " + " ".join(tiny.flags(**OVERRIDES)),
        "runs": runs,
        "one_call_generate_s": one,
        "mmrun_generate_s": good,
        "mmrun_bad_generate_s": bad,
        "throughput_ratio": one / good,
        # one call's time / mmrun's within each round (run close together in time)
        "paired_ratio": median(
            [
                a["generate_s"] / b["generate_external_s"]
                for a, b in zip(runs["one_call"], runs["mmrun"], strict=True)
            ]
        ),
        "one_call_cpu_s": median([cpu(r) for r in runs["one_call"]]),
        "mmrun_cpu_s": median([cpu(r) for r in runs["mmrun"]]),
        "mmrun_bad_cpu_s": median([cpu(r) for r in runs["mmrun_bad"]]),
        # one call's CPU seconds / mmrun's, within each round
        "cpu_ratio": paired("mmrun", cpu),
        "bad_item_extra_cpu_s": median([cpu(r) for r in runs["mmrun_bad"]])
        - median([cpu(r) for r in runs["mmrun"]]),
        "bad_item_extra_s": bad - good,
        "bad_item_extra_wall_s": med("mmrun_bad", "wall_s") - med("mmrun", "wall_s"),
        "one_call_result_s": med("one_call", "result_s"),
        "mmrun_first_line_s": med("mmrun", "first_line_s"),
        "mmrun_last_line_s": med("mmrun", "last_line_s"),
        "mmrun_first_after_ready_s": med("mmrun", "first_after_ready_s"),
    }
