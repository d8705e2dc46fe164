"""Side by side on one GPU: the same prompts through raw vLLM (defaults, and tuned with
OMP_NUM_THREADS=8), `vllm run-batch` and mmrun's streamed batch, each a fresh process.
Two tasks: qwen2_5_vl (4 images per prompt, the default) and whisper (one clip per prompt;
no `vllm run-batch` there).

For each run: seconds from spawn to the engine ready (vLLM's "init engine ... took" line) and
to the last result, prompts/s from engine ready to the last result, the GPU's busy share over
that window (nvidia-smi's utilization, sampled every 200 ms), the cores its processes kept
busy over it (the spawned process alone, and with its children: /proc, every second), and
whether every greedy text is identical to the first run's. A prompt count of 1 gives the
start-up figures.

usage: throughput.py --bench ROOT --model DIR --prompts N
                     --variants mmrun,tuned,runbatch,raw[,tuned-spawn,mmrun-base,VARIANT+KEY=JSON]
                     --res DIR [--task qwen2_5_vl|whisper] [--max-tokens T] [--engine-args JSON]
                     [--rounds R] [--budget S] [--warm VARIANT:N,...] [--settle] [--probe]
                     [--dry]
  ROOT: media.py's folder (mN.jsonl, bN.jsonl; wN.jsonl for whisper). --max-tokens: each
  prompt's output tokens (default 64, with ignore_eos). --engine-args: engine arguments given
  to every variant alike, none by default (what vLLM's CPU build needs for a smoke run, e.g.).
  mmrun-base: the mmrun package found at MMRUN_BASE_PATH (another version, to compare two).
  VARIANT+KEY=JSON, VARIANT+env.NAME=VALUE (any number of "+" parts): the variant with one
  more engine argument, or environment variable, each, e.g. mmrun+max_num_seqs=512,
  mmrun+env.VLLM_USE_V2_MODEL_RUNNER=0: a setting tried beside the defaults in the same call.
  mmrun-stacks: mmrun, its threads' stacks and CPU time sampled (stacks.py, RUN/stacks.ndjson).
  tuned-spawn: tuned, with VLLM_WORKER_MULTIPROC_METHOD=spawn (the tuned Whisper script hangs
  at its engine's start when vLLM forks the engine core).
  Rounds alternate the order. --warm: first run these variants at once, on N prompts each with a small share of the GPU, so that each configuration's compile cache is
  filled before anything is timed (an mmrun warm-up on the full manifest, for the same
  engine arguments, is stopped at its first result). --settle: then each timed variant once,
  untimed, alone on the GPU with its own memory share and stopped at its engine ready line:
  a warm-up's small share has vLLM skip its memory profile, and the first full-size run
  after it paid 8-18 s that later runs did not (mmrun in the profile, the tuned script in
  its kernel warm-up). --budget: skip what would not end in
  time. --probe: run each timed process through start_probe.py, whose marks (imports, plugins,
  LLM(...), mmrun's planning, the first request) startup.py reads beside vLLM's log lines into
  a start-up timeline. --dry: print the commands only.
Writes RES/<variant>-<N>[-<round>]/ (log.txt, texts) and RES/summary.json (with a digest of
each run's texts, to compare runs of separate calls), RES/summary.md. Without nvidia-smi (a
CPU machine) the GPU's busy share is left out.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
READY = re.compile(r"init engine \(profile, create kv cache, warmup model\) took|RAW_READY")
# Expected prompts/s from engine ready to the last result (bench/gpu/results, 2026-12-02:
# the raw script's includes loading its images; Whisper's from its own runs), and seconds from
# spawn to engine ready with warm compile caches (the slowest seen, mmrun's with the V1
# runner), only to skip what would not fit the budget. END_S: a process's end, the GPU's
# memory given back.
RATE = {
    "qwen2_5_vl": {"raw": 14, "tuned": 18, "runbatch": 11, "mmrun": 28, "mmrun-eagerenc": 28,
                   "mmrun-base": 28, "mmrun-stacks": 28},
    "whisper": {"raw": 60, "tuned": 80, "tuned-spawn": 80, "mmrun": 110, "mmrun-base": 110},
}  # fmt: skip
START_S = {"raw": 48, "tuned": 47, "tuned-spawn": 63, "runbatch": 52}
START_S_MMRUN = 58
END_S = 4
# The variants that run the raw script (RAW_SCRIPT): vLLM's defaults, and tuned two ways.
SCRIPT_VARIANTS = ("raw", "tuned", "tuned-spawn")
WARM_MEMORY = {"gpu_memory_utilization": 0.2, "kv_cache_memory_bytes": 6_000_000_000}
# media.py's files: mmrun's manifest of N prompts per task, and run-batch's tokens
MANIFEST = {"qwen2_5_vl": "m{n}.jsonl", "whisper": "w{n}.jsonl"}
RUN_BATCH_MAX_TOKENS = 64
# What each task's runs share: the raw script, mmrun's command and its flags beyond the
# manifest and the output tokens (Whisper's max_model_len, 448, is its row's own).
RAW_SCRIPT = {"qwen2_5_vl": "raw_vllm.py", "whisper": "raw_whisper.py"}
MMRUN_MODEL = {"qwen2_5_vl": ["image", "-m", "qwen2_5_vl"], "whisper": ["audio", "-m", "whisper"]}
MMRUN_FLAGS = {
    "qwen2_5_vl": ["--engine-arg", "load_format=dummy", "--engine-arg", "max_model_len=8192"],
    "whisper": ["--engine-arg", "load_format=dummy"],
}


def command(variant: str, n: int, bench: Path, model: str, run: Path, extra: dict,
            task: str = "qwen2_5_vl", max_tokens: int = 64) -> tuple:  # fmt: skip
    """(argv, environment changes, result file or None) of one run. A variant may end in
    "+KEY=VALUE" parts: one more engine argument each (VALUE read as JSON, else a string), or,
    as "+env.NAME=VALUE", one more environment variable."""
    base, *pairs = variant.split("+")
    try:
        more_args, more_env = plus_parts(pairs)
    except ValueError as exc:
        raise SystemExit(f"{variant!r}: {exc}") from None
    extra = {**extra, **more_args}
    argv, env, result = _command(base, n, bench, model, run, extra, task, max_tokens)
    return argv, {**env, **more_env}, result


def plus_parts(parts: list[str]) -> tuple[dict, dict[str, str]]:
    """A variant's "+" parts: (engine arguments, environment variables). "KEY=VALUE" is an
    engine argument (VALUE read as JSON, else a string), "env.NAME=VALUE" a variable.
    ValueError for a part that is neither."""
    args: dict = {}
    env: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError("each part after '+' is KEY=VALUE or env.NAME=VALUE")
        if key.startswith("env."):
            env[key.removeprefix("env.")] = value
            continue
        try:
            args[key] = json.loads(value)
        except json.JSONDecodeError:
            args[key] = value
    return args, env


def _command(variant: str, n: int, bench: Path, model: str, run: Path, extra: dict,
             task: str, max_tokens: int) -> tuple:  # fmt: skip
    py = sys.executable
    env: dict[str, str | None] = {"OMP_NUM_THREADS": None}
    manifest = str(bench / MANIFEST[task].format(n=n))
    if variant in SCRIPT_VARIANTS:
        if variant != "raw":
            env["OMP_NUM_THREADS"] = "8"
        if variant == "tuned-spawn":  # the engine core a new interpreter, not a fork
            env["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        argv = [py, str(HERE / RAW_SCRIPT[task]), "--model", model, "--manifest", manifest]
        argv += ["--out", str(run / "texts.json"), "--max-tokens", str(max_tokens)]
        if extra:
            argv += ["--args", json.dumps(extra)]
        return argv, env, None
    if variant == "runbatch":
        if task != "qwen2_5_vl":
            raise SystemExit(f"runbatch runs the qwen2_5_vl task only, not {task}")
        if max_tokens != RUN_BATCH_MAX_TOKENS:
            raise SystemExit(f"runbatch's input asks for {RUN_BATCH_MAX_TOKENS} tokens (media.py)")
        argv = [py, "-m", "vllm.entrypoints.openai.run_batch", "-i", str(bench / f"b{n}.jsonl")]
        argv += ["-o", str(run / "out.jsonl"), "--model", model, "--load-format", "dummy"]
        argv += ["--dtype", "bfloat16", "--max-model-len", "8192", "--seed", "0"]
        argv += ["--limit-mm-per-prompt", '{"image": 4, "video": 0}']
        argv += ["--allowed-local-media-path", str(bench)]
        for key, value in extra.items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        if os.environ.get("RUNBATCH_SITE"):  # its server's dependencies, after vLLM's
            env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "") + ":" + os.environ["RUNBATCH_SITE"]
        return argv, env, run / "out.jsonl"
    if variant.startswith("mmrun"):
        # mmrun-stacks: mmrun with stacks.py sampling its threads (what it does when the GPU waits)
        probe = (
            [str(HERE / "stacks.py"), str(run / "stacks.ndjson")]
            if variant == "mmrun-stacks"
            else []
        )
        argv = [
            py,
            *probe,
            "-m",
            "mmrun",
            *MMRUN_MODEL[task],
            "--model",
            model,
            "--input",
            manifest,
        ]
        argv += ["-o", str(run / "out.jsonl"), "-v", "--max-tokens", str(max_tokens)]
        argv += ["--temperature", "0", "--sampling-arg", "ignore_eos=true", *MMRUN_FLAGS[task]]
        if variant == "mmrun-eagerenc":
            argv += ["--engine-arg", 'compilation_config={"compile_mm_encoder": false}']
        if variant == "mmrun-base":  # another mmrun (prep.sh BASE_SRC), to compare two versions
            base = os.environ.get("MMRUN_BASE_PATH")
            if not base:
                raise SystemExit("mmrun-base needs MMRUN_BASE_PATH (prep.sh BASE_SRC=...)")
            env["PYTHONPATH"] = base + ":" + os.environ.get("PYTHONPATH", "")
        for key, value in extra.items():
            argv += ["--engine-arg", f"{key}={json.dumps(value)}"]
        return argv, env, run / "out.jsonl"
    raise SystemExit(f"unknown variant {variant!r}")


class GpuBusy:
    """nvidia-smi's GPU utilization every 200 ms, with the wall-clock time of each sample."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                 "-lms", "200"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.samples.append((time.time(), float(line.split(",")[0])))

    def busy(self, start: float, end: float) -> float | None:
        window = [u for t, u in self.samples if start <= t <= end]
        return round(sum(window) / len(window), 1) if window else None

    def by_second(self, start: float, end: float) -> list[int]:
        """The mean utilization of each whole second from start to end (where idle is)."""
        bins: dict[int, list[float]] = {}
        for t, u in self.samples:
            if start <= t <= end:
                bins.setdefault(int(t - start), []).append(u)
        return [round(sum(b) / len(b)) if b else -1 for b in
                (bins.get(i, []) for i in range(int(end - start) + 1))]  # fmt: skip

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()


