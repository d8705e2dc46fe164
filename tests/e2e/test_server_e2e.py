"""``mmrun serve`` starts vLLM's real OpenAI-compatible server on 127.0.0.1, once per module
for each checkpoint served (the tiny Qwen2.5-VL for its image and video rows, the tiny
Qwen2-Audio), and ``mmrun image|video|audio --server URL`` runs against it:

- its answers are those of mmrun's own engine (greedy texts and prompt token counts; image
  by chat and generate, a clip by chat, a recording by generate), that engine run in the
  CLI worker (tests/e2e/cli_worker.py);
- three calls against one server: the later ones send their first request within seconds
  (no engine start, no processor loaded for a prompt an earlier call rendered);
- faults over the real server: a wrong API key, a refused port, one prompt the server
  refuses (longer than max_model_len), the server killed mid-batch and a new one resuming;
- the server stops with its whole process group on SIGTERM.

Both sides run with ``max_num_seqs=1``: every prompt alone in its engine, so that no greedy
answer depends on what ran beside it. The servers take an API key, which every call passes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker
from tests.e2e.test_structured_e2e import SCHEMA

pytestmark = [pytest.mark.e2e, pytest.mark.engine_processes]

READY_TIMEOUT_S = 600
API_KEY = "mmrun-e2e-key"
# A later call against a running server: its first result within this many seconds (1.2 to
# 3 s measured on a busy 2-core machine, where a cold in-process run took 93 s: its engine).
WARM_FIRST_RESULT_S = 10.0


def env() -> dict[str, str]:
    """This test's environment (its own MMRUN_CACHE_DIR), offline."""
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def first_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
    found: list[str] = []
    reader = threading.Thread(target=lambda: found.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    return found[0].strip() if found else None


def rows(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def group_alive(pgid: int) -> list[int]:
    alive = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except (OSError, psutil.Error):
            continue
    return alive


def engine_flags(checkpoint: TinyCheckpoint) -> list[str]:
    engine_args = {**checkpoint.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    return [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]


@dataclass
class Server:
    """A running ``mmrun serve`` (vLLM's server in a process group of its own)."""

    process: subprocess.Popen[str]
    url: str
    pgid: int
    log: Path

    def stop(self) -> int:
        """SIGTERM, as a user's Ctrl-C or a CI job's end: its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=120)

    def kill_engine(self) -> None:
        """The server's processes killed at once (SIGKILL to its group), as a crash."""
        os.killpg(self.pgid, signal.SIGKILL)


@dataclass
class Served:
    """One checkpoint's server for the module: started at first use, started again at most
    once (after a test killed it), stopped at the module's end."""

    model: list[str]
    folder: Path
    serve_args: list[str] = field(default_factory=list)  # the server's own, not a run's
    starts: int = 0
    current: Server | None = None
    stopped: list[Server] = field(default_factory=list)

    def start(self) -> Server:
        assert self.starts < 2, "at most two server starts per checkpoint in this module"
        self.starts += 1
        port = free_port()
        log = self.folder / f"serve-{self.starts}.err"
        command = [sys.executable, "-m", "mmrun", "serve", *self.model, *self.serve_args]
        with log.open("w") as err:
            process = subprocess.Popen(
                [*command, "--port", str(port)],
                env={**env(), "MMRUN_STATE_DIR": str(self.folder / "state")},
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        try:
            url = first_line(process, READY_TIMEOUT_S)
            assert url == f"http://127.0.0.1:{port}", log.read_text()[-3000:]
            groups = {os.getpgid(c.pid) for c in psutil.Process(process.pid).children()}
            assert len(groups) == 1 and process.pid not in groups
        except BaseException:
            process.kill()
            process.wait()
            raise
        (pgid,) = groups
        self.current = Server(process, url, pgid, log)
        return self.current

    def server(self) -> Server:
        if self.current is None or self.current.process.poll() is not None:
            return self.start()
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            if group_alive(self.current.pgid):
                os.killpg(self.current.pgid, signal.SIGKILL)


def served(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], modality: str, key: str, folder: Path
) -> Served:
    checkpoint = tiny_checkpoint(modality, key)
    model = ["-m", key, "--model", str(checkpoint.path), *engine_flags(checkpoint)]
    return Served([*model, "--api-key", API_KEY], folder)


@pytest.fixture(scope="module")
def qwen(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """The tiny Qwen2.5-VL's server (its image and video rows)."""
    holder = served(tiny_checkpoint, "image", "qwen2_5_vl", tmp_path_factory.mktemp("qwen"))
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture(scope="module")
def qwen_audio(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """The tiny Qwen2-Audio's server."""
    holder = served(tiny_checkpoint, "audio", "qwen2_audio", tmp_path_factory.mktemp("qaudio"))
    try:
        yield holder
    finally:
        holder.close()


@pytest.fixture(scope="module")
def worker(cli_worker: CliWorker) -> Iterator[CliWorker]:
    """The session's CLI worker, its engine stopped once this module is done."""
    try:
        yield cli_worker
    finally:
        cli_worker.release()


def client_args(holder: Served, command: str) -> list[str]:
    """``mmrun COMMAND -m KEY --model PATH --engine-arg ...`` as the server was started."""
    model = [a for a in holder.model if a not in ("--api-key", API_KEY)]
    return [command, *model]


def against(url: str, args: Sequence[str], out: Path, key: str = API_KEY) -> Any:
    served = ["--server", url, "--api-key", key, "-o", str(out)]
    return subprocess.run(
        [sys.executable, "-m", "mmrun", *args, *served],
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def first_result_s(server: Server, args: Sequence[str], out: Path) -> tuple[float, Any]:
    """Seconds from the command's start to its first result line in ``out``, and its run."""
    started = time.monotonic()
    served = ["--server", server.url, "--api-key", API_KEY, "-o", str(out)]
    process = subprocess.Popen(
        [sys.executable, "-m", "mmrun", *args, *served],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = None
    while process.poll() is None and first is None:
        if out.exists() and out.read_text().strip():
            first = time.monotonic() - started
        time.sleep(0.05)
    stdout, stderr = process.communicate(timeout=600)
    run = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if first is None and out.exists() and out.read_text().strip():
        first = time.monotonic() - started
    assert first is not None, stderr[-3000:]
    return first, run


def images(folder: Path, count: int, size: int = 56) -> Path:
    from PIL import Image

    folder.mkdir(parents=True)
    for i in range(count):
        colour = ((60 * i) % 256, (90 + 7 * i) % 256, (200 - 40 * i) % 256)
        Image.new("RGB", (size + 28 * (i % 4), size), colour).save(folder / f"img{i:03d}.png")
    return folder


def assert_same_answers(served_out: Path, local_out: Path, count: int, label: str) -> None:
    local, answered = rows(local_out), rows(served_out)
    assert sorted(answered) == sorted(local) and len(local) == count
    for key, row in local.items():
        assert row["error"] is None and answered[key]["error"] is None, (label, key)
        assert answered[key]["text"] == row["text"], (label, key)
        assert answered[key]["prompt_tokens"] == row["prompt_tokens"], (label, key)
        assert answered[key]["completion_tokens"] == row["completion_tokens"], (label, key)


# --- answers equal to mmrun's own engine ------------------------------------------------


def test_image_runs_answer_as_the_local_engine(
    qwen: Served, worker: CliWorker, tmp_path: Path
) -> None:
    server = qwen.server()
    folder = images(tmp_path / "images", 4)
    args = [*client_args(qwen, "image"), "-i", str(folder), "--max-tokens", "12"]
    for method in ("chat", "generate"):
        out = tmp_path / f"server-{method}.jsonl"
        started = time.monotonic()
        run = against(server.url, [*args, "--method", method], out)
        assert run.returncode == 0, run.stderr[-3000:]
        assert time.monotonic() - started < 120  # no engine start
        local = tmp_path / f"local-{method}.jsonl"
        ran = worker.run([*args, "--method", method, "-o", str(local)], {"HF_HUB_OFFLINE": "1"})
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert_same_answers(out, local, 4, method)


def test_several_api_servers_answer_as_the_local_engine(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint], worker: CliWorker, tmp_path: Path
) -> None:
    """``--api-servers 2``: vLLM's own CLI runs two API-server processes on one port, each
    preparing the requests it takes; a batch by chat and by generate answers as mmrun's own
    engine, and SIGTERM stops every process of the server."""
    (tmp_path / "two").mkdir()
    holder = served(tiny_checkpoint, "image", "qwen2_5_vl", tmp_path / "two")
    holder.serve_args = ["--modality", "image", "--api-servers", "2"]
    try:
        server = holder.server()
        # the start line says how many API processes it starts
        assert ", 2 API-server processes\n" in server.log.read_text(), server.log.read_text()
        names = sorted(p.name() for p in psutil.Process(server.process.pid).children(True))
        assert [n for n in names if n.startswith("VLLM::APIServer")] == [
            "VLLM::APIServer_0",
            "VLLM::APIServer_1",
        ], names
        folder = images(tmp_path / "images", 6)
        args = [*client_args(holder, "image"), "-i", str(folder), "--max-tokens", "12"]
        for method in ("chat", "generate"):
            out, local = tmp_path / f"server-{method}.jsonl", tmp_path / f"local-{method}.jsonl"
            run = against(server.url, [*args, "--method", method], out)
            assert run.returncode == 0, run.stderr[-3000:]
            ran = worker.run([*args, "--method", method, "-o", str(local)], {"HF_HUB_OFFLINE": "1"})
            assert ran.returncode == 0, ran.stderr[-3000:]
            assert_same_answers(out, local, 6, method)
        assert server.stop() == 0
        deadline = time.monotonic() + 30
        while group_alive(server.pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert group_alive(server.pgid) == []
    finally:
        holder.close()


def test_a_clip_answers_as_the_local_engine(
    qwen: Served, worker: CliWorker, tmp_path: Path
) -> None:
    """The image row's server serves the video row too (mmrun serve gives a key that two
    modalities have the media limits of both)."""
    from tests.helpers.media import write_clip

    server = qwen.server()
    clips = tmp_path / "clips"
    clips.mkdir()
    write_clip(clips / "a.mp4")
    write_clip(clips / "b.mp4", frames=8, fps=4)
    args = [*client_args(qwen, "video"), "--video", str(clips / "*.mp4"), "--method", "chat"]
    args += ["--num-frames", "4", "--max-tokens", "8"]
    out, local = tmp_path / "server.jsonl", tmp_path / "local.jsonl"
    run = against(server.url, args, out)
    assert run.returncode == 0, run.stderr[-3000:]
    ran = worker.run([*args, "-o", str(local)], {"HF_HUB_OFFLINE": "1"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert_same_answers(out, local, 2, "video")
    assert all(row["prompt_tokens"] > 40 for row in rows(out).values())  # the frames' tokens


def test_a_recording_answers_as_the_local_engine(
    qwen_audio: Served, worker: CliWorker, tmp_path: Path
) -> None:
    """Qwen2-Audio by generate, its only method (mmrun's prompt, each clip as a float WAV: the
    samples mmrun decoded). Whisper's server only transcribes: mmrun refuses it."""
    import numpy as np
    import soundfile

    server = qwen_audio.server()
    folder = tmp_path / "audio"
    folder.mkdir()
    for i, hz in enumerate((220, 440, 880)):
        t = np.arange(16000 * (1 + i)) / 16000
        soundfile.write(folder / f"tone{hz}.wav", 0.3 * np.sin(2 * np.pi * hz * t), 16000)
    args = [*client_args(qwen_audio, "audio"), "--audio", str(folder / "*.wav")]
    args += ["--method", "generate", "--max-tokens", "8"]
    out, local = tmp_path / "server.jsonl", tmp_path / "local.jsonl"
    run = against(server.url, args, out)
    assert run.returncode == 0, run.stderr[-3000:]
    ran = worker.run([*args, "-o", str(local)], {"HF_HUB_OFFLINE": "1"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert_same_answers(out, local, 3, "audio")
    qwen_audio.close()  # its memory back for the tests that follow


# --- three calls against one server -----------------------------------------------------


def test_later_calls_against_one_server_answer_within_seconds(qwen: Served, tmp_path: Path) -> None:
    server = qwen.server()
    base = [*client_args(qwen, "image"), "--max-tokens", "2", "--method", "generate"]
    many = images(tmp_path / "many", 200, size=28)
    first_s, run = first_result_s(server, [*base, "-i", str(many)], tmp_path / "1.jsonl")
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(ids(tmp_path / "1.jsonl")) == sorted(str(p) for p in many.iterdir())
    later = []
    for call in (2, 3):
        folder = images(tmp_path / f"call{call}", 10, size=28)
        out = tmp_path / f"{call}.jsonl"
        seconds, run = first_result_s(server, [*base, "-i", str(folder)], out)
        assert run.returncode == 0, run.stderr[-3000:]
        assert sorted(ids(out)) == sorted(str(p) for p in folder.iterdir())
        later.append(seconds)
    print(f"first result: call 1 {first_s:.2f} s, calls 2 and 3 {later[0]:.2f} s, {later[1]:.2f} s")
    assert max(later) < WARM_FIRST_RESULT_S, (first_s, later)


# --- structured outputs over the real server ---------------------------------------------


def test_a_structured_batch_against_the_server_keeps_its_schema(
    qwen: Served, tmp_path: Path
) -> None:
    server = qwen.server()
    folder = images(tmp_path / "images", 4)
    out = tmp_path / "out.jsonl"
    args = [*client_args(qwen, "image"), "-i", str(folder), "--max-tokens", "40"]
    run = against(server.url, [*args, "--json-schema", json.dumps(SCHEMA)], out)
    assert run.returncode == 0, (run.stderr[-2000:], out.read_text()[:2000])
    answered = rows(out)
    assert sorted(answered) == sorted(str(p) for p in folder.iterdir())
    for row in answered.values():
        assert row["error"] is None, row
        assert row["parsed"] == json.loads(row["text"])
        jsonschema.validate(row["parsed"], SCHEMA)


# --- faults over the real server --------------------------------------------------------


def test_a_wrong_api_key_is_one_line_before_any_prompt(qwen: Served, tmp_path: Path) -> None:
    server = qwen.server()
    folder = images(tmp_path / "images", 2)
    out = tmp_path / "out.jsonl"
    run = against(server.url, [*client_args(qwen, "image"), "-i", str(folder)], out, key="wrong")
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.splitlines() == [
        f"mmrun: error: the vLLM server at {server.url} refused the API key "
        "(pass the server's key with --api-key or VLLM_API_KEY)"
    ]
    assert not out.exists() or out.read_text() == ""


def test_a_refused_port_is_one_line(qwen: Served, tmp_path: Path) -> None:
    folder = images(tmp_path / "images", 2)
    url = f"http://127.0.0.1:{free_port()}"
    run = against(url, [*client_args(qwen, "image"), "-i", str(folder)], tmp_path / "o")
    assert run.returncode == 1, run.stderr[-3000:]
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"mmrun: error: cannot reach the vLLM server at {url} (")
    assert line.endswith("(start one with `mmrun serve -m KEY`, or check --server)")


def test_a_prompt_the_server_refuses_is_its_error_line(qwen: Served, tmp_path: Path) -> None:
    server = qwen.server()
    folder = images(tmp_path / "images", 3)
    manifest = tmp_path / "prompts.jsonl"
    lines = [
        {"id": "short", "image": str(folder / "img000.png")},
        {"id": "long", "image": str(folder / "img001.png"), "question": "describe " * 3000},
        {"id": "after", "image": str(folder / "img002.png")},
    ]
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    args = [*client_args(qwen, "image"), "--input", str(manifest), "--max-tokens", "4"]
    run = against(server.url, args, out)
    assert run.returncode == 3, run.stderr[-3000:]
    answered = rows(out)
    assert sorted(answered) == ["after", "long", "short"]
    assert answered["short"]["error"] is None and answered["after"]["error"] is None
    error = answered["long"]["error"]
    assert error["stage"] == "request"
    assert error["message"].startswith("the server answered 400: "), error
    assert "maximum context length is 2048 tokens" in error["message"], error


def test_a_server_killed_mid_batch_and_a_new_one_resume(qwen: Served, tmp_path: Path) -> None:
    """The last test of the module: it kills the module's server and starts its second."""
    server = qwen.server()
    folder = images(tmp_path / "many", 120, size=28)
    out = tmp_path / "out.jsonl"
    args = [*client_args(qwen, "image"), "-i", str(folder), "--max-tokens", "2"]
    args += ["--method", "generate", "--server", server.url, "--api-key", API_KEY]
    command = [sys.executable, "-m", "mmrun", *args, "-o", str(out)]
    run = subprocess.Popen(command, env=env(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and run.poll() is None:
        if out.exists() and len(out.read_text().splitlines()) >= 5:
            break
        time.sleep(0.05)
    server.kill_engine()
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 1, stderr[-3000:]
    last = stderr.splitlines()[-1]
    assert last.startswith(f"mmrun: error: the vLLM server at {server.url} stopped answering ("), (
        stderr[-3000:]
    )
    assert last.endswith("(start it again and rerun the same command: it resumes)")
    written = ids(out)  # every line whole: each parses
    assert 5 <= len(written) < 120 and len(set(written)) == len(written)
    server.stop()
    assert group_alive(server.pgid) == []

    again = qwen.server()
    assert again.url != server.url and qwen.starts == 2
    args[args.index(server.url)] = again.url
    rerun = subprocess.run(
        [sys.executable, "-m", "mmrun", *args, "-o", str(out)],
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert sorted(ids(out)) == sorted(str(p) for p in folder.iterdir())

    assert again.stop() == 0, again.log.read_text()[-3000:]
    assert group_alive(again.pgid) == []
