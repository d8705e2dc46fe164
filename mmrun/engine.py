"""The only module that imports vLLM (inside functions): start the engine, generate, chat."""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import multiprocessing
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import Any

from mmrun import engine_log
from mmrun.errors import EngineError, MissingDependencyError, UsageError
from mmrun.request import Prompt
from mmrun.results import Completion

# vLLM's and torch's own wording for "the model, its KV cache or a batch does not fit"
# (vllm/v1/core/kv_cache_utils.py, vllm/v1/worker/utils.py and cpu_worker.py, torch's
# OutOfMemoryError). Specific phrases: a bare "KV cache" also matches configuration errors.
_OOM_PATTERNS = re.compile(
    r"out of memory|OutOfMemory|\bMemoryError\b|No available memory for the cache blocks|"
    r"larger than the available KV cache memory|"
    r"larger than the maximum number of tokens that can be stored in KV cache|"
    r"less than desired (?:GPU|CPU) memory utilization|less than requested memory for kv|"
    r"Insufficient memory",
    re.IGNORECASE,
)


_QUIET_RESOURCE_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise MissingDependencyError(
            f"vLLM is not installed or cannot be imported ({exc})",
            hint="run `make install` (CPU) or `pip install vllm` (GPU)",
        ) from exc
    return vllm


def _engine_failure(exc: BaseException) -> EngineError:
    """mmrun's error for a failed start or generate call: the reason vLLM logged in the
    process that failed (see engine_log) where there is one, else the exception here."""
    text = f"{type(exc).__name__}: {exc}".strip()
    text = _logged_root_cause() or text
    first = next((line for line in text.splitlines() if line.strip()), text)
    if _KV_CACHE_SHARE.search(text):
        return EngineError(
            f"not enough free memory for the KV cache asked for: {first}",
            hint="lower VLLM_CPU_KVCACHE_SPACE or --engine-arg kv_cache_memory_bytes=..., or set "
            "neither: mmrun then sizes the cache for the run",
        )
    if _MEMORY_SHARE.search(text):
        return EngineError(
            f"not enough free memory for the engine: {first}",
            hint="lower --engine-arg gpu_memory_utilization=... (on vLLM's CPU backend: the "
            "share of RAM; or set VLLM_CPU_KVCACHE_SPACE=<GiB>), or free the memory other "
            "processes hold",
        )
    if _OOM_PATTERNS.search(text):
        return EngineError(
            f"the engine ran out of memory: {first}",
            hint="lower --engine-arg max_model_len=... or max_num_seqs=..., raise -tp, "
            "or free the memory other processes hold",
        )
    return EngineError(f"vLLM failed: {first}", hint="rerun with -v to see vLLM's log")


# vLLM's check, at start, that the share of memory it was told to take is free (CUDA:
# vllm/v1/worker/utils.py; CPU: cpu_worker.py).
_MEMORY_SHARE = re.compile(r"less than desired (?:GPU|CPU) memory utilization", re.IGNORECASE)
# vLLM's CPU worker, when the KV cache it was told to take (VLLM_CPU_KVCACHE_SPACE,
# kv_cache_memory_bytes) is more than is free.
_KV_CACHE_SHARE = re.compile(r"less than requested memory for kv", re.IGNORECASE)


def _logged_root_cause() -> str | None:
    """The reason in what the engine's processes logged since the last start."""
    path = os.environ.get(engine_log.ENV)
    if not path or path not in _temporary:  # only the log this process set up
        return None
    # A failing engine process may tell this one before it logs why and exits (vLLM 0.26 on
    # CUDA did): give its processes a moment to end.
    deadline = time.monotonic() + 3.0
    for child in multiprocessing.active_children():
        child.join(max(0.0, deadline - time.monotonic()))
    try:
        with open(path, "rb") as log:
            log.seek(_log_start[0])
            return engine_log.root_cause(log.read().decode("utf-8", errors="replace"))
    except OSError:
        return None