class CpuTime:
    """The CPU seconds (user + system), every second, of the processes whose Linux session id
    is the spawned process's (run_one starts it with start_new_session): how many cores the
    spawned process itself (the frontend: the raw script, or mmrun with vLLM's input
    processing) and all of its processes (the engine core too) kept busy."""

    TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def __init__(self, session: int) -> None:
        self.session = session
        self.samples: list[tuple[float, float, float]] = []  # (time, main's s, all's s)
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.time(), *self._now()))
            self.done.wait(1.0)

    def _now(self) -> tuple[float, float]:
        main = total = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[3]) != self.session:  # fields[3]: the session id
                continue
            seconds = (int(fields[11]) + int(fields[12])) / self.TICK  # utime, stime
            total += seconds
            if int(stat.parent.name) == self.session:
                main = seconds
        return main, total

    def cores(self, start: float, end: float) -> tuple[float, float] | None:
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        (t0, m0, a0), (t1, m1, a1) = inside[0], inside[-1]
        return round((m1 - m0) / (t1 - t0), 2), round((a1 - a0) / (t1 - t0), 2)

    def by_second(self, start: float, end: float) -> list[list[float]]:
        """[main, all] cores of each second (each sample's interval) from a second before start
        to end; none after end, where the processes being killed would count negative."""
        inside = [s for s in self.samples if start - 1 <= s[0] <= end]
        return [[round((m1 - m0) / (t1 - t0), 1), round((a1 - a0) / (t1 - t0), 1)]
                for (t0, m0, a0), (t1, m1, a1) in itertools.pairwise(inside) if t1 > t0]  # fmt: skip

    def stop(self) -> None:
        self.done.set()


