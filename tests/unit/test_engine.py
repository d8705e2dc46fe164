"""mmrun.engine's process hygiene that needs no engine: where vLLM's socket files go, and
what happens when the engine core process dies."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mmrun import engine
from mmrun.engine import environment
from mmrun.engine import handle as engine_handle
from mmrun.errors import EngineError


@pytest.fixture
def temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv(engine.RPC_DIR_ENV, raising=False)
    folder = Path(tempfile.mkdtemp(prefix="mm-"))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    engine.remove_temporary_files()
    os.environ.pop(engine.RPC_DIR_ENV, None)
    folder.rmdir()  # fails if anything was left in it


def test_vllm_sockets_go_to_a_folder_that_is_removed(temp: Path) -> None:
    environment.use_private_rpc_dir()
    private = Path(os.environ[engine.RPC_DIR_ENV])
    assert private.parent == temp and private.is_dir()
    environment.use_private_rpc_dir()  # one folder per process
    assert os.environ[engine.RPC_DIR_ENV] == str(private)
    (private / "5036b19a-b8be-4c28-b414-aee29ea15eaf").touch()  # what vLLM leaves
    engine.remove_temporary_files()
    assert not private.exists()


def test_the_users_folder_is_kept(temp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(engine.RPC_DIR_ENV, str(temp))
    environment.use_private_rpc_dir()
    assert os.environ[engine.RPC_DIR_ENV] == str(temp) and list(temp.iterdir()) == []


def test_no_private_folder_where_socket_paths_would_be_too_long(
    temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = temp / (
        "d" * 50
    )  # <deep>/<uuid> fits in 107 bytes, <deep>/mmrun-xxxxxxxx/<uuid> does not
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    environment.use_private_rpc_dir()
    assert engine.RPC_DIR_ENV not in os.environ  # vLLM's own default, which fits
    assert list(deep.iterdir()) == []
    deep.rmdir()


# What vLLM 0.32 logged when its CPU worker refused to start (abridged; from a real run with
# gpu_memory_utilization 0.92 on a machine with less free memory than that).
FAILED_START_LOG = """\
(MainProcess pid=4787) INFO 11-30 02:21:33 [model.py:733] Resolved architecture: Qwen2_5_VLForConditionalGeneration
(VllmWorker-0 pid=3244) ERROR 11-30 02:06:12 [multiproc_executor.py:953] WorkerProc failed to start.
(VllmWorker-0 pid=3244) ERROR 11-30 02:06:12 [multiproc_executor.py:953] Traceback (most recent call last):
(VllmWorker-0 pid=3244) ERROR 11-30 02:06:12 [multiproc_executor.py:953]   File "/x/vllm/v1/worker/cpu_worker.py", line 83, in __init__
(VllmWorker-0 pid=3244) ERROR 11-30 02:06:12 [multiproc_executor.py:953]     raise ValueError(
(VllmWorker-0 pid=3244) ERROR 11-30 02:06:12 [multiproc_executor.py:953] ValueError: Available memory on node 0 (18.44/20.21 GiB) on startup is less than desired CPU memory utilization (0.92, 18.6 GiB). On the CPU backend, the `--gpu-memory-utilization` flag controls the fraction of CPU memory reserved (despite its name).
(EngineCore pid=3230) ERROR 11-30 02:06:14 [core.py:1510] EngineCore failed to start.
(EngineCore pid=3230) ERROR 11-30 02:06:14 [core.py:1510] Traceback (most recent call last):
(EngineCore pid=3230) ERROR 11-30 02:06:14 [core.py:1510]     raise e from None
(EngineCore pid=3230) ERROR 11-30 02:06:14 [core.py:1510] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
"""


def test_the_root_cause_is_the_failing_process_s_exception() -> None:
    from mmrun.engine.log_stream import root_cause

    assert root_cause(FAILED_START_LOG) == (
        "ValueError: Available memory on node 0 (18.44/20.21 GiB) on startup is less than "
        "desired CPU memory utilization (0.92, 18.6 GiB). On the CPU backend, the "
        "`--gpu-memory-utilization` flag controls the fraction of CPU memory reserved (despite "
        "its name)."
    )
    wrappers_only = "\n".join(FAILED_START_LOG.splitlines()[-4:])
    assert root_cause(wrappers_only) is None
    assert (
        root_cause("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        == "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert root_cause("INFO all is well\n") is None
    # With -v the log also holds warnings with tracebacks that vLLM survived.
    survived = (
        "(EngineCore pid=3230) WARNING 11-30 02:06:11 [x.py:1] Falling back\n"
        "(EngineCore pid=3230) WARNING 11-30 02:06:11 [x.py:1] ImportError: no flashinfer\n"
    )
    assert root_cause(survived + FAILED_START_LOG).startswith("ValueError: Available memory")
    # vLLM 0.26 on CUDA: the process prefix is not part of the logged line.
    assert root_cause(
        "ERROR 11-30 03:47:37 [core.py:1330] EngineCore failed to start.\r\n"
        "ERROR 11-30 03:47:37 [core.py:1330] ValueError: Free memory on device cuda:0 "
        "(139.29/139.8 GiB) on startup is less than desired GPU memory utilization\r\n"
    ) == (
        "ValueError: Free memory on device cuda:0 (139.29/139.8 GiB) on startup is less "
        "than desired GPU memory utilization"
    )


def test_the_log_stream_copies_to_the_file_it_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mmrun.engine import log_stream

    stream = log_stream._Tee()
    stream.write("before\n")  # no file named: stderr only
    log = tmp_path / "engine.log"
    monkeypatch.setenv(log_stream.ENV, str(log))
    stream.write("ValueError: it broke\n")
    assert log.read_text() == "ValueError: it broke\n"
    assert capsys.readouterr().err == "before\nValueError: it broke\n"


class _SyncClient:
    """The parts of vLLM 0.32's SyncMPClient and LLMEngine that ``Engine.poll`` goes through:
    ``step()`` waits on the output queue, and raises what is put in it if it is an error."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self.outputs_queue: queue.Queue[Any] = queue.Queue()
        manager = types.SimpleNamespace(processes=[process])
        self.resources = types.SimpleNamespace(engine_manager=manager)

    def step(self) -> list[Any]:
        item = self.outputs_queue.get()
        if isinstance(item, Exception):
            raise item
        return [item]


def _sleep_forever() -> None:
    time.sleep(600)


def test_poll_raises_when_the_engine_core_process_dies() -> None:
    """vLLM's own monitor stops its output thread without waking the waiting ``step()``; a
    replica whose engine core was killed then waited for good. mmrun's watcher wakes it."""
    process = multiprocessing.get_context("spawn").Process(target=_sleep_forever, daemon=True)
    process.start()
    client = _SyncClient(process)
    llm = types.SimpleNamespace(
        enqueue=None, llm_engine=types.SimpleNamespace(engine_core=client, step=client.step)
    )
    handle = engine.Engine(llm)
    result: list[BaseException] = []

    def poll() -> None:
        try:
            handle.poll()
        except BaseException as exc:
            result.append(exc)

    waiter = threading.Thread(target=poll, daemon=True)
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()  # waiting on the queue, as step() does
    os.kill(process.pid, signal.SIGKILL)
    waiter.join(10)
    assert not waiter.is_alive(), "poll() still waits after the engine core died"
    assert isinstance(result[0], EngineError), result


def test_a_closed_engine_is_not_reported_dead() -> None:
    process = multiprocessing.get_context("spawn").Process(target=_sleep_forever, daemon=True)
    process.start()
    client = _SyncClient(process)
    llm = types.SimpleNamespace(
        enqueue=None,
        llm_engine=types.SimpleNamespace(engine_core=client, step=client.step),
    )
    handle = engine.Engine(llm)
    handle.close()  # kills the engine's processes, as mmrun's shutdown does
    process.join(10)
    time.sleep(0.2)
    assert client.outputs_queue.empty()


def test_frontend_threads_reach_vllms_multimodal_processor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM runs each request's processor with OMP_NUM_THREADS torch threads (1 when unset),
    not with torch's setting: on a GPU build mmrun sets the variable in its own process."""
    import torch

    from mmrun import support

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(support, "vllm_device", lambda: "gpu")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    before = torch.get_num_threads()
    try:
        threads = engine.use_frontend_threads(engines_on_host=2)
        assert threads == 8
        # What vllm.utils.torch_utils.set_default_torch_num_threads() reads (0.26 to 0.32).
        assert os.environ["OMP_NUM_THREADS"] == "8" and torch.get_num_threads() == 8
    finally:
        torch.set_num_threads(before)
        os.environ.pop("OMP_NUM_THREADS", None)


def test_frontend_threads_leave_a_users_setting_and_the_cpu_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mmrun import support

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setattr(support, "vllm_device", lambda: "gpu")
    assert engine.use_frontend_threads() is None and os.environ["OMP_NUM_THREADS"] == "3"
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(support, "vllm_device", lambda: "cpu")
    assert engine.use_frontend_threads() is None and "OMP_NUM_THREADS" not in os.environ


# Run in a fresh interpreter: a process that has already run torch on several threads (an
# earlier test) makes every child it forks hang, with or without mmrun's care.
_FORKED_ENGINE_CORE = r"""
import json, multiprocessing, os, sys, types
import torch
from mmrun import engine, support
from mmrun.engine import handle

support.vllm_device = lambda: "gpu"
os.sched_getaffinity = lambda pid: set(range(4))
handle.use_private_rpc_dir = lambda: None
handle.use_engine_log = lambda: None


def processor_work():
    # As vLLM runs its multimodal processor: vllm.utils.torch_utils.
    # set_default_torch_num_threads() gives torch OMP_NUM_THREADS threads, 1 when unset.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    audio = torch.rand(8_000_000)  # vLLM's Granite Speech dummy: 8,000,000 samples
    torch.nn.utils.rnn.pad_sequence([audio], batch_first=True)


def engine_core(conn):
    seen = (os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads())
    processor_work()  # the engine core's dummy inputs, before it reports ready
    conn.send(seen)


class FakeLLM:
    def __init__(self, **kwargs):
        processor_work()  # the processor built in the frontend, before the fork
        ours, theirs = multiprocessing.Pipe()
        core = multiprocessing.get_context("fork").Process(target=engine_core, args=(theirs,))
        core.start()
        if not ours.poll(30):
            core.kill()
            print("the engine core hung")
            sys.exit(3)
        self.child = ours.recv()
        core.join()


handle.import_vllm = lambda: types.SimpleNamespace(LLM=FakeLLM)
llm = engine.start({"model": "m"})
parent = (os.environ["OMP_NUM_THREADS"], torch.get_num_threads())
print(json.dumps({"child": llm.child, "parent": parent}))
"""


def test_a_forked_engine_core_gets_the_threads_and_does_not_hang(tmp_path: Path) -> None:
    """The engine core's process gets mmrun's thread count (on the H200 an engine core left
    with torch's default, every core, kept the host's CPUs busy, and two engines ran no faster
    than one), and does not hang: GNU OpenMP does not survive a fork, and on the H200 Granite
    Speech's engine core hung for good in its first parallel region, because vLLM had run one
    on mmrun's threads in the frontend before forking it (docs/performance.md). Real torch, a
    real fork, vLLM's two processor steps as torch work."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", _FORKED_ENGINE_CORE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["child"] == ["4", 4]  # 4 cores, one engine: 4 threads, at most 8
    assert seen["parent"] == ["4", 4]  # and back in this process for the requests


def test_a_users_own_threads_are_kept_and_vllm_starts_on_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user's OMP_NUM_THREADS above 1 on a GPU build: mmrun keeps it, and vLLM's start in
    this process still runs on one thread (what makes a forked engine core safe, above)."""
    import torch

    from mmrun import support

    seen: dict[str, Any] = {}

    class FakeLLM:
        def __init__(self, **kwargs: Any) -> None:
            seen["during"] = (os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads())

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setattr(support, "vllm_device", lambda: "gpu")
    monkeypatch.setattr(engine_handle, "import_vllm", lambda: types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(engine_handle, "use_private_rpc_dir", lambda: None)
    monkeypatch.setattr(engine_handle, "use_engine_log", lambda: None)
    before = torch.get_num_threads()
    try:
        engine.start({"model": "m"})
        assert seen["during"] == ("1", 1)
        assert os.environ["OMP_NUM_THREADS"] == "3" and torch.get_num_threads() == 3
        # vLLM told to spawn its processes: they inherit the environment, not OpenMP's state,
        # so the environment keeps the threads during the start
        monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        engine.start({"model": "m"})
        assert seen["during"][0] == "3"
    finally:
        torch.set_num_threads(before)


def test_the_engine_starts_with_this_process_s_objects_frozen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM forks its engine core from this process on a GPU: the objects alive then are out
    of the collector's reach while ``vllm.LLM()`` runs (the child inherits them frozen), its
    garbage is collected first, not frozen, and everything is collectable again afterwards."""
    import gc
    import weakref

    class Node:
        pass

    seen: dict[str, Any] = {}
    kept = Node()
    cycle = Node()
    cycle.me = cycle  # type: ignore[attr-defined]
    dead = weakref.ref(cycle)
    del cycle

    class FakeLLM:
        def __init__(self, **kwargs: Any) -> None:
            seen["frozen"] = gc.get_freeze_count()
            seen["kept_walked"] = any(o is kept for o in gc.get_objects())
            seen["garbage_gone"] = dead() is None

    monkeypatch.setattr(engine_handle, "import_vllm", lambda: types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(engine_handle, "use_private_rpc_dir", lambda: None)
    monkeypatch.setattr(engine_handle, "use_engine_log", lambda: None)
    monkeypatch.setattr(engine_handle, "use_frontend_threads", lambda engines_on_host=1: None)
    assert gc.get_freeze_count() == 0
    engine.start({"model": "m"})
    assert seen["frozen"] > 0
    assert seen["kept_walked"] is False  # in no generation the collector walks
    assert seen["garbage_gone"] is True
    assert gc.get_freeze_count() == 0  # back in the collector's reach
    assert any(o is kept for o in gc.get_objects())


def test_a_failed_start_leaves_nothing_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    class FailingLLM:
        def __init__(self, **kwargs: Any) -> None:
            raise RuntimeError("boom")

    monkeypatch.setattr(engine_handle, "import_vllm", lambda: types.SimpleNamespace(LLM=FailingLLM))
    monkeypatch.setattr(engine_handle, "use_private_rpc_dir", lambda: None)
    monkeypatch.setattr(engine_handle, "use_engine_log", lambda: None)
    monkeypatch.setattr(engine_handle, "use_frontend_threads", lambda engines_on_host=1: None)
    with pytest.raises(Exception, match="boom"):
        engine.start({"model": "m"})
    assert gc.get_freeze_count() == 0


def test_the_engine_starts_with_the_plans_environment_and_the_users_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the plan chose for the engine's environment (vLLM's model runner, on a GPU) is
    set before vLLM starts; a variable the user set keeps its value."""
    seen: list[tuple[str | None, str | None]] = []

    class FakeLLM:
        def __init__(self, **kwargs: Any) -> None:
            seen.append((os.environ.get("MMRUN_TEST_CHOSEN"), os.environ.get("MMRUN_TEST_USERS")))

    monkeypatch.setattr(engine_handle, "import_vllm", lambda: types.SimpleNamespace(LLM=FakeLLM))
    monkeypatch.setattr(engine_handle, "use_private_rpc_dir", lambda: None)
    monkeypatch.setattr(engine_handle, "use_engine_log", lambda: None)
    monkeypatch.setattr(engine_handle, "use_frontend_threads", lambda engines_on_host=1: None)
    monkeypatch.delenv("MMRUN_TEST_CHOSEN", raising=False)
    monkeypatch.setenv("MMRUN_TEST_USERS", "mine")
    env = (("MMRUN_TEST_CHOSEN", "0"), ("MMRUN_TEST_USERS", "0"))
    engine.start({"model": "m"}, env=env)
    assert seen == [("0", "mine")]


class _Info:
    """vLLM's processing info: ``get_hf_processor()`` loads the model's Hugging Face
    processor (here: records which thread asked, and when)."""

    def __init__(self, loads: list[tuple[int, float]]) -> None:
        self.loads = loads

    def get_hf_processor(self) -> object:
        self.loads.append((threading.get_ident(), time.monotonic()))
        return object()


def _starting_vllm(renderer: Any, seen: dict[str, Any], wait_s: float = 10) -> type:
    """A ``vllm.LLM`` shaped as vLLM's: its ``LLMEngine.__init__`` builds the renderer, starts
    an engine core process and waits (here until the renderer's processor was loaded, at most
    ``wait_s``), as vLLM's does until its engine core is ready."""

    class LLMEngine:
        def __init__(self) -> None:
            self.renderer = renderer
            core = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(30,))
            core.start()
            try:
                end = time.monotonic() + wait_s
                while not seen["loads"] and time.monotonic() < end:
                    time.sleep(0.02)
            finally:
                core.kill()
                core.join()
            seen["ready"] = time.monotonic()

    class FakeLLM:
        def __init__(self, **kwargs: Any) -> None:
            seen["starter"] = threading.get_ident()
            self.llm_engine = LLMEngine()

    return FakeLLM


def _start_fake(monkeypatch: pytest.MonkeyPatch, llm: type, **kwargs: Any) -> None:
    monkeypatch.setattr(engine_handle, "import_vllm", lambda: types.SimpleNamespace(LLM=llm))
    monkeypatch.setattr(engine_handle, "use_private_rpc_dir", lambda: None)
    monkeypatch.setattr(engine_handle, "use_engine_log", lambda: None)
    monkeypatch.setattr(engine_handle, "use_frontend_threads", lambda engines_on_host=1: None)
    engine.start({"model": "m"}, **kwargs)


@pytest.mark.alone
def test_vllms_processor_is_loaded_while_its_engine_core_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM 0.26's frontend loads the model's processor on its first multimodal request, once
    the engine is ready and the GPU waits for it; mmrun has it loaded while the engine core
    starts, in another thread, before its own warm-up work, and says how long it took."""
    seen: dict[str, Any] = {"loads": []}
    renderer = types.SimpleNamespace(mm_processor=types.SimpleNamespace(info=_Info(seen["loads"])))
    timings: dict[str, float] = {}
    warmed: list[float] = []
    _start_fake(
        monkeypatch,
        _starting_vllm(renderer, seen),
        warm_up=lambda: warmed.append(time.monotonic()),
        timings=timings,
    )
    assert len(seen["loads"]) == 1
    thread, when = seen["loads"][0]
    assert thread != seen["starter"]
    assert when < seen["ready"]  # during the start, not after it
    assert warmed and warmed[0] >= when
    assert timings["frontend_warm_s"] >= 0


def test_a_vllm_that_warms_its_own_frontend_is_left_to_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vLLM 0.32 loads the processor in a thread of its own while its engine core starts
    (``start_mm_warmup_in_background``): mmrun does not load it a second time meanwhile."""
    seen: dict[str, Any] = {"loads": []}

    class SelfWarming:
        mm_processor = types.SimpleNamespace(info=_Info(seen["loads"]))

        def start_mm_warmup_in_background(self) -> None:
            raise AssertionError("vLLM's own call, not mmrun's")

    timings: dict[str, float] = {}
    warmed: list[float] = []
    llm = _starting_vllm(SelfWarming(), seen, wait_s=1)
    _start_fake(monkeypatch, llm, warm_up=lambda: warmed.append(1.0), timings=timings)
    assert seen["loads"] == []
    assert "frontend_warm_s" not in timings
    assert warmed  # mmrun's own warm-up still ran


def test_the_renderer_is_found_only_in_a_starting_engine() -> None:
    """A thread that is not inside vLLM's ``LLMEngine.__init__`` has no renderer to give."""
    from mmrun.engine.processes import warm_vllm_frontend
    from mmrun.vllm_internals import starting_renderer

    assert starting_renderer(threading.get_ident()) is None
    assert warm_vllm_frontend(threading.get_ident()) is None
    assert starting_renderer(-1) is None  # no such thread


# vLLM's internals on a vLLM whose objects lack what mmrun reads: nothing raises, each answer
# means "nothing here", and one warning per missing piece says what mmrun goes without.


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[Any]:
    from mmrun import vllm_internals

    monkeypatch.setattr(vllm_internals, "_noted", set())
    caplog.set_level(logging.WARNING, logger=vllm_internals.__name__)

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == vllm_internals.__name__]

    yield said


