"""Check the GPU drivers on the CPU machine (no device time): ttr.py on a fake command, the
summaries of gap.py, tput.py and proofs.py on fake runs, and the drivers' commands written by
their --dry modes, whose mmrun commands are then run with mmrun's own --dry-run.

usage (from the repository root): .venv/bin/python bench/gpu/selfcheck.py [--mmrun-dry]
  SELFCHECK_REPO=/work/main: run the mmrun commands with that checkout's mmrun (the one the
  device gets), not this one's.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

PY = sys.executable
failures: list[str] = []


def ok(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


FAKE = r"""
import json, sys, time, os
watch = sys.argv[1] if len(sys.argv) > 1 else None
print("INFO 11-30 12:00:00 [utils.py:1] non-default args: {'model': 'x', 'seed': 0}", file=sys.stderr, flush=True)
time.sleep(0.2)
print("INFO 11-30 12:00:01 [core.py:1] init engine (profile, create kv cache, warmup model) took 1.00 s", file=sys.stderr, flush=True)
if watch:
    with open(watch, "a") as f:
        for i in range(3):
            f.write(json.dumps({"id": f"p{i}", "index": i, "text": "t", "completion_tokens": 64, "prompt_tokens": 10, "error": None}) + "\n"); f.flush(); time.sleep(0.1)
