"""Issue 16 items 2-3 and issue 15's GPU figures: throughput of the Qwen2.5-VL-3B-shaped batch
(dummy weights, compiled, 4 distinct 448x448 images per prompt, 64 tokens, ignore_eos, greedy),
raw vLLM with default settings against mmrun, run one after another on one GPU (the data-
parallel steps on two), with the GPU's utilisation sampled, and the greedy texts compared.

Steps (--steps or TPUT_STEPS; a step may repeat; each is skipped if too little time is left):
  raw        raw_bench.py: 64 x 4 then 256 x 4 (distinct images), OMP_NUM_THREADS unset
  rawomp8    the same with OMP_NUM_THREADS=8 and vLLM's request metrics
  mm256      mmrun, 256 x 4 in one call (named images, --per-prompt 4, --warmup 2), default
             frontend threads (mmrun.engine.use_frontend_threads)
  mm64       the same, 64 x 4
  mm256omp1  mm256 with OMP_NUM_THREADS=1 (mmrun then leaves the threads alone: vLLM's 1)
  st256      mmrun's streamed batch mode: --input m256.jsonl -o out.jsonl (time to first line)
  dp1        streamed, 1024 x 4, -dp 1 on GPU 0            (issue 15: scaling efficiency)
  dp2        streamed, 1024 x 4, -dp 2 on GPUs 0 and 1
  dp2omp8    dp2 with OMP_NUM_THREADS=8 for every process (the engine cores' torch threads too)
  dp2win     dp2 through mmsw.py with MMSW=replicawin (each replica keeps 1.25 x max_num_seqs
             prompts in its engine instead of 2 x)
  mm256mbt   mm256 with max_num_batched_tokens=32768 (a GPU-side setting; its own compile)
  mm256ps    mm256 through mmsw.py with MMSW=pollslice (results asked for at most every 0.5 s
             while requests remain to submit, every queued one taken)
  st256ps    st256 with the same switch
  mm256enc   mm256 with the vision encoder compiled and in CUDA graphs (vLLM's
             compile_mm_encoder, cudagraph_mm_encoder; its own compile)
  mm256cg    mm256 with the vision encoder in CUDA graphs, not compiled (cudagraph_mm_encoder
             only: vLLM captures them at the engine start; its own compile of the LM)
  mm64cg     mm64 with cudagraph_mm_encoder only
  mm256own   mm256 without the bench's --engine-arg max_num_seqs=256 (mmrun's own batch size)
  mm256s5    mm256 with max_num_seqs=5 (the qwen2_5_vl seed's value; mmrun's default before
             it sized GPU batches itself; its own compile)
  dp1enc     dp1 with the vision encoder compiled (compile_mm_encoder; its own compile)
  ray        streamed, 1024 x 4, --backend ray --replicas 2 (a local Ray cluster, both GPUs)
  prof       raw_bench.py 64 x 4 under vLLM's torch profiler (its own compile; optional)
  mm256smp   mm256 with every Python process's stacks sampled (smp/sitecustomize.py, every 20
             ms, into RUN/smp/; smp.py summarises): where the frontend and the engine core
             spend their time, the first requests after the engine is ready included
  rawsmp     raw (OMP_NUM_THREADS=8) with the same sampler
  st256smp   st256 with the same sampler
  (sampled steps measure nothing: the sampler takes some of the CPU)
  mm64s64    mm64 with max_num_seqs=64 (CUDA graphs up to 128 instead of 512; its own compile)
  rawph      raw with the GPU phase probe (phases/sitecustomize.py: CUDA events around each
             engine step's encoder, forward and sampling; phases.py splits the batch's GPU time)
  mm256ph    mm256own with the same probe (the probe costs a few events per engine step)
  mm256ir    mm256own with vLLM's own CUDA kernels for RMSNorm (ir_op_priority: vllm_c first).
             With the language model compiled, vLLM runs its RMSNorm in plain PyTorch ops
             ("native", for Inductor to fuse), and so does the vision encoder, which is not
             compiled: about 9 float32 kernels per norm, 2 norms per block (its own compile)
  mm256irph  mm256ir with the phase probe
  mm64ir     mm64s64 with the same kernels (its own compile)
             Since 6ea5634 mmrun puts these kernels first itself on a CUDA build: mm256own and
             mm256ph are then mm256ir and mm256irph, and the steps below give the earlier default
  mm256nat   mm256own with vLLM's own choice of RMSNorm (ir_op_priority={}: "native" when
             compiled), what mmrun ran before 6ea5634 (its own compile)
  mm256natph mm256nat with the phase probe
Every mmrun step runs with -v (vLLM's log, for the moment the engine is ready).

usage: tput.py run --res DIR --bench /tmp/bench --model DIR [--steps "..."] [--budget S]
       tput.py summary DIR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import contextlib

import phases
from common import (
    MM_BATCH_ARGS,
    MM_COMMON,
    fmt,
    image_flags,
    kill_gpu_leftovers,
    mmrun_cmd,
    probe_env,
    py,
    read_run,
    result_window,
    stamp,
    table,
    ttr,
)

HERE = Path(__file__).resolve().parent
DEFAULT_STEPS = "raw mm256 st256 dp1 dp2 mm64 mm256omp1"
# A first guess of each step's seconds (engine start on a warm compile cache ~45 s + work);
# replaced by what the step took when it repeats.
EXPECTED = {
    "raw": 70,
    "rawomp8": 65,
    "mm256": 60,
    "mm64": 50,
    "mm256omp1": 65,
    "st256": 60,
    "dp1": 110,
    "dp2": 80,
    "prof": 150,
    "ray": 200,
    "dp2omp8": 80,
    "dp2win": 80,
    "mm256mbt": 110,
    "mm256enc": 150,
    "mm256cg": 70,
    "mm64cg": 55,
    "mm256own": 65,
    "mm256s5": 140,
    "dp1enc": 150,
    "mm256ps": 60,
    "st256ps": 60,
    "mm256smp": 65,
    "rawsmp": 70,
    "st256smp": 65,
    "mm64s64": 110,
    "rawph": 70,
    "mm256ph": 65,
    "mm256ir": 150,
    "mm256irph": 150,
    "mm64ir": 140,
    "mm256nat": 65,
    "mm256natph": 65,
}


ENC_CG = 'compilation_config={"cudagraph_mm_encoder": true}'
ENC_COMPILE = 'compilation_config={"compile_mm_encoder": true}'
# vLLM's CUDA kernels for RMSNorm in every part of the model, the eager vision encoder included
IR_C = (
    'ir_op_priority={"rms_norm": ["vllm_c", "native"], "fused_add_rms_norm": ["vllm_c", "native"]}'
)

# The one-call 256 x 4 run and its variants: (extra mmrun flags, extra environment).
MM256_VARIANTS: dict[str, tuple[list[str], dict[str, str]]] = {
    "mm256": ([], {}),
    "mm256omp1": ([], {"OMP_NUM_THREADS": "1"}),
    "mm256mbt": (["--engine-arg", "max_num_batched_tokens=32768"], {}),
    "mm256enc": (
        [
            "--engine-arg",
            'compilation_config={"compile_mm_encoder": true, "cudagraph_mm_encoder": true}',
        ],
        {},
    ),
    "mm256ps": ([], {"MMSW": "pollslice"}),
    "mm256cg": (["--engine-arg", ENC_CG], {}),
    "mm256s5": (["--engine-arg", "max_num_seqs=5"], {}),
}

# The steps run with a diagnosis probe first on PYTHONPATH (a sitecustomize.py that every
# Python process of the run imports): the step each probes, the probe's folder here, and the
# variable naming the folder it writes into (run_dir/<probe folder>).
PROBED = {
    # the stack sampler (smp/): every process's stacks every 20 ms
    "mm256smp": ("mm256", "smp", "MMSAMPLE_DIR"),
    "rawsmp": ("rawomp8", "smp", "MMSAMPLE_DIR"),
    "st256smp": ("st256", "smp", "MMSAMPLE_DIR"),
    # the GPU phase probe (phases/): CUDA events around each engine step's parts
    "rawph": ("raw", "phases", "MMPHASES_DIR"),
    "mm256ph": ("mm256own", "phases", "MMPHASES_DIR"),
    "mm256irph": ("mm256ir", "phases", "MMPHASES_DIR"),
    "mm256natph": ("mm256nat", "phases", "MMPHASES_DIR"),
}


def step_command(
    step: str, bench: Path, model: str, run_dir: Path
) -> tuple[list[str], dict[str, str], str, str | None]:
    """(command, environment, result regex, watched output file)."""
    if step in PROBED:
        base, folder, variable = PROBED[step]
        cmd, env, result, watch = step_command(base, bench, model, run_dir)
        return cmd, {**env, **probe_env(run_dir, folder, variable)}, result, watch
    raw = [py(), str(HERE / "raw_bench.py"), "--model", model]
    sets = ["--set", f"s64:{bench / 's64'}", "--set", f"s256:{bench / 's256'}"]
    named = ["image", "-m", "qwen2_5_vl", "--model", model, "--per-prompt", "4", "--warmup", "2"]
    named_tail = ["--json", "-v", *MM_COMMON, *MM_BATCH_ARGS]
    out = str(run_dir / "out.jsonl")
    streamed = [
        "image",
        "-m",
        "qwen2_5_vl",
        "--model",
        model,
        "-o",
        out,
        "--overwrite",
        "-v",
        *MM_COMMON,
        *MM_BATCH_ARGS,
    ]
    gpu0 = {"CUDA_VISIBLE_DEVICES": "0"}
    if step == "raw":
        return raw + sets + ["--out", str(run_dir / "texts.json")], gpu0, r"^RESULT_DONE", None
    if step == "rawomp8":
        return (
            raw + sets + ["--metrics", "--out", str(run_dir / "texts.json")],
            {**gpu0, "OMP_NUM_THREADS": "8"},
            r"^RESULT_DONE",
            None,
        )
    if step == "prof":
        return (
            [*raw, "--set", f"s64:{bench / 's64'}", "--profile", str(run_dir / "prof")],
            gpu0,
            r"^RESULT_DONE",
            None,
        )
    if step in ("mm256own", "mm256ir", "mm256nat"):
        own_tail = ["--json", "-v", *MM_COMMON]  # named_tail without MM_BATCH_ARGS
        if step == "mm256ir":
            own_tail += ["--engine-arg", IR_C]
        if step == "mm256nat":
            own_tail += ["--engine-arg", "ir_op_priority={}"]
        return mmrun_cmd(*named, *image_flags(bench / "s256"), *own_tail), gpu0, r"^\{", None
    if step in MM256_VARIANTS:
        more, env = MM256_VARIANTS[step]
        cmd = mmrun_cmd(
            *named, *image_flags(bench / "s256"), *named_tail, *more, switches="MMSW" in env
        )
        return cmd, {**gpu0, **env}, r"^\{", None
    if step in ("st256", "st256ps"):
        env = {"MMSW": "pollslice"} if step == "st256ps" else {}
        cmd = mmrun_cmd(*streamed, "--input", str(bench / "ms256.jsonl"), switches=bool(env))
        return cmd, {**gpu0, **env}, "", out
    if step in ("mm64", "mm64cg"):
        more = ["--engine-arg", ENC_CG] if step == "mm64cg" else []
        cmd = mmrun_cmd(*named, *image_flags(bench / "s64"), *named_tail, *more)
        return cmd, gpu0, r"^\{", None
    if step in ("mm64s64", "mm64ir"):
        tail = ["--json", "-v", *MM_COMMON, "--engine-arg", "max_num_seqs=64"]
        if step == "mm64ir":
            tail += ["--engine-arg", IR_C]
        return mmrun_cmd(*named, *image_flags(bench / "s64"), *tail), gpu0, r"^\{", None
    if step in ("dp1", "dp1enc"):
        enc = ["--engine-arg", ENC_COMPILE] if step == "dp1enc" else []
        return (
            mmrun_cmd(*streamed, "--input", str(bench / "ms1024.jsonl"), "-dp", "1", *enc),
            gpu0,
            "",
            out,
        )
    if step in ("dp2", "dp2omp8", "dp2win"):
        win = step == "dp2win"
        return (
            mmrun_cmd(*streamed, "--input", str(bench / "ms1024.jsonl"), "-dp", "2", switches=win),
            {
                "CUDA_VISIBLE_DEVICES": "0,1",
                **({"OMP_NUM_THREADS": "8"} if step == "dp2omp8" else {}),
                **({"MMSW": "replicawin"} if win else {}),
            },
            "",
            out,
        )
    if step == "ray":
        # --backend ray, 2 engine actors on this host's 2 GPUs (a local Ray cluster started by
        # mmrun for the run); Ray itself from /tmp/raysite (carried in two parts, common.sh)
        pythonpath = ":".join(filter(None, ["/tmp/raysite", os.environ.get("PYTHONPATH", "")]))
        return (
            mmrun_cmd(
                *streamed,
                "--input",
                str(bench / "ms1024.jsonl"),
                "--backend",
                "ray",
                "--replicas",
                "2",
            ),
            {
                "CUDA_VISIBLE_DEVICES": "0,1",
                "PYTHONPATH": pythonpath,
                "RAY_USAGE_STATS_ENABLED": "0",
            },
            "",
            out,
        )
    raise SystemExit(f"unknown step {step!r}")


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    res = Path(args.res)
    res.mkdir(parents=True, exist_ok=True)
    smi = None
    if not args.dry:
        smi = subprocess.Popen(
            [
                "nvidia-smi",
                "--query-gpu=timestamp,index,utilization.gpu,memory.used",
                "--format=csv,noheader,nounits",
                "-lms",
                "200",
            ],
            stdout=open(res / "smi.csv", "w"),  # noqa: SIM115 (the sampler's, until it ends)
            stderr=subprocess.DEVNULL,
        )
    cpu_stop = threading.Event()
    cpu_thread = threading.Thread(target=sample_cpu, args=(res / "cpu.csv", cpu_stop), daemon=True)
    if not args.dry:
        cpu_thread.start()
    seen: dict[str, int] = {}
    took: dict[str, float] = {}
    try:
        for step in args.steps.split():
            seen[step] = seen.get(step, 0) + 1
            name = step if seen[step] == 1 else f"{step}_{seen[step]}"
            left = args.budget - (time.time() - t0)
            need = took.get(step, EXPECTED.get(step, 60))
            if left < need + 10:
                print(
                    f"{stamp(t0)} SKIP {name}: {left:.0f}s left, it takes ~{need:.0f}s", flush=True
                )
                continue
            run_dir = res / name
            cmd, env, result, watch = step_command(step, Path(args.bench), args.model, run_dir)
            started = time.time()
            print(f"{stamp(t0)} {name} ...", flush=True)
            proc = ttr(
                run_dir,
                cmd,
                env=env,
                result=result,
                watch=watch,
                timeout=min(420, left - 10),
                dry=args.dry,
            )
            if proc is not None:
                proc.wait()
            took[step] = time.time() - started
            if args.dry:
                continue
            rec = read_run(run_dir)
            print(
                f"{stamp(t0)} {name} rc={rec.get('rc')} exit_s={rec.get('exit_s')} "
                f"{short(rec)} {'; '.join(rec.get('errors', [])[:1])}",
                flush=True,
            )
            if step == "ray":  # the local Ray cluster mmrun started: Ray's own stop
                subprocess.run(
                    [py(), "-m", "ray.scripts.scripts", "stop", "--force"],
                    env={**os.environ, **env},
                    capture_output=True,
                    timeout=60,
                    check=False,
                )
            killed = kill_gpu_leftovers()
            if killed:
                print(f"{stamp(t0)} killed leftover GPU processes {killed}")
    finally:
        if smi is not None:
            smi.terminate()
        cpu_stop.set()
    return summary(res)


def sample_cpu(path: Path, stop: threading.Event) -> None:
    """The host's CPU use every 0.5 s (/proc/stat): wall time, busy % of all cores, cores."""

    def read() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    cores = os.cpu_count() or 1
    with open(path, "w") as f:
        last = read()
        while not stop.wait(0.5):
            now = read()
            total, idle = now[0] - last[0], now[1] - last[1]
            last = now
            if total > 0:
                f.write(f"{time.time():.2f},{100 * (total - idle) / total:.1f},{cores}\n")
                f.flush()