@contextlib.contextmanager
def _in_constructor(engine: type) -> Iterator[int]:
    """The id of a thread inside ``engine.__init__`` (which waits until it is released)."""
    release = threading.Event()
    inside = threading.Event()

    def construct() -> None:
        engine(inside, release)

    thread = threading.Thread(target=construct, daemon=True)
    thread.start()
    assert inside.wait(10)
    try:
        yield thread.ident or 0
    finally:
        release.set()
        thread.join(10)


def test_a_starting_engine_without_a_renderer_is_noted_once(notes: Any) -> None:
    from mmrun.engine.processes import warm_vllm_frontend
    from mmrun.vllm_internals import starting_renderer

    class LLMEngine:  # as vLLM's, without the renderer attribute
        def __init__(self, inside: threading.Event, release: threading.Event) -> None:
            inside.set()
            release.wait(10)

    with _in_constructor(LLMEngine) as starter:
        assert starting_renderer(starter) is None
        assert warm_vllm_frontend(starter) is None
    assert len(notes()) == 1
    assert "LLMEngine.renderer" in notes()[0] and "checked on vLLM 0.26" in notes()[0]


def test_a_processor_without_its_loader_is_noted(notes: Any) -> None:
    from mmrun.vllm_internals import frontend_processor_loader

    renderer = types.SimpleNamespace(mm_processor=types.SimpleNamespace())  # no ``info``

    class LLMEngine:
        def __init__(self, inside: threading.Event, release: threading.Event) -> None:
            self.renderer = renderer
            inside.set()
            release.wait(10)

    with _in_constructor(LLMEngine) as starter:
        assert frontend_processor_loader(starter) is None
        renderer.mm_processor = None  # a model without media: nothing to load, nothing said
        assert frontend_processor_loader(starter) is None
    assert [n for n in notes() if "get_hf_processor" in n] == notes() and len(notes()) == 1