print("RESULT_BATCH " + json.dumps({"set": "s64", "n_prompts": 64, "images": 256, "prompt_tokens": 1, "output_tokens": 4096, "batch_wall_s": 3.2, "prompts_per_s": 20.0, "start_wall": time.time() - 3.2, "end_wall": time.time()}), flush=True)
"""


def check_ttr(tmp: Path) -> None:
    script = tmp / "fake.py"
    script.write_text(FAKE)
    run = tmp / "ttr"
    watch = tmp / "out.jsonl"
    rc = subprocess.run(
        [
            PY,
            str(HERE / "ttr.py"),
            "--dir",
            str(run),
            "--watch",
            str(watch),
            "--result",
            "^RESULT_BATCH",
            "--env",
            "FOO=1",
            "--",
            PY,
            str(script),
            str(watch),
        ],
        timeout=60,
    ).returncode
    rec = common.read_run(run)
    ok(rc == 0 and rec.get("rc") == 0, "ttr.py: the command ran, rc 0")
    ok(
        rec.get("lines") == 3 and rec["first_line_s"] <= rec["last_line_s"],
        f"ttr.py: 3 watched lines timed ({rec.get('lines')})",
    )
    ok(
        "args" in rec["marks"] and "init_engine" in rec["marks"],
        f"ttr.py: vLLM marks found {rec['marks']}",
    )
    ok(
        rec.get("result_s") is not None and rec["result_s"] >= rec["marks"]["init_engine"],
        "ttr.py: result after the engine was ready",
    )
    ok(len(rec.get("raw", [])) == 1, "read_run: RESULT_BATCH parsed")
    t0 = time.time()
    rc = subprocess.run(
        [
            PY,
            str(HERE / "ttr.py"),
            "--dir",
            str(tmp / "slow"),
            "--timeout",
            "1",
            "--",
            PY,
            "-c",
            "import time; time.sleep(30)",
        ],
        timeout=30,
    ).returncode
    rec = common.read_run(tmp / "slow")
    ok(
        rc == 1 and rec.get("timed_out") and time.time() - t0 < 10,
        "ttr.py: a command over its timeout is killed",
    )


def fake_run(
    path: Path,
    *,
    result_s: float,
    marks: dict[str, float],
    stdout: str = "",
    extra_log: list[str] = (),
    rc: int = 0,
    spawn: float | None = None,
    lines: list[float] | None = None,
) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cmd.txt").write_text("fake\n")
    rec = {
        "cmd": ["fake"],
        "spawn_wall": spawn or time.time(),
        "rc": rc,
        "timed_out": False,
        "exit_s": result_s + 1,
        "result_s": result_s,
    }
    if lines is not None:
        rec.update(lines=len(lines), first_line_s=lines[0], last_line_s=lines[-1])
        (path / "lines.txt").write_text("".join(f"{t}\n" for t in lines))
    (path / "ttr.json").write_text(json.dumps(rec))
    texts = {
        "args": "non-default args: {'model': 'm'}",
        "engine_init": "Initializing a V1 LLM engine (v0.26.0)",
        "model_loaded": "Model loading took 7.2 GiB and 2.1 seconds",
        "compiled": "torch.compile takes 10.1 s in total",
        "kv_cache": "Available KV cache memory: 100 GiB",
        "graphs": "Graph capturing finished in 5 secs",
        "init_engine": "init engine (profile, create kv cache, warmup model) took 30.00 s",
    }
    log = [f"{t:9.3f} E INFO 11-30 12:00:00 [x.py:1] {texts[k]}" for k, t in marks.items()]
    log += [f"{result_s + 0.5:9.3f} O {x}" for x in extra_log]
    (path / "log.txt").write_text("\n".join(log) + "\n")
    (path / "stdout").write_text(stdout)


def doc(n: int, gen: float, text: str = " <1> <2>") -> str:
    return json.dumps(
        {
            "outputs": [
                {
                    "index": i,
                    "text": text,
                    "prompt_tokens": 1077,
                    "completion_tokens": 64,
                    "finish_reason": "length",
                }
                for i in range(n)
            ],
            "timings": {
                "engine_start_s": 35.0,
                "render_s": 0.3,
                "warmup_s": 0.9,
                "generate_s": gen,
            },
        }
    )


def check_gap(tmp: Path) -> None:
    res = tmp / "gap"
    marks = {
        "args": 20.0,
        "engine_init": 21.0,
        "model_loaded": 25.0,
        "compiled": 30.0,
        "kv_cache": 32.0,
        "graphs": 36.0,
        "init_engine": 37.0,
    }
    for rnd, shift in (("r1", 0.0), ("r2", 0.4)):
        fake_run(
            res / rnd / "R",
            result_s=40.6 + shift,
            marks=marks,
            extra_log=[
                'RESULT_BATCH {"set": "b64", "n_prompts": 64, "batch_wall_s": 3.5, "prompts_per_s": 18.3, "start_wall": 1, "end_wall": 2}'
            ],
        )
        fake_run(
            res / rnd / "M",
            result_s=44.1 + shift,
            marks={k: v + 2 for k, v in marks.items()},
            stdout=doc(64, 3.4),
        )
        fake_run(res / rnd / "MR", result_s=43.0 + shift, marks=marks, stdout=doc(64, 3.4))
    fake_run(
        res / "r2" / "Msw",
        result_s=0,
        marks={},
        rc=1,
        extra_log=["mmrun: error: vLLM failed: boom"],
    )
    out = subprocess.run(
        [PY, str(HERE / "gap.py"), "summary", str(res)], capture_output=True, text=True, timeout=60
    )
    ok(
        out.returncode == 0 and "| M | 2/2 | 44.30 | 1.086" in out.stdout,
        "gap.py summary: medians and ratio to R",
    )
    ok(
        "FAILED Msw" in out.stdout and "non-default args" in out.stdout,
        "gap.py summary: failures and vLLM's args lines listed",
    )
    dry = tmp / "gapdry"
    images = tmp / "img"
    images.mkdir(exist_ok=True)
    for i in range(8):
        (images / f"b{i:05d}.png").write_bytes(b"")
    out = subprocess.run(
        [
            PY,
            str(HERE / "gap.py"),
            "run",
            "--res",
            str(dry),
            "--images",
            str(images),
            "--model",
            "M",
            "--rounds",
            "2",
            "--dry",
            "--cold",
            "--variants",
            "R M MR Mq Menv Msw Mrt Mgen M64",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    cmds = sorted(dry.glob("r*/*/cmd.txt"))
    ok(
        out.returncode == 0 and len(cmds) == 27,
        f"gap.py --dry: 9 variants x 3 rounds written ({len(cmds)})",
    )
    text = (dry / "r1" / "MR" / "cmd.txt").read_text()
    ok(
        "max_num_seqs=1024" in text and "--seed 0" in text and "CUDA_VISIBLE_DEVICES=" in text,
        "gap.py: MR has the raw script's arguments and a GPU",
    )
    gpus = {
        (p.parent.name, shlex.split(p.read_text())[shlex.split(p.read_text()).index("--env") + 1])
        for p in (dry / "r1").glob("*/cmd.txt")
    }
    ok(
        ("R", "CUDA_VISIBLE_DEVICES=1") in gpus and ("M", "CUDA_VISIBLE_DEVICES=0") in gpus,
        f"gap.py: a pair on both GPUs, swapped in round 1 {sorted(gpus)[:2]}",
    )


def check_tput(tmp: Path) -> None:
    res = tmp / "tput"
    now = time.time()
    marks = {"init_engine": 37.0}
    raw_lines = [
        "RESULT_BATCH "
        + json.dumps(
            {
                "set": "s64",
                "n_prompts": 64,
                "output_tokens": 4096,
                "batch_wall_s": 3.5,
                "prompts_per_s": 18.29,
                "start_wall": now + 40,
                "end_wall": now + 43.5,
                "torch_threads": 1,
            }
        ),
        "RESULT_BATCH "
        + json.dumps(
            {
                "set": "s256",
                "n_prompts": 256,
                "output_tokens": 16384,
                "batch_wall_s": 12.8,
                "prompts_per_s": 20.0,
                "start_wall": now + 45,
                "end_wall": now + 57.8,
                "torch_threads": 1,
            }
        ),
    ]
    fake_run(res / "raw", result_s=60, marks=marks, extra_log=raw_lines, spawn=now)
    (res / "raw" / "texts.json").write_text(
        json.dumps({"s64": [" <1> <2>"] * 64, "s256": [" <1> <2>"] * 256})
    )
    fake_run(res / "mm256", result_s=55, marks=marks, stdout=doc(256, 9.6), spawn=now)
    fake_run(res / "mm64", result_s=45, marks=marks, stdout=doc(64, 2.6, " <9>"), spawn=now)
    st = res / "st256"
    lines = [38.5 + i * 0.04 for i in range(256)]
    fake_run(st, result_s=0, marks=marks, spawn=now, lines=lines)
    (st / "out.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "id": f"p{i:05d}",
                    "index": i,
                    "text": " <1> <2>",
                    "completion_tokens": 64,
                    "error": None,
                }
            )
            + "\n"
            for i in range(256)
        )
    )
    for name, per in (("dp1", 0.04), ("dp2", 0.021)):
        d = res / name
        fake_run(d, result_s=0, marks=marks, spawn=now, lines=[38.0 + i * per for i in range(512)])
        (d / "out.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "id": f"p{i:05d}",
                        "index": i,
                        "text": "x",
                        "completion_tokens": 64,
                        "error": None,
                        **({"replica": i % 2} if name == "dp2" else {}),
                    }
                )
                + "\n"
                for i in range(512)
            )
        )
    smi = "".join(
        f"{time.strftime('%Y/%m/%d %H:%M:%S', time.localtime(now + t / 5))}.000, 0, {90 if 200 < t < 300 else 10}, 1000\n"
        for t in range(400)
    )
    (res / "smi.csv").write_text(smi)
    out = subprocess.run(
        [PY, str(HERE / "tput.py"), "summary", str(res)], capture_output=True, text=True, timeout=60
    )
    text = out.stdout
    ok(
        out.returncode == 0 and "| mm256 | s256 | 256 | 9.60 | 26.67 | 1.334" in text,
        "tput.py summary: mm256 against raw s256",
    )
    ok(
        "streamed batch mode / one-call batch" in text and "-dp 2 on 2 GPUs / -dp 1" in text,
        "tput.py summary: issue 16.3 and issue 15 ratios",
    )
    ok(
        "| mm64 | s64 | 64 | 2.60 | 24.62 | 1.346 | 4096 | 0/64" in text,
        "tput.py summary: different texts show as 0/64",
    )
    ok(
        "256/256" in text and "per replica {'0': 256, '1': 256}" in text,
        "tput.py summary: texts equal; replicas counted",
    )
    dry = tmp / "tputdry"
    bench = tmp / "bench"
    for s in ("s64", "s256", "s1024"):
        (bench / s).mkdir(parents=True, exist_ok=True)
        (bench / s / "b00000.png").write_bytes(b"")
    out = subprocess.run(
        [
            PY,
            str(HERE / "tput.py"),
            "run",
            "--res",
            str(dry),
            "--bench",
            str(bench),
            "--model",
            "M",
            "--dry",
            "--steps",
            "raw rawomp8 mm256 mm64 mm256omp1 st256 dp1 dp2 dp2 prof rawph mm256ph mm64s64",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    cmds = sorted(p.parent.name for p in dry.glob("*/cmd.txt"))
    ok(
        out.returncode == 0
        and cmds
        == sorted(
            [
                *("raw", "rawomp8", "mm256", "mm64", "mm256omp1", "st256", "dp1", "dp2"),
                *("dp2_2", "prof", "rawph", "mm256ph", "mm64s64"),
            ]
        ),
        f"tput.py --dry: every step written {cmds}",
    )
    dp2 = (dry / "dp2" / "cmd.txt").read_text()
    ok(
        "-dp 2" in dp2 and "CUDA_VISIBLE_DEVICES=0,1" in dp2 and "--watch" in dp2,
        "tput.py: dp2 on both GPUs, its output watched",
    )
    ok(
        "OMP_NUM_THREADS=1" in (dry / "mm256omp1" / "cmd.txt").read_text(),
        "tput.py: mm256omp1 sets OMP_NUM_THREADS=1",
    )
    for name in ("rawph", "mm256ph"):
        cmd = (dry / name / "cmd.txt").read_text()
        ok(
            "MMPHASES_DIR=" in cmd and "/phases" in cmd.split("PYTHONPATH=", 1)[-1].split()[0],
            f"tput.py: {name} puts the phase probe first on PYTHONPATH",
        )
    s64 = (dry / "mm64s64" / "cmd.txt").read_text()
    ok(
        "max_num_seqs=64" in s64 and "max_num_seqs=256" not in s64,
        "tput.py: mm64s64 names max_num_seqs=64 only",
    )


def check_phases(tmp: Path) -> None:
    """phases.py on a fake mmrun run: a warm-up step outside the batch's window, then two
    prefill steps (one with the encoder) and two decode steps inside it; the expected seconds
    below are worked out by hand from the event times written here."""
    import phases

    run = tmp / "phases_run"
    spawn = 1000.0
    # the result line at 60 s after spawn, generate_s 2.0: the window is [1058, 1060]
    fake_run(run, result_s=60.0, marks={}, stdout=doc(4, 2.0), spawn=spawn)
    steps = [
        {
            "t": 1050.0,
            "reqs": 2,
            "toks": 2000,
            "enc_items": 8,
            "a": 0,
            "e0": 1,
            "e1": 900,
            "b": 1000,
            "c": 1001,
            "d": 1010,
        },  # warm-up: before the window, left out
        {
            "t": 1058.1,
            "reqs": 4,
            "toks": 4000,
            "enc_items": 16,
            "a": 8100,
            "e0": 8100,
            "e1": 8600,
            "b": 8900,
            "c": 8900,
            "d": 8910,
        },
        {
            "t": 1058.9,
            "reqs": 4,
            "toks": 1000,
            "enc_items": 0,
            "a": 8950,
            "b": 9150,
            "c": 9150,
            "d": 9160,
        },
        {
            "t": 1059.2,
            "reqs": 4,
            "toks": 4,
            "enc_items": 0,
            "a": 9200,
            "b": 9220,
            "c": 9220,
            "d": 9230,
        },
        {
            "t": 1059.3,
            "reqs": 4,
            "toks": 4,
            "enc_items": 0,
            "a": 9330,
            "b": 9350,
            "c": 9350,
            "d": 9360,
        },
    ]
    (run / "phases").mkdir()
    (run / "phases" / "123.jsonl").write_text("".join(json.dumps(x) + "\n" for x in steps))
    text = phases.summary([run])
    row = [c.strip() for c in text.splitlines()[-1].strip("|").split("|")]
    # span 9360 - 8100 = 1260 ms; encoder 500; prefill fwd (8900-8100-500) + 200 = 500;
    # decode 20 + 20 = 40; sampling 10 * 4 = 40; between 1260 - 1080 = 180
    ok(
        row[2] == "2 / 2"
        and row[4] == "1.26"
        and row[5].startswith("0.50 (40%)")
        and row[6].startswith("0.50 (40%)")
        and row[7].startswith("0.04 (3%)")
        and row[8].startswith("0.04 (3%)")
        and row[9].startswith("0.18 (14%)")
        and row[10] == "16",
        f"phases.py: the batch's steps split by hand's numbers {row}",
    )


PROBE_DRIVER = r"""
import os, sys, time, types
import torch

