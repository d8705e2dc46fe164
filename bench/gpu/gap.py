"""Issue 16 item 1: mmrun's time to result against the raw vLLM script's, cold process each, the
same compile cache, interleaved rounds; vLLM's start-up log (INFO) of each run timestamped so
the phases can be compared; variants that split "engine arguments" from "mmrun itself" and try
the suspected causes (mmsw.py switches).

The work: 64 prompts x 4 distinct 448x448 PNGs, the Qwen2.5-VL-3B-shaped dummy model, compiled,
2 warm-up prompts, 64 tokens (as the issue's measurement). Time to result: from spawn to the
result on stdout (mmrun's JSON document; raw_bench.py's RESULT_BATCH line).

Variants (GAP_VARIANTS or --variants picks them, in pairs that run at the same time, one on
each GPU, the GPUs swapped every round):
  R     raw_bench.py (vLLM's defaults + the script's 5 arguments)
  M     mmrun -v, the batch flags of the earlier runs (max_num_seqs 256)
  MR    mmrun -v with the raw script's engine arguments (max_num_seqs 1024, limit_mm without
        audio, seed 0): what is left is mmrun itself
  Mq    M without -v (how users run it: mmrun's quiet environment)
  Menv  M with mmrun's environment choices undone (TOKENIZERS_PARALLELISM, VLLM_RPC_BASE_PATH,
        VLLM_LOGGING_STREAM set as the raw script has them)
  Msw   M, vLLM imported first and media decoded by 1 thread (MMSW=preimport,workers1)
  Mrt   M, the processor loaded in a thread during vllm.LLM() (MMSW=render_thread)
  Mgen  M through LLM.generate instead of enqueue + step (MMSW=generate)
  M64   M with max_num_seqs=64 (fewer CUDA graphs; its own compile: needs the cold round)
  Where the engine core's slower AOT-artifact load in mmrun comes from (vLLM's "Dynamo bytecode
  transform time", 1.9 s raw against 3.7 s mmrun on the H200, 2026-12-01):
  Ro8       R with OMP_NUM_THREADS=8 (mmrun's setting, in the frontend and the engine core)
  M64o16    M64 with OMP_NUM_THREADS=16 (the user's: mmrun leaves it)
  M64spawn  M64 with VLLM_WORKER_MULTIPROC_METHOD=spawn (an engine core that does not inherit
            mmrun's process)
  M64env    M64 with mmrun's environment choices undone (as Menv)
  M64gc     M64 with the frontend's objects frozen out of the collector before vLLM forks
            its engine core (MMSW=gcfreeze; mmrun does this itself since bf9ca07, so on
            later mmrun M64gc only freezes twice: M64 is the variant to run)
  M64nowarm M64 without the warm-up thread that loads the processor during the start
            (MMSW=nowarm)
  With the load probe, whether its speed workload (MMLOAD_SPEED) runs before the load, and
  without mmrun's frozen heap (the tenth GPU session: with the probe, with or without either,
  M64's load was as fast as R's; without any probe, or with the sampler, twice as slow):
  R0        R, MMLOAD_SPEED=0
  M64s0     M64, MMLOAD_SPEED=0
  M64nf0    M64 without mmrun's heap_frozen (MMSW=nofreeze), MMLOAD_SPEED=0
  The probe's parts alone (MMLOAD_PARTS; with GAP_PROBE=load, MMLOAD_SPEED=0), to find which
  of them makes M64's load fast (read vLLM's "Dynamo" column): M64pg the collector's callback
  only (no probe records), M64pw the watcher threads and the wrapped load only (records
  without the collector's figures), M64pn neither (the probe's sitecustomize only imported).
  TTR_MONITOR=0.25 in the environment: ttr.py reads every thread's CPU of each run from
  outside (monitor.jsonl), and the summary shows what each thread did during the load.
  GAP_PROBE=load (--probe load) runs every variant with the load probe (loadprobe/): what
  the engine core did while it loaded the compile cache (CPU time, collector, switches).
  GAP_PROBE=smp (--probe smp) samples every Python process's stacks every 20 ms (smp/, into
  RUN/smp/; the times are then not comparable): `python3 smp.py RUN/smp` per run shows where
  each engine core spent its start, e.g. R's against M64's in the same round.

usage: gap.py run --res DIR --images DIR --model DIR [--rounds N] [--budget S] [--variants ...]
       gap.py summary DIR      (also run at the end of `run`)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    MM_BATCH_ARGS,
    MM_COMMON,
    MM_RAW_ARGS,
    fmt,
    image_flags,
    kill_gpu_leftovers,
    median,
    mmrun_cmd,
    probe_env,
    py,
    read_run,
    stamp,
    table,
    ttr,
)
from ttr import cpu_in_window

HERE = Path(__file__).resolve().parent
DEFAULT_VARIANTS = "R M MR Msw"
WARM_MARKER = Path("/tmp/mm_warm_3b")  # written once a 3B-shaped run compiled (B's warm-up)


def variants(
    images: Path, model: str, run_dir: Path
) -> dict[str, tuple[list[str], dict[str, str], str]]:
    """name -> (command, environment, result regex)."""
    mm = ["image", "-m", "qwen2_5_vl", "--model", model, *image_flags(images)]
    mm += ["--per-prompt", "4", "--warmup", "2", "--json", *MM_COMMON]
    raw = [py(), str(HERE / "raw_bench.py"), "--model", model, "--set", f"b64:{images}"]
    doc = r"^\{"
    r_cmd = [*raw, "--out", str(run_dir / "texts.json")]
    m64 = mmrun_cmd(*mm, "--engine-arg", "max_num_seqs=64", "-v")
    m64sw = mmrun_cmd(*mm, "--engine-arg", "max_num_seqs=64", "-v", switches=True)
    # mmrun's environment choices set as the raw script has them (Menv, M64env)
    undone = {
        "TOKENIZERS_PARALLELISM": "true",
        "VLLM_RPC_BASE_PATH": "/tmp",
        "VLLM_LOGGING_STREAM": "ext://sys.stdout",
    }
    return {
        "R": (r_cmd, {}, r"^RESULT_BATCH"),
        "M": (mmrun_cmd(*mm, *MM_BATCH_ARGS, "-v"), {}, doc),
        "MR": (mmrun_cmd(*mm, *MM_RAW_ARGS, "-v"), {}, doc),
        "Mq": (mmrun_cmd(*mm, *MM_BATCH_ARGS), {}, doc),
        "Menv": (mmrun_cmd(*mm, *MM_BATCH_ARGS, "-v"), undone, doc),
        "Msw": (
            mmrun_cmd(*mm, *MM_BATCH_ARGS, "-v", switches=True),
            {"MMSW": "preimport,workers1"},
            doc,
        ),
        "Mrt": (
            mmrun_cmd(*mm, *MM_BATCH_ARGS, "-v", switches=True),
            {"MMSW": "render_thread"},
            doc,
        ),
        "Mgen": (
            mmrun_cmd(*mm, *MM_BATCH_ARGS, "-v", switches=True),
            {"MMSW": "generate"},
            doc,
        ),
        "M64": (m64, {}, doc),
        "Ro8": (r_cmd, {"OMP_NUM_THREADS": "8"}, r"^RESULT_BATCH"),
        "M64o16": (m64, {"OMP_NUM_THREADS": "16"}, doc),
        "M64spawn": (m64, {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}, doc),
        "M64env": (m64, undone, doc),
        "M64gc": (m64sw, {"MMSW": "gcfreeze"}, doc),
        "M64nowarm": (m64sw, {"MMSW": "nowarm"}, doc),
        "R0": (r_cmd, {"MMLOAD_SPEED": "0"}, r"^RESULT_BATCH"),
        "M64s0": (m64, {"MMLOAD_SPEED": "0"}, doc),
        "M64nf0": (m64sw, {"MMSW": "nofreeze", "MMLOAD_SPEED": "0"}, doc),
        "M64pg": (m64, {"MMLOAD_PARTS": "gc", "MMLOAD_SPEED": "0"}, doc),
        "M64pw": (m64, {"MMLOAD_PARTS": "wrap", "MMLOAD_SPEED": "0"}, doc),
        "M64pn": (m64, {"MMLOAD_PARTS": "none", "MMLOAD_SPEED": "0"}, doc),
    }


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    res = Path(args.res)
    names = args.variants.split()
    gpus = args.gpus.split(",")
    pairs = [names[i : i + len(gpus)] for i in range(0, len(names), len(gpus))]
    print(f"{stamp(t0)} gap: variants {names}, pairs {pairs}, GPUs {gpus}", flush=True)
    first = 0 if (args.cold or not WARM_MARKER.exists()) else 1
    durations: list[float] = []
    for rnd in range(first, args.rounds + 1):
        estimate = max(durations[-len(pairs) :], default=args.slot) * len(pairs)
        left = args.budget - (time.time() - t0)
        if rnd > 1 and left < estimate + 15:
            print(
                f"{stamp(t0)} stop before round {rnd}: {left:.0f}s left, a round takes ~{estimate:.0f}s"
            )
            break
        for p, pair in enumerate(pairs):
            if rnd == 0 and p == 0:  # cold caches: the first variant compiles alone
                groups = [[pair[0]], pair[1:]] if len(pair) > 1 else [pair]
            else:
                groups = [pair]
            for group in groups:
                if not group:
                    continue
                left = args.budget - (time.time() - t0)
                if left < 60:
                    print(f"{stamp(t0)} out of time ({left:.0f}s left)")
                    return summary(res)
                started = time.time()
                procs = []
                for i, name in enumerate(group):
                    gpu = gpus[(i + rnd) % len(gpus)]
                    run_dir = res / f"r{rnd}" / name
                    cmd, env, result = variants(Path(args.images), args.model, run_dir)[name]
                    env = {**env, "CUDA_VISIBLE_DEVICES": gpu}
                    if args.probe == "load":
                        env.update(probe_env(run_dir, "loadprobe", "MMLOAD_DIR"))
                    elif args.probe == "smp":
                        env.update(probe_env(run_dir, "smp", "MMSAMPLE_DIR"))
                    proc = ttr(
                        run_dir,
                        cmd,
                        env=env,
                        result=result,
                        timeout=min(300, left - 20),
                        dry=args.dry,
                    )
                    procs.append((name, gpu, proc, run_dir))
                for name, gpu, proc, run_dir in procs:
                    if proc is not None:
                        proc.wait()
                    rec = read_run(run_dir) if not args.dry else {}
                    print(
                        f"{stamp(t0)} round {rnd} {name:5} GPU{gpu} rc={rec.get('rc')} "
                        f"result_s={rec.get('result_s')} exit_s={rec.get('exit_s')} "
                        f"{'; '.join(rec.get('errors', [])[:1])}",
                        flush=True,
                    )
                if not args.dry:
                    killed = kill_gpu_leftovers()
                    if killed:
                        print(f"{stamp(t0)} killed leftover GPU processes {killed}")
                if rnd > 0:
                    durations.append(time.time() - started)
        if rnd == 0 and not args.dry:
            WARM_MARKER.touch()
    return summary(res)


PHASES = [
    "args",
    "engine_init",
    "model_loaded",
    "compiled_last",
    "kv_cache",
    "graphs",
    "init_engine",
]


def summary(res: Path) -> int:
    runs: dict[str, list[dict[str, Any]]] = {}
    cold: dict[str, dict[str, Any]] = {}
    for rnd_dir in sorted(res.glob("r*")):
        for run_dir in sorted(p for p in rnd_dir.iterdir() if p.is_dir()):
            rec = read_run(run_dir)
            if rnd_dir.name == "r0":
                cold[run_dir.name] = rec
            else:
                runs.setdefault(run_dir.name, []).append(rec)
    lines = ["## Start-up gap: time to result, 64 prompts x 4 images, cold process each", ""]
    base = median([r.get("result_s") for r in runs.get("R", []) if r.get("rc") == 0])
    rows = []
    runs = dict(sorted(runs.items(), key=lambda kv: (kv[0] != "R", kv[0])))
    for name, recs in runs.items():
        ok = [r for r in recs if r.get("rc") == 0 and r.get("result_s") is not None]
        med = median([r["result_s"] for r in ok])
        phase = [median([r.get("marks", {}).get(k) for r in ok]) for k in PHASES]
        timings = [
            median([r.get("doc", {}).get("timings", {}).get(k) for r in ok])
            for k in ("engine_start_s", "render_s", "warmup_s", "generate_s")
        ]
        compile_times = [median([r.get(k) for r in ok]) for k in ("dynamo_s", "compile_s")]
        rows.append(
            [
                name,
                f"{len(ok)}/{len(recs)}",
                med,
                None if base is None or med is None else f"{med / base:.3f}",
                " ".join(fmt(r.get("result_s"), 1) for r in recs),
                *phase,
                *timings,
                *compile_times,
                any(r.get("spawned_core") for r in recs),
            ]
        )
    lines.append(
        table(
            [
                "variant",
                "ok",
                "result s (median)",
                "/ R",
                "each round",
                *PHASES,
                "engine_start_s",
                "render_s",
                "warmup_s",
                "generate_s",
                "vLLM dynamo s",
                "torch.compile s",
                "core spawned",
            ],
            rows,
        )
    )
    lines += [
        "",
        "Phases: seconds from spawn to the first vLLM log line of each phase (compiled_last: the last compile line).",
        "",
    ]
    if cold:
        lines.append(
            "Cold round (discarded): "
            + ", ".join(
                f"{k} {fmt(v.get('result_s'), 1)}s rc={v.get('rc')}" for k, v in cold.items()
            )
        )
    lines += load_probe_table(res, list(runs))
    lines += monitor_table(res, list(runs))
    lines.append("")
    lines.append("### vLLM's 'non-default args' line of each variant (first round)")
    for name, recs in runs.items():
        first = next((r for r in recs if r.get("args_lines")), None)
        if first:
            lines.append(f"- {name}: {first['args_lines'][0][:700]}")
    for name, recs in runs.items():
        for r in recs:
            if r.get("rc") != 0:
                lines.append(
                    f"- FAILED {name} ({r.get('dir')}): rc={r.get('rc')} {'; '.join(r.get('errors', []))[:400]}"
                )
    text = "\n".join(lines) + "\n"
    (res / "gap_summary.md").write_text(text)
    print(text)
    return 0


LOAD_FIELDS = [
    ("load s", lambda r: r.get("wall_s")),
    ("cpu s", lambda r: r.get("cpu_s")),
    ("unpickle s", lambda r: r.get("unpickle_s")),
    ("verify s", lambda r: r.get("verify_s")),
    ("to backend s", lambda r: r.get("backend_at_s")),
    ("speed before s", lambda r: r.get("speed_before_s")),
    ("speed after s", lambda r: r.get("speed_after_s")),
    ("frontend cpu s", lambda r: r.get("parent_cpu_s")),
    ("host busy cpus", lambda r: r.get("busy_cpus")),
    ("gc s", lambda r: sum(s for _, s in r.get("gc", {}).values())),
    ("full gcs", lambda r: r.get("gc", {}).get("2", [0])[0]),
    ("gen1 gcs", lambda r: r.get("gc", {}).get("1", [0])[0]),
    ("frozen at start", lambda r: r.get("gc_at_start", {}).get("frozen")),
    ("inv. switches", lambda r: r.get("rusage", {}).get("nivcsw")),
    ("minor faults", lambda r: r.get("rusage", {}).get("minflt")),
    ("major faults", lambda r: r.get("rusage", {}).get("majflt")),
    ("objects", lambda r: r.get("objects")),
    ("threads", lambda r: r.get("threads")),
    ("torch threads", lambda r: r.get("torch_threads")),
    ("loadavg", lambda r: r.get("loadavg")),
]


def load_window(run_dir: Path) -> tuple[float, float, str | None] | None:
    """(from, to) seconds since spawn of the engine core's compile-cache load: vLLM's "Model
    loading took" line to its "Dynamo bytecode transform time" line (read_run's marks); and
    the engine core's pid."""
    rec = read_run(run_dir)
    marks = rec.get("marks", {})
    start, end = marks.get("model_loaded"), marks.get("dynamo")
    return None if start is None or end is None else (start, end, rec.get("core_pid"))


