"""bench/gpu's start-up timelines: start_probe.py's marks, startup.py's reading of them and of
vLLM's log lines (the formats of vLLM 0.26.0's log calls, as throughput.py's log.txt holds
them: seconds from spawn, then the line), and throughput.py's --probe."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

GPU_BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_gpu_{name}", GPU_BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


startup = _module("startup")
throughput = _module("throughput")

# The tuned script on vLLM 0.26: its engine core forked ("(EngineCore pid=N) " before each of
# its lines), the compile cache warm. Lines as vLLM 0.26.0 formats them (logger.py's
# "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s").
SCRIPT_LOG = """\
    0.03 STARTUP_MARK 1796400000.030 4100 interpreter up
    0.41 STARTUP_MARK 1796400000.410 4100 import vllm begins
    0.42 STARTUP_MARK 1796400000.420 4100 import vllm done
    0.42 STARTUP_MARK 1796400000.420 4100 import vllm.entrypoints.llm begins
    0.43 STARTUP_MARK 1796400000.430 4100 import torch begins
    5.10 STARTUP_MARK 1796400005.100 4100 import torch done
   12.80 INFO 12-02 10:11:12 [__init__.py:246] Automatically detected platform cuda.
   18.90 STARTUP_MARK 1796400018.900 4100 import vllm.entrypoints.llm done
   18.95 STARTUP_MARK 1796400018.950 4100 LLM() begins
   19.00 INFO 12-02 10:11:19 [api_utils.py:273] non-default args: {'load_format': 'dummy', 'dtype': 'bfloat16', 'max_model_len': 8192, 'seed': 0}
   19.20 STARTUP_MARK 1796400019.200 4100 vLLM plugins begins
   19.21 STARTUP_MARK 1796400019.210 4100 vLLM plugins done
   19.60 INFO 12-02 10:11:19 [model.py:623] Resolved architecture: Qwen2_5_VLForConditionalGeneration
   19.61 INFO 12-02 10:11:19 [model.py:1788] Using max model len 8192
   21.00 (EngineCore pid=4150) INFO 12-02 10:11:21 [core.py:117] Initializing a V1 LLM engine (v0.26.0) with config: model='/tmp/qwen3b', speculative_config=None
   22.40 (EngineCore pid=4150) INFO 12-02 10:11:22 [gpu_model_runner.py:5251] Starting to load model /tmp/qwen3b...
   25.90 (EngineCore pid=4150) INFO 12-02 10:11:25 [gpu_model_runner.py:5348] Model loading took 7.16 GiB memory and 3.412345 seconds
   26.00 (EngineCore pid=4150) INFO 12-02 10:11:26 [gpu_model_runner.py:6397] Encoder cache will be initialized with a budget of 16384 tokens, and profiled with 16 image items of the maximum feature size.
   27.10 (EngineCore pid=4150) INFO 12-02 10:11:27 [backends.py:1095] Using cache directory: /root/.cache/vllm/torch_compile_cache/3f9c1a2b7d5e4f60/rank_0_0/backbone for vLLM's torch.compile
   29.30 (EngineCore pid=4150) INFO 12-02 10:11:29 [backends.py:1156] Dynamo bytecode transform time: 2.21 s
   31.00 (EngineCore pid=4150) INFO 12-02 10:11:31 [backends.py:293] Directly load the compiled graph(s) for compile range (1, 16384) from the cache, took 1.612 s
   31.20 (EngineCore pid=4150) INFO 12-02 10:11:31 [monitor.py:52] torch.compile took 4.05 s in total
   32.50 (EngineCore pid=4150) INFO 12-02 10:11:32 [gpu_worker.py:561] Available KV cache memory: 112.34 GiB
   32.60 (EngineCore pid=4150) INFO 12-02 10:11:32 [kv_cache_utils.py:2177] GPU KV cache size: 3,271,584 tokens
   32.61 (EngineCore pid=4150) INFO 12-02 10:11:32 [kv_cache_utils.py:2179] Maximum concurrency for 8,192 tokens per request: 399.36x
   35.20 (EngineCore pid=4150) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/67 [00:00<?, ?it/s]\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67 [00:02<00:00, 28.51it/s]
   35.30 (EngineCore pid=4150) INFO 12-02 10:11:35 [gpu_model_runner.py:6845] Graph capturing finished in 3 secs, took 0.52 GiB
   35.34 (EngineCore pid=4150) INFO 12-02 10:11:35 [jit_monitor.py:79] Kernel JIT monitor activated; monitored JIT compilations during inference will use mode=warn.
   35.40 (EngineCore pid=4150) INFO 12-02 10:11:35 [core.py:331] init engine (profile, create kv cache, warmup model) took 9.41 s (compilation: 4.05 s)
   36.10 STARTUP_MARK 1796400036.100 4100 LLM() done
   36.11 RAW_READY 1796400036.110
   44.00 STARTUP_MARK 1796400044.000 4100 first request begins
   44.20 STARTUP_MARK 1796400044.200 4100 first request done
   71.00 RAW_DONE 1796400071.000