def test_an_engine_core_client_of_another_shape_is_noted(notes: Any) -> None:
    from mmrun import vllm_internals

    in_process = types.SimpleNamespace()  # vLLM's InprocClient: nothing to watch, nothing said
    assert vllm_internals.engine_core_processes(in_process) == []
    assert vllm_internals.output_queue(in_process) is None
    assert notes() == []
    elsewhere = types.SimpleNamespace(resources=types.SimpleNamespace(engine_manager=None))
    assert vllm_internals.engine_core_processes(elsewhere) == []
    assert notes() == []
    unknown = types.SimpleNamespace(resources=types.SimpleNamespace())
    assert vllm_internals.engine_core_processes(unknown) == []
    assert vllm_internals.output_queue(unknown) is None
    assert vllm_internals.engine_core(types.SimpleNamespace(llm_engine=object())) is None
    said = notes()
    assert len(said) == 3, said
    assert any("engine_manager.processes" in n for n in said)
    assert any("outputs_queue" in n for n in said)
    assert any("LLMEngine.engine_core" in n for n in said)


def test_an_llm_without_enqueue_runs_in_batched_calls_and_stops(notes: Any) -> None:
    """A vLLM whose ``LLM`` has only ``generate``: requests go in one call, and the engine
    stops without the engine core's processes to kill."""

    class OldLLM:
        def generate(self, prompts: list[Any], **kwargs: Any) -> list[Any]:
            return [
                types.SimpleNamespace(
                    prompt_token_ids=[1, 2],
                    outputs=[types.SimpleNamespace(text="a", token_ids=[3], finish_reason="stop")],
                )
                for _ in prompts
            ]

    handle = engine.Engine(OldLLM())
    first = handle.submit({"prompt": "x"}, None, None, chat=False, template=None)
    assert not handle.has_output()
    [(request_id, done)] = handle.poll()
    assert request_id == first and getattr(done, "text", None) == "a"
    handle.close()
    assert len(notes()) == 1 and "LLM.enqueue" in notes()[0]