class StartAborted(Exception):
    """``start`` was asked to stop (its ``abort`` event was set) and did."""


@contextlib.contextmanager
def interruptible(abort: threading.Event | None = None) -> Iterator[threading.Event]:
    """Make Ctrl-C (or SIGTERM) stop vLLM for sure while it starts or generates; yields the
    "interrupted" flag.

    vLLM swallows KeyboardInterrupt in part of its start-up (its ``zmq_socket_ctx`` catches it)
    and then waits up to 10 minutes for an engine that was told to stop, or finishes starting
    as if nothing had happened. So once interrupted, a watchdog interrupts the main thread
    again every second until the block is left; from the second time on, the handler also
    kills the engine processes (see _kill_engine_processes). Whatever vLLM raises after an
    interrupt ends as the interrupt.

    Setting ``abort`` (from any thread) kills the engine's processes, at once and any started
    later, until the block is left: vLLM then fails its start, and no exception is raised into
    the main thread at an arbitrary point (one landing inside an import can leave Python's
    import lock held, and another thread waiting on it forever).
    """
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():  # handlers: main thread only
        yield interrupted
        return
    left = threading.Event()
    lock = threading.Lock()
    main = threading.main_thread().ident

    def keep_interrupting() -> None:
        while not left.wait(1.0):
            with lock:
                if not left.is_set() and main is not None:
                    signal.pthread_kill(main, signal.SIGINT)

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        if interrupted.is_set():  # the interrupt did not get through: stop the engine itself
            _kill_engine_processes()
        else:
            interrupted.set()
            threading.Thread(target=keep_interrupting, name="mmrun-interrupt", daemon=True).start()
        raise KeyboardInterrupt

    def watch_abort(event: threading.Event) -> None:
        while not left.wait(0.05):
            if event.is_set():
                with lock:
                    if not left.is_set():
                        _kill_engine_processes()

    previous = signal.signal(signal.SIGINT, on_interrupt)
    previous_term = signal.signal(signal.SIGTERM, on_interrupt)
    if abort is not None:
        threading.Thread(target=watch_abort, args=(abort,), name="mmrun-abort", daemon=True).start()
    try:
        yield interrupted
    except Exception as exc:
        if interrupted.is_set():
            raise KeyboardInterrupt from exc
        raise
    finally:
        try:
            with lock:
                left.set()
        finally:
            signal.signal(
                signal.SIGINT, previous if previous is not None else signal.default_int_handler
            )
            signal.signal(
                signal.SIGTERM, previous_term if previous_term is not None else signal.SIG_DFL
            )


def _kill_engine_processes(processes: Sequence[Any] | None = None) -> None:
    """SIGKILL the engine's processes (by default all the processes this one started: vLLM's
    engine core) and their children (its workers). SIGTERM is not enough: an engine core that
    is still starting defers it until it has loaded the model, and workers whose engine core
    is gone run on until they notice."""
    for child in multiprocessing.active_children() if processes is None else processes:
        descendants = _descendants(child.pid)
        with contextlib.suppress(Exception):  # already gone
            child.kill()
        for process in descendants:
            with contextlib.suppress(Exception):  # already gone
                process.kill()


def _descendants(pid: int | None) -> list[Any]:
    try:
        import psutil  # a dependency of vLLM, not of mmrun
    except ImportError:
        return []
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


RPC_DIR_ENV = "VLLM_RPC_BASE_PATH"
_SOCKET_PATH_MAX = 107  # a Unix socket's path, in bytes (sockaddr_un.sun_path less its NUL)
_temporary: list[str] = []  # files and folders of this process, removed when it ends


def _remember(path: str) -> None:
    if not _temporary:
        atexit.register(remove_temporary_files)
    _temporary.append(path)