class Ev:  # torch.cuda.Event on a machine without CUDA: host clock
    def __init__(self, enable_timing=False): self.t = None
    def record(self): self.t = time.perf_counter()
    def query(self): return True
    def elapsed_time(self, other): return (other.t - self.t) * 1e3

torch.cuda.Event = Ev
torch.cuda.is_current_stream_capturing = lambda: False

def make():  # vLLM's model runner module, imported (as in vLLM) in the engine core
    mod = types.ModuleType("vllm.v1.worker.gpu.model_runner")
    class GPUModelRunner:
        def execute_model(self, so, dummy_run=False): time.sleep(0.003)
        def sample_tokens(self, g): time.sleep(0.001)
    mod.GPUModelRunner = GPUModelRunner
    sys.modules[mod.__name__] = mod

if sys.argv[1] == "before":
    make()
    time.sleep(0.2)
pid = os.fork()  # vLLM forks its engine core from the frontend
if pid == 0:
    if sys.argv[1] == "after":
        make()
    time.sleep(0.2)
    r = sys.modules["vllm.v1.worker.gpu.model_runner"].GPUModelRunner()
    so = types.SimpleNamespace(
        num_scheduled_tokens={0: 1}, total_num_scheduled_tokens=1, scheduled_encoder_inputs={}
    )
    r.execute_model(so, dummy_run=True)  # left out
    for _ in range(3):
        r.execute_model(so)
        r.sample_tokens(None)
    time.sleep(0.6)  # the flusher writes the last steps
    os._exit(0)