def gpu_free(limit: float = 60) -> None:
    """Wait until the GPU's memory is given back (a killed engine's processes take seconds)."""
    end = time.time() + limit
    while time.time() < end:
        try:
            used = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10,
            ).stdout.split()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return
        if not used or max(float(u) for u in used) < 2000:
            return
        time.sleep(0.5)


def expected_s(variant: str, n: int, task: str) -> float:
    """About how long a run of ``n`` prompts takes from spawn to its end (RATE, START_S)."""
    base = variant.split("+")[0]
    start = START_S.get(base, START_S_MMRUN)
    return start + n / RATE[task].get(base, 15) + END_S


def probed(argv: list[str]) -> list[str]:
    """The same command run through start_probe.py (its marks of each step of the start)."""
    return [argv[0], str(HERE / "start_probe.py"), *argv[1:]]


def lines_in(path: Path | None) -> int:
    try:
        with open(path, "rb") as f:  # type: ignore[arg-type]
            return f.read().count(b"\n")
    except (OSError, TypeError):
        return 0


def run_one(argv, env_changes, result: Path | None, n: int, run: Path, timeout: float,
            stop_at_first: bool = False, stop_at_ready: bool = False) -> dict:  # fmt: skip
    """Run a command; the wall-clock times of its spawn, ready, first and last result, exit.
    stop_at_first, stop_at_ready: stopped (killed) at its first result, at its engine ready."""
    # A fresh folder: mmrun would resume the output of an earlier run of the same name.
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    (run / "cmd.txt").write_text(shlex.join(argv) + "\n" + json.dumps(env_changes) + "\n")
    rec: dict = {"spawn": time.time()}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    log = open(run / "log.txt", "w", encoding="utf-8", errors="replace")  # noqa: SIM115

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            t = time.time()
            text = raw.decode(errors="replace").rstrip("\n")
            log.write(f"{t - rec['spawn']:8.2f} {text}\n")
            if "ready" not in rec and READY.search(text):
                rec["ready"] = t
            if text.startswith("RAW_DONE"):
                rec["last"] = t

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    cpu = CpuTime(proc.pid)
    while proc.poll() is None:
        time.sleep(0.1)
        done = lines_in(result) if result is not None else 0
        if stop_at_ready and "ready" in rec:
            break
        if done and "first" not in rec:
            rec["first"] = time.time()
            if stop_at_first:
                break
        if result is not None and done >= n and "last" not in rec:
            rec["last"] = time.time()
        if time.time() - rec["spawn"] > timeout:
            rec["timed_out"] = True
            break
    with contextlib.suppress(ProcessLookupError):  # the engine core too, which may outlive it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    reader.join(5)
    log.close()
    rec["exit"] = time.time()
    rec["rc"] = proc.returncode
    cpu.stop()
    if "ready" in rec and "last" in rec:
        rec["cpu_cores"] = cpu.cores(rec["ready"], rec["last"])
        rec["cpu_by_s"] = cpu.by_second(rec["ready"], rec["last"])
        rec["finished"] = finished_times(result)
    return rec