def remove_temporary_files() -> None:
    while _temporary:
        path = _temporary.pop()
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _use_private_rpc_dir() -> None:
    """vLLM names its ZMQ sockets ``ipc://<temp folder>/<uuid>`` and leaves the socket files
    behind (5 per run, measured in /tmp with vLLM 0.32). Unless the user chose the folder,
    this process's engines put theirs in a folder of its own, removed when the process ends."""
    if os.environ.get(RPC_DIR_ENV) or any(os.path.isdir(p) for p in _temporary):
        return
    folder = tempfile.mkdtemp(prefix="mmrun-")
    if len(folder) + 1 + 36 > _SOCKET_PATH_MAX:  # "<folder>/<uuid4>" must fit: vLLM's default
        os.rmdir(folder)
        return
    _remember(folder)
    os.environ[RPC_DIR_ENV] = folder


def use_engine_log() -> str | None:
    """Where the engine's processes also write their log (see engine_log), when vLLM's log
    stream is mmrun's: the file's path. Without -v, what they print besides (tracebacks,
    progress bars) goes there too (see mmrun.cli._output.engine_output)."""
    if os.environ.get("VLLM_LOGGING_STREAM") != engine_log.STREAM_SPEC:
        return None
    path = os.environ.get(engine_log.ENV)
    if path is None or path not in _temporary:
        handle, path = tempfile.mkstemp(prefix="mmrun-engine-", suffix=".log")
        os.close(handle)
        _remember(path)
        os.environ[engine_log.ENV] = path
    with contextlib.suppress(OSError):  # a second engine in this process: its part only
        _log_start[0] = os.path.getsize(path)
    return path


_log_start = [0]  # where the current engine's part of the log begins


def start(
    engine_args: Mapping[str, Any],
    abort: threading.Event | None = None,
    engines_on_host: int = 1,
    warm_up: Callable[[], None] | None = None,
) -> Any:
    """Create ``vllm.LLM`` from the composed engine arguments. Setting ``abort`` while it
    starts (e.g. a download failed meanwhile) stops the start and raises StartAborted.
    ``engines_on_host``: how many engines share this host's cores (``-dp N``). ``warm_up``:
    work that the first request would otherwise wait for (mmrun's first prompt, which loads
    the model's processor or tokenizer), done in a thread during the start (see ``_warm``)."""
    aborted = abort.is_set if abort is not None else lambda: False
    if aborted():
        raise StartAborted
    _use_private_rpc_dir()
    use_engine_log()
    threads = use_frontend_threads(engines_on_host) or _users_gpu_threads()
    vllm = import_vllm()  # seconds, and not interrupted by ``abort``: checked again after it
    if aborted():
        raise StartAborted
    _size_the_cpu_kv_cache(engine_args)
    constructed, failed = threading.Event(), threading.Event()
    warm = None
    if warm_up is not None:
        warm = threading.Thread(
            target=_warm, args=(warm_up, constructed, failed), name="mmrun-warm", daemon=True
        )
    try:
        with interruptible(abort) as interrupted:
            if warm is not None:
                warm.start()
            try:
                with heap_frozen(), one_thread_until_forked(threads):
                    llm = _construct(vllm, engine_args)
            except BaseException:
                failed.set()  # nothing to warm up for
                raise
            finally:
                constructed.set()
            if warm is not None:
                warm.join(WARM_JOIN_S)
            if interrupted.is_set():  # vLLM swallowed the interrupt and finished starting anyway
                shutdown(llm, now=True)
                raise KeyboardInterrupt
    except Exception:
        if aborted():  # vLLM's error is only the consequence
            raise StartAborted from None
        raise
    if aborted():  # an engine without processes of its own (it runs in this one) started
        shutdown(llm, now=True)
        raise StartAborted
    return llm