def test_the_request_ids_enqueue_answers_with() -> None:
    from mmrun.vllm_internals import output_request_id

    assert output_request_id("12-1f3a9c0e") == "12"  # vLLM 0.32: internal id
    assert output_request_id("12") == "12"
    assert output_request_id("my-own-id") == "my-own-id"


def test_engine_dead_error_stands_in_where_vllm_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from mmrun import vllm_internals

    monkeypatch.delitem(sys.modules, "vllm.v1.engine.exceptions", raising=False)
    assert isinstance(vllm_internals.engine_dead_error(), vllm_internals.EngineDeadErrorStandIn)
    monkeypatch.setitem(sys.modules, "vllm.v1.engine.exceptions", types.SimpleNamespace())
    assert isinstance(vllm_internals.engine_dead_error(), vllm_internals.EngineDeadErrorStandIn)

    class EngineDeadError(Exception):
        pass

    exceptions = types.SimpleNamespace(EngineDeadError=EngineDeadError)
    monkeypatch.setitem(sys.modules, "vllm.v1.engine.exceptions", exceptions)
    assert isinstance(vllm_internals.engine_dead_error(), EngineDeadError)


def test_a_model_registry_of_another_shape_is_noted(tmp_path: Path, notes: Any) -> None:
    from mmrun.vllm_internals import REGISTRY_FILE, model_registry

    assert model_registry(tmp_path).architectures == frozenset()  # no file
    registry = tmp_path / REGISTRY_FILE
    registry.parent.mkdir(parents=True)
    registry.write_text("MODELS = {'LlavaForConditionalGeneration': ('llava', 'Llava')}\n")
    assert model_registry(tmp_path).architectures == frozenset()  # no _VLLM_MODELS
    assert len(notes()) == 1 and "_VLLM_MODELS" in notes()[0]
    registry.write_text(
        "_TEXT = {'LlamaForCausalLM': ('llama', 'Llama')}\n"
        "_VLLM_MODELS = {**_TEXT, 'LlavaForConditionalGeneration': ('llava', 'Llava')}\n"
        "_PREVIOUSLY_SUPPORTED_MODELS = {'TarsierForConditionalGeneration': '0.24.0'}\n"
    )
    found = model_registry(tmp_path)
    assert found.architectures == {"LlamaForCausalLM", "LlavaForConditionalGeneration"}
    assert found.removed == {"TarsierForConditionalGeneration": "0.24.0"}