def monitor_row(run_dir: Path) -> list[Any] | None:
    """What every thread of the run did during the engine core's load (ttr.py --monitor)."""
    window = load_window(run_dir)
    path = run_dir / "monitor.jsonl"
    if window is None or not path.exists():
        return None
    start, end, core = window
    got = cpu_in_window(path, start, end)
    if not got:
        return None
    threads = got["threads"]
    in_core = {k: v for k, v in threads.items() if core and k.startswith(f"{core}/")}
    main_core = in_core.get(f"{core}/{core}", [None, None, 0.0])[2]
    other_core = sum(v[2] for v in in_core.values()) - main_core
    rest = {k: v for k, v in threads.items() if k not in in_core}
    top = sorted(rest.values(), key=lambda v: -v[2])[:3]
    return [
        round(end - start, 2),
        main_core,
        round(other_core, 2),
        round(sum(v[2] for v in rest.values()), 2),
        ", ".join(f"{v[0]}/{v[1]} {v[2]}" for v in top) or "-",
        got["host_busy_cpus"],
    ]


def monitor_table(res: Path, names: list[str]) -> list[str]:
    rows = []
    for name in names:
        for run_dir in sorted(res.glob(f"r*/{name}")):
            row = monitor_row(run_dir)
            if row is not None:
                rows.append([name, run_dir.parent.name, *row])
    if not rows:
        return []
    return [
        "",
        "### Every thread's CPU during the engine core's load (ttr.py --monitor, from outside)",
        "",
        table(
            [
                "variant",
                "round",
                "window s",
                "core main thread cpu s",
                "core other threads cpu s",
                "other processes cpu s",
                "busiest other threads",
                "host busy cpus",
            ],
            rows,
        ),
        "",
        "window: vLLM's 'Model loading took' line to its 'Dynamo bytecode transform time' line"
        " (the engine core's compile-cache load and what precedes it); other processes: the"
        " frontend and anything else of the run's session.",
    ]