os.waitpid(pid, 0)
print(pid)
"""


def check_probe(tmp: Path) -> None:
    """phases/sitecustomize.py in a forked engine core, the runner imported before and after
    the fork: each child writes its own 3 real steps (the dummy run left out)."""
    (tmp / "probe.py").write_text(PROBE_DRIVER)
    for when in ("before", "after"):
        out = tmp / f"probe_{when}"
        env = {**os.environ, "PYTHONPATH": str(HERE / "phases"), "MMPHASES_DIR": str(out)}
        proc = subprocess.run(
            [PY, str(tmp / "probe.py"), when], env=env, capture_output=True, text=True, timeout=60
        )
        child = proc.stdout.strip()
        path = out / f"{child}.jsonl"
        lines = path.read_text().splitlines() if child and path.exists() else []
        ok(
            proc.returncode == 0 and len(lines) == 3 and all("d" in json.loads(x) for x in lines),
            f"phase probe: a forked engine core (runner imported {when} the fork) writes its"
            f" 3 steps ({len(lines)} lines; {proc.stderr.strip()[-200:]})",
        )


LOAD_DRIVER = r"""
import gc, os, sys, time, types

def make():  # vLLM's decorators and backends modules, and torch.compiler's loader
    torch = types.ModuleType("torch")
    torch.compiler = types.SimpleNamespace(
        load_compiled_function=lambda f: (time.sleep(0.05), [object() for _ in range(5000)])[1]
    )
    sys.modules["torch"] = torch
    backends = types.ModuleType("vllm.compilation.backends")
    class VllmBackend:
        def __call__(self, graph): time.sleep(0.03)
    backends.VllmBackend = VllmBackend
    sys.modules[backends.__name__] = backends
    dec = types.ModuleType("vllm.compilation.decorators")
    exec(DECORATORS, dec.__dict__)  # one module's globals, as in vLLM
    sys.modules[dec.__name__] = dec

