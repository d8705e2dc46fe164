"""``mmrun serve`` starts vLLM's real OpenAI-compatible server on 127.0.0.1 for the tiny
Qwen2.5-VL checkpoint; ``mmrun image --server URL`` runs against it answer as mmrun's own
engine does (greedy texts and prompt token counts, for --method chat and generate), and the
server stops with its whole process group on SIGTERM.

Both sides run with ``max_num_seqs=1``: every prompt alone in its engine, so that no greedy
answer depends on what ran beside it.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from mmrun.tiny import TinyCheckpoint
from tests.e2e.cli_worker import CliWorker

pytestmark = [pytest.mark.e2e, pytest.mark.engine_processes]

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
READY_TIMEOUT_S = 600


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


def group_alive(pgid: int) -> list[int]:
    alive = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process.pid)
        except (OSError, psutil.Error):
            continue
    return alive


def test_server_runs_answer_as_the_local_engine(
    tiny_checkpoint: Callable[[str, str], TinyCheckpoint],
    cli_worker: CliWorker,
    tmp_path: Path,
) -> None:
    from PIL import Image

    qwen = tiny_checkpoint("image", "qwen2_5_vl")
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(4):
        Image.new("RGB", (56 + 28 * i, 56), ((60 * i) % 256, 90, 200 - 40 * i)).save(
            folder / f"img{i}.png"
        )
    engine_args = {**qwen.engine_args, "enforce_eager": True, "max_num_seqs": 1}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    model = ["-m", "qwen2_5_vl", "--model", str(qwen.path), *flags]
    port = free_port()
    log = tmp_path / "serve.err"
    with log.open("w") as err:
        serve = subprocess.Popen(
            [sys.executable, "-m", "mmrun", "serve", *model, "--port", str(port)],
            env={**ENV, "MMRUN_STATE_DIR": str(tmp_path / "state")},
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        url = first_line(serve, READY_TIMEOUT_S)
        assert url == f"http://127.0.0.1:{port}", log.read_text()[-3000:]
        server_groups = {os.getpgid(c.pid) for c in psutil.Process(serve.pid).children()}
        assert len(server_groups) == 1 and serve.pid not in server_groups
        args = ["image", *model, "-i", str(folder), "--max-tokens", "12"]
        results = {}
        for method in ("chat", "generate"):
            out = tmp_path / f"server-{method}.jsonl"
            served = ["--server", url, "-o"]
            started = time.monotonic()
            run = subprocess.run(
                [sys.executable, "-m", "mmrun", *args, "--method", method, *served, str(out)],
                env=ENV,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert run.returncode == 0, run.stderr[-3000:]
            assert time.monotonic() - started < 120  # no engine start
            results[method] = rows(out)
    finally:
        serve.send_signal(signal.SIGTERM)
        code = serve.wait(timeout=120)
    assert code == 0, log.read_text()[-3000:]
    (pgid,) = server_groups
    assert group_alive(pgid) == []

    try:
        for method in ("chat", "generate"):
            out = tmp_path / f"local-{method}.jsonl"
            run = cli_worker.run(
                [*args, "--method", method, "-o", str(out)], {"HF_HUB_OFFLINE": "1"}
            )
            assert run.returncode == 0, run.stderr[-3000:]
            local, served = rows(out), results[method]
            assert sorted(served) == sorted(local) and len(local) == 4
            for key, row in local.items():
                assert row["error"] is None and served[key]["error"] is None
                assert served[key]["text"] == row["text"], (method, key)
                assert served[key]["prompt_tokens"] == row["prompt_tokens"], (method, key)
                assert served[key]["completion_tokens"] == row["completion_tokens"], (method, key)
    finally:
        cli_worker.release()
