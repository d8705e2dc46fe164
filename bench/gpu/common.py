"""Shared by the GPU drivers (gap.py, tput.py, proofs.py): the mmrun command for the 3B-shaped
batch, running timed commands through ttr.py, reading their records, and the summary helpers.
Nothing here needs a GPU: `python3 bench/gpu/selfcheck.py` runs the drivers' logic on fake runs."""

from __future__ import annotations

import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The runs' common sampling and engine settings for the Qwen2.5-VL-3B-shaped model: those of
# bench3b.py / the measurements (max_model_len 8192, bf16, dummy weights, greedy,
# 64 tokens, ignore_eos), each mmrun run with 4 images per prompt.
MM_COMMON = [
    "--temperature",
    "0",
    "--max-tokens",
    "64",
    "--sampling-arg",
    "ignore_eos=true",
    "--engine-arg",
    "load_format=dummy",
    "--engine-arg",
    "dtype=bfloat16",
    "--engine-arg",
    "max_model_len=8192",
]
# The batch benchmarks name max_num_seqs=256 as every GPU run did (the same CUDA graph sizes and
# compile cache as vLLM's default 1024 on an H200, both capped at 512). Since 4e23670 mmrun uses
# 256 on its own for a GPU batch of more prompts than the model's max_num_seqs (the
# qwen2_5_vl seed's 5); tput.py's mm256own step runs without this flag.
MM_BATCH_ARGS = ["--engine-arg", "max_num_seqs=256"]
# The raw script's engine arguments as mmrun flags (raw_bench.py: vLLM's default max_num_seqs
# on an H200 is 1024, limit_mm_per_prompt without audio, seed 0).
MM_RAW_ARGS = [
    "--engine-arg",
    "max_num_seqs=1024",
    "--engine-arg",
    'limit_mm_per_prompt={"image": 4, "video": 0}',
    "--seed",
    "0",
]
# vLLM's start-up log lines (vLLM 0.26, INFO), in the order they come: the phases compared.
MARKS = [
    ("mmrun_start", r"mmrun: starting vLLM"),
    ("args", r"non-default args"),
    ("engine_init", r"Initializing a V1 LLM engine"),
    ("load_start", r"Starting to load model"),
    ("model_loaded", r"Model loading took"),
    ("dynamo", r"Dynamo bytecode transform time"),  # the compile cache loaded (or traced)
    ("compiled", r"torch\.compile takes|Directly load the compiled graph|compilation: "),
    ("kv_cache", r"Available KV cache memory|GPU KV cache size"),
    ("graphs", r"Graph capturing finished"),
    ("init_engine", r"init engine \(profile, create kv cache, warmup model\) took"),
]
SPAWN_WARNING = r"We must use the `spawn` multiprocessing start method"


def py() -> str:
    return sys.executable or "python3"


def mmrun_cmd(*args: str, switches: bool = False) -> list[str]:
    """``python3 -m mmrun ARGS`` (or through mmsw.py, whose MMSW switches patch mmrun)."""
    head = [py(), str(HERE / "mmsw.py")] if switches else [py(), "-m", "mmrun"]
    return head + list(args)


def probe_env(run_dir: Path, folder: str, variable: str) -> dict[str, str]:
    """The probe in HERE/folder for every Python process of a run, writing into run_dir."""
    path = ":".join(filter(None, [str(HERE / folder), os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, variable: str(run_dir / folder)}


def image_flags(folder: Path) -> list[str]:
    flags: list[str] = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".png"):
            flags += ["-i", str(folder / name)]
    return flags


def ttr(
    run_dir: Path,
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    result: str = "",
    watch: str | None = None,
    timeout: float = 0,
    dry: bool = False,
) -> subprocess.Popen[bytes] | None:
    """Start CMD under ttr.py (timestamps of its output) in RUN_DIR; the Popen (not waited)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    wrapper = [py(), str(HERE / "ttr.py"), "--dir", str(run_dir)]
    if result:
        wrapper += ["--result", result]
    if watch:
        wrapper += ["--watch", watch]
    if timeout:
        wrapper += ["--timeout", str(int(timeout))]
    for key, value in (env or {}).items():
        wrapper += ["--env", f"{key}={value}"]
    full = [*wrapper, "--", *cmd]
    (run_dir / "cmd.txt").write_text(" ".join(_quote(c) for c in full) + "\n")
    if dry:
        return None
    return subprocess.Popen(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w@%+=:,./-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def stamp(t0: float) -> str:
    return f"[+{time.time() - t0:5.0f}s {time.strftime('%H:%M:%S')}]"


def kill_gpu_leftovers() -> list[str]:
    """SIGKILL whatever still holds a GPU (a run that ended badly); the pids killed."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    killed = []
    for pid in out.split():
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 9)
                killed.append(pid)
            except OSError:
                pass
    if killed:
        time.sleep(2)
    return killed


