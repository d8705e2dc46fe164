"""The only module that imports vLLM (inside functions): start the engine, generate, chat."""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from mmrun import engine_log
from mmrun.errors import EngineError, MissingDependencyError, UsageError

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


@dataclass(frozen=True)
class Completion:
    """One prompt's result, from vLLM's own counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


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
    if _MEMORY_SHARE.search(text):
        return EngineError(
            f"not enough free memory for the engine: {first[:300]}",
            hint="lower --engine-arg gpu_memory_utilization=... (on vLLM's CPU backend: the "
            "share of RAM; or set VLLM_CPU_KVCACHE_SPACE=<GiB>), or free the memory other "
            "processes hold",
        )
    if _OOM_PATTERNS.search(text):
        return EngineError(
            f"the engine ran out of memory: {first[:300]}",
            hint="lower --engine-arg max_model_len=... or max_num_seqs=..., raise -tp, "
            "or free the memory other processes hold",
        )
    return EngineError(f"vLLM failed: {first[:300]}", hint="rerun with -v to see vLLM's log")


# vLLM's check, at start, that the share of memory it was told to take is free (CUDA:
# vllm/v1/worker/utils.py; CPU: cpu_worker.py).
_MEMORY_SHARE = re.compile(r"less than desired (?:GPU|CPU) memory utilization", re.IGNORECASE)


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
    """Make Ctrl-C stop vLLM for sure while it starts or generates; yields the "interrupted"
    flag.

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


def _use_engine_log() -> None:
    """Where the engine's processes also write their log (see engine_log), when vLLM's log
    stream is mmrun's."""
    if os.environ.get("VLLM_LOGGING_STREAM") != engine_log.STREAM_SPEC:
        return
    path = os.environ.get(engine_log.ENV)
    if path is None or path not in _temporary:
        handle, path = tempfile.mkstemp(prefix="mmrun-engine-", suffix=".log")
        os.close(handle)
        _remember(path)
        os.environ[engine_log.ENV] = path
    with contextlib.suppress(OSError):  # a second engine in this process: its part only
        _log_start[0] = os.path.getsize(path)


_log_start = [0]  # where the current engine's part of the log begins


def start(engine_args: Mapping[str, Any], abort: threading.Event | None = None) -> Any:
    """Create ``vllm.LLM`` from the composed engine arguments. Setting ``abort`` while it
    starts (e.g. a download failed meanwhile) stops the start and raises StartAborted."""
    aborted = abort.is_set if abort is not None else lambda: False
    if aborted():
        raise StartAborted
    _use_private_rpc_dir()
    _use_engine_log()
    vllm = import_vllm()  # seconds, and not interrupted by ``abort``: checked again after it
    if aborted():
        raise StartAborted
    try:
        with interruptible(abort) as interrupted:
            llm = _construct(vllm, engine_args)
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
                f"vLLM rejected the engine arguments: {_reason(message, exc)[:300]}",
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


def _completions(outputs: Sequence[Any]) -> list[Completion]:
    results = []
    for output in outputs:
        best = output.outputs[0]
        results.append(
            Completion(
                text=best.text,
                prompt_tokens=len(output.prompt_token_ids or []),
                completion_tokens=len(best.token_ids),
                finish_reason=best.finish_reason,
            )
        )
    return results


def generate(
    llm: Any, inputs: Sequence[Mapping[str, Any]], params: Any, lora: Any | None
) -> list[Completion]:
    """All prompts in one ``LLM.generate`` call."""
    try:
        with interruptible():
            outputs = llm.generate(
                list(inputs), sampling_params=params, lora_request=lora, use_tqdm=False
            )
    except Exception as exc:
        raise _engine_failure(exc) from exc
    return _completions(outputs)


def chat(
    llm: Any,
    conversations: Sequence[Sequence[Mapping[str, Any]]],
    params: Any,
    lora: Any | None,
    chat_template: str | None,
) -> list[Completion]:
    """All conversations in one ``LLM.chat`` call."""
    try:
        with interruptible():
            outputs = llm.chat(
                [list(c) for c in conversations],
                sampling_params=params,
                lora_request=lora,
                chat_template=chat_template,
                use_tqdm=False,
            )
    except Exception as exc:
        raise _engine_failure(exc) from exc
    return _completions(outputs)


def shutdown(llm: Any, *, now: bool = False) -> None:
    """Stop the engine's processes now, not at interpreter exit.

    vLLM's own stop sends SIGTERM and waits for the engine core to tear down its workers:
    about 4.5 s on the CPU engine (measured), for nothing once the results are in. With
    ``now``, the engine's processes are killed first, and vLLM's stop then only closes its
    sockets (0.05 s)."""
    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if now:
        # The engine core processes of this LLM (vLLM's CoreEngineProcManager); an engine
        # run in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0) has none.
        manager = getattr(getattr(core, "resources", None), "engine_manager", None)
        processes = getattr(manager, "processes", None)
        if isinstance(processes, list):
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