def finished_times(result: Path | None) -> list[float]:
    """The wall-clock time of each result line that says when it finished (mmrun's
    "finished_at", UTC with milliseconds)."""
    times = []
    for line in result.read_text().splitlines() if result and result.exists() else ():
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            stamp = json.loads(line)["finished_at"]
            when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            times.append(when.timestamp())
    return times


def texts_of(variant: str, run: Path) -> dict[str, str]:
    if variant in SCRIPT_VARIANTS:
        path = run / "texts.json"
        return json.loads(path.read_text()) if path.exists() else {}
    texts = {}
    path = run / "out.jsonl"
    for line in path.read_text().splitlines() if path.exists() else ():
        row = json.loads(line)
        if variant == "runbatch":
            body = (row.get("response") or {}).get("body") or {}
            choices = body.get("choices") or [{}]
            texts[row["custom_id"]] = (choices[0].get("message") or {}).get("content")
        else:
            texts[row["id"]] = row.get("text")
    return texts


def compare_texts(texts: dict[str, str], n: int, reference: dict[str, str] | None,
                  may_be_reference: bool = True) -> tuple[dict, dict[str, str] | None]:  # fmt: skip
    """A run's texts as its summary row gives them: how many, a digest (which compares runs of
    separate calls too: the texts themselves stay on the machine) and whether each is identical
    to the reference run's; and the reference, which the first complete run that may be one
    becomes."""
    digest = hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()
    fields: dict = {"texts": len(texts), "texts_sha256": digest[:16]}
    if may_be_reference and len(texts) == n and reference is None:
        return {**fields, "texts_identical": "reference"}, texts
    if reference is not None and texts:
        same = sum(texts.get(k) == t for k, t in reference.items())
        fields["texts_identical"] = "yes" if same == n else f"{same}/{n}"
    return fields, reference


