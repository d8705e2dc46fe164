"""A new user's first runs, as ``python -m mmrun`` processes on the real vLLM CPU engine:
the quick start without VLLM_CPU_KVCACHE_SPACE, an engine that cannot fit, Ctrl-C at several
moments of the engine's start, and a model that vLLM cannot batch (kimi_audio) given a batch
of clips of different lengths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.test_process_exit import Tree, as_in_a_terminal, interrupt, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.engine_processes]

KVCACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"
# The engine core in mmrun's process (see tests/e2e/conftest.py), for a run whose point is
# not vLLM's processes.
IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@pytest.fixture(scope="module")
def qwen(tiny_checkpoint: Callable[[str, str], TinyCheckpoint]) -> TinyCheckpoint:
    return tiny_checkpoint("image", "qwen2_5_vl")


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; whatever is left of them is killed at the end."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate()


def quick_start(
    checkpoint: TinyCheckpoint, server_url: str, *extra: str, **env_vars: str
) -> tuple[list[str], dict[str, str]]:
    """The README's quick start (`mmrun image -m qwen2_5_vl -n 2`) on the tiny checkpoint, in
    a user's environment: no VLLM_CPU_KVCACHE_SPACE, nothing of the test suite's settings."""
    engine_args = [f"--engine-arg={k}={json.dumps(v)}" for k, v in checkpoint.engine_args.items()]
    args = [sys.executable, "-m", "mmrun", "image", "-m", "qwen2_5_vl", "-n", "2"]
    # The tiny checkpoint's own sizes; eager mode spares CI torch.compile's ~40 s.
    args += ["--model", str(checkpoint.path), *engine_args, "--engine-arg", "enforce_eager=true"]
    env = {k: v for k, v in os.environ.items() if k != KVCACHE_ENV}
    env.update(MMRUN_ASSETS_BASE_URL=server_url, HF_HUB_OFFLINE="1", **env_vars)
    return [*args, *extra], env


def test_the_quick_start_runs_without_vllm_cpu_kvcache_space(
    qwen: TinyCheckpoint, media_server: Any
) -> None:
    args, env = quick_start(qwen, media_server.url, "-v")
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "prompt 1/1" in proc.stdout
    # -v says what mmrun chose for the KV cache, and why.
    assert f"mmrun: {KVCACHE_ENV}=" in proc.stderr, proc.stderr[-3000:]


def test_an_engine_that_cannot_fit_is_one_line(qwen: TinyCheckpoint, media_server: Any) -> None:
    """The user asked for far more KV cache than the machine has: vLLM's worker fails with a
    traceback in each of its processes; the user sees mmrun's one line, never cut."""
    args, env = quick_start(qwen, media_server.url, **{KVCACHE_ENV: "100000"})
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("mmrun: error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    # Besides the error: only mmrun's own start notes.
    assert all(line.startswith("mmrun: ") for line in lines), proc.stderr[-3000:]
    assert errors[0].endswith(")"), errors[0]  # whole: it ends with its hint
    # --quiet leaves mmrun's error alone; the engine core in mmrun's process here (the run
    # above had vLLM's processes) spares this start two imports of vLLM.
    quiet = subprocess.run(
        [*args, "--quiet"],
        capture_output=True,
        text=True,
        env={**env, **IN_PROCESS},
        timeout=900,
    )
    assert quiet.returncode == 1
    assert len(quiet.stderr.splitlines()) == 1
    assert quiet.stderr.startswith("mmrun: error: not enough free memory for the KV cache")
    assert "VLLM_CPU_KVCACHE_SPACE" in quiet.stderr.split("(")[-1]  # the hint names it


def _was_alive(tree: Tree, seconds: float) -> bool:
    starts = [
        start for (_, start), titles in tree.seen.items() if any("EngineCore" in t for t in titles)
    ]
    return bool(starts) and time.time() - min(starts) > seconds


def _loaded(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


# "importing": numpy's C extension has just been loaded, so mmrun is inside vLLM's import of
# torch and numpy, where an interrupt raised at once was swallowed (the run finished as if
# never interrupted) or left numpy half-made (the run failed later on a missing attribute).
@pytest.mark.parametrize("moment", ["early", "importing", "mid-load", "late"])
def test_ctrl_c_at_any_moment_of_the_start_is_one_line(
    moment: str,
    qwen: TinyCheckpoint,
    media_server: Any,
    started: list[subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    args, env = quick_start(qwen, media_server.url)
    err_file = tmp_path / "stderr"
    with err_file.open("w") as err_sink:
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=err_sink,
            text=True,
            env={**env, "PYTHONFAULTHANDLER": "1"},  # stacks on SIGABRT: see interrupt
            preexec_fn=as_in_a_terminal,
        )
    started.append(proc)
    tree = Tree(proc.pid)

    def lines() -> list[str]:
        return err_file.read_text(errors="replace").splitlines()

    ready = {
        "early": lambda: any("starting vLLM" in line for line in lines()),
        "importing": lambda: _loaded(proc.pid, "_multiarray_umath"),
        "mid-load": lambda: tree.has("EngineCore"),
        "late": lambda: tree.has("EngineCore") and _was_alive(tree, 8.0),
    }[moment]
    wait_for(lambda: ready() or proc.poll() is not None, 300, moment)
    assert proc.poll() is None, err_file.read_text()[-3000:]
    out, _ = interrupt(proc, tree, timeout=60, err_file=err_file)
    err = lines()
    assert proc.returncode == 130, "\n".join(err)[-3000:]
    assert out == ""
    # mmrun's start notes, then its one line: nothing of vLLM's processes.
    assert err[-1] == "mmrun: interrupted", "\n".join(err)[-3000:]
    assert all(line.startswith("mmrun: starting vLLM") for line in err[:-1]), "\n".join(err)
    deadline = time.monotonic() + 10
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tree.alive() == []


def test_kimi_audio_runs_a_batch_of_clips_of_different_lengths(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], tmp_path: Path
) -> None:
    """vLLM 0.32's Kimi-Audio fails on a batch that holds clips of different lengths
    ("'list' object has no attribute 'dim'"); its spec runs one prompt at a time."""
    import numpy as np
    import soundfile

    checkpoint = tiny_checkpoint("audio", "kimi_audio")
    clips = []
    for seconds in (1.0, 2.5, 4.0):
        path = tmp_path / f"tone-{seconds}.wav"
        t = np.linspace(0, seconds, int(16000 * seconds), dtype=np.float32)
        soundfile.write(path, 0.3 * np.sin(2 * np.pi * 330 * t), 16000)
        clips += ["-a", str(path)]
    # The checkpoint's sizes, but the spec's max_num_seqs: that is what is tested.
    engine_args = [
        f"--engine-arg={k}={json.dumps(v)}"
        for k, v in checkpoint.engine_args.items()
        if k != "max_num_seqs"
    ]
    args = [sys.executable, "-m", "mmrun", "audio", "-m", "kimi_audio"]
    args += ["--model", str(checkpoint.path), *clips, "--per-prompt", "1", "--json"]
    args += ["--trust-remote-code", "--max-tokens", "4", "--engine-arg", "enforce_eager=true"]
    args += engine_args
    # What fails is vLLM's batching, not its processes: the engine core in mmrun's process.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **IN_PROCESS}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["request"]["engine_args"]["max_num_seqs"] == 1
    assert len(doc["outputs"]) == 3
    assert [m["duration_s"] for m in doc["media"]] == pytest.approx([1.0, 2.5, 4.0], abs=0.01)
    prompt_tokens = [o["prompt_tokens"] for o in doc["outputs"]]
    assert len(set(prompt_tokens)) == 3, prompt_tokens  # each clip expanded to its own length
    assert all(o["completion_tokens"] > 0 for o in doc["outputs"])