DECORATORS = '''
import gc, sys, time
def _verify_source_unchanged(info): time.sleep(0.02)
def _try_load_aot_compiled_fn(model, path):
    import torch
    fn = torch.compiler.load_compiled_function(None)
    _verify_source_unchanged(None)
    sys.modules["vllm.compilation.backends"].VllmBackend()(None)
    gc.collect()
    return fn
'''

if sys.argv[1] == "before":
    make()
    time.sleep(0.2)
pid = os.fork()
if pid == 0:
    if sys.argv[1] == "after":
        make()
    time.sleep(0.2)
    dec = sys.modules["vllm.compilation.decorators"]
    assert len(dec._try_load_aot_compiled_fn(None, "x")) == 5000
    os._exit(0)
os.waitpid(pid, 0)
print(pid)
"""


def check_load_probe(tmp: Path) -> None:
    """loadprobe/sitecustomize.py in a forked engine core, vLLM's modules imported before and
    after the fork: the child's load is timed in parts, and gap.py's table reads it."""
    import gap

    (tmp / "load.py").write_text(LOAD_DRIVER)
    for when in ("before", "after"):
        run = tmp / f"load_{when}" / "r1" / "M64"
        env = {
            **os.environ,
            "PYTHONPATH": str(HERE / "loadprobe"),
            "MMLOAD_DIR": str(run / "loadprobe"),
        }
        proc = subprocess.run(
            [PY, str(tmp / "load.py"), when], env=env, capture_output=True, text=True, timeout=60
        )
        recs = gap.load_records(run)
        r = recs[0] if len(recs) == 1 else {}
        good = (
            proc.returncode == 0
            and r.get("pid") == int(proc.stdout.strip() or 0)
            and r.get("forked") is True
            and r.get("unpickle_s", 0) >= 0.05
            and r.get("verify_s", 0) >= 0.02
            and r.get("unpickle_s", 0) + r.get("verify_s", 0) <= r.get("backend_at_s", 0)
            and r.get("backend_at_s", 1) < r.get("wall_s", 0) - 0.025
            and "2" in r.get("gc", {})
        )
        ok(
            good,
            f"load probe: a forked child's load timed in parts ({when}): {r} {proc.stderr[-200:]}",
        )
        table_lines = gap.load_probe_table(tmp / f"load_{when}", ["M64"])
        ok(
            "\n| M64 | 1 |" in "\n".join(table_lines),
            f"gap.py: the load probe's table has the run ({table_lines})",
        )


MONITOR_DRIVER = r"""
import os, sys, threading, time