def summarise(variant: str, n: int, rec: dict, gpu: GpuBusy) -> dict:
    spawn, ready, last = rec["spawn"], rec.get("ready"), rec.get("last")
    out = {"variant": variant, "prompts": n, "rc": rec["rc"]}
    if rec.get("first") is not None:
        out["spawn_to_first_s"] = round(rec["first"] - spawn, 1)
    if ready is not None:
        out["spawn_to_ready_s"] = round(ready - spawn, 1)
    if last is not None:
        out["spawn_to_last_s"] = round(last - spawn, 1)
    if rec.get("cpu_cores"):  # cores busy over that window: the spawned process, all of them
        out["cpu_cores_main"], out["cpu_cores_all"] = rec["cpu_cores"]
    if ready is not None and last is not None and last > ready:
        out["ready_to_last_s"] = round(last - ready, 1)
        out["prompts_per_s"] = round(n / (last - ready), 2)
        out["gpu_busy_pct"] = gpu.busy(ready, last)
        # where in that window the time went
        out["gpu_busy_by_s"] = gpu.by_second(ready, last)
        out["cpu_cores_by_s"] = rec.get("cpu_by_s", [])
        if rec.get("finished"):
            counts = [0] * (int(last - ready) + 1)
            for t in rec["finished"]:
                counts[min(max(int(t - ready), 0), len(counts) - 1)] += 1
            out["results_by_s"] = counts
    if ready is not None and rec.get("first") is not None:
        out["first_result_after_ready_s"] = round(rec["first"] - ready, 1)
    if rec.get("timed_out"):
        out["timed_out"] = True
    return out


def _or_dash(value: object) -> object:
    return "-" if value is None else value


def error_lines(path: Path) -> int:
    """The result lines that carry an error (mmrun's and run-batch's lines both have an
    "error" field, null when the prompt was answered): a rate over them is no rate."""
    count = 0
    for line in path.read_text().splitlines() if path.exists() else ():
        with contextlib.suppress(ValueError, AttributeError):
            count += json.loads(line).get("error") is not None
    return count


