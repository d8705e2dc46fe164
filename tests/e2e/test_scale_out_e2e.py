"""Several engines: ``-dp 2`` on this host (two real vLLM CPU engines sharing the cores) and
``--backend ray`` on a local Ray cluster, on the tiny Qwen2.5-VL checkpoint.

Greedy texts are compared between runs with ``max_num_seqs=1``: every prompt then runs alone
in its engine, so no answer depends on which replica ran it or what else it ran with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mmrun.tiny import TinyCheckpoint
from tests.helpers.http import Route, ScriptedServer, reply
from tests.helpers.vllm_plugins import kill_engine_core

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def qwen(tiny_checkpoint: Callable[[str, str], TinyCheckpoint]) -> TinyCheckpoint:
    return tiny_checkpoint("image", "qwen2_5_vl")


def manifest(folder: Path, count: int, bad: str | None = None) -> Path:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        path = folder / f"img{i:03d}.png"
        Image.new("RGB", (56, 56), ((41 * i) % 256, (17 * i) % 256, 90)).save(path)
        lines.append(json.dumps({"id": f"p{i}", "image": str(path)}))
    if bad is not None:
        lines.append(json.dumps({"id": "bad", "image": bad}))
    path = folder / "manifest.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def command(qwen: TinyCheckpoint, *args: str, seqs: int = 1) -> list[str]:
    engine_args = {**qwen.engine_args, "enforce_eager": True, "max_num_seqs": seqs}
    flags = [f"--engine-arg={k}={json.dumps(v)}" for k, v in engine_args.items()]
    return [
        sys.executable,
        "-m",
        "mmrun",
        "image",
        "-m",
        "qwen2_5_vl",
        "--model",
        str(qwen.path),
        "-tp",
        "1",
        *flags,
        *args,
    ]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
# Each replica's engine core in the replica's own process (see tests/e2e/conftest.py): the
# same engine, without two more processes importing vLLM per replica.
IN_PROCESS = {**ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def rows(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_two_replicas_share_the_work_and_answer_as_one_engine(
    qwen: TinyCheckpoint, server: ScriptedServer, tmp_path: Path
) -> None:
    source = manifest(tmp_path / "data", 40)
    args = ["--max-tokens", "48", "--sampling-arg", "ignore_eos=true"]
    one = tmp_path / "one.jsonl"
    two = tmp_path / "two.jsonl"
    first = subprocess.run(
        command(qwen, "--input", str(source), *args, "-o", str(one)),
        env=IN_PROCESS,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert first.returncode == 0, first.stderr[-3000:]

    # The same images over HTTP, held back until both replicas are up: the first replica
    # ready then cannot finish the data set before the second asks (how long the second
    # takes to start is the machine's business), so each one's share is decided by asking,
    # not by start-up skew. A waiting replica holds only its window and one chunk
    # (mmrun.backends.replicas.CHUNK), with max_num_seqs=1 a few of the 40.
    both_ready = threading.Event()
    remote = held_back_manifest(source, server, both_ready, tmp_path / "remote.jsonl")
    proc, stderr = run_two_replicas(
        command(qwen, "--input", str(remote), *args, "-o", str(two), "-dp", "2"),
        IN_PROCESS,
        both_ready,
    )
    assert proc.returncode == 0, stderr[-3000:]
    alone, parallel = rows(one), rows(two)
    assert sorted(parallel) == sorted(alone) == sorted(f"p{i}" for i in range(40))
    assert len(two.read_text().splitlines()) == 40  # each id exactly once
    assert {r["replica"] for r in parallel.values()} == {0, 1}, "one replica did all the work"
    assert {k: r["text"] for k, r in parallel.items()} == {k: r["text"] for k, r in alone.items()}
    assert "engines: 2 (local)" in stderr


def held_back_manifest(
    source: Path, server: ScriptedServer, gate: threading.Event, out: Path
) -> Path:
    """``source``'s rows with their images served by ``server``, each held back until
    ``gate`` is set."""
    lines = []
    for line in source.read_text().splitlines():
        row = json.loads(line)
        path = Path(row["image"])
        server.routes[f"/{path.name}"] = held_back(path.read_bytes(), gate)
        lines.append(json.dumps({**row, "image": server.url(f"/{path.name}")}))
    out.write_text("\n".join(lines) + "\n")
    return out


def run_two_replicas(
    argv: list[str], env: dict[str, str], both_ready: threading.Event
) -> tuple[subprocess.Popen[str], str]:
    """Run a ``-dp 2`` command, setting ``both_ready`` once both replicas said they are
    ready (or the run ended); its process and stderr."""
    proc = subprocess.Popen(
        argv,
        env={**env, "MMRUN_DOWNLOAD_TIMEOUT": "900"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    err: list[str] = []
    reader = threading.Thread(target=watch_ready, args=(proc, err, both_ready), daemon=True)
    reader.start()
    try:
        proc.wait(timeout=1200)
        reader.join(timeout=30)
    finally:
        both_ready.set()
        if proc.poll() is None:
            proc.kill()
    return proc, "".join(err)


def held_back(body: bytes, gate: threading.Event) -> Route:
    """A route that answers ``body`` once ``gate`` is set."""

    def route(handler: Any) -> None:
        gate.wait(900)
        reply(handler, 200, body, headers={"Content-Type": "image/png"})

    return route


def watch_ready(proc: subprocess.Popen[str], err: list[str], both_ready: threading.Event) -> None:
    """Collect the run's stderr; set ``both_ready`` once both replicas said they are ready."""
    assert proc.stderr is not None
    ready: set[str] = set()
    for line in proc.stderr:
        err.append(line)
        for replica in ("0", "1"):
            if f"mmrun: replica {replica} (" in line and "ready after" in line:
                ready.add(replica)
        if len(ready) == 2:
            both_ready.set()