def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

def spin_thread():
    burn(0.6)

print("starting", flush=True)
pid = os.fork()
if pid == 0:
    print(f"(EngineCore pid={os.getpid()}) INFO Model loading took 1 GiB", flush=True)
    burn(1.0)  # the engine core's main thread, in the window
    print(f"(EngineCore pid={os.getpid()}) INFO Dynamo bytecode transform time: 1.00 s", flush=True)
    os._exit(0)
t = threading.Thread(target=spin_thread, name="frontspin")
t.start()  # the frontend's thread, busy during the window
t.join()
os.waitpid(pid, 0)
print("{}", flush=True)
"""


def check_monitor(tmp: Path) -> None:
    """ttr.py --monitor reads every thread's CPU from outside, and gap.py's table splits it
    between the engine core's main thread and the frontend during the load's window."""
    import gap

    (tmp / "mon.py").write_text(MONITOR_DRIVER)
    run = tmp / "monitor" / "r1" / "M64"
    proc = subprocess.run(
        [
            PY,
            str(HERE / "ttr.py"),
            "--dir",
            str(run),
            "--monitor",
            "0.05",
            "--",
            PY,
            str(tmp / "mon.py"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    row = gap.monitor_row(run)
    good = (
        proc.returncode == 0
        and row is not None
        and 0.8 <= row[1] <= 1.2  # the core's main thread: its 1.0 s
        and 0.4 <= row[3] <= 0.8  # the frontend: its thread's 0.6 s
        and 0.4 <= float(row[4].split(", ")[0].rsplit(" ", 1)[1]) <= 0.8
    )  # the busiest other thread: the frontend's (Python < 3.14 names OS threads after the process)
    ok(
        good,
        f"ttr.py --monitor: each thread's CPU in the load's window ({row}) {proc.stderr[-300:]}",
    )
    # the host's busy CPUs come from the CPU count the monitor recorded, not the reader's:
    # an archive summarised on another machine (say the 2-core CPU one) reads the same
    monitor = run / "monitor.jsonl"
    recs = [json.loads(line) for line in monitor.read_text().splitlines()]
    here = gap.cpu_in_window(monitor, 0.0, 1e9)["host_busy_cpus"]
    monitor.write_text("".join(json.dumps({**r, "cpus": r["cpus"] * 2}) + "\n" for r in recs))
    there = gap.cpu_in_window(monitor, 0.0, 1e9)["host_busy_cpus"]
    ok(
        bool(here) and abs(there - here * 2) <= 0.02,
        f"ttr.py --monitor: the host's busy CPUs from its recorded CPU count ({here}, {there})",
    )
    lines = gap.monitor_table(tmp / "monitor", ["M64"])
    ok("\n| M64 | r1 |" in "\n".join(lines), f"gap.py: the monitor's table has the run ({lines})")


def check_proofs(tmp: Path) -> None:
    res = tmp / "proofs"
    res.mkdir()
    rows = [
        {
            "row": "image/a",
            "modality": "image",
            "key": "a",
            "runnable": True,
            "reason": "",
            "dir": "image__a",
            "count": 2,
            "chat": True,
            "engine_args": {"max_model_len": 2048},
            "sampling_args": {"stop_token_ids": []},
            "encoder_decoder": False,
            "standin": "",
        },
        {
            "row": "audio/w",
            "modality": "audio",
            "key": "w",
            "runnable": True,
            "reason": "",
            "dir": "audio__w",
            "count": 1,
            "chat": False,
            "engine_args": {},
            "sampling_args": {},
            "encoder_decoder": True,
            "standin": "",
        },
        {
            "row": "video/a",
            "modality": "video",
            "key": "a",
            "runnable": True,
            "reason": "",
            "dir": "image__a",
            "count": 1,
            "source": "clip.mp4",
            "chat": True,
            "engine_args": {},
            "sampling_args": {},
            "encoder_decoder": False,
            "standin": "",
        },
        {
            "row": "image/old",
            "modality": "image",
            "key": "old",
            "runnable": False,
            "reason": "proven on vLLM 0.24.0 (its own environment), not 0.26.0",
        },
    ]
    index = tmp / "index.json"
    index.write_text(json.dumps({"rows": rows}))
    import urllib.request

    import proofs

    (tmp / "media").mkdir()
    (tmp / "media" / "duck.jpg").write_bytes(b"1234")
    url = proofs.serve(tmp / "media")
    ok(
        urllib.request.urlopen(url + "/duck.jpg", timeout=10).read() == b"1234",
        "proofs.py: the media server answers",
    )
    jobs = proofs.runs_of(rows)
    ok(
        [proofs.run_name(r, m) for r, m in jobs]
        == [
            "image-a-generate",
            "audio-w-generate",
            "video-a-generate",
            "image-a-chat",
            "video-a-chat",
        ],
        "proofs.py: generate runs first, then chat; not runnable rows left out",
    )
    cmd = proofs.command(rows[0], "chat", Path("/tmp/tiny"), Path("/m"), 1 << 30)
    ok(
        cmd[cmd.index("-n") + 1] == "2"
        and "--method" in cmd
        and "kv_cache_memory_bytes=1073741824" in cmd
        and "--engine-arg=max_model_len=2048" in cmd
        and "--sampling-arg=stop_token_ids=[]" in cmd,
        "proofs.py: the CPU proof's command, plus the GPU's memory arguments",
    )
    vcmd = proofs.command(rows[2], "generate", Path("/tmp/tiny"), Path("/m"), 1 << 30)
    ok(
        "-v" in vcmd and "/m/clip.mp4" in vcmd and "-n" not in vcmd,
        "proofs.py: the video row runs the clip",
    )
    recs = [
        {
            "run": "image-a-generate",
            "row": "image/a",
            "method": "generate",
            "rc": 0,
            "wall_s": 30.0,
        },
        {
            "run": "audio-w-generate",
            "row": "audio/w",
            "method": "generate",
            "rc": 1,
            "wall_s": 25.0,
        },
        {"run": "image-a-chat", "row": "image/a", "method": "chat", "rc": 0, "wall_s": 31.0},
        {
            "run": "video-a-generate",
            "row": "video/a",
            "method": "generate",
            "rc": None,
            "skipped": "out of time (20s left)",
        },
    ]
    (res / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    good = {
        "prompt": None,
        "prompt_token_ids": [1, 2, 3, 4],
        "outputs": [{"prompt_tokens": 40, "completion_tokens": 6}] * 3,
        "timings": {"engine_start_s": 12.0},
    }
    (res / "image-a-generate.json").write_text(json.dumps(good))
    (res / "image-a-chat.json").write_text(
        json.dumps({**good, "outputs": [{"prompt_tokens": 40, "completion_tokens": 0}] * 3})
    )
    (res / "audio-w-generate.log").write_text(
        "Traceback\nmmrun: error: vLLM failed: ImportError: cannot import name 'Foo' from 'transformers'\n"
    )
    out = subprocess.run(
        [
            PY,
            str(HERE / "proofs.py"),
            "table",
            "--index",
            str(index),
            "--tiny",
            str(tmp),
            "--res",
            str(res),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = out.stdout
    ok("1 runs ok, 2 failed, 2 not run" in text, "proofs.py table: counts")
    ok(
        "needs another transformers" in text
        and "no generated tokens" in text
        and "image/old: proven on vLLM 0.24.0" in text,
        "proofs.py table: why each failed; rows not runnable",
    )


def check_mmrun_dry(tmp: Path) -> None:
    """The drivers' mmrun commands, with small inputs, through mmrun's own --dry-run (CPU)."""
    from PIL import Image

    bench = tmp / "dry_bench"
    for s, n in (("s64", 8), ("s256", 8), ("s1024", 8)):
        (bench / s).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.new("RGB", (448, 448), (i * 20, 0, 0)).save(bench / s / f"b{i:05d}.png")
        with open(bench / f"m{s}.jsonl", "w") as f:
            files = sorted(str(p) for p in (bench / s).glob("*.png"))
            for i in range(0, n, 4):
                f.write(json.dumps({"id": f"p{i // 4:05d}", "image": files[i : i + 4]}) + "\n")
    model = os.environ.get("SELFCHECK_MODEL", "/tmp/selfcheck_q3b")
    if not Path(model).exists():
        subprocess.run(
            [PY, str(HERE / "full_vocab.py"), str(HERE / "qwen2_5_vl_3b_shape"), model], check=True
        )
    dry = tmp / "mmdry"
    subprocess.run(
        [
            PY,
            str(HERE / "tput.py"),
            "run",
            "--res",
            str(dry),
            "--bench",
            str(bench),
            "--model",
            model,
            "--dry",
            "--steps",
            "mm64 st256 dp2",
        ],
        check=True,
        capture_output=True,
    )
    gdry = tmp / "gapdry2"
    subprocess.run(
        [
            PY,
            str(HERE / "gap.py"),
            "run",
            "--res",
            str(gdry),
            "--images",
            str(bench / "s64"),
            "--model",
            model,
            "--rounds",
            "1",
            "--dry",
            "--variants",
            "M MR Msw",
        ],
        check=True,
        capture_output=True,
    )
    cmd_files = [
        dry / "mm64" / "cmd.txt",
        dry / "st256" / "cmd.txt",
        dry / "dp2" / "cmd.txt",
        gdry / "r1" / "MR" / "cmd.txt",
        gdry / "r1" / "Msw" / "cmd.txt",
    ]
    for path in cmd_files:
        parts = shlex.split(path.read_text())
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        for i, p in enumerate(parts):
            if p == "--env":
                key, _, value = parts[i + 1].partition("=")
                env[key] = value
        cmd = parts[parts.index("--") + 1 :]
        cmd = [PY if c.endswith("python3") or c == sys.executable else c for c in cmd]
        if env.get("MMSW"):
            env["MMSW"] = "workers1"  # preimport would import vLLM here: seconds, nothing to check
        cmd = [c for c in cmd if c != "--overwrite"] + ["--dry-run", "--json"]
        t = time.time()
        # mmrun from SELFCHECK_REPO (the checkout the device sends, e.g. /work/main), else this one
        repo = os.environ.get("SELFCHECK_REPO", str(HERE.parent.parent))
        env["PYTHONPATH"] = repo
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=repo)
        if "-o" in cmd:  # a batch to a file: its lines are the output
            path_o = Path(cmd[cmd.index("-o") + 1])
            rows = (
                [json.loads(x) for x in path_o.read_text().splitlines()] if path_o.exists() else []
            )
            good = (
                out.returncode == 0 and len(rows) == 2 and all(r.get("error") is None for r in rows)
            )
            ok(
                good,
                f"mmrun --dry-run of {path.parent.name} ({time.time() - t:.0f}s): {len(rows)} lines in {path_o.name}, replicas {[r.get('replica') for r in rows]} {'' if good else out.stderr[-300:]}",
            )
            continue
        first = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
        okay = out.returncode == 0 and first.startswith("{")
        detail = ""
        if okay:
            try:  # a named run's document (indented), else the first of a batch's lines
                d = json.loads(out.stdout)
            except json.JSONDecodeError:
                d = json.loads(first)
            args = d.get("request", {}).get("engine_args") or {}
            detail = f"engine_args={args}" if args else f"batch line id={d.get('id')}"
        ok(
            okay,
            f"mmrun --dry-run of {path.parent.name} ({time.time() - t:.0f}s): {detail or out.stderr.strip()[-300:]}",
        )


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        check_ttr(tmp)
        check_gap(tmp)
        check_tput(tmp)
        check_phases(tmp)
        check_probe(tmp)
        check_load_probe(tmp)
        check_monitor(tmp)
        check_proofs(tmp)
        if "--mmrun-dry" in sys.argv:
            check_mmrun_dry(tmp)
    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