def cpu_samples(res: Path) -> list[tuple[float, int, float]]:
    """cpu.csv as mean_busy() reads samples: (wall, 0, % of all cores busy)."""
    path = res / "cpu.csv"
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(ValueError, IndexError):
            wall, pct = line.split(",")[:2]
            out.append((float(wall), 0, float(pct)))
    return out


def short(rec: dict[str, Any]) -> str:
    if "raw" in rec:
        return " ".join(f"{r['set']}: {r['prompts_per_s']} p/s" for r in rec["raw"])
    doc = rec.get("doc")
    if doc:
        gen = doc.get("timings", {}).get("generate_s")
        return f"{len(doc.get('outputs', []))} outputs, generate_s={gen}"
    if rec.get("lines") is not None:
        return f"lines={rec.get('lines')} first={rec.get('first_line_s')} last={rec.get('last_line_s')}"
    return ""


# --- summary -----------------------------------------------------------------------------


def gpu_samples(res: Path) -> list[tuple[float, int, float]]:
    path = res / "smi.csv"
    samples = []
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            wall = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((wall, int(parts[1]), float(parts[2])))
        except ValueError:
            continue
    return samples


def mean_busy(
    samples: list[tuple[float, int, float]], devices: set[int], start: float, end: float
) -> float | None:
    """The mean of the samples (wall, device, % busy) of ``devices`` between start and end."""
    vals = [u for t, g, u in samples if g in devices and start <= t <= end]
    return sum(vals) / len(vals) if vals else None