@pytest.mark.engine_processes  # it kills a replica's engine core process
def test_a_replica_whose_engine_dies_starts_it_again_and_nothing_is_lost(
    qwen: TinyCheckpoint, server: ScriptedServer, tmp_path: Path
) -> None:
    source = manifest(tmp_path / "data", 30)
    out = tmp_path / "out.jsonl"
    # The images held back until both replicas are up, so that neither can answer the whole
    # data set while the other starts: both take prompts, whatever the start-up skew.
    both_ready = threading.Event()
    remote = held_back_manifest(source, server, both_ready, tmp_path / "remote.jsonl")
    args = ["--input", str(remote), "--max-tokens", "24", "--sampling-arg", "ignore_eos=true"]
    # The first engine core to make its 3rd encoder call is killed, from inside, so that the
    # kill lands mid-run whatever the pace. Its replica starts its engine again; every prompt
    # is answered once, by whichever replica took it.
    env, record = kill_engine_core(ENV, tmp_path / "plugin", at=3, times=1)
    proc, err = run_two_replicas(
        command(qwen, *args, "-o", str(out), "-dp", "2", seqs=2), env, both_ready
    )
    assert proc.returncode == 0, err[-3000:]
    assert record.is_file(), "no engine core was killed"
    # The replica started its engine again and went on; no replica was lost.
    died = re.findall(
        r"mmrun: replica (\d): the engine died \(the engine core process was killed by "
        r"SIGKILL \(signal 9\)",
        err,
    )
    assert len(died) == 1, err[-3000:]
    victim = int(died[0])
    assert "stopped:" not in err
    assert "the engine was started again 1 time(s) after it died" in err
    final = rows(out)
    assert sorted(final) == sorted(f"p{i}" for i in range(30))
    assert len(out.read_text().splitlines()) == 30 and all(
        r["error"] is None for r in final.values()
    )
    other = 1 - victim
    assert any(r["replica"] == other for r in final.values()), f"replica {other} answered nothing"


@pytest.fixture
def ray_cluster() -> Any:
    """A local Ray cluster for the test, stopped afterwards (and bounded in time)."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    if ray is None:
        pytest.fail("Ray is not installed: make install installs mmrun[ray]")
    env = {**ENV, "RAY_USAGE_STATS_ENABLED": "0"}
    # Short: Ray's socket paths under it must stay within 107 bytes.
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    started = subprocess.run(
        [
            ray,
            "start",
            "--head",
            "--num-cpus",
            "2",
            "--disable-usage-stats",
            "--include-dashboard=false",
            "--temp-dir",
            temp,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        yield {**env, "RAY_ADDRESS": "auto"}
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(temp, ignore_errors=True)


def test_the_ray_backend_gives_the_local_backend_s_lines(
    qwen: TinyCheckpoint, tmp_path: Path, ray_cluster: dict[str, str]
) -> None:
    source = manifest(tmp_path / "data", 4, bad=str(tmp_path / "data" / "missing.png"))
    local, remote = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    # Sampled: each prompt's own seed must reach Ray's engine stage too.
    args = ["--input", str(source), "--max-tokens", "6", "--temperature", "1.0", "--seed", "3"]
    # Both engines with their core in-process: the local run's in mmrun's process, the Ray
    # engine stage's in its actor (mmrun forwards VLLM_* variables to the workers).
    here = subprocess.run(
        command(qwen, *args, "-o", str(local)),
        env=IN_PROCESS,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert here.returncode == 3, here.stderr[-3000:]
    started = time.monotonic()
    there = subprocess.run(
        command(qwen, *args, "-o", str(remote), "--backend", "ray"),
        env={**ray_cluster, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
        capture_output=True,
        text=True,
        timeout=1500,
    )
    print(f"--backend ray on a local cluster: {time.monotonic() - started:.0f} s")
    assert there.returncode == 3, there.stderr[-3000:]
    expected, got = rows(local), rows(remote)
    assert sorted(got) == sorted(expected)
    assert (
        got["bad"]["error"]["stage"] == "media" and "no such file" in got["bad"]["error"]["message"]
    )
    fields = (
        "text",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
        "question",
        "media",
        "error",
    )
    for key in (k for k in expected if k != "bad"):
        assert {f: got[key][f] for f in fields} == {f: expected[key][f] for f in fields}, key