# --- reading a run --------------------------------------------------------------------------


def _read_bytes(path: Path) -> bytes | None:
    """A run's file, or its gzipped copy (results kept in the repository are compressed)."""
    if path.exists():
        return path.read_bytes()
    packed = path.with_name(path.name + ".gz")
    return gzip.decompress(packed.read_bytes()) if packed.exists() else None


def result_window(rec: dict[str, Any]) -> tuple[float, float] | None:
    """Wall-clock start and end of an mmrun one-call batch: its result line's arrival, less
    the batch's own time (timings.generate_s)."""
    gen = (rec.get("doc") or {}).get("timings", {}).get("generate_s")
    if gen is None or "spawn_wall" not in rec or rec.get("result_s") is None:
        return None
    end = rec["spawn_wall"] + rec["result_s"]
    return end - gen, end


def read_run(run_dir: Path) -> dict[str, Any]:
    """A run's record: ttr.json, the marks found in its log, and what it printed (mmrun's JSON
    document, or raw_bench.py's RESULT lines)."""
    rec: dict[str, Any] = {"dir": str(run_dir), "name": run_dir.name}
    path = run_dir / "ttr.json"
    if not path.exists():
        rec["missing"] = True
        return rec
    rec.update(json.loads(path.read_text()))
    marks: dict[str, float] = {}
    last: dict[str, float] = {}
    errors: list[str] = []
    raw: list[dict[str, Any]] = []
    args_lines: list[str] = []
    ready_lines: list[float] = []  # -dp N: when each replica said it was ready
    spawn = False
    # bytes, split on \n only: a progress bar's \r is not the end of a timestamped line
    text_all = (_read_bytes(run_dir / "log.txt") or b"").decode(errors="replace")
    for line in text_all.split("\n"):
        t_text, _, rest = line.strip().partition(" ")
        try:
            t = float(t_text)
        except ValueError:
            continue
        text = rest[2:]
        for name, pattern in MARKS:
            if re.search(pattern, text):
                marks.setdefault(name, t)
                last[name] = t
        if re.search(r"mmrun: replica \d+ .*ready after", text):
            ready_lines.append(t)
        # vLLM's own figures for the compile (from its cache): the AOT artifact's load shows
        # as "Dynamo bytecode transform time", the whole as "torch.compile took"
        for key, pattern in (
            ("dynamo_s", r"Dynamo bytecode transform time: ([\d.]+) s"),
            ("compile_s", r"torch\.compile took ([\d.]+) s in total"),
        ):
            found = re.search(pattern, text)
            if found:
                rec.setdefault(key, float(found.group(1)))
        if "core_pid" not in rec:
            pid = re.search(r"EngineCore pid=(\d+)", text)
            if pid:
                rec["core_pid"] = pid.group(1)
        if "non-default args" in text:
            args_lines.append(text[text.find("non-default args") :][:1500])
        if re.search(SPAWN_WARNING, text):
            spawn = True
        if text.startswith("RESULT_BATCH "):
            raw.append(json.loads(text[len("RESULT_BATCH ") :]))
        elif text.startswith("RAW_ENGINE ") or text.startswith("RAW_METRICS "):
            key = text.split(" ", 1)[0]
            rec[key] = text.split(" ", 1)[1]
        elif re.search(r"mmrun: error|Traceback|Error: |error: ", text):
            errors.append(text[:300])
    rec["marks"] = {k: round(v, 2) for k, v in marks.items()}
    if "compiled" in last:
        rec["marks"]["compiled_last"] = round(last["compiled"], 2)
    rec["args_lines"] = args_lines
    rec["replica_ready"] = ready_lines
    rec["spawned_core"] = spawn
    rec["errors"] = errors[:5]
    if raw:
        rec["raw"] = raw
    stdout = _read_bytes(run_dir / "stdout")
    if stdout is not None:
        text = stdout.decode(errors="replace").strip()
        if text.startswith("{"):
            try:
                rec["doc"] = json.loads(text)
            except json.JSONDecodeError:
                rec["doc_error"] = text[:200]
    lines = run_dir / "lines.txt"
    if lines.exists():
        rec["line_times"] = [float(x) for x in lines.read_text().split()]
    return rec


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