"""

# mmrun on vLLM 0.26, its compile cache cold: mmrun's own marks and line, the engine core's
# marks (another pid) left out of the main line.
MMRUN_LOG = """\
    0.04 STARTUP_MARK 1796400100.040 5200 interpreter up
    0.05 STARTUP_MARK 1796400100.050 5200 import mmrun begins
    0.20 STARTUP_MARK 1796400100.200 5200 import mmrun done
    0.30 STARTUP_MARK 1796400100.300 5200 mmrun plugins begins
    0.33 STARTUP_MARK 1796400100.330 5200 mmrun plugins done
    0.40 STARTUP_MARK 1796400100.400 5200 import mmrun.cli.main done
    1.10 mmrun: for this GPU run: max_num_seqs=256 (512 prompts: up to that many run together (the model's own setting is 5))
    1.30 STARTUP_MARK 1796400101.300 5200 mmrun engine start begins
    1.90 STARTUP_MARK 1796400101.900 5200 import vllm.entrypoints.llm begins
   25.00 STARTUP_MARK 1796400125.000 5200 import vllm.entrypoints.llm done
   25.10 STARTUP_MARK 1796400125.100 5200 LLM() begins
   27.00 (EngineCore pid=5260) INFO 12-02 10:13:27 [core.py:117] Initializing a V1 LLM engine (v0.26.0) with config: model='/tmp/qwen3b'
   27.05 (EngineCore pid=5260) STARTUP_MARK 1796400127.050 5260 LLM() begins
   27.50 STARTUP_MARK 1796400127.500 5200 mmrun frontend warm begins
   28.00 (EngineCore pid=5260) INFO 12-02 10:13:28 [gpu_model_runner.py:5251] Starting to load model /tmp/qwen3b...
   29.20 STARTUP_MARK 1796400129.200 5200 mmrun frontend warm done
   31.50 (EngineCore pid=5260) INFO 12-02 10:13:31 [gpu_model_runner.py:5348] Model loading took 7.16 GiB memory and 3.300000 seconds
   32.00 (EngineCore pid=5260) INFO 12-02 10:13:32 [backends.py:1095] Using cache directory: /root/.cache/vllm/torch_compile_cache/a0b1c2d3e4f5a6b7/rank_0_0/backbone for vLLM's torch.compile
   34.40 (EngineCore pid=5260) INFO 12-02 10:13:34 [backends.py:1156] Dynamo bytecode transform time: 2.35 s
   34.50 (EngineCore pid=5260) INFO 12-02 10:13:34 [backends.py:379] Cache the graph of compile range (1, 16384) for later use
   55.00 (EngineCore pid=5260) INFO 12-02 10:13:55 [backends.py:394] Compiling a graph for compile range (1, 16384) takes 20.52 s
   55.30 (EngineCore pid=5260) INFO 12-02 10:13:55 [monitor.py:52] torch.compile took 23.21 s in total
   57.80 (EngineCore pid=5260) Capturing CUDA graphs (decode, FULL):  50%|#####     | 2/4 [00:00<00:00, 9.10it/s]\r(EngineCore pid=5260) INFO 12-02 10:13:57 [gpu_model_runner.py:6845] Graph capturing finished in 1 secs, took 0.10 GiB
   58.00 (EngineCore pid=5260) INFO 12-02 10:13:58 [core.py:331] init engine (profile, create kv cache, warmup model) took 27.90 s (compilation: 31.02 s \u2014 language_model: 23.21 s, encoder: 7.81 s)
   58.90 STARTUP_MARK 1796400158.900 5200 LLM() done
   59.00 STARTUP_MARK 1796400159.000 5200 first request begins
"""


def test_script_log_steps_in_order_with_vllms_figures() -> None:
    steps, figures = startup.parse_log(SCRIPT_LOG)
    assert steps == {
        "python": 0.03,
        "vllm_package": 0.41,
        "vllm_package_done": 0.42,
        "vllm_import": 0.42,
        "torch_imported": 5.10,
        "vllm_imported": 18.90,
        "llm_called": 18.95,
        "args": 19.00,
        "vllm_plugins": 19.21,
        "architecture": 19.60,
        "engine_core": 21.00,
        "model_load": 22.40,
        "model_loaded": 25.90,
        "encoder_profile": 26.00,
        "cache_dir": 27.10,
        "dynamo": 29.30,
        "graphs_loaded": 31.00,
        "compiled": 31.20,
        "kv_memory": 32.50,
        "kv_size": 32.60,
        "captured": 35.30,
        "kernels_warm": 35.34,
        "ready": 35.40,
        "llm_returned": 36.10,
        "first_request": 44.00,
    }
    assert figures == {
        "vllm_version": "0.26.0",
        "model_gib": 7.16,
        "model_load_s": 3.412345,
        "compile_cache_dir": "/root/.cache/vllm/torch_compile_cache/3f9c1a2b7d5e4f60/rank_0_0/backbone",
        "compile_cache_key": "3f9c1a2b7d",
        "dynamo_s": 2.21,
        "graphs_load_s": 1.612,
        "torch_compile_s": 4.05,
        "kv_cache_gib": 112.34,
        "kv_cache_tokens": 3271584,
        "cuda_graphs_s": 3,
        "cuda_graphs_gib": 0.52,
        "init_engine_s": 9.41,
        "compilation_s": 4.05,
        "compile_cache": "hit",
    }


def test_mmrun_log_cache_miss_encoder_compile_and_other_processes_marks() -> None:
    steps, figures = startup.parse_log(MMRUN_LOG)
    # the engine core's own "LLM() begins" is not the main line's
    assert steps["llm_called"] == 25.10
    assert steps["mmrun_plugins"] == 0.33
    assert (steps["mmrun_choices"], steps["mmrun_start"]) == (1.10, 1.30)
    assert (steps["warm_begins"], steps["warm_done"]) == (27.50, 29.20)
    assert "graphs_loaded" not in steps and steps["graphs_compiled"] == 55.00
    assert figures["compile_cache"] == "miss"
    assert figures["graphs_compile_s"] == 20.52
    assert (figures["compilation_s"], figures["encoder_compile_s"]) == (31.02, 7.81)
    assert figures["compile_cache_key"] == "a0b1c2d3e4"
    # a record written while a progress bar was open: on the bar's line, after its "\r"
    assert steps["captured"] == 57.80
    assert (figures["cuda_graphs_s"], figures["cuda_graphs_gib"]) == (1, 0.10)


def test_timeline_counts_the_main_line_and_shows_side_steps_beside() -> None:
    row = {"run": "tuned-512", "variant": "tuned", "prompts": 512, "spawn_to_last_s": 71.0}
    got = startup.timeline(row, SCRIPT_LOG)
    steps = got["steps"]
    assert steps["python"] == {"t": 0.03, "since_previous": 0.03}
    assert steps["vllm_imported"] == {"t": 18.9, "since_previous": 18.48}
    assert steps["llm_called"] == {"t": 18.95, "since_previous": 0.05}
    assert steps["engine_core"] == {"t": 21.0, "since_previous": 2.0}  # after the arguments line
    assert steps["torch_imported"] == {"t": 5.1, "since_previous": None}  # inside vLLM's import
    # the kernel warm-up after the CUDA graphs is a step of its own
    assert steps["kernels_warm"] == {"t": 35.34, "since_previous": 0.04}
    assert steps["ready"] == {"t": 35.4, "since_previous": 0.06}
    # the script's results come all at once
    assert steps["first_result"] == {"t": 71.0, "since_previous": 27.0}
    assert steps["last_result"] == {"t": 71.0, "since_previous": 0.0}
    assert (got["run"], got["variant"], got["prompts"]) == ("tuned-512", "tuned", 512)


def test_tables_one_column_per_run() -> None:
    runs = [
        startup.timeline({"variant": "tuned", "prompts": 1, "spawn_to_last_s": 45.0}, SCRIPT_LOG),
        startup.timeline(
            {"variant": "mmrun", "prompts": 1, "spawn_to_first_s": 60.5, "spawn_to_last_s": 60.5},
            MMRUN_LOG,
        ),
    ]
    steps = startup.steps_table(runs).splitlines()
    head = "| step: s from spawn (+ since the step before) | 1. tuned x1 | 2. mmrun x1 |"
    assert steps[0] == head
    assert "| mmrun frontend warm begins | - | 27.5 (beside) |" in steps
    assert "| vLLM: kernels warmed up (JIT monitor on) | 35.3 (+0.0) | - |" in steps
    assert "| vLLM: engine ready (init engine ... took) | 35.4 (+0.1) | 58.0 (+0.2) |" in steps
    assert "| first result | 45.0 (+1.0) | 60.5 (+1.5) |" in steps
    assert "| vLLM: graphs compiled (cache miss) | - | 55.0 (+20.6) |" in steps
    figures = startup.figures_table(runs).splitlines()
    assert "| compile cache | hit | miss |" in figures
    assert "| compile cache key | 3f9c1a2b7d | a0b1c2d3e4 |" in figures
    assert "| of which the encoder's compilation (s) | - | 7.81 |" in figures


def test_main_reads_result_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = tmp_path / "res"
    (res / "tuned-512").mkdir(parents=True)
    (res / "tuned-512" / "log.txt").write_text(SCRIPT_LOG)
    row = {"run": "tuned-512", "variant": "tuned", "prompts": 512, "spawn_to_last_s": 71.0,
           "spawn_to_ready_s": 36.1, "prompts_per_s": 14.66, "texts": 512,
           "texts_sha256": "282e0b63f28aa12f", "texts_identical": "reference"}  # fmt: skip
    (res / "summary.json").write_text(json.dumps([row]))
    out_json, out_md = tmp_path / "timeline.json", tmp_path / "timeline.md"
    assert startup.main([str(res), "--json", str(out_json), "--md", str(out_md)]) == 0
    written = json.loads(out_json.read_text())
    assert [t["run"] for t in written] == ["tuned-512"]
    assert written[0]["steps"]["ready"] == {"t": 35.4, "since_previous": 0.06}
    assert written[0]["stage"] == "res"
    assert written[0]["results"]["prompts_per_s"] == 14.66
    printed = capsys.readouterr().out
    assert out_md.read_text() + "\n" == printed
    assert printed.splitlines()[2] == (
        "| 1. tuned x512 | res/tuned-512 | 36.1 | - | 71.0 | 14.66 | 512 (282e0b63f28aa12f) | reference |"
    )


def test_main_without_runs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert startup.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out == f"startup.py: no summary.json with runs in {tmp_path}\n"


def test_probe_marks_imports_and_the_first_call_only(tmp_path: Path) -> None:
    package = tmp_path / "vllm" / "entrypoints"
    package.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "llm.py").write_text("class LLM:\n    def __init__(self, n):\n        self.n = n\n")
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\nfrom vllm.entrypoints.llm import LLM\n"
        "print(LLM(1).n, LLM(2).n, LLM.__init__.__name__, sys.argv[1:])\n"
    )
    done = subprocess.run(
        [sys.executable, str(GPU_BENCH / "start_probe.py"), str(script), "a", "b"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 2 __init__ ['a', 'b']\n"
    events = [line.split(" ", 3)[3] for line in done.stderr.splitlines()]
    assert events == [
        "interpreter up",
        "import vllm begins",
        "import vllm done",
        "import vllm.entrypoints.llm begins",
        "import vllm.entrypoints.llm done",
        "LLM() begins",
        "LLM() done",
    ]


def test_probe_switch_interval_lasts_until_the_engine_start_returns(tmp_path: Path) -> None:
    package = tmp_path / "mmrun"
    package.mkdir()
    (package / "__init__.py").write_text("")
    # the engine start forks its engine core: what interval does that child run with?
    (package / "runner.py").write_text(
        "import os, sys\n"
        "class Runner:\n"
        "    def start(self):\n"
        "        r, w = os.pipe()\n"
        "        if os.fork() == 0:\n"
        "            os.write(w, repr(sys.getswitchinterval()).encode())\n"
        "            os._exit(0)\n"
        "        os.wait()\n"
        "        return sys.getswitchinterval(), os.read(r, 64).decode()\n"
    )
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\nfrom mmrun.runner import Runner\n"
        "during, child = Runner().start()\n"
        "print(during, sys.getswitchinterval(), child)\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(GPU_BENCH / "start_probe.py"), str(script)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**env, "BENCH_START_SWITCH_INTERVAL": "0.0002"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    during, after, child = (float(x) for x in done.stdout.split())
    assert during == pytest.approx(0.0002)
    assert after == child == 0.005
    assert "switch interval back to the default" in done.stderr
    plain = subprocess.run(
        [sys.executable, str(GPU_BENCH / "start_probe.py"), str(script)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert [float(x) for x in plain.stdout.split()] == [0.005, 0.005, 0.005]
    assert "switch interval" not in plain.stderr


def test_throughput_probe_and_run_estimates() -> None:
    argv = ["/usr/bin/python3", "-m", "mmrun", "image"]
    assert throughput.probed(argv) == [
        "/usr/bin/python3",
        str(GPU_BENCH / "start_probe.py"),
        "-m",
        "mmrun",
        "image",
    ]
    # spawn to ready, the prompts at the expected rate, the end
    assert throughput.expected_s("tuned", 512, "qwen2_5_vl") == pytest.approx(47 + 512 / 18 + 4)
    assert throughput.expected_s("mmrun+env.MMRUN_PREFETCH_MB=1", 512, "qwen2_5_vl") == (
        pytest.approx(58 + 512 / 28 + 4)
    )
    assert throughput.expected_s("mmrun", 1, "qwen2_5_vl") == pytest.approx(58 + 1 / 28 + 4)


def test_throughput_settles_each_variant_once_with_its_own_memory(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(GPU_BENCH / "throughput.py"), "--bench", str(tmp_path),
         "--model", "/models/m", "--res", str(tmp_path / "res"), "--prompts", "512",
         "--variants", "mmrun,tuned", "--rounds", "2", "--warm", "raw:1,mmrun:1", "--settle",
         "--probe", "--dry"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    kinds = [
        line.split(" ", 1)[0] for line in out if line.split(" ", 1)[0] in {"WARM", "SETTLE", "RUN"}
    ]
    # the warm-ups, then each variant settled once, then the timed runs (two rounds)
    assert kinds == ["WARM", "WARM", "SETTLE", "SETTLE", "RUN", "RUN", "RUN", "RUN"]
    warm = [line for line in out if line.startswith("WARM ")]
    settle = [line for line in out if line.startswith("SETTLE ")]
    assert all("gpu_memory_utilization" in line for line in warm)
    # the timed runs' own memory share, on the same manifest, and not probed
    assert not any("gpu_memory_utilization" in line for line in settle)
    assert "m512.jsonl" in settle[0] and "raw_vllm.py" in settle[1]
    assert not any("start_probe.py" in line for line in settle)


def test_a_settle_run_stops_at_its_engine_ready_line(tmp_path: Path) -> None:
    script = "import time; print('RAW_READY 1', flush=True); time.sleep(60)"
    rec = throughput.run_one(
        [sys.executable, "-c", script], {}, None, 1, tmp_path / "run", 30, stop_at_ready=True
    )
    assert "ready" in rec and "first" not in rec
    assert rec["exit"] - rec["spawn"] < 15  # killed at the ready line, not after 60 s
    assert rec["rc"] == -9
