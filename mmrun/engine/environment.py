"""What the engine's processes inherit from this one: the environment for vLLM's logs and
warnings, a private folder for its sockets, the log file they all write (see
mmrun.engine_log), standard output and error pointed away from the results, a frozen heap,
and torch's threads carried safely across vLLM's fork."""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from mmrun import engine_log

_QUIET_RESOURCE_TRACKER = "ignore::UserWarning:multiprocessing.resource_tracker"

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


def use_private_rpc_dir() -> None:
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
    progress bars) goes there too (see engine_output)."""
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


def engine_log_part() -> tuple[str, int] | None:
    """The engine log this process set up, and where the current engine's part begins."""
    path = os.environ.get(engine_log.ENV)
    if not path or path not in _temporary:
        return None
    return path, _log_start[0]


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """This process's objects out of the garbage collector's reach while vLLM starts
    (``gc.freeze``, after one collection), back in it afterwards (``gc.unfreeze``).

    vLLM forks its engine core from this process on a GPU. A forked child walks every object
    it inherited in each full collection, and its start (loading the compile cache, building
    the model) is one allocation-heavy Python thread. On an H200 (3 pairs, see
    docs/performance.md): the collector took 0.45 s of the engine core's compile-cache
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
        use_threads(threads)


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
        use_threads(threads)


def use_threads(threads: int) -> None:
    import torch

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


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


def is_quiet() -> bool:
    """Whether configure_environment was told to keep the engine's output back."""
    return _quiet


@contextmanager
def _redirect(fd: int, target: int) -> Iterator[None]:
    """Point file descriptor ``fd`` at ``target`` (another descriptor) until the block ends."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(fd)
    try:
        os.dup2(target, fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(saved, fd)
        os.close(saved)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while vLLM runs, so that nothing it or its worker
    processes print can mix into the results that mmrun prints on stdout afterwards."""
    with _redirect(1, 2):
        yield


@contextmanager
def engine_output(quiet: bool, verbose: bool = False) -> Iterator[TextIO]:
    """Where what vLLM, torch and transformers print goes while a run is planned and executed:
    with ``-v`` to stderr; else to the engine's log file (mmrun.engine_log), which the engine's
    processes inherit as their stdout and stderr when vLLM starts them: a traceback in a
    worker, an interrupted child, the progress bars of a CUDA graph capture or Ray's logs are
    kept there, and mmrun reads the reason for a failure back out of it. mmrun's own lines
    (progress, notes) still reach the terminal: they are written to ``terminal_stderr()``.
    ``quiet`` changes nothing here (mmrun's --quiet prints no notes of its own). Yields the
    stream that results go to meanwhile (standard output as it was before: a batch prints
    each result as it is done). A failure ends as mmrun's one-line error, printed by the
    error boundary once the descriptors are restored."""
    results = _results_stream()
    try:
        if verbose:
            with stdout_to_stderr():
                yield results
            return
        path = use_engine_log()
        target = os.open(path or os.devnull, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        sys.stderr.flush()
        saved = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
        _saved_stderr.append(saved)
        try:
            with _redirect(1, target), _redirect(2, target):
                yield results
        finally:
            _saved_stderr.pop()
            saved.close()
            os.close(target)
    finally:
        results.flush()
        if results is not sys.stdout:
            results.close()


_saved_stderr: list[TextIO] = []  # the terminal's stderr while engine_output points fd 2 away


def terminal_stderr() -> TextIO:
    """The stream for mmrun's own lines on stderr: the process's stderr, or, while
    engine_output sends the engine's output to its log, the stderr that was there before."""
    return _saved_stderr[-1] if _saved_stderr else sys.stderr


def _results_stream() -> TextIO:
    """A stream on the standard output of now, untouched by the redirections that follow; the
    standard output object itself where it is no file descriptor (a test's capture)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.stdout
    sys.stdout.flush()
    return os.fdopen(os.dup(fd), "w", buffering=1, encoding="utf-8", errors="replace")