def _let_handlers_run() -> list[int]:
    """Bytecode for Python to run a pending signal's handler in (at its next check)."""
    work = []
    for i in range(10_000):
        work.append(i)
    time.sleep(0.01)
    return work


def test_ctrl_c_during_vllms_import_is_raised_once_the_import_ends() -> None:
    """A KeyboardInterrupt inside a C extension's initialisation (numpy's, under vLLM's
    import) can be swallowed and leave the module half-made: held, it is raised after."""
    from mmrun.engine.processes import interrupts_held

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    for signum in (signal.SIGINT, signal.SIGTERM):
        finished = False
        with pytest.raises(KeyboardInterrupt), interrupts_held():
            os.kill(os.getpid(), signum)
            _let_handlers_run()
            finished = True
        assert finished
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    # An import that fails after the interrupt (a half-made module) ends as the interrupt.
    with pytest.raises(KeyboardInterrupt) as raised, interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        _let_handlers_run()
        raise AttributeError("module 'numpy' has no attribute 'iterable'")
    assert isinstance(raised.value.__cause__, AttributeError)
    # Without an interrupt, the block's own error is the error.
    with pytest.raises(ImportError), interrupts_held():
        raise ImportError("no vllm")


def test_a_second_ctrl_c_during_vllms_import_is_not_held() -> None:
    from mmrun.engine.processes import interrupts_held

    reached = False
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        _let_handlers_run()
        os.kill(os.getpid(), signal.SIGINT)
        _let_handlers_run()
        reached = True
    assert not reached
