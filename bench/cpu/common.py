"""Shared helpers: timed child processes (wall time and peak RSS), the latency server, stats."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BIN = Path(PYTHON).parent
WORKERS = Path(__file__).resolve().parent / "workers"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def log(message: str) -> None:
    print(
        f"[bench {time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {message}",
        file=sys.stderr,
        flush=True,
    )


@dataclass
class Child:
    """One finished child process.

    result_s: seconds from the start to the first stdout line that opens a JSON object (the
    moment the result was printed), when stdout was read with ``stamp=True``.
    lines_at: with ``watch``, (seconds from the start, complete lines in the file) each time
    the watched file had more complete lines.
    started: ``time.monotonic()`` just before the process was spawned.
    """

    wall_s: float
    maxrss_mib: float
    returncode: int
    stdout: str
    stderr: str
    result_s: float | None = None
    lines_at: list[tuple[float, int]] | None = None
    started: float = 0.0


def run_child(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout_s: float = 900.0,
    stamp: bool = False,
    watch: Path | None = None,
) -> Child:
    """Run argv; return its wall time and peak RSS (``os.wait4``'s ru_maxrss, KiB on Linux).

    stderr goes to a temporary file; stdout too, or with ``stamp`` to a pipe read line by
    line in a thread, which notes when the result line arrives. With ``watch``, a thread
    reads that file every 5 ms and notes when each complete line arrived in it.
    """
    import tempfile
    import threading

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stamp else out,
            stderr=err,
            cwd=REPO,
        )
        lines: list[bytes] = []
        result_at: list[float] = []
        reader = None
        if stamp:
            assert proc.stdout is not None
            pipe = proc.stdout

            def read() -> None:
                for line in pipe:
                    if not result_at and line.lstrip().startswith(b"{"):
                        result_at.append(time.perf_counter() - start)
                    lines.append(line)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
        lines_at: list[tuple[float, int]] = []
        exited = threading.Event()
        watcher = None
        if watch is not None:
            watched = watch

            def follow() -> None:
                count, offset = 0, 0
                while True:
                    last = exited.is_set()
                    try:
                        with open(watched, "rb") as f:
                            f.seek(offset)
                            data = f.read()
                    except FileNotFoundError:
                        data = b""
                    if data:
                        complete = data.count(b"\n")
                        if complete:
                            offset += data.rindex(b"\n") + 1
                            count += complete
                            lines_at.append((time.perf_counter() - start, count))
                    if last:
                        return
                    exited.wait(0.005)

            watcher = threading.Thread(target=follow, daemon=True)
            watcher.start()
        deadline = start + timeout_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - start
        exited.set()
        if watcher is not None:
            watcher.join(30)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if reader is not None:
            reader.join(30)
            stdout = b"".join(lines)
        else:
            out.seek(0)
            stdout = out.read()
        err.seek(0)
        return Child(
            wall,
            usage.ru_maxrss / 1024,
            proc.returncode,
            stdout.decode(errors="replace"),
            err.read().decode(errors="replace"),
            result_at[0] if result_at else None,
            lines_at if watch is not None else None,
            started,
        )


def bench_env(**extra: str) -> dict[str, str]:
    """The environment of every child: offline, quiet vLLM logs, no inherited mmrun settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMRUN_")}
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_LOGGING_LEVEL": "ERROR",
            "TOKENIZERS_PARALLELISM": "false",
            "TRANSFORMERS_VERBOSITY": "error",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def last_json_line(text: str) -> dict[str, Any]:
    """The last line of ``text`` that parses as a JSON object (workers print one)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    raise ValueError("no JSON object in the output:\n" + text[-2000:])


class LatencyServer:
    """``bench/cpu/server.py`` in its own process: static files, a fixed delay per request."""

    def __init__(self, folder: Path, latency_s: float) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, str(Path(__file__).with_name("server.py")), str(folder), str(latency_s)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port = int(self.proc.stdout.readline().strip())
        self.url = f"http://127.0.0.1:{port}"
        self.latency_s = latency_s

    def _get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return dict(json.load(response))

    def count(self) -> int:
        """Media requests served since the last reset."""
        return int(self._get("/_stats")["requests"])

    def reset(self) -> None:
        self._get("/_reset")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import importlib.metadata

    version = None
    for dist in ("vllm-cpu", "vllm"):
        try:
            version = f"{dist} {importlib.metadata.version(dist)}"
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    torch_version = None
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        torch_version = importlib.metadata.version("torch")
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "mem_gib": mem_gib,
        "python": platform.python_version(),
        "vllm": version,
        "torch": torch_version,
    }


def mmrun_source() -> dict[str, Any]:
    """Which mmrun the run measures: the commit, whether mmrun/ differs from it, and a hash of
    mmrun/'s files (compared at the end: a change during the run would mix two versions)."""
    import hashlib

    digest = hashlib.sha256()
    files = {}
    for path in sorted((REPO / "mmrun").rglob("*.py")):
        name, data = str(path.relative_to(REPO)), path.read_bytes()
        digest.update(name.encode() + b"\0" + data)
        files[name] = hashlib.sha256(data).hexdigest()[:16]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--", "mmrun")
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "mmrun_modified": bool(status) if status is not None else None,
        "sha256": digest.hexdigest(),
        "files": files,
    }