def table(rows: list[dict]) -> str:
    head = ("| variant | prompts | prompts/s from engine ready | spawn to ready (s) | spawn to "
            "all results (s) | GPU busy % | CPU cores: main / all | texts identical |\n"
            "|---|---|---|---|---|---|---|---|\n")  # fmt: skip
    body = "".join(
        f"| {r['variant']} | {r['prompts']} | {r.get('prompts_per_s', '-')} | "
        f"{r.get('spawn_to_ready_s', '-')} | {r.get('spawn_to_last_s', '-')} | "
        f"{_or_dash(r.get('gpu_busy_pct'))} | {r.get('cpu_cores_main', '-')} / "
        f"{r.get('cpu_cores_all', '-')} | {r.get('texts_identical', '-')} |\n"
        for r in rows
    )
    return head + body


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, type=Path)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True, type=int)
    ap.add_argument("--variants", required=True)
    ap.add_argument("--res", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--budget", type=float, default=3600)
    ap.add_argument("--warm", default="")
    ap.add_argument("--settle", action="store_true", help="each variant to its ready line first")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--probe", action="store_true", help="marks of each step of the start")
    ap.add_argument("--task", choices=sorted(MANIFEST), default="qwen2_5_vl")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--engine-args", type=json.loads, default={}, help="JSON, for every variant")
    args = ap.parse_args()
    t0 = time.time()
    n, variants = args.prompts, args.variants.split(",")
    task = {"task": args.task, "max_tokens": args.max_tokens}
    for v in variants:  # unknown names fail here, not after the warm-ups
        command(v, n, args.bench, args.model, args.res, {}, **task)
    args.res.mkdir(parents=True, exist_ok=True)
    warm = [(v, int(k)) for v, _, k in (s.rpartition(":") for s in args.warm.split(",") if s)]
    # A warm-up without its manifest exits at once, and the run it was for compiles cold.
    missing = sorted({k for _, k in [*warm, ("", n)]
                      if not (args.bench / MANIFEST[args.task].format(n=k)).exists()})  # fmt: skip
    if missing and not args.dry:
        sizes = " ".join(map(str, missing))
        raise SystemExit(f"no manifest for {sizes} prompts in {args.bench}: "
                         f"write it first (media.py {args.bench} {sizes}; device.sh: SIZES)")  # fmt: skip
    if warm:
        procs = []
        for v, k in warm:
            run = args.res / f"warm-{v}-{k}"
            warm_args = {**args.engine_args, **WARM_MEMORY}
            argv, env, result = command(v, k, args.bench, args.model, run, warm_args, **task)
            if args.dry:
                print("WARM", shlex.join(argv))
                continue
            procs.append((v, k, threading.Thread(
                target=lambda *a: print(f"warm {a[0]}:{a[1]}", json.dumps(run_one(*a[2:], stop_at_first=True))),
                args=(v, k, argv, env, result, k, run, args.budget / 2),
            )))  # fmt: skip
        for *_, thread in procs:
            thread.start()
            time.sleep(2)
        for *_, thread in procs:
            thread.join()
        print(f"warm-ups done after {time.time() - t0:.0f}s", flush=True)
    for v in dict.fromkeys(variants) if args.settle else ():
        run = args.res / f"settle-{v}-{n}"
        argv, env, result = command(v, n, args.bench, args.model, run, args.engine_args, **task)
        if args.dry:
            print("SETTLE", shlex.join(argv))
            continue
        left = args.budget - (time.time() - t0)
        if left < expected_s(v, 1, args.task):
            print(f"settle {v}: skipped ({left:.0f}s of the budget left)", flush=True)
            continue
        gpu_free()
        rec = run_one(argv, env, result, n, run, left - 5, stop_at_ready=True)
        print(f"settle {v}", json.dumps({k: rec[k] for k in ("spawn", "ready", "rc") if k in rec}),
              flush=True)  # fmt: skip
    gpu = GpuBusy()
    rows: list[dict] = []
    reference: dict[str, str] | None = None
    for r in range(args.rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:  # rounds in alternating order
            name = f"{v}-{n}" + (f"-{r + 1}" if args.rounds > 1 else "")
            run = args.res / name
            argv, env, result = command(v, n, args.bench, args.model, run, args.engine_args, **task)
            if args.probe:
                argv, env = probed(argv), {"PYTHONUNBUFFERED": "1", **env}
            if args.dry:
                print("RUN", json.dumps({k: x for k, x in env.items() if x}), shlex.join(argv))
                continue
            left = args.budget - (time.time() - t0)
            if left < expected_s(v, n, args.task):
                print(f"{name}: skipped ({left:.0f}s of the budget left)", flush=True)
                continue
            gpu_free()
            rec = run_one(argv, env, result, n, run, left - 5)
            row = {"task": args.task, "run": name, **summarise(v, n, rec, gpu)}
            if result is not None and (errors := error_lines(result)):
                row["error_lines"] = errors
            fields, reference = compare_texts(texts_of(v.split("+")[0], run), n, reference)
            row.update(fields)
            rows.append(row)
            print(json.dumps(row), flush=True)
            (args.res / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
            (args.res / "summary.md").write_text(table(rows))
    gpu.stop()
    if rows:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