def busy(
    samples: list[tuple[float, int, float]], gpus: set[int], start: float, end: float
) -> float | None:
    mean = mean_busy(samples, gpus, start, end)
    return None if mean is None else round(mean, 1)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def measure(rec: dict[str, Any], samples: list[tuple[float, int, float]]) -> list[dict[str, Any]]:
    """One or more measurements of a run: set, prompts, seconds, prompts/s, texts, GPU busy."""
    name = rec["name"]
    spawn = rec.get("spawn_wall", 0.0)
    found = []
    if "raw" in rec:
        texts = {}
        tpath = Path(rec["dir"]) / "texts.json"
        if tpath.exists():
            texts = json.loads(tpath.read_text())
        for r in rec["raw"]:
            found.append(
                {
                    "run": name,
                    "set": r["set"],
                    "n": r["n_prompts"],
                    "seconds": r["batch_wall_s"],
                    "prompts_per_s": r["prompts_per_s"],
                    "output_tokens": r["output_tokens"],
                    "texts": texts.get(r["set"]),
                    "gpu_busy": busy(samples, {0}, r["start_wall"], r["end_wall"]),
                    "window": (r["start_wall"], r["end_wall"]),
                    "note": f"threads={r.get('torch_threads')}",
                }
            )
        return found
    doc = rec.get("doc")
    if doc and doc.get("outputs"):
        outs = doc["outputs"]
        t = doc.get("timings", {})
        gen = t.get("generate_s")
        window = result_window(rec)
        found.append(
            {
                "run": name,
                "set": f"s{len(outs)}",
                "n": len(outs),
                "seconds": gen,
                "prompts_per_s": round(len(outs) / gen, 2) if gen else None,
                "output_tokens": sum(o["completion_tokens"] for o in outs),
                "texts": [o["text"] for o in outs],
                "gpu_busy": busy(samples, {0}, *window) if window else None,
                "window": window,
                "note": f"start {fmt(t.get('engine_start_s'), 1)}s, warm-up {fmt(t.get('warmup_s'), 2)}s, result at {fmt(rec.get('result_s'), 1)}s",
            }
        )
        return found
    out = Path(rec["dir"]) / "out.jsonl"
    rows = read_jsonl(out)
    if rows:
        ready = rec.get("marks", {}).get("init_engine")
        last = rec.get("last_line_s")
        n = len(rows)
        errors = sum(1 for r in rows if r.get("error"))
        secs = round(last - ready, 3) if last is not None and ready is not None else None
        basis = "engine ready"
        first = rec.get("first_line_s")
        if secs is None and last is not None and first is not None and last > first:
            # no engine-ready mark in the log (Ray's actors): the rate between first and last line
            secs, n, basis = round(last - first, 3), n - 1, "first line"
        replicas: dict[str, int] = {}
        for r in rows:
            replicas[str(r.get("replica", "-"))] = replicas.get(str(r.get("replica", "-")), 0) + 1
        by_index = sorted(rows, key=lambda r: r.get("index", 0))
        gpus = {0, 1} if name.startswith(("dp2", "ray")) else {0}
        found.append(
            {
                "run": name,
                "set": f"s{len(rows)}",
                "n": n,
                "seconds": secs,
                "prompts_per_s": round(n / secs, 2) if secs else None,
                "output_tokens": sum(r.get("completion_tokens") or 0 for r in rows),
                "texts": [r.get("text") for r in by_index],
                "gpu_busy": busy(
                    samples, gpus, spawn + (first if ready is None else ready), spawn + last
                )
                if secs
                else None,
                "window": (spawn + (first if ready is None else ready), spawn + (last or 0)),
                "note": (
                    f"replicas ready {[round(x, 1) for x in rec.get('replica_ready', [])]}, "
                    f"from the last: {fmt(n / (last - max(rec['replica_ready'])) if rec.get('replica_ready') and last and last > max(rec['replica_ready']) else None)} p/s; "
                    f"rate from {basis}; exit {fmt(rec.get('exit_s'), 1)}s; "
                    f"first line {fmt(rec.get('first_line_s'), 1)}s after spawn, engine ready "
                    f"{fmt(ready, 1)}s, last line {fmt(last, 1)}s, {errors} errors, per replica {replicas}, "
                    f"lines {fmt(rec.get('first_line_s'), 1)}..{fmt(last, 1)}: "
                    f"{fmt((n - 1) / (last - rec['first_line_s']) if last and rec.get('first_line_s') and last > rec['first_line_s'] else None)} p/s"
                ),
            }
        )
    return found