def load_records(run_dir: Path) -> list[dict[str, Any]]:
    """The load probe's records of a run that loaded the compile cache (loadprobe/)."""
    recs = []
    for path in sorted((run_dir / "loadprobe").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("unpickle_s") is not None:
                recs.append(rec)
    return recs


def load_probe_table(res: Path, names: list[str]) -> list[str]:
    """Medians of the load probe's records per variant (rounds after the cold one)."""
    per: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        for run_dir in sorted(res.glob(f"r*/{name}")):
            if run_dir.parent.name != "r0":
                per.setdefault(name, []).extend(load_records(run_dir))
    if not any(per.values()):
        return []
    rows = []
    for name, recs in per.items():
        forked = sorted({str(r.get("forked")) for r in recs})
        cells = []
        for key, f in LOAD_FIELDS:
            value = median([f(r) for r in recs])
            counted = not key.endswith(" s") and key not in ("loadavg", "host busy cpus")
            cells.append(round(value) if counted and value is not None else value)
        rows.append([name, len(recs), *cells, "/".join(forked)])
    return [
        "",
        "### The engine core's load of the compile cache (load probe, medians)",
        "",
        table(["variant", "loads", *(k for k, _ in LOAD_FIELDS), "forked"], rows),
        "",
        "load s: the whole _try_load_aot_compiled_fn; cpu s: its thread's CPU time; to backend s:"
        " from its start to vLLM's backend call (vLLM's 'Dynamo bytecode transform time');"
        " speed before/after s: a fixed pure-Python workload in the engine core right before and"
        " after the load (the core's speed then); frontend cpu s: the starting process's CPU"
        " seconds during the load; host busy cpus: the whole host's;"
        " gc s / full gcs: the collector during the load; objects: the process's after it.",
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--res", required=True)
    r.add_argument("--images", required=True)
    r.add_argument("--model", required=True)
    r.add_argument("--rounds", type=int, default=int(os.environ.get("GAP_ROUNDS", "3")))
    r.add_argument("--budget", type=float, default=float(os.environ.get("GAP_BUDGET", "470")))
    r.add_argument("--variants", default=os.environ.get("GAP_VARIANTS", DEFAULT_VARIANTS))
    r.add_argument("--probe", default=os.environ.get("GAP_PROBE", ""), choices=["", "load", "smp"])
    r.add_argument("--gpus", default=os.environ.get("GAP_GPUS", "0,1"))
    r.add_argument("--slot", type=float, default=55.0, help="seconds a pair takes (first estimate)")
    r.add_argument("--cold", action="store_true", help="run the cold round even if warm")
    r.add_argument("--dry", action="store_true", help="write the commands only")
    s = sub.add_parser("summary")
    s.add_argument("res")
    args = ap.parse_args()
    if args.cmd == "summary":
        return summary(Path(args.res))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
