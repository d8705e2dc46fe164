"""How a real ``python -m mmrun`` process ends. Ctrl-C: exit code 130, one line on stderr, and
no process of vLLM's left behind. A download that fails while the engine starts stops the
start. A finished run exits as soon as its results are out, leaving neither processes nor
vLLM's socket files. An engine argument that the real vLLM rejects ends as a usage error.

The download case needs no engine and runs with the unit tests' speed; the others start the
real vLLM engine on a tiny offline Qwen2.5-VL checkpoint (marked e2e).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from mmrun.tiny import TinyCheckpoint
from tests.tiny import builders

# About vLLM's processes (the engine core must be one): see tests/e2e/conftest.py.
pytestmark = pytest.mark.engine_processes

KEY = ("image", "qwen2_5_vl")
HAS_TINY = KEY in builders()
# For the runs that generate: torch.compile adds tens of seconds to an engine start on these
# CPUs, and what is tested here is how mmrun's process ends, not compiled kernels. The tests
# that stop the engine during its start keep vLLM's default start, as a user's.
EAGER = ("--engine-arg", "enforce_eager=true")
# The engine core in mmrun's process (see tests/e2e/conftest.py), for a run that is not about
# vLLM's processes.
IN_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


class Tree:
    """Every process that descends from one process while it runs, by (pid, start time), so
    that a process reparented to init when its parent dies is still counted; with every
    title it was seen under (vLLM retitles its processes: VLLM::EngineCore, VLLM::Worker)."""

    def __init__(self, root: int) -> None:
        self.root = psutil.Process(root)
        self.seen: dict[tuple[int, float], set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set() and self.root.is_running():
            with contextlib.suppress(psutil.Error):  # a process ended while being listed
                for child in self.root.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        # name() is cut to 15 characters; the command line carries the title.
                        title = " ".join(child.cmdline()) or child.name()
                        key = (child.pid, child.create_time())
                        self.seen.setdefault(key, set()).add(title[:80])
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def has(self, fragment: str) -> bool:
        return any(fragment in title for titles in self.seen.values() for title in titles)

    def alive(self) -> list[str]:
        left = []
        for (pid, started), titles in self.seen.items():
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                if process.create_time() == started and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(f"{pid} {sorted(titles)}")
        return left


def as_in_a_terminal() -> None:
    """In the child, before mmrun starts: SIGINT as a terminal's Ctrl-C finds it. A runner
    started in the background (``make test &``, a CI step under ``nohup``) passes SIGINT on
    ignored, and an ignored SIGINT stays ignored in Python: a dry run (which installs no
    handler of its own) then ran on until its 30 s download ended."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def interrupt(
    proc: subprocess.Popen[str], tree: Tree | None, timeout: float, err_file: Path | None = None
) -> tuple[str, str]:
    """SIGINT, then the process's output; it must end within ``timeout`` seconds. If it does
    not, SIGABRT: started with PYTHONFAULTHANDLER=1, the process writes every thread's stack to
    its stderr (``err_file`` where stderr went to a file), and the failure shows them."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if err_file is not None:
            err = err_file.read_text(errors="replace")
        pytest.fail(
            f"mmrun did not end within {timeout} s of SIGINT; stderr: {(err or '')[-6000:]}"
        )
    finally:
        if tree is not None:
            tree.stop()
    assert time.monotonic() - sent < timeout
    return out, err


def test_ctrl_c_during_a_slow_download(media_server: Any, isolated_cache: Path) -> None:
    media_server.latency_s = 30  # the server answers after 30 s
    env = {**os.environ, "MMRUN_DOWNLOAD_TIMEOUT": "60"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mmrun",
            "image",
            "-m",
            "mistral3",
            "-i",
            f"{media_server.url}/blue.png",
            "--dry-run",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=as_in_a_terminal,
    )
    try:
        wait_for(lambda: bool(media_server.requests), 30, "the download to start")
        time.sleep(0.3)
        out, err = interrupt(proc, None, timeout=15)  # not the 30 s the download would take
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert err == "mmrun: interrupted\n"
    assert out == ""
    media = isolated_cache / "media"
    trusted = [p for p in media.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert trusted == []


# --- the real engine -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tiny_checkpoint: Callable[[str, str], TinyCheckpoint]) -> TinyCheckpoint:
    if not HAS_TINY:
        pytest.skip("mmrun.tiny has no qwen2_5_vl builder")
    return tiny_checkpoint(*KEY)


@pytest.fixture
def image(tmp_path: Path) -> Path:
    from PIL import Image

    path = tmp_path / "green.png"
    Image.new("RGB", (64, 48), (10, 200, 30)).save(path)
    return path


@pytest.fixture
def run_mmrun(
    tmp_path: Path, checkpoint: TinyCheckpoint, image: Path
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts ``mmrun image -m qwen2_5_vl`` on the tiny checkpoint; kills what is left at the
    end (a test that fails must not leave an engine running)."""
    started: list[subprocess.Popen[str]] = []

    def start(
        *extra: str, media: str = str(image), drop: tuple[str, ...] = (), **env_vars: str
    ) -> subprocess.Popen[str]:
        engine_args = [f"--engine-arg={k}={v}" for k, v in checkpoint.engine_args.items()]
        env = {
            **{k: v for k, v in os.environ.items() if k not in drop},
            "HF_HUB_OFFLINE": "1",
            "PYTHONFAULTHANDLER": "1",  # stacks on SIGABRT: see interrupt
            **env_vars,
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mmrun",
                "image",
                "-m",
                KEY[1],
                "--model",
                str(checkpoint.path),
                "-i",
                media,
                *engine_args,
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=as_in_a_terminal,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate()


def check_interrupted(proc: subprocess.Popen[str], out: str, err: str, tree: Tree) -> None:
    assert proc.returncode == 130, err[-3000:]
    assert err == "mmrun: interrupted\n"  # --quiet: nothing of vLLM's, and mmrun's one line
    assert out == ""
    assert tree.has("EngineCore"), tree.seen  # the engine had really started
    # vLLM's processes (engine core, its workers) end with mmrun, not minutes later.
    deadline = time.monotonic() + 10
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert tree.alive() == []


@pytest.mark.e2e
def test_ctrl_c_while_the_engine_starts(run_mmrun: Callable[..., subprocess.Popen[str]]) -> None:
    """vLLM swallows a KeyboardInterrupt during its start-up handshake and would go on (or
    wait up to 10 minutes): mmrun must end anyway, and take the engine down with it."""
    proc = run_mmrun("--quiet")
    tree = Tree(proc.pid)
    wait_for(lambda: tree.has("EngineCore") or proc.poll() is not None, 300, "the engine core")
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    out, err = interrupt(proc, tree, timeout=60)
    check_interrupted(proc, out, err, tree)


@pytest.mark.e2e
def test_ctrl_c_during_a_batch_keeps_the_finished_lines(
    run_mmrun: Callable[..., subprocess.Popen[str]], tmp_path: Path, image: Path
) -> None:
    """A batch writes each prompt's line as it finishes: once the first is on disk, generation
    is under way for the others; Ctrl-C then ends the run (130) with every finished line whole,
    and a second run does the rest."""
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(8):
        shutil.copy(image, folder / f"img{i}.png")
    out_file = tmp_path / "out.jsonl"
    longer = (
        "--max-tokens",
        "400",
        "--sampling-arg",
        "ignore_eos=true",
        "-o",
        str(out_file),
        *EAGER,
    )
    proc = run_mmrun("--quiet", *longer, media=str(folder))
    tree = Tree(proc.pid)
    wait_for(
        lambda: (
            (out_file.exists() and out_file.read_bytes().count(b"\n") >= 1)
            or proc.poll() is not None
        ),
        300,
        "the first result line",
    )
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    out, err = interrupt(proc, tree, timeout=60)
    check_interrupted(proc, out, err, tree)
    done = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert 1 <= len(done) < 8 and all(row["error"] is None for row in done)
    # The resume is mmrun's (its output file), whatever the engine's process layout: the engine
    # core in mmrun's process spares this start vLLM's two spawned processes.
    again = run_mmrun("--quiet", *longer, media=str(folder), **IN_PROCESS)
    _, err = again.communicate(timeout=600)
    assert again.returncode == 0, err[-3000:]
    final = [json.loads(line)["id"] for line in out_file.read_text().splitlines()]
    assert sorted(final) == sorted(str(p) for p in folder.iterdir())  # each id exactly once


@pytest.mark.e2e
def test_engine_argument_that_vllm_rejects(run_mmrun: Callable[..., subprocess.Popen[str]]) -> None:
    proc = run_mmrun("--quiet", "--engine-arg", "not_a_field=1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err[-3000:]
    assert out == "" and "Traceback" not in err
    # Found in the installed vLLM's EngineArgs before the engine starts.
    assert err.count("\n") == 1 and err.startswith("mmrun: error: --engine-arg not_a_field: ")
    assert "has no such argument" in err


@pytest.mark.e2e
def test_a_failed_start_names_the_reason(run_mmrun: Callable[..., subprocess.Popen[str]]) -> None:
    """vLLM's CPU worker refuses to start when less memory is free than the share it was
    given; the process that started the engine hears only "Engine core initialization
    failed. See root cause above." (and with --quiet nothing is above)."""
    proc = run_mmrun(
        "--quiet", "--engine-arg", "gpu_memory_utilization=0.999", drop=("VLLM_CPU_KVCACHE_SPACE",)
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err[-3000:]
    assert out == "" and err.count("\n") == 1, err[-3000:]
    assert err.startswith(
        "mmrun: error: not enough free memory for the engine: ValueError: Available memory on node"
    ), err
    assert "gpu_memory_utilization" in err


def gone_within(tree: Tree, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while tree.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    return tree.alive()


@pytest.mark.e2e
@pytest.mark.alone
def test_a_download_that_fails_while_the_engine_starts_stops_it(
    run_mmrun: Callable[..., subprocess.Popen[str]], media_server: Any
) -> None:
    media_server.hold.clear()  # the request waits until the engine core is up
    proc = run_mmrun("--quiet", media=f"{media_server.url}/missing.png")
    tree = Tree(proc.pid)
    wait_for(lambda: tree.has("EngineCore") or proc.poll() is not None, 300, "the engine core")
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    released = time.monotonic()
    media_server.hold.set()  # now it fails: 404
    out, err = proc.communicate(timeout=120)
    ended_after = time.monotonic() - released
    tree.stop()
    assert proc.returncode == 1, err[-3000:]
    assert out == "" and err.count("\n") == 1, err[-3000:]
    assert err.startswith("mmrun: error: download failed: HTTP 404") and "missing.png" in err
    # Not after the engine start (its rest takes ~15 s here); the abort itself takes ~1 s.
    assert ended_after < 8, f"the run ended {ended_after:.1f} s after the download failed"
    assert gone_within(tree, 10) == []


@pytest.mark.e2e
@pytest.mark.alone
def test_a_finished_run_exits_at_once_and_leaves_nothing_behind(
    run_mmrun: Callable[..., subprocess.Popen[str]], request: pytest.FixtureRequest
) -> None:
    """vLLM's own stop takes ~4.5 s and the interpreter's teardown ~2 s more after the results
    are printed (CPU engine); mmrun kills the engine and skips the teardown. vLLM leaves its
    ZMQ socket files in the temporary folder; mmrun gives them a folder that it removes."""
    # Short: vLLM's socket paths (<temporary folder>/<uuid>) must fit in 107 bytes.
    temp = Path(tempfile.mkdtemp(prefix="mm-e2e-"))
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    proc = run_mmrun("--json", "--max-tokens", "4", *EAGER, TMPDIR=str(temp))
    tree = Tree(proc.pid)
    assert proc.stdout is not None
    first = os.read(proc.stdout.fileno(), 65536)  # blocks until the results come out
    printed = time.monotonic()
    rest, err = proc.communicate(timeout=120)
    exit_after = time.monotonic() - printed
    tree.stop()
    assert proc.returncode == 0, err[-3000:]
    assert len(json.loads(first.decode() + rest)["outputs"]) == 1
    assert tree.has("EngineCore"), tree.seen
    assert exit_after < 2.5, f"mmrun exited {exit_after:.1f} s after printing its results"
    assert gone_within(tree, 2) == []
    left = sorted(p.name for p in temp.iterdir())
    assert not [p for p in temp.rglob("*") if p.is_socket()], left
    assert not [name for name in left if name.startswith("mmrun-")], left