def _size_the_cpu_kv_cache(engine_args: Mapping[str, Any]) -> None:
    """On vLLM's CPU build: VLLM_CPU_KVCACHE_SPACE for this run, unless the user set it (see
    mmrun.kv_cache); said on stderr with -v."""
    from mmrun import kv_cache
    from mmrun.support import vllm_device

    if vllm_device() != "cpu":
        return
    choice = kv_cache.size_for_the_run(engine_args)
    if choice is not None and not _quiet:
        print(
            f"mmrun: {kv_cache.ENV}={choice.gib} (GiB) for this run: {choice.reason}",
            file=sys.stderr,
            flush=True,
        )


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """This process's objects out of the garbage collector's reach while vLLM starts
    (``gc.freeze``, after one collection), back in it afterwards (``gc.unfreeze``).

    vLLM forks its engine core from this process on a GPU. A forked child walks every object
    it inherited in each full collection, and its start (loading the compile cache, building
    the model) is one allocation-heavy Python thread. On the H200 (3 pairs, seventh session
    in docs/performance.md): the collector took 0.45 s of the engine core's compile-cache
    load with about 365,000 objects frozen, against 0.64 s without; from vLLM's arguments to
    the result, 3.1, 1.0 and -0.1 s sooner. The child keeps its copy frozen; this process
    gets its objects back once the engine has started, so nothing stays uncollectable. It
    costs one full collection (0.2 s there)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def one_thread_until_forked(threads: int | None) -> Iterator[None]:
    """vLLM's start with one torch thread in this process; a process forked meanwhile (vLLM's
    engine core) gets ``threads`` back at once, and this process once vLLM has started.

    torch's CPU threads are GNU OpenMP's, which does not survive a fork: once a process has
    run a parallel region on more than one thread, a child forked from it hangs in its own
    first one. vLLM builds the model's processor in this process with OMP_NUM_THREADS torch
    threads, then forks its engine core, which runs that processor on dummy inputs before it
    reports ready. With mmrun's frontend threads, Granite Speech's engine core hung for good
    on the H200 in that step (pad_sequence on a 500-second dummy recording; vLLM 0.26,
    docs/performance.md). Raw vLLM does not hang: with OMP_NUM_THREADS unset it runs both
    steps on one thread. mmrun runs no torch work before this. So while vLLM starts,
    OMP_NUM_THREADS is 1 here (vLLM reads it) and torch's threads are 1. A fork handler puts
    ``threads`` back in the child before it runs anything (no team existed to inherit), and
    this process gets them back after the start, for the requests' processing. Nothing to do
    for None or 1 (vLLM's CPU build), nor when vLLM is told to spawn its processes
    (VLLM_WORKER_MULTIPROC_METHOD=spawn): a spawned process inherits no OpenMP state, only
    the environment, which then keeps ``threads`` for it."""
    if threads is None or threads <= 1 or os.environ.get(_MULTIPROC_METHOD) == "spawn":
        yield
        return
    import torch

    _register_fork_handler()
    _threads_for_children[0] = threads
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    try:
        yield
    finally:
        _threads_for_children[0] = None
        _use_threads(threads)


_MULTIPROC_METHOD = "VLLM_WORKER_MULTIPROC_METHOD"  # how vLLM starts its processes
# The torch threads a process forked from this one gets; None: what it inherits.
_threads_for_children: list[int | None] = [None]
_fork_handler_registered = [False]


def _register_fork_handler() -> None:
    if not _fork_handler_registered[0]:
        os.register_at_fork(after_in_child=_threads_in_child)
        _fork_handler_registered[0] = True


def _threads_in_child() -> None:
    threads = _threads_for_children[0]
    if threads is not None:
        _threads_for_children[0] = None  # its own children inherit
        _use_threads(threads)


def _use_threads(threads: int) -> None:
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


# How long a started engine waits for the warm-up to end (it only does what the first request
# would do anyway, about a second).
WARM_JOIN_S = 30.0


def _warm(work: Callable[[], None], constructed: threading.Event, failed: threading.Event) -> None:
    """``work`` while the engine starts, and not while vLLM's frontend imports transformers:
    two threads importing it at once broke vLLM's start on the H200 ("cannot import name
    'PretrainedConfig' from 'transformers'", docs/performance.md). The frontend has built its
    config, tokenizer and processor objects by the time it starts its engine core process,
    then only waits for it (tens of seconds on a GPU), so the work waits for that process. An
    engine without processes of its own (VLLM_ENABLE_V1_MULTIPROCESSING=0) gives no such
    moment: the work then runs once ``vllm.LLM`` has returned, before the first request; not
    at all when it failed. A failure of the work is left for the real work to report."""
    while not constructed.wait(0.05):
        if _has_children():
            break
    if failed.is_set():
        return
    with contextlib.suppress(Exception):
        work()


def _has_children() -> bool:
    try:
        return bool(multiprocessing.active_children())
    except Exception:  # the main thread starting a process meanwhile
        return False


FRONTEND_THREADS_MAX = 8


def frontend_threads(cores: int, sharers: int) -> int:
    """One engine's share of ``cores`` split between ``sharers``: at least 1, at most
    FRONTEND_THREADS_MAX (what vLLM's request processing gains from, measured on the H200)."""
    return max(1, min(FRONTEND_THREADS_MAX, cores // max(1, sharers)))


def use_frontend_threads(engines_on_host: int = 1) -> int | None:
    """Size torch's threads for a GPU engine, before it starts: OMP_NUM_THREADS, which the
    engine's processes inherit, up to FRONTEND_THREADS_MAX, sharing the cores this process may
    use with the other engines on the host. Two measured effects on the H200 (see
    docs/performance.md): vLLM's frontend processes each request's images and audio with
    OMP_NUM_THREADS torch threads, 1 when unset, which bounded a batch's throughput; and an
    engine core left with torch's default (every core) kept the host's CPUs busy, so that two
    engines on one host ran no faster than one. Not on vLLM's CPU build (the engine uses the
    cores), and not when the user set OMP_NUM_THREADS. The number of threads set, or None."""
    from mmrun.support import vllm_device

    if os.environ.get("OMP_NUM_THREADS") or vllm_device() != "gpu":
        return None
    threads = frontend_threads(len(os.sched_getaffinity(0)), engines_on_host)
    # vLLM (0.26 to 0.32 at least) runs each request's multimodal processor inside
    # set_default_torch_num_threads(), which sets torch's threads to OMP_NUM_THREADS, or 1 when
    # it is unset, whatever torch was set to: the variable is what counts, here and in the
    # engine core's process, which inherits it.
    _use_threads(threads)
    return threads


def _users_gpu_threads() -> int | None:
    """The user's own OMP_NUM_THREADS on a GPU build, when it asks for more than one thread
    (mmrun keeps it, and still keeps vLLM's start from hanging on it: one_thread_until_forked)."""
    from mmrun.support import vllm_device

    try:
        threads = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return threads if threads > 1 and vllm_device() == "gpu" else None


def _construct(vllm: Any, engine_args: Mapping[str, Any]) -> Any:
    args = dict(engine_args)
    if _quiet:  # vLLM's "Loading safetensors checkpoint shards" bars, one per engine process
        args.setdefault("use_tqdm_on_load", False)
    try:
        return vllm.LLM(**args)
    except Exception as exc:
        message = str(exc).strip()
        if isinstance(exc, TypeError) and "argument" in message:
            raise UsageError(
                f"vLLM rejected an engine argument: {message}",
                hint="check --engine-arg names against `vllm serve --help`",
            ) from exc
        rejected = isinstance(exc, ValueError) or type(exc).__name__ == "ValidationError"
        if rejected and not _OOM_PATTERNS.search(message):
            raise UsageError(
                f"vLLM rejected the engine arguments: {_reason(message, exc)}",
                hint="check --engine-arg values and the model id",
            ) from exc
        raise _engine_failure(exc) from exc


def _reason(message: str, exc: BaseException) -> str:
    """The line that says why: pydantic's "1 validation error for VllmConfig" header names no
    reason, the line after it does ("Value error, <why> [type=...]")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return repr(exc)
    if re.match(r"\d+ validation errors? for ", lines[0]) and len(lines) > 1:
        detail = re.sub(r"^Value error, |\s*\[type=.*$", "", lines[1])
        return f"{lines[0]}: {detail}"
    return lines[0]


def sampling_params(
    *,
    temperature: float,
    max_tokens: int,
    stop_token_ids: Sequence[int],
    seed: int | None,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    vllm = import_vllm()
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    if stop_token_ids:
        kwargs["stop_token_ids"] = list(stop_token_ids)
    if seed is not None:
        kwargs["seed"] = seed
    kwargs.update(extra or {})
    try:
        return vllm.SamplingParams(**kwargs)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"invalid sampling parameters: {exc}") from exc


def lora_request(name: str, int_id: int, path: str) -> Any:
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, int_id, path)


def device_name() -> str:
    """The kind of device the installed vLLM runs on ("cuda", "cpu", ...)."""
    try:
        from vllm.platforms import current_platform

        return str(current_platform.device_type or "unknown")
    except Exception:  # an install too broken to tell: the selftest reports its own failure
        return "unknown"


def load_video(data: bytes, num_frames: int) -> Any:
    """A clip's frames and metadata, sampled by vLLM's own video loader (OpenCV, uniform)."""
    from vllm.multimodal.video import VIDEO_LOADER_REGISTRY

    loader = VIDEO_LOADER_REGISTRY.load("opencv")
    return loader.load_bytes(data, num_frames=num_frames)


# Shaping requests, as vLLM's own examples do in run_generate / run_chat.


def generate_input(prompt: Prompt, modality: str, media: Sequence[Any]) -> dict[str, Any]:
    """One ``LLM.generate`` prompt: the text (or token ids) and its media."""
    request: dict[str, Any] = (
        {"prompt": prompt.text}
        if prompt.text is not None
        else {"prompt_token_ids": list(prompt.token_ids or ())}
    )
    data = list(prompt.multi_modal_data) if prompt.multi_modal_data is not None else list(media)
    if data:
        request["multi_modal_data"] = {modality: data}
    return request


def chat_input(question: str, parts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One ``LLM.chat`` conversation: a user turn with the question, then the media parts."""
    return [{"role": "user", "content": [{"type": "text", "text": question}, *parts]}]


class RequestRejected(Exception):
    """vLLM refused one request (too many items, a prompt longer than the model takes, media
    its processor cannot use); the engine itself is fine."""


Finished = tuple[str, "Completion | str"]  # request id, and its completion or why it failed


class Engine:
    """A started ``vllm.LLM``: requests go in one at a time and come out as they finish.

    Use it inside ``interruptible()``. Each request is checked and prepared by vLLM when it is
    submitted, so one that vLLM
    refuses fails alone (``RequestRejected``) and the others go on; results come back per
    request, as soon as each is finished, from the engine's own loop (what ``LLM.generate``
    runs internally, without waiting for the whole batch). Only the thread that started it
    may use it.
    """

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self._streaming = hasattr(llm, "enqueue") and hasattr(llm, "llm_engine")
        self._pending: list[tuple[str, Any, Any, Any, str | None]] = []
        self._ids = 0
        self.in_flight = 0
        self._closed = threading.Event()
        if self._streaming:
            _watch_engine_core(llm, self._closed)

    def submit(
        self, request: Any, params: Any, lora: Any | None, *, chat: bool, template: str | None
    ) -> str:
        """Queue one request (a generate prompt, or a chat conversation); its request id."""
        if not self._streaming:  # an older vLLM: the request goes with the next batched call
            self._ids += 1
            request_id = f"w{self._ids}"
            self._pending.append((request_id, request, params, lora, template if chat else "-"))
            self.in_flight += 1
            return request_id
        try:
            if chat:
                ids = self.llm.enqueue_chat(
                    [request], params, use_tqdm=False, lora_request=lora, chat_template=template
                )
            else:
                ids = self.llm.enqueue([request], params, lora_request=lora, use_tqdm=False)
        except Exception as exc:
            if _engine_is_dead(exc):
                raise _engine_failure(exc) from exc
            raise RequestRejected(_one_line(exc)) from exc
        self.in_flight += 1
        return _external_id(str(ids[0]))

    def has_output(self) -> bool:
        """Whether results are waiting, so that ``poll`` would return at once. Only an engine
        core in processes of its own tells (its output queue); otherwise False."""
        if not self._streaming:
            return False
        queue = getattr(getattr(self.llm.llm_engine, "engine_core", None), "outputs_queue", None)
        try:
            return queue is not None and not queue.empty()
        except Exception:  # another vLLM layout
            return False

    def poll(self) -> list[Finished]:
        """The requests that finished since the last call; waits for at least one engine
        step. Only call it with requests in flight."""
        if not self._streaming:
            return self._run_pending()
        try:
            outputs = self.llm.llm_engine.step()
        except Exception as exc:
            raise _engine_failure(exc) from exc
        finished: list[Finished] = []
        for output in outputs:
            if not getattr(output, "finished", False):
                continue
            self.in_flight -= 1
            finished.append((str(output.request_id), _finished(output)))
        return finished

    def _run_pending(self) -> list[Finished]:
        """Older vLLM (no ``LLM.enqueue``): one ``generate`` or ``chat`` call for what was
        submitted; a call vLLM refuses is split in halves until the request at fault is alone."""
        batch, self._pending = self._pending, []
        self.in_flight -= len(batch)
        return self._call(batch)

    def _call(self, batch: list[tuple[str, Any, Any, Any, str | None]]) -> list[Finished]:
        if not batch:
            return []
        _, _, params, lora, template = batch[0]
        try:
            if template != "-":
                outputs = self.llm.chat(
                    [r for _, r, *_ in batch],
                    params,
                    use_tqdm=False,
                    lora_request=lora,
                    chat_template=template,
                )
            else:
                outputs = self.llm.generate(
                    [r for _, r, *_ in batch],
                    sampling_params=params,
                    lora_request=lora,
                    use_tqdm=False,
                )
        except Exception as exc:
            if _engine_is_dead(exc):
                raise _engine_failure(exc) from exc
            if len(batch) == 1:
                return [(batch[0][0], _one_line(exc))]
            half = len(batch) // 2
            return self._call(batch[:half]) + self._call(batch[half:])
        return [(rid, _finished(out)) for (rid, *_), out in zip(batch, outputs, strict=True)]

    def close(self) -> None:
        """Stop the engine now (the results are in)."""
        self._closed.set()
        shutdown(self.llm, now=True)


class EngineDeadErrorStandIn(Exception):
    """The engine core process died (where vLLM has no EngineDeadError of its own)."""

    def __init__(self) -> None:
        super().__init__("the engine core process died")


def _watch_engine_core(llm: Any, closed: threading.Event) -> None:
    """Wake ``poll`` when the engine core process dies.

    ``llm_engine.step()`` waits on the queue that vLLM's output thread fills. When the engine
    core process dies (the OOM killer, a crash), vLLM 0.32's monitor marks the engine dead and
    stops that thread without putting anything in the queue, so the wait never ends (seen:
    a ``-dp 2`` replica whose engine core was killed hung for good, holding its prompts). This
    thread waits on the engine core processes and then puts vLLM's own EngineDeadError in the
    queue, which ``step()`` raises. An engine run in this process has nothing to watch."""
    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    processes = _engine_core_processes(core)
    queue = getattr(core, "outputs_queue", None)
    if not processes or queue is None:
        return
    sentinels = [p.sentinel for p in processes]

    def watch() -> None:
        from multiprocessing.connection import wait

        wait(sentinels)
        if closed.is_set():
            return
        # vLLM's own error where this vLLM has it (already imported by the running engine);
        # any exception in the queue ends the wait.
        exceptions = sys.modules.get("vllm.v1.engine.exceptions")
        dead = getattr(exceptions, "EngineDeadError", None)
        error: Exception = dead() if dead is not None else EngineDeadErrorStandIn()
        with contextlib.suppress(Exception):
            queue.put_nowait(error)

    threading.Thread(target=watch, name="mmrun-engine-watch", daemon=True).start()


def _external_id(request_id: str) -> str:
    """The id a request's outputs carry. ``LLM.enqueue`` answers with vLLM's internal id, the
    counter's id and 8 random characters ("12-1f3a9c0e", vllm/v1/engine/input_processor.py
    assign_request_id); the outputs carry the counter's id alone."""
    head, sep, _ = request_id.partition("-")
    return head if sep and head.isdigit() else request_id


def _finished(output: Any) -> Completion | str:
    best = output.outputs[0]
    if best.finish_reason in ("abort", "error"):
        return f"vLLM ended the request ({best.finish_reason})"
    return Completion(
        text=best.text,
        prompt_tokens=len(output.prompt_token_ids or []),
        completion_tokens=len(best.token_ids),
        finish_reason=best.finish_reason,
    )


def _engine_is_dead(exc: BaseException) -> bool:
    """An error of the engine as a whole (its process died), not of one request."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"EngineDeadError", "EngineGenerateError"}) or bool(
        _OOM_PATTERNS.search(str(exc))
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first[:500]


def _engine_core_processes(core: Any) -> list[Any]:
    """The engine core processes of an LLM's engine client (vLLM's CoreEngineProcManager); an
    engine run in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0) has none."""
    manager = getattr(getattr(core, "resources", None), "engine_manager", None)
    processes = getattr(manager, "processes", None)
    return list(processes) if isinstance(processes, list) else []


def shutdown(llm: Any, *, now: bool = False) -> None:
    """Stop the engine's processes now, not at interpreter exit.

    vLLM's own stop sends SIGTERM and waits for the engine core to tear down its workers:
    about 4.5 s on the CPU engine (measured), for nothing once the results are in. With
    ``now``, the engine's processes are killed first, and vLLM's stop then only closes its
    sockets (0.05 s)."""
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if now:
        processes = _engine_core_processes(core)
        if processes:
            _kill_engine_processes(processes)
    for target in (core, engine):
        stop = getattr(target, "shutdown", None)
        if callable(stop):
            with contextlib.suppress(Exception):  # best effort during teardown
                stop()
            return


def configure_environment(verbose: bool) -> None:
    """Send vLLM's logs to stderr and keep them quiet unless asked for. Without ``verbose``,
    what torch, Triton and Python's warnings print, in this process and in the engine's, is
    kept back too: a run shows mmrun's lines and the results, and ``-v`` shows the rest."""
    global _quiet
    _quiet = not verbose
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "ERROR")
    # stderr, and the reason for a failed start back to this process (see engine_log)
    os.environ.setdefault("VLLM_LOGGING_STREAM", engine_log.STREAM_SPEC)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if verbose:
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10's "[W...] Warning: NUMA ..."
    os.environ.setdefault("TORCH_LOGS", "-all")  # torch's "No CUDA runtime is found, ..."
    # vLLM logs a few warnings while it is imported, before it has set up its log (Triton's
    # "doesn't include CPU backend"): Python prints those whatever VLLM_LOGGING_LEVEL says.
    # This handler takes them; vLLM's own set-up replaces it.
    vllm_logger = logging.getLogger("vllm")
    if not any(isinstance(h, logging.NullHandler) for h in vllm_logger.handlers):
        vllm_logger.addHandler(logging.NullHandler())
    current = os.environ.get("PYTHONWARNINGS")
    if current is None:
        # Python's warnings (vLLM's FutureWarnings, the resource tracker's notes on the
        # shared memory it cleans up after the engine): here and in the engine's processes.
        os.environ["PYTHONWARNINGS"] = "ignore"
        warnings.simplefilter("ignore")
    elif _QUIET_RESOURCE_TRACKER not in current:
        # The user's own filters, and the resource tracker's housekeeping kept out: work
        # that succeeds, and nothing the user can act on.
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [current, _QUIET_RESOURCE_TRACKER]))


_quiet = False  # set by configure_environment: no progress bars from the engine either