def same(a: list[Any] | None, b: list[Any] | None) -> str:
    if not a or not b or len(a) != len(b):
        return "-"
    return f"{sum(x == y for x, y in zip(a, b, strict=False))}/{len(a)}"


def summary(res: Path) -> int:
    samples = gpu_samples(res)
    meas: list[dict[str, Any]] = []
    failed = []
    for run_dir in sorted(p for p in res.iterdir() if p.is_dir() and (p / "cmd.txt").exists()):
        rec = read_run(run_dir)
        if rec.get("rc") != 0:
            failed.append(
                f"- {run_dir.name}: rc={rec.get('rc')} timed_out={rec.get('timed_out')} {'; '.join(rec.get('errors', []))[:400]}"
            )
        meas += measure(rec, samples)
    cpu = cpu_samples(res)
    for m in meas:
        if m.get("window"):
            pct = mean_busy(cpu, {0}, *m["window"])
            m["note"] = f"host CPU busy {'-' if pct is None else f'{pct:.0f}%'}; {m['note']}"
    # raw vLLM's default run of the call: "raw", or the probed "rawph" when no plain one ran
    ref = {m["set"]: m for m in meas if m["run"] == "rawph"}
    ref.update({m["set"]: m for m in meas if m["run"] == "raw"})
    rows = []
    for m in meas:
        base = ref.get(m["set"])
        ratio = (
            f"{m['prompts_per_s'] / base['prompts_per_s']:.3f}"
            if base and m.get("prompts_per_s") and base.get("prompts_per_s")
            else None
        )
        rows.append(
            [
                m["run"],
                m["set"],
                m["n"],
                m["seconds"],
                m["prompts_per_s"],
                ratio,
                m["output_tokens"],
                same(m.get("texts"), base.get("texts") if base else None),
                m["gpu_busy"],
                m["note"],
            ]
        )
    lines = ["## Throughput, Qwen2.5-VL-3B shape (dummy weights), 4 images/prompt, 64 tokens", ""]
    lines.append(
        table(
            [
                "run",
                "set",
                "prompts",
                "seconds",
                "prompts/s",
                "/ raw (same set)",
                "output tokens",
                "texts = raw",
                "GPU busy %",
                "note",
            ],
            rows,
        )
    )
    byrun = {m["run"]: m for m in meas}
    ratios = []

    def ratio(a: str, b: str, label: str) -> None:
        x, y = byrun.get(a), byrun.get(b)
        if x and y and x.get("prompts_per_s") and y.get("prompts_per_s"):
            r = x["prompts_per_s"] / y["prompts_per_s"]
            ratios.append(
                f"- {label}: {r:.3f}x ({a} {x['prompts_per_s']} / {b} {y['prompts_per_s']} prompts/s)"
            )

    ratio(
        "st256", "mm256", "streamed batch mode / one-call batch, 256 x 4 (issue 16.3, goal >= 0.95)"
    )
    ratio("mm256", "mm256omp1", "mmrun frontend threads default / OMP_NUM_THREADS=1, 256 x 4")
    ratio("dp2", "dp1", "-dp 2 on 2 GPUs / -dp 1 on 1 GPU, 1024 x 4 (issue 15, goal >= 1.85)")
    ratio("dp2omp8", "dp1", "-dp 2 with OMP_NUM_THREADS=8 everywhere / -dp 1, 1024 x 4")
    ratio("dp2win", "dp1", "-dp 2, replica window 1.25 x max_num_seqs / -dp 1, 1024 x 4")
    ratio("ray", "dp2", "--backend ray (2 actors) / -dp 2, 1024 x 4 (issue 15, goal >= 0.9)")
    ratio("rawomp8", "raw", "raw vLLM with OMP_NUM_THREADS=8 / raw default (last set of each)")
    ratio("mm256mbt", "mm256", "mmrun max_num_batched_tokens=32768 / mmrun default, 256 x 4")
    ratio("mm256enc", "mm256", "mmrun encoder compiled + CUDA graphs / mmrun default, 256 x 4")
    ratio("mm256cg", "mm256", "mmrun encoder in CUDA graphs / mmrun default, 256 x 4")
    ratio("mm64cg", "mm64", "mmrun encoder in CUDA graphs / mmrun default, 64 x 4")
    ratio("mm256own", "mm256", "mmrun's own batch size / the bench's max_num_seqs=256, 256 x 4")
    ratio("mm64s64", "mm64", "max_num_seqs=64 / 256 (CUDA graphs up to 128 / 512), 64 x 4")
    ratio("mm256ph", "rawph", "mmrun's own / raw default, 256 x 4, both with the phase probe")
    ratio("mm256ir", "mm256own", "vLLM's CUDA RMSNorm / mmrun's own, 256 x 4")
    ratio("mm256irph", "mm256ph", "vLLM's CUDA RMSNorm / mmrun's own, 256 x 4, phase probe")
    ratio("mm64ir", "mm64s64", "vLLM's CUDA RMSNorm / mmrun's own, 64 x 4")
    ratio("mm256own", "mm256nat", "mmrun's own / with vLLM's own RMSNorm choice, 256 x 4")
    ratio("mm256ph", "mm256natph", "the same, phase probe")
    ratio("mm256own", "mm256s5", "mmrun's own batch size / max_num_seqs=5 (the seed's), 256 x 4")
    ratio("dp1enc", "dp1", "streamed 1024 x 4, encoder compiled / not, from engine ready")
    ratio("mm256ps", "mm256", "mmrun with results asked for every 0.5 s / default, 256 x 4")
    ratio("st256ps", "st256", "streamed, results asked for every 0.5 s / default, 256 x 4")
    for m in meas:
        if m["run"] in (
            *("mm256", "mm64", "st256", "mm256mbt", "mm256enc", "mm256ps", "st256ps"),
            *("mm256cg", "mm64cg", "mm256own", "mm256s5", "mm256ph", "mm64s64"),
            *("mm256ir", "mm256irph", "mm64ir", "mm256nat", "mm256natph"),
        ):
            base = ref.get(m["set"])
            if base and m.get("prompts_per_s"):
                ratios.append(
                    f"- {m['run']} / raw default, {m['set']}: {m['prompts_per_s'] / base['prompts_per_s']:.3f}x (issue 16.2 goal >= 1.5 at 256, >= 1.35 at 64)"
                )
    lines += ["", "### Ratios", *ratios]
    st = byrun.get("st256")
    if st:
        lines.append(f"- streamed 256 x 4: {st['note']}")
    metrics = [
        rec
        for rec in (read_run(p) for p in res.iterdir() if p.is_dir() and (p / "cmd.txt").exists())
        if rec.get("RAW_METRICS")
    ]
    for rec in metrics:
        lines.append(f"- vLLM request metrics ({rec['name']}): {rec['RAW_METRICS'][:1500]}")
    prof = list(res.glob("prof*/prof/profiler_out_0.txt"))
    for p in prof:
        head = p.read_text().splitlines()[:45]
        (res / "profile_table.txt").write_text("\n".join(head) + "\n")
        lines.append(f"- torch profiler table: {p} (first 45 lines in profile_table.txt)")
    phased = [p for p in sorted(res.iterdir()) if (p / "phases").is_dir()]
    if phased:
        lines += ["", "### Where the GPU's time went during each batch (phases.py)", ""]
        lines.append(phases.summary(phased))
    if failed:
        lines += ["", "### Failed", *failed]
    text = "\n".join(lines) + "\n"
    (res / "tput_summary.md").write_text(text)
    print(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--res", required=True)
    r.add_argument("--bench", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--steps", default=os.environ.get("TPUT_STEPS", DEFAULT_STEPS))
    r.add_argument("--budget", type=float, default=float(os.environ.get("TPUT_BUDGET", "480")))
    r.add_argument("--dry", action="store_true")
    s = sub.add_parser("summary")
    s.add_argument("res")
    args = ap.parse_args()
    if args.cmd == "summary":
        return summary(Path(args.res))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
